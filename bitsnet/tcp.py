"""TcpEndpoint: one EFI_TCP4_PROTOCOL (or EFI_TCP6_PROTOCOL) child, as non-blocking primitives for
the socket layer. What differs between the two is in ``family.py``; everything here is shared.

Contents: module constants (each with its reason) -- ``Receiver`` and ``Sender``, the two
directions' mechanism -- ``TcpEndpoint`` (bind, connect_start, listen, accept, recv_into, send,
shutdown, close, readiness predicates, options) -- the background closer's TCP side
(``reap_step``; ``reap``, ``close_all``, ``live_endpoints``). The connection's states, the
events that move them and readiness per state are tables in ``tcp_state.py``. The child's life
(CreateChild, Configure retries, Routes, DestroyChild) is ``child.EfiChild``'s; ``progress()``
is ``stack.pump`` (Poll once, consume every completion, run the closers), where the speed policy
of receiving lives too; the closer itself is ``closer.Closer``.

Every method returns at once; a caller that must wait does so with
``events.wait_until(predicate, deadline, poll=ep.progress)``. The endpoint knows nothing of
socket objects, file descriptors or timeouts other than its own connect timer. The rules it
keeps are docs/architecture.md's (section 13 and the sections named):

Callbacks record, readers decide (section 13 rule 5). A token's ``on_done`` only appends the
finished Operation to ``_done`` and marks the endpoint dirty. ``update()`` -- run by every public
method, predicate and ``progress()`` -- consumes ``_done`` (copies received bytes into the Python
buffer, moves the state machine, notes errors and accepted children) and then ``_refill()``s: it
re-posts the Receive, sends queued data, keeps Accepts outstanding, checks the connect timer.

One Receive is outstanding (section 8.2) whenever the connection is up and the Python receive
buffer is under its bound (docs/edk2.md section 3.3 Receive: EDK2 has no "bytes available"
query). That token is how data, FIN and RST are noticed, and so what makes select() work; it also
keeps EDK2's own buffer empty, which matters at close. Receive often completes synchronously:
every post is followed by ``events.check``. One exception, for speed: after a Receive brought
data, the next one is posted by the next ``progress()`` -- every wait calls it, before it Polls,
so nothing is noticed later -- or by a ``recv`` that finds the buffer empty; a request/response
exchange thus answers before paying for the next Receive. While a bulk stream arrives (the last
Receive brought a full segment) that ``progress()`` first Polls a batch (``stack.pump``). A
blocking recv with nothing buffered (``recv_blocking``, the socket layer's fast path) consumes
its own Receive where it notices it, after a Poll, rather than through ``_record`` and ``update()``.

Sending is bounded in Python (section 8.1; docs/edk2.md section 8.1 #6: EDK2 never says "buffer
full"). ``send`` queues at most SO_SNDBUF bytes counting those still in Transmit tokens; the
queue is cut into Transmits of up to TRANSMIT_CHUNK bytes, at most MAX_TRANSMITS in flight,
zero-copy: the bytes object itself is the fragment and lives in the registry until its token
completes. A Transmit the firmware refuses is retried by every ``progress()`` (section 6.3).

Close is graceful and never blocks (section 9). ``close()`` hands the endpoint to the closer,
which sends what is queued, keeps reading (and dropping) incoming data so that Close(graceful)
does not turn into a RST (docs/edk2.md section 3.3 Close: unread data => RST), issues
Close(AbortOnClose=FALSE) and, when that token completes (after TIME_WAIT, >= 2 s), calls
DestroyChild. SO_LINGER (on, 0) and interpreter exit abort (RST) instead. No half-close
(docs/edk2.md section 3.3 Close): ``shutdown(SHUT_WR)`` starts that same close.
``shutdown(SHUT_RD)`` is Python's alone, as Linux's: recv stops waiting (b"" when nothing is
buffered) but data is still received, within SO_RCVBUF, and returned; only close() drops it.

Other differences from CPython on Linux, all forced by EFI_TCP4: ``bind()`` already configures
the child passively (see ``bind``); options reach EDK2 only at Configure, so TCP_NODELAY and
SO_KEEPALIVE set after connect/listen are recorded but not applied; SO_LINGER with a non-zero
time closes in the background like no linger; after a peer's RST buffered data is still
returned, then ECONNRESET once, then b"".
"""

import collections
import ctypes
import errno

import efi

from bitsnet import clock, efidefs, errors, events, family, stack
from bitsnet.buffers import ByteQueue
from bitsnet.child import NO_MAPPING_WAIT, PORT_TRIES, EfiChild, random_port
from bitsnet.constants import SHUT_RD, SHUT_RDWR, SHUT_WR
from bitsnet.endpoint import StreamEndpoint
# The speed policy lives with the pump that applies it (stack.py): set its numbers there.
from bitsnet.stack import RECEIVE_CHUNK, STREAM_SEGMENT
from bitsnet.tcp_state import (BOUND, CLOSED, CONNECTED, ESTABLISHED, FAILED, FIN_RECEIVED, FIN_WAIT_1,
                               FIN_WANTED, LISTEN, MAY_SEND, NOT_CONNECTED, READINESS, RESET, SYN_SENT, SYNCHRONIZED,
                               next_state)


TRANSMIT_CHUNK = 64 * 1024  # bytes per Transmit: big enough for throughput, small enough to stream
MAX_TRANSMITS = 4  # Transmit tokens in flight per endpoint; more queued data is coalesced
DEFAULT_SNDBUF = 256 * 1024  # Python send bound (SO_SNDBUF); also EDK2's SendBufferSize
DEFAULT_RCVBUF = 256 * 1024  # Python receive bound (SO_RCVBUF); also EDK2's ReceiveBufferSize
EDK2_BUFFER_RANGE = (8 * 1024, 2 * 1024 * 1024)  # docs/edk2.md section 3.9: outside it EDK2 silently uses 2 MiB
EDK2_BACKLOG_RANGE = (5, 10)  # docs/edk2.md section 3.9 MaxSynBackLog
# EDK2 quirk: its connect timer cannot be set below 60 s (docs/edk2.md section 3.9), so bitsnet runs its own.
CONNECT_TIMEOUT = 75.0
CLOSE_TIMEOUT = 60.0  # a background graceful close that cannot finish by then is aborted
TIME_TO_LIVE = 64

OPTIONS = ("nodelay", "keepalive", "rcvbuf", "sndbuf", "reuseaddr", "linger",
           "broadcast", "ttl", "tos")  # SO_BROADCAST: meaningless for TCP, but Linux accepts it, so we record it

# The stack-wide state (stack.py) this module adds to.
_closer = stack.tcp_closer
_live = _closer.live  # endpoints holding a child, not closed by the user
_closing = _closer.closing  # endpoints the closer still finishes (docs/architecture.md section 9)
_reap_wanted = _closer.wanted  # closing endpoints with a completion since they were reaped
_dirty = stack.dirty  # endpoints with completions not yet consumed
_rx_deferred = stack.rx_deferred  # endpoints whose next Receive the next pump posts (section 8.2)
_tx_retry = stack.tx_retry  # endpoints with a Transmit the firmware refused: the pump retries
TX_REFUSED_LIMIT = 10.0  # seconds of refused Transmits (EFI_OUT_OF_RESOURCES) before the connection fails
# recv_blocking consumes its own completed Receive without stack.settle(); every this-many-th
# time (and when notifications pile up) it settles anyway, so the rest of the stack is served
# even when every answer comes with the first Poll.
SETTLE_EVERY = 4
_settle_skipped = [0]  # recv_blocking's completions consumed since it last settled
_SENTINEL = events.SENTINEL
_notified = events.notified


def _bytes_data_offset():
    """Where a bytes object's first byte lies, from its id(): a constant in CPython (2.7's str
    and 3's bytes alike), checked on two objects; None if it is not (then ctypes.cast is used).
    ``ctypes.cast(data, c_void_p).value`` costs ~30 times as much in BITS (docs/performance.md
    section 7), once per Transmit."""
    probes = [b"probe", b"another probe"]
    offsets = set(ctypes.cast(p, ctypes.c_void_p).value - id(p) for p in probes)
    return offsets.pop() if len(offsets) == 1 else None


_BYTES_DATA = _bytes_data_offset()
_control_options = {}  # type: dict   # TcpEndpoint._control_option's, by the values they hold


def _clamp(value, bounds):
    return max(bounds[0], min(bounds[1], int(value)))


def _fail(err, detail):
    raise errors.socket_error(err, detail)


class Receiver(object):
    """The receiving direction's mechanism: the one Receive (docs/architecture.md section 8.2).

    Its buffer, packet and token are made once (``prepare``) and reused by every Receive: only
    one is ever outstanding, and EDK2 lets go of them when it completes the token (building them
    afresh was a visible part of a request/response round trip). ``stack.pump``
    reads ``streaming`` and calls ``TcpEndpoint.receive_now``."""

    __slots__ = ("op", "spent", "buffer", "packet", "token", "fragment", "completion", "streaming", "later")

    def __init__(self):
        self.op = None  # the outstanding Receive's Operation, or None
        self.spent = None  # the token's Operation once it completed: the next Receive resubmits it
        self.buffer = self.packet = self.token = self.fragment = self.completion = None
        self.streaming = False  # the last Receive brought a full segment: the pump Polls a batch first
        self.later = False  # the last Receive brought data: the next one waits for the next pump

    def prepare(self, fam):
        """The token and packet, refilled for the next Receive: (token, completion, keep)."""
        if self.buffer is None:
            self.buffer = ctypes.create_string_buffer(RECEIVE_CHUNK)
            self.packet = fam.TCP_RECEIVE_DATA()
            self.packet.FragmentCount = 1
            self.packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(self.buffer)
            self.token = fam.TCP_IO_TOKEN()
            self.token.Packet.RxData = ctypes.pointer(self.packet)
            # FragmentTable and CompletionToken build new ctypes objects on every read: keep
            # them (they are views into packet's and token's memory, kept here too).
            self.fragment = self.packet.FragmentTable[0]
            self.completion = self.token.CompletionToken
        # EDK2 quirk: Receive rewrites DataLength/FragmentLength (docs/edk2.md section 3.3 Receive): refill them.
        self.packet.DataLength = RECEIVE_CHUNK
        self.fragment.FragmentLength = RECEIVE_CHUNK
        return self.token, self.completion, (self.packet, self.buffer)

    def completed(self, op):
        """The Receive ``op`` completed: the bytes it brought (EFI_SUCCESS), else None."""
        self.op = None
        self.spent = op
        if op.status != efi.EFI_SUCCESS:
            self.streaming = self.later = False
            self.release()
            return None
        length = op.keep[0].DataLength  # docs/edk2.md section 3.3 Receive: EDK2 wrote how much it delivered
        self.streaming = length >= STREAM_SEGMENT
        self.later = True
        # A slice of the c_char array is one C call making the bytes object; ctypes.string_at is
        # a Python function around a foreign call, ~50 us in BITS (docs/performance.md section 7).
        return self.buffer[:length]

    def release(self):
        """Let go of the buffer, packet and token: the connection will take no more Receives (a
        FIN, a reset or an error ended them; ``prepare`` would make new ones). Not with the
        endpoint: a graceful close keeps that through TIME_WAIT (2 s), and a burst of connections
        held 64 KiB each meanwhile -- in BITS, whose heap is 23-28 MiB (docs/bits-environment.md
        section 1), a MemoryError after a few hundred."""
        self.spent = None
        self.buffer = self.packet = self.token = self.fragment = self.completion = None


class Sender(object):
    """The sending direction's mechanism (docs/architecture.md sections 8.1, 6.3): the queue not
    yet in Transmits, the Transmits in flight and what completed ones leave for reuse.
    ``stack.pump`` reads ``ops``, ``inflight``, ``queue`` and ``limit`` (a blocked sender)."""

    __slots__ = ("queue", "ops", "inflight", "free", "limit", "refused_since")

    def __init__(self, limit):
        self.queue = ByteQueue()
        self.ops = collections.deque()  # Transmit Operations in flight
        self.inflight = 0  # bytes in them
        self.free = []  # type: list   # (token, packet, fragment, completion, Operation) of completed Transmits
        self.limit = limit  # SO_SNDBUF: queue + in flight
        self.refused_since = None  # when Transmits started being refused (TcpEndpoint._transmit_refused)

    def room(self):
        # type: () -> int
        """Bytes send() may still queue."""
        return self.limit - self.inflight - self.queue.size

    def completed(self, op, urgent):
        """The Transmit ``op`` completed; a regular one's token goes back for reuse."""
        self.ops.remove(op)
        self.inflight -= op.keep[0].DataLength
        if not urgent:
            keep = op.keep
            op.keep = None  # the bytes sent: not held while the token waits for reuse
            self.free.append((op.token, keep[0], keep[2], keep[3], op))


class TcpEndpoint(EfiChild, StreamEndpoint):
    """One TCP4 or TCP6 child; see the module docstring for the rules it keeps.

    ``fam`` (``family.INET`` or ``family.INET6``) supplies everything that differs between the
    two protocols: the service binding, the structures, the access point and the addresses."""

    # Slots, not a per-instance dict: select() reads a few fields of every endpoint on every
    # round, and with a thousand endpoints their dicts (3 KiB each on 2.7) outgrow the caches.
    __slots__ = ("_state", "_options", "_configured", "_local", "_remote", "_done", "_rx", "receiver", "sender",
                 "_rd_shut", "_wr_shut", "_user_closed", "_close_op", "_connect_op", "_connect_deadline",
                 "_close_deadline", "_error", "_backlog", "_accept_ops", "_accepted", "_settled", "_awaiting",
                 "_bound", "_former")
    _closer = stack.tcp_closer
    plain_stream = True  # the socket layer's sendall/recv fast paths: send() and recv_blocking()

    def __init__(self, fam=None):
        EfiChild.__init__(self, fam or family.INET)
        self._state = CLOSED  # tcp_state.py; moved only by _event
        self._options = {"nodelay": False, "keepalive": False, "broadcast": False, "rcvbuf": DEFAULT_RCVBUF,
                         "sndbuf": DEFAULT_SNDBUF, "reuseaddr": False, "linger": None,
                         "ttl": TIME_TO_LIVE, "tos": 0}
        self._configured = None  # the (active, station, port, backlog, options) last configured
        self._local = None  # type: tuple
        self._remote = None  # type: tuple
        self._bound = None  # type: tuple   # (station or None, port) as bind() configured them
        self._former = None  # type: tuple   # getsockname's after a failed connect was forgotten
        self._done = []  # type: list   # Operations recorded by on_done (docs/architecture.md section 13 rule 5)
        self._rx = ByteQueue(DEFAULT_RCVBUF)  # received bytes not yet read
        self.receiver = Receiver()
        self.sender = Sender(DEFAULT_SNDBUF)
        # Outside the machine (tcp_state.py): the user's SHUT_RD, SHUT_WR and close().
        # SHUT_RD is the endpoint's alone: recv never waits from then on (b"" when nothing is
        # buffered), but what arrives is still received, within SO_RCVBUF, as on Linux. Dropping
        # what arrives is the user's close() (``_user_closed``), not this.
        self._rd_shut = False
        self._wr_shut = False
        self._user_closed = False
        self._close_op = None  # the Close token, graceful or abort, once posted
        self._connect_op = None
        self._connect_deadline = None
        self._close_deadline = None
        self._error = 0  # pending errno: SO_ERROR, raised once by recv/send
        self._backlog = 0
        self._accept_ops = []  # type: list
        self._accepted = collections.deque()  # type: collections.deque
        self._settled = False  # nothing for _refill() to do since the last update() (see _refresh)
        self._awaiting = None  # the address a connect waits for (connect_later)

    def _event(self, event):
        """Move the state machine (tcp_state.TRANSITIONS); a missing entry is a bug (AssertionError)."""
        self._state = next_state(self._state, event)

    def __repr__(self):
        return "<TcpEndpoint %s local=%r remote=%r>" % (self._state, self._local, self._remote)

    # --- firmware plumbing ------------------------------------------------------------------
    def _binding(self):
        return self._fam.tcp_sb, self._fam.TCP_PROTOCOL

    def _renew_child(self):
        """Swap the (unconfigured, tokenless) child for a new one.

        EDK2 quirk (TcpDxe TcpConfigurePcb, docs/edk2.md section 3.9; measured on OVMF by
        tests/firmware/scenarios/23_tcp_options.scn):
        EnableNagle=FALSE sets TCP_CTRL_NO_NAGLE, which nothing clears for the life of the child --
        not Configure(NULL), not a later Configure with EnableNagle=TRUE. So TCP_NODELAY turned
        back off between bind() and connect()/listen() needs a new child. (Timestamps and window
        scaling are as sticky, but bitsnet always asks for them.)"""
        self._destroy_child()  # nothing is outstanding on an unconfigured child
        self._ensure_child()

    @classmethod
    def _adopt(cls, the_nic, handle, listener):
        """Wrap a child EDK2 made for an accepted connection (docs/edk2.md section 3.3 Accept)."""
        fam = listener._fam
        ep = cls(fam)
        ep._options = dict(listener._options)
        ep._rx.limit = ep._options["rcvbuf"]
        ep.sender.limit = ep._options["sndbuf"]
        ep._adopt_child(the_nic, handle)
        ep._event("accepted")
        config = fam.TCP_CONFIG_DATA()  # zeroed: ControlOption NULL is not written (docs/edk2.md section 3.3)
        state = ctypes.c_int(0)
        if ep._call("GetModeData", ctypes.byref(state), ctypes.byref(config), None, None, None) == efi.EFI_SUCCESS:
            ap = config.AccessPoint
            ep._local = (fam.efi_text(ap.StationAddress), ap.StationPort)
            ep._remote = (fam.efi_text(ap.RemoteAddress), ap.RemotePort)
        else:
            ep._local = listener._local
        ep.update()
        return ep

    def _tcp_state(self):
        state = ctypes.c_int(efidefs.Tcp4StateClosed)
        self._call("GetModeData", ctypes.byref(state), None, None, None, None)
        return state.value

    def _control_option(self, backlog):
        """The ControlOption for these options and ``backlog``, and a pointer to it: built once
        per set of values and shared (EDK2 copies it at Configure, docs/edk2.md section 3.9),
        since a connect fills its fourteen fields otherwise (each ctypes field a visible cost in
        BITS, docs/performance.md section 7)."""
        options = self._options
        key = (self._fam.version, options["rcvbuf"], options["sndbuf"], backlog, options["keepalive"],
               options["nodelay"])
        o = _control_options.get(key)
        if o is None:
            if len(_control_options) >= 16:
                _control_options.clear()
            option = self._new_control_option(backlog)
            o = _control_options[key] = (option, ctypes.pointer(option))
        return o

    def _new_control_option(self, backlog):
        o = self._fam.TCP_OPTION()
        o.ReceiveBufferSize = _clamp(self._options["rcvbuf"], EDK2_BUFFER_RANGE)
        o.SendBufferSize = _clamp(self._options["sndbuf"], EDK2_BUFFER_RANGE)
        o.MaxSynBackLog = _clamp(backlog or EDK2_BACKLOG_RANGE[1], EDK2_BACKLOG_RANGE)
        # EDK2 quirk (TcpConfigurePcb, docs/edk2.md section 3.9): every number must be inside EDK2's range or it
        # silently becomes the default, and the BOOLEANs are literal (zero = off), so every field is spelled out.
        o.ConnectionTimeout = 75
        o.DataRetries = 12
        o.FinTimeout = 2
        o.TimeWaitTimeout = 2
        o.KeepAliveProbes = 8 if self._options["keepalive"] else 0
        o.KeepAliveTime = 7200
        o.KeepAliveInterval = 60
        o.EnableNagle = not self._options["nodelay"]
        o.EnableTimeStamp = True
        o.EnableWindowScaling = True
        o.EnableSelectiveAck = False  # EDK2 quirk (docs/edk2.md section 3.3 Configure): TRUE => EFI_UNSUPPORTED
        o.EnablePathMtuDiscovery = False
        return o

    def _configure(self, active, station, port, remote=None, backlog=0, deadline=None, info=None):
        """Configure the child (Configure(NULL) first if it was configured otherwise); ``deadline``:
        the socket call's, for the address bring-up (docs/architecture.md section 6.4); ``info``:
        the IP info the caller already has."""
        self._ensure_child()
        if info is None:
            info = self._ip_info(deadline)
        # The options as a copy of their dict: compared in C (a sorted tuple of them cost a
        # sort and a tuple per connect, docs/performance.md section 7).
        wanted = (active, station, port, remote, backlog, dict(self._options))
        if self._configured == wanted:
            return info
        if self._configured is not None:
            self._call("Configure", None)
            nagle_was_off = self._configured[5]["nodelay"]
            self._configured = None
            if nagle_was_off and not self._options["nodelay"]:
                self._renew_child()
        fam = self._fam
        config = fam.tcp_config(self._options["ttl"], self._options["tos"])
        # No port asked for: a random one, not EDK2's next sequential one (child.random_port).
        tries = PORT_TRIES if port == 0 else 0
        # IPv4: the station address is always explicit (docs/bits-efi.md section 2, docs/edk2.md section 3.7); IPv6:
        # None (all zero) lets IP6 choose the source, and is the wildcard listener (docs/edk2.md section 3.1).
        peer = remote if active else None
        fam.tcp_access_point(config, station, info.netmask, random_port(peer) if tries else port, remote, active)
        config.ControlOption = self._control_option(backlog)[1]
        until = clock.monotonic() + NO_MAPPING_WAIT
        retried = False
        while True:
            status = self._configure_child(config, until, deadline)  # EFI_NO_MAPPING: retried there
            if status == efi.EFI_SUCCESS:
                break
            if status == efi.EFI_INVALID_PARAMETER and tries:
                # A random port that clashes (docs/edk2.md section 3.8): another, then EDK2's own choice.
                tries -= 1
                config.AccessPoint.StationPort = random_port(peer) if tries else 0
                continue
            if status == efi.EFI_INVALID_PARAMETER and port:
                # EDK2 quirk (TcpBind, docs/edk2.md section 3.8): a port clash is EFI_INVALID_PARAMETER (errors.py:
                # EADDRINUSE), and a closing or TIME_WAIT child keeps its port. SO_REUSEADDR: abort our own ones.
                if self._options["reuseaddr"] and not retried and _abort_closing(station or fam.wildcard, port):
                    retried = True
                    continue
                errors.raise_for_status(status, "bind", "port %d on %s, Configure" % (port, station or fam.wildcard))
            errors.raise_for_status(status, "Configure")
        self._configured = wanted
        self._add_routes(info, strict=True, remote=remote and remote[0])
        port = config.AccessPoint.StationPort or port  # the port asked for is the one bound (docs/edk2.md section 3.8)
        if not port or (station is None and active):
            # EDK2 chose the port, or (IPv6) the source address: ask it. Otherwise no GetModeData.
            mode = fam.TCP_CONFIG_DATA()
            if self._call("GetModeData", None, ctypes.byref(mode), None, None, None) == efi.EFI_SUCCESS:
                port = mode.AccessPoint.StationPort  # port 0: the ephemeral one EDK2 chose
                if station is None and active:  # IPv6: the source IP6 chose, else the preferred one
                    chosen = fam.efi_text(mode.AccessPoint.StationAddress)
                    station = chosen if chosen != fam.wildcard else (info.address or fam.wildcard)
        self._local = (station or fam.wildcard, port)
        return info

    def _submit(self, kind, token, completion, keep=()):
        return events.submit(token, completion, self._record, self, keep, kind)

    def _record(self, op):
        # on_done: record only (docs/architecture.md section 13 rule 5).
        self._done.append(op)
        if self._user_closed:
            _reap_wanted.add(self)  # a closing endpoint moved: the closer's next reap_due() looks at it
        self._settled = False
        _dirty.add(self)

    # --- consuming completions (stack.pump calls update() and receive_now()) -----------------
    def update(self):
        """Consume the recorded completions, then post what should be outstanding."""
        while True:
            self._consume()
            if not self._refill():
                break
        self._settled = True

    def receive_now(self):
        """Post the Receive the last completion deferred (stack.pump, docs/architecture.md section 8.2)."""
        receiver = self.receiver
        receiver.streaming = receiver.later = False  # post now; its completion says what comes next
        self.update()

    def _refresh(self):
        # For the readiness predicates: select() asks several of them of every socket on every
        # round, so an idle socket must cost a few attribute reads, not a full update(). Only
        # a recorded completion (_record), a running connect timer, queued data (a Transmit
        # the firmware refused is retried, _post_transmit) or an option change (set_option)
        # can make _refill() do something since the last update().
        if self._done or not self._settled or self._state == SYN_SENT or self.sender.queue.size:
            self.update()

    def _consume(self):
        while self._done:
            op = self._done.pop(0)
            _CONSUMERS[op.kind](self, op)
        _dirty.discard(self)

    def _set_error(self, err):
        if not self._error:
            self._error = err

    def _lost(self, err):
        """The connection is lost with ``err`` (kept pending unless one already is)."""
        if err == errno.ECONNRESET and self._state in FIN_RECEIVED:
            err = errno.EPIPE  # as Linux's tcp_reset: a RST after the peer's FIN is a broken pipe
        self._set_error(err)
        self._event("reset")

    def _done_rx(self, op):
        data = self.receiver.completed(op)
        status = op.status
        if data is not None:
            if not self._user_closed:  # closed: nobody reads; the close drains EDK2 (section 9)
                self._rx.append(data)
        elif status == efi.EFI_CONNECTION_FIN:  # docs/edk2.md section 3.6: pending Receive on peer FIN
            self._event("fin")
        elif status == efi.EFI_ABORTED:
            self._event("reset")
        else:
            self._lost(errors.errno_for(status, "recv"))

    def _done_tx(self, op):
        self.sender.completed(op, urgent=op.kind == "txu")
        if op.status not in (efi.EFI_SUCCESS, efi.EFI_ABORTED):
            self._lost(errors.errno_for(op.status, "send"))

    def _done_connect(self, op):
        self._connect_op = None
        if self._state != SYN_SENT:
            return
        if op.status == efi.EFI_SUCCESS:
            self._event("established")
            if self._wr_shut:
                self._event("close")  # shutdown(SHUT_WR) while connecting
        else:
            # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Connect): RST to our SYN is EFI_CONNECTION_RESET.
            self._event("refused")
            self._set_error(errors.errno_for(op.status, "connect"))

    def _done_accept(self, op):
        self._accept_ops.remove(op)
        if op.status == efi.EFI_SUCCESS and op.token.NewChildHandle:
            child = TcpEndpoint._adopt(self._nic, op.token.NewChildHandle, self)
            if self._state == LISTEN:
                self._accepted.append(child)
            else:
                child.close(abort=True)

    def _done_close(self, op):
        pass  # the closer (or recv's EOF) looks at self._close_op.done

    def _refill(self):
        """Post what should be outstanding. True if something completed at once."""
        if self._state not in SYNCHRONIZED:
            return self._refill_unconnected()
        if self._close_op is not None:
            return False
        sender = self.sender
        while sender.queue.size and len(sender.ops) < MAX_TRANSMITS:
            if not self._post_transmit(sender.queue.read(TRANSMIT_CHUNK)):
                break
        synchronous = False
        state = self._state
        if self.receiver.op is None and (state == ESTABLISHED or state == FIN_WAIT_1):
            if state == FIN_WAIT_1 or self._user_closed:
                synchronous = self._post_receive()  # drained even when full: a close is coming (section 9)
            elif self._rx.size < self._rx.limit:  # not full() (a TCP buffer always has a limit)
                if self.receiver.streaming or self.receiver.later:
                    _rx_deferred.add(self)  # the next progress() (or a recv that would block) posts it
                else:
                    synchronous = self._post_receive()
        if self._state in FIN_WANTED and not synchronous and not sender.queue.size and not sender.ops:
            if not self._post_close(abort=False):
                self._event("reset")  # e.g. ACCESS_DENIED: the connection is already gone (docs/edk2.md section 3.5)
        return synchronous

    def _refill_unconnected(self):
        """_refill() for a listener (Accepts) and a connect under way (our own timer)."""
        if self._state == SYN_SENT and self._connect_deadline is not None \
                and clock.monotonic() >= self._connect_deadline:
            self._awaiting = None
            self._post_abort()  # EDK2's own timer is >= 60 s (docs/edk2.md section 3.9): ours wins
            self._event("timeout")
            self._error = errno.ETIMEDOUT
            return False
        if self._awaiting is not None:
            self._connect_awaited()
            return bool(self._done)  # the SYN went out and may have been answered at once
        if self._state == LISTEN:
            while len(self._accept_ops) + len(self._accepted) < self._backlog:
                if self._post_accept():
                    return True
        return False

    def _post_receive(self):
        receiver = self.receiver
        token, completion, keep = receiver.prepare(self._fam)
        op = receiver.spent
        if op is None or op.owner is not self:
            op = self._submit("rx", token, completion, keep=keep)
        else:
            events.resubmit(op)  # the same token, packet and buffer: no new Operation
        status = self._call("Receive", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)  # the firmware never took the token: the buffer is free
            receiver.release()
            if status == efi.EFI_CONNECTION_FIN:
                # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Receive): after the peer's FIN with nothing
                # buffered, Receive() *returns* EFI_CONNECTION_FIN (the token is not signalled).
                self._event("fin")
            else:
                self._refused(status, "recv")
            return False
        self.receiver.op = op
        return events.check(op)

    def _refused(self, status, op_name):
        """A call answered an error: find out why (docs/edk2.md section 3.5) and record it."""
        if status == efi.EFI_ACCESS_DENIED and self._tcp_state() == efidefs.Tcp4StateClosed:
            op_name = "tcp-closed"  # EDK2 quirk (TcpDxe, docs/edk2.md section 3.5): a RST (errors.py: ECONNRESET)
        self._lost(errors.errno_for(status, op_name))

    def _post_transmit(self, data, urgent=False):
        """One Transmit of ``data`` (bytes, at most TRANSMIT_CHUNK). False if EDK2 refused it.
        ``urgent`` (send_urgent): EFI's Urgent flag, on a token of its own that is not reused and
        whose refusal is not retried (the caller says "would block")."""
        sender = self.sender
        size = len(data)
        keep = None
        if sender.free and not urgent:
            # a completed Transmit's token, packet, fragment, completion and Operation: EDK2 let go of them
            token, txdata, fragment, completion, op = sender.free.pop()
            keep = op.keep = (txdata, data, fragment, completion)
            events.resubmit(op)
        else:
            token, txdata, fragment, completion = self._transmit_token(urgent)
        txdata.DataLength = fragment.FragmentLength = size
        # Zero-copy (docs/edk2.md section 3.3 Transmit): the bytes object is the fragment; kept in the registry.
        if _BYTES_DATA is not None and type(data) is bytes:
            fragment.FragmentBuffer = id(data) + _BYTES_DATA
        else:
            fragment.FragmentBuffer = ctypes.cast(data, ctypes.c_void_p).value
        if keep is None:
            op = self._submit("txu" if urgent else "tx", token, completion, keep=(txdata, data, fragment, completion))
        status = self._call("Transmit", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            if not urgent:
                sender.free.append((token, txdata, fragment, completion, op))
                sender.queue.unread(data)
            if status != efi.EFI_OUT_OF_RESOURCES:
                self._refused(status, "send")
            elif not urgent:
                self._transmit_refused()
            return False
        if sender.refused_since is not None and not urgent:
            sender.refused_since = None
            _tx_retry.discard(self)
        if completion.Status == efi.EFI_SUCCESS and not urgent and not self._user_closed:
            # EDK2 took the bytes into its send buffer inside the call (the usual case for a
            # small send): consume the completion here rather than record it for the next
            # update() (docs/performance.md section 7). A closing endpoint's completions go
            # through _record, which tells the closer.
            events.take(op)
            op.keep = None
            sender.free.append((token, txdata, fragment, completion, op))
            return True
        sender.ops.append(op)
        sender.inflight += size
        events.check(op)
        return True

    def _transmit_token(self, urgent):
        """A new Transmit token with its packet, the packet's one fragment and the token's
        completion: the last two are views into the first two's memory (FragmentTable and
        CompletionToken build a new ctypes object on every read), kept with them until EDK2
        completes the token."""
        txdata = self._fam.TCP_TRANSMIT_DATA()
        txdata.Push = True
        txdata.Urgent = urgent
        txdata.FragmentCount = 1
        token = self._fam.TCP_IO_TOKEN()
        token.Packet.TxData = ctypes.pointer(txdata)
        return token, txdata, txdata.FragmentTable[0], token.CompletionToken

    def _transmit_refused(self):
        """EFI_OUT_OF_RESOURCES: try again from every progress(), whichever socket drives it
        (docs/architecture.md section 6.3: the data was accepted by send(), and the program may now wait on
        another socket for the answer); after TX_REFUSED_LIMIT seconds the connection fails
        with ENOBUFS, loudly, rather than hold the data for ever."""
        sender = self.sender
        now = clock.monotonic()
        if sender.refused_since is None:
            sender.refused_since = now
        elif now - sender.refused_since >= TX_REFUSED_LIMIT:
            sender.refused_since = None
            _tx_retry.discard(self)
            sender.queue.discard()
            self._set_error(errno.ENOBUFS)
            self._abort()
            return
        _tx_retry.add(self)

    def _post_accept(self):
        token = self._fam.TCP_LISTEN_TOKEN()
        op = self._submit("accept", token, token.CompletionToken)
        status = self._call("Accept", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            self._set_error(errors.errno_for(status, "accept"))
            self._backlog = 0
            return False
        self._accept_ops.append(op)
        return events.check(op)

    def _post_close(self, abort):
        """Close(AbortOnClose=``abort``); False if the call was refused (the connection is gone)."""
        token = self._fam.TCP_CLOSE_TOKEN()
        token.AbortOnClose = abort
        op = self._submit("close", token, token.CompletionToken)
        status = self._call("Close", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            return False
        self._close_op = op
        events.check(op)
        return True

    def _post_abort(self):
        """Close(AbortOnClose=TRUE): RST, state Closed, completes synchronously (docs/edk2.md section 3.3)."""
        if self._proto is not None and (self._close_op is None or self._close_op.done):
            self._close_op = None
            self._post_close(abort=True)

    def _abort(self):
        """Reset the connection (RST) and say so to the state machine."""
        self._post_abort()
        self._event("reset")

    def _destroy(self):
        """DestroyChild and release every token the firmware has let go of (EfiChild)."""
        self._destroy_child()
        _rx_deferred.discard(self)
        _tx_retry.discard(self)
        self._event("destroy")

    # --- the API -----------------------------------------------------------------------------
    def _check_open(self):
        if self._user_closed:
            _fail(errno.EBADF, "endpoint is closed")

    def _address(self, address, deadline=None):
        """(host, port, IP info) of an address the socket layer validated (_socket._sockaddr: a
        canonical literal of this family, or the wildcard; a port 0-65535): trusted here."""
        host, port = address[:2]
        fam = self._fam
        info = self._ip_info(deadline)
        if fam.is_wildcard(host):
            # EDK2 quirk (docs/bits-efi.md section 4): a 0.0.0.0 TCP4 listener is not served; TCP6 takes ::
            # (docs/edk2.md section 3.1).
            host = info.address if fam.version == 4 else fam.wildcard
        return host, port, info

    def bind(self, address, deadline=None):
        """Reserve the local address now (a passive Configure), so errors and the port are known.

        CPython reports EADDRINUSE and the real port at bind(); EDK2 binds ports only in
        Configure, and only a passive Configure needs no peer. So bind() configures the child
        passively (it already listens in EDK2's eyes: SYNs that arrive before listen() are kept
        in EDK2's backlog); listen() keeps that configuration, connect() re-configures it as an
        active child on the same port.
        """
        self._check_open()
        if self._state != CLOSED:
            _fail(errno.EINVAL, "already bound")
        host, port, info = self._address(address, deadline)
        if host != info.address and host != self._fam.wildcard and host not in getattr(info, "addresses", ()):
            _fail(errno.EADDRNOTAVAIL, "%s is not this machine's address (%s)" % (host, info.address))
        station = None if host == self._fam.wildcard else host
        self._configure(False, station, port, deadline=deadline)
        self._bound = (station, port)
        self._event("bind")

    def connect_start(self, address, timeout=None, deadline=None):
        """Send the SYN. Wait for ``connected`` or ``take_error()``; ``timeout``: our own timer;
        ``deadline``: the socket call's, for the address bring-up (docs/architecture.md section 6.4)."""
        self._check_open()
        self.disconnect()  # a new attempt after a failed one was reported, as Linux allows
        if self._state != CLOSED and self._state != BOUND:
            # EALREADY/EISCONN are the socket layer's to say (_socket.socket._connect)
            _fail(errno.EINVAL, "cannot connect in state %s" % self._state)
        status = self._send_syn(address, timeout, deadline)
        self._event("connect")
        if status != efi.EFI_SUCCESS:
            # Refused by the call itself: the error is connect()'s, and the socket is left as
            # Linux leaves one whose connect failed at once (TCP_CLOSE: POLLOUT|POLLHUP, no POLLIN).
            self._event("refused")
            self._forget_peer()
            errors.raise_for_status(status, "connect")
        self.update()

    def disconnect(self):
        """connect() reported a failed connect (endpoint.StreamEndpoint.disconnect)."""
        if self._state == FAILED and self._handle is not None and not events.outstanding(self):
            self._forget_peer()

    def _forget_peer(self):
        """After a failed connect: the child forgets the peer (Configure(NULL)) and the endpoint
        is a fresh one (Closed), as Linux's tcp_disconnect leaves a socket -- which keeps what
        bind() asked for: a port bound by number stays bound (SOCK_BINDPORT_LOCK; here: bound
        again, Bound), an address bound stays the source (SOCK_BINDADDR_LOCK). Otherwise the
        port is given back, yet getsockname() still shows it (Linux never clears the source
        port), with the bound address or the wildcard: ``_former``."""
        former = self._local
        self._call("Configure", None)
        self._configured = self._local = self._remote = None
        self._error = 0
        self._event("disconnect")
        bound = self._bound
        if bound is not None and bound[1]:
            try:
                self._configure(False, bound[0], bound[1])
                self._event("bind")
                return
            except errors.error:
                self._local = None  # the port is gone after all: a fresh endpoint
        if former is not None:
            self._former = (bound[0] if bound is not None and bound[0] else self._fam.wildcard, former[1])

    def _send_syn(self, address, timeout, deadline):
        """Configure the child actively and call Connect: its status (on EFI_SUCCESS the token is
        outstanding and our connect timer runs). Errors before the call raise."""
        host, port, info = self._address(address, deadline)
        if port == 0:
            _fail(errno.ECONNREFUSED, "port 0")
        local_port = self._local[1] if self._local else 0
        self._configure(True, info.address if self._fam.version == 4 else None, local_port, remote=(host, port),
                        deadline=deadline, info=info)
        self._remote = (host, port)
        self._rx.limit = self._options["rcvbuf"]
        token = self._fam.TCP_CONNECTION_TOKEN()
        op = self._submit("connect", token, token.CompletionToken)
        status = self._call("Connect", ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            return status
        self._connect_op = op
        self._connect_deadline = clock.monotonic() + (CONNECT_TIMEOUT if timeout is None else timeout)
        events.check(op)
        return status

    def connect_later(self, address):
        """A non-blocking connect whose address bring-up (DHCP, EFI_NO_MAPPING, SLAAC) is still
        under way (docs/architecture.md section 6.4): the endpoint reads as connecting (SynSent) at
        once, and every update tries again without waiting, until the SYN goes out or the
        bring-up fails (its error then is the connect's, as SO_ERROR)."""
        self._check_open()
        self._awaiting = address
        self._event("connect")
        self._connect_deadline = clock.monotonic() + CONNECT_TIMEOUT

    def _connect_awaited(self):
        address, self._awaiting = self._awaiting, None
        try:
            status = self._send_syn(address, None, clock.monotonic())  # never wait inside an update
        except (errors.error, efi.EFIException) as exc:
            if isinstance(exc, efi.EFIException):
                exc = errors.from_efi_exception(exc, "connect")  # the one translation (errors.py)
            if isinstance(exc, errors.timeout) and not exc.errno:  # not ETIMEDOUT: our deadline
                self._awaiting = address  # still no address: stay in SynSent
                return
            self._event("refused")
            self._set_error(exc.errno or errno.EIO)
            return
        if status != efi.EFI_SUCCESS:
            self._event("refused")
            self._set_error(errors.errno_for(status, "connect"))

    def listen(self, backlog=EDK2_BACKLOG_RANGE[1]):
        """Start listening; up to ``backlog`` connections are accepted ahead (Accept tokens +
        children waiting in Python); EDK2's own SYN backlog is ``backlog`` clamped to 5..10."""
        self._check_open()
        if self._state == LISTEN:
            self._backlog = max(1, backlog)
            self.update()
            return
        if self._state != CLOSED and self._state != BOUND:
            _fail(errno.EINVAL, "cannot listen in state %s" % self._state)
        if self._local is None:
            host, port, info = self._address(("", 0))
        else:
            host, port = self._local
        self._configure(False, host, port, backlog=_clamp(max(backlog, 1), EDK2_BACKLOG_RANGE))
        self._event("listen")
        self._backlog = max(1, backlog)
        self.update()

    def accept(self):
        """The next accepted connection as a TcpEndpoint, or None (would block)."""
        self._check_open()
        if self._state != LISTEN:
            _fail(errno.EINVAL, "not listening")
        self.update()
        if self._accepted:
            child = self._accepted.popleft()
            self.update()  # keep the backlog's worth of Accepts outstanding
            return child
        if self._error:
            err, self._error = self._error, 0
            _fail(err, "accept")
        return None

    def recv_into(self, buffer, nbytes=None, peek=False):
        """Bytes copied into ``buffer`` (0: EOF), or None if that would block."""
        self._check_open()
        self._refresh()
        if nbytes is None:
            nbytes = len(memoryview(buffer))
        if not nbytes:
            return 0
        while not self._rx.size:
            outcome = self._nothing_buffered()
            if outcome is not True:
                return outcome
        n = self._rx.readinto(buffer, nbytes, consume=not peek)
        if not peek:
            self._room_again()
        return n

    def recv(self, nbytes, peek=False):
        """Up to ``nbytes`` bytes (b"": EOF), or None if that would block. Unlike recv_into, a
        whole received chunk is handed over as it is, uncopied (socket.recv's common case)."""
        self._check_open()
        self._refresh()
        if not nbytes:
            return b""
        while not self._rx.size:
            outcome = self._nothing_buffered()
            if outcome is not True:
                return None if outcome is None else b""
        if peek:
            return self._rx.peek(nbytes)
        data = self._rx.read(nbytes)
        self._room_again()
        return data

    def _room_again(self):
        # Bytes were consumed: repost the Receive if the full buffer had held it back (section 8.2).
        # With one outstanding, or one deferred (posted by the next progress()), nothing else
        # can have changed since the _refresh() before, so no update().
        if self.receiver.op is None and self not in _rx_deferred:
            self.update()

    def _nothing_buffered(self):
        """recv found no buffered bytes: 0 at EOF (or after SHUT_RD), None if it would block, the
        pending error raised -- or True once a Receive, posted now, brought something: look again.
        Linux's tcp_recvmsg order: a pending error first, even after SHUT_RD, then EOF."""
        if self._error and self._error != errno.EPIPE:
            err, self._error = self._error, 0
            _fail(err, "recv")  # EPIPE is left to send: recv is at EOF then, as on Linux
        state = self._state
        if state in NOT_CONNECTED:
            if self._rd_shut:
                return 0  # SHUT_RD while connecting, then the connect failed
            _fail(errno.ENOTCONN, "recv")
        if state in FIN_RECEIVED or state == RESET:
            return 0
        if state == SYN_SENT:
            return 0 if self._rd_shut else None
        receiver = self.receiver
        if self._close_op is not None and receiver.op is None:
            return 0  # no half-close (docs/edk2.md section 3.3 Close): after our FIN nothing more comes
        if receiver.later and not receiver.streaming and receiver.op is None and self in _rx_deferred:
            # The deferred Receive's exception (section 8.2) ends when the buffer runs dry: post it
            # now (it may complete at once, with data EDK2 already holds) rather than in the next
            # progress(). _refresh() left nothing else for update() to do, and what deferred this
            # Receive still holds (the buffer is empty, no EOF, no error): post it directly.
            _rx_deferred.discard(self)
            receiver.later = False
            if self._post_receive():
                self.update()  # it completed at once: consume it
            if self._rx.size or self._error or self._state in FIN_RECEIVED or self._state == RESET:
                return True
        if self._rd_shut:
            return self._nothing_after_shut()
        return None

    def _nothing_after_shut(self):
        """recv after SHUT_RD found nothing buffered: it never waits, but what has already reached
        the machine comes first, as Linux's recv returns what its receive queue holds -- and only
        a Poll takes it in (nothing drives the firmware between a program's calls). So one pump
        (the deferred Receive, a Poll, the completions): True if it brought data or an error (look
        again: the error is raised first, as Linux's), else 0 (EOF)."""
        stack.pump(self)
        return True if self._rx.size or self._error and self._error != errno.EPIPE else 0

    def recv_blocking(self, nbytes, timeout):
        """socket.recv(``nbytes``) with no flags on a socket whose timeout is ``timeout`` (None, or
        > 0): the bytes, b"" at EOF (or after SHUT_RD with nothing come), the pending error raised, or
        ``errors.timeout``. The same answers as the socket layer's generic way (recv; wait until
        can_recv over progress(); recv again), made the round trip's fast path
        (docs/performance.md section 7): the deadline is read only when it has to wait; while its
        Receive is outstanding each round Polls and looks at that token's Status itself, and a
        completion with data is consumed right there (``events.take``, as _post_transmit takes
        a Transmit completed inside its call) and handed over, instead of going through
        process(), _record, the pump's update() and the readiness predicate. What the pump does
        for the rest of the stack -- other endpoints' completions, refused Transmits, the
        closers -- runs (``stack.settle``) on every round that found nothing, and on every
        SETTLE_EVERY-th that found the Receive done. Anything else (no Receive outstanding, a
        deferred one elsewhere, Transmits of its own in flight, a FIN, an error) takes the pump
        and recv() as the generic way."""
        if self._rd_shut:
            return self.recv(nbytes)  # never waits: the data still buffered or arriving, else b""
        receiver = self.receiver
        if receiver.later and not self._rx.size and receiver.op is None and self._settled and not self._done \
                and self._state == ESTABLISHED and not self._error and self._close_op is None \
                and not receiver.streaming and not self._user_closed and self in _rx_deferred:
            # The answer to what this connection sent: nothing buffered, the next Receive deferred
            # since the last one brought data (section 8.2) -- what recv() would find, and post
            # in _nothing_buffered; posted here without recv's calls.
            _rx_deferred.discard(self)
            receiver.later = False
            self._post_receive()
            data = self.recv(nbytes) if receiver.op is None or self._done else None
        else:
            data = self.recv(nbytes)
        if data is not None:
            return data
        deadline = None if timeout is None else clock.monotonic() + timeout
        idle = 0
        while True:
            op = receiver.op
            poll = self.poll_target
            state = self._state
            if op is None or poll is None or _rx_deferred or op.done or self.sender.ops:
                found = stack.pump(self)  # the generic round (Transmits in flight: the pump's send policy)
            else:
                poll[0](poll[1])
                if op.completion.Status != _SENTINEL and not op.done:
                    events.take(op)
                    data = self._take_received(op, nbytes)
                    if data is not None:
                        return data
                    found = stack.settle()
                elif _notified or stack.dirty or idle & 7 == 7:
                    found = stack.settle()  # others were notified, or every eighth idle round
                else:
                    found = 0
            if self._rx.size or receiver.op is not op or self._done or self._error or self._state != state:
                data = self.recv(nbytes)  # something happened to this endpoint: the generic answer
                if data is not None:
                    return data
            if deadline is not None and clock.monotonic() >= deadline:
                raise errors.timeout("timed out")
            idle = 0 if found else idle + 1
            if idle > events.IDLE_SPINS:
                events.boot_services().Stall(events.IDLE_STALL_US)
            if events.wait_hook is not None:
                events.others_turn()
                data = self.recv(nbytes)  # their pumps may have consumed this endpoint's completions
                if data is not None:
                    return data

    def _take_received(self, op, nbytes):
        """recv_blocking's own Receive ``op`` completed (taken from the registry): up to ``nbytes``
        of what it brought, consumed as update() would (_done_rx, then _refill's decision for a
        Receive that brought data: the next one deferred, section 8.2); or None when it is not
        data for an established connection (EOF, reset, an error): then it is recorded for
        update(), which recv() runs."""
        rx = self._rx
        if op.status == efi.EFI_SUCCESS and self._state == ESTABLISHED and not rx.size and not self._user_closed \
                and self._close_op is None and not self.sender.queue.size:
            data = self.receiver.completed(op)
            if data:
                if len(data) > nbytes:
                    rx.append(data)
                    data = rx.read(nbytes)
                _rx_deferred.add(self)  # as _refill: the buffer is below its bound (it was empty)
                skipped = _settle_skipped[0] + 1
                if skipped >= SETTLE_EVERY or len(_notified) > 8 * SETTLE_EVERY:
                    skipped = 0
                    stack.settle()
                _settle_skipped[0] = skipped
                return data
            _rx_deferred.add(self)  # an empty Receive: post the next one as _refill would
            return None
        self._done.append(op)  # what _record does, for the update() in recv()
        self._settled = False
        return None

    def send(self, data):
        """How many bytes of ``data`` were queued (> 0), or None if the send buffer is full."""
        # _check_open(), _refresh() and room() written out: a round trip's send is one call less
        # each (docs/performance.md section 7).
        if self._user_closed:
            _fail(errno.EBADF, "endpoint is closed")
        sender = self.sender
        if self._done or not self._settled or self._state == SYN_SENT or sender.queue.size:
            self.update()
        if self._state not in MAY_SEND or self._error:
            return self._cannot_send()
        size = len(data)
        if not size:
            return 0
        space = sender.limit - sender.inflight - sender.queue.size
        if space <= 0:
            return None
        if size <= space and size <= TRANSMIT_CHUNK and not sender.queue.size and len(sender.ops) < MAX_TRANSMITS:
            # The common small send, straight into a Transmit: _refresh() above left nothing
            # for update() to do, and with the queue empty _refill() would post just this.
            # A bytes object is the fragment itself (zero-copy); anything else is copied once.
            self._post_transmit(data if isinstance(data, bytes) else memoryview(data).tobytes())
            return size
        view = memoryview(data)
        n = min(size, space)
        if n == size and isinstance(data, bytes) and n <= TRANSMIT_CHUNK:
            sender.queue.append(data)  # zero-copy: the bytes object itself becomes the fragment
        elif n <= TRANSMIT_CHUNK:
            sender.queue.append(view[:n].tobytes())  # one copy: the caller may reuse its buffer
        else:
            # One copy (the caller may reuse its buffer), cut into TRANSMIT_CHUNK pieces now, so
            # that _post_transmit takes whole chunks from the queue without copying them again.
            for start in range(0, n, TRANSMIT_CHUNK):
                sender.queue.append(view[start:min(n, start + TRANSMIT_CHUNK)].tobytes())
        self.update()
        return n

    def send_urgent(self, data):
        """send(MSG_OOB): up to TRANSMIT_CHUNK bytes of ``data`` in one Transmit with EFI's
        Urgent flag, after everything queued before it: the urgent pointer ends with them, so the
        last byte is what a peer reads with MSG_OOB (as Linux's). How many bytes, or None."""
        self._check_open()
        self._refresh()
        if self._state not in MAY_SEND or self._error:
            return self._cannot_send()
        data = memoryview(data)[:TRANSMIT_CHUNK].tobytes()
        if not data:
            return 0
        sender = self.sender
        if sender.queue.size or len(sender.ops) >= MAX_TRANSMITS or not self._post_transmit(data, urgent=True):
            return None  # after the queued data, in order
        return len(data)

    def _cannot_send(self):
        """send() on a connection that cannot take data: the pending error, EPIPE or ENOTCONN
        raised, or None (would block) while it is still connecting."""
        if self._error:
            err, self._error = self._error, 0
            _fail(err, "send")
        state = self._state
        if self._wr_shut or state in FIN_WANTED or state == RESET or state == FAILED:
            _fail(errno.EPIPE, "send after shutdown or reset")
        if state == SYN_SENT:
            return None
        _fail(errno.EPIPE, "send on a socket that is not connected")  # Linux sk_stream_wait_connect

    def shutdown(self, how):
        self._check_open()
        if self._state not in CONNECTED and self._state != SYN_SENT:
            _fail(errno.ENOTCONN, "shutdown")
        if how in (SHUT_RD, SHUT_RDWR):
            self._rd_shut = True  # recv never waits from now on; data is still received (Linux)
        if how in (SHUT_WR, SHUT_RDWR):
            # EDK2 quirk: no half-close (docs/edk2.md section 3.3 Close): SHUT_WR starts the full close.
            self._wr_shut = True
            if self._state != SYN_SENT:
                self._event("close")
        self.update()

    def close(self, abort=False):
        """Close now; a graceful close finishes in the background (section 9). Never blocks."""
        if self._user_closed:
            return
        self._user_closed = True
        _live.discard(self)
        linger = self._options["linger"]
        if linger is not None and linger[0] and not linger[1]:
            abort = True  # SO_LINGER (on, 0): RST, as BSD does
        if self._handle is None:
            self._event("destroy")
            return
        self.update()
        if self._state == LISTEN or self._state == BOUND:
            # docs/edk2.md section 3.3 Close: Close() on a listener leaves its un-accepted children alive;
            # Configure(NULL) destroys them and flushes the Accept tokens.
            self._call("Configure", None)
            self._event("destroy")
            for op in list(self._accept_ops):
                events.check(op)
            self._consume()
            while self._accepted:
                self._accepted.popleft().close(abort=True)  # as Linux resets un-accepted children
            self._destroy()
        elif self._state not in SYNCHRONIZED:
            self._destroy()  # fresh, connecting, failed or reset: nothing to say to the peer
        elif abort:
            self._abort()
            self._destroy()
        else:
            # EDK2 quirk: a Close with unread data sends a RST (docs/edk2.md section 3.3 Close): nobody
            # will read, so drop the data but keep draining EDK2 until the FIN (_done_rx and
            # _refill look at _user_closed).
            self._rx.discard()
            self._event("close")
            self._close_deadline = clock.monotonic() + CLOSE_TIMEOUT
            self.update()
            _closer.start(self)  # it may finish at once (e.g. the peer had closed already)

    def reap_step(self):
        """The closer's step (section 9): advance this closing endpoint; True once it is gone."""
        self._refresh()  # no update() when nothing moved since the last (close() has just made one)
        if self._handle is None:
            return True
        if self._close_op is not None and self._close_op.done or self._state == RESET:
            self._destroy()
            return True
        if clock.monotonic() >= self._close_deadline:
            self._abort()
            self._destroy()
            return True
        return False

    def close_handed_over(self):
        """The closer's question (closer.py): is the rest of this close the firmware's alone --
        every queued byte and the FIN handed over (``Close`` posted), or nothing left to say?"""
        return self._handle is None or self._close_op is not None or self._state == RESET

    def close_now(self):
        """close_all gave up waiting: abort; True if there was still something to abort."""
        if self._handle is None:
            return False  # already destroyed: nothing to abort
        self._abort()
        self._destroy()
        return True

    # --- readiness (tcp_state.READINESS), addresses, options (progress() is stack.pump) --------
    def can_recv(self):
        # data, EOF or an error is there: recv_into will not return None
        if self._user_closed:
            return True
        self._refresh()
        ready = READINESS[self._state][0]
        if ready is not None:
            return ready
        if self._rx.size or self._rd_shut or self._error or self._accepted:
            return True
        return self._close_op is not None and self.receiver.op is None  # FinWait1: nothing more comes

    def can_send(self):
        # send() will not return None: space in the send buffer, or it would raise
        if self._user_closed:
            return True
        self._refresh()
        ready = READINESS[self._state][1]
        if ready is not None:
            return ready
        sender = self.sender  # room() inline: select() asks this of every socket on every round
        return bool(self._error) or sender.inflight + sender.queue.size < sender.limit

    def acceptable(self):
        return self._state == LISTEN and self.can_recv()

    connecting = property(lambda self: self._refresh() or self._state == SYN_SENT)
    connected = property(lambda self: self._refresh() or self._state in CONNECTED)
    listening = property(lambda self: self._state == LISTEN)
    never_connected = property(lambda self: self._state == CLOSED or self._state == BOUND)
    failed = property(lambda self: self._refresh() or self._state == FAILED)
    closed = property(lambda self: self._user_closed)
    read_shut = property(lambda self: self._rd_shut)
    local_address = property(lambda self: self._local or self._former)
    remote_address = property(lambda self: self._remote if self._state in CONNECTED else None)

    def take_error(self):
        # type: () -> int
        """SO_ERROR: the pending errno (0 if none), cleared by reading it."""
        self.update()
        err, self._error = self._error, 0
        return err

    def has_error(self):
        """An errno is pending (poll's POLLERR); unlike take_error() this leaves it pending."""
        self._refresh()
        return bool(self._error)

    def hung_up(self):
        """The connection is gone (RST, timeout, abort, a failed connect) though recv/send have
        not said so yet (poll's POLLHUP, as Linux reports a reset connection)."""
        self._refresh()
        return READINESS[self._state][2]

    def set_option(self, name, value):
        """Options reach EDK2 only at Configure (docs/edk2.md section 3.9): set them before bind/connect/listen.
        Later, rcvbuf/sndbuf still bound the Python buffers; the others are only recorded."""
        if name not in OPTIONS:
            raise KeyError(name)
        self._settled = False
        if name in ("rcvbuf", "sndbuf"):
            value = max(1, int(value))
            if name == "rcvbuf":
                self._rx.limit = value
            else:
                self.sender.limit = value
        elif name == "linger":
            value = None if value is None else (bool(value[0]), int(value[1]))
        elif name in ("ttl", "tos"):
            value = int(value)  # TimeToLive/HopLimit, TypeOfService/TrafficClass: checked by the socket layer
        else:
            value = bool(value)
        self._options[name] = value

    def get_option(self, name):
        return self._options[name]


# What consumes each kind of completion (_consume): a table rather than getattr("_done_" + kind)
# on every completion.
_CONSUMERS = {"rx": TcpEndpoint._done_rx, "tx": TcpEndpoint._done_tx, "connect": TcpEndpoint._done_connect,
              "accept": TcpEndpoint._done_accept, "close": TcpEndpoint._done_close,
              "txu": TcpEndpoint._done_tx}


# --- the background closer (docs/architecture.md section 9): closer.Closer, with reap_step ----------
reap = _closer.reap  # finish whatever background closes can be finished now


def _abort_closing(station, port):
    """SO_REUSEADDR: abort our own closing endpoints that hold (station, port). Any found?"""
    # An IPv6 wildcard listener ("::") holds the port for its accepted children on any address.
    found = [ep for ep in _closing if ep._local == (station, port) or
             (station == "::" and ep._local is not None and ep._local[1] == port and ep._fam.version == 6)]
    for ep in found:
        ep._abort()
        ep._destroy()
        _closing.remove(ep)
    return bool(found)


def close_all(timeout=5.0):
    """Close every endpoint, wait up to ``timeout`` for graceful closes, abort the rest.

    For tests and interpreter exit. Returns how many had to be aborted.
    """
    return _closer.close_all(timeout, stack.pump)


def live_endpoints():
    # type: () -> int
    """Endpoints still holding an EFI child (open, or closing in the background)."""
    return _closer.count()
