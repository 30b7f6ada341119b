"""The TCBs of the simulated EDK2 TcpDxe: connection state machine, frames, timers, host sockets.

tcp4.py holds the EFI_TCP4_PROTOCOL entry points and their call-time checks; once a call is
accepted it hands over to ``Tcp4Stack`` here, which owns everything that happens afterwards:

* ``Tcp4Child``: EDK2's SOCKET and TCP_CB in one object, backed by a non-blocking host socket
  on loopback bound to the child's station address and port; a frame source for nic.py.
* Pacing (docs/edk2.md section 3.4): bytes from the host enter the stack only as *frames* taken by the NIC
  (``take_frame``: at most one MSS of data, one accepted connection, one connect completion,
  one FIN or one RST), pulled by ``Poll`` of any child or by MNP's 10 ms timer. TCP timers
  (connect timeout, FIN_WAIT_2, TIME_WAIT, LAST_ACK) tick every 200 ms at TPL_NOTIFY.
* The receive window: a child stops reading its host socket while its receive buffer holds
  ReceiveBufferSize bytes, so the host peer feels back-pressure.
* Outgoing data is "segmented" when it is handed to the host socket; the caller's fragments
  are read only then (zero-copy, docs/edk2.md section 3.3 Transmit), and the token completes when its last
  byte was handed over -- not when it is ACKed.
* Completions: Status is written, then the event signalled, with the firmware lock held at
  TPL_CALLBACK or above; ``machine.faults`` (faults.py) can delay, reorder and bunch them,
  split or coalesce received data, and reset connections.

What a host socket cannot express, and the choice made:

* Configure(NULL) and DestroyChild forget the TCB "without sending RST or FIN" (3.3). The host
  socket is therefore not closed (closing would send FIN): it becomes a *forgotten* socket that
  stays silent, and the first segment the peer sends afterwards (data or FIN) is answered with
  an RST, which is what EDK2 does for a segment that matches no TCB (3.6). A peer that never
  sends again sees nothing until it times out -- as on a real network. Machine shutdown resets
  every host socket still open so that host peers do not hang.
* A backlog-full listener "drops the SYN": the host kernel still completes the handshake for
  connections waiting in its own queue, but the model does not accept() them until a pending
  child is accepted, so the EFI side never sees them.
* Only 127.0.0.0/8 is reachable: a SYN to any other address goes nowhere and the connect
  times out, as a SYN to an unanswering host does.
* The machine cannot reach itself (EDK2's IP4 has no loopback; ``addressed_to_self``): a SYN to
  its own address goes nowhere either, although the host's loopback would deliver it to the
  machine's own listener. Two bitsnet endpoints of one machine never talk to each other.

The engine serves TCP6 as well (tcp6.py): what depends on the address family -- host socket
family, wildcard address, which addresses the wire reaches -- comes from the stack's ``family``
table (nic.IPV4 / nic.IPV6). The token structures it reads (EFI_TCP4_COMPLETION_TOKEN, _IO_TOKEN,
_LISTEN_TOKEN, _RECEIVE_DATA) have the same layout in TCP6 (docs/edk2.md section 3.1, pinned by
tests/test_efi_layout.py), so one set of readers serves both.
"""

from __future__ import print_function

import collections
import ctypes
import errno
import random
from efisim.nic import _host_socket  # the OS socket: once bitsnet is installed, `import socket` is bitsnet
import struct

from bitsnet import efidefs
from efisim import uefi
from efisim.faults import CompletingDriver, HeldCompletions
from efisim.firmware import FIRMWARE, pointer_address
from efisim.nic import IPV4, host_socket

TCP_TICK = 0.2  # TCP_TICK_HZ = 5: every TCP timer is quantised to 200 ms (docs/edk2.md section 3.4)
TCP_PORT_KNOWN = 1024  # ephemeral ports start above this (TcpBind)
MAX_SEGMENT_WRITE = 64 * 1024  # bytes handed to the host socket per send(): one "burst" of segments

Closed = efidefs.Tcp4StateClosed
Listen = efidefs.Tcp4StateListen
SynSent = efidefs.Tcp4StateSynSent
SynReceived = efidefs.Tcp4StateSynReceived
Established = efidefs.Tcp4StateEstablished
FinWait1 = efidefs.Tcp4StateFinWait1
FinWait2 = efidefs.Tcp4StateFinWait2
Closing = efidefs.Tcp4StateClosing
TimeWait = efidefs.Tcp4StateTimeWait
CloseWait = efidefs.Tcp4StateCloseWait
LastAck = efidefs.Tcp4StateLastAck

CONNECTING = (SynSent, SynReceived)
CONNECTED = (Established, CloseWait)
SYNCHRONIZED = (SynReceived, Established, FinWait1, FinWait2, CloseWait)  # Close(abort) sends RST

# EFI_TCP4_OPTION: (field, lowest accepted, highest accepted, default). EDK2 TcpConfigurePcb
# takes a value only inside the range and otherwise -- 0 included -- uses the default; for the
# fields in _ZERO_ACCEPTED, 0 is accepted and means "off" (docs/edk2.md section 3.9).
OPTION_RANGES = [
    ("ReceiveBufferSize", 8 * 1024, 2 * 1024 * 1024, 2 * 1024 * 1024),
    ("SendBufferSize", 8 * 1024, 2 * 1024 * 1024, 2 * 1024 * 1024),
    ("MaxSynBackLog", 5, 10, 10),
    ("ConnectionTimeout", 60, 75, 75),
    ("DataRetries", 6, 12, 12),
    ("FinTimeout", 2, 4, 2),
    ("TimeWaitTimeout", 2, 60, 2),
    ("KeepAliveProbes", 4, 8, 8),
    ("KeepAliveTime", 7200, 14400, 7200),
    ("KeepAliveInterval", 30, 60, 60),
]
_ZERO_ACCEPTED = ("TimeWaitTimeout", "KeepAliveProbes")
DEFAULT_OPTIONS = dict((name, default) for name, _, _, default in OPTION_RANGES)
DEFAULT_OPTIONS.update(EnableNagle=True, EnableTimeStamp=True, EnableWindowScaling=True)
# What TcpConfigurePcb keeps in the SOCKET rather than the TCB: set only from a ControlOption,
# never reset by Configure -- so Configure without ControlOption keeps the last ones.
_SOCKET_OPTIONS = ("ReceiveBufferSize", "SendBufferSize", "MaxSynBackLog")
# The BOOLEANs TcpConfigurePcb only ever turns off (TCP_CTRL_NO_NAGLE / NO_TS / NO_WS).
_STICKY_OFF = ("EnableNagle", "EnableTimeStamp", "EnableWindowScaling")
_KEEPALIVE = ("KeepAliveProbes", "KeepAliveTime", "KeepAliveInterval")


def configured_options(child, values):
    """The options a Configure leaves in force on ``child``, from ``values`` (the ControlOption
    with every number already in range, or None when Configure had no ControlOption).

    EDK2 quirk (TcpConfigurePcb, tests/firmware/DEVIATIONS history, measured on OVMF by
    tests/firmware/scenarios/23_tcp_options.scn): every Configure first resets the TCB's numbers
    to the defaults, then applies the ControlOption; but (1) the flags TCP_CTRL_NO_NAGLE, NO_TS
    and NO_WS are only ever set, never cleared -- not by Configure(NULL), not by a later
    Configure with them TRUE -- so once off they stay off for the life of the child (and of the
    children a listener clones); (2) KeepAliveProbes = 0 turns keep-alive off by a flag and
    leaves MaxKeepAlive, KeepAliveTime and KeepAliveInterval at their defaults, which is what
    GetModeData reports (8, 7200, 60); (3) the buffer sizes and backlog live in the SOCKET and
    change only when a ControlOption is given.
    """
    result = dict(DEFAULT_OPTIONS)
    for name in _SOCKET_OPTIONS:
        result[name] = child.options[name]
    if values is not None:
        result.update(values)
        if values["KeepAliveProbes"] == 0:
            for name in _KEEPALIVE:
                result[name] = DEFAULT_OPTIONS[name]
    for name in _STICKY_OFF:
        if not result[name]:
            child.sticky_off.add(name)
        elif name in child.sticky_off:
            result[name] = False
    return result

S = uefi  # status codes


def _errno(exc):
    return getattr(exc, "errno", None) or (exc.args[0] if exc.args else None)


def _loopback(address):
    return address.startswith("127.")


def addressed_to_self(machine, family, address, port, driver):
    """Is (address, port) this simulated machine itself rather than a host on the wire?

    EDK2 quirk (IP4 has no loopback interface; measured on OVMF by the fwtest scenarios
    tests/firmware/scenarios/25_tcp_self_connect.scn and 32_udp_self_send.scn): IP4 sends a
    packet for one of its own addresses to the wire like any other, and the ARP request for it
    is never answered -- so the firmware can never reach itself, while the simulator's wire
    (the host's loopback) would happily deliver it. IPv4: the NIC's address, or the explicit
    station address of any configured TCP4/UDP4 child. IPv6: the simulator's station address
    is ::1, which is also where every host peer is, so the address cannot tell; a port that one
    of ``driver``'s own children holds on ::1 can (no host socket can share it).
    """
    if family is IPV4:
        if address == machine.nic.ip4.address:
            return True
        for name in ("tcp4", "udp4"):
            children = getattr(machine.drivers.get(name), "children", {})
            if any(c.configured and c.station == address for c in children.values()):
                return True
        return False
    return address == "::1" and any(c.configured and c.port == port and c.station in ("::", "::1")
                                    for c in driver.children.values())


def _close_host(sock, reset):
    """Close a host socket; ``reset`` sends RST (SO_LINGER 0) instead of FIN."""
    if sock is None:
        return
    try:
        if reset:
            sock.setsockopt(_host_socket.SOL_SOCKET, _host_socket.SO_LINGER, struct.pack("ii", 1, 0))
    except (OSError, IOError):
        pass
    sock.close()


class _Transmit(object):
    """A Transmit token's data, wrapped by reference: (buffer address, length) per fragment."""

    def __init__(self, token, fragments, started):
        self.token = token  # address of the EFI_TCP4_IO_TOKEN (0 once cancelled)
        self.fragments = fragments
        self.length = sum(n for _, n in fragments)
        self.sent = 0
        self.started = started  # in the send buffer (ProcessingSndTokenList) vs still queued
        self.urgent = False  # Transmit's Urgent flag: the last byte goes out as out-of-band data

    def next_chunk(self, limit):
        """Read the caller's buffer now -- EDK2 reads it when it segments (docs/edk2.md section 3.3)."""
        offset = self.sent
        for buffer, length in self.fragments:
            if offset < length:
                return ctypes.string_at(buffer + offset, min(length - offset, limit))
            offset -= length
        return b""


class _ForgottenSocket(object):
    """A host socket whose TCB EDK2 has forgotten: silent until the peer sends, then RST."""

    def __init__(self, nic, sock, fin_seen):
        self.nic = nic
        self.sock = sock
        self._fd = sock.fileno()
        nic.add_source(self)
        # A FIN seen before the TCB was forgotten is old news: only an RST may still come.
        nic.set_interest(self, not fin_seen, False)

    def fileno(self):
        return self._fd

    def take_frame(self):
        try:
            data = self.sock.recv(1)
        except (OSError, IOError) as exc:
            if _errno(exc) in (errno.EAGAIN, errno.EWOULDBLOCK):
                return False
            data = None  # the peer's RST: nothing to answer
        # EDK2 quirk (TcpDxe, docs/edk2.md section 3.6): a segment for which no TCB exists is answered with RST.
        self.close(reset=True)
        return data is not None

    def close(self, reset=True):
        if self.sock is not None:
            self.nic.remove_source(self)
            _close_host(self.sock, reset)
            self.sock = None


class Tcp4Child(object):
    """One EFI_TCP4_PROTOCOL instance: EDK2's SOCKET and TCP_CB in one object."""

    def __init__(self, driver, parent=None):
        self.driver = driver
        self.nic = driver.nic
        self.parent = parent  # the listener an accepted child was cloned from
        self.app_owned = parent is None  # the application must DestroyChild it
        self.handle = FIRMWARE.new_handle()
        self.interface = driver.new_interface()
        self.address = ctypes.addressof(self.interface)
        self.state = Closed
        self.configured = False
        self.no_mapping = False
        self.active = True
        self.use_default = False
        self.station, self.mask, self.port = driver.family.any, "0.0.0.0", 0
        self.remote, self.rport = driver.family.any, 0
        self.tos, self.ttl = 0, 0
        self.options = dict(DEFAULT_OPTIONS)  # as GetModeData reports them (configured_options)
        self.sticky_off = set()  # type: set   # see configured_options: never emptied
        self.routes = []  # type: list   # this child's IP4 routes [(subnet, mask, gateway)]
        self.route_table = None  # driver memory handed out by GetModeData
        self.sock = None  # type: object   # host socket
        self._fd = None  # type: int or None   # set while registered with the NIC
        self.rx = bytearray()
        self.rx_total = 0
        self.fin_seen = False
        self.error = None  # type: int or None   # recorded socket error (SockError)
        self.closing = False  # Close() called: Receive/Transmit are refused from now on
        self.fin_pending = False  # our FIN goes out once the send queue is empty
        self.timer = 0  # ticks left on the timer of the current state
        self.tokens = []  # type: list   # every outstanding token address (duplicate-event check)
        self.connect_token = 0
        self.close_token = 0
        self.listen_tokens = collections.deque()  # type: collections.deque
        self.rx_tokens = collections.deque()  # type: collections.deque
        self.tx = collections.deque()  # type: collections.deque
        self.pending = []  # type: list   # listener: cloned children not yet accepted
        self.connect_errno = 0

    def __repr__(self):
        return "<Tcp4Child %s:%d %s>" % (self.station, self.port, efidefs.TCP4_STATE_NAMES.get(self.state))

    # ------------------------------------------------------------------ frame source (nic.py)
    def fileno(self):
        return self._fd

    def register(self, readable, writable):
        if self._fd is None and self.sock is not None:
            self._fd = self.sock.fileno()
            self.nic.add_source(self)
        if self._fd is not None:
            self.nic.set_interest(self, readable, writable)

    def update_interest(self):
        if self._fd is None:
            return
        if self.state == Listen:
            self.nic.set_interest(self, len(self.pending) < self.options["MaxSynBackLog"], False)
        elif self.state == SynSent:
            self.nic.set_interest(self, False, True)
        else:
            room = len(self.rx) < self.options["ReceiveBufferSize"]
            self.nic.set_interest(self, room and not self.fin_seen, bool(self.tx) or self.fin_pending)

    def unregister(self):
        if self._fd is not None:
            self.nic.remove_source(self)
            self._fd = None

    def drop_host_socket(self, how):
        """Let go of the host socket: "fin" (close), "rst" (SO_LINGER 0) or "forget" (3.3)."""
        sock, self.sock = self.sock, None
        self.unregister()
        if sock is None:
            return
        if how == "forget" and self.state in (Closed, Listen):
            how = "fin"  # no connection: nothing the peer could notice
        elif how == "forget" and self.state == SynSent:
            how = "rst"  # the SYN/ACK will find no TCB: answered with RST
        if how == "forget":
            forgotten = [z for z in self.driver.forgotten if z.sock is not None]
            forgotten.append(_ForgottenSocket(self.nic, sock, self.fin_seen))
            self.driver.forgotten = forgotten
        else:
            _close_host(sock, how == "rst")

    def take_frame(self):
        """Consume at most one frame from the host socket; True if one was consumed."""
        driver = self.driver
        if self.sock is None:
            return False
        if self.state == Listen:
            return driver.accept_one(self)
        if self.state == SynSent:
            return driver.finish_connect(self)
        if self.tx or self.fin_pending:
            driver.push(self)
            if self.sock is None:
                return True  # the push met a RST
        if self.fin_seen or len(self.rx) >= self.options["ReceiveBufferSize"]:
            # Not reading (window closed, or after the FIN), but an RST still gets through.
            if self.sock.getsockopt(_host_socket.SOL_SOCKET, _host_socket.SO_ERROR):
                driver.peer_reset(self)
                return True
            return False
        return driver.read_frame(self)


class Tcp4Stack(CompletingDriver):
    """The TCBs of one TcpDxe instance and everything that moves them between states.

    The driver (tcp4.Tcp4Driver) subclasses this and supplies the protocol-database side:
    ``new_child(parent)`` (a cloned child for an incoming connection) and ``remove_child(child)``.
    """

    # What DestroyChild does to the host socket of a child that is still connected. EDK2 sends
    # nothing (TcpDetachPcb just flushes the TCB); the peer gets RST on its next segment
    # (docs/edk2.md section 3.6), which "forget" reproduces. "rst" would reset the host peer at once.
    DESTROY_HOST = "forget"
    family = IPV4  # nic.IPV6 in tcp6.Tcp6Driver
    COMPLETION_TOKEN = efidefs.EFI_TCP4_COMPLETION_TOKEN  # its layout is TCP6's too

    def __init__(self, machine):
        self.machine = machine
        self.nic = machine.nic
        self.old_stack = machine.config.old_stack
        self.children = {}  # type: dict   # handle -> Tcp4Child, accepted and pending ones included
        self.forgotten = []  # type: list   # _ForgottenSocket
        # Completions held back under the delay/reorder/burst faults (faults.py), released by
        # deliver_delayed on the firmware's 10 ms tick.
        self._delayed = HeldCompletions()
        # EDK2 TcpDriverEntryPoint: mTcp4RandomPort = TCP_PORT_KNOWN + NET_RANDOM (seed) % TCP_PORT_KNOWN
        # (getrandbits: the same port for a seed on Python 2.7 and 3)
        self.next_port = TCP_PORT_KNOWN + random.Random(machine.config.seed).getrandbits(16) % TCP_PORT_KNOWN

    def reset_connection(self, port=None):
        """Fault helper: the peer resets every connection (or those with local/remote ``port``)."""
        count = 0
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            for child in list(self.children.values()):
                if child.sock is None or child.state in (Closed, Listen):
                    continue
                if port is not None and port not in (child.port, child.rport):
                    continue
                self.peer_reset(child, injected=True)
                count += 1
        return count

    # ------------------------------------------------------------------ token completion
    def flush(self, child, status, close_status=S.EFI_SUCCESS):
        """Complete every pending token: the close token first with ``close_status``, then the
        others with ``status`` (EDK2 SockConnFlush order, docs/edk2.md section 3.3 Close)."""
        if child.close_token:
            token, child.close_token = child.close_token, 0
            self.complete(child, token, close_status)
        if child.connect_token:
            token, child.connect_token = child.connect_token, 0
            self.complete(child, token, status)
        for queue in (child.listen_tokens, child.rx_tokens):
            while queue:
                self.complete(child, queue.popleft(), status)
        while child.tx:
            tx = child.tx.popleft()
            if tx.token:
                self.complete(child, tx.token, status)

    # ------------------------------------------------------------------ work the entry points start
    def ip_header(self, sock, child):
        """TcpSendIpPacket: every segment's IP header takes the TimeToLive and TypeOfService
        (TCP6: HopLimit, TrafficClass) the child was configured with -- here, the host socket's
        (an accepted child has its listener's, as TcpCloneTcb copies them)."""
        if self.family.host_family == _host_socket.AF_INET:
            wanted = ((_host_socket.IPPROTO_IP, _host_socket.IP_TTL, child.ttl or 64),
                      (_host_socket.IPPROTO_IP, _host_socket.IP_TOS, child.tos))
        else:
            wanted = ((_host_socket.IPPROTO_IPV6, getattr(_host_socket, "IPV6_UNICAST_HOPS", 16), child.ttl),
                      (_host_socket.IPPROTO_IPV6, getattr(_host_socket, "IPV6_TCLASS", 67), child.tos))
        for level, name, value in wanted:
            try:
                sock.setsockopt(level, name, value)
            except (OSError, IOError):
                pass  # the host refuses a value EDK2 would send as it is (a hop limit of 0)

    def start_connect(self, child, token, reachable):
        """Connect accepted: send the SYN (SynSent) and start the connect timer. ``reachable``:
        the route lookup found a next hop on loopback; otherwise the SYN silently goes nowhere."""
        child.tokens.append(token)
        child.connect_token = token
        child.state = SynSent
        child.error = None
        child.closing = child.fin_seen = child.fin_pending = False
        child.rx, child.rx_total = bytearray(), 0
        timeout = child.options["ConnectionTimeout"]
        faults = self.faults
        if faults is not None and getattr(faults, "connect_timeout", 0):
            timeout = faults.connect_timeout  # simulator-only knob: 60..75 s is too long for a test
        child.timer = self.ticks(timeout)
        if not reachable:
            return  # docs/edk2.md section 3.3: the SYN silently goes nowhere; the token times out
        if child.sock is None and not self.bind_host(child, child.station, child.port):
            return  # the host will not let us use the port again yet: no SYN
        child.connect_errno = 0
        self.ip_header(child.sock, child)
        err = child.sock.connect_ex((child.remote, child.rport))
        if err not in (0, errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            child.connect_errno = err  # the answer is seen as the next frame, not inside Connect
        child.register(False, True)
        child.update_interest()

    def queue_transmit(self, child, token, fragments, urgent=False):
        """Transmit accepted: queue the data by reference; segment it now if connected."""
        child.tokens.append(token)
        # Facts 3.3: while connecting the token is queued (SendTokenList); once connected the
        # data is wrapped by reference into the send buffer and segmented right away.
        child.tx.append(_Transmit(token, [f for f in fragments if f[1]], child.state in CONNECTED))
        child.tx[-1].urgent = urgent
        if child.state in CONNECTED:
            self.push(child)

    def start_close(self, child, token, abort):
        """Close accepted: abort, or close at once, or send our FIN after the queued data."""
        child.tokens.append(token)
        child.close_token = token
        child.closing = True
        if abort or child.rx:
            # Abort, or EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Close): unread data in the receive buffer
            # turns a graceful close into an RST. Closed at once; the close token completes
            # before Close returns, the rest get the socket error (EFI_ABORTED if none).
            reset = child.state in SYNCHRONIZED or bool(child.rx)
            self.to_closed(child, S.EFI_ABORTED, host="rst" if reset else "fin")
            return
        if child.state in (Closed, Listen, SynSent):
            # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Close): closing a listener does not destroy its pending
            # (unaccepted) children; only Configure(NULL)/DestroyChild does.
            pending, child.pending = child.pending, []
            self.to_closed(child, S.EFI_ABORTED, host="rst" if child.state == SynSent else "fin")
            child.pending = pending
            return
        if child.state == CloseWait:
            child.state = LastAck
        else:
            child.state = FinWait1
        child.fin_pending = True  # the FIN follows the data still queued
        self.push(child)

    def cancel_tokens(self, child, token):
        """SockCancel: abort ``token`` (0: every token but the close token); True if one matched."""
        found = False
        if child.connect_token and token in (0, child.connect_token):
            # The connection attempt itself goes on; only the token is aborted (SockCancel).
            found_token, child.connect_token = child.connect_token, 0
            self.complete(child, found_token, S.EFI_ABORTED)
            found = True
        for queue in (child.listen_tokens, child.rx_tokens):
            for queued in list(queue):
                if token in (0, queued):
                    queue.remove(queued)
                    self.complete(child, queued, S.EFI_ABORTED)
                    found = True
        for tx in list(child.tx):
            if tx.token and token in (0, tx.token):
                self.complete(child, tx.token, S.EFI_ABORTED)
                found = True
                if tx.started:
                    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Cancel): an in-progress Transmit is only
                    # signalled; its data stays in the send buffer and is still read later.
                    tx.token = 0
                else:
                    child.tx.remove(tx)
        return found

    # ------------------------------------------------------------------ children
    def destroy(self, child, host=None):
        """Tear a child down completely (DestroyChild, or an unaccepted child that died)."""
        self.unconfigure(child, host or self.DESTROY_HOST)
        self.deliver_delayed(child)  # EDK2 signals everything inside DestroyChild
        self.children.pop(child.handle, None)
        self.remove_child(child)
        if child.parent is not None and child in child.parent.pending:
            child.parent.pending.remove(child)
            child.parent.update_interest()

    def unconfigure(self, child, host="forget"):
        """Configure(NULL): flush every token with EFI_ABORTED, destroy pending children,
        forget the TCB without FIN or RST (see the module docstring), free the port."""
        self.flush(child, S.EFI_ABORTED, S.EFI_ABORTED)
        for pending in list(child.pending):
            self.destroy(pending, host)
        child.pending = []
        child.drop_host_socket(host)
        child.state = Closed
        child.configured = child.no_mapping = False
        child.closing = child.fin_pending = child.fin_seen = False
        child.rx = bytearray()
        child.error = None
        child.port = 0
        child.routes = []

    def bind_host(self, child, address, port):
        """Bind (and for a listener, listen on) the backing host socket. False if the host refuses."""
        if not self.family.reachable(address):
            return True  # not reachable from the host: the child exists but no traffic ever arrives
        sock = host_socket(_host_socket.SOCK_STREAM, self.family.host_family)
        try:
            sock.bind((address, port))
            if not child.active:
                sock.listen(child.options["MaxSynBackLog"])
        except (OSError, IOError):
            sock.close()
            return False
        child.sock = sock
        return True

    # ------------------------------------------------------------------ the receive path (frames)
    def accept_one(self, listener):
        """One incoming SYN on a listener: clone a child, or drop it when the backlog is full."""
        if len(listener.pending) >= listener.options["MaxSynBackLog"]:
            # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Accept): backlog full -> the SYN is silently dropped.
            listener.update_interest()
            return False
        try:
            conn, peer = listener.sock.accept()
        except (OSError, IOError) as exc:
            if _errno(exc) in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED):
                return False
            raise
        conn.setblocking(False)
        if (listener.remote != self.family.any and listener.remote != peer[0]) or \
                (listener.rport and listener.rport != peer[1]):
            _close_host(conn, True)  # no listener for this peer: RST
            return True
        child = self.new_child(parent=listener)
        child.configured, child.active = True, False
        child.use_default = listener.use_default
        child.station, child.mask, child.port = listener.station, listener.mask, listener.port
        child.remote, child.rport = peer[0], peer[1]
        child.tos, child.ttl = listener.tos, listener.ttl
        self.ip_header(conn, child)
        child.options = dict(listener.options)
        child.sticky_off = set(listener.sticky_off)  # TcpCloneTcb copies the CtrlFlag
        child.routes = list(listener.routes)
        child.sock = conn
        child.state = Established  # SynReceived lasts one handshake ACK: not observable here
        child.register(True, False)
        listener.pending.append(child)
        faults = self.faults
        if faults is not None and faults.take_accept_reset():
            # Fault: the peer's RST arrives before the application took the connection; EDK2
            # destroys an unaccepted child silently (docs/edk2.md section 3.3 Accept): no listen token completes.
            self.peer_reset(child, injected=True)
            listener.update_interest()
            return True
        self.deliver_children(listener)
        listener.update_interest()
        return True

    def deliver_children(self, listener):
        """Hand established pending children to listen tokens, oldest first, one per token."""
        while listener.listen_tokens:
            ready = [c for c in listener.pending if c.state in (Established, CloseWait)]
            if not ready:
                return
            child = ready[0]
            token = listener.listen_tokens.popleft()
            efidefs.EFI_TCP4_LISTEN_TOKEN.from_address(token).NewChildHandle = child.handle
            listener.pending.remove(child)
            child.app_owned = True
            self.complete(listener, token, S.EFI_SUCCESS)
            listener.update_interest()

    def finish_connect(self, child):
        """The SYN's answer: SYN/ACK (Established) or RST (refused)."""
        err = child.connect_errno or child.sock.getsockopt(_host_socket.SOL_SOCKET, _host_socket.SO_ERROR)
        if not err:
            try:
                child.sock.getpeername()
            except (OSError, IOError):
                return False  # still in progress
            child.state = Established
            child.timer = 0  # the connect timer stops
            if child.connect_token:
                token, child.connect_token = child.connect_token, 0
                self.complete(child, token, S.EFI_SUCCESS)
            child.update_interest()
            self.push(child)
            return True
        # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Connect / 3.6): RST to our SYN completes the connection
        # token with EFI_CONNECTION_RESET, not the EFI_CONNECTION_REFUSED the spec names.
        status = {
            errno.ECONNREFUSED: S.EFI_CONNECTION_RESET,
            errno.ETIMEDOUT: S.EFI_TIMEOUT,
            errno.EHOSTUNREACH: S.EFI_HOST_UNREACHABLE,
            errno.ENETUNREACH: S.EFI_NETWORK_UNREACHABLE,
        }.get(err, S.EFI_CONNECTION_RESET)
        self.to_closed(child, status, host="fin")
        return True

    def read_frame(self, child):
        """One segment of data (at most an MSS), or the peer's FIN, or its RST."""
        faults = self.faults
        limit = faults.frame_limit(self.nic.mss) if faults is not None else self.nic.mss  # split/coalesce
        limit = min(limit, child.options["ReceiveBufferSize"] - len(child.rx))
        reset_after = getattr(faults, "reset_after", 0) if faults is not None else 0
        if reset_after:
            limit = min(limit, reset_after - child.rx_total)
        try:
            data = child.sock.recv(max(limit, 1))
        except (OSError, IOError) as exc:
            if _errno(exc) in (errno.EAGAIN, errno.EWOULDBLOCK):
                return False
            self.peer_reset(child)
            return True
        if not data:
            self.peer_fin(child)
            return True
        child.rx_total += len(data)
        if not child.closing:  # after Close() nobody can read it any more: dropped
            child.rx += data
            self.deliver_rx(child)
        if reset_after and child.rx_total >= reset_after:
            self.peer_reset(child, injected=True)
            return True
        child.update_interest()
        return True

    def deliver_rx(self, child):
        """SockProcessRcvToken: fill queued Receive tokens from the buffer, FIFO."""
        while child.rx and child.rx_tokens:
            self.copy_out(child, child.rx_tokens.popleft())

    def copy_out(self, child, token):
        """Copy min(buffered, DataLength) bytes into the token's fragments and complete it."""
        io = efidefs.EFI_TCP4_IO_TOKEN.from_address(token)
        rx_address = pointer_address(io.Packet.RxData)
        rx = efidefs.EFI_TCP4_RECEIVE_DATA.from_address(rx_address)
        table = efidefs.fragment_table(rx_address + efidefs.EFI_TCP4_RECEIVE_DATA.FragmentTable.offset,
                                       rx.FragmentCount)
        total = min(len(child.rx), rx.DataLength)
        done = 0
        for fragment in table:
            if done >= total:
                break  # fragments after the last one used keep their old FragmentLength
            n = min(fragment.FragmentLength, total - done)
            if n:
                ctypes.memmove(fragment.FragmentBuffer, bytes(child.rx[done:done + n]), n)
            fragment.FragmentLength = n  # EDK2 overwrites the length of each fragment it wrote into
            done += n
        del child.rx[:done]
        rx.DataLength = done  # EDK2 overwrites DataLength with the bytes delivered
        rx.UrgentFlag = False
        self.complete(child, token, S.EFI_SUCCESS)
        child.update_interest()  # window update: reading may reopen the host socket

    def peer_fin(self, child):
        """The peer's FIN (docs/edk2.md section 3.6)."""
        child.fin_seen = True
        # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Receive): Receive tokens pending when the FIN is processed
        # complete with EFI_CONNECTION_FIN (they can be pending only while the buffer is empty).
        while child.rx_tokens:
            self.complete(child, child.rx_tokens.popleft(), S.EFI_CONNECTION_FIN)
        if child.state in (Established, SynReceived):
            child.state = CloseWait
            child.update_interest()
        elif child.state == FinWait1 and child.fin_pending:
            child.state = Closing  # our FIN still waits behind queued data; TIME_WAIT follows it
        elif child.state in (FinWait1, FinWait2, Closing):
            self.enter_time_wait(child)
        if child.parent is not None and child in child.parent.pending:
            self.deliver_children(child.parent)

    def peer_reset(self, child, injected=False):
        """The peer's RST (docs/edk2.md section 3.6). ``injected``: a fault, so the host peer is reset too."""
        if child.state in (Closing, LastAck, TimeWait):
            self.to_closed(child, S.EFI_ABORTED, host="rst")
            return
        child.error = S.EFI_CONNECTION_RESET
        self.to_closed(child, S.EFI_CONNECTION_RESET, host="rst" if injected else "fin")

    def enter_time_wait(self, child):
        child.drop_host_socket("fin")  # both FINs exchanged: the host socket has nothing more to say
        if child.options["TimeWaitTimeout"] == 0:
            self.to_closed(child, S.EFI_ABORTED)
            return
        child.state = TimeWait
        child.timer = self.ticks(child.options["TimeWaitTimeout"])

    def to_closed(self, child, status, host="fin"):
        """The TCB reaches Closed: close token SUCCESS first, then the rest with the socket error."""
        child.drop_host_socket(host)
        child.state = Closed
        child.timer = 0
        child.fin_pending = child.closing = False
        self.flush(child, child.error or status)
        if child.parent is not None and child in child.parent.pending:
            # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Accept): a child that dies before it was accepted
            # is destroyed silently.
            self.destroy(child, host="rst")

    @staticmethod
    def ticks(seconds):
        return max(1, int(round(seconds / TCP_TICK)))

    # ------------------------------------------------------------------ the send path
    def push(self, child):
        """Hand queued Transmit data to the host socket, completing tokens as they empty."""
        if child.sock is None or child.state not in (Established, CloseWait, FinWait1, Closing, LastAck):
            return
        while child.tx:
            tx = child.tx[0]
            tx.started = True
            chunk = tx.next_chunk(MAX_SEGMENT_WRITE)
            if chunk:
                try:
                    if tx.urgent and tx.sent + len(chunk) == tx.length:
                        sent = child.sock.send(chunk[:-1]) if len(chunk) > 1 else 0
                        if sent == len(chunk) - 1:
                            sent += child.sock.send(chunk[-1:], _host_socket.MSG_OOB)
                    else:
                        sent = child.sock.send(chunk)
                except (OSError, IOError) as exc:
                    if _errno(exc) in (errno.EAGAIN, errno.EWOULDBLOCK):
                        break
                    self.peer_reset(child)
                    return
                tx.sent += sent
                if sent < len(chunk):
                    break
                if tx.sent < tx.length:
                    continue
            child.tx.popleft()
            if tx.token:
                self.complete(child, tx.token, S.EFI_SUCCESS)
        if not child.tx and child.fin_pending:
            child.fin_pending = False
            try:
                child.sock.shutdown(_host_socket.SHUT_WR)  # our FIN, after the last byte
            except (OSError, IOError):
                pass
            if child.state == Closing:  # the peer's FIN came first: both are done now
                self.enter_time_wait(child)
                return
        child.update_interest()

    # ------------------------------------------------------------------ TCP timers (200 ms)
    def tcp_tick(self):
        for child in list(self.children.values()):
            if not child.timer and child.state not in (FinWait1, LastAck):
                continue
            if child.state == FinWait1 and not child.fin_pending:
                # Our FIN is ACKed at once on loopback: FIN_WAIT_2 and its timer (FinTimeout).
                child.state = FinWait2
                child.timer = self.ticks(child.options["FinTimeout"])
                continue
            if child.state == LastAck and not child.fin_pending:
                self.to_closed(child, S.EFI_ABORTED)
                continue
            if not child.timer:
                continue
            child.timer -= 1
            if child.timer:
                continue
            if child.state == SynSent:
                # The connect timer: EFI_TIMEOUT unless a soft error was recorded.
                self.to_closed(child, child.error or S.EFI_TIMEOUT, host="rst")
            elif child.state in (FinWait2, TimeWait):
                # FIN_WAIT_2 timeout: the TCB is dropped silently; the peer's next segment gets RST.
                self.to_closed(child, S.EFI_ABORTED, host="forget" if child.state == FinWait2 else "fin")

