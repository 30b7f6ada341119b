"""A tool run as a subprocess of a test, bounded in time: ``communicate`` for any command,
``run_efirun`` for tools/efirun.py (the simulated machine in its own process), and ``ledger``
for the firmware ledger that ``efirun.py --ledger`` prints at exit.

Python 2.7's ``Popen.communicate`` has no timeout: a timer kills the process instead, and the
test then sees its negative exit status.
"""

from __future__ import print_function

import os
import re
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")


def communicate(process, timeout):
    """``process.communicate()``, the process killed after ``timeout`` seconds: (out, err)."""
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        return process.communicate()
    finally:
        timer.cancel()


def run(command, timeout, **options):
    """(exit status, stdout bytes, stderr bytes) of ``command``; ``options`` go to Popen."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)
    out, err = communicate(process, timeout)
    return process.returncode, out, err


def run_efirun(args, timeout, **options):
    """(exit status, stdout bytes, stderr text) of ``python tools/efirun.py ARGS``."""
    status, out, err = run([sys.executable, EFIRUN] + list(args), timeout, **options)
    return status, out, err.decode("utf-8", "replace")


def ledger(stderr):
    """The ``efirun ledger:`` line of ``stderr`` as a dict of ints (exactly one such line)."""
    lines = [line for line in stderr.splitlines() if line.startswith("efirun ledger: ")]
    assert len(lines) == 1, stderr
    return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", lines[0]))
