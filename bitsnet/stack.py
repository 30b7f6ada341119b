"""The stack-wide work of every wait: ``pump()``, the state it works through, and its speed policy.

EDK2's TCP, UDP and IP children share one IP, MNP and SNP per NIC (docs/edk2.md section 3.3 Poll): a Poll
through any child pulls the NIC's next frame for all of them, and completions of any endpoint
may follow. So one function moves the whole stack on, whichever endpoint a wait holds:

``pump(ep=None)``  post the deferred TCP Receives (after a batch of Polls if a stream arrives),
                   Poll once through ``ep``'s child (a batch while ``ep``'s send buffer is full),
                   process the completions (``events.process``), update the endpoints that have
                   some (``dirty``), retry refused Transmits (``tx_retry``) and run the
                   background closers (``tcp_closer``, ``udp_closer``, closer.py).
                   ``ep.progress()`` *is* ``pump(ep)`` (the endpoints' method, not a wrapper:
                   no Python call more per round); ``pump()`` with no endpoint Polls through any,
                   and is the one poller of every other wait too (``close_all``, the tests').
``settle()``       pump's second half, everything after the Polls: for a wait that Polls by
                   itself (``TcpEndpoint.recv_blocking``).

The endpoint's side, public (child.EfiChild declares it): ``poll_target`` (the cached Poll callable
and its ``this``, or None while the child cannot be Polled), ``update()``, and for TCP what the
speed policy reads: ``sender`` (``tcp.Sender``: ``ops``, ``inflight``, ``queue``, ``limit``),
``receiver.streaming`` (``tcp.Receiver``) and ``receive_now()``.

Hot path: every round of every wait runs ``pump``, most of them finding nothing. Each step is
skipped by one test when it has nothing to do; tuned on real firmware (docs/performance.md):
keep its per-call cost when changing it (``tools/bench.py --quick``).
"""

from bitsnet import events
from bitsnet.closer import Closer

# --- the speed policy (measured on real BITS under QEMU, docs/performance.md) --------------------
# TCP Receive scheduling (docs/architecture.md section 8.2): one Receive is outstanding while a connection is up,
# but after a Receive brought data the next one is posted by the next pump (every wait runs it,
# before it Polls, so nothing is noticed later) or by a recv that finds the buffer empty: a
# request/response exchange thus answers before paying for the next Receive. While a bulk stream
# arrives (the last Receive brought at least STREAM_SEGMENT bytes) that pump first Polls a batch
# of POLL_BATCH (see _post_deferred).
RECEIVE_CHUNK = 64 * 1024  # bytes per Receive: what BITS used; one 64 KiB copy per completion
STREAM_SEGMENT = 1024  # a Receive completed with at least this much: a stream (see pump)
# Polls after such a Receive, before re-posting it. Real BITS under QEMU (tools/fwbench.py, A/B of
# 8/16/32/44 in one boot, docs/performance.md): 32 beat 16 (each synchronous Receive of the
# buffered frames costs ~450 us however many it takes); 32 frames (46 KB) still fit one
# RECEIVE_CHUNK, so one Receive takes the whole batch.
POLL_BATCH = 32
# Polls per wait round while a send is blocked (pump): real BITS, A/B of 1/4/8/16 alternating in
# one boot (tools/fwbench.py's guest, section sendab): 16 best, +35% over 1.
SEND_POLL_BATCH = 16
# Routes for a TCP4 child whose peer is on the station's own subnet (child._add_routes): the
# child's direct route reaches it, so the two Routes calls per connect (and their parsing) are
# skipped; True adds them as for any other peer. A/B in real BITS: docs/performance.md section 7.
ON_LINK_ROUTES = False
REAP_SWEEP = 0.2  # seconds between sweeps for what no completion announces (close deadlines)

# --- the state pump() works through (module state: one firmware, one interpreter) ----------------
dirty = set()  # type: set        # endpoints (TCP and UDP) with completions not yet consumed
rx_deferred = set()  # type: set  # TCP endpoints whose next Receive the next pump posts (section 8.2)
tx_retry = set()  # type: set     # TCP endpoints with a Transmit the firmware refused: pump retries
tcp_closer = Closer(REAP_SWEEP)
udp_closer = Closer(0.0)  # UDP closes wait only for Transmits: every pump looks at all of them
_tcp_closing, _tcp_wanted, _udp_closing = tcp_closer.closing, tcp_closer.wanted, udp_closer.closing


def pump(ep=None):
    """Poll the NIC through ``ep``'s child (None: any child), then consume every completion of
    every endpoint (docs/edk2.md section 3.4). See the module docstring; every step is skipped when idle.
    Returns how many completions ``events.process`` found: ``events.wait_until`` then skips its own."""
    if rx_deferred:
        _post_deferred()
    if ep is None:
        ep = _any_child()
    poll = ep.poll_target if ep is not None else None
    if poll is not None:
        poll[0](poll[1])
        sender = ep.sender
        if sender is not None and sender.ops and sender.inflight + sender.queue.size >= sender.limit:
            # A sender blocked on a full send buffer: only Polls (each takes in one ACK, and
            # EDK2 then sends more) free room, and a 64 KiB Transmit completes after dozens
            # of them, so Poll a batch back to back before the Python bookkeeping runs again
            # (under QEMU TCG a Poll costs less with less Python between; docs/performance.md).
            for _ in range(SEND_POLL_BATCH - 1):
                poll[0](poll[1])
    return settle()


def settle():
    """pump() after its Polls: process the completions, update the endpoints that have some,
    retry refused Transmits, run the closers; returns how many completions ``events.process``
    found. Also for a wait that Polls by itself (``TcpEndpoint.recv_blocking``: it looks at its
    own Receive between the Poll and this)."""
    found = events.process()
    if dirty:
        for each in list(dirty):
            each.update()
    if tx_retry:  # refused Transmits (docs/architecture.md section 6.3)
        for each in list(tx_retry):
            each.update()
    if _tcp_closing or _tcp_wanted:
        tcp_closer.reap_due()
    if _udp_closing:
        udp_closer.reap_due()
    return found


def hand_closes_over(timeout):
    """Drive the stack until every background close has handed the rest to the firmware (the
    closers' ``handed_over``: TCP's last queued bytes and FIN given, ``Close`` posted; UDP's
    Transmits done), or for ``timeout`` seconds; True if all had. launch.py calls it when a
    program at the BITS prompt ends, since nothing runs Python between two commands
    (docs/architecture.md section 9)."""
    from bitsnet import clock  # stack stays a leaf of the hot path: clock only here
    return events.wait_until(lambda: tcp_closer.handed_over() and udp_closer.handed_over(),
                             clock.monotonic() + timeout, poll=pump)


def _any_child():
    """An endpoint whose child can be Polled, or None (pump() without one)."""
    for closer in (tcp_closer, udp_closer):
        for ep in closer.closing:
            if ep.poll_target is not None:
                return ep
        for ep in closer.live:
            if ep.poll_target is not None:
                return ep
    return None


def _post_deferred():
    """Post the deferred Receives, after a batch of Polls if a stream arrives (section 8.2's exception).

    EDK2 completes an outstanding Receive with whatever the first Poll brings in: one frame
    (docs/edk2.md section 3.3 Receive, section 3.4). With no Receive outstanding, the frames POLL_BATCH Polls pull in
    wait in EDK2's buffer instead, and a Receive posted afterwards takes them all at once,
    synchronously: one Python completion (and one copy out of the Receive buffer) per batch
    instead of one per frame -- most of bulk receive's cost. Only endpoints whose last Receive
    brought a full segment cause these Polls, so request/response traffic never pays for them;
    pump() calls this before it Polls, so nothing is noticed later for it.
    """
    deferred = [ep for ep in rx_deferred if ep.poll_target is not None]
    rx_deferred.clear()
    streaming = [ep for ep in deferred if ep.receiver.streaming]
    if streaming:
        # Any child: Poll pulls the NIC's next frame (docs/edk2.md section 3.3 Poll). The Polls run back to back
        # from one cached callable: under QEMU TCG a frame-carrying Poll costs less the less Python
        # runs between Polls (docs/performance.md), and _call's lookup per Poll was pure overhead.
        poll, this = streaming[0].poll_target
        for _ in range(POLL_BATCH):
            poll(this)
    for ep in deferred:
        ep.receive_now()
