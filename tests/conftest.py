"""Fixtures shared by the whole suite: import paths, a fresh simulated machine per test, peers,
and the invariants every test that booted a machine must leave intact (issue 7 item 2).

Every test that boots a machine gets, at teardown, once its own fixtures have torn down what
they made and every socket object is collected (``gc.collect()``):

* bitsnet's side: no endpoint still holds a child (``tcp.close_all``, ``udp.close_all``), no
  token is outstanding (``events.shutdown()``), no completion was lost (a token whose Status
  the firmware already wrote but that ``events.process()`` never finished);
* the firmware's leak ledger: no events, pool, children or tokens (``firmware.ledger()``);
* no exception escaped a callback: ``FIRMWARE.crashes`` is empty (a firmware function or
  notify function raised, or the firmware touched a closed event) and, on Python 3.8+, nothing
  reached ``sys.unraisablehook`` (the trampoline's ``PyErr_WriteUnraisable``, a ``__del__``).

Graceful closes are not waited out in TIME_WAIT: once both FINs are exchanged (the TCB is in
TimeWait or Closed) the child is aborted, which saves EDK2's 2 s TimeWaitTimeout (facts 3.9)
per test and still fails a test whose close never got that far.

``BITSNET_GC_TORTURE=N`` (opt-in, issue 7 item 3) forces the garbage collector at random
points: ``gc.set_threshold(1)`` (a gen-0 collection at nearly every allocation) plus a full
``gc.collect()`` on average every N-th Python call, in every thread and inside callbacks (the
trampoline's pending call runs under the profile hook too). Run the suite that way with
``PYTHONMALLOC=debug`` so freed memory is poisoned (0xDD) and overruns are caught.
"""

from __future__ import print_function

import gc
import os
import random
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "tools"), os.path.join(ROOT, "tools", "efisim", "boot_python")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from efisim import machine as _machine  # noqa: E402

SETTLE_TIMEOUT = 10.0  # seconds teardown waits for graceful closes to exchange FINs
GC_TORTURE = os.environ.get("BITSNET_GC_TORTURE", "")
gc_torture_stats = {"collections": 0}


def pytest_configure(config):
    config.addinivalue_line("markers", "machine(**options): MachineConfig options for the `machine` fixture")
    config.addinivalue_line("markers", "smoke: the subset run on the oldest supported Python 3")
    config.addinivalue_line("markers", "leaks_ok: the test deliberately leaves firmware objects behind")
    if GC_TORTURE:
        _install_gc_torture(int(GC_TORTURE) if GC_TORTURE.isdigit() and int(GC_TORTURE) > 1 else 2000)


def pytest_report_header(config):
    if GC_TORTURE:
        return "bitsnet: BITSNET_GC_TORTURE=%s (gc threshold 1, random full collections), PYTHONMALLOC=%s" % (
            GC_TORTURE, os.environ.get("PYTHONMALLOC", ""))
    return None


def _install_gc_torture(every):
    """gc at (seeded) random Python calls, in every thread, callbacks included."""
    rng = random.Random(int(os.environ.get("BITSNET_GC_SEED", "7")))
    countdown = [rng.randint(1, 2 * every)]

    def hook(frame, event, arg):
        if event != "call":
            return
        countdown[0] -= 1
        if countdown[0] <= 0:
            countdown[0] = rng.randint(1, 2 * every)
            gc_torture_stats["collections"] += 1
            gc.collect()

    gc.set_threshold(1, 10, 10)
    sys.setprofile(hook)
    threading.setprofile(hook)


# --- exceptions that escaped a callback --------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_unraisable():
    """Fail a test during which an exception reached sys.unraisablehook (Python 3.8+)."""
    if not hasattr(sys, "unraisablehook"):
        yield
        return
    seen = []
    previous = sys.unraisablehook

    def hook(unraisable):
        seen.append("%s: %r in %r" % (getattr(unraisable.exc_type, "__name__", unraisable.exc_type),
                                     unraisable.exc_value, unraisable.object))
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
        gc.collect()  # __del__ of what the test dropped runs now, still under the hook
    finally:
        sys.unraisablehook = previous
    assert not seen, "exceptions escaped a callback or __del__:\n" + "\n".join(seen)


# --- the machine and the invariants at its teardown --------------------------------------------
@pytest.fixture
def machine(request):
    """A freshly booted simulated machine (options from @pytest.mark.machine(...))."""
    marker = request.node.get_closest_marker("machine") if hasattr(request.node, "get_closest_marker") \
        else request.node.get_marker("machine")
    options = dict(marker.kwargs) if marker else {}
    booted = _machine.boot(_machine.MachineConfig(**options))
    used_before = _bitsnet_use()
    yield booted
    firmware = booted.firmware
    leaks_ok = bool(request.node.get_closest_marker("leaks_ok"))
    try:
        # Only for tests that used bitsnet: a raw-EFI test's objects are its own business
        # (collecting them early could close events a deliberately leaked token still names).
        problems = bitsnet_teardown() if _bitsnet_use() != used_before else []
    except Exception as exc:  # teardown itself failed: report it, still shut the machine down
        problems = ["bitsnet teardown raised %r" % (exc,)]
    crashes = list(firmware.crashes)
    ledger = firmware.ledger()
    booted.shutdown()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)
    if not leaks_ok:
        assert not problems, "bitsnet invariants broken:\n" + "\n".join(problems)
        leaked = dict((k, v) for k, v in ledger.items() if v)
        assert not leaked, "firmware still holds %r after the test" % leaked


def _bitsnet_use():
    """A value that changes whenever bitsnet submits a token or (re)chooses its event mode."""
    events = sys.modules.get("bitsnet.events")
    if events is None:
        return None
    tcp, udp = sys.modules.get("bitsnet.tcp"), sys.modules.get("bitsnet.udp")
    return (events._state["seq"], id(events._state["trampoline"]), events._state["mode"], len(events._events),
            tcp is not None and tcp.live_endpoints(), udp is not None and udp.live_endpoints())


def bitsnet_teardown(settle_timeout=SETTLE_TIMEOUT):
    """Collect, close and shut down what bitsnet still holds; return the invariants broken.

    A no-op for tests that never used bitsnet's runtime (its event mode was never chosen)."""
    events = sys.modules.get("bitsnet.events")
    if events is None or events._state["mode"] is None:
        return []
    gc.collect()
    problems = []
    tcp = sys.modules.get("bitsnet.tcp")
    udp = sys.modules.get("bitsnet.udp")
    lost = lost_completions(events)
    if lost:
        problems.append("completions written by the firmware but never processed: %r" % (lost,))
    if tcp is not None:
        settle_closes(tcp, settle_timeout)
        aborted = tcp.close_all(timeout=settle_timeout)
        if aborted:
            problems.append("%d graceful close(s) did not finish within %.0f s" % (aborted, settle_timeout))
    if udp is not None and hasattr(udp, "close_all"):
        udp.close_all()
    leftover = events.shutdown()
    if leftover:
        problems.append("%d token(s) still outstanding: %r" % (leftover, list(events._pending.values())))
    for module in (tcp, udp):
        if module is not None and hasattr(module, "live_endpoints") and module.live_endpoints():
            problems.append("%s: %d endpoint(s) still hold a child" % (module.__name__, module.live_endpoints()))
    nic = sys.modules.get("bitsnet.nic")
    if nic is not None:
        current = nic._state.get("nic")
        if current is not None and current.children():
            problems.append("nic: %d child(ren) never destroyed" % current.children())
        nic.reset()
    dns = sys.modules.get("bitsnet.dns")
    if dns is not None and hasattr(dns, "reset"):
        dns.reset()
    return problems


def settle_closes(tcp, timeout):
    """Wait until every background close has exchanged FINs, then abort those in TimeWait.

    EDK2 completes a graceful Close token only when the TCB reaches Closed, TimeWaitTimeout
    (2 s at least, facts 3.9) after both FINs; a test gains nothing from waiting that out."""
    from bitsnet import efidefs, events
    finished = (efidefs.Tcp4StateTimeWait, efidefs.Tcp4StateClosed)

    def state(ep):
        try:
            return ep._tcp_state()
        except Exception:
            return efidefs.Tcp4StateClosed

    def settled():
        return all(ep._handle is None or ep._proto is None or state(ep) in finished for ep in tcp._closing)

    events.wait_until(settled, events.clock() + timeout, poll=tcp._poll_any)
    for ep in list(tcp._closing):
        if ep._handle is not None and ep._proto is not None and state(ep) == efidefs.Tcp4StateTimeWait:
            ep._abort()
            ep._destroy()
            tcp._closing.remove(ep)


def lost_completions(events):
    """Tokens the firmware completed that ``process()`` does not find (Rule 3 of events.py)."""
    if events._state["mode"] == "efi-hook":
        events._state["last_rescan"] = 0.0  # BITS's hook drops notifications: its rescan is the design
    events.process()
    written = [op for op in events._pending.values() if op.completion.Status != events.SENTINEL]
    if not written:
        return []
    # A completion written a moment ago may still have its notification on the way (a pending
    # call not yet run, a delayed signal): give it time, then whatever is left was lost.
    time.sleep(0.05)
    events.process()
    return [op for op in written if not op.done]
