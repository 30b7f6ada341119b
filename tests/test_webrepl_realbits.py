"""The web REPL in real BITS (docs/testing.md section 3.9): BITS 2079 on OVMF under QEMU, through tools/bitsrun.py.

Two boots (marker ``realbits``: tools/check runs them in their own step; skipped where QEMU,
OVMF, user namespaces or the BITS image are missing):

* tests/scripts/real_bits_webrepl_probe.py: the deepest input of each kind that the REPL's
  input bounds accept compiles on BITS's real 128 KiB C stack, the largest accepted input of
  each line-number-table and basic-block shape does not trip BITS's peephole abort, the request
  head parser only ever refuses garbage, and a runaway recursion ends in an exception;
* ``python -m bitsnet.webrepl`` on guest port 8000 (hostfwd), attacked from the host the way
  the outside review did: malformed request targets, a body before the token, idle connections
  holding the slots, a line that would overflow the compiler; a legitimate client is served
  meanwhile, and stops it with ``exit()``.
"""

from __future__ import print_function

import os
import socket
import sys
import time

import pytest

import test_webrepl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bitsrun  # noqa: E402

PROBE = os.path.join(ROOT, "tests", "scripts", "real_bits_webrepl_probe.py")
PORT = 8000
TOKEN = "5eb7c0ffee" * 3 + "ab"  # 32 hex digits, given with --token: the host knows it
BOOT_TIMEOUT = 300
TCG_ANSWER = 5.0  # s a refusal may take under TCG on a shared host (native: milliseconds)
IDLE = 40  # idle connections held open: more than the slots and the backlog together
REASON = bitsrun.unavailable(install=os.environ.get("FWTEST_INSTALL") == "1")


def real(test):
    """Marker ``realbits`` plus the skip with its reason."""
    return pytest.mark.realbits(pytest.mark.skipif(REASON is not None, reason=REASON or "")(test))


def _send(data, timeout=30):
    return test_webrepl.exchange(("127.0.0.1", PORT), data, timeout)


def _attack(line):
    """The host side, run when the REPL prints its URL (inside the run's network namespace)."""
    if not line.startswith("webrepl: open "):
        return None
    found = {}
    host = b"Host: 127.0.0.1:%d\r\n" % PORT
    slowest = 0.0
    for _ in range(10):
        answer, took = _send(b"GET http://[x/ HTTP/1.1\r\n" + host + b"\r\n")
        assert answer.startswith(b"HTTP/1.0 400"), answer
        slowest = max(slowest, took)
    found["malformed"] = slowest
    answer, took = _send(b"POST /push HTTP/1.1\r\n" + host + b"Content-Length: 1048576\r\n\r\n")
    found["body_first"] = (answer[:12], took)
    idle = [socket.create_connection(("127.0.0.1", PORT), timeout=30) for _ in range(IDLE)]
    try:
        run = test_webrepl.WebReplRun.__new__(test_webrepl.WebReplRun)
        run.base, run.token = "http://127.0.0.1:%d" % PORT, TOKEN
        started = time.time()
        client = test_webrepl.Client(run)
        found["legit_under_idle"] = (client.execute("6*7"), time.time() - started)
    finally:
        for sock in idle:
            sock.close()
    found["deep"] = client.execute("1+" * 30000 + "1")[-300:]
    status, _, text = run.request("GET", "/poll?since=abc", session=client.session)
    found["since"] = status
    found["after"] = client.execute("1+1")
    client.execute("exit()")
    return found


@pytest.fixture(scope="module")
def probe_run():
    result = bitsrun.run(script=PROBE, timeout=BOOT_TIMEOUT)
    print("\n".join(result.output))
    return result


@pytest.fixture(scope="module")
def attacked_run():
    result = bitsrun.run(module="bitsnet.webrepl", args=["--port", str(PORT), "--token", TOKEN],
                         hostfwd=[PORT], on_line=_attack, timeout=BOOT_TIMEOUT)
    print("\n".join(result.output))
    return result


@real
def test_input_bounds_hold_on_the_real_stack(probe_run):
    text = probe_run.text
    assert probe_run.status == 0 and "probe done" in text, text
    assert "IN_BITS True" in text
    assert text.count("compiled deepest ") == 12 and text.count("compiled the largest accepted ") == 10, text
    assert "maximum recursion depth exceeded" in text


@real
def test_the_findings_fail_in_real_bits(attacked_run):
    text = attacked_run.text
    assert attacked_run.status == 0, text
    hooks = [value for _, value in attacked_run.hooks if value]
    assert len(hooks) == 1, (attacked_run.hooks, text)
    found = hooks[0]
    print("real BITS: %r" % (found,))
    assert found["malformed"] < TCG_ANSWER
    assert found["body_first"][0].startswith(b"HTTP/1.0 403") and found["body_first"][1] < TCG_ANSWER
    result, took = found["legit_under_idle"]
    assert result.endswith("42\n") and took < 3 * TCG_ANSWER, found
    assert "InputRefused" in found["deep"] and found["since"] == 400 and found["after"].endswith("2\n")
    assert "Traceback" not in text and text.count("webrepl: refused") <= 2 * 5, text
