"""Models EDK2 NetworkPkg/TcpDxe as of edk2-stable202211 (the OVMF of docs/edk2.md section 9); quirks are marked
`# EDK2 quirk:`.

This file is the driver's face: one ``Tcp4Driver`` per NIC installs
EFI_TCP4_SERVICE_BINDING_PROTOCOL on the NIC handle (CreateChild/DestroyChild), gives every child
an EFI_TCP4_PROTOCOL whose entry points make EDK2's call-time checks, in EDK2's order, and return
its call-time statuses (docs/edk2.md section 3.3): GetModeData, Configure (with the states of 3.5,
UseDefaultAddress and EFI_NO_MAPPING of 3.7, ports and the ephemeral counter of 3.8, options of
3.9), Routes, Connect, Accept, Transmit, Receive, Close, Cancel, Poll.

Once a call is accepted, what follows -- the TCB state machine, frames from the host socket,
token completion, TCP timers, peer FIN and RST (3.6) -- is ``tcp4_tcb.Tcp4Stack``, which the
driver extends. Faults (``machine.faults``, faults.py) touch the entry points only where a call
itself fails: Transmit and CreateChild with EFI_OUT_OF_RESOURCES, Poll with an error status.
"""

from __future__ import print_function

import ctypes

from bitsnet import efidefs
from efisim import uefi
from efisim.firmware import FIRMWARE, TICK, efiapi, pointer_address
from efisim.nic import int_to_ip, ip_to_int
from efisim.service_binding import ServiceBinding
from efisim.tcp4_tcb import (CONNECTED, CONNECTING, DEFAULT_OPTIONS, OPTION_RANGES, TCP_PORT_KNOWN, TCP_TICK,
                             _ZERO_ACCEPTED, addressed_to_self, configured_options, Closed, Listen, Tcp4Child,
                             Tcp4Stack, _close_host)

MAX_PACKET_SIZE = 1480  # IP4 MaxPacketSize reported for a 1500-byte MTU
EFI_SIMPLE_NETWORK_INITIALIZED = 2
GARBAGE_POINTER = int("af" * uefi.PTR_SIZE, 16)  # freed/fresh pool fill read as a pointer

S = uefi  # status codes


def _ip(address_struct):
    return efidefs.ipv4_text(address_struct)


def _valid_netmask(mask):
    value = ip_to_int(mask)
    inverted = ~value & 0xFFFFFFFF
    return inverted & (inverted + 1) == 0  # contiguous ones from the top (0 and /32 included)


def _unicast(address, mask):
    """NetIp4IsUnicast: not 0, not class D/E, not the subnet's network or broadcast address."""
    ip, m = ip_to_int(address), ip_to_int(mask)
    if ip == 0 or ip >= 0xE0000000:
        return False
    if m and m != 0xFFFFFFFF and (ip & ~m & 0xFFFFFFFF in (0, ~m & 0xFFFFFFFF)):
        return False
    return True


def _same_subnet(a, b, mask):
    m = ip_to_int(mask)
    return ip_to_int(a) & m == ip_to_int(b) & m



class Tcp4Driver(Tcp4Stack, ServiceBinding):
    """TcpDxe on one NIC: the service binding, its children's protocol interfaces, the TCP timers.

    tcp6.Tcp6Driver subclasses it: the class attributes below, ``family`` (Tcp4Stack) and the
    entry points that read family-specific structures (GetModeData, Configure) differ."""

    SERVICE_BINDING = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL  # type: type
    PROTOCOL = efidefs.EFI_TCP4_PROTOCOL  # type: type
    LEDGER_PREFIX = "tcp4"
    ETHER_TYPE = 0x0800  # MNP's ProtocolTypeFilter for the IP child

    def __init__(self, machine):
        Tcp4Stack.__init__(self, machine)
        self._by_interface = {}  # type: dict   # EFI_TCP4_PROTOCOL address -> child
        self._retired = []  # type: list   # interfaces of destroyed children stay mapped
        self.install_service_binding(self.SERVICE_BINDING, self.PROTOCOL)
        # One bound method each, kept, so that remove_periodic (an identity test) finds them.
        self._periodic = [(TCP_TICK, uefi.TPL_NOTIFY, self.tcp_tick, "TcpTicking"),
                          (TICK, uefi.TPL_CALLBACK, self.deliver_delayed, "TcpDelayedCompletions")]
        for period, tpl, work, name in self._periodic:
            FIRMWARE.add_periodic(period, tpl, work, name)

    # ------------------------------------------------------------------ bookkeeping
    def ledger(self):
        with FIRMWARE.lock:
            return {
                self.LEDGER_PREFIX + "_children": sum(1 for c in self.children.values() if c.app_owned),
                self.LEDGER_PREFIX + "_tokens": sum(len(c.tokens) for c in self.children.values()) + len(self._delayed),
            }

    def shutdown(self):
        """Machine shutdown: reset every host socket still open, so host peers never hang."""
        with FIRMWARE.lock:
            for _, _, work, _ in self._periodic:
                FIRMWARE.remove_periodic(work)
            for child in list(self.children.values()):
                child.unregister()
                _close_host(child.sock, True)
                child.sock = None
            for zombie in self.forgotten:
                zombie.close(reset=True)
            self.forgotten = []
            self._delayed.clear()

    def event_in_use(self, child, token):
        """EDK2 SockTokenExisted: the token's event is already used by a pending token."""
        event = efidefs.EFI_TCP4_COMPLETION_TOKEN.from_address(token).Event
        for other in child.tokens:
            if other == token or efidefs.EFI_TCP4_COMPLETION_TOKEN.from_address(other).Event == event:
                return True
        return False

    # ------------------------------------------------------------------ children and ports
    def new_child(self, parent=None):
        child = Tcp4Child(self, parent)
        self.children[child.handle] = child
        self._by_interface[child.address] = child
        FIRMWARE.install_protocol(child.handle, self.PROTOCOL.guid, child.address)
        return child

    def remove_child(self, child):
        """The protocol-database half of destroying a child (Tcp4Stack.destroy does the rest)."""
        self._by_interface.pop(child.address, None)
        self._retired.append(child.interface)
        FIRMWARE.uninstall_protocol(child.handle, self.PROTOCOL.guid)

    # ------------------------------------------------------------------ ports and routes
    def port_in_use(self, address, port, exclude=None):
        """TcpBind: any configured TCB (listen or connection table, any state -- Closed, TimeWait,
        accepted children included) on exactly (address, port)."""
        return any(c is not exclude and c.configured and c.port == port and c.station == address
                   for c in self.children.values())

    def bind(self, child, address, port):
        """Pick the port (explicit or ephemeral, docs/edk2.md section 3.8) and bind the host socket. Status."""
        if port:
            if self.port_in_use(address, port, child):
                # EDK2 quirk (TcpDxe, docs/edk2.md section 3.8): a clash is INVALID_PARAMETER
                return S.EFI_INVALID_PARAMETER
            if not self.bind_host(child, address, port):
                return S.EFI_INVALID_PARAMETER  # another host process holds it: a clash as well
            child.port = port
            return S.EFI_SUCCESS
        # Ephemeral: a driver-global counter, pre-incremented, wrapping to 1025, skipping ports in use.
        cycled = False
        while True:
            self.next_port += 1
            if self.next_port > 0xFFFF:
                if cycled:
                    return S.EFI_OUT_OF_RESOURCES
                cycled = True
                self.next_port = TCP_PORT_KNOWN + 1
            if self.port_in_use(address, self.next_port, child):
                continue
            if self.bind_host(child, address, self.next_port):
                child.port = self.next_port
                return S.EFI_SUCCESS

    def route(self, child, destination):
        """The next hop for ``destination``, or None: no route (the SYN is never sent)."""
        if child.mask != "0.0.0.0" and _same_subnet(child.station, destination, child.mask):
            return destination
        routes = list(child.routes)
        if not self.old_stack:
            routes += self.nic.ip4.routes  # the IP4 child falls back to the default route table
        # EDK2 quirk (edk2-2015 Tcp4Dxe, docs/bits-efi.md section 3): the TCP4 child's IP4 instance
        # does not use the interface's routes, only the ones added with Routes() on that child.
        best = None
        for subnet, mask, gateway in routes:
            if _same_subnet(subnet, destination, mask):
                if best is None or ip_to_int(mask) > ip_to_int(best[1]):
                    best = (subnet, mask, gateway)
        if best is None:
            return None
        return destination if best[2] == "0.0.0.0" else best[2]

    # ------------------------------------------------------------------ EFI entry points
    def _call(self, this, body, args, locked):
        with FIRMWARE.lock:
            child = self._by_interface.get(pointer_address(this))
            if child is None:
                return S.EFI_INVALID_PARAMETER
            if locked and FIRMWARE.tpl >= uefi.TPL_CALLBACK:
                # EfiAcquireLockOrFail on the socket lock (TPL_CALLBACK) fails when called from a
                # notify function or with the TPL raised (docs/edk2.md section 2.3): EFI_ACCESS_DENIED.
                return S.EFI_ACCESS_DENIED
            with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
                return body(child, *args)

    def refuse_create(self):
        faults = self.faults
        return faults is not None and faults.take_create_fail()  # fault: TcpCreateSocket's allocation failed

    @efiapi()
    def _GetModeData(self, this, state, config, ip4, mnp, snp):
        return self._call(this, self.get_mode_data, (state, config, ip4, mnp, snp), False)

    @efiapi()
    def _Configure(self, this, config):
        return self._call(this, self.configure, (config,), True)

    @efiapi()
    def _Routes(self, this, delete, subnet, mask, gateway):
        return self._call(this, self.routes, (delete, subnet, mask, gateway), False)

    @efiapi()
    def _Connect(self, this, token):
        return self._call(this, self.connect, (token,), True)

    @efiapi()
    def _Accept(self, this, token):
        return self._call(this, self.accept, (token,), True)

    @efiapi()
    def _Transmit(self, this, token):
        return self._call(this, self.transmit, (token,), True)

    @efiapi()
    def _Receive(self, this, token):
        return self._call(this, self.receive, (token,), True)

    @efiapi()
    def _Close(self, this, token):
        return self._call(this, self.close, (token,), True)

    @efiapi()
    def _Cancel(self, this, token):
        return self._call(this, self.cancel, (token,), True)

    @efiapi()
    def _Poll(self, this):
        return self._call(this, self.poll, (), False)

    # ------------------------------------------------------------------ GetModeData
    def get_mode_data(self, child, state, config, ip_mode, mnp, snp):
        if state:
            state[0] = child.state  # readable at any time; Closed when unconfigured
        if config:
            if not child.configured:
                return S.EFI_NOT_STARTED
            data = config.contents
            self.fill_config(child, data)
            option = pointer_address(data.ControlOption)
            if option == GARBAGE_POINTER:
                FIRMWARE.record_crash("%s GetModeData: ConfigData.ControlOption is uninitialised pool "
                                      "(0x%x); EDK2 writes through it (docs/edk2.md section 3.3)"
                                      % (self.LEDGER_PREFIX.upper(), option))
                return S.EFI_DEVICE_ERROR
            if option:  # written through the caller's pointer only when it is non-NULL
                out = data.ControlOption.contents
                for name in DEFAULT_OPTIONS:
                    setattr(out, name, child.options[name])
                out.EnableSelectiveAck = out.EnablePathMtuDiscovery = False
        if ip_mode:
            self.fill_ip_mode(child, ip_mode.contents)
        if mnp:
            m = mnp.contents
            ctypes.memset(ctypes.addressof(m), 0, ctypes.sizeof(m))
            m.ProtocolTypeFilter = self.ETHER_TYPE
            m.EnableUnicastReceive = m.EnableBroadcastReceive = m.FlushQueuesOnReset = True
        if snp:
            self.fill_snp_mode(snp.contents)
        return S.EFI_SUCCESS

    def fill_config(self, child, data):
        """EFI_TCP4_CONFIG_DATA as GetModeData reports it (ControlOption aside)."""
        data.TypeOfService, data.TimeToLive = child.tos, child.ttl
        ap = data.AccessPoint
        ap.UseDefaultAddress = child.use_default
        ap.StationAddress = efidefs.ipv4(child.station)  # with UseDefaultAddress: the actual one
        ap.SubnetMask = efidefs.ipv4(child.mask)
        ap.StationPort = child.port
        ap.RemoteAddress = efidefs.ipv4(child.remote)
        ap.RemotePort = child.rport
        ap.ActiveFlag = child.state != Listen

    def fill_ip_mode(self, child, mode):
        self.fill_ip4_mode(child, mode)

    def fill_ip4_mode(self, child, mode):
        ctypes.memset(ctypes.addressof(mode), 0, ctypes.sizeof(mode))
        mode.IsStarted = child.configured or child.no_mapping
        mode.MaxPacketSize = MAX_PACKET_SIZE
        mode.IsConfigured = child.configured
        if not mode.IsStarted:
            return
        cfg = mode.ConfigData
        cfg.DefaultProtocol = 6  # EFI_IP_PROTO_TCP
        cfg.AcceptIcmpErrors = True
        cfg.UseDefaultAddress = child.use_default
        cfg.StationAddress = efidefs.ipv4(child.station)
        cfg.SubnetMask = efidefs.ipv4(child.mask)
        cfg.TypeOfService, cfg.TimeToLive = child.tos, child.ttl
        cfg.ReceiveTimeout = 0xFFFFFFFF
        routes = list(child.routes) + ([] if self.old_stack else list(self.nic.ip4.routes))
        if routes:
            # Driver-internal memory: the caller must not free it (docs/edk2.md section 3.3 GetModeData).
            table = (efidefs.EFI_IP4_ROUTE_TABLE * len(routes))()
            for entry, (subnet, mask, gateway) in zip(table, routes):
                entry.SubnetAddress = efidefs.ipv4(subnet)
                entry.SubnetMask = efidefs.ipv4(mask)
                entry.GatewayAddress = efidefs.ipv4(gateway)
            child.route_table = table
            mode.RouteCount = len(routes)
            mode.RouteTable = ctypes.cast(table, ctypes.POINTER(efidefs.EFI_IP4_ROUTE_TABLE))

    def fill_snp_mode(self, mode):
        ctypes.memset(ctypes.addressof(mode), 0, ctypes.sizeof(mode))
        mode.State = EFI_SIMPLE_NETWORK_INITIALIZED
        mode.HwAddressSize, mode.MediaHeaderSize, mode.MaxPacketSize = 6, 14, 1500
        for i, byte in enumerate(bytearray(self.nic.mac)):
            mode.CurrentAddress.Addr[i] = mode.PermanentAddress.Addr[i] = byte
            mode.BroadcastAddress.Addr[i] = 0xFF
        mode.IfType = 1
        mode.MediaPresentSupported = mode.MediaPresent = True

    # ------------------------------------------------------------------ Configure
    def configure(self, child, config):
        if not config:
            # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3): Configure(NULL) on an unconfigured child -- a fresh
            # one, or one stuck in no-mapping -- is EFI_ACCESS_DENIED, not a no-op.
            if not child.configured:
                return S.EFI_ACCESS_DENIED
            self.unconfigure(child)
            return S.EFI_SUCCESS
        data = config.contents
        ap = data.AccessPoint
        remote, station, mask = _ip(ap.RemoteAddress), _ip(ap.StationAddress), _ip(ap.SubnetMask)
        if remote == "255.255.255.255":
            return S.EFI_INVALID_PARAMETER
        if ap.ActiveFlag and (ap.RemotePort == 0 or remote == "0.0.0.0"):
            return S.EFI_INVALID_PARAMETER
        if not ap.UseDefaultAddress:
            if not _valid_netmask(mask) or (mask != "0.0.0.0" and not _unicast(station, mask)):
                return S.EFI_INVALID_PARAMETER
        status, option = self.control_option(data)
        if status != S.EFI_SUCCESS:
            return status
        if child.configured:
            return S.EFI_ACCESS_DENIED  # reset with Configure(NULL) first
        if ap.UseDefaultAddress:
            if self.old_stack:
                # EDK2 quirk (edk2-2015 Tcp4Dxe, docs/bits-efi.md section 2): UseDefaultAddress=TRUE
                # fails with EFI_ALREADY_STARTED; the station address must be given explicitly.
                return S.EFI_ALREADY_STARTED
            if self.nic.ip4.address is None:
                # EDK2 quirk (Ip4Dxe, docs/edk2.md section 3.7): no default address yet -> EFI_NO_MAPPING, the
                # socket stays "no-mapping" until Configure is called again; and under policy
                # Static the IP4 service switches the NIC's policy to Dhcp as a side effect.
                child.no_mapping = True
                try:
                    from efisim import ip4config2
                    ip4config2.request_dhcp(self.machine)
                except ImportError:
                    pass
                return S.EFI_NO_MAPPING
            station, mask = self.nic.ip4.address, self.nic.ip4.netmask
        routes = []
        if mask != "0.0.0.0":
            subnet = int_to_ip(ip_to_int(station) & ip_to_int(mask))
            routes.append((subnet, mask, "0.0.0.0"))  # the directly connected subnet
        return self.apply_config(child, option, bool(ap.ActiveFlag), (station, mask, ap.StationPort),
                                 (remote, ap.RemotePort), bool(ap.UseDefaultAddress),
                                 (data.TypeOfService, data.TimeToLive), routes)

    def control_option(self, data):
        """ConfigData.ControlOption: (status, EFI_TCPx_OPTION or None); the same checks for TCP4 and TCP6."""
        if pointer_address(data.ControlOption) == GARBAGE_POINTER:
            FIRMWARE.record_crash("%s Configure: ConfigData.ControlOption is uninitialised pool"
                                  % self.LEDGER_PREFIX.upper())
            return S.EFI_DEVICE_ERROR, None
        option = data.ControlOption.contents if data.ControlOption else None
        if option is not None and (option.EnableSelectiveAck or option.EnablePathMtuDiscovery):
            return S.EFI_UNSUPPORTED, None  # docs/edk2.md section 3.3: SACK and PMTU discovery are not implemented
        return S.EFI_SUCCESS, option

    def apply_config(self, child, option, active, local, peer, use_default, ip_params, routes):
        """The family-independent end of Configure, once the station address is known: options,
        port binding (docs/edk2.md section 3.8), then the TCB goes to Listen (passive) or stays Closed."""
        station, mask, port = local
        child.no_mapping = False
        child.active = active
        previous = child.options, set(child.sticky_off)
        child.options = configured_options(child, None if option is None else self.effective_options(option))
        status = self.bind(child, station, port)
        if status != S.EFI_SUCCESS:
            child.options, child.sticky_off = previous  # TcpConfigurePcb failed in TcpBind, before the options
            return status
        child.use_default = use_default
        child.station, child.mask = station, mask
        child.remote, child.rport = peer
        child.tos, child.ttl = ip_params
        child.routes = routes
        child.configured = True
        child.error = None
        child.rx, child.rx_total, child.fin_seen = bytearray(), 0, False
        child.closing = child.fin_pending = False
        if child.active:
            child.state = Closed
        else:
            child.state = Listen  # passive: LISTEN at once
            child.register(True, False)
            child.update_interest()
        return S.EFI_SUCCESS

    @staticmethod
    def effective_options(option):
        values = dict(DEFAULT_OPTIONS)
        if option is None:
            return values
        for name, low, high, default in OPTION_RANGES:
            value = getattr(option, name)
            if low <= value <= high or (value == 0 and name in _ZERO_ACCEPTED):
                values[name] = value
            else:
                values[name] = default  # EDK2 quirk (docs/edk2.md section 3.9): out of range -> default, not clamped
        for name in ("EnableNagle", "EnableTimeStamp", "EnableWindowScaling"):
            values[name] = bool(getattr(option, name))  # taken literally: zero-filled disables them
        return values

    # ------------------------------------------------------------------ Routes
    def routes(self, child, delete, subnet, mask, gateway):
        if child.no_mapping:
            return S.EFI_NO_MAPPING
        if not child.configured:
            return S.EFI_NOT_STARTED
        if not subnet or not mask or not gateway:
            return S.EFI_INVALID_PARAMETER
        route = (_ip(subnet.contents), _ip(mask.contents), _ip(gateway.contents))
        if not _valid_netmask(route[1]):
            return S.EFI_INVALID_PARAMETER
        if route[2] != "0.0.0.0" and child.mask != "0.0.0.0" and \
                not _same_subnet(route[2], child.station, child.mask):
            return S.EFI_INVALID_PARAMETER  # Ip4Routes: the gateway must be on-link
        existing = [r for r in child.routes if r[0] == route[0] and r[1] == route[1] and r[2] == route[2]]
        if delete:
            if not existing:
                return S.EFI_NOT_FOUND
            child.routes.remove(existing[0])
            return S.EFI_SUCCESS
        if existing:
            return S.EFI_ACCESS_DENIED  # Ip4AddRoute: the route is already in the table
        child.routes.append(route)
        return S.EFI_SUCCESS

    # ------------------------------------------------------------------ Connect / Accept
    def check_token(self, child, token, states):
        """The checks every token-taking function makes after its parameter checks."""
        if child.no_mapping:
            return S.EFI_NO_MAPPING
        if not child.configured:
            return S.EFI_NOT_STARTED
        if not states():
            return S.EFI_ACCESS_DENIED
        if self.event_in_use(child, token):
            return S.EFI_ACCESS_DENIED
        return S.EFI_SUCCESS

    def connect(self, child, token_pointer):
        token = pointer_address(token_pointer)
        if not token or not token_pointer.contents.CompletionToken.Event:
            return S.EFI_INVALID_PARAMETER
        status = self.check_token(child, token, lambda: child.state == Closed and child.active)
        if status != S.EFI_SUCCESS:
            return status
        hop = self.route(child, child.remote)
        reachable = self.family.reachable
        # EDK2 quirk (no loopback, 25_tcp_self_connect): a SYN to the machine's own address is
        # never answered (no RST: the ARP request for it is not), so the connect times out.
        to_self = addressed_to_self(self.machine, self.family, child.remote, child.rport, self)
        self.start_connect(child, token, hop is not None and reachable(child.remote) and reachable(child.station)
                           and not to_self)
        return S.EFI_SUCCESS

    def accept(self, child, token_pointer):
        token = pointer_address(token_pointer)
        if not token or not token_pointer.contents.CompletionToken.Event:
            return S.EFI_INVALID_PARAMETER
        status = self.check_token(child, token, lambda: child.state == Listen)
        if status != S.EFI_SUCCESS:
            return status
        child.tokens.append(token)
        child.listen_tokens.append(token)
        # Facts 3.3: with an established child parked, the token completes inside Accept().
        self.deliver_children(child)
        return S.EFI_SUCCESS

    # ------------------------------------------------------------------ Transmit / Receive
    def io_checks(self, child, token_pointer, rx):
        """Parameter checks shared by Transmit and Receive; (status, fragments)."""
        token = pointer_address(token_pointer)
        if not token:
            return S.EFI_INVALID_PARAMETER, None
        io = token_pointer.contents
        data_address = pointer_address(io.Packet.RxData if rx else io.Packet.TxData)
        if not io.CompletionToken.Event or not data_address:
            return S.EFI_INVALID_PARAMETER, None
        data = (efidefs.EFI_TCP4_RECEIVE_DATA if rx else efidefs.EFI_TCP4_TRANSMIT_DATA).from_address(data_address)
        if data.FragmentCount == 0 or data.DataLength == 0:
            return S.EFI_INVALID_PARAMETER, None
        table = efidefs.fragment_table(data_address + type(data).FragmentTable.offset, data.FragmentCount)
        fragments = [(f.FragmentBuffer or 0, f.FragmentLength) for f in table]
        if any(not buffer for buffer, _ in fragments) or sum(n for _, n in fragments) != data.DataLength:
            return S.EFI_INVALID_PARAMETER, None
        return S.EFI_SUCCESS, fragments

    def may_io(self, child):
        """SOCK_IS_CONNECTING or SOCK_IS_CONNECTED, and Close() not called."""
        return child.state in CONNECTING + CONNECTED and not child.closing

    def transmit(self, child, token_pointer):
        status, fragments = self.io_checks(child, token_pointer, rx=False)
        if status != S.EFI_SUCCESS:
            return status
        token = pointer_address(token_pointer)
        status = self.check_token(child, token, lambda: self.may_io(child))
        if status != S.EFI_SUCCESS:
            return status
        faults = self.faults
        faults = self.faults
        if faults is not None and faults.take_tx_fail():
            return S.EFI_OUT_OF_RESOURCES
        # Urgent (docs/edk2.md section 3.3 Transmit): the urgent pointer at the data's end; on the host socket
        # that is the data's last byte sent with MSG_OOB, as a peer sees it either way.
        urgent = bool(token_pointer.contents.Packet.TxData.contents.Urgent)
        self.queue_transmit(child, token, fragments, urgent)
        return S.EFI_SUCCESS

    def receive(self, child, token_pointer):
        status, _ = self.io_checks(child, token_pointer, rx=True)
        if status != S.EFI_SUCCESS:
            return status
        token = pointer_address(token_pointer)
        status = self.check_token(child, token, lambda: self.may_io(child))
        if status != S.EFI_SUCCESS:
            return status
        if child.error is not None and child.state in CONNECTED:
            child.tokens.append(token)
            error, child.error = child.error, None
            self.complete(child, token, error)
            return S.EFI_SUCCESS
        if child.fin_seen and not child.rx:
            # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Receive): after the peer's FIN with nothing buffered,
            # Receive() *returns* EFI_CONNECTION_FIN itself (the token is not signalled).
            return S.EFI_CONNECTION_FIN
        child.tokens.append(token)
        child.rx_tokens.append(token)
        # Facts 3.3: buffered data completes the token synchronously, partially if need be.
        self.deliver_rx(child)
        return S.EFI_SUCCESS

    # ------------------------------------------------------------------ Close / Cancel / Poll
    def close(self, child, token_pointer):
        token = pointer_address(token_pointer)
        if not token or not token_pointer.contents.CompletionToken.Event:
            return S.EFI_INVALID_PARAMETER
        status = self.check_token(child, token, lambda: not child.close_token)  # one Close at a time
        if status != S.EFI_SUCCESS:
            return status
        self.start_close(child, token, bool(token_pointer.contents.AbortOnClose))
        return S.EFI_SUCCESS

    def cancel(self, child, token_pointer):
        if self.old_stack:
            # EDK2 quirk (edk2-2015 Tcp4Dxe, docs/bits-efi.md section 5): Cancel is not implemented.
            return S.EFI_UNSUPPORTED
        if not child.configured and not child.no_mapping:
            return S.EFI_NOT_STARTED
        token = pointer_address(token_pointer)
        found = self.cancel_tokens(child, token)
        if token and not found:
            return S.EFI_NOT_FOUND  # close tokens are never found
        return S.EFI_SUCCESS

    def poll(self, child):
        # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Poll): one received frame per call, and the status of
        # the layers below is discarded: Poll always returns EFI_SUCCESS.
        faults = self.faults
        failure = faults.take_poll_fail() if faults is not None else None
        if failure is not None:
            return failure  # hostile fault ``poll_fail``, not EDK2 behaviour (faults.py)
        self.nic.poll_frame()
        return S.EFI_SUCCESS


def install(machine):
    """Install EFI_TCP4_SERVICE_BINDING_PROTOCOL on the NIC handle; returns the driver."""
    return Tcp4Driver(machine)
