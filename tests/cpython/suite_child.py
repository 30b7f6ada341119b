"""One CPython test suite over bitsnet, "at the boot prompt" of a simulated machine.

Run by tests/cpython/run_suites.py as
``tools/efirun.py --host-stdlib --no-install --address STATION/8 suite_child.py SUITE RESULTS [SKIP...]``
(the host's complete stdlib: CPython's suites need threading, tempfile, subprocess...). Before the
suite is imported this script

1. lets the simulated wire deliver to the machine's own address: the suites connect a socket to
   a server of the same process, which real EDK2 cannot do (IP4 has no loopback) -- a harness
   liberty, so that both ends of every connection are bitsnet;
2. puts bitsnet's socket entry points under one lock and sets ``bitsnet.events.wait_hook`` to
   release it while bitsnet waits: no firmware Python has threads, so bitsnet is not
   thread-safe, and the suites' threads take turns instead (the parent sets
   BITSNET_EVENT_MODE=check-event: the trampoline's pending calls run on the main thread only,
   and any thread may be the one waiting);
3. calls ``bitsnet.install()``. The suites' "127.0.0.1" (and "localhost") is the machine: see
   ADDRESS_MAPPING.

Each test's outcome is appended to RESULTS as one JSON line {"id", "outcome", "detail"}; a line
{"start": id} comes first, so the parent knows which test a killed child was running. A test
running longer than BITSNET_CPYTHON_TEST_TIMEOUT seconds (SIGALRM in the main thread) is recorded
as "timeout" and the child exits at once (its threads may still hold the lock): the parent
starts a new child for the tests after it. Test ids in SKIP are not run.
"""

from __future__ import print_function

import functools
import json
import os
import signal
import sys
import threading
import time
import traceback
import unittest

PY2 = sys.version_info[0] == 2
TEST_TIMEOUT = float(os.environ.get("BITSNET_CPYTHON_TEST_TIMEOUT", "20"))


# --- 1. the wire reaches the machine itself ----------------------------------------------------
def let_machine_reach_itself():
    import efisim.tcp4
    import efisim.udp4
    import efisim.udp4_engine

    def never_self(*args):
        return False
    efisim.tcp4.addressed_to_self = never_self
    efisim.udp4.addressed_to_self = never_self  # Transmit
    efisim.udp4_engine.addressed_to_self = never_self  # what arrives


# --- 2. threads take turns -----------------------------------------------------------------------
class Turns(object):
    """One lock around bitsnet; re-entrant per thread; released by ``wait_hook`` while waiting."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owner = None
        self.depth = 0
        self.waiting = 0

    def enter(self):
        me = threading.current_thread()
        if self.owner is me:
            self.depth += 1
            return
        self.waiting += 1
        try:
            self._acquire()
        finally:
            self.waiting -= 1
        self.owner, self.depth = me, 1

    def _acquire(self):
        # Polled, not a blocking acquire: Python 2.7's lock acquire cannot be interrupted, and
        # the per-test alarm must reach a main thread that waits for its turn.
        while not self.lock.acquire(False):
            time.sleep(0.0002)

    def exit(self):
        if self.owner is not threading.current_thread():
            return  # interrupted inside wait_hook before it took the lock back
        self.depth -= 1
        if self.depth == 0:
            self.owner = None
            self.lock.release()

    def wait_hook(self):
        me = threading.current_thread()
        if self.owner is not me:
            return
        depth = self.depth
        # bitsnet refuses a second thread while one is inside (_socket._inside, docs/architecture.md section 7): while
        # this one waits with the lock released it is, for bitsnet, outside.
        inside = INSIDE[:] if INSIDE is not None else None
        if INSIDE is not None:
            INSIDE[:] = [None, 0]
        self.owner, self.depth = None, 0
        self.lock.release()
        try:
            # Others blocked on the lock get it now; without waiters, a short sleep still lets
            # the suites' other threads (not in bitsnet) run, as the firmware's Stall would.
            time.sleep(0.0005 if self.waiting else 0.0001)
        finally:
            self._acquire()
            self.owner, self.depth = me, depth
            if INSIDE is not None:
                INSIDE[:] = inside

    def wrap(self, function, name=None):
        turns = self
        mapping = ADDRESS_MAPPING.get(name)

        @functools.wraps(function)
        def in_turn(*args, **kwargs):
            outermost = turns.owner is not threading.current_thread()
            if outermost and mapping is not None and mapping[0] is not None and len(args) > mapping[0]:
                args = list(args)
                args[mapping[0]] = to_station(args[mapping[0]])
            turns.enter()
            try:
                result = function(*args, **kwargs)
            finally:
                turns.exit()
            if outermost and mapping is not None and mapping[1] is not None:
                result = from_station(result, mapping[1])
            return result
        in_turn.__wrapped_by_turns__ = True
        return in_turn


# The suites' firmware is 127.0.0.1: they bind and connect to "127.0.0.1" and "localhost"
# literally, while the simulated machine has its own loopback address (test slots must not
# clash). At bitsnet's socket methods, 127.0.0.1 becomes the station on the way in, and the
# station 127.0.0.1 on the way out. {method: (index of the address argument, where the address
# is in the result: "all" or an index)}; the index of sendto's address is -1 (its last argument).
ADDRESS_MAPPING = {
    "bind": (1, None), "connect": (1, None), "connect_ex": (1, None), "sendto": (-1, None),
    "getsockname": (None, "all"), "getpeername": (None, "all"), "accept": (None, 1), "_accept": (None, 1),
    "recvfrom": (None, 1), "recvfrom_into": (None, 1),
    "sendmsg": (4, None), "recvmsg": (None, 3), "recvmsg_into": (None, 3),
}
WIRE_LOOPBACK = "127.0.0.1"
STATION = [WIRE_LOOPBACK]  # set by main()


def to_station(address):
    if isinstance(address, tuple) and len(address) == 2 and address[0] in (WIRE_LOOPBACK, "localhost"):
        return (STATION[0],) + address[1:]
    return address


def from_station(result, where):
    def back(address):
        if isinstance(address, tuple) and len(address) == 2 and address[0] == STATION[0]:
            return (WIRE_LOOPBACK,) + address[1:]
        return address
    if where == "all":
        return back(result)
    if isinstance(result, tuple) and len(result) > where:
        result = list(result)
        result[where] = back(result[where])
        return tuple(result)
    return result


INSIDE = None  # bitsnet._socket._inside once take_turns() found it


def wrap_class(turns, cls):
    for name, value in list(vars(cls).items()):
        if isinstance(value, (staticmethod, classmethod, property)) or not callable(value):
            continue
        if isinstance(value, type) or getattr(value, "__wrapped_by_turns__", False):
            continue
        if name in ("__repr__", "__del__", "__getattribute__", "__getattr__", "__setattr__"):
            continue
        setattr(cls, name, turns.wrap(value, name))


def take_turns():
    import types

    from bitsnet import _socket, events
    from bitsnet import select as bselect
    turns = Turns()
    for module in (_socket, bselect):
        for name, value in list(vars(module).items()):
            if name.startswith("_") and name not in ("_Select",):
                continue
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                setattr(module, name, turns.wrap(value))
            elif isinstance(value, type) and value.__module__ == module.__name__ \
                    and not issubclass(value, BaseException):
                wrap_class(turns, value)
    global INSIDE
    INSIDE = getattr(_socket, "_inside", None)
    events.wait_hook = turns.wait_hook
    return turns


# --- 3. the suites' addresses --------------------------------------------------------------------
def station():
    return os.environ.get("BITSNET_CPYTHON_STATION", "127.0.0.2")


def quiet_support(suite_name):
    if PY2:
        from test import test_support as support
    else:
        from test import support
    # No 'cpu'/'walltime' extras, and 'network' (the internet) only for test_socketserver, which
    # asks for it at import although it talks to itself only; the simulated wire reaches
    # 127.0.0.0/8 only anyway.
    support.use_resources = ["network"] if suite_name == "test_socketserver" else []
    support.verbose = False


# --- running the tests ------------------------------------------------------------------------
class TestTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise TestTimeout("test ran longer than %.0f s" % TEST_TIMEOUT)


def collect(module):
    """The suite's tests: test_main()'s classes on 2.7, the loader's (load_tests aware) on 3."""
    if PY2 and hasattr(module, "test_main"):
        from test import test_support
        classes = []

        def capture(*args):
            classes.extend(args)
        # test_main() calls run_unittest through test_support, test.support (2.7.18 has both)
        # or its own global: each is pointed at capture() for the call.
        holders = [test_support, module] + [m for m in (sys.modules.get("test.support"),) if m is not None]
        saved = [(h, h.run_unittest) for h in holders if hasattr(h, "run_unittest")]
        for holder, _ in saved:
            holder.run_unittest = capture
        try:
            module.test_main()
        finally:
            for holder, function in saved:
                holder.run_unittest = function
        suite = unittest.TestSuite()
        for cls in classes:
            if isinstance(cls, str):  # run_unittest(__name__): the module's own tests
                suite.addTest(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[cls]))
            elif isinstance(cls, type):
                suite.addTest(unittest.defaultTestLoader.loadTestsFromTestCase(cls))
            elif isinstance(cls, unittest.TestSuite):
                suite.addTest(cls)
        return suite
    return unittest.defaultTestLoader.loadTestsFromModule(module)


def flatten(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            for each in flatten(test):
                yield each
        else:
            yield test


def short_id(test):
    name = test.id()
    return name[len("test."):] if name.startswith("test.") else name


class Recorder(unittest.TestResult):
    """Writes START and outcome lines; arms the per-test alarm."""

    def __init__(self, out):
        unittest.TestResult.__init__(self)
        self.out = out
        self.outcome = None

    def emit(self, obj):
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    def startTest(self, test):
        unittest.TestResult.startTest(self, test)
        self.outcome = ["passed", ""]
        self.emit({"start": short_id(test)})
        signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT)

    def stopTest(self, test):
        signal.setitimer(signal.ITIMER_REAL, 0)
        unittest.TestResult.stopTest(self, test)
        self.emit({"id": short_id(test), "outcome": self.outcome[0], "detail": self.outcome[1][-1500:]})
        if self.outcome[0] == "timeout":
            os._exit(3)  # the test's threads may still hold the lock: the parent goes on

    def _set(self, test, outcome, err):
        text = self._exc_info_to_string(err, test) if err is not None else ""
        if err is not None and issubclass(err[0], TestTimeout):
            outcome = "timeout"
        if self.outcome[0] in ("passed", "skipped"):
            self.outcome = [outcome, text]

    def addError(self, test, err):
        unittest.TestResult.addError(self, test, err)
        if not isinstance(test, unittest.TestCase):  # setUpClass/setUpModule failed
            self.emit({"id": "fixture:" + getattr(test, "description", str(test)), "outcome": "error",
                       "detail": "".join(traceback.format_exception(*err))[-1500:]})
            return
        self._set(test, "error", err)

    def addFailure(self, test, err):
        unittest.TestResult.addFailure(self, test, err)
        self._set(test, "failed", err)

    def addSkip(self, test, reason):
        unittest.TestResult.addSkip(self, test, reason)
        self.outcome = ["skipped", str(reason)]

    def addExpectedFailure(self, test, err):
        unittest.TestResult.addExpectedFailure(self, test, err)
        self.outcome = ["passed", "expected failure (the suite's own)"]

    def addUnexpectedSuccess(self, test):
        unittest.TestResult.addUnexpectedSuccess(self, test)
        self.outcome = ["failed", "unexpected success"]

    def addSubTest(self, test, subtest, err):
        if err is not None:
            failure = issubclass(err[0], test.failureException)
            self._set(test, "failed" if failure else "error", err)
        unittest.TestResult.addSubTest(self, test, subtest, err)


def skipped(test_id, skip):
    """Whether ``test_id`` is in ``skip``, itself or by its class (``suite.Class``)."""
    return test_id in skip or test_id.rpartition(".")[0] in skip


def main():
    suite_name, results = sys.argv[1], sys.argv[2]
    skip = set(sys.argv[3:])
    let_machine_reach_itself()
    take_turns()
    import bitsnet
    bitsnet.install()
    STATION[0] = station()
    quiet_support(suite_name)
    signal.signal(signal.SIGALRM, _on_alarm)
    with open(results, "a") as out:
        try:
            module = __import__("test." + suite_name, fromlist=["*"])
            tests = [t for t in flatten(collect(module)) if not skipped(short_id(t), skip)]
            only = os.environ.get("BITSNET_CPYTHON_ONLY")  # a test id or class, by hand
            if only:
                tests = [t for t in tests if skipped(short_id(t), [only])]
        except Exception:
            out.write(json.dumps({"id": "import:" + suite_name, "outcome": "error",
                                  "detail": traceback.format_exc()[-1500:]}) + "\n")
            return 1
        try:
            unittest.TestSuite(tests).run(Recorder(out))
        finally:
            from bitsnet import events
            events.wait_hook = None  # efirun's cleanup waits too, after this module is gone
    return 0


if __name__ == "__main__":
    sys.exit(main())
