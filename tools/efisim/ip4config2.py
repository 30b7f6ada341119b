"""EFI_IP4_CONFIG2_PROTOCOL on the NIC handle, with the DHCP client behind policy Dhcp.

Models EDK2 NetworkPkg/Ip4Dxe/Ip4Config2Impl.c (edk2 c5aa7e7d, docs/edk2.md section 5); quirks are marked ``# EDK2
quirk``. The same Ip4Config2 served the 2015 stack BITS was tested on, so both firmware profiles use this model.

State, as Ip4Config2Impl.c keeps it: a policy, and one *data item* per EFI_IP4_CONFIG2_DATA_TYPE
with a status (EFI_SUCCESS, or EFI_NOT_FOUND while unset), its data, and its list of notify
events. The address itself lives on the NIC's default interface (``nic.set_address``), which
the TCP4/UDP4 drivers watch.

  SetData/GetData          every status rule of docs/edk2.md section 5.2 (see each method)
  RegisterDataNotify ...   events signalled by SetData only, never by DHCP (docs/edk2.md section 5.2)
  DHCP                     SetData(Policy=Dhcp) returns EFI_SUCCESS at once; the lease arrives
                           ``config.dhcp_delay`` seconds later on the firmware timer, or, when the
                           server never answers, DHCP gives up silently after ~60 s
  request_dhcp(machine)    the UseDefaultAddress side effect of docs/edk2.md section 3.7, for TCP4/UDP4

The machine's addresses are loopback ones (``MachineConfig`` refuses others): the host's
loopback is the wire, so the "DHCP server" is this module and the lease is ``config.address``.
"""

from __future__ import print_function

import ctypes
import time
from ctypes import POINTER, c_uint32, c_void_p

from bitsnet import efidefs
from efisim import uefi
from efisim.firmware import efiapi
from efisim.ipconfig_base import ConfigDriver
from efisim.nic import int_to_ip, ip_to_int, prefix_to_mask

INTERFACE_INFO_SIZE = ctypes.sizeof(efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO)
ROUTE_SIZE = ctypes.sizeof(efidefs.EFI_IP4_ROUTE_TABLE)  # 12
MANUAL_ADDRESS_SIZE = ctypes.sizeof(efidefs.EFI_IP4_CONFIG2_MANUAL_ADDRESS)  # 8
POLICY_SIZE = 4  # sizeof(EFI_IP4_CONFIG2_POLICY), a C enum
NET_IFTYPE_ETHERNET = 1
DHCP_TICK = 0.010  # how often the DHCP client looks at its clock (EDK2's timer period)
# Dhcp4Dxe gives up after DISCOVER retransmits waiting 4, 8, 16 and 32 s (docs/edk2.md section 5.2), rounded
# down to the sum: nothing is configured and nothing is retried afterwards.
DHCP_GIVE_UP = 4 + 8 + 16 + 32

_now = getattr(time, "monotonic", time.time)

_INTERFACE_INFO = efidefs.Ip4Config2DataTypeInterfaceInfo
_POLICY = efidefs.Ip4Config2DataTypePolicy
_MANUAL_ADDRESS = efidefs.Ip4Config2DataTypeManualAddress
_GATEWAY = efidefs.Ip4Config2DataTypeGateway
_DNS_SERVER = efidefs.Ip4Config2DataTypeDnsServer
_MAXIMUM = efidefs.Ip4Config2DataTypeMaximum
_STATIC = efidefs.Ip4Config2PolicyStatic
_DHCP = efidefs.Ip4Config2PolicyDhcp


def parse_address(text):
    """ "A.B.C.D/N" -> ("A.B.C.D", "M.M.M.M"); ValueError if malformed."""
    address, _, prefix = text.partition("/")
    prefix_len = int(prefix) if prefix else 8
    if not 0 < prefix_len < 32:
        raise ValueError("bad prefix length in %r" % text)
    ip_to_int(address)
    return address, prefix_to_mask(prefix_len)


def dns_host_port(text):
    """ "host:port" -> ("host", port); the port defaults to 53."""
    host, _, port = text.partition(":")
    return host, int(port) if port else 53


def _mask_length(mask):
    # type: (int) -> int
    """NetGetMaskLength: the prefix length, or 33 (IP4_MASK_NUM) if the mask is not contiguous."""
    for length in range(33):
        if mask == prefix_mask(length):
            return length
    return 33


def prefix_mask(length):
    # type: (int) -> int
    return (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF if length else 0


def _is_unicast(ip, mask):
    # type: (int, int) -> bool
    """NetIp4IsUnicast: not 0, not 255.255.255.255, host part neither all zeros nor all ones."""
    if ip == 0 or ip == 0xFFFFFFFF:
        return False
    host = ip & ~mask & 0xFFFFFFFF
    return host not in (0, ~mask & 0xFFFFFFFF)


def _station_address_valid(ip, mask):
    # type: (int, int) -> bool
    """Ip4StationAddressValid: contiguous mask, class A/B/C, unicast in its subnet."""
    if mask == 0:
        return ip == 0  # 0.0.0.0/0 is the "no address" instance, for the DHCP client
    if _mask_length(mask) == 33:
        return False
    if ip >> 29 == 7 or ip >> 28 == 14:  # class D (224/4) or E (240/4)
        return False
    return _is_unicast(ip, mask)


def _read_ipv4_list(address, size):
    raw = bytearray(ctypes.string_at(address, size))
    return ["%d.%d.%d.%d" % tuple(raw[i:i + 4]) for i in range(0, size, 4)]


def _ipv4_bytes(texts):
    return b"".join(bytes(bytearray(int(p) for p in t.split("."))) for t in texts)


class _Dhcp(object):
    """One run of the DHCP4 child Ip4StartAutoConfig creates: answered at ``answer_at`` or never."""

    def __init__(self, answer_at):
        self.answer_at = answer_at  # monotonic time of the ACK, or None: the server never answers
        self.give_up_at = _now() + DHCP_GIVE_UP


class Ip4Config2Driver(ConfigDriver):
    """The Ip4Config2 instance of one NIC (``machine.drivers["ip4config2"]``)."""

    DATA_TYPE_MAXIMUM = _MAXIMUM
    LEDGER_KEY = "ip4config2_notify"
    SIGNAL_UNCHANGED = True  # EDK2 Ip4Config2: the events fire even for unchanged data

    def __init__(self, machine):
        self.machine = machine
        self.firmware = machine.firmware
        self.nic = machine.nic
        self.config = machine.config
        self.policy = _STATIC  # EDK2 default: Static with no address at all (docs/edk2.md section 5.2)
        # The data items: each one's status (EFI_NOT_FOUND while unset) and its data, as
        # dotted-quad strings.
        self.status = {_INTERFACE_INFO: uefi.EFI_SUCCESS, _POLICY: uefi.EFI_SUCCESS,
                       _MANUAL_ADDRESS: uefi.EFI_NOT_FOUND, _GATEWAY: uefi.EFI_NOT_FOUND,
                       _DNS_SERVER: uefi.EFI_NOT_FOUND}
        self.manual_address = None  # (address, mask) while set
        self.gateways = []  # type: list
        self.dns_servers = []  # type: list
        ConfigDriver.__init__(self)  # the notify lists
        self.dhcp = None  # the running DHCP4 child (a _Dhcp), if any
        self.dhcp_success = False
        self.dhcp_runs = 0  # DHCP processes started (for tests)
        self._dhcp_work = self._dhcp_tick  # one bound method, so remove_periodic finds it
        # The DNS option carries only hosts; where each simulated DNS server really listens is
        # recorded on the NIC for the DNS4 model and for bitsnet's tests.
        self.nic.dns_ports = dict(dns_host_port(s) for s in self.config.dns_servers)

        self.interface = efidefs.EFI_IP4_CONFIG2_PROTOCOL()
        field_types = dict((field[0], field[1]) for field in efidefs.EFI_IP4_CONFIG2_PROTOCOL._fields_)
        for name, impl in (("SetData", self._SetData), ("GetData", self._GetData),
                           ("RegisterDataNotify", self._RegisterDataNotify),
                           ("UnregisterDataNotify", self._UnregisterDataNotify)):
            setattr(self.interface, name, field_types[name](efiapi()(impl)))
        self.firmware.install_protocol(self.nic.handle, efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID,
                                       ctypes.addressof(self.interface))
        if self.config.static:
            self._preconfigure()

    def _preconfigure(self):
        """MachineConfig(static=True): the persisted NV config of a machine set up by hand."""
        self.manual_address = parse_address(self.config.address)
        self.status[_MANUAL_ADDRESS] = uefi.EFI_SUCCESS
        if self.config.gateway:
            self.gateways = [self.config.gateway]
            self.status[_GATEWAY] = uefi.EFI_SUCCESS
        if self.config.dns_servers:
            self.dns_servers = [dns_host_port(s)[0] for s in self.config.dns_servers]
            self.status[_DNS_SERVER] = uefi.EFI_SUCCESS
        self._apply_static()

    # ------------------------------------------------------------------ the default interface
    def _apply_static(self):
        """Rebuild the default interface from the Static items (Ip4Config2SetDefaultIf)."""
        if self.manual_address is None:
            self.nic.set_address(None, "0.0.0.0", [], self.dns_servers)
            return
        address, mask = self.manual_address
        subnet = int_to_ip(ip_to_int(address) & ip_to_int(mask))
        routes = [(subnet, mask, "0.0.0.0")] + [("0.0.0.0", "0.0.0.0", gw) for gw in self.gateways]
        self.nic.set_address(address, mask, routes, self.dns_servers)

    def _tear_down(self):
        self.nic.set_address(None, "0.0.0.0", [], [])

    # ------------------------------------------------------------------ DHCP
    def _dhcp_answers(self):
        faults = getattr(self.machine, "faults", None)
        return self.config.dhcp and not getattr(faults, "no_dhcp", False)

    def start_dhcp(self):
        """Ip4StartAutoConfig: start a DHCP4 child unless one is running; returns at once."""
        if self.dhcp is not None:
            return
        delay = float(self.config.dhcp_delay)
        faults = getattr(self.machine, "faults", None)
        if faults is not None and hasattr(faults, "dhcp_delay"):
            delay = faults.dhcp_delay(delay)  # the dhcp_late fault: the answer comes later still
        answer_at = _now() + delay if self._dhcp_answers() else None
        self.dhcp = _Dhcp(answer_at)
        self.dhcp_runs += 1
        self.firmware.add_periodic(DHCP_TICK, uefi.TPL_CALLBACK, self._dhcp_work, "Dhcp4")

    def stop_dhcp(self):
        """Ip4Config2CleanDhcp4: stop and destroy the DHCP4 child."""
        if self.dhcp is not None:
            self.dhcp = None
            self.firmware.remove_periodic(self._dhcp_work)

    def _dhcp_tick(self):
        """DHCP4's timer: deliver the lease when it is due, or give up."""
        dhcp = self.dhcp
        if dhcp is None:
            return
        now = _now()
        if dhcp.answer_at is not None and now >= dhcp.answer_at:
            self.stop_dhcp()
            self._dhcp_complete()
        elif now >= dhcp.give_up_at:
            # EDK2: failure configures nothing and is not retried until Policy=Dhcp is set
            # again or the link flaps (docs/edk2.md section 5.2).
            self.stop_dhcp()

    def _dhcp_complete(self):
        """Ip4Config2OnDhcp4Complete: address, subnet route, default route, DNS item."""
        address, mask = parse_address(self.config.address)
        subnet = int_to_ip(ip_to_int(address) & ip_to_int(mask))
        routes = [(subnet, mask, "0.0.0.0")]
        if self.config.gateway:
            routes.append(("0.0.0.0", "0.0.0.0", self.config.gateway))
        self.dns_servers = [dns_host_port(s)[0] for s in self.config.dns_servers]
        if self.dns_servers:
            self.status[_DNS_SERVER] = uefi.EFI_SUCCESS
        self.dhcp_success = True
        # EDK2 quirk (Ip4Config2Impl.c, docs/edk2.md section 5.2): no notify event is signalled on DHCP
        # completion -- not for InterfaceInfo, not for DnsServer. Callers must poll.
        self.nic.set_address(address, mask, routes, self.dns_servers)

    def use_default_address(self):
        """Facts 3.7: an IP4 child configured with UseDefaultAddress while the service has no
        address under policy Static switches the policy to Dhcp, exactly as SetData would."""
        if self.policy == _STATIC and self.nic.ip4.address is None:
            with self.firmware.at_tpl(uefi.TPL_CALLBACK):
                self._set_policy(_DHCP)
                self._signal(_POLICY)
            return True
        return False

    # ------------------------------------------------------------------ SetData
    def setters(self):
        return {_POLICY: self._set_policy_data, _MANUAL_ADDRESS: self._set_manual_address,
                _GATEWAY: self._set_gateway, _DNS_SERVER: self._set_dns_server}

    def _set_policy_data(self, size, data):
        if size != POLICY_SIZE:
            return uefi.EFI_BAD_BUFFER_SIZE
        policy = c_uint32.from_address(data).value  # an enum: compared unsigned
        if policy >= efidefs.Ip4Config2PolicyMax:
            return uefi.EFI_INVALID_PARAMETER
        return self._set_policy(policy)

    def _set_policy(self, policy):
        """Ip4Config2SetPolicy + Ip4Config2OnPolicyChanged."""
        if policy == self.policy:
            if policy == _STATIC or self.dhcp_success:
                return uefi.EFI_ABORTED
            # Dhcp that has not succeeded: the default interface is rebuilt and DHCP is
            # (re)started unless a DHCP child is already running.
            self._tear_down()
            self.start_dhcp()
            return uefi.EFI_SUCCESS
        # A policy change clears ManualAddress, Gateway and DnsServer (their events fire) and
        # tears down the default interface: children bound to the old address lose it.
        self.manual_address = None
        self.gateways = []
        self.dns_servers = []
        for data_type in (_MANUAL_ADDRESS, _GATEWAY, _DNS_SERVER):
            self.status[data_type] = uefi.EFI_NOT_FOUND
            self._signal(data_type)
        self.stop_dhcp()
        self.dhcp_success = False
        self.policy = policy
        self._tear_down()
        if policy == _DHCP:
            # EDK2 quirk (docs/edk2.md section 5.2): SetData(Policy=Dhcp) returns EFI_SUCCESS, not
            # EFI_NOT_READY; DHCP runs in the background and its completion is silent.
            self.start_dhcp()
        return uefi.EFI_SUCCESS

    def _set_manual_address(self, size, data):
        if size % MANUAL_ADDRESS_SIZE:
            return uefi.EFI_BAD_BUFFER_SIZE
        if self.policy != _STATIC:
            return uefi.EFI_WRITE_PROTECTED
        if size == 0:
            self.manual_address = None  # clears the address: the interface is unconfigured
            self.status[_MANUAL_ADDRESS] = uefi.EFI_NOT_FOUND
            self._apply_static()
            return uefi.EFI_SUCCESS
        new = efidefs.EFI_IP4_CONFIG2_MANUAL_ADDRESS.from_address(data)
        address, mask = efidefs.ipv4_text(new.Address), efidefs.ipv4_text(new.SubnetMask)
        if not _station_address_valid(ip_to_int(address), ip_to_int(mask)):
            return uefi.EFI_INVALID_PARAMETER
        if self.manual_address == (address, mask):
            return uefi.EFI_ABORTED
        # EDK2 applies a manual IPv4 address synchronously (no DAD, docs/edk2.md section 5.2).
        self.manual_address = (address, mask)
        self.status[_MANUAL_ADDRESS] = uefi.EFI_SUCCESS
        self._apply_static()
        return uefi.EFI_SUCCESS

    def _set_gateway(self, size, data):
        if size % 4:
            return uefi.EFI_BAD_BUFFER_SIZE
        if self.policy != _STATIC:
            return uefi.EFI_WRITE_PROTECTED
        if size == 0:
            self.gateways = []
            self.status[_GATEWAY] = uefi.EFI_NOT_FOUND
            self._apply_static()
            return uefi.EFI_SUCCESS
        gateways = _read_ipv4_list(data, size)
        mask = ip_to_int(self.nic.ip4.netmask) if self.nic.ip4.address else 0
        for i, gateway in enumerate(gateways):
            if mask and not _is_unicast(ip_to_int(gateway), mask):
                return uefi.EFI_INVALID_PARAMETER
            if gateway in gateways[i + 1:]:
                return uefi.EFI_INVALID_PARAMETER
        if self.status[_GATEWAY] == uefi.EFI_SUCCESS and gateways == self.gateways:
            return uefi.EFI_ABORTED
        self.gateways = gateways  # replaces the default routes
        self.status[_GATEWAY] = uefi.EFI_SUCCESS
        self._apply_static()
        return uefi.EFI_SUCCESS

    def _set_dns_server(self, size, data):
        if size % 4:
            return uefi.EFI_BAD_BUFFER_SIZE
        if self.policy != _STATIC:
            return uefi.EFI_WRITE_PROTECTED
        if size == 0:
            self.dns_servers = []
            self.status[_DNS_SERVER] = uefi.EFI_NOT_FOUND
            self.nic.ip4.dns_servers = []
            return uefi.EFI_SUCCESS
        servers = _read_ipv4_list(data, size)
        for server in servers:
            if server in ("0.0.0.0", "255.255.255.255"):
                return uefi.EFI_INVALID_PARAMETER
        if self.status[_DNS_SERVER] == uefi.EFI_SUCCESS and servers == self.dns_servers:
            return uefi.EFI_ABORTED
        self.dns_servers = servers
        self.status[_DNS_SERVER] = uefi.EFI_SUCCESS
        self.nic.ip4.dns_servers = list(servers)
        return uefi.EFI_SUCCESS

    # ------------------------------------------------------------------ GetData
    def _GetData(self, this, data_type, size, data):
        # EfiIp4Config2GetData
        if not this or not size or (size[0] != 0 and not data):
            return uefi.EFI_INVALID_PARAMETER
        if not 0 <= data_type < _MAXIMUM:
            return uefi.EFI_NOT_FOUND
        with self.firmware.at_tpl(uefi.TPL_CALLBACK):
            status = self.status[data_type]
            if status != uefi.EFI_SUCCESS:
                # Unset items are EFI_NOT_FOUND; under Dhcp ManualAddress and Gateway always
                # are (the DHCP router shows only in InterfaceInfo.RouteTable).
                return status
            if data_type == _INTERFACE_INFO:
                return self._get_interface_info(size, data or 0)
            if data_type == _POLICY:
                policy = c_uint32(self.policy)  # named: a temporary is freed before string_at reads it
                payload = ctypes.string_at(ctypes.addressof(policy), POLICY_SIZE)
            elif data_type == _MANUAL_ADDRESS:
                payload = _ipv4_bytes(self.manual_address)
            elif data_type == _GATEWAY:
                payload = _ipv4_bytes(self.gateways)
            else:
                payload = _ipv4_bytes(self.dns_servers)
            if size[0] < len(payload):
                size[0] = len(payload)
                return uefi.EFI_BUFFER_TOO_SMALL
            size[0] = len(payload)
            ctypes.memmove(data, payload, len(payload))
            return uefi.EFI_SUCCESS

    def _get_interface_info(self, size, data):
        """Ip4Config2GetIfInfo: the struct, then the route table right after it, in the caller's
        buffer; RouteTable points there."""
        ip4 = self.nic.ip4
        routes = ip4.routes if ip4.address else []
        needed = INTERFACE_INFO_SIZE + len(routes) * ROUTE_SIZE
        if size[0] < needed:
            # EDK2 quirk (docs/edk2.md section 5.2): a buffer of exactly sizeof(INTERFACE_INFO) is too small as
            # soon as any route exists, i.e. once the interface is configured.
            size[0] = needed
            return uefi.EFI_BUFFER_TOO_SMALL
        info = efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO.from_address(data)
        ctypes.memset(data, 0, INTERFACE_INFO_SIZE)
        for i, char in enumerate(self.nic.name[:efidefs.EFI_IP4_CONFIG2_INTERFACE_ID_MAXLEN - 1]):
            info.Name[i] = ord(char)
        info.IfType = NET_IFTYPE_ETHERNET
        info.HwAddressSize = len(self.nic.mac)
        info.HwAddress.Addr[:len(self.nic.mac)] = list(bytearray(self.nic.mac))
        info.StationAddress = efidefs.ipv4(ip4.address or "0.0.0.0")
        info.SubnetMask = efidefs.ipv4(ip4.netmask if ip4.address else "0.0.0.0")
        info.RouteTableSize = len(routes)
        if routes:
            table = (efidefs.EFI_IP4_ROUTE_TABLE * len(routes)).from_address(data + INTERFACE_INFO_SIZE)
            for entry, (subnet, mask, gateway) in zip(table, routes):
                entry.SubnetAddress = efidefs.ipv4(subnet)
                entry.SubnetMask = efidefs.ipv4(mask)
                entry.GatewayAddress = efidefs.ipv4(gateway)
        # EDK2 (Ip4Config2GetIfInfo, measured on OVMF: 00_ip4_nomapping) points RouteTable just
        # past the structure even when there is no route.
        info.RouteTable = ctypes.cast(c_void_p(data + INTERFACE_INFO_SIZE), POINTER(efidefs.EFI_IP4_ROUTE_TABLE))
        return uefi.EFI_SUCCESS  # *DataSize is left as the caller gave it, as in EDK2

    # ------------------------------------------------------------------ driver interface
    def shutdown(self):
        self.stop_dhcp()
        self.firmware.uninstall_protocol(self.nic.handle, efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID)


def install(machine):
    """Install EFI_IP4_CONFIG2_PROTOCOL on the NIC handle; returns the driver."""
    return Ip4Config2Driver(machine)


def request_dhcp(machine):
    """The UseDefaultAddress side effect (docs/edk2.md section 3.7), for the TCP4/UDP4/DNS4 models.

    EDK2 Ip4Dxe (Ip4ConfigProtocol): configuring an IP4 child with UseDefaultAddress while the
    service has no address and the policy is Static switches the policy to Dhcp through
    SetData (Policy notify events fire; the change is persisted). Returns True if it did.
    """
    driver = machine.drivers.get("ip4config2")
    if driver is None:
        return False
    return driver.use_default_address()

