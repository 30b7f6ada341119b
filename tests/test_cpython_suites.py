"""CPython's own socket-level test suites over bitsnet on the simulated machine (docs/testing.md section 3.8).

One test per suite: tests/cpython/run_suites.py runs the suite of the interpreter running pytest
(2.7 or 3.11, pyenv's Lib/test) in tools/efirun.py, and this test fails on any failure not in
tests/cpython/expected-failures-{py27,py3}.txt, on any hang, and on a listed test that now
passes. The suites take minutes, so they run only when BITSNET_CPYTHON_SUITES=1 (tools/check's
cpython-py3 and cpython-py27 steps); the CI selection (``--ci``) keeps each Python under about
4 minutes.
"""

from __future__ import print_function

import os
import subprocess
import sys

import pytest

import conftest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "cpython", "run_suites.py")
sys.path.insert(0, os.path.join(HERE, "cpython"))
try:
    import run_suites
finally:
    sys.path.pop(0)

suites_wanted = pytest.mark.skipif(os.environ.get("BITSNET_CPYTHON_SUITES") != "1",
                                   reason="CPython's suites run only with BITSNET_CPYTHON_SUITES=1 (tools/check)")


def test_expected_failure_lists_give_a_reason_for_every_entry():
    for name in ("expected-failures-py27.txt", "expected-failures-py3.txt"):
        entries = run_suites.read_expected(os.path.join(HERE, "cpython", name))  # raises without a reason
        assert entries, name


@suites_wanted
@pytest.mark.parametrize("suite", run_suites.SUITES)
def test_cpython_suite(suite):
    command = [sys.executable, RUNNER, "--ci", "--suite", suite, "--station", conftest.STATION]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    output = proc.communicate()[0]
    print(output)
    assert proc.returncode == 0, output
