"""EfiChild: the life of one service-binding child (TCP4/6, UDP4/6), shared by the endpoints.

An endpoint's firmware half is one child of a service binding on the NIC: made lazily
(CreateChild at the first bind/connect/send), Configured (retried while the address appears),
given the IP4 routes, called through a cache, Polled by ``stack.pump``, and finally destroyed
(DestroyChild) -- after which the tokens it held are released, and only if the firmware has
provably let go of them (``events.abandon`` / ``events.orphan``). ``EfiChild`` does all of that
once; ``tcp.TcpEndpoint`` and ``udp.UdpEndpoint`` add their protocol. A subclass provides:

``_binding()``   (service-binding GUID, protocol class) of its ``fam`` (family.py)
``_closer``      its protocol's ``closer.Closer`` (stack.py), which counts the live children
``_consume()``   consume the completions recorded so far (run once the child is destroyed)
``_POLL_UNCONFIGURED``  whether Poll may go through a child that is not configured

Station ports: where a socket asks for no port (connect, sendto or listen without bind, or
bind to port 0), ``random_port`` picks one at random from ``EPHEMERAL_PORTS`` and the child is
configured with it explicitly; a clash (EDK2 says EFI_INVALID_PARAMETER for TCP,
EFI_ACCESS_DENIED for UDP) draws again, ``PORT_TRIES`` times, before the firmware's own choice
is taken (StationPort 0). EDK2 hands ephemeral ports out from one sequential counter
(docs/edk2.md sections 3.8, 4.2): a blind attacker on the LAN who sees one port knows the next
(RFC 6056 section 1, "port randomization" is the remedy: algorithm 1 for bind/listen/UDP, as
Linux's bind to port 0 does; for a connect algorithm 3, a random start per peer counting up from
there, as Linux's connect does with its algorithm 4, so that a burst of connections to one peer
never meets a port of its own recent past). The range is the IANA dynamic range of RFC 6335,
the one bitsnet's DNS source ports already use; Linux draws from 32768-60999 by default, Windows
and the BSDs from this one.

What ``stack.pump`` uses, public: ``poll_target`` (the cached Poll callable and its ``this``, or
None while the child cannot be Polled), ``update()`` (consume completions, post what should be
outstanding) and ``sender`` (TCP's ``tcp.Sender``, else None); the closer calls ``reap_step()``
and ``close_now()`` (closer.py).
"""

import ctypes

import efi

from bitsnet import clock, efidefs, errors, events, inet, ipconfig, nic, stack
from bitsnet.endpoint import Endpoint

NO_MAPPING_WAIT = 5.0  # docs/edk2.md sections 3.7/8.1 #8: retry Configure this long while the address appears
EPHEMERAL_PORTS = (49152, 65535)  # RFC 6335's dynamic ports: where random station ports come from
PORT_TRIES = 8  # random ports tried on a clash before the firmware's choice (StationPort 0)
_RANDOM_BATCH = 32  # ports drawn from bitsnet.entropy at a time (the weak mix costs a stir per call)
_random_ports = []  # type: list


_next_port_to = {}  # type: dict   # (remote address, remote port) -> the next port for that peer
_PEERS_REMEMBERED = 1024  # the table above starts afresh beyond this many peers


def random_port(remote=None):
    # type: (tuple) -> int
    """A station port for a child with no port asked for.

    ``remote`` None (bind, listen, UDP): drawn uniformly from ``EPHEMERAL_PORTS``. A connect to
    ``remote`` (address, port): RFC 6056 algorithm 3 in table form -- the first connection to a
    peer takes a random port, each later one the next port up, round the range. Drawn anew
    each time, a burst of connections to one peer soon met a port of its own last seconds (160
    connections a second over 16,384 ports: two in a hundred), whose old connection the peer
    or QEMU's user network may still hold (TIME_WAIT): a refused or stalled connect. Counting
    up, a port comes back to the same peer only after the whole range.
    """
    if remote is None:
        return _draw_port()
    port = _next_port_to.get(remote)
    if port is None:
        if len(_next_port_to) >= _PEERS_REMEMBERED:
            _next_port_to.clear()
        port = _draw_port()
    low, high = EPHEMERAL_PORTS
    _next_port_to[remote] = low + (port + 1 - low) % (high - low + 1)
    return port


def _draw_port():
    # type: () -> int
    """A port drawn uniformly from ``EPHEMERAL_PORTS`` (bitsnet.entropy; BITS has no random)."""
    if not _random_ports:
        from bitsnet import entropy
        low, high = EPHEMERAL_PORTS
        data = bytearray(entropy.random_bytes(4 * _RANDOM_BATCH))
        for i in range(0, len(data), 4):  # 32 bits per port: the modulo bias is below 2**-16
            value = data[i] << 24 | data[i + 1] << 16 | data[i + 2] << 8 | data[i + 3]
            _random_ports.append(low + value % (high - low + 1))
    return _random_ports.pop()


_protocol_guids = {}  # type: dict   # protocol class -> its EFI_GUID (open_protocol)


def open_protocol(protocol, handle):
    """``protocol.from_handle(handle)`` with the protocol's EFI_GUID built once: BITS's
    ``efi.get_protocol`` converts the class's ``uuid.UUID`` on every call (``uuid``'s Python
    ``bytes``, ~250 us in BITS; docs/performance.md section 7) -- once per connection here."""
    guid = _protocol_guids.get(protocol)
    if guid is None:
        guid = _protocol_guids[protocol] = efi.EFI_GUID(protocol.guid)
    address = ctypes.c_void_p()
    efi.check_status(events.boot_services().OpenProtocol(handle, ctypes.byref(guid), ctypes.byref(address),
                                                         efi._efi._image_handle, None,
                                                         efi.EFI_OPEN_PROTOCOL_GET_PROTOCOL))
    proto = protocol.from_address(address.value)
    proto._handle = handle
    return proto


def _on_link(address, info):
    """Is IPv4 ``address`` on the station's subnet (``info``: ipconfig.Ip4Info)?"""
    mask = inet.ipv4_int(info.netmask)
    return mask != 0 and inet.ipv4_int(address) & mask == inet.ipv4_int(info.address) & mask


class EfiChild(Endpoint):
    """One service-binding child; see the module docstring."""

    __slots__ = ("_fam", "_nic", "_handle", "_proto", "_calls", "poll_target")
    _closer = None  # type: stack.Closer  # type: ignore[assignment]  # each subclass: its protocol's
    _POLL_UNCONFIGURED = True
    sender = None  # TCP: its Sender, whose blocked state makes stack.pump Poll a batch
    progress = stack.pump  # ep.progress() is stack.pump(ep): no Python call more per round

    def __init__(self, fam):
        self._fam = fam
        self._nic = None
        self._handle = None  # the child handle, created lazily at bind/connect/listen
        self._proto = None
        self._calls = {}  # type: dict   # see _call
        self.poll_target = None  # (Poll, byref(proto)) while the child can be Polled (stack.pump)

    def _binding(self):
        raise NotImplementedError("%s._binding" % type(self).__name__)

    def _consume(self):
        raise NotImplementedError("%s._consume" % type(self).__name__)

    def _call(self, name, *args):
        # Reading a ctypes function-pointer field builds a new callable each time, a visible
        # cost on the hot path (Poll, Receive, Transmit): keep it, with the byref, per child.
        entry = self._calls.get(name)
        if entry is None or entry[0] is not self._proto:
            proto = self._proto
            entry = self._calls[name] = (proto, getattr(proto, name), ctypes.byref(proto))
        return entry[1](entry[2], *args)

    def _set_proto(self, proto):
        self._proto = proto
        self._pollable(proto is not None and self._POLL_UNCONFIGURED)

    def _pollable(self, on):
        """Let stack.pump Poll through this child (a UDP child only while configured)."""
        proto = self._proto
        self.poll_target = (proto.Poll, ctypes.byref(proto)) if on and proto is not None else None

    def _ensure_child(self):
        if self._handle is None:
            self._closer.reap_due()
            self._nic = nic.default_nic()
            sb, protocol = self._binding()
            self._handle = self._nic.create_child(sb)
            self._set_proto(open_protocol(protocol, self._handle))
            self._closer.live.add(self)

    def _adopt_child(self, the_nic, handle):
        """Take over a child EDK2 made for us (an accepted connection, docs/edk2.md section 3.3 Accept)."""
        sb, protocol = self._binding()
        self._nic, self._handle = the_nic, handle
        the_nic.adopt_child(sb, handle)
        self._set_proto(open_protocol(protocol, handle))
        self._closer.live.add(self)

    def _ip_info(self, deadline=None):
        """IPv4: the NIC's address, DHCP first if needed. IPv6: its addresses once a global one
        exists (SLAAC switched on if needed, ipconfig.ensure_configured6). ``deadline``: the
        socket call's (docs/architecture.md section 6.4)."""
        if self._fam.version == 4:
            return ipconfig.ensure_configured(deadline=deadline)
        return ipconfig.ensure_configured6(deadline=deadline)

    def _configure_child(self, config, until, deadline=None):
        """Configure(config), again while it says EFI_NO_MAPPING until ``until``; the status.
        ``deadline``, the socket call's, comes first: ``errors.timeout`` (docs/architecture.md section 6.4)."""
        while True:
            status = self._call("Configure", ctypes.byref(config))
            if status != efi.EFI_NO_MAPPING or clock.monotonic() >= until:
                return status
            # EDK2 quirk (TcpDxe, docs/edk2.md sections 3.7, 8.1 #8): EFI_NO_MAPPING does not clear by itself; Configure
            # again. TCP6 answers the same until an address is usable (DAD not finished, docs/edk2.md section 3.7);
            # UDP6 says EFI_NO_MAPPING until IP6 has a usable address.
            if deadline is not None and clock.monotonic() >= deadline:
                raise errors.timeout("timed out")  # docs/architecture.md section 6.4: the caller's deadline first
            events.boot_services().Stall(10000)

    def _add_routes(self, info, strict, remote=None):
        """EDK2 quirk (old Tcp4Dxe and Udp4Dxe, docs/bits-efi.md section 3): children do not use the IP4 routes; add
        them. EFI_ACCESS_DENIED means the route is already there. (TCP6/UDP6 have no Routes,
        docs/edk2.md sections 3.2, 4.1.) ``strict``: any other refusal raises; else it leaves the default routes.
        ``remote``: the one peer of an active child; on the station's own subnet the child's
        direct route (from its SubnetMask) reaches it, so no Routes are added unless
        ``stack.ON_LINK_ROUTES`` (docs/performance.md section 7)."""
        if remote is not None and not stack.ON_LINK_ROUTES and self._fam.has_routes and _on_link(remote, info):
            return
        for subnet, mask, gateway in info.routes if self._fam.has_routes else ():
            status = self._call("Routes", False, ctypes.byref(efidefs.ipv4(subnet)),
                                ctypes.byref(efidefs.ipv4(mask)), ctypes.byref(efidefs.ipv4(gateway)))
            if strict and status != efi.EFI_ACCESS_DENIED:
                errors.raise_for_status(status, "Routes")

    def _destroy_child(self):
        """DestroyChild, then release the child's tokens: all of them if it is gone (the
        firmware flushed them), else only as the firmware completes them (events.orphan)."""
        if self._handle is not None:
            sb = self._binding()[0]
            if self._nic.destroy_child(sb, self._handle) == efi.EFI_SUCCESS:
                events.abandon(self)
            else:
                events.orphan(self)
            self._consume()
            self._handle = None
            self._set_proto(None)
        self._closer.live.discard(self)
        stack.dirty.discard(self)
