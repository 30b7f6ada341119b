#!/usr/bin/env python
"""CPython's own socket-level test suites, run over bitsnet on the simulated machine.

    python tests/cpython/run_suites.py [--ci] [--suite NAME ...] [--station A.B.C.D] [--timeout S]

Runs with the interpreter that runs this script (2.7 or 3): the suites are that interpreter's own
``Lib/test`` (pyenv's 2.7.18 and 3.11.7 have them; 2.7 has no test_selectors -- no selectors
module). Each suite runs in tools/efirun.py (tests/cpython/suite_child.py says how), one child at
a time; a child killed by its per-test timeout (or the suite's wall-clock limit) is followed by
another that starts after the test it was running. Outcomes are compared with
tests/cpython/expected-failures-py27.txt or -py3.txt:

- a test that fails or errors and is not listed: UNEXPECTED (exit status 1);
- a listed test that passes: NOW PASSES, remove it from the list (exit status 1);
- a test that hangs (per-test timeout): always UNEXPECTED, listed or not. A listed test whose
  reason starts with "not run:" is not run at all (one that can only wait for ever here, e.g.
  for a signal to end a blocking call: BITS has no signals).

The list's format: one test id (``test_socket.Class.test_name``, or a whole class
``test_socket.Class``) per line, then ``#`` and the reason, which is mandatory; ``## ...`` lines
start a section; the last section, "bitsnet bugs, open", holds bugs, not limitations.

``--ci`` runs the CI selection, which must keep each Python under about 4 minutes: the classes in
CI_SKIP_CLASSES are left out. It is empty: every suite fits (measured: 3.11 about 2.5 minutes,
2.7 about 1 minute, on 2 shared cores).
"""

from __future__ import print_function

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
CHILD = os.path.join(HERE, "suite_child.py")
PY2 = sys.version_info[0] == 2
EXPECTED = os.path.join(HERE, "expected-failures-%s.txt" % ("py27" if PY2 else "py3"))
OPEN_BUGS = "bitsnet bugs, open"

SUITES_PY27 = ["test_socket", "test_select", "test_socketserver", "test_httpservers", "test_urllib2_localnet",
               "test_httplib", "test_asyncore", "test_asynchat", "test_wsgiref"]
SUITES_PY3 = SUITES_PY27[:2] + ["test_selectors"] + SUITES_PY27[2:]
SUITES = SUITES_PY27 if PY2 else SUITES_PY3

# Left out of the CI selection (--ci) for time only; a full run (no --ci) runs them.
CI_SKIP_CLASSES = []  # type: list

SUITE_LIMIT = 600.0  # seconds: a whole suite (all its children) is cut off after this
STALL_GRACE = 10.0  # seconds beyond the per-test timeout without a result line: the child is killed


def read_expected(path):
    """{test id: (section, reason)}; a line without a reason is an error."""
    entries = {}
    section = ""
    if not os.path.exists(path):
        return entries
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if line.startswith("##"):
                section = line.lstrip("#").strip()
                continue
            if not line or line.startswith("#"):
                continue
            test_id, _, reason = line.partition("#")
            if not reason.strip():
                raise ValueError("%s:%d: no reason given for %s" % (path, number, test_id.strip()))
            entries[test_id.strip()] = (section, reason.strip())
    return entries


def not_run(entry):
    """Entries whose reason starts with "not run:" are not run at all: tests that can only wait
    for ever here (e.g. for a signal to end a blocking call; BITS has no signals)."""
    return entry[1].startswith("not run:")


def run_suite(suite, station, timeout, skip):
    """Run one suite to the end; returns ({id: (outcome, detail)}, seconds)."""
    started = time.time()
    outcomes = {}  # type: dict
    handle, results = tempfile.mkstemp(prefix="cpython-%s-" % suite, suffix=".jsonl")
    os.close(handle)
    env = dict(os.environ, BITSNET_EVENT_MODE="check-event", BITSNET_CPYTHON_STATION=station,
               BITSNET_CPYTHON_TEST_TIMEOUT=str(timeout), PYTHONDONTWRITEBYTECODE="1")
    env.pop("BITSNET_SIM_PYTHON", None)
    try:
        while True:
            done = set(outcomes) | set(skip)
            command = [sys.executable, EFIRUN, "--host-stdlib", "--no-install", "--address", station + "/8",
                       CHILD, suite, results] + sorted(done)
            open(results, "w").close()
            with open(os.devnull, "w") as devnull:
                proc = subprocess.Popen(command, cwd=tempfile.gettempdir(), env=env, stdout=devnull,
                                        stderr=devnull)
                limit = started + SUITE_LIMIT
                size, progress = -1, time.time()
                while proc.poll() is None and time.time() < limit:
                    time.sleep(0.1)
                    if os.path.getsize(results) != size:
                        size, progress = os.path.getsize(results), time.time()
                    elif time.time() - progress > timeout + STALL_GRACE:
                        break  # the per-test alarm did not stop it (a thread holds the test up)
                killed = proc.poll() is None
                if killed:
                    proc.kill()
                proc.wait()
            running = None
            with open(results) as f:
                for line in f:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if "start" in record:
                        running = record["start"]
                    else:
                        outcomes[record["id"]] = (record["outcome"], record["detail"])
                        running = None
            if running is not None:  # the child died (or was killed) inside this test
                outcomes[running] = ("timeout", "the child was killed or died during this test (rc %s)"
                                     % proc.returncode)
            if (killed and time.time() >= started + SUITE_LIMIT) or running is None:
                break
    finally:
        os.remove(results)
    return outcomes, time.time() - started


def compare(suite, outcomes, expected):
    """Lines of UNEXPECTED / NOW PASSES findings for one suite. A class entry covers its tests;
    it "now passes" only when none of them failed."""
    problems = []
    class_failed = {}  # type: dict   # class entry -> whether one of its tests failed
    for test_id, (outcome, detail) in sorted(outcomes.items()):
        owner = test_id.rpartition(".")[0]
        entry = expected.get(test_id)
        if entry is None and owner in expected:
            entry = expected[owner]
            class_failed[owner] = class_failed.get(owner, False) or outcome in ("failed", "error", "timeout")
            if outcome == "passed":
                continue
        if outcome in ("failed", "error", "timeout"):
            if entry is None or outcome == "timeout":
                last = [line for line in detail.strip().splitlines() if line.strip()][-1:] or [""]
                problems.append("UNEXPECTED %s %s: %s" % (outcome, test_id, last[0].strip()[:200]))
        elif outcome == "passed" and entry is not None:
            problems.append("NOW PASSES %s (listed: %s): remove it from %s" % (
                test_id, entry[1], os.path.basename(EXPECTED)))
    for owner, failed in sorted(class_failed.items()):
        if not failed and not not_run(expected[owner]):
            problems.append("NOW PASSES %s, the whole class (listed: %s): remove it from %s" % (
                owner, expected[owner][1], os.path.basename(EXPECTED)))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", help="suite name (repeatable; default: all)")
    parser.add_argument("--ci", action="store_true", help="the CI selection (see CI_SKIP_CLASSES)")
    parser.add_argument("--station", default="127.0.0.2", help="the simulated machine's address")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per test (default %(default)s)")
    parser.add_argument("--json", help="write every outcome to this file")
    opts = parser.parse_args(argv)
    expected = read_expected(EXPECTED)
    suites = opts.suite or SUITES
    skip = [t for t, entry in expected.items() if not_run(entry)]
    everything, problems = {}, []
    for suite in suites:
        own_skip = [t for t in skip if t.startswith(suite + ".")]
        if opts.ci:
            own_skip += ["%s.%s" % (suite, c) for c in CI_SKIP_CLASSES if c.startswith(suite + ".")]
        outcomes, seconds = run_suite(suite, opts.station, opts.timeout, own_skip)
        if opts.ci:
            outcomes = dict((t, o) for t, o in outcomes.items()
                            if not [c for c in CI_SKIP_CLASSES if t.startswith(c + ".")])
        counts = {}  # type: dict
        for outcome, _ in outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        found = compare(suite, outcomes, expected)
        problems += found
        everything.update(outcomes)
        print("%-22s %4d tests in %5.1f s: %s%s" % (
            suite, len(outcomes), seconds, ", ".join("%d %s" % (n, o) for o, n in sorted(counts.items())),
            ", %d UNEXPECTED" % len(found) if found else ""))
        for line in found:
            print("    " + line)
        sys.stdout.flush()
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(dict((t, {"outcome": o, "detail": d}) for t, (o, d) in everything.items()), f, indent=1,
                      sort_keys=True)
    print("%s: %d tests, %d problems" % ("FAIL" if problems else "OK", len(everything), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
