"""bitsnet.watchdog: a time limit on running Python code, where there are no threads and no signals.

    from bitsnet import watchdog
    with watchdog.limit(300, "tests ACPI"):
        run_something()          # raises watchdog.TimeLimit inside it after 300 s

How, in BITS
------------
BITS has neither threads nor signals (docs/bits-environment.md sections 2.5 and 8.4), so nothing
can stop code that runs too long from beside it. What it has is BITS's own event hook
(docs/bits-efi.md section 10): an EFI event made with ``efi.create_event(handler, timer=True)``
has BITS's C notify function, which queues a pending call (``Py_AddPendingCall``); the main
thread runs the handler between two bytecodes of whatever Python code is running, and an
exception the handler raises propagates into that code (BITS's ``call_callback`` returns -1 with
it set). That is how BITS's own Ctrl-C arrives (docs/bits-environment.md section 8.3). So
``limit`` arms a periodic timer event (every ``TICK`` seconds); its handler does nothing until
the deadline has passed, then raises ``TimeLimit`` in the running code. It works the same
whichever event path bitsnet uses for its sockets (``bitsnet.events``: with BITS's hook bitsnet
passes events that are not its own on to ``efi``'s dispatcher; with the trampoline BITS's hook is
untouched), and in the simulator (``tools/efisim/boot_python/_efi.py`` propagates the exception
as BITS does). Timer events need the firmware tick, which BITS's start-up stops on OVMF:
``limit`` first checks it and restarts the local APIC timer if needed (``ipconfig.check_timer``,
docs/bits-environment.md section 7).

Where it is raised: not inside bitsnet's network layers or BITS's ``efi`` module, whose state
(the event registry, a half-built token) must not be left half-changed. If a frame of theirs is
on the interrupted stack the handler does not raise. If one of those frames is
``events.wait_until`` -- the one place where a socket call only waits, and between its own
calls nothing is half-done -- it sets a trap: a line tracer on that frame alone (other frames
are not traced: the global trace function answers their "call" with None) that raises at
wait_until's next line, once whatever it called has returned. So a step blocked in a socket
call (an ``accept`` nobody connects to) is interrupted within a round of the wait; raising
there unwinds the socket call as any error would. Otherwise the next tick tries again.

Limits (said by ``limit``'s caller when they matter): one C call that does not return (a
firmware call that hangs) cannot be interrupted -- the pending call waits for it; code that
catches ``TimeLimit`` (or ``BaseException``) and carries on is interrupted again at every tick
-- a retry loop with a bare ``except:`` that pauses in its handler is left when a tick lands in
the handler (an exception raised there is not caught by the same ``try``) -- but code that
spends all its time inside such a ``try`` body cannot be forced out. Without BITS's hook
(``efi.create_event`` missing: BITS before 2070) or with a timer that cannot be made to tick,
``limit`` falls back to a ``sys.settrace`` line tracer that reads the clock every
``TRACE_CHECK`` events: slower (tracing costs about 5x) and blind to code inside one long C
call, but still a limit.
"""

from __future__ import absolute_import

import sys

from bitsnet import clock

TICK = 0.25  # s between checks once armed: a step ends at most this late (plus one C call)
TICK_100NS = int(TICK * 10000000)  # SetTimer's unit is 100 ns
TimerCancel, TimerPeriodic = 0, 1  # EFI_TIMER_DELAY (UEFI 2.x, SetTimer)
TRACE_CHECK = 200  # trace events between clock reads in the fallback (a read is a C call)
# bitsnet modules whose frames may be interrupted: programs over the socket API, not below it.
_PROGRAM_MODULES = ("bitsnet.lab", "bitsnet.launch", "bitsnet.remote", "bitsnet.results", "bitsnet.junit",
                    "bitsnet.upload", "bitsnet.machineid", "bitsnet.zipmemory", "bitsnet.console",
                    "bitsnet.selftest", "bitsnet.watchdog")
_DISPATCH_MODULES = ("efi", "_efi")  # the hook's own frames, above the interrupted code


class TimeLimit(BaseException):
    """Raised inside code that ran past its time limit (a BaseException, so that
    ``except Exception`` in the code does not swallow it). ``seconds``: the limit; ``what``."""

    def __init__(self, seconds=None, what=None):
        BaseException.__init__(self, seconds, what)
        self.seconds, self.what = seconds, what

    def __str__(self):
        return "%s ran past its time limit of %s s" % (self.what or "the step", _number(self.seconds))


def _number(value):
    # BITS quirk: floats print through GRUB's printf, so whole seconds print as integers
    # (docs/bits-environment.md section 10).
    if value is None:
        return "?"
    return "%d" % value if value == int(value) else "%.1f" % value


def _module_of(frame):
    return frame.f_globals.get("__name__", "") or ""


def _unsafe(name):
    if name in _DISPATCH_MODULES:
        return True
    return name.startswith("bitsnet.") and name not in _PROGRAM_MODULES


def safe_to_raise(frame):
    """Whether ``frame`` (the interrupted code's innermost frame) and its callers may take an
    exception now (see the module docstring)."""
    innermost = True
    while frame is not None:
        name = _module_of(frame)
        if innermost and name == "bitsnet.events" and frame.f_code.co_name == "wait_until":
            return True
        if _unsafe(name):
            return False
        innermost = False
        frame = frame.f_back
    return True


def _waiting_frame(frame):
    """The ``events.wait_until`` frame on the stack from ``frame`` up, or None."""
    while frame is not None:
        if _module_of(frame) == "bitsnet.events" and frame.f_code.co_name == "wait_until":
            return frame
        frame = frame.f_back
    return None


def _interrupted_frame():
    """The innermost frame of the code the pending call interrupted (the dispatchers' frames
    -- ``_efi``, ``efi``, ``bitsnet.events`` chaining to ``efi`` -- and ours skipped)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = _module_of(frame)
        if name in _DISPATCH_MODULES or name == __name__ or (
                name == "bitsnet.events" and frame.f_code.co_name == "_notified_event"):
            frame = frame.f_back
            continue
        return frame
    return None


class limit(object):
    """``with limit(seconds, what):`` -- TimeLimit is raised inside the block once ``seconds``
    have passed (None or 0: no limit). ``mode`` after entering: "efi-timer", "trace" or None.

    ``restart``: a function checked at every tick; whenever its value changes the ``seconds``
    start again (a limit for each unit of progress: ``lambda: len(report.tests)`` gives each
    BITS test its own). ``exception``: the TimeLimit subclass to raise (so a caller can tell
    two nested limits apart)."""

    def __init__(self, seconds, what=None, restart=None, exception=None):
        self.seconds, self.what = seconds, what
        self.restart = restart
        self.exception = exception or TimeLimit
        self._progress = None
        self.deadline = None  # type: float
        self.event = None
        self.mode = None  # type: str
        self.fired = 0  # how many times TimeLimit was raised
        self.problem = None  # type: str   # why the EFI timer was not used, when it was not
        self._saved_trace = None
        self._trap = None  # the wait_until frame with a trap on it (module docstring)

    # ---- the EFI timer
    def _arm_timer(self):
        import efi
        from bitsnet import events, ipconfig
        if not hasattr(efi, "create_event"):
            raise RuntimeError("this BITS has no efi.create_event (BITS 2070 and later have it)")
        ipconfig.check_timer()  # raises if the firmware tick cannot be made to run
        event = efi.create_event(self._tick, timer=True)
        status = events.boot_services().SetTimer(event, TimerPeriodic, TICK_100NS)
        if status != efi.EFI_SUCCESS:
            efi.close_event(event)
            raise RuntimeError("SetTimer: %s" % efi.efi_status_decode.get(status, status))
        self.event = event

    def _restarted(self):
        """Whether ``restart`` says there was progress (the deadline then starts again)."""
        if self.restart is None or self.deadline is None:
            return False
        value = self.restart()
        if value == self._progress:
            return False
        self._progress = value
        self.deadline = clock.monotonic() + self.seconds
        return True

    def _tick(self):
        # A pending call: runs between two bytecodes of the interrupted code (module docstring).
        if self._restarted():
            self._clear_trap()
            return
        if self.deadline is None or clock.monotonic() < self.deadline:
            return
        frame = _interrupted_frame()
        try:
            if not safe_to_raise(frame):
                if self._trap is None:
                    self._set_trap(_waiting_frame(frame))
                return  # the trap, or the next tick, raises
        finally:
            frame = None
        self.fired += 1
        raise self.exception(self.seconds, self.what)

    def _set_trap(self, waiting):
        if waiting is None:
            return

        def not_traced(frame, event, arg):
            return None  # "call" of any other frame: no line tracing there

        def trap(frame, event, arg):
            if event == "line" and self.deadline is not None:
                self._clear_trap()
                self.fired += 1
                raise self.exception(self.seconds, self.what)
            return trap
        self._trap = waiting
        self._saved_trace = getattr(sys, "gettrace", lambda: None)()
        waiting.f_trace = trap
        sys.settrace(not_traced)

    def _clear_trap(self):
        if self._trap is not None:
            self._trap.f_trace = None
            self._trap = None
            sys.settrace(self._saved_trace)

    def _disarm_timer(self):
        event, self.event = self.event, None
        if event is None:
            return
        import efi
        from bitsnet import events
        events.boot_services().SetTimer(event, TimerCancel, 0)
        try:
            efi.close_event(event)
        except KeyError:
            pass

    # ---- the fallback: a line tracer
    def _arm_trace(self):
        self._saved_trace = getattr(sys, "gettrace", lambda: None)()
        counter = [0]

        def check(frame, event, arg):
            counter[0] += 1
            if counter[0] >= TRACE_CHECK:
                counter[0] = 0
                if not self._restarted() and self.deadline is not None and \
                        clock.monotonic() >= self.deadline and safe_to_raise(frame):
                    self.fired += 1
                    raise self.exception(self.seconds, self.what)
            return check
        frame = sys._getframe(2)  # the frames running now get no "call" event: trace them too
        while frame is not None:
            frame.f_trace = check
            frame = frame.f_back
        sys.settrace(check)

    def __enter__(self):
        if not self.seconds:
            return self
        self.deadline = clock.monotonic() + self.seconds
        self._progress = self.restart() if self.restart is not None else None
        try:
            self._arm_timer()
            self.mode = "efi-timer"
        except Exception as exc:  # no hook, no tick: the slower way still limits
            self.problem = "%s: %s" % (type(exc).__name__, exc)
            self._arm_trace()
            self.mode = "trace"
        return self

    def __exit__(self, kind, value, trace):
        self.deadline = None  # a tick still queued now does nothing
        if self.mode == "efi-timer":
            self._disarm_timer()
            self._clear_trap()
        elif self.mode == "trace":
            sys.settrace(self._saved_trace)
        return False
