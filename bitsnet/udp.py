"""UdpEndpoint: one EFI_UDP4_PROTOCOL (or EFI_UDP6_PROTOCOL) child, as non-blocking primitives for
the socket layer. What differs between the two is in ``family.py``; everything here is shared
(EFI_UDP6 has no broadcast, no Routes and no SubnetMask, docs/edk2.md section 4.1).

Contents: module constants -- ``UdpEndpoint`` (bind, connect, disconnect, sendto, recvfrom,
recvfrom_into, readiness predicates, options, close) -- ``reap``, ``close_all``,
``live_endpoints``. The child's life is ``child.EfiChild``'s, ``progress()`` is ``stack.pump``
and the background closer is ``closer.Closer`` (``stack.udp_closer``), as for TCP.

Like ``tcp.TcpEndpoint``, every method returns at once; a caller that must wait uses
``events.wait_until(ep.can_recv, deadline, poll=ep.progress)``.

It keeps docs/architecture.md's rules (section 13), in UDP's way:

Callbacks record, readers decide (section 13 rule 5): a token's ``on_done`` appends the
Operation to ``_done``; ``update()`` (run by every public method and predicate) consumes it.

Receiving (section 8.2, for datagrams): one Receive is always outstanding while the child is configured. Each completed
Receive hands us a driver-owned EFI_UDP4_RECEIVE_DATA: the payload is copied into the Python
queue and the buffer is given back at once with SignalEvent(RxData->RecycleSignal) (docs/edk2.md sections 4.2,
8.1 #13) -- an unrecycled datagram leaks and makes Configure(NULL) ASSERT in EDK2. The Python
queue is bounded (``RX_MAX_DATAGRAMS`` datagrams, SO_RCVBUF bytes); a datagram that does not fit
is dropped and counted in ``dropped``, as a kernel drops on a full socket buffer. Datagrams that
arrive while nobody polls wait in EDK2's per-instance queue, which is bounded in time by
``ReceiveTimeout`` (``FIRMWARE_HOLD_US``).

Sending (section 8.1, for datagrams): Transmits are zero-copy (docs/edk2.md section 4.2): the
bytes, the TRANSMIT_DATA, the session data and the token stay in the registry until the token
completes; at most ``MAX_TRANSMITS`` are in flight (``can_send``).

Differences from CPython on Linux, all forced by EFI_UDP4 (docs/edk2.md section 4.2):
* A zero-length datagram cannot be sent (EDK2 rejects FragmentLength 0): ``sendto(b"")`` raises
  error(EINVAL) instead of sending an empty datagram.
* ``connect``/``disconnect`` re-configure the child (Configure(NULL) + Configure): datagrams
  already queued in the firmware for the old configuration are dropped.
* A wildcard bind ("" / 0.0.0.0) is configured with the NIC's address, so subnet-directed
  broadcasts are not received (EDK2 matches those only on a 0.0.0.0 station); datagrams to
  255.255.255.255 are (AcceptBroadcast). ``local_address`` still shows 0.0.0.0, as Linux does.
* ICMP errors arrive on the Receive token (status, RxData NULL): on a connected endpoint they
  become the pending error (ECONNREFUSED for port unreachable), raised once by the next
  recvfrom/sendto; on an unconnected one they are ignored, as Linux does without IP_RECVERR.
"""

import ctypes
import errno

import efi

from bitsnet import clock, errors, events, family, inet, ipconfig, stack
from bitsnet.buffers import DatagramQueue
from bitsnet.constants import SHUT_RD, SHUT_RDWR
from bitsnet.child import NO_MAPPING_WAIT, PORT_TRIES, EfiChild, random_port  # docs/edk2.md section 3.7
from bitsnet.endpoint import DatagramEndpoint


MAX_DATAGRAM = 65507  # 65535 - 20 (IP header) - 8 (UDP header): EDK2's limit (docs/edk2.md section 4.2)
RX_MAX_DATAGRAMS = 256  # Python receive queue bound in datagrams ...
DEFAULT_RCVBUF = 256 * 1024  # ... and in bytes (SO_RCVBUF), like a Linux default socket buffer
MAX_TRANSMITS = 8  # Transmit tokens in flight; EDK2 completes them as soon as MNP sent the frame
FIRMWARE_HOLD_US = 5 * 1000 * 1000  # ReceiveTimeout: EDK2 drops datagrams queued longer than this
CLOSE_TIMEOUT = 2.0  # a closed endpoint waits this long for its in-flight Transmits
TIME_TO_LIVE = 64
ICMP_POLL_INTERVAL = 0.001  # seconds: how often a connected send() lets an ICMP error arrive first
OPTIONS = ("broadcast", "reuseaddr", "rcvbuf", "sndbuf", "ttl", "tos",
           "linger")  # SO_LINGER: nothing to linger for on UDP, but Linux accepts it, so we record it

# The stack-wide state (stack.py) this module adds to.
_closer = stack.udp_closer
_live = _closer.live  # endpoints holding a child, not closed by the user
_closing = _closer.closing  # closed endpoints whose Transmits are still in flight
_dirty = stack.dirty  # endpoints with completions not yet consumed


def _fail(err, detail):
    raise errors.socket_error(err, detail)


class UdpEndpoint(EfiChild, DatagramEndpoint):
    """One UDP4 or UDP6 child (``fam``); see the module docstring for the rules it keeps."""

    # The readiness vocabulary select.py shares with TcpEndpoint: a datagram socket never
    # listens or connects in the TCP sense, and is "connected" (may send) until closed.
    listening = False
    connecting = False
    never_connected = False  # not a stream
    # SHUT_RD is the endpoint's (the one place every layer reads it), set by shutdown(): select()
    # then calls the socket readable; recv still waits for a datagram, as on Linux.
    read_shut = False
    plain_stream = False  # datagrams: the socket layer's generic way
    _closer = stack.udp_closer
    _POLL_UNCONFIGURED = False  # Poll goes through a configured child only

    def __init__(self, fam=None):
        EfiChild.__init__(self, fam or family.INET)
        self._info = None  # the Ip4Info the child was configured with
        self._options = {"broadcast": False, "reuseaddr": False, "rcvbuf": DEFAULT_RCVBUF, "sndbuf": MAX_DATAGRAM,
                         "ttl": TIME_TO_LIVE, "tos": 0, "linger": None}
        self._configured = False
        self._local = None  # type: tuple   # (host as bound, port)
        self._station = None  # the address the child is configured with
        self._remote = None  # type: tuple   # the connected peer
        self._done = []  # type: list
        self._rx = DatagramQueue(RX_MAX_DATAGRAMS, DEFAULT_RCVBUF)
        self._rx_op = None
        self._tx_ops = []  # type: list
        self._error = 0
        self._user_closed = False
        self._close_deadline = None
        self._icmp_polled = 0.0  # when send() last let the firmware run for an ICMP error

    def __repr__(self):
        return "<UdpEndpoint local=%r remote=%r queued=%d dropped=%d>" % (
            self._local, self._remote, len(self._rx), self._rx.dropped)

    # --- firmware plumbing ------------------------------------------------------------------
    def _binding(self):
        return self._fam.udp_sb, self._fam.UDP_PROTOCOL

    def _configure(self, host, port, remote=None, deadline=None):
        """Configure(NULL) if configured, then Configure for (host, port) and ``remote``;
        ``deadline``: the socket call's, for the address bring-up (docs/architecture.md section 6.4)."""
        self._ensure_child()
        fam = self._fam
        info = self._info = self._ip_info(deadline)
        if self._configured:
            self._unconfigure()
        wildcard = fam.is_wildcard(host)
        # IPv4: an explicit address, as tcp.py does (UseDefaultAddress may switch the NIC to
        # DHCP, docs/edk2.md section 3.7); IPv6: all zero lets IP6 choose the source (docs/edk2.md section 4.1).
        station = (info.address if fam.version == 4 else None) if wildcard else host
        # No port asked for: a random one, not EDK2's next sequential one (child.random_port).
        tries = PORT_TRIES if port == 0 else 0
        config = fam.udp_config(station, info.netmask, random_port() if tries else port, remote, self._options["ttl"],
                                FIRMWARE_HOLD_US,
                                # SO_REUSEADDR: AllowDuplicatePort (docs/edk2.md section 4.2)
                                bool(self._options["reuseaddr"]), self._options["tos"])
        until = clock.monotonic() + NO_MAPPING_WAIT
        status = self._configure_child(config, until, deadline)  # NO_MAPPING retried
        while status == efi.EFI_ACCESS_DENIED and tries:
            # A random port that clashes (docs/edk2.md section 4.2): another, then EDK2's own choice.
            tries -= 1
            config.StationPort = random_port() if tries else 0
            status = self._configure_child(config, until, deadline)
        # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): a port clash is EFI_ACCESS_DENIED (errors.py: EADDRINUSE).
        errors.raise_for_status(status, "udp-bind", "UDP port %d on %s, Configure" % (port, station or host))
        self._configured = True
        self._pollable(True)
        self._add_routes(info, strict=False)  # best effort: a refusal leaves the default routes
        mode = fam.UDP_CONFIG_DATA()
        if self._call("GetModeData", ctypes.byref(mode), None, None, None) == efi.EFI_SUCCESS:
            port = mode.StationPort  # port 0: the ephemeral one EDK2 chose (docs/edk2.md section 4.2)
        self._station = station
        self._local = (fam.wildcard if wildcard else host, port)
        self.update()

    def _unconfigure(self):
        """Configure(NULL). EDK2 quirk: it does not abort the posted Receive token (its Cancel
        finds the instance unconfigured already): the token stays queued, and stays in the
        registry, until a datagram arrives after the next Configure (docs/edk2.md section 4.2).

        EDK2 ASSERTs that every delivered datagram was recycled first (docs/edk2.md section 4.2), and the
        outstanding Receive may be completed by MNP's timer at any moment: at TPL_CALLBACK no
        delivery can happen, so look at the token, recycle, and reset in one go.
        """
        bs = events.boot_services()
        old_tpl = bs.RaiseTPL(efi.TPL_CALLBACK)
        try:
            if self._rx_op is not None:
                events.check(self._rx_op)
            self._consume()
            self._call("Configure", None)
        finally:
            bs.RestoreTPL(old_tpl)
        self._configured = False
        self._pollable(False)
        for op in [self._rx_op] + list(self._tx_ops):
            if op is not None:
                events.check(op)
        self._consume()

    def _submit(self, kind, token, keep=()):
        return events.submit(token, token, self._record, self, keep, kind)

    def _record(self, op):
        # on_done: record only (docs/architecture.md section 13 rule 5).
        self._done.append(op)
        _dirty.add(self)

    # --- consuming completions (section 13 rule 5) -----------------------------------------------
    def update(self):
        self._consume()
        while self._configured and self._rx_op is None and not self._user_closed:
            if not self._post_receive():
                break
            self._consume()

    def _consume(self):
        while self._done:
            op = self._done.pop(0)
            if op.kind == "rx":
                self._done_rx(op)
            else:
                self._done_tx(op)
        _dirty.discard(self)

    def _done_rx(self, op):
        if op is self._rx_op:
            self._rx_op = None
        status = op.status
        rx_pointer = op.token.Packet.RxData
        if status == efi.EFI_SUCCESS and rx_pointer:
            address = ctypes.cast(rx_pointer, ctypes.c_void_p).value
            head = self._fam.UDP_RECEIVE_DATA.from_address(address)
            rxdata = self._fam.udp_receive_data(max(1, head.FragmentCount)).from_address(address)
            parts = [ctypes.string_at(f.FragmentBuffer, f.FragmentLength)
                     for f in rxdata.FragmentTable[:head.FragmentCount] if f.FragmentLength]
            session = rxdata.UdpSession
            source = (self._fam.efi_text(session.SourceAddress), session.SourcePort)
            data = b"".join(parts)[:rxdata.DataLength]
            recycle = rxdata.RecycleSignal
            # docs/edk2.md sections 4.2 / 8.1 #13: the buffer is the driver's; copy, then give it back at once.
            events.boot_services().SignalEvent(recycle)
            if not self._user_closed:
                self._rx.put(data, source)  # full: dropped and counted (see "Receiving" above)
        elif status == efi.EFI_ABORTED or status == efi.EFI_SUCCESS:
            pass  # Configure(NULL)/Cancel, or a completion without data
        elif self._remote is not None:
            # docs/edk2.md section 4.2: an ICMP error completes the Receive with RxData NULL; connected UDP
            # reports it (port unreachable -> ECONNREFUSED), as Linux does.
            self._error = errors.errno_for(status, "udp-recv")

    def _done_tx(self, op):
        if op in self._tx_ops:
            self._tx_ops.remove(op)
        if op.status not in (efi.EFI_SUCCESS, efi.EFI_ABORTED) and self._remote is not None:
            # e.g. EFI_NO_MAPPING: ARP for the next hop failed (docs/edk2.md section 4.2)
            self._error = errors.errno_for(op.status, "udp-send")

    def _post_receive(self):
        token = self._fam.UDP_COMPLETION_TOKEN()
        op = self._submit("rx", token)
        status = self._call("Receive", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            self._error = self._error or errors.errno_for(status, "udp-recv")
            return False
        self._rx_op = op
        events.check(op)  # docs/edk2.md section 4.2: a queued datagram completes it inside Receive()
        return True

    # --- the API -----------------------------------------------------------------------------
    def _check_open(self):
        if self._user_closed:
            _fail(errno.EBADF, "endpoint is closed")

    def _address(self, address):
        """(host, port) of an address the socket layer validated (_socket._sockaddr: a canonical
        literal of this family, or the wildcard; a port 0-65535): trusted here."""
        host, port = address[:2]
        return self._fam.wildcard if host in ("", None) else host, port

    def _is_broadcast(self, host, deadline=None):
        if self._fam.version != 4:
            return False  # IPv6 has no broadcast (multicast is not offered here)
        if host == "255.255.255.255":
            return True
        info = self._info or ipconfig.ensure_configured(deadline=deadline)
        mask = inet.ipv4_int(info.netmask)
        return mask != 0xFFFFFFFF and inet.ipv4_int(host) == (inet.ipv4_int(info.address) | (~mask & 0xFFFFFFFF))

    def bind(self, address, deadline=None):
        """Bind to (host, port); port 0 picks an ephemeral port (see ``local_address``)."""
        self._check_open()
        if self._configured:
            _fail(errno.EINVAL, "already bound")
        host, port = self._address(address)
        if host != self._fam.wildcard:
            info = self._ip_info(deadline)
            if host != info.address and host not in getattr(info, "addresses", ()):
                _fail(errno.EADDRNOTAVAIL, "%s is not this machine's address (%s)" % (host, info.address))
        self._configure(host, port, self._remote, deadline)

    def connect(self, address, deadline=None):
        """Set the default peer: only its datagrams are received; send() goes there."""
        self._check_open()
        host, port = self._address(address)
        if port == 0 or host == self._fam.wildcard:
            _fail(errno.EINVAL, "connect to %s:%d" % (host, port))
        if host == "255.255.255.255":
            # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): a configured RemoteAddress of 255.255.255.255 is rejected
            _fail(errno.EINVAL, "EFI_UDP4 cannot connect to the limited broadcast address; use sendto")
        if self._is_broadcast(host, deadline) and not self._options["broadcast"]:
            _fail(errno.EACCES, "broadcast without SO_BROADCAST")
        bound = self._local if self._local is not None else (self._fam.wildcard, 0)
        self._remote = (host, port)
        try:
            self._configure(bound[0], bound[1], self._remote, deadline)
        except errors.error:
            self._remote = None
            raise

    def shutdown(self, how):
        """shutdown() of a connected datagram socket: SHUT_RD is recorded (``read_shut``), the
        rest changes nothing (Linux: ENOTCONN unless connected)."""
        self._check_open()
        if self._remote is None:
            _fail(errno.ENOTCONN, "shutdown")
        self.read_shut = self.read_shut or how in (SHUT_RD, SHUT_RDWR)

    def disconnect(self):
        """connect(AF_UNSPEC): forget the default peer, keep the local port."""
        self._check_open()
        if self._remote is None:
            return
        self._remote = None
        if self._local is not None:
            self._configure(self._local[0], self._local[1])

    def sendto(self, data, address=None, deadline=None):
        """Queue one datagram to ``address`` (None: the connected peer). Returns len(data), or
        None when MAX_TRANSMITS are in flight (would block)."""
        self._check_open()
        if address is None and self._remote is not None and self._rx_op is not None:
            # docs/edk2.md section 4.2: an ICMP error about an earlier datagram reaches us only as
            # the status of the posted Receive, and only when the firmware runs -- in BITS nothing
            # runs it between a program's calls (no timer, docs/bits-environment.md section 7).
            # Linux fails the next send of a connected socket with it: let the firmware run
            # first, at most every ICMP_POLL_INTERVAL, so a send loop does not Poll per datagram.
            now = clock.monotonic()
            if now - self._icmp_polled >= ICMP_POLL_INTERVAL:
                self._icmp_polled = now
                self.progress()
        self.update()
        if self._error:
            err, self._error = self._error, 0
            _fail(err, "sendto")
        if address is None:
            if self._remote is None:
                _fail(errno.EDESTADDRREQ, "send on an unconnected UDP endpoint")
        else:
            host, port = self._address(address)
            if port == 0 or host == self._fam.wildcard:
                _fail(errno.EINVAL, "sendto %s:%d" % (host, port))
        if not isinstance(data, bytes):
            data = memoryview(data).tobytes()
        if not data:
            # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): FragmentLength 0 is EFI_INVALID_PARAMETER, so a
            # zero-length datagram cannot be sent at all; saying so beats pretending.
            _fail(errno.EINVAL, "EFI_UDP4 cannot send a zero-length datagram")
        if len(data) > MAX_DATAGRAM:
            _fail(errno.EMSGSIZE, "%d bytes > %d" % (len(data), MAX_DATAGRAM))
        if not self._configured:
            # implicit bind to an ephemeral port, as the kernel does
            self._configure(self._fam.wildcard, 0, deadline=deadline)
        if address is not None and self._is_broadcast(host) and not self._options["broadcast"]:
            _fail(errno.EACCES, "broadcast to %s without SO_BROADCAST" % host)  # connect() checked its own
        if len(self._tx_ops) >= MAX_TRANSMITS:
            return None
        txdata = self._fam.UDP_TRANSMIT_DATA()
        session = None
        if address is not None:
            session = self._fam.UDP_SESSION_DATA()
            session.DestinationAddress = self._fam.efi_address(host)
            session.DestinationPort = port
            txdata.UdpSessionData = ctypes.pointer(session)
        # else: UdpSessionData NULL, the child's configured RemoteAddress and RemotePort are
        # the destination (docs/edk2.md section 4.2 Transmit) -- connect() configured them.
        txdata.DataLength = len(data)
        txdata.FragmentCount = 1
        txdata.FragmentTable[0].FragmentLength = len(data)
        # Zero-copy (docs/edk2.md section 4.2): the bytes object is the fragment, kept in the registry
        # (docs/architecture.md section 3).
        txdata.FragmentTable[0].FragmentBuffer = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
        token = self._fam.UDP_COMPLETION_TOKEN()
        token.Packet.TxData = ctypes.pointer(txdata)
        op = self._submit("tx", token, keep=(txdata, session, data))
        status = self._call("Transmit", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            if status == efi.EFI_OUT_OF_RESOURCES:
                return None
            errors.raise_for_status(status, "sendto")  # NOT_FOUND: no route -> ENETUNREACH
        self._tx_ops.append(op)
        events.check(op)
        self.update()
        return len(data)

    def send(self, data):
        return self.sendto(data, None)

    def _take(self, peek):
        self._check_open()
        self.update()
        if self._rx:
            return self._rx.peek() if peek else self._rx.get()
        if self._error:
            err, self._error = self._error, 0
            _fail(err, "recvfrom")
        return None

    def recvfrom(self, bufsize, peek=False):
        """(data[:bufsize], (host, port)) of the next datagram, or None (would block). The rest
        of a longer datagram is discarded, as CPython does (unless ``peek``)."""
        got = self._take(peek)
        if got is None:
            return None
        data, source = got
        return data[:bufsize], source

    def recvfrom_into(self, buffer, nbytes=None, peek=False):
        """(bytes copied into ``buffer``, (host, port)), or None (would block); truncates."""
        view = memoryview(buffer)
        if hasattr(view, "cast") and (view.format != "B" or view.ndim != 1):
            view = view.cast("B")
        got = self._take(peek)
        if got is None:
            return None
        data, source = got
        n = min(len(data), len(view) if nbytes is None or nbytes <= 0 else min(nbytes, len(view)))
        view[:n] = data[:n]
        return n, source

    def close(self, abort=False):
        """Give the child back; in-flight Transmits may finish first (never blocks). ``abort``
        is accepted for symmetry with TcpEndpoint.close and changes nothing: UDP has no RST."""
        if self._user_closed:
            return
        self._user_closed = True
        _live.discard(self)
        if self._handle is None:
            return
        self.update()
        self._rx = DatagramQueue(0)
        if self._tx_ops:
            self._close_deadline = clock.monotonic() + CLOSE_TIMEOUT
            _closing.append(self)
            return
        self._destroy()

    def _destroy(self):
        if self._handle is not None and self._configured:
            self._unconfigure()
        self._destroy_child()

    def reap_step(self):
        """The closer's step: destroy this closed endpoint once its Transmits completed (or
        waited long enough); True once it is gone."""
        self._consume()
        if not self._tx_ops or clock.monotonic() >= self._close_deadline:
            self._destroy()
            return True
        return False

    def close_handed_over(self):
        """The closer's question (closer.py): no Transmit of this closed endpoint is still in flight."""
        return self._handle is None or not self._tx_ops

    def close_now(self):
        """close_all gave up waiting for the Transmits: destroy now (no RST in UDP)."""
        self._destroy()
        return False

    # --- readiness, addresses, options (progress() is stack.pump) ------------------------

    def can_recv(self):
        # a datagram or an error is there: recvfrom will not return None
        if self._user_closed:
            return True
        self.update()
        return bool(self._rx) or bool(self._error)

    def acceptable(self):
        return False  # a datagram endpoint never listens

    def can_send(self):
        # sendto will not return None
        if self._user_closed:
            return True
        self.update()
        return len(self._tx_ops) < MAX_TRANSMITS or bool(self._error)

    closed = property(lambda self: self._user_closed)
    connected = property(lambda self: not self._user_closed)
    local_address = property(lambda self: self._local)
    remote_address = property(lambda self: self._remote)
    dropped = property(lambda self: self._rx.dropped)

    def pending(self):
        # type: () -> int
        """Datagrams queued in Python (FIONREAD-like count of datagrams, not bytes)."""
        self.update()
        return len(self._rx)

    def take_error(self):
        # type: () -> int
        """SO_ERROR: the pending errno (0 if none), cleared by reading it."""
        self.update()
        err, self._error = self._error, 0
        return err

    def has_error(self):
        """An errno is pending (poll's POLLERR); unlike take_error() this leaves it pending."""
        if self._user_closed:
            return False
        self.update()
        return bool(self._error)

    def hung_up(self):
        """Never: a datagram socket has no connection to lose (poll's POLLHUP)."""
        return False

    def set_option(self, name, value):
        """"broadcast" (SO_BROADCAST), "reuseaddr" (SO_REUSEADDR: AllowDuplicatePort, applied at
        the next bind), "rcvbuf" (the Python queue's byte bound), "sndbuf" and "linger" (recorded),
        "ttl" and "tos" (applied at once)."""
        if name not in OPTIONS:
            raise KeyError(name)
        if name in ("rcvbuf", "sndbuf"):
            value = max(1, int(value))
            if name == "rcvbuf":
                self._rx.max_bytes = value
        elif name in ("ttl", "tos"):
            value = int(value)  # TimeToLive/HopLimit, TypeOfService/TrafficClass
        elif name == "linger":
            value = None if value is None else (bool(value[0]), int(value[1]))
        else:
            value = bool(value)
        changed = self._options[name] != value
        self._options[name] = value
        if changed and name in ("ttl", "tos") and self._configured and self._local is not None:
            self._reconfigure_header()

    def _reconfigure_header(self):
        """Configure again, with only TimeToLive/TypeOfService (UDP6: HopLimit/TrafficClass)
        changed: EDK2 takes that on a configured instance without Configure(NULL), the posted
        Receive and queued datagrams kept (docs/edk2.md section 4.2), so IP_TTL and IP_TOS apply
        at once, as on Linux."""
        config = self._fam.udp_config(self._station, self._info.netmask, self._local[1], self._remote,
                                      self._options["ttl"], FIRMWARE_HOLD_US, bool(self._options["reuseaddr"]),
                                      self._options["tos"])
        errors.raise_for_status(self._call("Configure", ctypes.byref(config)), "udp-setsockopt")

    def get_option(self, name):
        return self._options[name]


reap = _closer.reap  # destroy closed endpoints whose Transmits have completed (or waited long enough)


def close_all(timeout=2.0):
    """Close every endpoint; wait up to ``timeout`` for in-flight Transmits. For tests/exit."""
    _closer.close_all(timeout, stack.pump)


def live_endpoints():
    # type: () -> int
    return _closer.count()
