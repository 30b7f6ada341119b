"""bitsnet.results: BITS's own test suite, run and recorded, as JUnit XML and BITS's log.

    from bitsnet import results
    report = results.run_tests(["ACPI Tests", "SMRR configuration"])   # or None: all
    report.passed, report.failed       # BITS's "Summary: N passed, M failed" numbers
    xml = report.junit_xml()           # bytes: testsuites/testsuite/testcase, UTF-8
    log = results.log_text()           # bytes: what BITS writes to /boot/bits-log.txt

Contents: ``run_tests``, ``names``, ``Report``, ``TestRecord``, ``log_text``; ``TeeStream``
with ``tee_stdio``/``restore_stdio`` (also bitsnet.lab's and bitsnet.netconsole's), ``as_text``;
the XML is ``bitsnet.junit``'s.

How BITS's test suite works (its ``testsuite`` module, in /boot/python; docs/lab.md section 1)
---------------------------------------------------------------------------------------------
Modules register tests at start-up with ``testsuite.add_test(name, func, submenu, runall,
runsub)``: the registry is ``testsuite.tests`` (submenu name, or None for the top menu -> list
of ``(name, func, runall, runsub)`` named tuples) and ``testsuite.submenus`` (the submenus in
menu order). A test is a plain function that calls ``testsuite.test(description, condition)``
for each check; that counts one pass or one fail in the module globals ``pass_count`` and
``fail_count`` and prints ``[assert] DESCRIPTION FAIL`` (at the default verbosity, failures
only). ``testsuite.run_all_tests()`` runs every test whose ``runall`` is true, submenu by
submenu and then the top menu, printing ``---- NAME ----`` (``==== NAME ====`` in the top menu)
before each; an exception from a test counts one more fail ("Internal error; test threw
exception") and prints its traceback; after each test ``testsuite.summary()`` prints
``Summary: N passed, M failed`` and resets the counts; at the end it prints ``==== Overall
summary: N passed, M failed ====``. The console is BITS's ``redirect.Tee``, which copies every
byte into an in-memory log (``redirect._log``); the batch mode writes that log over the
preallocated file ``/boot/bits-log.txt``, which needs a writable boot disk.

How this records it, from outside (BITS's files stay as they are)
----------------------------------------------------------------
``run_tests`` calls BITS's own ``testsuite.run_all_tests()``, so what the console shows is
BITS's own text, byte for byte, for a selection as for everything. For the run it swaps, and
puts back afterwards whatever happens:

- ``testsuite.tests``/``submenus`` for a copy holding the selected tests only (with ``runall``
  set, so a test named explicitly runs even if BITS keeps it out of "Run all tests"); reading
  an entry's ``func``, which BITS does just before calling it, starts that test's record (the
  function itself is BITS's to call: no frame of ours shows in its tracebacks);
- ``testsuite.test`` for a function that notes each failed description, whatever the
  verbosity, and the traceback of the exception BITS is handling when it counts its
  "Internal error", then calls BITS's;
- ``testsuite.summary`` for a function that reads ``pass_count``/``fail_count`` -- the numbers
  BITS is about to print -- into the test's record, then calls BITS's;
- ``sys.stdout``/``sys.stderr`` for writers that pass every write to the stream they replaced
  first (its result and its exceptions unchanged) and keep a copy for the running test.

Limits: a test that never returns (a hang) is not ended by this module -- a caller with a time
limit raises out of it (``report`` is filled as the run goes, so the tests done so far are kept;
the interrupted test is recorded as an error; with ``resume_on`` naming that exception's class
the tests after it still run). Output a test writes past ``sys.stdout`` (C
code printing through GRUB) is on the console but not in the record.
"""

from __future__ import absolute_import, print_function

import sys
import traceback

from bitsnet import clock

_clock = clock.monotonic
PY2 = sys.version_info[0] == 2
_text_type = unicode if PY2 else str  # type: ignore[name-defined]  # noqa: F821

SUITE_OF_TOP_MENU = "BITS"  # the JUnit testsuite of the tests BITS shows in its top menu
INTERNAL_ERROR = "Internal error; test threw exception"  # the fail BITS counts for an exception
OUTPUT_LIMIT = 1 << 20  # bytes of console output kept per test (the rest is counted, not kept)


class TestRecord(object):
    """One BITS test as it ran: ``name``, ``submenu`` (None: the top menu), ``passed`` and
    ``failed`` (its asserts, as its ``Summary:`` line says), ``failures`` (the descriptions of
    the asserts that failed), ``output`` (the lines it printed), ``exception`` (the traceback
    text of what it raised, or None), ``seconds``; ``dropped``: output bytes beyond
    OUTPUT_LIMIT."""

    __test__ = False  # not a pytest test class, whatever its name says

    def __init__(self, name, submenu):
        self.name, self.submenu = name, submenu
        self.passed = self.failed = 0
        self.failures = []  # type: list
        self.exception = None  # type: str
        self.seconds = 0.0
        self.done = False  # its Summary was reached (False: interrupted)
        self._out = []  # type: list   # text pieces as written
        self._size = 0
        self.dropped = 0

    def write(self, text):
        size = len(text)
        if self._size + size > OUTPUT_LIMIT:
            self.dropped += size
            return
        self._size += size
        self._out.append(text)

    @property
    def output(self):
        """The printed lines (text, without their newlines)."""
        text = u"".join(as_text(piece) for piece in self._out)
        if text.endswith(u"\n"):
            text = text[:-1]
        return text.split(u"\n") if text else []

    @property
    def assert_failures(self):
        """The failed asserts of the test itself (BITS's "Internal error" left out: an
        exception is reported as such)."""
        return [d for d in self.failures if d != INTERNAL_ERROR]

    @property
    def suite(self):
        return self.submenu if self.submenu is not None else SUITE_OF_TOP_MENU

    @property
    def status(self):
        """"error" (it raised, or never finished), "failure" (an assert failed) or "passed"."""
        if self.exception is not None or not self.done:
            return "error"
        return "failure" if self.failed else "passed"

    def __repr__(self):
        return "<TestRecord %r/%r %d passed, %d failed%s>" % (
            self.submenu, self.name, self.passed, self.failed, " exception" if self.exception else "")


class Report(object):
    """The records of one ``run_tests`` call, in the order BITS ran them."""

    def __init__(self):
        self.tests = []  # type: list
        self.started = _utc_timestamp()  # ISO 8601 from the real-time clock, or None
        self.seconds = 0.0

    @property
    def passed(self):
        return sum(t.passed for t in self.tests)

    @property
    def failed(self):
        return sum(t.failed for t in self.tests)

    def summary(self):
        """BITS's overall summary numbers, as it prints them: "N passed, M failed"."""
        return "%d passed, %d failed" % (self.passed, self.failed)

    def suites(self):
        """[(suite name, [records])] in run order (a submenu is one suite)."""
        order, groups = [], {}  # type: (list, dict)
        for record in self.tests:
            if record.suite not in groups:
                order.append(record.suite)
                groups[record.suite] = []
            groups[record.suite].append(record)
        return [(name, groups[name]) for name in order]

    def junit_xml(self, hostname=None, properties=()):
        """The report as JUnit XML (bytes, UTF-8); see docs/lab.md section 2 for the mapping.
        ``hostname``: the machine (testsuite/@hostname); ``properties``: (name, value) pairs
        added to every testsuite's properties (the machine's identity, the run id)."""
        from bitsnet import junit
        return junit.build(self, hostname, properties)


# --------------------------------------------------------------------------- text helpers
def as_text(piece):
    """``piece`` as text: bytes decoded as UTF-8 (an undecodable byte as U+FFFD), anything
    else through ``unicode``/``str``; the report's and its JUnit XML's one rule."""
    if isinstance(piece, _text_type):
        return piece
    if isinstance(piece, (bytes, bytearray)):
        return bytes(piece).decode("utf-8", "replace")
    return _text_type(piece)


def _utc_timestamp():
    """The real-time clock as "YYYY-MM-DDTHH:MM:SS" (UTC), or None where it cannot be read.
    BITS quirk: only gmtime/localtime exist, reading the RTC (docs/bits-environment.md section 5)."""
    try:
        import time
        t = time.gmtime()
        return "%04d-%02d-%02dT%02d:%02d:%02d" % tuple(t[:6])
    except Exception:
        return None


# --------------------------------------------------------------------------- the recording
class _Recorder(object):
    """The hooks of one run (module docstring): which test runs, its output, its numbers."""

    def __init__(self, suite, report):
        self.suite = suite
        self.report = report
        self.current = None  # type: TestRecord
        self.index = -1  # the running test's place in the run's plan
        self.started = 0.0
        self.original_test = suite.test
        self.original_summary = suite.summary

    def hooked(self, index, submenu, entry):
        """A copy of registry ``entry`` whose ``func`` attribute, read by run_all_tests just
        before the call, starts the test's record and gives BITS the test's own function: no
        frame of ours is between BITS and the test, so a traceback prints as it always does."""
        fields = type(entry)._fields
        where = fields.index("func")
        recorder = self

        class Hooked(type(entry)):  # type: ignore[misc,valid-type]
            @property
            def func(self):
                recorder.start(index, entry.name, submenu)
                return tuple.__getitem__(self, where)
        values = list(entry)
        values[fields.index("runall")] = True
        return Hooked(*values)

    def start(self, index, name, submenu):
        record = TestRecord(name, submenu)
        self.report.tests.append(record)
        self.current, self.index = record, index
        self.started = _clock()

    def finish(self, record):
        record.passed, record.failed = self.suite.pass_count, self.suite.fail_count
        record.seconds = _clock() - self.started

    def test(self, desc, value, *args, **kwargs):
        record = self.current
        if record is not None and not value:
            record.failures.append(as_text(desc))
            if desc == INTERNAL_ERROR and record.exception is None and sys.exc_info()[0] is not None:
                # BITS is handling the test's exception and prints this traceback next
                record.exception = "".join(traceback.format_exception(*sys.exc_info()))
        return self.original_test(desc, value, *args, **kwargs)

    def summary(self, *args, **kwargs):
        record = self.current
        if record is not None:
            self.finish(record)
            record.done = True
            self.current = None
        return self.original_summary(*args, **kwargs)

    def write(self, text):
        if self.current is not None:
            self.current.write(text)


class TeeStream(object):
    """A replacement for ``sys.stdout``/``sys.stderr``: every write goes to the stream it
    replaced first (its result and its exceptions unchanged), then a copy to ``copy.write``
    (whose exceptions are swallowed: recording never breaks the console). Everything else
    (``encoding``, ``isatty``, ``fileno``...) is the replaced stream's. Used here for BITS's
    tests, by bitsnet.lab for a plan's steps and, as a base, by bitsnet.netconsole."""

    def __init__(self, original, copy):
        self._original = original
        self._copy = copy

    def write(self, text):
        result = self._original.write(text)
        try:
            self._copy.write(text)
        except Exception:  # recording never breaks the console
            pass
        return result

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        flush = getattr(self._original, "flush", None)
        return flush() if flush is not None else None

    def __getattr__(self, name):
        original = self.__dict__.get("_original")
        if original is None:
            raise AttributeError(name)
        return getattr(original, name)


def tee_stdio(copy):
    """Replaces ``sys.stdout`` and ``sys.stderr`` by TeeStreams copying to ``copy``; returns
    what ``restore_stdio`` needs."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TeeStream(saved[0], copy), TeeStream(saved[1], copy)
    return saved


def restore_stdio(saved):
    """Undoes ``tee_stdio``, unless the program replaced a stream itself meanwhile (then its
    own stream stays)."""
    if isinstance(sys.stdout, TeeStream):
        sys.stdout = saved[0]
    if isinstance(sys.stderr, TeeStream):
        sys.stderr = saved[1]


def _testsuite():
    try:
        import testsuite  # BITS's, in /boot/python
    except ImportError as exc:
        raise ImportError("bitsnet.results needs BITS's testsuite module (%s)" % exc)
    return testsuite


def names():
    """[(submenu, test name)] of every registered BITS test, in menu order (submenu None:
    the top menu); what ``run_tests`` can be given."""
    suite = _testsuite()
    out = []
    for submenu in list(suite.submenus) + [None]:
        for entry in suite.tests.get(submenu, ()):
            out.append((submenu, entry.name))
    return out


def _select(suite, selection):
    """[(submenu, entry)] to run for ``selection`` (see ``run_tests``), in menu order."""
    order = list(suite.submenus) + [None]
    wanted = None if selection is None else set(selection)
    if wanted is not None:
        known = set(s for s in suite.submenus) | set(e.name for s in order for e in suite.tests.get(s, ()))
        missing = [n for n in selection if n not in known]
        if missing:
            raise LookupError("no BITS test or submenu named %s" % ", ".join(repr(n) for n in missing))
    plan = []
    for submenu in order:
        for entry in suite.tests.get(submenu, ()):
            if wanted is None:
                take = entry.runall
            elif entry.name in wanted:
                take = True
            else:
                take = submenu in wanted and entry.runsub
            if take:
                plan.append((submenu, entry))
    return plan


def _registry(recorder, plan, start):
    """BITS's registry shape ({submenu: entries}, submenus) for plan[start:], hooked."""
    tests, submenus = {None: []}, []  # type: (dict, list)  # run_all_tests reads tests[None] always
    for index in range(start, len(plan)):
        submenu, entry = plan[index]
        if submenu is not None and submenu not in tests:
            submenus.append(submenu)
        tests.setdefault(submenu, []).append(recorder.hooked(index, submenu, entry))
    return tests, submenus


def run_tests(selection=None, report=None, resume_on=()):
    """Run BITS's tests through BITS's own ``testsuite.run_all_tests()`` and record them.

    ``selection``: None runs what BITS's "Run all tests" runs; else a list of names, each a
    submenu (its tests as the submenu's "Run all tests" picks them: ``runsub``) or a test (run
    whatever its flags), in BITS's menu order; an unknown name raises LookupError before
    anything runs. ``report``: a Report to fill (a caller that may interrupt the run keeps
    what was recorded); a new one by default. Returns the Report.

    An exception BITS does not handle (not an ``Exception``: a caller's time limit, Ctrl-C)
    ends the run and is raised, the test it cut short recorded as an error -- unless it is
    an instance of ``resume_on`` (a tuple of classes): then that test is recorded so, one line
    says so on the console, and BITS's ``run_all_tests`` runs again for the tests after it
    (so the console shows BITS's "Running all tests" and "Overall summary" once more, and
    neither of BITS's overall summaries counts the test cut short; the Report does)."""
    suite = _testsuite()
    report = Report() if report is None else report
    plan = _select(suite, selection)
    recorder = _Recorder(suite, report)
    saved = (suite.tests, suite.submenus, suite.test, suite.summary)
    started = _clock()
    suite.test, suite.summary = recorder.test, recorder.summary
    streams = tee_stdio(recorder)
    try:
        start = 0
        while True:
            suite.tests, suite.submenus = _registry(recorder, plan, start)
            try:
                suite.run_all_tests()
                break
            except BaseException as exc:  # not an Exception BITS handles: the run was interrupted
                record = recorder.current
                if record is None:
                    raise
                if record.exception is None:
                    record.exception = traceback.format_exc()
                recorder.finish(record)
                recorder.current = None
                if not isinstance(exc, tuple(resume_on)) or recorder.index + 1 >= len(plan):
                    raise
                start = recorder.index + 1
                print("results: %s cut short (%s); the remaining tests run on"
                      % (record.name, _one_line(exc)))
    finally:
        suite.tests, suite.submenus, suite.test, suite.summary = saved
        restore_stdio(streams)
        report.seconds += _clock() - started
    return report


def _one_line(exc):
    try:
        text = str("%s: %s" % (type(exc).__name__, exc))
    except Exception:  # a unicode message on 2.7
        text = type(exc).__name__
    return " ".join(text.split())


# --------------------------------------------------------------------------- BITS's log
def log_text():
    """What BITS would write to /boot/bits-log.txt, from memory (bytes): the log its
    ``redirect`` module keeps of every console byte since start-up. BITS writes at most the
    size of the preallocated file; this is all of it. Raises ImportError outside BITS (no
    ``redirect`` module) and LookupError if that module keeps no log."""
    import redirect  # BITS's, in /boot/python
    log = getattr(redirect, "_log", None)
    if log is None or not hasattr(log, "getvalue"):
        raise LookupError("BITS's redirect module keeps no log here")
    data = log.getvalue()
    if isinstance(data, _text_type):
        data = data.encode("utf-8", "replace")
    return bytes(data)
