"""EFI_IP6_CONFIG_PROTOCOL on the NIC handle, with stateless autoconfiguration behind policy Automatic.

Models EDK2 NetworkPkg/Ip6Dxe/Ip6ConfigImpl.c (docs/edk2.md section 5.3); quirks are
marked ``# EDK2 quirk``. State, as Ip6ConfigImpl.c keeps it: a policy and one *data item* per
EFI_IP6_CONFIG_DATA_TYPE with a status (EFI_SUCCESS; EFI_NOT_FOUND while unset; EFI_NOT_READY
while Duplicate Address Detection runs on a manual address), its data and its notify events.
The addresses themselves live on the NIC (``nic.ip6``), which the TCP6/UDP6 models read.

The loopback wire has one IPv6 address, ::1, so the model gives the station two addresses:

  link-local   fe80::/64 from the MAC (modified EUI-64), there from the start (EDK2 creates it
               whatever the policy). Listed in InterfaceInfo; the host cannot carry traffic for
               it, so it never makes a TCP6/UDP6 child with StationAddress :: usable.
  "global"     ::1/128, the stand-in for what a router or an administrator would give:
               * policy Automatic: SLAAC completes ``MachineConfig.ipv6_delay`` seconds after the
                 policy became Automatic (``ipv6_delay=None``: no router answers, never), with a
                 default route through the router fe80::1; no notify event is signalled (callers
                 poll InterfaceInfo, or retry a Configure that said EFI_NO_MAPPING);
               * policy Manual: SetData(ManualAddress, ::1/128) runs DAD for ``ipv6_delay``
                 seconds -- SetData returns EFI_NOT_READY and the ManualAddress notify events are
                 signalled when the address is installed (docs/edk2.md section 5.3); with
                 DupAddrDetectTransmits 0 there is no DAD and SetData succeeds at once.
               Other unicast addresses are accepted as EDK2 accepts them, but nothing reaches them.
  DNS servers  ``MachineConfig.ipv6_dns_servers`` (["[::1]:5353"]) is what the router advertises
               (RDNSS/DHCPv6): the DnsServer item once SLAAC completes (policy Automatic), or
               preconfigured with ``ipv6_policy="static"``. As for IPv4 (ip4config2), datagrams to
               [::1]:53 go to the port the simulated server really listens on.

Not modelled: what Ip6Dxe does to IP6 instances whose address disappears (a policy change, a
cleared manual address): children already configured on ::1 keep working.

EDK2's default policy is Manual (docs/edk2.md section 5.3): without an address set by hand, TCP6/UDP6 children
with an unspecified StationAddress get EFI_NO_MAPPING for ever. EDK2's own HTTP and PXE boot
switch the policy to Automatic first; ``MachineConfig(ipv6_policy="automatic")`` models firmware
on which that has happened (the policy is persisted), ``"static"`` a machine configured by hand
(Manual with ManualAddress ::1/128, already through DAD).
"""

from __future__ import print_function

import ctypes
import time
from ctypes import POINTER, c_uint32, c_void_p

from bitsnet import efidefs
from efisim import uefi
from efisim.firmware import TICK, efiapi
from efisim.ipconfig_base import ConfigDriver
from efisim.machine import ipv6_dns_host_port
from efisim.nic import ip6_packed, ip6_text

INTERFACE_INFO_SIZE = ctypes.sizeof(efidefs.EFI_IP6_CONFIG_INTERFACE_INFO)  # 136
ADDRESS_INFO_SIZE = ctypes.sizeof(efidefs.EFI_IP6_ADDRESS_INFO)  # 17
ROUTE_SIZE = ctypes.sizeof(efidefs.EFI_IP6_ROUTE_TABLE)  # 33
MANUAL_ADDRESS_SIZE = ctypes.sizeof(efidefs.EFI_IP6_CONFIG_MANUAL_ADDRESS)  # 18
POLICY_SIZE = 4  # sizeof(EFI_IP6_CONFIG_POLICY), a C enum
NET_IFTYPE_ETHERNET = 1
GLOBAL_ADDRESS = "::1"  # the only IPv6 address the host's loopback carries
ROUTER = "fe80::1"  # the router whose advertisement SLAAC "receives"

_now = getattr(time, "monotonic", time.time)

_INTERFACE_INFO = efidefs.Ip6ConfigDataTypeInterfaceInfo
_ALT_INTERFACE_ID = efidefs.Ip6ConfigDataTypeAltInterfaceId
_POLICY = efidefs.Ip6ConfigDataTypePolicy
_DAD_TRANSMITS = efidefs.Ip6ConfigDataTypeDupAddrDetectTransmits
_MANUAL_ADDRESS = efidefs.Ip6ConfigDataTypeManualAddress
_GATEWAY = efidefs.Ip6ConfigDataTypeGateway
_DNS_SERVER = efidefs.Ip6ConfigDataTypeDnsServer
_MAXIMUM = efidefs.Ip6ConfigDataTypeMaximum
_MANUAL = efidefs.Ip6ConfigPolicyManual
_AUTOMATIC = efidefs.Ip6ConfigPolicyAutomatic

POLICIES = {"manual": _MANUAL, "automatic": _AUTOMATIC, "static": _MANUAL}


def valid_unicast(text):
    """NetIp6IsValidUnicast, except that ::1 is accepted (it is the simulator's global address)."""
    packed = bytearray(ip6_packed(text))
    return any(packed) and packed[0] != 0xFF


def _link_local(text):
    return text.lower().startswith("fe80:")


def _read_addresses(address, size):
    raw = ctypes.string_at(address, size)
    return [ip6_text(raw[i:i + 16]) for i in range(0, size, 16)]


class Ip6ConfigDriver(ConfigDriver):
    """The Ip6Config instance of one NIC (``machine.drivers["ip6config"]``)."""

    DATA_TYPE_MAXIMUM = _MAXIMUM
    LEDGER_KEY = "ip6config_notify"
    SIGNAL_UNCHANGED = False  # EDK2 Ip6Config: unchanged data is not a change, no event

    def __init__(self, machine):
        self.machine = machine
        self.firmware = machine.firmware
        self.nic = machine.nic
        self.config = machine.config
        self.policy = POLICIES[self.config.ipv6_policy]
        self.status = {_INTERFACE_INFO: uefi.EFI_SUCCESS, _ALT_INTERFACE_ID: uefi.EFI_SUCCESS,
                       _POLICY: uefi.EFI_SUCCESS, _DAD_TRANSMITS: uefi.EFI_SUCCESS,
                       _MANUAL_ADDRESS: uefi.EFI_NOT_FOUND, _GATEWAY: uefi.EFI_NOT_FOUND,
                       _DNS_SERVER: uefi.EFI_NOT_FOUND}
        # The default alternative interface ID is the MAC's modified EUI-64 (the link-local's).
        self.interface_id = ip6_packed(self.nic.ip6.link_local)[8:]
        self.dad_transmits = 1  # EDK2 default (Ip6Config.h: "The default value ... is 1")
        self.manual = []  # type: list   # [(address, prefix length)] installed
        self.dad = None  # type: tuple or None   # (due time, [(address, prefix)]) while DAD runs
        self.slaac_at = None  # type: float or None   # when the router's advertisement arrives
        self.slaac_done = False
        self.gateways = []  # type: list
        self.dns_servers = []  # type: list
        ConfigDriver.__init__(self)  # the notify lists
        advertised = [ipv6_dns_host_port(server) for server in self.config.ipv6_dns_servers]
        self.advertised_dns = [host for host, _ in advertised]
        self.nic.dns_ports.update(advertised)  # the UDP models redirect port 53 there (see udp4)
        self._work = self._tick  # one bound method, so remove_periodic finds it
        self.firmware.add_periodic(TICK, uefi.TPL_CALLBACK, self._work, "Ip6ConfigTimer")

        self.interface = efidefs.EFI_IP6_CONFIG_PROTOCOL()
        field_types = dict((field[0], field[1]) for field in efidefs.EFI_IP6_CONFIG_PROTOCOL._fields_)
        for name, impl in (("SetData", self._SetData), ("GetData", self._GetData),
                           ("RegisterDataNotify", self._RegisterDataNotify),
                           ("UnregisterDataNotify", self._UnregisterDataNotify)):
            setattr(self.interface, name, field_types[name](efiapi()(impl)))
        self.firmware.install_protocol(self.nic.handle, efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID,
                                       ctypes.addressof(self.interface))
        if self.config.ipv6_policy == "static":
            self.manual = [(GLOBAL_ADDRESS, 128)]  # the persisted configuration, DAD long done
            self.status[_MANUAL_ADDRESS] = uefi.EFI_SUCCESS
            if self.advertised_dns:
                self.dns_servers = list(self.advertised_dns)
                self.status[_DNS_SERVER] = uefi.EFI_SUCCESS
        elif self.policy == _AUTOMATIC:
            self.start_slaac()
        self._apply()

    # ------------------------------------------------------------------ the interface
    def _apply(self):
        """Rebuild nic.ip6 from the policy's items: addresses (link-local first), routes, DNS."""
        ip6 = self.nic.ip6
        addresses = [(ip6.link_local, 64)]
        gateways = list(self.gateways)
        if self.policy == _AUTOMATIC and self.slaac_done:
            addresses.append((GLOBAL_ADDRESS, 128))
            gateways = [ROUTER]
        elif self.policy == _MANUAL:
            addresses += self.manual
        routes = [("::", "fe80::", 64)]
        routes += [("::", address, prefix) for address, prefix in addresses[1:]]
        routes += [(gateway, "::", 0) for gateway in gateways]
        ip6.addresses = addresses
        ip6.routes = routes
        ip6.gateways = gateways
        ip6.dns_servers = list(self.dns_servers)

    def start_slaac(self):
        delay = self.config.ipv6_delay
        self.slaac_done = False
        self.slaac_at = None if delay is None else _now() + float(delay)

    def _tick(self):
        """The timer: the router advertisement (SLAAC) and the end of DAD, when due."""
        now = _now()
        if self.slaac_at is not None and now >= self.slaac_at:
            self.slaac_at = None
            if self.policy == _AUTOMATIC:
                self.slaac_done = True
                if self.advertised_dns:
                    self.dns_servers = list(self.advertised_dns)  # RDNSS: DnsServer, still no event
                    self.status[_DNS_SERVER] = uefi.EFI_SUCCESS
                # Ip6ProcessRouterAdvertise creates the address silently: no Ip6Config event.
                self._apply()
        if self.dad is not None and now >= self.dad[0]:
            _, addresses = self.dad
            self.dad = None
            self.manual = addresses
            self.status[_MANUAL_ADDRESS] = uefi.EFI_SUCCESS
            self._apply()
            # Ip6ManualAddrDadCallback: DAD done, the ManualAddress events fire (docs/edk2.md section 5.3).
            self._signal(_MANUAL_ADDRESS)

    def _dad_delay(self):
        delay = self.config.ipv6_delay
        return 0.0 if delay is None else float(delay)

    # ------------------------------------------------------------------ SetData
    def setters(self):
        return {_ALT_INTERFACE_ID: self._set_interface_id, _POLICY: self._set_policy_data,
                _DAD_TRANSMITS: self._set_dad_transmits, _MANUAL_ADDRESS: self._set_manual_address,
                _GATEWAY: self._set_gateway, _DNS_SERVER: self._set_dns_server}

    def _set_interface_id(self, size, data):
        if size != 8:
            return uefi.EFI_BAD_BUFFER_SIZE
        new = ctypes.string_at(data, 8)
        if new == self.interface_id:
            return uefi.EFI_ABORTED
        self.interface_id = new  # used only if the link-local address were a duplicate
        return uefi.EFI_SUCCESS

    def _set_dad_transmits(self, size, data):
        if size != 4:
            return uefi.EFI_BAD_BUFFER_SIZE
        value = c_uint32.from_address(data).value
        if value == self.dad_transmits:
            return uefi.EFI_ABORTED
        self.dad_transmits = value
        return uefi.EFI_SUCCESS

    def _set_policy_data(self, size, data):
        if size != POLICY_SIZE:
            return uefi.EFI_BAD_BUFFER_SIZE
        policy = c_uint32.from_address(data).value  # an enum: compared unsigned
        if policy > _AUTOMATIC:
            return uefi.EFI_INVALID_PARAMETER
        return self.set_policy(policy)

    def set_policy(self, policy):
        """Ip6ConfigSetPolicy: a change clears ManualAddress, Gateway and DnsServer (their events
        fire) and what SLAAC learnt; Automatic starts SLAAC."""
        if policy == self.policy:
            return uefi.EFI_ABORTED
        self.manual, self.gateways, self.dns_servers = [], [], []
        self.dad = None
        for data_type in (_MANUAL_ADDRESS, _GATEWAY, _DNS_SERVER):
            self.status[data_type] = uefi.EFI_NOT_FOUND
            self._signal(data_type)
        self.policy = policy
        self.slaac_at, self.slaac_done = None, False
        if policy == _AUTOMATIC:
            self.start_slaac()
        self._apply()
        return uefi.EFI_SUCCESS

    def _set_manual_address(self, size, data):
        if size % MANUAL_ADDRESS_SIZE:
            return uefi.EFI_BAD_BUFFER_SIZE
        if self.policy != _MANUAL:
            return uefi.EFI_WRITE_PROTECTED
        if size == 0:
            self.manual = []  # the manual addresses are removed
            self.status[_MANUAL_ADDRESS] = uefi.EFI_NOT_FOUND
            self._apply()
            return uefi.EFI_SUCCESS
        table = (efidefs.EFI_IP6_CONFIG_MANUAL_ADDRESS * (size // MANUAL_ADDRESS_SIZE)).from_address(data)
        addresses = []
        for entry in table:
            address = ip6_text(efidefs.ipv6_bytes(entry.Address))
            if not valid_unicast(address) or _link_local(address) or entry.PrefixLength > 128:
                return uefi.EFI_INVALID_PARAMETER
            if entry.IsAnycast:
                continue  # anycast addresses are not assigned to the interface
            addresses.append((address, entry.PrefixLength))
        if self.status[_MANUAL_ADDRESS] == uefi.EFI_SUCCESS and addresses == self.manual:
            return uefi.EFI_ABORTED
        if self.dad_transmits == 0:
            self.manual = addresses  # no DAD: installed at once
            self.status[_MANUAL_ADDRESS] = uefi.EFI_SUCCESS
            self._apply()
            return uefi.EFI_SUCCESS
        # Facts 5.3: DAD runs on the new addresses; SetData says EFI_NOT_READY and the
        # ManualAddress events fire when it ends (GetData(ManualAddress) is EFI_NOT_READY meanwhile).
        self.manual = []
        self._apply()
        self.status[_MANUAL_ADDRESS] = uefi.EFI_NOT_READY
        self.dad = (_now() + self._dad_delay(), addresses)
        return uefi.EFI_NOT_READY

    def _set_address_list(self, data_type, size, data, allow_link_local):
        if size % 16:
            return uefi.EFI_BAD_BUFFER_SIZE
        if self.policy != _MANUAL:
            return uefi.EFI_WRITE_PROTECTED  # not configurable under Automatic
        current = self.gateways if data_type == _GATEWAY else self.dns_servers
        if size == 0:
            del current[:]
            self.status[data_type] = uefi.EFI_NOT_FOUND
            self._apply()
            return uefi.EFI_SUCCESS
        addresses = _read_addresses(data, size)
        for i, address in enumerate(addresses):
            if not valid_unicast(address) or (_link_local(address) and not allow_link_local):
                return uefi.EFI_INVALID_PARAMETER
            if address in addresses[i + 1:]:
                return uefi.EFI_INVALID_PARAMETER
        if self.status[data_type] == uefi.EFI_SUCCESS and addresses == current:
            return uefi.EFI_ABORTED
        current[:] = addresses
        self.status[data_type] = uefi.EFI_SUCCESS
        self._apply()
        return uefi.EFI_SUCCESS

    def _set_gateway(self, size, data):
        return self._set_address_list(_GATEWAY, size, data, True)

    def _set_dns_server(self, size, data):
        return self._set_address_list(_DNS_SERVER, size, data, False)

    # ------------------------------------------------------------------ GetData
    def _GetData(self, this, data_type, size, data):
        # EfiIp6ConfigGetData
        if not this or not size or (size[0] != 0 and not data):
            return uefi.EFI_INVALID_PARAMETER
        if not 0 <= data_type < _MAXIMUM:
            return uefi.EFI_NOT_FOUND
        with self.firmware.at_tpl(uefi.TPL_CALLBACK):
            status = self.status[data_type]
            if status != uefi.EFI_SUCCESS:
                return status  # EFI_NOT_FOUND while unset, EFI_NOT_READY while DAD runs
            if data_type == _INTERFACE_INFO:
                return self._get_interface_info(size, data or 0)
            if data_type == _POLICY:
                policy = c_uint32(self.policy)  # named: a temporary is freed before string_at reads it
                payload = ctypes.string_at(ctypes.addressof(policy), POLICY_SIZE)
            elif data_type == _DAD_TRANSMITS:
                transmits = c_uint32(self.dad_transmits)
                payload = ctypes.string_at(ctypes.addressof(transmits), 4)
            elif data_type == _ALT_INTERFACE_ID:
                payload = self.interface_id
            elif data_type == _MANUAL_ADDRESS:
                table = (efidefs.EFI_IP6_CONFIG_MANUAL_ADDRESS * len(self.manual))()
                for entry, (address, prefix) in zip(table, self.manual):
                    entry.Address = efidefs.ipv6(ip6_packed(address))
                    entry.PrefixLength = prefix
                payload = ctypes.string_at(ctypes.addressof(table), ctypes.sizeof(table))
            elif data_type == _GATEWAY:
                payload = b"".join(ip6_packed(a) for a in self.gateways)
            else:
                payload = b"".join(ip6_packed(a) for a in self.dns_servers)
            if size[0] < len(payload):
                size[0] = len(payload)
                return uefi.EFI_BUFFER_TOO_SMALL
            size[0] = len(payload)
            ctypes.memmove(data, payload, len(payload))
            return uefi.EFI_SUCCESS

    def _get_interface_info(self, size, data):
        """Ip6ConfigGetIfInfo: the structure, then the address table and the route table right
        after it in the caller's buffer; AddressInfo and RouteTable point there."""
        ip6 = self.nic.ip6
        addresses, routes = list(ip6.addresses), list(ip6.routes)
        needed = INTERFACE_INFO_SIZE + len(addresses) * ADDRESS_INFO_SIZE + len(routes) * ROUTE_SIZE
        if size[0] < needed:
            size[0] = needed
            return uefi.EFI_BUFFER_TOO_SMALL
        info = efidefs.EFI_IP6_CONFIG_INTERFACE_INFO.from_address(data)
        ctypes.memset(data, 0, needed)
        for i, char in enumerate(self.nic.name[:31]):
            info.Name[i] = ord(char)
        info.IfType = NET_IFTYPE_ETHERNET
        info.HwAddressSize = len(self.nic.mac)
        info.HwAddress.Addr[:len(self.nic.mac)] = list(bytearray(self.nic.mac))
        info.AddressInfoCount = len(addresses)
        address_at = data + INTERFACE_INFO_SIZE
        table = (efidefs.EFI_IP6_ADDRESS_INFO * len(addresses)).from_address(address_at)
        for entry, (address, prefix) in zip(table, addresses):
            entry.Address = efidefs.ipv6(ip6_packed(address))
            entry.PrefixLength = prefix
        info.AddressInfo = ctypes.cast(c_void_p(address_at), POINTER(efidefs.EFI_IP6_ADDRESS_INFO))
        route_at = address_at + len(addresses) * ADDRESS_INFO_SIZE
        info.RouteCount = len(routes)
        routes_table = (efidefs.EFI_IP6_ROUTE_TABLE * len(routes)).from_address(route_at)
        for entry, (gateway, destination, prefix) in zip(routes_table, routes):
            entry.Gateway = efidefs.ipv6(ip6_packed(gateway))
            entry.Destination = efidefs.ipv6(ip6_packed(destination))
            entry.PrefixLength = prefix
        if routes:
            info.RouteTable = ctypes.cast(c_void_p(route_at), POINTER(efidefs.EFI_IP6_ROUTE_TABLE))
        return uefi.EFI_SUCCESS

    # ------------------------------------------------------------------ driver interface
    def shutdown(self):
        self.firmware.remove_periodic(self._work)
        self.firmware.uninstall_protocol(self.nic.handle, efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID)


def install(machine):
    """Install EFI_IP6_CONFIG_PROTOCOL on the NIC handle; returns the driver."""
    return Ip6ConfigDriver(machine)
