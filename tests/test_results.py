"""bitsnet.results and bitsnet.junit: BITS's test suite recorded, and the JUnit XML a CI reads.

In this process, over the stand-in of BITS's testsuite module (tests/fixtures/bits_fake, which
counts and prints as BITS 2079's does): the console is byte for byte what BITS prints without
the recording; every test's numbers equal its ``Summary:`` line, its failed asserts, output,
exception and time are kept; selections, verbosity, an interrupted run; BITS's registry and
streams are put back. The XML is read by junitparser and validated against Jenkins's JUnit
schema (tests/junitcheck.py), whatever the output held (control characters, unpaired
surrogates, markup). In real BITS: tests/test_results_realbits.py.
"""

from __future__ import print_function

import os
import re
import sys

import pytest

import junitcheck

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fixtures", "bits_fake")
SUMMARY = re.compile(r"^Summary: (\d+) passed, (\d+) failed$")
OVERALL = re.compile(r"^==== Overall summary: (\d+) passed, (\d+) failed ====$")
HEADING = re.compile(r"^(?:----|====) (.*) (?:----|====)$")


class Console(object):
    """BITS's console as a program sees it: ``write`` (and ``flush``) only."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text if isinstance(text, type(u"")) else text.decode("utf-8", "replace"))

    def flush(self):
        pass

    @property
    def text(self):
        return u"".join(self.parts)


@pytest.fixture
def bits(monkeypatch):
    """A fresh stand-in testsuite with the fake tests registered; (testsuite, results)."""
    monkeypatch.syspath_prepend(FAKE)
    for name in ("testsuite", "fake_tests", "redirect", "smbios"):
        sys.modules.pop(name, None)
    import fake_tests
    import testsuite
    from bitsnet import results
    fake_tests.register()
    yield testsuite, results
    for name in ("testsuite", "fake_tests", "redirect", "smbios"):
        sys.modules.pop(name, None)


def on_console(monkeypatch, action):
    """(what ``action()`` printed on stdout and stderr together, its result)."""
    console = Console()
    monkeypatch.setattr(sys, "stdout", console)
    monkeypatch.setattr(sys, "stderr", console)
    try:
        result = action()
    finally:
        monkeypatch.undo()
    return console.text, result


def printed_summaries(text):
    """[(heading, passed, failed)] of each test's Summary line, and the overall numbers."""
    out, heading, overall = [], None, None
    for line in text.splitlines():
        if HEADING.match(line) and not OVERALL.match(line):
            heading = HEADING.match(line).group(1)
        elif SUMMARY.match(line):
            out.append((heading, int(SUMMARY.match(line).group(1)), int(SUMMARY.match(line).group(2))))
        elif OVERALL.match(line):
            overall = (int(OVERALL.match(line).group(1)), int(OVERALL.match(line).group(2)))
    return out, overall


def test_the_console_is_what_bits_prints_and_every_test_is_recorded(bits, monkeypatch):
    testsuite, results = bits
    registry = (testsuite.tests, testsuite.submenus, testsuite.test, testsuite.summary)
    plain, _ = on_console(monkeypatch, testsuite.run_all_tests)
    recorded, report = on_console(monkeypatch, results.run_tests)
    assert recorded == plain  # the recording changed nothing on the console, tracebacks included
    assert (testsuite.tests, testsuite.submenus, testsuite.test, testsuite.summary) == registry
    assert not isinstance(sys.stdout, type(report))
    summaries, overall = printed_summaries(plain)
    assert [(t.name, t.passed, t.failed) for t in report.tests] == summaries
    assert (report.passed, report.failed) == overall == (5, 3)
    by_name = dict((t.name, t) for t in report.tests)
    assert "EFI only when named" not in by_name  # runall=False: not in "Run all tests"
    fadt = by_name["ACPI FADT"]
    assert (fadt.submenu, fadt.status, fadt.exception) == ("Fake ACPI Tests", "failure", None)
    assert fadt.failures == ["FADT revision >= 5", 'FADT <reset> & "register"']
    assert fadt.output == ["checking the FADT", "[assert] FADT revision >= 5 FAIL", "  revision = 3",
                           "  expected 5 or more", '[assert] FADT <reset> & "register" FAIL']
    raised = by_name["EFI table parse"]
    assert raised.status == "error" and raised.failed == 1 and raised.passed == 1
    assert raised.exception.startswith("Traceback") and raised.exception.rstrip().endswith(
        "ValueError: cannot parse <table> & bail out")
    assert raised.exception.rstrip() in plain  # the very traceback BITS printed
    assert raised.failures == [results.INTERNAL_ERROR]
    assert by_name["Odd output"].submenu is None and by_name["Odd output"].suite == results.SUITE_OF_TOP_MENU
    assert all(0 <= t.seconds < 5 and t.done for t in report.tests)


def test_a_selection_runs_submenus_and_named_tests_in_menu_order(bits, monkeypatch):
    testsuite, results = bits
    text, report = on_console(monkeypatch, lambda: results.run_tests(["Odd output", "Fake EFI Tests"]))
    assert [t.name for t in report.tests] == ["EFI table parse", "Odd output"]
    assert printed_summaries(text)[1] == (report.passed, report.failed) == (2, 1)
    text, report = on_console(monkeypatch, lambda: results.run_tests(["EFI only when named"]))
    assert [(t.name, t.passed, t.failed) for t in report.tests] == [("EFI only when named", 1, 0)]
    assert [e.runall for e in testsuite.tests["Fake EFI Tests"]] == [True, False]  # the registry is BITS's again
    assert results.names()[:2] == [("Fake ACPI Tests", "ACPI table checksums"), ("Fake ACPI Tests", "ACPI FADT")]


def test_an_unknown_name_runs_nothing(bits, monkeypatch):
    testsuite, results = bits
    text, error = on_console(monkeypatch, lambda: pytest.raises(LookupError, results.run_tests,
                                                                ["Fake ACPI Tests", "No Such Menu"]))
    assert text == "" and "'No Such Menu'" in str(error.value)


def test_failures_are_recorded_whatever_the_verbosity(bits, monkeypatch):
    testsuite, results = bits
    monkeypatch.setattr(testsuite, "verbose", testsuite.V_NONE)
    text, report = on_console(monkeypatch, lambda: results.run_tests(["ACPI FADT"]))
    assert "[assert]" not in text
    assert report.tests[0].failures == ["FADT revision >= 5", 'FADT <reset> & "register"']


def test_an_interrupted_run_keeps_what_was_recorded(bits, monkeypatch):
    testsuite, results = bits

    def hangs_and_is_cut():
        testsuite.test("before the time limit", False)
        raise KeyboardInterrupt("time limit")  # what a caller's time limit raises out of a test
    testsuite.add_test("Hangs", hangs_and_is_cut, submenu="Fake ACPI Tests")
    report = results.Report()
    text, error = on_console(monkeypatch, lambda: pytest.raises(KeyboardInterrupt, results.run_tests, None, report))
    assert [t.name for t in report.tests] == ["ACPI table checksums", "ACPI FADT", "Hangs"]
    cut = report.tests[-1]
    assert (cut.done, cut.status, cut.passed, cut.failed) == (False, "error", 0, 1)
    assert "KeyboardInterrupt: time limit" in cut.exception
    assert sys.stdout is not None and testsuite.summary.__module__ == "testsuite"
    checked = junitcheck.check(write(report.junit_xml(), "cut.xml"))[0]
    assert (checked["tests"], checked["failures"], checked["errors"]) == (3, 1, 1)


class TimeLimit(BaseException):
    """What a caller's watchdog raises in a test that ran too long."""


def test_a_test_cut_short_can_let_the_rest_run_on(bits, monkeypatch):
    testsuite, results = bits

    def hangs():
        testsuite.test("a check before the hang", True)
        raise TimeLimit("test ran past 60 s")
    testsuite.add_test("Hangs", hangs, submenu="Fake ACPI Tests")
    text, report = on_console(monkeypatch, lambda: results.run_tests(resume_on=(TimeLimit,)))
    assert [t.name for t in report.tests] == ["ACPI table checksums", "ACPI FADT", "Hangs", "EFI table parse",
                                              "Odd output"]
    cut = report.tests[2]
    assert (cut.status, cut.done, cut.passed, cut.failed) == ("error", False, 1, 0)
    assert cut.exception.rstrip().endswith("TimeLimit: test ran past 60 s")
    assert "results: Hangs cut short (TimeLimit: test ran past 60 s); the remaining tests run on" in text
    overall = [m.groups() for m in map(OVERALL.match, text.splitlines()) if m]
    assert overall == [("3", "2"), ("2", "1")]  # BITS's two runs; neither counts the test cut short
    assert (report.passed, report.failed) == (6, 3)
    assert testsuite.tests["Fake ACPI Tests"][-1].func is hangs  # BITS's registry again
    # the last test cut short: nothing after it to run, the exception is raised
    testsuite.add_test("Hangs at the end", hangs)
    report = results.Report()
    _, error = on_console(monkeypatch, lambda: pytest.raises(TimeLimit, results.run_tests, ["Hangs at the end"],
                                                             report, (TimeLimit,)))
    assert [(t.name, t.status) for t in report.tests] == [("Hangs at the end", "error")]


def write(data, name, directory=[]):
    import tempfile
    if not directory:
        directory.append(tempfile.mkdtemp(prefix="junit-"))
    path = os.path.join(directory[0], name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_junit_xml_is_valid_and_carries_the_numbers(bits, monkeypatch, tmpdir):
    testsuite, results = bits
    text, report = on_console(monkeypatch, results.run_tests)
    ident = [("uuid", "4c4c4544-0042"), ("run", "20261206T011724Z-3f9a")]
    path = str(tmpdir.join("junit.xml"))
    with open(path, "wb") as f:
        f.write(report.junit_xml(hostname="rack3 <slot 7>", properties=ident))
    checked = junitcheck.check(path)[0]
    assert (checked["tests"], checked["failures"], checked["errors"]) == (4, 1, 1)
    assert [s["name"] for s in checked["suites"]] == ["Fake ACPI Tests", "Fake EFI Tests", "BITS"]
    passed = sum(int(s["properties"]["bits.passed"]) for s in checked["suites"])
    failed = sum(int(s["properties"]["bits.failed"]) for s in checked["suites"])
    assert (passed, failed) == printed_summaries(text)[1]  # the console's overall summary
    assert all(s["hostname"] == "rack3 <slot 7>" and s["properties"]["run"] == ident[1][1] for s in checked["suites"])
    cases = dict((c["name"], c) for s in checked["suites"] for c in s["cases"])
    assert cases["ACPI table checksums"]["results"] == []
    failure = cases["ACPI FADT"]["results"]
    assert [(r["kind"], r["type"], r["message"]) for r in failure] == [("Failure", "assert", "2 of 3 asserts failed")]
    assert failure[0]["text"] == '[assert] FADT revision >= 5 FAIL\n[assert] FADT <reset> & "register" FAIL'
    assert cases["ACPI FADT"]["classname"] == "Fake ACPI Tests"
    error = cases["EFI table parse"]["results"]
    assert [(r["kind"], r["type"]) for r in error] == [("Error", "ValueError")]
    assert error[0]["message"] == "ValueError: cannot parse <table> & bail out"
    assert error[0]["text"].startswith("Traceback")
    odd = cases["Odd output"]["system_out"]
    assert u"caf\u00e9 \u20ac \U0001F600 line" in odd
    assert "bell \\x07 escape \\x1b[1m nul? no: form \\x0c feed" in odd


def test_whatever_a_test_prints_the_xml_stays_valid(bits, monkeypatch, tmpdir):
    testsuite, results = bits
    every_control = u"".join(chr(c) if sys.version_info[0] > 2 else unichr(c) for c in range(32))  # noqa: F821
    nasty = [every_control, u"\ud800 lone high", u"lone low \udc00", u"\ufffe\uffff", u"]]> <![CDATA[ &amp;",
             b"\xff\xfe invalid utf-8 \xc3", u"\r\n crlf", u'attr "quotes" \t tab']

    def prints_everything():
        for piece in nasty:
            sys.stdout.write(piece)
            sys.stdout.write("\n")
        testsuite.test(u"desc with \x1b[31m colour and \x00 nul", False)
    # BITS's names are byte strings on 2.7: there an unpaired surrogate arrives UTF-8 encoded
    menu = u"menu \x02 \ud83d" if sys.version_info[0] > 2 else "menu \x02 \xed\xa0\xbd"
    testsuite.add_test(u"name \x01 with <markup> & \"quotes\"", prints_everything, submenu=menu)
    _, report = on_console(monkeypatch, lambda: results.run_tests([menu]))
    path = str(tmpdir.join("nasty.xml"))
    with open(path, "wb") as f:
        f.write(report.junit_xml(hostname=u"host\x03", properties=[(u"k\x04", u"v\n\"<&>")]))
    checked = junitcheck.check(path)[0]
    suite = checked["suites"][0]
    assert suite["name"] == u"menu \\x02 \\ud83d" and suite["hostname"] == u"host\\x03"
    assert suite["properties"][u"k\\x04"] == u"v\n\"<&>"  # attribute newlines survive as &#10;
    case = suite["cases"][0]
    assert case["name"] == u'name \\x01 with <markup> & "quotes"'
    out = case["system_out"]
    assert u"\\x00\\x01\\x02" in out and u"\\x1f" in out and u"\t\n" in out.replace(u"\\x08", u"")
    assert u"\\ud800 lone high" in out and u"lone low \\udc00" in out and u"\\ufffe\\uffff" in out
    assert u"]]> <![CDATA[ &amp;" in out and u"\ufffd\ufffd invalid utf-8 \ufffd" in out
    assert u"\r\n crlf" in out and u'attr "quotes" \t tab' in out
    assert case["results"][0]["text"] == u"[assert] desc with \\x1b[31m colour and \\x00 nul FAIL"


def test_log_text_is_the_log_bits_keeps(bits, monkeypatch):
    testsuite, results = bits
    import redirect
    console = Console()
    monkeypatch.setattr(sys, "stdout", console)
    monkeypatch.setattr(sys, "stderr", console)
    redirect.redirect()
    results.run_tests(["Fake ACPI Tests"])
    monkeypatch.undo()
    log = results.log_text()
    assert isinstance(log, bytes) and log.startswith(b"BIOS Implementation Test Suite (BITS)\n")
    assert log.endswith(console.text.encode("utf-8"))
    assert b"==== Overall summary: 3 passed, 2 failed ====" in log
