"""bitsnet.watchdog: a time limit raised into running Python through an EFI timer event, with no
threads -- a busy loop, BITS's busy-waiting ``time.sleep`` and a socket ``accept`` nobody
answers each end within a tick or two of the limit, in every event mode of the simulator and in
real BITS (stock 2079 image with bitsnet: the ``efi-hook`` mode); nothing is left behind in the
firmware (efirun's ledger)."""

from __future__ import print_function

import os
import subprocess
import sys

import pytest

import conftest

sys.path.insert(0, os.path.join(conftest.ROOT, "tools"))
import bitsrun  # noqa: E402

EFIRUN = os.path.join(conftest.ROOT, "tools", "efirun.py")
CASES = """\
import socket, sys, time
from bitsnet import clock, events, ipconfig, watchdog
print("@@mode %s" % events.mode())
ipconfig.ensure_configured(60)  # the address first: its progress line is not the cases' business
def spin():
    while True:
        pass
def accept():
    server = socket.socket()
    server.bind(("", 0))
    server.listen(1)
    try:
        server.accept()
    finally:
        server.close()
def swallow():  # catches Exception: TimeLimit is a BaseException and gets through
    while True:
        try:
            time.sleep(0.01)
        except Exception:
            pass
def retry():  # a retry loop that catches everything, TimeLimit too, and pauses in its except
    while True:
        try:
            for _ in range(1000):
                pass
            raise IOError("the lab is down")
        except:  # noqa: E722
            time.sleep(0.05)  # a TimeLimit raised here leaves the handler, and the loop
for name, body in (("spin", spin), ("sleep", lambda: time.sleep(30)), ("accept", accept), ("swallow", swallow),
                   ("retry", retry)):
    started = clock.monotonic()
    try:
        with watchdog.limit(1.0, name) as guard:
            body()
        print("@@case %s not interrupted" % name)
    except watchdog.TimeLimit as exc:
        print("@@case %s %s %.2f %s" % (name, guard.mode, clock.monotonic() - started, exc))
with watchdog.limit(1.0, "quick") as guard:
    pass
time.sleep(1.5)  # a tick still queued after the block must do nothing
print("@@case quick %s done" % guard.mode)
"""


def _cases(lines):
    out = {}
    for line in lines:
        if line.startswith("@@case "):
            words = line.split()
            out[words[1]] = words[2:]
    return out


def _check(cases, text):
    for name in ("spin", "sleep", "accept", "swallow", "retry"):
        assert name in cases and cases[name][0] == "efi-timer", text
        assert 1.0 <= float(cases[name][1]) < 3.0, text  # the limit plus a tick or so
        assert " ".join(cases[name][2:]) == "%s ran past its time limit of 1 s" % name, text
    assert cases["quick"] == ["efi-timer", "done"], text


@pytest.mark.parametrize("mode", ["trampoline", "efi-hook", "check-event"])
def test_limits_interrupt_running_code_in_every_event_mode(mode):
    command = [sys.executable, EFIRUN, "--ledger"] + conftest.STATION_ARGS + ["-c", CASES]
    env = dict(os.environ, BITSNET_EVENT_MODE=mode)
    out = subprocess.check_output(command, stderr=subprocess.STDOUT, cwd=conftest.ROOT, env=env,
                                  universal_newlines=True)
    assert "@@mode %s" % mode in out, out
    _check(_cases(out.splitlines()), out)
    ledger = [line for line in out.splitlines() if line.startswith("efirun ledger:")][-1]
    assert not [item for item in ledger.split()[2:] if not item.endswith("=0")], ledger


REAL_BITS_MISSING = bitsrun.unavailable()


@pytest.mark.realbits
@pytest.mark.skipif(REAL_BITS_MISSING is not None, reason=str(REAL_BITS_MISSING))
def test_limits_interrupt_running_code_in_real_bits():
    result = bitsrun.run(code=CASES, timeout=300)
    assert result.status == 0, "\n".join(result.console[-40:])
    assert "@@mode efi-hook" in result.output, result.text
    _check(_cases(result.output), result.text)
