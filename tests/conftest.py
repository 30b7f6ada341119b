"""Fixtures shared by the whole suite: import paths, a fresh simulated machine per test, peers,
and the invariants every test that booted a machine must leave intact (docs/testing.md section 3.2).

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
TimeWait or Closed) the child is aborted, which saves EDK2's 2 s TimeWaitTimeout (docs/edk2.md section 3.9)
per test and still fails a test whose close never got that far.

``BITSNET_GC_TORTURE=N`` (opt-in, docs/testing.md section 3.3) forces, once the tests are collected, the
garbage collector at random points: ``gc.set_threshold(1)`` (a gen-0 collection at nearly every allocation) plus a full
``gc.collect()`` on average every N-th Python call, in every thread and inside callbacks (the
trampoline's pending call runs under the profile hook too). Run the suite that way with
``PYTHONMALLOC=debug`` so freed memory is poisoned (0xDD) and overruns are caught.

``BITSNET_TEST_SLOT=N`` (tools/check sets it) gives this test process its own station address
and explicit ports, so that test runs at once do not clash (``STATION``, ``port(i)`` below).
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

# The test runner's own modules stay in place if this process calls bitsnet.install() (which
# rebuilds every module that uses socket): they declare it as bitsnet.install() asks.
for _name in ("pytest", "_pytest", "py", "pluggy"):
    if sys.modules.get(_name) is not None:
        sys.modules[_name].__bitsnet_keep__ = True

SETTLE_TIMEOUT = 10.0  # seconds teardown waits for graceful closes to exchange FINs

# --- parallel test runs on one host -------------------------------------------------------------
# A simulated machine backs its TCP/UDP children with host sockets bound to its station address,
# so two test processes at once (tools/check runs the Python 3 and 2.7 suites side by side;
# pytest-xdist workers) would clash on explicit ports and on each other's ephemeral port counter,
# which starts at the same seeded port in every process. Each process therefore takes a slot:
# BITSNET_TEST_SLOT (tools/check gives each lane its own) times 16 plus the xdist worker number.
# Slot N's machines get station 127.0.N.2 (all of 127.0.0.0/8 is loopback on Linux, and the /8
# subnet, gateway 127.0.0.1 and the peers on 127.0.0.1 stay as they are), and a test that needs
# an explicit port takes one of PORTS_PER_SLOT from port(i). Slot 0 is the plain default
# machine, 127.0.0.2, so a lone run is what it always was.
DEFAULT_STATION = "127.0.0.2"  # MachineConfig's (and efirun's) default address
# Explicit ports the suite may use, shared out among the slots: below Linux's ephemeral range
# (32768-60999), where any client socket on the machine may hold one at any moment (nginx on
# 46000 once failed to start: "Address already in use"), and below bitsnet's station ports.
PORT_RANGE = (30000, 30999)
PORTS_PER_SLOT = 20


def _test_slot():
    slot = os.environ.get("BITSNET_TEST_SLOT", "0")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under pytest-xdist
    n = int(slot) * 16 if slot.isdigit() else 0
    if worker[2:].isdigit():
        n += int(worker[2:]) % 16
    return n % ((PORT_RANGE[1] + 1 - PORT_RANGE[0]) // PORTS_PER_SLOT)


SLOT = _test_slot()
STATION = "127.0.%d.2" % SLOT if SLOT else DEFAULT_STATION  # this process's simulated machines
STATION_ARGS = ["--address", STATION + "/8"] if SLOT else []  # the same for tools/efirun.py


def port(index):
    """The ``index``-th explicit port of this process's slot (index 0..PORTS_PER_SLOT-1)."""
    assert 0 <= index < PORTS_PER_SLOT, index
    return PORT_RANGE[0] + SLOT * PORTS_PER_SLOT + index


def machine_config(**options):
    """A MachineConfig with this process's station address unless ``options`` name one."""
    options.setdefault("address", STATION + "/8")
    return _machine.MachineConfig(**options)
GC_TORTURE = os.environ.get("BITSNET_GC_TORTURE", "")
gc_torture_stats = {"collections": 0}


def pytest_configure(config):
    config.addinivalue_line("markers", "machine(**options): MachineConfig options for the `machine` fixture")
    config.addinivalue_line("markers", "smoke: the subset run on the oldest supported Python 3")
    config.addinivalue_line("markers", "leaks_ok: the test deliberately leaves firmware objects behind")


def pytest_collection_finish(session):
    """Start the gc torture once the tests are collected: under it, importing every test module
    (hypothesis included) took 25 s before a single test ran.

    Otherwise freeze what collection built (Python 3.7+): the teardown checks below collect
    garbage after every test, and each full collection used to traverse the whole session's
    heap -- pytest, hypothesis and every test module -- at 0.1 to 0.7 s a test. Frozen objects
    are only exempt from the cycle collector, which they would survive anyway; whatever a test
    makes is collected as before. Not under the torture, which keeps every object in play."""
    if GC_TORTURE:
        _install_gc_torture(int(GC_TORTURE) if GC_TORTURE.isdigit() and int(GC_TORTURE) > 1 else 2000)
    elif hasattr(gc, "freeze"):
        gc.collect()
        gc.freeze()


def pytest_report_header(config):
    lines = ["bitsnet: test slot %d, station %s, explicit ports %d-%d" % (
        SLOT, STATION, port(0), port(PORTS_PER_SLOT - 1))]
    if GC_TORTURE:
        lines.append("bitsnet: BITSNET_GC_TORTURE=%s (gc threshold 1, random full collections), PYTHONMALLOC=%s"
                     % (GC_TORTURE, os.environ.get("PYTHONMALLOC", "")))
    return lines


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
    booted = _machine.boot(machine_config(**options))
    used_before = _bitsnet_use()
    yield booted
    firmware = booted.firmware
    leaks_ok = bool(request.node.get_closest_marker("leaks_ok"))
    try:
        # Only for tests that used bitsnet: a raw-EFI test's objects are its own business
        # (collecting them early could close events a deliberately leaked token still names).
        problems = bitsnet_teardown() if _bitsnet_use() != used_before else []
        # A socket freed only now (its last reference sat in a traceback or a peer thread's
        # frame) starts its close after the teardown above: finish that one too.
        settled = _bitsnet_use()
        gc.collect()
        if _bitsnet_use() != settled:
            problems += bitsnet_teardown()
    except Exception as exc:  # teardown itself failed: report it, still shut the machine down
        problems = ["bitsnet teardown raised %r" % (exc,)]
    crashes = list(firmware.crashes)
    ledger = firmware.ledger()
    holds = _bitsnet_holds()
    booted.shutdown()
    forget_machine()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)
    if not leaks_ok:
        assert not problems, "bitsnet invariants broken:\n" + "\n".join(problems)
        leaked = dict((k, v) for k, v in ledger.items() if v)
        assert not leaked, "firmware still holds %r after the test (bitsnet's view: %s)" % (leaked, holds)


def forget_machine():
    """Forget the NIC bitsnet found on the machine just shut down, even when the test never chose
    an event mode (a name lookup alone finds the NIC): the next test must not call into a
    firmware that is gone."""
    nic = sys.modules.get("bitsnet.nic")
    if nic is not None:
        nic.reset()


def _bitsnet_use():
    """A value that changes whenever bitsnet submits a token or (re)chooses its event mode."""
    events = sys.modules.get("bitsnet.events")
    if events is None:
        return None
    tcp, udp = sys.modules.get("bitsnet.tcp"), sys.modules.get("bitsnet.udp")
    return (events._state["seq"], id(events._state["trampoline"]), events._state["mode"], len(events._events),
            tcp is not None and tcp.live_endpoints(), udp is not None and udp.live_endpoints())


def _bitsnet_holds():
    """bitsnet's own account of the events it holds, for a leak message."""
    events = sys.modules.get("bitsnet.events")
    if events is None:
        return "bitsnet.events not imported"
    open_slots = [slot for slot, value in enumerate(events._events) if value is not None]
    return "mode %s, %d event(s) open, %d idle, %d token(s) outstanding %r" % (
        events._state["mode"], len(open_slots), len(events._idle), len(events._pending),
        list(events._pending.values()))


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
    sockets = sys.modules.get("bitsnet._socket")
    if sockets is not None:
        sockets._close_deferred()  # sockets finalized on a peer's or the firmware's thread
    lost = lost_completions(events)
    if lost:
        problems.append("completions written by the firmware but never processed: %r" % (lost,))
    if tcp is not None:
        close_live(tcp)
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


def close_live(tcp):
    """Start the graceful close of every endpoint the test left open, so that settle_closes cuts
    their TIME_WAIT short too (close_all would otherwise wait it out: 2 s per such test)."""
    for ep in list(getattr(tcp, "_live", ())):
        ep.close()


def settle_closes(tcp, timeout):
    """Wait until every background close has exchanged FINs, then abort those in TimeWait.

    EDK2 completes a graceful Close token only when the TCB reaches Closed, TimeWaitTimeout
    (2 s at least, docs/edk2.md section 3.9) after both FINs; a test gains nothing from waiting that out."""
    from bitsnet import efidefs, events, stack
    finished = (efidefs.Tcp4StateTimeWait, efidefs.Tcp4StateClosed)

    def state(ep):
        try:
            return ep._tcp_state()
        except Exception:
            return efidefs.Tcp4StateClosed

    def settled():
        return all(ep._handle is None or ep._proto is None or state(ep) in finished for ep in tcp._closing)

    events.wait_until(settled, events.clock() + timeout, poll=stack.pump)
    for ep in list(tcp._closing):
        if ep._handle is not None and ep._proto is not None and state(ep) == efidefs.Tcp4StateTimeWait:
            ep._abort()
            ep._destroy()
            tcp._closing.remove(ep)


def lost_completions(events):
    """Tokens the firmware completed that ``process()`` does not find (no completion is lost:
    docs/architecture.md section 3)."""
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
