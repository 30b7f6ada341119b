"""Models EDK2 NetworkPkg/Udp4Dxe (Udp4Main.c, Udp4Impl.c); quirks are marked `# EDK2 quirk:`.

One ``Udp4Driver`` per NIC installs EFI_UDP4_SERVICE_BINDING_PROTOCOL on the NIC handle; each
child (``Udp4Child``) is one UDP4_INSTANCE_DATA. What is modelled (docs/edk2.md):

* Configure (4.2): validation, Configure(NULL) on an unconfigured child is a no-op, the
  reconfigure rules (EFI_ALREADY_STARTED), UseDefaultAddress without an address (EFI_NO_MAPPING and
  the switch of the NIC's policy to Dhcp, 3.7), port clashes (EFI_ACCESS_DENIED),
  AllowDuplicatePort, AcceptAnyPort and the driver-global ephemeral counter.
* Transmit: every EFI_INVALID_PARAMETER rule, EFI_BAD_BUFFER_SIZE above 65507 bytes, no route ->
  EFI_NOT_FOUND at once, session data overriding the configured addresses and ports. The datagram
  goes out inside Transmit -- MNP copies the fragments into its transmit buffer and SNP sends it
  synchronously -- and the token is signalled before Transmit returns, as OVMF does (fwtest
  trace 30_udp_basic: every udp-transmit completes "sync").
* Receive: the driver owns each delivered EFI_UDP4_RECEIVE_DATA until the application signals its
  RecycleSignal; datagrams without a posted token queue without limit and die after
  ReceiveTimeout; ICMP errors complete the next receive token with RxData NULL.

Once a call is accepted, what follows -- host ports, demultiplexing, delivery and recycling,
ICMP errors, receive timeouts, the loopback wire and what it cannot express -- is
``udp4_engine.Udp4Stack``, which the driver extends.

The entry points that read family-specific structures (Configure, Transmit's validation,
Groups, GetModeData) are overridden in udp6.py.
"""

from __future__ import print_function

import ctypes
from ctypes import POINTER

from bitsnet import efidefs
from efisim import uefi
from efisim.firmware import FIRMWARE, _now, efiapi, pointer_address
from efisim.nic import IPV4, ip_to_int
from efisim.service_binding import ServiceBinding
from efisim.tcp4_tcb import addressed_to_self
from efisim.udp4_engine import (  # noqa: F401 (_Transmit: udp6.py imports it from here)
    LIMITED_BROADCAST, UDP4_MAX_DATA_SIZE, UNRESOLVED_DELAY, Udp4Child, Udp4Stack, _same_subnet, _Transmit)

S = uefi  # status codes

UDP4_TIMEOUT_INTERVAL = 0.050  # Udp4CheckTimeout runs every 50 ms (ReceiveTimeout granularity)
IP4_FRAGMENT_PAYLOAD = 1480  # a 1500-byte MTU carries 1480 bytes of IP payload per fragment
MAX_PACKET_SIZE = 1480
EFI_IP_PROTO_UDP = 17
EFI_SIMPLE_NETWORK_INITIALIZED = 2


def _ip(address_struct):
    return efidefs.ipv4_text(address_struct)


def _valid_netmask(mask):
    inverted = ~ip_to_int(mask) & 0xFFFFFFFF
    return inverted & (inverted + 1) == 0


def _unicast(address, mask):
    """NetIp4IsUnicast: not 0, not class D/E, not the subnet's network or broadcast address."""
    ip, m = ip_to_int(address), ip_to_int(mask)
    if ip == 0 or ip >= 0xE0000000:
        return False
    if m and m != 0xFFFFFFFF and (ip & ~m & 0xFFFFFFFF in (0, ~m & 0xFFFFFFFF)):
        return False
    return True


def _multicast(address):
    return 0xE0000000 <= ip_to_int(address) <= 0xEFFFFFFF


class Udp4Driver(Udp4Stack, ServiceBinding):
    """Udp4Dxe on one NIC: the service binding, its children, their host sockets.

    udp6.Udp6Driver subclasses it with the class attributes below and its own entry points for
    what reads family-specific structures."""

    SERVICE_BINDING = efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL  # type: type
    PROTOCOL = efidefs.EFI_UDP4_PROTOCOL  # type: type
    CONFIG_DATA = efidefs.EFI_UDP4_CONFIG_DATA  # type: type
    LEDGER_PREFIX = "udp4"
    ETHER_TYPE = 0x0800
    FRAGMENT_PAYLOAD = IP4_FRAGMENT_PAYLOAD
    family = IPV4
    receive_data = staticmethod(efidefs.udp4_receive_data)
    UNRESOLVED_DELAY = UNRESOLVED_DELAY

    def __init__(self, machine):
        Udp4Stack.__init__(self, machine)
        self._by_interface = {}  # type: dict
        self.install_service_binding(self.SERVICE_BINDING, self.PROTOCOL)
        self._timeout_work = self.check_timeout  # one bound method, so remove_periodic finds it
        FIRMWARE.add_periodic(UDP4_TIMEOUT_INTERVAL, uefi.TPL_CALLBACK, self._timeout_work, "UdpCheckTimeout")

    def refuse_create(self):
        faults = self.faults
        return faults is not None and faults.take_create_fail()  # fault: Udp4CreateChild's allocation failed

    # ------------------------------------------------------------------ bookkeeping
    def ledger(self):
        with FIRMWARE.lock:
            return {
                self.LEDGER_PREFIX + "_children": len(self.children),
                self.LEDGER_PREFIX + "_tokens": sum(len(c.tokens) for c in self.children.values()) + len(self._delayed),
                self.LEDGER_PREFIX + "_unrecycled": len(self._by_event),
            }

    def shutdown(self):
        with FIRMWARE.lock:
            FIRMWARE.remove_periodic(self._timeout_work)
            for port in list(self.host_ports.values()):
                port.close()
            self.host_ports.clear()
            self._delayed.clear()
        self.uninstall_service_binding()

    # ------------------------------------------------------------------ children
    def new_child(self):
        child = Udp4Child(self)
        self.children[child.handle] = child
        self._by_interface[child.address] = child
        FIRMWARE.install_protocol(child.handle, self.PROTOCOL.guid, child.address)
        return child

    def destroy(self, child):
        if child.configured:
            self.unconfigure(child, destroying=True)
        self.deliver_delayed(child)
        self.children.pop(child.handle, None)
        self._by_interface.pop(child.address, None)
        self._retired.append(child.interface)
        FIRMWARE.uninstall_protocol(child.handle, self.PROTOCOL.guid)

    # ------------------------------------------------------------------ EFI entry points
    def _call(self, this, body, args):
        with FIRMWARE.lock:
            child = self._by_interface.get(pointer_address(this))
            if child is None:
                return S.EFI_INVALID_PARAMETER
            if FIRMWARE.tpl > uefi.TPL_CALLBACK:
                # Every UDP4 function raises the TPL to TPL_CALLBACK; RaiseTPL to a lower TPL
                # ASSERTs in EDK2 (a caller at TPL_NOTIFY is a bug). Udp4 takes no lock, so a
                # call from a TPL_CALLBACK notify is fine, unlike TCP4 (docs/edk2.md section 2.3).
                FIRMWARE.record_crash("UDP4 %s called at TPL %d > TPL_CALLBACK" % (body.__name__, FIRMWARE.tpl))
            with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
                return body(child, *args)

    @efiapi()
    def _GetModeData(self, this, config, ip4, mnp, snp):
        return self._call(this, self.get_mode_data, (config, ip4, mnp, snp))

    @efiapi()
    def _Configure(self, this, config):
        return self._call(this, self.configure, (config,))

    @efiapi()
    def _Groups(self, this, join, address):
        return self._call(this, self.groups, (join, address))

    @efiapi()
    def _Routes(self, this, delete, subnet, mask, gateway):
        return self._call(this, self.routes, (delete, subnet, mask, gateway))

    @efiapi()
    def _Transmit(self, this, token):
        return self._call(this, self.transmit, (token,))

    @efiapi()
    def _Receive(self, this, token):
        return self._call(this, self.receive, (token,))

    @efiapi()
    def _Cancel(self, this, token):
        return self._call(this, self.cancel, (token,))

    @efiapi()
    def _Poll(self, this):
        return self._call(this, self.poll, ())

    # ------------------------------------------------------------------ GetModeData
    def get_mode_data(self, child, config, ip4, mnp, snp):
        if config and not child.configured:
            return S.EFI_NOT_STARTED  # only the UDP4 config data needs a configured instance
        if config:
            ctypes.memmove(pointer_address(config), ctypes.addressof(child.config), ctypes.sizeof(child.config))
        if ip4:
            self.fill_ip_mode(child, ip4.contents)
        if mnp:
            m = mnp.contents
            ctypes.memset(ctypes.addressof(m), 0, ctypes.sizeof(m))
            m.ProtocolTypeFilter = self.ETHER_TYPE
            m.EnableUnicastReceive = m.EnableBroadcastReceive = m.FlushQueuesOnReset = True
        if snp:
            mode = snp.contents
            ctypes.memset(ctypes.addressof(mode), 0, ctypes.sizeof(mode))
            mode.State = EFI_SIMPLE_NETWORK_INITIALIZED
            mode.HwAddressSize, mode.MediaHeaderSize, mode.MaxPacketSize = 6, 14, 1500
            for i, byte in enumerate(bytearray(self.nic.mac)):
                mode.CurrentAddress.Addr[i] = mode.PermanentAddress.Addr[i] = byte
                mode.BroadcastAddress.Addr[i] = 0xFF
            mode.IfType = 1
            mode.MediaPresentSupported = mode.MediaPresent = True
        return S.EFI_SUCCESS

    def fill_ip_mode(self, child, mode):
        ctypes.memset(ctypes.addressof(mode), 0, ctypes.sizeof(mode))
        mode.IsStarted = child.configured or child.no_mapping
        mode.MaxPacketSize = MAX_PACKET_SIZE
        mode.IsConfigured = child.configured
        if not mode.IsStarted:
            return
        cfg = mode.ConfigData
        cfg.DefaultProtocol = EFI_IP_PROTO_UDP
        cfg.AcceptIcmpErrors = True
        cfg.AcceptBroadcast = True
        cfg.UseDefaultAddress = child.config.UseDefaultAddress
        cfg.StationAddress = efidefs.ipv4(child.station)
        cfg.SubnetMask = efidefs.ipv4(child.mask)
        cfg.TypeOfService, cfg.TimeToLive = child.config.TypeOfService, child.config.TimeToLive
        cfg.DoNotFragment = child.config.DoNotFragment
        cfg.ReceiveTimeout = 0xFFFFFFFF  # the IP child itself never receives (docs/edk2.md section 4.2 Configure)
        routes = list(child.routes) + list(self.nic.ip4.routes)
        if routes:
            # Driver-internal memory: the caller must not free it.
            table = (efidefs.EFI_IP4_ROUTE_TABLE * len(routes))()
            for entry, (subnet, mask, gateway) in zip(table, routes):
                entry.SubnetAddress = efidefs.ipv4(subnet)
                entry.SubnetMask = efidefs.ipv4(mask)
                entry.GatewayAddress = efidefs.ipv4(gateway)
            child.route_table = table
            mode.RouteCount = len(routes)
            mode.RouteTable = ctypes.cast(table, POINTER(efidefs.EFI_IP4_ROUTE_TABLE))
        if child.groups:
            groups = (efidefs.EFI_IPv4_ADDRESS * len(child.groups))(*[efidefs.ipv4(g) for g in child.groups])
            child.group_table = groups
            mode.GroupCount = len(child.groups)
            mode.GroupTable = ctypes.cast(groups, POINTER(efidefs.EFI_IPv4_ADDRESS))

    # ------------------------------------------------------------------ Configure
    def configure(self, child, config):
        if not config:
            # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): Configure(NULL) on an unconfigured instance is
            # EFI_SUCCESS and does nothing -- a no-mapping flag is left as it is (TCP4 says
            # EFI_ACCESS_DENIED here).
            if child.configured:
                self.unconfigure(child)
            return S.EFI_SUCCESS
        cfg = config.contents
        station, mask, remote = _ip(cfg.StationAddress), _ip(cfg.SubnetMask), _ip(cfg.RemoteAddress)
        if not cfg.UseDefaultAddress:
            if not _valid_netmask(mask) or \
                    not (station == "0.0.0.0" or (mask != "0.0.0.0" and _unicast(station, mask))) or \
                    remote == LIMITED_BROADCAST:
                return S.EFI_INVALID_PARAMETER
        if child.configured:
            if not self.reconfigurable(child.config, cfg):
                return S.EFI_ALREADY_STARTED
            # Only the IP-level parameters change (Udp4Configure, reconfigure branch).
            for name in ("TypeOfService", "TimeToLive", "DoNotFragment", "ReceiveTimeout", "TransmitTimeout"):
                setattr(child.config, name, getattr(cfg, name))
            return S.EFI_SUCCESS
        if cfg.UseDefaultAddress:
            if self.nic.ip4.address is None:
                # EDK2 quirk (Ip4Dxe, docs/edk2.md section 3.7): no default address yet -> EFI_NO_MAPPING; the
                # instance is "no-mapping", not configured, until Configure is called again; and
                # under policy Static the IP4 service switches the NIC's policy to Dhcp.
                child.no_mapping = True
                try:
                    from efisim import ip4config2
                    ip4config2.request_dhcp(self.machine)
                except ImportError:
                    pass
                return S.EFI_NO_MAPPING
            station, mask = self.nic.ip4.address, self.nic.ip4.netmask
        return self.apply_config(child, cfg, station, mask, remote)

    def apply_config(self, child, cfg, station, mask, remote):
        """The family-independent end of Configure, once the station address is known."""
        child.no_mapping = False
        ctypes.memmove(ctypes.addressof(child.config), ctypes.addressof(cfg), ctypes.sizeof(cfg))
        child.station, child.mask = station, mask
        status, port = self.bind(child, station, cfg)
        if status != S.EFI_SUCCESS:
            return status  # the IP child is reset; nothing is configured
        child.port = port
        self.store_station(child.config, station, mask, port)
        child.remote, child.rport = remote, cfg.RemotePort
        child.routes = []
        child.configured = True
        child.icmp_error = S.EFI_SUCCESS
        return S.EFI_SUCCESS

    @staticmethod
    def store_station(config, station, mask, port):
        """The real station address, mask and port, for GetModeData."""
        config.StationAddress = efidefs.ipv4(station)
        config.SubnetMask = efidefs.ipv4(mask)
        config.StationPort = port

    @staticmethod
    def reconfigurable(old, new):
        """Udp4IsReconfigurable: which changes a configured instance accepts (docs/edk2.md section 4.2)."""
        for name in ("AcceptAnyPort", "AcceptBroadcast", "AcceptPromiscuous", "AllowDuplicatePort"):
            if bool(getattr(old, name)) != bool(getattr(new, name)):
                return False
        # EDK2 quirk (Udp4Dxe): the stored port is the one really bound, so re-sending a config
        # with StationPort 0 after an ephemeral bind is a change -> EFI_ALREADY_STARTED.
        if not new.AcceptAnyPort and new.StationPort != old.StationPort:
            return False
        if not new.AcceptPromiscuous:
            if bool(new.UseDefaultAddress) != bool(old.UseDefaultAddress):
                return False
            if not new.UseDefaultAddress and (_ip(new.StationAddress) != _ip(old.StationAddress) or
                                              _ip(new.SubnetMask) != _ip(old.SubnetMask)):
                return False
        if _ip(new.RemoteAddress) != _ip(old.RemoteAddress):
            return False
        if _ip(new.RemoteAddress) != "0.0.0.0" and new.RemotePort != old.RemotePort:
            return False
        return True

    def state_status(self, child):
        """What Groups/Routes/Transmit/Receive/Cancel return on an instance that is not usable."""
        if child.no_mapping:
            return S.EFI_NO_MAPPING
        if not child.configured:
            return S.EFI_NOT_STARTED
        return S.EFI_SUCCESS

    # ------------------------------------------------------------------ Groups / Routes
    def groups(self, child, join, address):
        group = self.family.text(address.contents) if address else None
        if join and (group is None or not self.multicast(group)):
            return S.EFI_INVALID_PARAMETER
        if not join and group is not None and not self.multicast(group):
            return S.EFI_INVALID_PARAMETER
        status = self.state_status(child)
        if status != S.EFI_SUCCESS:
            return status
        if join:
            if group in child.groups:
                return S.EFI_ALREADY_STARTED  # Ip4Groups: already joined
            child.groups.append(group)
            return S.EFI_SUCCESS
        if group is None:
            child.groups = []  # leave every group
            return S.EFI_SUCCESS
        if group not in child.groups:
            return S.EFI_NOT_FOUND
        child.groups.remove(group)
        return S.EFI_SUCCESS

    @staticmethod
    def multicast(address):
        return _multicast(address)

    def routes(self, child, delete, subnet, mask, gateway):
        status = self.state_status(child)
        if status != S.EFI_SUCCESS:
            return status
        if not subnet or not mask or not gateway:
            return S.EFI_INVALID_PARAMETER
        route = (_ip(subnet.contents), _ip(mask.contents), _ip(gateway.contents))
        if not _valid_netmask(route[1]):
            return S.EFI_INVALID_PARAMETER
        if route[2] != "0.0.0.0" and child.mask != "0.0.0.0" and \
                not _same_subnet(route[2], child.station, child.mask):
            return S.EFI_INVALID_PARAMETER  # Ip4Routes: the gateway must be on-link
        if delete:
            if route not in child.routes:
                return S.EFI_NOT_FOUND
            child.routes.remove(route)
            return S.EFI_SUCCESS
        if route in child.routes:
            return S.EFI_ACCESS_DENIED
        child.routes.append(route)
        return S.EFI_SUCCESS

    # ------------------------------------------------------------------ Transmit
    def transmit(self, child, token_pointer):
        token = pointer_address(token_pointer)
        if not token:
            return S.EFI_INVALID_PARAMETER
        status = self.state_status(child)
        if status != S.EFI_SUCCESS:
            return status
        status, tx = self.validate_tx(child, token_pointer.contents)
        if status != S.EFI_SUCCESS:
            return status
        if self.token_exists(child, token):
            return S.EFI_ACCESS_DENIED
        faults = self.faults
        if faults is not None and faults.take_tx_fail():
            return S.EFI_OUT_OF_RESOURCES
        if self.route(child, tx.destination) is None and not tx.gateway:
            # EDK2 (docs/edk2.md section 4.2): no matching route and no default gateway -> EFI_NOT_FOUND, now.
            return S.EFI_NOT_FOUND
        tx.token = token
        child.tokens.append(token)
        if addressed_to_self(self.machine, self.family, tx.destination, tx.dport, self):
            # EDK2 quirk (no loopback, UNRESOLVED_DELAY): nothing is sent; NO_MAPPING later.
            child.unresolved.append((_now() + self.UNRESOLVED_DELAY, token))
            return S.EFI_SUCCESS
        self.wire_send(child, tx)
        self.complete(child, token, S.EFI_SUCCESS)  # signalled before Transmit returns (OVMF)
        return S.EFI_SUCCESS

    def validate_tx(self, child, completion):
        """Udp4ValidateTxToken (docs/edk2.md section 4.2 Transmit): (status, _Transmit or None)."""
        if not completion.Event or not completion.Packet.TxData:
            return S.EFI_INVALID_PARAMETER, None
        tx_address = pointer_address(completion.Packet.TxData)
        head = efidefs.EFI_UDP4_TRANSMIT_DATA.from_address(tx_address)
        count = head.FragmentCount
        if count == 0:
            return S.EFI_INVALID_PARAMETER, None
        fragments = self.read_fragments(efidefs.udp4_transmit_data(count).from_address(tx_address).FragmentTable,
                                        head.DataLength)
        if fragments is None:
            return S.EFI_INVALID_PARAMETER, None
        gateway = None
        if head.GatewayAddress:
            gateway = _ip(head.GatewayAddress.contents)
            if not _unicast(gateway, "0.0.0.0") or (not child.config.UseDefaultAddress and
                                                     child.mask != "0.0.0.0" and
                                                     not _same_subnet(gateway, child.station, child.mask)):
                return S.EFI_INVALID_PARAMETER, None
        source, sport = child.station, child.port
        destination, dport = child.remote, child.rport
        if head.UdpSessionData:
            session = head.UdpSessionData.contents
            session_source = _ip(session.SourceAddress)
            if session_source != "0.0.0.0" and not _unicast(session_source, "0.0.0.0"):
                return S.EFI_INVALID_PARAMETER, None
            if session.DestinationPort == 0 and child.rport == 0:
                return S.EFI_INVALID_PARAMETER, None
            if _ip(session.DestinationAddress) == "0.0.0.0":
                return S.EFI_INVALID_PARAMETER, None
            # Facts 4.2: the session data overrides the configuration per datagram.
            if session_source != "0.0.0.0":
                source = session_source
            if session.SourcePort:
                sport = session.SourcePort
            destination = _ip(session.DestinationAddress)
            if session.DestinationPort:
                dport = session.DestinationPort
        elif child.remote == "0.0.0.0":
            return S.EFI_INVALID_PARAMETER, None  # no destination anywhere
        if head.DataLength > UDP4_MAX_DATA_SIZE:
            return S.EFI_BAD_BUFFER_SIZE, None
        tx = _Transmit(0, fragments, source, sport, destination, dport)
        tx.gateway = gateway
        return S.EFI_SUCCESS, tx

    @staticmethod
    def read_fragments(table, data_length):
        """[(address, length)] of a transmit FragmentTable, or None: EFI_INVALID_PARAMETER."""
        fragments, total = [], 0
        for entry in table:
            # EDK2 quirk (Udp4Dxe/Udp6Dxe, docs/edk2.md section 4.2): a zero-length fragment is invalid, so a
            # zero-length datagram cannot be sent at all.
            if entry.FragmentLength == 0 or not entry.FragmentBuffer:
                return None
            fragments.append((entry.FragmentBuffer, entry.FragmentLength))
            total += entry.FragmentLength
        return fragments if total == data_length else None

    # ------------------------------------------------------------------ Receive / Cancel / Poll
    def receive(self, child, token_pointer):
        token = pointer_address(token_pointer)
        if not token or not token_pointer.contents.Event:
            return S.EFI_INVALID_PARAMETER
        status = self.state_status(child)
        if status != S.EFI_SUCCESS:
            return status
        if self.token_exists(child, token):
            return S.EFI_ACCESS_DENIED
        token_pointer.contents.Packet.RxData = None
        child.tokens.append(token)
        child.rx_tokens.append(token)
        # Facts 4.2: a pending ICMP error, then a queued datagram, complete the token right here.
        self.report_icmp_error(child)
        self.deliver(child)
        return S.EFI_SUCCESS

    def cancel(self, child, token_pointer):
        status = self.state_status(child)
        if status != S.EFI_SUCCESS:
            return status
        token = pointer_address(token_pointer)
        found = self.cancel_tokens(child, token)
        if token and not found:
            return S.EFI_NOT_FOUND
        return S.EFI_SUCCESS

    def poll(self, child):
        # Facts 4.2: the IP child's Poll -> MNP Poll: one frame; EFI_NOT_READY when none waited.
        if not child.configured and not child.no_mapping:
            return S.EFI_NOT_STARTED
        return S.EFI_SUCCESS if self.nic.poll_frame() else S.EFI_NOT_READY


def install(machine):
    """Install EFI_UDP4_SERVICE_BINDING_PROTOCOL on the NIC handle; returns the driver."""
    return Udp4Driver(machine)
