"""HTTP GET over raw EFI TCP4 through ctypes: what a BITS user can write with nothing but ``efi``.

    raw_http_get.py PORT [PATH]

Fetches http://127.0.0.1:PORT/PATH and prints the response body to stdout; exit status 0 on a
200 answer. Written only from the UEFI specification and docs/bits-efi.md: it imports
neither bitsnet nor the simulator, defines every network structure itself on ``efi``'s base
types, and uses only the ``efi`` names that BITS has. It runs at the BITS prompt as it runs
under ``tools/efirun.py``, on current EDK2 and on the 2015 stack alike:

1. Find the NIC: the handle carrying both EFI_IP4_CONFIG2_PROTOCOL and the TCP4 service binding
   (LocateHandleBuffer, whose pool buffer we free); if there is none, ConnectController every
   handle with the Simple Network Protocol and look again (many boot paths leave NICs
   unconnected).
2. Bring up IPv4: if InterfaceInfo shows no address, set the policy to Dhcp (Static first if it
   already was Dhcp: EDK2 only restarts DHCP on a change) and poll InterfaceInfo -- sized with a
   first GetData, because the route table follows the structure -- until an address appears or
   the deadline passes. EDK2 signals no event when DHCP completes.
3. Create a TCP4 child and Configure it with the station address and mask from InterfaceInfo
   given explicitly (the 2015 stack fails UseDefaultAddress with EFI_ALREADY_STARTED), then add
   the interface's routes with Routes() (the 2015 stack's children do not inherit them;
   EFI_ACCESS_DENIED for a route that is already there is fine).
4. Connect, Transmit the request, Receive until EFI_CONNECTION_FIN -- returned by Receive itself
   when the peer has closed and nothing is buffered, or as a token status -- then Close
   gracefully and wait for it, Configure(NULL), DestroyChild, close every event.

Every token's event is a Type-0 event waited on with CheckEvent while calling the child's Poll
(EDK2 moves one frame per timer tick unless polled). Every wait has a deadline.
"""

from __future__ import print_function

import ctypes
import sys
import time
import uuid
from ctypes import POINTER, Structure, Union, byref, c_int, c_void_p

import efi
from efi import BOOLEAN, EFI_EVENT, EFI_HANDLE, EFI_STATUS, UINT8, UINT16, UINT32, UINTN

HOST = "127.0.0.1"
DHCP_TIMEOUT = 70.0  # EDK2's DHCP gives up after ~60 s of DISCOVER retransmits
CONNECT_TIMEOUT = 80.0  # EDK2's connect timer is 75 s; its token then completes with EFI_TIMEOUT
IO_TIMEOUT = 30.0  # per Transmit/Receive
CLOSE_TIMEOUT = 10.0  # a graceful close waits out TIME_WAIT (2 s in EDK2)
RECEIVE_SIZE = 65536  # one 64 KiB Receive at a time, as BITS does
POLL_STALL_US = 200  # Stall between idle polls: keeps the CPU cool without adding latency

# --- GUIDs (UEFI spec) ----------------------------------------------------------------------
EFI_IP4_CONFIG2_PROTOCOL_GUID = uuid.UUID("5b446ed1-e30b-4faa-871a-3654eca36080")
EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("00720665-67eb-4a99-baf7-d3c33a1c7cc9")
EFI_TCP4_PROTOCOL_GUID = uuid.UUID("65530bc7-a359-410f-b010-5aadc7ec2b62")
EFI_SIMPLE_NETWORK_PROTOCOL_GUID = uuid.UUID("a19832b9-ac25-11d3-9a2d-0090273fc14d")

ByProtocol = 2  # EFI_LOCATE_SEARCH_TYPE
Ip4Config2DataTypeInterfaceInfo = 0
Ip4Config2DataTypePolicy = 1
Ip4Config2PolicyStatic = 0
Ip4Config2PolicyDhcp = 1


# --- Structures (UEFI spec; addresses are byte arrays with alignment 1) -----------------------
class EFI_IPv4_ADDRESS(Structure):
    _fields_ = [("Addr", UINT8 * 4)]


class EFI_MAC_ADDRESS(Structure):
    _fields_ = [("Addr", UINT8 * 32)]


class EFI_IP4_ROUTE_TABLE(Structure):
    _fields_ = [("SubnetAddress", EFI_IPv4_ADDRESS), ("SubnetMask", EFI_IPv4_ADDRESS),
                ("GatewayAddress", EFI_IPv4_ADDRESS)]


class EFI_IP4_CONFIG2_INTERFACE_INFO(Structure):
    _fields_ = [
        ("Name", UINT16 * 32),  # CHAR16[EFI_IP4_CONFIG2_INTERFACE_INFO_NAME_SIZE]
        ("IfType", UINT8),
        ("HwAddressSize", UINT32),
        ("HwAddress", EFI_MAC_ADDRESS),
        ("StationAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("RouteTableSize", UINT32),
        ("RouteTable", POINTER(EFI_IP4_ROUTE_TABLE)),
    ]


class EFI_IP4_CONFIG2_PROTOCOL(efi.Protocol):
    guid = EFI_IP4_CONFIG2_PROTOCOL_GUID


EFI_IP4_CONFIG2_PROTOCOL._fields_ = [
    ("SetData", efi.FUNC(POINTER(EFI_IP4_CONFIG2_PROTOCOL), c_int, UINTN, c_void_p)),
    ("GetData", efi.FUNC(POINTER(EFI_IP4_CONFIG2_PROTOCOL), c_int, POINTER(UINTN), c_void_p)),
    ("RegisterDataNotify", efi.FUNC(POINTER(EFI_IP4_CONFIG2_PROTOCOL), c_int, EFI_EVENT)),
    ("UnregisterDataNotify", efi.FUNC(POINTER(EFI_IP4_CONFIG2_PROTOCOL), c_int, EFI_EVENT)),
]


class EFI_TCP4_SERVICE_BINDING_PROTOCOL(efi.Protocol):
    guid = EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID


EFI_TCP4_SERVICE_BINDING_PROTOCOL._fields_ = [
    ("CreateChild", efi.FUNC(POINTER(EFI_TCP4_SERVICE_BINDING_PROTOCOL), POINTER(EFI_HANDLE))),
    ("DestroyChild", efi.FUNC(POINTER(EFI_TCP4_SERVICE_BINDING_PROTOCOL), EFI_HANDLE)),
]


class EFI_TCP4_ACCESS_POINT(Structure):
    _fields_ = [
        ("UseDefaultAddress", BOOLEAN),
        ("StationAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("StationPort", UINT16),
        ("RemoteAddress", EFI_IPv4_ADDRESS),
        ("RemotePort", UINT16),
        ("ActiveFlag", BOOLEAN),
    ]


class EFI_TCP4_OPTION(Structure):
    _fields_ = [(name, UINT32) for name in (
        "ReceiveBufferSize", "SendBufferSize", "MaxSynBackLog", "ConnectionTimeout", "DataRetries",
        "FinTimeout", "TimeWaitTimeout", "KeepAliveProbes", "KeepAliveTime", "KeepAliveInterval")] + [
        (name, BOOLEAN) for name in (
            "EnableNagle", "EnableTimeStamp", "EnableWindowScaling", "EnableSelectiveAck",
            "EnablePathMtuDiscovery")]


class EFI_TCP4_CONFIG_DATA(Structure):
    _fields_ = [
        ("TypeOfService", UINT8),
        ("TimeToLive", UINT8),
        ("AccessPoint", EFI_TCP4_ACCESS_POINT),
        ("ControlOption", POINTER(EFI_TCP4_OPTION)),
    ]


class EFI_TCP4_COMPLETION_TOKEN(Structure):
    _fields_ = [("Event", EFI_EVENT), ("Status", EFI_STATUS)]


class EFI_TCP4_CONNECTION_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN)]


class EFI_TCP4_CLOSE_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN), ("AbortOnClose", BOOLEAN)]


class EFI_TCP4_FRAGMENT_DATA(Structure):
    _fields_ = [("FragmentLength", UINT32), ("FragmentBuffer", c_void_p)]


class EFI_TCP4_RECEIVE_DATA(Structure):
    _fields_ = [("UrgentFlag", BOOLEAN), ("DataLength", UINT32), ("FragmentCount", UINT32),
                ("FragmentTable", EFI_TCP4_FRAGMENT_DATA * 1)]


class EFI_TCP4_TRANSMIT_DATA(Structure):
    _fields_ = [("Push", BOOLEAN), ("Urgent", BOOLEAN), ("DataLength", UINT32), ("FragmentCount", UINT32),
                ("FragmentTable", EFI_TCP4_FRAGMENT_DATA * 1)]


class EFI_TCP4_PACKET(Union):
    _fields_ = [("RxData", POINTER(EFI_TCP4_RECEIVE_DATA)), ("TxData", POINTER(EFI_TCP4_TRANSMIT_DATA))]


class EFI_TCP4_IO_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN), ("Packet", EFI_TCP4_PACKET)]


class EFI_TCP4_PROTOCOL(efi.Protocol):
    guid = EFI_TCP4_PROTOCOL_GUID


_THIS = POINTER(EFI_TCP4_PROTOCOL)
EFI_TCP4_PROTOCOL._fields_ = [
    ("GetModeData", efi.FUNC(_THIS, POINTER(c_int), POINTER(EFI_TCP4_CONFIG_DATA), c_void_p, c_void_p, c_void_p)),
    ("Configure", efi.FUNC(_THIS, POINTER(EFI_TCP4_CONFIG_DATA))),
    ("Routes", efi.FUNC(_THIS, BOOLEAN, POINTER(EFI_IPv4_ADDRESS), POINTER(EFI_IPv4_ADDRESS),
                        POINTER(EFI_IPv4_ADDRESS))),
    ("Connect", efi.FUNC(_THIS, POINTER(EFI_TCP4_CONNECTION_TOKEN))),
    ("Accept", efi.FUNC(_THIS, c_void_p)),
    ("Transmit", efi.FUNC(_THIS, POINTER(EFI_TCP4_IO_TOKEN))),
    ("Receive", efi.FUNC(_THIS, POINTER(EFI_TCP4_IO_TOKEN))),
    ("Close", efi.FUNC(_THIS, POINTER(EFI_TCP4_CLOSE_TOKEN))),
    ("Cancel", efi.FUNC(_THIS, POINTER(EFI_TCP4_COMPLETION_TOKEN))),
    ("Poll", efi.FUNC(_THIS)),
]


# --- Small helpers ------------------------------------------------------------------------------
class Failure(Exception):
    pass


def name(status):
    return efi.efi_status_decode.get(status, hex(status))


def check(status, what):
    if status != efi.EFI_SUCCESS:
        raise Failure("%s failed: %s" % (what, name(status)))


def boot_services():
    return efi.system_table.BootServices.contents


def ipv4(text):
    address = EFI_IPv4_ADDRESS()
    address.Addr[:] = [int(part) for part in text.split(".")]
    return address


def ipv4_text(address):
    return "%d.%d.%d.%d" % tuple(address.Addr)


class Events(object):
    """Every event this script creates, so that each one is closed in the end."""

    def __init__(self):
        self.open = []

    def create(self):
        event = EFI_EVENT()
        # Type 0: no notify function; waited on with CheckEvent (which clears the signal).
        check(boot_services().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(event)), "CreateEvent")
        self.open.append(event.value)
        return event.value

    def close_all(self):
        for event in self.open:
            boot_services().CloseEvent(event)
        del self.open[:]


def wait(event, poll, deadline, what):
    """Wait for a Type-0 event with CheckEvent, calling ``poll()`` (the child's Poll) meanwhile."""
    bs = boot_services()
    while True:
        status = bs.CheckEvent(event)
        if status == efi.EFI_SUCCESS:
            return
        if status != efi.EFI_NOT_READY:
            raise Failure("CheckEvent failed: %s" % name(status))
        if time.time() > deadline:
            raise Failure("timed out waiting for %s" % what)
        poll()
        bs.Stall(POLL_STALL_US)


# --- Step 1: the NIC ------------------------------------------------------------------------
def handles_with(guid):
    """LocateHandleBuffer(ByProtocol): the handle list is pool memory the caller frees."""
    bs = boot_services()
    count = UINTN()
    buffer = POINTER(EFI_HANDLE)()
    status = bs.LocateHandleBuffer(ByProtocol, byref(efi.EFI_GUID(guid)), None, byref(count), byref(buffer))
    if status == efi.EFI_NOT_FOUND:
        return []
    check(status, "LocateHandleBuffer")
    try:
        return [buffer[i] for i in range(count.value)]
    finally:
        check(bs.FreePool(buffer), "FreePool")


def find_nic():
    for attempt in range(2):
        config2 = set(handles_with(EFI_IP4_CONFIG2_PROTOCOL_GUID))
        nics = [h for h in handles_with(EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID) if h in config2]
        if nics:
            return nics[0]
        if attempt == 0:
            try:
                snp = list(efi.locate_handles(EFI_SIMPLE_NETWORK_PROTOCOL_GUID))
            except efi.EFIException:
                snp = []
            for handle in snp:
                boot_services().ConnectController(handle, None, None, True)
    raise Failure("no NIC with IP4 Config2 and TCP4")


# --- Step 2: IPv4 ---------------------------------------------------------------------------
def interface_info(config2):
    """(address, mask, [(subnet, mask, gateway)]) from GetData(InterfaceInfo), sized first."""
    this = byref(config2)
    size = UINTN(0)
    status = config2.GetData(this, Ip4Config2DataTypeInterfaceInfo, byref(size), None)
    if status in (efi.EFI_NOT_READY, efi.EFI_NOT_FOUND):
        return "0.0.0.0", "0.0.0.0", []
    if status != efi.EFI_BUFFER_TOO_SMALL:
        raise Failure("GetData(InterfaceInfo) failed: %s" % name(status))
    # The routes can grow between the two calls (DHCP completes in a timer notification at any
    # moment): a second BUFFER_TOO_SMALL carries the new size, so size again.
    for _attempt in range(3):
        buf = ctypes.create_string_buffer(size.value)
        status = config2.GetData(this, Ip4Config2DataTypeInterfaceInfo, byref(size), buf)
        if status != efi.EFI_BUFFER_TOO_SMALL:
            break
    check(status, "GetData(InterfaceInfo)")
    info = EFI_IP4_CONFIG2_INTERFACE_INFO.from_buffer(buf)
    routes = [(ipv4_text(r.SubnetAddress), ipv4_text(r.SubnetMask), ipv4_text(r.GatewayAddress))
              for r in (info.RouteTable[i] for i in range(info.RouteTableSize))]
    return ipv4_text(info.StationAddress), ipv4_text(info.SubnetMask), routes


def set_policy(config2, policy):
    value = c_int(policy)
    status = config2.SetData(byref(config2), Ip4Config2DataTypePolicy, ctypes.sizeof(value), byref(value))
    if status not in (efi.EFI_SUCCESS, efi.EFI_NOT_READY):  # some firmware says NOT_READY: DHCP runs on
        raise Failure("SetData(Policy) failed: %s" % name(status))


def bring_up(config2):
    info = interface_info(config2)
    if info[0] != "0.0.0.0":
        return info
    policy = c_int()
    size = UINTN(ctypes.sizeof(policy))
    check(config2.GetData(byref(config2), Ip4Config2DataTypePolicy, byref(size), byref(policy)), "GetData(Policy)")
    if policy.value == Ip4Config2PolicyDhcp:
        set_policy(config2, Ip4Config2PolicyStatic)  # DHCP restarts only on a policy change
    set_policy(config2, Ip4Config2PolicyDhcp)
    print("DHCP...", file=sys.stderr)
    deadline = time.time() + DHCP_TIMEOUT
    while time.time() < deadline:
        info = interface_info(config2)
        if info[0] != "0.0.0.0":
            return info
        boot_services().Stall(10000)
    raise Failure("DHCP: no address within %d s" % DHCP_TIMEOUT)


# --- Steps 3 and 4: TCP ---------------------------------------------------------------------
class Connection(object):
    """One TCP4 child and everything handed to the firmware for it."""

    def __init__(self, nic, events):
        self.events = events
        self.binding = EFI_TCP4_SERVICE_BINDING_PROTOCOL.from_handle(nic)
        child = EFI_HANDLE()
        check(self.binding.CreateChild(byref(self.binding), byref(child)), "CreateChild")
        self.child = child.value
        self.tcp4 = EFI_TCP4_PROTOCOL.from_handle(self.child)
        self.configured = False
        self.keep = []  # tokens and buffers the firmware may still use

    def poll(self):
        self.tcp4.Poll(byref(self.tcp4))

    def configure(self, address, mask, routes, port):
        data = EFI_TCP4_CONFIG_DATA()  # zeroed: ControlOption NULL means EDK2's defaults
        data.TimeToLive = 64
        ap = data.AccessPoint
        ap.UseDefaultAddress = False
        ap.StationAddress = ipv4(address)
        ap.SubnetMask = ipv4(mask)
        ap.StationPort = 0
        ap.RemoteAddress = ipv4(HOST)
        ap.RemotePort = port
        ap.ActiveFlag = True
        check(self.tcp4.Configure(byref(self.tcp4), byref(data)), "Configure")
        self.configured = True
        for subnet, subnet_mask, gateway in routes:
            status = self.tcp4.Routes(byref(self.tcp4), False, byref(ipv4(subnet)), byref(ipv4(subnet_mask)),
                                      byref(ipv4(gateway)))
            if status not in (efi.EFI_SUCCESS, efi.EFI_ACCESS_DENIED):  # ACCESS_DENIED: already there
                raise Failure("Routes failed: %s" % name(status))

    def connect(self):
        token = EFI_TCP4_CONNECTION_TOKEN()
        token.CompletionToken.Event = self.events.create()
        self.keep.append(token)
        check(self.tcp4.Connect(byref(self.tcp4), byref(token)), "Connect")
        wait(token.CompletionToken.Event, self.poll, time.time() + CONNECT_TIMEOUT, "Connect")
        check(token.CompletionToken.Status, "Connect (token)")

    def send(self, data):
        buf = ctypes.create_string_buffer(data, len(data))
        tx = EFI_TCP4_TRANSMIT_DATA()
        tx.Push = True
        tx.DataLength = len(data)
        tx.FragmentCount = 1
        tx.FragmentTable[0].FragmentLength = len(data)
        tx.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
        token = EFI_TCP4_IO_TOKEN()
        token.CompletionToken.Event = self.events.create()
        token.Packet.TxData = ctypes.pointer(tx)
        self.keep.extend([buf, tx, token])  # zero-copy: all must live until the token completes
        deadline = time.time() + IO_TIMEOUT
        status = self.tcp4.Transmit(byref(self.tcp4), byref(token))
        while status == efi.EFI_OUT_OF_RESOURCES and time.time() < deadline:  # transient: poll, retry
            self.poll()
            status = self.tcp4.Transmit(byref(self.tcp4), byref(token))
        check(status, "Transmit")
        wait(token.CompletionToken.Event, self.poll, time.time() + IO_TIMEOUT, "Transmit")
        check(token.CompletionToken.Status, "Transmit (token)")

    def receive_all(self):
        """Receive until the peer's FIN; returns everything received."""
        buf = ctypes.create_string_buffer(RECEIVE_SIZE)
        rx = EFI_TCP4_RECEIVE_DATA()
        token = EFI_TCP4_IO_TOKEN()
        token.CompletionToken.Event = self.events.create()
        token.Packet.RxData = ctypes.pointer(rx)
        self.keep.extend([buf, rx, token])
        chunks = []
        while True:
            # EDK2 overwrites DataLength and FragmentLength on completion: reset them every time.
            rx.DataLength = RECEIVE_SIZE
            rx.FragmentCount = 1
            rx.FragmentTable[0].FragmentLength = RECEIVE_SIZE
            rx.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
            token.CompletionToken.Status = efi.EFI_NOT_READY
            status = self.tcp4.Receive(byref(self.tcp4), byref(token))
            if status == efi.EFI_CONNECTION_FIN:
                return b"".join(chunks)  # EDK2: the peer closed and nothing is buffered
            check(status, "Receive")
            wait(token.CompletionToken.Event, self.poll, time.time() + IO_TIMEOUT, "Receive")
            status = token.CompletionToken.Status
            if status == efi.EFI_CONNECTION_FIN:
                return b"".join(chunks)
            check(status, "Receive (token)")
            chunks.append(ctypes.string_at(buf, rx.DataLength))

    def close(self, abort=False):
        token = EFI_TCP4_CLOSE_TOKEN()
        token.CompletionToken.Event = self.events.create()
        token.AbortOnClose = abort
        self.keep.append(token)
        check(self.tcp4.Close(byref(self.tcp4), byref(token)), "Close")
        wait(token.CompletionToken.Event, self.poll, time.time() + CLOSE_TIMEOUT, "Close")
        check(token.CompletionToken.Status, "Close (token)")

    def destroy(self):
        """Configure(NULL) flushes whatever is still queued (tokens complete EFI_ABORTED), then
        the child goes away. Only then may the kept tokens and buffers be dropped."""
        if self.configured:
            self.tcp4.Configure(byref(self.tcp4), None)
            self.configured = False
        check(self.binding.DestroyChild(byref(self.binding), self.child), "DestroyChild")
        del self.keep[:]


def http_get(port, path, teardown=True):
    """The whole exchange; returns the raw response. Without ``teardown`` nothing is released
    (tests/scripts/raw_leaky.py: the firmware ledger must show it)."""
    events = Events()
    nic = find_nic()
    config2 = EFI_IP4_CONFIG2_PROTOCOL.from_handle(nic)
    address, mask, routes = bring_up(config2)
    print("address %s/%s, %d routes" % (address, mask, len(routes)), file=sys.stderr)
    connection = Connection(nic, events)
    closed = False
    try:
        connection.configure(address, mask, routes, port)
        connection.connect()
        request = "GET /%s HTTP/1.0\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (path.lstrip("/"), HOST, port)
        connection.send(request.encode("ascii"))
        response = connection.receive_all()
        if teardown:
            connection.close()
            closed = True
        return response
    finally:
        if teardown:
            if not closed and connection.configured:
                try:
                    connection.close(abort=True)
                except Failure:
                    pass
            connection.destroy()
            events.close_all()


def main(argv, teardown=True):
    if len(argv) not in (2, 3):
        print("usage: %s PORT [PATH]" % argv[0], file=sys.stderr)
        return 2
    try:
        response = http_get(int(argv[1]), argv[2] if len(argv) > 2 else "", teardown)
    except Failure as exc:
        print("raw_http_get: %s" % exc, file=sys.stderr)
        return 1
    head, _, body = response.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0]
    out = getattr(sys.stdout, "buffer", sys.stdout)
    out.write(body)
    out.flush()
    if status_line.split(b" ")[1:2] != [b"200"]:
        print("raw_http_get: %s" % status_line.decode("latin-1"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
