"""The datagram engine of the simulated EDK2 Udp4Dxe/Udp6Dxe: host ports, demultiplexing,
delivery and recycling, ICMP errors, receive timeouts, ports, the loopback wire.

udp4.py holds the EFI_UDP4_PROTOCOL entry points and their call-time checks; once a call is
accepted it hands over to ``Udp4Stack`` here, which owns everything that happens afterwards
(as tcp4_tcb.Tcp4Stack does for tcp4.py). Quirks are marked `# EDK2 quirk:`.

The wire is the host's loopback. The driver keeps one host UDP socket per bound (address, port)
(``_HostPort``) and demultiplexes what arrives to its children by EDK2's matching rules -- like
the service-wide IpIo instance of Udp4Dxe -- so AllowDuplicatePort children each get their own
copy. Pacing (3.4): each host socket is a NIC frame source; one datagram (or one ICMP error) is
one frame, taken by MNP's 10 ms timer or by a Poll. ICMP errors come from the host kernel through
IP_RECVERR and the socket's error queue. What a host socket cannot express, and the choice made:

* Broadcast: the simulated LAN's broadcast domain is 127.0.0.0/8, so a datagram to
  255.255.255.255 leaves as a broadcast to 127.255.255.255 (never to the host's real networks); a
  host peer bound to 0.0.0.0 or 127.255.255.255 receives it. Children that accept broadcasts get a
  second host socket bound to 127.255.255.255:port; what arrives there is seen as a datagram to
  255.255.255.255. If the host refuses the send, the datagram is lost and the token still
  completes with EFI_SUCCESS, as a frame no station wanted.
* Destinations outside 127.0.0.0/8 (reached through a gateway) are not sent at all: the token
  completes with EFI_SUCCESS and nothing ever answers, as on a network that drops them.
* The machine cannot reach itself (EDK2 has no loopback; tcp4_tcb.addressed_to_self): a datagram
  to its own address is not sent and the token completes with EFI_NO_MAPPING about 1.25 s later
  (UNRESOLVED_DELAY: the ARP request for its own address is never answered); what the host's
  loopback hands back from the machine's own address -- its own broadcasts -- is dropped.
* A datagram that reaches a host socket of ours but matches no child is dropped silently; EDK2
  would answer with ICMP port unreachable, which an unprivileged host process cannot send.
* DNS servers on unusual ports (MachineConfig(dns_servers=["127.0.0.1:5353"])): datagrams to
  (server, 53) go to (server, port) and replies from there appear to come from port 53.
* Multicast groups are bookkept (Groups) but nothing is sent to or received from a group.
* A port below 1024 that the host refuses to an unprivileged process is bound all the same, but
  nothing arrives there and what is sent from it is lost.
* Configure(NULL) while received datagrams are not yet recycled is recorded as a firmware fault
  (``FIRMWARE.crashes``): EDK2 ASSERTs there in debug builds. Unrecycled datagrams are counted in
  the ledger as ``udp4_unrecycled`` until the application signals their RecycleSignal.

The engine serves UDP6 as well (udp6.py): what depends on the address family comes from the
driver's ``family`` table (nic.IPV4 / nic.IPV6) and class attributes. Completion tokens have
the same layout in UDP4 and UDP6 (docs/edk2.md section 4.1).
"""

from __future__ import print_function

import collections
import ctypes
import errno
import random
from efisim.nic import _host_socket  # the OS socket: once bitsnet is installed, `import socket` is bitsnet
from ctypes import POINTER, byref

from bitsnet import efidefs
from efisim import uefi
from efisim.faults import CompletingDriver, HeldCompletions
from efisim.firmware import FIRMWARE, _now
from efisim.nic import IPV4, ip_to_int
from efisim.tcp4_tcb import addressed_to_self

S = uefi  # status codes

UDP4_PORT_KNOWN = 1024  # the ephemeral counter lives in 1024..65535 (Udp4Bind)
UDP4_MAX_DATA_SIZE = 65507  # 65535 - 20 (IP header) - 8 (UDP header)
LIMITED_BROADCAST = "255.255.255.255"
WIRE_BROADCAST = "127.255.255.255"  # where the limited broadcast goes on the loopback wire
IP_RECVERR = getattr(_host_socket, "IP_RECVERR", 11)  # Linux: queue ICMP errors on the socket
IPV6_RECVERR = getattr(_host_socket, "IPV6_RECVERR", 25)
MSG_ERRQUEUE = getattr(_host_socket, "MSG_ERRQUEUE", 0x2000)
# EDK2 quirk (no loopback; measured on OVMF by tests/firmware/scenarios/32_udp_self_send.scn): a
# datagram to the machine's own address waits for an ARP answer that never comes. ArpDxe retries
# twice on its 500 ms timer, then IP4 drops the frame and the token completes with EFI_NO_MAPPING
# 1.0-1.5 s after Transmit (OVMF: between 1.0 and 1.25 s); the middle of that window is used.
UNRESOLVED_DELAY = 1.25
RETIRED_KEEP = 256  # recycled receive buffers stay mapped (and poisoned) this long
POISON = 0xAF

# Host errno of an ICMP error -> the status the receive token completes with (docs/edk2.md section 4.2).
ICMP_STATUS = {
    errno.ECONNREFUSED: S.EFI_PORT_UNREACHABLE,
    errno.EHOSTUNREACH: S.EFI_HOST_UNREACHABLE,
    errno.ENETUNREACH: S.EFI_NETWORK_UNREACHABLE,
    errno.EPROTO: S.EFI_PROTOCOL_UNREACHABLE,
}


def _errno(exc):
    return getattr(exc, "errno", None) or (exc.args[0] if exc.args else None)


def _same_subnet(a, b, mask):
    m = ip_to_int(mask)
    return ip_to_int(a) & m == ip_to_int(b) & m


def _loopback(address):
    return address.startswith("127.")


def _ip_header(sock, child):
    """Udp4Transmit/Udp6Transmit: the datagram's IP header takes the instance's TimeToLive and
    TypeOfService (UDP6: HopLimit, TrafficClass) -- here, the host socket's, set per datagram."""
    config = child.config
    if hasattr(config, "TimeToLive"):
        wanted = ((_host_socket.IPPROTO_IP, _host_socket.IP_TTL, config.TimeToLive or 64),
                  (_host_socket.IPPROTO_IP, _host_socket.IP_TOS, config.TypeOfService))
    else:
        wanted = ((_host_socket.IPPROTO_IPV6, IPV6_UNICAST_HOPS, config.HopLimit),
                  (_host_socket.IPPROTO_IPV6, IPV6_TCLASS, config.TrafficClass))
    for level, name, value in wanted:
        if sock.getsockopt(level, name) != value:
            sock.setsockopt(level, name, value)


IPV6_UNICAST_HOPS = getattr(_host_socket, "IPV6_UNICAST_HOPS", 16)
IPV6_TCLASS = getattr(_host_socket, "IPV6_TCLASS", 67)


def _udp_socket(family=IPV4):
    """A non-blocking host UDP socket that may broadcast and queues ICMP errors (IP_RECVERR)."""
    sock = _host_socket.socket(family.host_family, _host_socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.setsockopt(_host_socket.SOL_SOCKET, _host_socket.SO_BROADCAST, 1)
    try:
        if family is IPV4:
            sock.setsockopt(_host_socket.IPPROTO_IP, IP_RECVERR, 1)
        else:
            sock.setsockopt(_host_socket.IPPROTO_IPV6, IPV6_RECVERR, 1)
    except (OSError, IOError):
        pass  # not Linux: ICMP errors reach only what the host reports on its own
    return sock


class _Datagram(object):
    """One received datagram as the IpIo layer hands it to UDP4: payload and the session."""

    def __init__(self, data, source, sport, destination, dport):
        self.data = data
        self.source, self.sport = source, sport
        self.destination, self.dport = destination, dport
        self.arrived = _now()


class _Delivered(object):
    """A driver-owned EFI_UDP4_RECEIVE_DATA handed to the application, until it is recycled."""

    def __init__(self, child, datagram):
        self.child = child
        data = datagram.data
        driver = child.driver
        # Several fragments when IP reassembled the datagram from several frames (docs/edk2.md section 4.2).
        pieces, offset, first = [], 0, driver.FRAGMENT_PAYLOAD - 8
        while offset < len(data) or not pieces:
            size = first if not pieces else driver.FRAGMENT_PAYLOAD
            pieces.append(data[offset:offset + size])
            offset += size
        self.buffers = [ctypes.create_string_buffer(piece, max(len(piece), 1)) for piece in pieces]
        self.rx = driver.receive_data(len(pieces))()
        self.rx.DataLength = len(data)
        self.rx.FragmentCount = len(pieces)
        for entry, piece, buf in zip(self.rx.FragmentTable, pieces, self.buffers):
            entry.FragmentLength = len(piece)
            entry.FragmentBuffer = ctypes.addressof(buf)
        session = self.rx.UdpSession
        session.SourceAddress = driver.family.struct(datagram.source)
        session.SourcePort = datagram.sport
        session.DestinationAddress = driver.family.struct(datagram.destination)
        session.DestinationPort = datagram.dport
        self.address = ctypes.addressof(self.rx)
        self.event = 0

    def poison(self):
        """What the application may still read after recycling it: garbage."""
        for buf in self.buffers:
            ctypes.memset(ctypes.addressof(buf), POISON, ctypes.sizeof(buf))
        ctypes.memset(self.address, POISON, ctypes.sizeof(self.rx))


class _Transmit(object):
    """A Transmit token: the caller's fragments by reference, read only when the datagram leaves."""

    def __init__(self, token, fragments, source, sport, destination, dport):
        self.token = token
        self.fragments = fragments  # [(address, length)]
        self.source, self.sport = source, sport
        self.destination, self.dport = destination, dport
        self.gateway = None  # type: str or None   # TxData.GatewayAddress, when given

    def payload(self):
        return b"".join(ctypes.string_at(address, length) for address, length in self.fragments)


class _HostPort(object):
    """One host UDP socket bound to (address, port), shared by every child bound there."""

    def __init__(self, driver, address, port, broadcast=False):
        self.driver = driver
        self.address, self.port = address, port
        self.broadcast = broadcast  # bound to WIRE_BROADCAST: receives the wire's broadcasts
        self.children = []  # type: list
        self.sock = _udp_socket(driver.family)
        if broadcast:
            self.sock.setsockopt(_host_socket.SOL_SOCKET, _host_socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((address, port))
        except (OSError, IOError):
            self.sock.close()
            raise
        self.port = self.sock.getsockname()[1]
        self._fd = self.sock.fileno()
        driver.nic.add_source(self)
        driver.nic.set_interest(self, True, False)

    def fileno(self):
        return self._fd

    def take_frame(self):
        """One frame: an ICMP error from the error queue, or one datagram. True if consumed."""
        if self.sock is None:
            return False
        try:
            quoted, quoted_to = self.sock.recvfrom(UDP4_MAX_DATA_SIZE, MSG_ERRQUEUE)[:2]
        except (OSError, IOError):
            pass
        else:
            destination, dport = quoted_to[:2]  # AF_INET6 names have four parts
            self.driver.icmp_error(self, destination, dport, S.EFI_PORT_UNREACHABLE)
            return True
        try:
            data, peer = self.sock.recvfrom(65535)
        except (OSError, IOError) as exc:
            code = _errno(exc)
            if code in (errno.EAGAIN, errno.EWOULDBLOCK):
                return False
            if code in ICMP_STATUS:  # reported without an error-queue entry: no destination known
                self.driver.icmp_error(self, None, None, ICMP_STATUS[code])
                return True
            return False
        source, sport = peer[:2]
        destination = LIMITED_BROADCAST if self.broadcast else self.address
        self.driver.demultiplex(_Datagram(data, source, sport, destination, self.port))
        return True

    def close(self):
        if self.sock is not None:
            self.driver.nic.remove_source(self)
            self.sock.close()
            self.sock = None


class Udp4Child(object):
    """One EFI_UDP4_PROTOCOL instance (UDP4_INSTANCE_DATA)."""

    def __init__(self, driver):
        self.driver = driver
        self.handle = FIRMWARE.new_handle()
        self.interface = driver.new_interface()
        self.address = ctypes.addressof(self.interface)
        self.configured = False
        self.no_mapping = False
        self.config = driver.CONFIG_DATA()  # as stored: real station, mask and port
        self.station, self.mask, self.port = driver.family.any, "0.0.0.0", 0
        self.remote, self.rport = driver.family.any, 0
        self.routes = []  # type: list   # the IP child's own routes [(subnet, mask, gateway)]
        self.groups = []  # type: list
        self.ports = []  # type: list   # _HostPort objects this child is bound through
        self.tokens = []  # type: list   # every outstanding token address (tx and rx)
        self.rx_tokens = collections.deque()  # type: collections.deque
        self.queue = collections.deque()  # type: collections.deque   # received, no token yet
        self.delivered = {}  # type: dict   # RxData address -> _Delivered, until recycled
        self.icmp_error = S.EFI_SUCCESS
        self.unresolved = []  # type: list   # [(deadline, token)]: transmits to ourselves (UNRESOLVED_DELAY)
        self.route_table = None  # driver memory handed out by GetModeData
        self.group_table = None

    def __repr__(self):
        return "<Udp4Child %s:%d>" % (self.station, self.port)

    def accepts(self, datagram):
        """Udp4MatchDgram: does this instance want ``datagram``? (docs/edk2.md section 4.2 Matching)"""
        cfg = self.config
        if cfg.AcceptPromiscuous:
            return True
        if not cfg.AcceptAnyPort and datagram.dport != self.port:
            return False
        if self.rport and datagram.sport != self.rport:
            return False
        wildcard = self.driver.family.any
        if self.remote != wildcard and datagram.source != self.remote:
            return False
        if self.station == wildcard or datagram.destination == self.station:
            return True
        if datagram.destination == LIMITED_BROADCAST and getattr(cfg, "AcceptBroadcast", False):
            return True
        return datagram.destination in self.groups


class Udp4Stack(CompletingDriver):
    """The children of one Udp4Dxe instance and everything that happens to a datagram after
    the entry point accepted it.

    The driver (udp4.Udp4Driver) subclasses this and supplies the protocol-database side
    (CreateChild/DestroyChild, the entry points) and the class attributes ``FRAGMENT_PAYLOAD``,
    ``receive_data`` and ``CONFIG_DATA`` that differ between UDP4 and UDP6."""

    family = IPV4  # nic.IPV6 in udp6.Udp6Driver
    COMPLETION_TOKEN = efidefs.EFI_UDP4_COMPLETION_TOKEN  # its layout is UDP6's too

    def __init__(self, machine):
        self.machine = machine
        self.nic = machine.nic
        self.old_stack = machine.config.old_stack
        self.children = {}  # type: dict   # handle -> Udp4Child
        self._retired = []  # type: list   # interfaces and recycled buffers stay mapped
        self.host_ports = {}  # type: dict   # (address, port, broadcast) -> _HostPort
        self._by_event = {}  # type: dict   # RecycleSignal event -> _Delivered
        self._delayed = HeldCompletions()  # completions held back under delay/reorder/burst (faults.py)
        # Udp4DriverEntryPoint: mUdp4RandomPort = NET_RANDOM (seed) % UDP4_PORT_KNOWN + UDP4_PORT_KNOWN
        self.next_port = UDP4_PORT_KNOWN + random.Random(machine.config.seed + 17).randrange(1 << 16) \
            % UDP4_PORT_KNOWN
        self._recycle_notify = uefi.EFI_EVENT_NOTIFY(self._on_recycle)

    # ------------------------------------------------------------------ token completion
    def token_exists(self, child, token):
        """Udp4TokenExist over TxTokens and RxTokens: the same token or the same event."""
        event = efidefs.EFI_UDP4_COMPLETION_TOKEN.from_address(token).Event
        for other in child.tokens:
            if other == token or efidefs.EFI_UDP4_COMPLETION_TOKEN.from_address(other).Event == event:
                return True
        return False

    # ------------------------------------------------------------------ tokens and teardown
    def cancel_tokens(self, child, token=0):
        """Udp4InstanceCancelToken: EFI_ABORTED for ``token`` (0: all). True if one was found."""
        # Transmit tokens complete inside Transmit, so only receive tokens and transmits to the
        # machine itself (still waiting for their ARP answer: Ip4Cancel finds them in the ARP
        # queue, 32_udp_self_send) can still be pending -- besides completions held back by the
        # delay fault, which Cancel does not reach.
        found = self.abort_unresolved(child, token)
        for rx in list(child.rx_tokens):
            if token in (0, rx):
                child.rx_tokens.remove(rx)
                self.complete(child, rx, S.EFI_ABORTED)
                found = True
        return found

    def abort_unresolved(self, child, token=0):
        """EFI_ABORTED for the transmits to ourselves matching ``token`` (0: all); True if any."""
        found = False
        for entry in list(child.unresolved):
            if token in (0, entry[1]):
                child.unresolved.remove(entry)
                self.complete(child, entry[1], S.EFI_ABORTED)
                found = True
        return found

    def unconfigure(self, child, destroying=False):
        """Configure(NULL) on a configured child: tokens aborted, undelivered datagrams freed.
        Datagrams the application holds stay valid until it recycles them (ledger: udp4_unrecycled)."""
        if destroying:
            self.cancel_tokens(child)
        # else -- EDK2 quirk (Udp4Configure, measured on OVMF: tests/firmware/DEVIATIONS 31_udp_queue):
        # Configured is cleared before Cancel(NULL), which then answers NOT_STARTED, so posted
        # receive tokens are NOT aborted; they stay queued and complete after a new Configure.
        # Transmits to ourselves are aborted all the same: resetting the IP child cancels the
        # frames in its ARP queue (measured on OVMF: 32_udp_self_send).
        self.abort_unresolved(child)
        child.queue.clear()
        if child.delivered and not destroying:
            # EDK2 ASSERTs (debug builds) that every delivered datagram was recycled first (docs/edk2.md section 4.2).
            FIRMWARE.record_crash("UDP4 Configure(NULL) with %d received datagram(s) not yet "
                                  "recycled: EDK2 ASSERTs (signal each RecycleSignal first, docs/edk2.md section 4.2)"
                                  % len(child.delivered))
        for port in child.ports:
            port.children.remove(child)
            if not port.children:
                port.close()
                self.host_ports.pop((port.address, port.port, port.broadcast), None)
        child.ports = []
        child.configured = child.no_mapping = False
        child.groups = []
        child.routes = []
        child.icmp_error = S.EFI_SUCCESS
        child.port = 0

    # ------------------------------------------------------------------ ports
    def port_in_use(self, address, port):
        """Udp4FindInstanceByPort: a configured child, not AcceptAnyPort, on (address, port)."""
        return any(c.configured and not c.config.AcceptAnyPort and c.station == address and c.port == port
                   for c in self.children.values())

    def host_address(self, child_station):
        """Where the child's host socket binds: its station, or the NIC's address for 0.0.0.0."""
        if child_station != self.family.any:
            return child_station
        return self.default_address()

    def default_address(self):
        """The NIC's address for an instance bound to the wildcard (None: there is none)."""
        return self.nic.ip4.address

    def attach(self, child, address, port):
        """Bind ``child`` to the host socket(s) of (address, port). False if the host refuses."""
        host = self.host_address(address)
        if host is None or not self.family.reachable(host):
            return True  # not reachable from the host: bound, but nothing ever arrives
        key = (host, port, False)
        hp = self.host_ports.get(key)
        if hp is None:
            try:
                hp = _HostPort(self, host, port)
            except (OSError, IOError) as exc:
                if _errno(exc) == errno.EACCES:
                    return True  # a privileged port on an unprivileged host: bound, nothing arrives
                return False  # another host process holds the port: a clash as well
            self.host_ports[key] = hp
        hp.children.append(child)
        child.ports.append(hp)
        if self.family is IPV4 and (child.config.AcceptBroadcast or address == "0.0.0.0"):
            key = (WIRE_BROADCAST, port, True)
            bp = self.host_ports.get(key)
            if bp is None:
                try:
                    bp = _HostPort(self, WIRE_BROADCAST, port, broadcast=True)
                except (OSError, IOError):
                    bp = None  # someone else listens to the wire's broadcasts there: ours are lost
                if bp is not None:
                    self.host_ports[key] = bp
            if bp is not None:
                bp.children.append(child)
                child.ports.append(bp)
        return True

    def bind(self, child, address, cfg):
        """Udp4Bind: pick the port (explicit or ephemeral, docs/edk2.md section 4.2) and attach the host socket."""
        if cfg.AcceptAnyPort:
            return S.EFI_SUCCESS, cfg.StationPort  # no port is bound at all
        if cfg.StationPort:
            if not cfg.AllowDuplicatePort and self.port_in_use(address, cfg.StationPort):
                return S.EFI_ACCESS_DENIED, 0
            if not self.attach(child, address, cfg.StationPort):
                return S.EFI_ACCESS_DENIED, 0
            return S.EFI_SUCCESS, cfg.StationPort
        # StationPort 0: the driver-global counter, used then post-incremented, wrapping to 1024.
        start = self.next_port
        while True:
            port = self.next_port
            self.next_port = self.next_port + 1 if self.next_port < 0xFFFF else UDP4_PORT_KNOWN
            if (cfg.AllowDuplicatePort or not self.port_in_use(address, port)) and self.attach(child, address, port):
                return S.EFI_SUCCESS, port
            if self.next_port == start:
                return S.EFI_OUT_OF_RESOURCES, 0

    # ------------------------------------------------------------------ the receive path
    def demultiplex(self, datagram):
        """IpIo delivered one datagram: every matching instance gets its own copy (docs/edk2.md section 4.2)."""
        ports = getattr(self.nic, "dns_ports", {})
        if ports.get(datagram.source) == datagram.sport and datagram.sport != 53:
            datagram.sport = 53  # the simulated DNS server on its real port speaks as port 53
        if addressed_to_self(self.machine, self.family, datagram.source, datagram.sport, self):
            # EDK2 quirk (no loopback, 32_udp_self_send): the NIC does not hear its own frames, so
            # the machine's own broadcasts never reach its own children; the host's loopback
            # delivers them, so they are dropped here.
            return
        for child in list(self.children.values()):
            if child.configured and child.accepts(datagram):
                copy = _Datagram(datagram.data, datagram.source, datagram.sport, datagram.destination,
                                 datagram.dport)
                child.queue.append(copy)
                self.deliver(child)

    def deliver(self, child):
        """Udp4InstanceDeliverDgram: pair queued datagrams with posted receive tokens."""
        while child.queue and child.rx_tokens:
            token = child.rx_tokens.popleft()
            datagram = child.queue.popleft()
            delivered = _Delivered(child, datagram)
            event = uefi.EFI_EVENT()
            status = FIRMWARE.boot_services.CreateEvent(uefi.EVT_NOTIFY_SIGNAL, uefi.TPL_NOTIFY,
                                                        self._recycle_notify, delivered.address, byref(event))
            if status != S.EFI_SUCCESS:
                FIRMWARE.record_crash("UDP4: cannot create a RecycleSignal event (%s)" % status)
                return
            delivered.event = event.value
            delivered.rx.RecycleSignal = event.value
            self._by_event[event.value] = delivered
            child.delivered[delivered.address] = delivered
            completion = efidefs.EFI_UDP4_COMPLETION_TOKEN.from_address(token)
            completion.Packet.RxData = ctypes.cast(delivered.address, POINTER(efidefs.EFI_UDP4_RECEIVE_DATA))
            self.complete(child, token, S.EFI_SUCCESS)

    def _on_recycle(self, event, context):
        """RecycleSignal's notify (Udp4RecycleRxDataWrap): free the datagram, close the event."""
        delivered = self._by_event.pop(event, None)
        if delivered is None:
            return
        delivered.child.delivered.pop(delivered.address, None)
        delivered.poison()
        self._retired.append(delivered)
        del self._retired[:-RETIRED_KEEP]
        FIRMWARE.boot_services.CloseEvent(event)

    def icmp_error(self, host_port, destination, dport, status):
        """Udp4IcmpHandler: store the error on the first instance that sent the quoted datagram
        (ports swapped) and report it through a receive token (docs/edk2.md section 4.2). EDK2
        compares a RemoteAddress with the ICMP message's sender; on the loopback wire a port
        unreachable comes from the peer host itself, so the quoted ``destination`` stands for the
        sender (Python 2.7 has no recvmsg to read SO_EE_OFFENDER from the error queue)."""
        ports = getattr(self.nic, "dns_ports", {})
        if destination is not None and ports.get(destination) == dport and dport != 53:
            dport = 53
        for child in host_port.children:
            if not child.configured:
                continue
            if destination is not None and child.remote != self.family.any and child.remote != destination:
                continue
            if dport is not None and child.rport and child.rport != dport:
                continue
            child.icmp_error = status
            self.report_icmp_error(child)
            return

    def report_icmp_error(self, child):
        """Udp4ReportIcmpError: complete the first receive token with the error, RxData NULL."""
        if child.icmp_error == S.EFI_SUCCESS or not child.rx_tokens:
            return
        token = child.rx_tokens.popleft()
        efidefs.EFI_UDP4_COMPLETION_TOKEN.from_address(token).Packet.RxData = None
        status, child.icmp_error = child.icmp_error, S.EFI_SUCCESS
        self.complete(child, token, status)

    def check_timeout(self):
        """Udp4CheckTimeout (every 50 ms): queued datagrams older than ReceiveTimeout die."""
        self.deliver_delayed()
        now = _now()
        for child in list(self.children.values()):
            while child.unresolved and child.unresolved[0][0] <= now:
                self.complete(child, child.unresolved.pop(0)[1], S.EFI_NO_MAPPING)
            timeout = child.config.ReceiveTimeout
            if not child.configured or not timeout:
                continue
            while child.queue and now - child.queue[0].arrived >= timeout / 1e6:
                child.queue.popleft()

    # ------------------------------------------------------------------ the transmit path
    def wire_send(self, child, tx):
        """Put one datagram on the loopback wire (see the module docstring for its limits)."""
        data = tx.payload()  # the caller's fragments, read as MNP copies them into its buffer
        destination, dport = tx.destination, tx.dport
        if destination == LIMITED_BROADCAST:
            destination = WIRE_BROADCAST
        if not self.family.reachable(destination):
            return  # beyond the gateway: nothing on the loopback wire answers
        ports = getattr(self.nic, "dns_ports", {})
        if dport == 53 and ports.get(destination, 53) != 53:
            dport = ports[destination]  # the simulated DNS server's real port
        source = self.host_address(tx.source)
        if source is None or not self.family.reachable(source):
            return
        hp = self.host_ports.get((source, tx.sport, False))
        try:
            if hp is not None:
                _ip_header(hp.sock, child)
                hp.sock.sendto(data, (destination, dport))
                return
            sock = _udp_socket(self.family)
            try:
                sock.bind((source, tx.sport))  # tx.sport 0 (AcceptAnyPort): any host port
                _ip_header(sock, child)
                sock.sendto(data, (destination, dport))
            finally:
                sock.close()
        except (OSError, IOError):
            pass  # refused by the host (e.g. a broadcast it will not send): lost on the wire

    def route(self, child, destination):
        """The next hop for ``destination``, or None: no route (docs/edk2.md section 4.2 Transmit)."""
        if destination == LIMITED_BROADCAST:
            return destination
        if child.mask != "0.0.0.0" and _same_subnet(child.station, destination, child.mask):
            return destination
        routes = list(child.routes) + list(self.nic.ip4.routes)
        best = None
        for subnet, mask, gateway in routes:
            if _same_subnet(subnet, destination, mask):
                if best is None or ip_to_int(mask) > ip_to_int(best[1]):
                    best = (subnet, mask, gateway)
        if best is None:
            return None
        return destination if best[2] == "0.0.0.0" else best[2]
