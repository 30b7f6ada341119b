"""EFI events, and the one registry of everything EFI may still touch.

Every asynchronous EFI operation (a TCP Receive, an Accept, a UDP Transmit, a DNS lookup...)
hands the firmware a token with an event in it, and usually buffers the firmware will write or
read later. This module owns that hand-over, and keeps three of docs/architecture.md's rules
(section 13 rules 9 and 5, and section 3's sentinel):

Lifetime (section 3; section 13 rule 9). ``submit()`` registers the token and everything in ``keep`` (buffers,
fragment tables, session data) in ``_pending``, the one registry, before the EFI call; they are
released only after the completion was processed, or after the child was torn down
(``abandon``). Nothing relies on a local variable or a closure staying alive by luck.

Callbacks run only at safe points (section 4; section 13 rule 5). A notification (the trampoline's pending call,
or BITS's ``_efi`` hook) only appends a slot number to ``_ready``. All decisions are taken in
``process()``, on the main thread, by the code that is waiting: it checks the token's Status,
releases the registry entry and runs the operation's ``on_done``. An owner that sees its own
token completed -- a Transmit inside its call, a blocking recv's Receive after a Poll -- may
instead ``take()`` it right there; the notification still queued for it is then stale.

No completion is lost (section 3). While a token is outstanding its Status holds ``SENTINEL``
(EFI_NOT_READY, a value no TCP/UDP/DNS completion carries, and the one EDK2's DnsDxe itself
writes at submission). The firmware writes the real status before it signals the event, so a
completion can always be found by looking at Status. When the trampoline reports that
CPython's pending-call queue (32 entries) overflowed, ``process()`` rescans every outstanding
token; with BITS's own hook, which drops overflowing notifications silently, it rescans on a
timer. A notification for a slot whose token still reads SENTINEL is stale and ignored, which
is what makes reusing events safe.

How completions are noticed (``mode``), chosen once at first use:

``trampoline``   bitsnet's ``trampoline.c`` (built into BITS, or built on demand on a host):
                 EVT_NOTIFY_SIGNAL events whose notify function calls ``Py_AddPendingCall``
                 with the event's slot number as context.
``efi-hook``     BITS 2070+ without our trampoline: ``_efi._c_event_callback`` as notify
                 function; ``_efi._set_event_callback`` receives the event pointer. Events
                 that are not ours are passed on to ``efi``'s own dispatcher.
``check-event``  neither: Type-0 events polled with CheckEvent (docs/edk2.md section 2.3).

Events are pooled: an event is created once, reused for token after token, and closed by
``shutdown()`` -- or, after a burst, once MAX_IDLE_EVENTS others lie idle; the next event
created takes its slot number. A reused event's stale notification is harmless (no completion is lost, above). A
closed event's notification may still be queued (a rescan finished its token before the
notification ran): with the trampoline it names a slot with nothing outstanding (stale); with
BITS's hook it names an event that is no longer ours, which BITS's ``efi`` dispatcher would
answer with KeyError in unrelated code -- so the values of the events we closed are remembered
(``_closed_values``) and their late notifications swallowed as stale.

If DestroyChild fails the child may live on, and the firmware may still write into the buffers
of its tokens: ``orphan()`` then keeps them registered until the firmware completes them (or for
ever: a leak is better than memory the firmware writes after Python freed it).
"""

from __future__ import print_function

import collections
import ctypes
import os

import efi

from bitsnet import clock as _clock
from bitsnet import errors

SENTINEL = efi.EFI_NOT_READY
MODES = ("trampoline", "efi-hook", "check-event")
MAX_IDLE_EVENTS = 256  # pooled events kept open beyond this many idle ones are closed
EFI_HOOK_RESCAN_INTERVAL = 0.05  # seconds; BITS's hook loses notifications without telling us
IDLE_SPINS = 64  # wait loop iterations with no progress before it starts to Stall
IDLE_STALL_US = 100  # Stall per idle iteration after that: bounds latency, spares the CPU
# Called with no arguments on every round of wait_until that found nothing to do. Never set in
# BITS (no threads there); a host harness that runs threaded code over bitsnet under one lock
# sets it to let the other threads take their turn while this one waits (tests/cpython).
wait_hook = None
# The thread inside bitsnet's socket layer and how deep (bitsnet._socket._enter refuses a second
# thread meanwhile). A wait_hook is a safe point: the waiting thread lets go while it runs.
entered = [None, 0]  # type: list

# Monotonic seconds (bitsnet/clock.py); every timeout in bitsnet is measured with this one clock.
clock = _clock.monotonic


class Operation(object):
    """One token handed to EFI, with everything EFI may touch until it completes."""

    __slots__ = ("token", "completion", "keep", "on_done", "owner", "kind", "slot", "seq", "done", "status", "event")

    def __init__(self, token, completion, on_done, owner, keep, slot, seq, kind=None):
        self.token = token
        self.completion = completion
        self.on_done = on_done
        self.owner = owner
        self.kind = kind  # the owner's name for what the token does ("rx", "tx"...), for on_done
        self.keep = keep
        self.slot = slot
        self.seq = seq
        self.done = False
        self.status = SENTINEL
        self.event = None  # the EFI_EVENT resubmit() last wrote into the token (None: not known)

    def __repr__(self):
        return "<Operation #%d %s status=%s>" % (
            self.seq, "done" if self.done else "outstanding", errors.status_name(self.status))


# --- The registry and the event pool (module state: one firmware, one interpreter) ---------
_pending = {}  # type: dict   # slot -> Operation: THE registry of what EFI may still touch
_events = []  # type: list    # slot -> EFI_EVENT value, or None once closed
_by_event = {}  # type: dict  # EFI_EVENT value -> slot
_idle = []  # type: list      # slots whose event is open and unused
_closed = []  # type: list    # slots whose event was closed: numbers to reuse
_closed_values = set()  # type: set   # EFI_EVENT values we closed: their late notifications are stale
_ready = collections.deque()  # type: collections.deque   # slots notified, appended at safe points
notified = _ready  # read-only outside: how many notifications wait for process() (TcpEndpoint.recv_blocking)
_state = {"mode": None, "trampoline": None, "chain": None, "efi_hook": None, "seq": 0,
          "last_rescan": 0.0}  # type: dict
stats = {"completions": 0, "notifications": 0, "stale": 0, "overflowed": 0, "rescans": 0, "recovered": 0,
         "orphaned": 0}


def boot_services():
    """The firmware's EFI_BOOT_SERVICES table."""
    return efi.system_table.BootServices.contents


def mode():
    # type: () -> str
    """How completions are noticed; see the module docstring."""
    if _state["mode"] is None:
        _choose_mode(os.environ.get("BITSNET_EVENT_MODE") or None)
    return _state["mode"]


def _choose_mode(wanted=None):
    if wanted is not None and wanted not in MODES:
        raise ValueError("BITSNET_EVENT_MODE must be one of %s" % ", ".join(MODES))
    if wanted in (None, "trampoline"):
        try:
            import _bitsnet_trampoline
        except ImportError:
            if wanted:
                raise
        else:
            _bitsnet_trampoline.set_dispatcher(_notified_slot)
            _state.update(mode="trampoline", trampoline=_bitsnet_trampoline)
            return
    if wanted in (None, "efi-hook"):
        import _efi
        if hasattr(_efi, "_set_event_callback"):
            # efi registered its own dispatcher at import; ours takes over and passes on
            # every event that is not bitsnet's (BITS's efi keeps it as efi._event_callback).
            _state["chain"] = getattr(efi, "_event_callback", None)
            _state["efi_hook"] = _efi  # for _new_event: an import statement there costs ~110 us in BITS
            _efi._set_event_callback(_notified_event)
            _state["mode"] = "efi-hook"
            return
        if wanted:
            raise ImportError("this BITS has no _efi event hook")
    _state["mode"] = "check-event"


def _notified_slot(slot):
    # Trampoline pending call. Runs between any two bytecodes: record only (docs/architecture.md section 13 rule 5).
    _ready.append(slot)


def _notified_event(event):
    # BITS _efi hook. Same rule; events that are not ours belong to efi.create_event users.
    slot = _by_event.get(event)
    if slot is not None:
        _ready.append(slot)
    elif event in _closed_values and event not in getattr(efi, "_event_handlers", ()):
        stats["stale"] += 1  # an event we closed while its notification was queued: swallowed
    elif _state["chain"] is not None:
        _state["chain"](event)


def _new_event(slot):
    """CreateEvent for pool slot ``slot``, of the kind the mode needs."""
    bs = boot_services()
    event = efi.EFI_EVENT()
    current = mode()
    if current == "trampoline":
        notify = efi.EFI_EVENT_NOTIFY(_state["trampoline"].notify_function)
        status = bs.CreateEvent(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, notify, ctypes.c_void_p(slot),
                                ctypes.byref(event))
    elif current == "efi-hook":
        notify = efi.EFI_EVENT_NOTIFY(_state["efi_hook"]._c_event_callback)
        status = bs.CreateEvent(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, notify, None, ctypes.byref(event))
    else:
        status = bs.CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, ctypes.byref(event))
    errors.raise_for_status(status, "CreateEvent")
    return event.value


def _take_slot():
    """A slot with a new event (submit() takes idle ones itself). A closed slot's number is
    reused, so that the pool's tables stay as long as the most events ever open at once."""
    slot = _closed[-1] if _closed else len(_events)
    value = _new_event(slot)  # may raise (CreateEvent failed): nothing has changed then
    if _closed:
        _events[_closed.pop()] = value
    else:
        _events.append(value)
    _by_event[value] = slot
    _closed_values.discard(value)  # the firmware reused the value: it is ours again
    return slot


def _release_slot(slot):
    if len(_idle) < MAX_IDLE_EVENTS:
        _idle.append(slot)
    else:
        _close_slot(slot)


def _close_slot(slot):
    value = _events[slot]
    _events[slot] = None
    _closed.append(slot)
    del _by_event[value]
    _closed_values.add(value)  # before CloseEvent: a notification may already be queued
    boot_services().CloseEvent(value)


# --- The public API ------------------------------------------------------------------------
def submit(token, completion, on_done, owner, keep=(), kind=None):
    """Register ``token`` before it is handed to EFI (docs/architecture.md section 3).

    ``completion`` is the token's EFI_*_COMPLETION_TOKEN (fields Event and Status). The caller
    makes the EFI call next; if that call fails, the firmware never took the token and the
    caller must ``unsubmit`` it.
    """
    slot = _idle.pop() if _idle else _take_slot()
    completion.Event = _events[slot]
    completion.Status = SENTINEL
    _state["seq"] += 1
    op = Operation(token, completion, on_done, owner, keep, slot, _state["seq"], kind)
    _pending[slot] = op
    return op


def resubmit(op):
    """submit() again for ``op``, whose token completed and was consumed, when the same token
    goes back to EFI (a reused Receive or Transmit token): a slot and a sequence number, without
    building a new Operation (a visible cost per exchange in BITS, docs/performance.md section 7).
    The caller updates ``op.keep`` if what EFI touches changed."""
    slot = _idle.pop() if _idle else _take_slot()
    completion = op.completion
    if slot != op.slot or _events[slot] != op.event:  # usually the slot it had (_idle is LIFO): no write
        op.event = completion.Event = _events[slot]
    completion.Status = SENTINEL
    _state["seq"] += 1
    op.slot, op.seq, op.done, op.status = slot, _state["seq"], False, SENTINEL
    _pending[slot] = op
    return op


def take(op):
    """``op`` completed (its Status is no longer SENTINEL) and its owner consumes the completion
    right there: release the registry entry as ``process()`` would, without ``on_done``. Only
    for an ``op`` still registered (``op.done`` False: no ``process()`` has finished it yet) --
    a Transmit completed inside its EFI call, or a Receive whose waiter looks at its Status
    after each Poll (``TcpEndpoint.recv_blocking``). A notification still queued for it is
    then stale: ``process()`` finds its slot free, or reused by a token still at SENTINEL
    (or a later one that really completed, which it then finishes as it should)."""
    del _pending[op.slot]
    op.status = op.completion.Status
    op.done = True
    if len(_idle) < MAX_IDLE_EVENTS:
        _idle.append(op.slot)
    else:
        _close_slot(op.slot)
    stats["completions"] += 1


def unsubmit(op):
    """The EFI call refused the token: release it at once."""
    if _pending.get(op.slot) is op:
        del _pending[op.slot]
        _release_slot(op.slot)


def check(op):
    # type: (Operation) -> bool
    """After an EFI call that may complete synchronously: finish ``op`` now if it is done."""
    if not op.done and _pending.get(op.slot) is op and op.completion.Status != SENTINEL:
        _finish(op)
    return op.done


def _finish(op):
    del _pending[op.slot]
    op.status = op.completion.Status
    op.done = True
    if len(_idle) < MAX_IDLE_EVENTS:  # _release_slot(), inline: every completion passes here
        _idle.append(op.slot)
    else:
        _close_slot(op.slot)
    stats["completions"] += 1
    op.on_done(op)


def _rescan():
    """Find completions whose notification was lost (docs/architecture.md section 3: the sentinel)."""
    stats["rescans"] += 1
    _state["last_rescan"] = clock()
    found = [op for op in _pending.values() if op.completion.Status != SENTINEL]
    stats["recovered"] += len(found)
    return found


def process():
    # type: () -> int
    """Process every completion noticed so far; returns how many. Main thread only
    (docs/architecture.md section 13 rule 5)."""
    # Hot path: every round of every wait runs this, usually to find nothing. The common
    # trampoline case with nothing notified returns after one C call and two reads.
    current = _state["mode"] or mode()
    finished = 0
    if current == "trampoline":
        lost = _state["trampoline"].overflow()
        if not lost and not _ready:
            return 0
        if lost:
            stats["overflowed"] += lost
            finished = _finish_found(_rescan())
    elif current == "efi-hook":
        if _pending and clock() - _state["last_rescan"] > EFI_HOOK_RESCAN_INTERVAL:
            finished = _finish_found(_rescan())
    else:
        bs = boot_services()
        for slot, op in list(_pending.items()):
            if bs.CheckEvent(_events[slot]) == efi.EFI_SUCCESS:
                _ready.append(slot)
    # A finished operation leaves _pending, so a second notification for it -- or a stale one
    # for an event since reused by a token that is still outstanding -- finds nothing to do.
    while _ready:
        slot = _ready.popleft()
        stats["notifications"] += 1
        op = _pending.get(slot)
        if op is None or op.completion.Status == SENTINEL:
            stats["stale"] += 1
            continue
        _finish(op)
        finished += 1
    return finished


def _finish_found(found):
    """Finish the completions a rescan found, in the order their tokens were submitted."""
    for op in sorted(found, key=_seq):
        _finish(op)
    return len(found)


def _seq(op):
    return op.seq


def wait_until(predicate, deadline, poll=None, checked=False):
    """Wait for ``predicate()`` to hold, driving the firmware, until ``deadline``.

    ``deadline`` is an absolute ``clock()`` value, or None to wait forever. ``poll`` is called
    on every round: EDK2 moves received frames only when polled or on its 10 ms timer, so a
    wait that does not Poll is slow (docs/edk2.md section 3.4). Returns whether the predicate held.
    ``checked``: the caller has just found ``predicate()`` false, so the first round Polls
    before asking again (a request/response round trip waits once per exchange).
    A ``poll`` that returns a number (``stack.pump``: the completions it processed) has run
    ``process()`` itself, so the next round runs it again only if something was notified since
    (each is a clock read in BITS, docs/performance.md section 7); one that returns None has not.
    """
    idle = 0
    found = None
    while True:
        if checked:
            checked = False
        else:
            if found is None or _ready:  # _ready: notified since the poll's own process()
                found = (found or 0) + process()
            if found:
                idle = 0
            if predicate():
                return True
        if deadline is not None and clock() >= deadline:
            return False
        found = None
        if poll is not None:
            found = poll()
        idle += 1
        if idle > IDLE_SPINS:
            boot_services().Stall(IDLE_STALL_US)
        if wait_hook is not None:
            others_turn()


def others_turn():
    """Run ``wait_hook`` (a threaded host harness's other threads) from a wait round: the
    waiting thread lets go of bitsnet meanwhile, so they may enter (see ``entered``)."""
    held = entered[:]
    entered[:] = [None, 0]
    try:
        wait_hook()
    finally:
        entered[:] = held


def outstanding(owner=None):
    # type: (object) -> int
    """How many tokens are with the firmware (for ``owner`` only, if given)."""
    if owner is None:
        return len(_pending)
    return sum(1 for op in _pending.values() if op.owner is owner)


def abandon(owner):
    # type: (object) -> int
    """Release ``owner``'s tokens after its child was destroyed: EFI has let go of them."""
    gone = [op for op in _pending.values() if op.owner is owner]
    for op in gone:
        check(op)
        if not op.done:
            unsubmit(op)
    return len(gone)


ORPHANED = "orphaned"  # the owner of tokens whose child could not be destroyed (orphan)


def orphan(owner):
    # type: (object) -> int
    """DestroyChild failed for ``owner``'s child: it may live on, and the firmware may still
    write into its tokens' buffers. Finish the tokens it has completed; keep the others in the
    registry (docs/architecture.md section 3), owned by ORPHANED, until the firmware completes
    them -- their completion is then dropped. Returns how many stay registered."""
    kept = 0
    for op in [op for op in _pending.values() if op.owner is owner]:
        if not check(op):
            op.on_done = _dropped
            op.owner = ORPHANED
            kept += 1
    stats["orphaned"] += kept
    return kept


def _dropped(op):
    pass  # an orphaned token completed: the registry has released it, nobody waits for it


def reset(wanted_mode=None):
    """Forget every event and token, then choose ``wanted_mode`` (None: the best available).

    Only for when the firmware itself was reset (the simulator reboots between tests) or
    nothing is outstanding: the old events are gone, so nothing may refer to them.
    """
    if _state["mode"] == "efi-hook":
        import _efi
        _efi._set_event_callback(_state["chain"])
    _pending.clear()
    del _events[:]
    _by_event.clear()
    del _idle[:]
    del _closed[:]
    _closed_values.clear()
    _ready.clear()
    _state.update(mode=None, trampoline=None, chain=None, efi_hook=None, last_rescan=0.0)
    _choose_mode(wanted_mode or os.environ.get("BITSNET_EVENT_MODE") or None)


def shutdown():
    # type: () -> int
    """Close every pooled event that no token uses; returns how many tokens are still out."""
    process()
    while _idle:
        _close_slot(_idle.pop())
    return len(_pending)
