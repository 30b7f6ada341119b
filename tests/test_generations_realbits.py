"""The RNG rule in real BITS (docs/edk2.md section 10.1): one boot of BITS 2079 on Debian's OVMF
2025.02 without an RNG device, where EDK2 starts no network driver above the NIC's own.  The
selftest's first failing check must be "firmware", naming the missing random number generator and
the cure, and a program's socket and name lookups must get the same words in their errors.

Marker ``realbits``; skips, with the reason, where tools/bitsrun.py cannot run or OVMF 2025.02
cannot be had (tools/ovmf.py fetches it from Debian's archive on first use).  One boot, no lab:
about 15 s under TCG."""

from __future__ import print_function

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bitsrun  # noqa: E402

GENERATION = "2025.02"
BOOT_TIMEOUT = 300
RNG_WORDS = ("random number generator", "EFI_RNG_PROTOCOL", "CVE-2023-45236/45237", "firmware setup",
             "-device virtio-rng-pci")
CHECK = re.compile(r"^ ?\d+ (.*?) \.+ (PASS|FAIL|SKIP) [\d.]+ s$")
# After the selftest, what a program sees: the errno and text of a connect and of a lookup.
PROGRAM = """
import errno, socket
import bitsnet.selftest
print("selftest exit %d" % bitsnet.selftest.main(["--timeout", "5"]))
s = socket.socket()
try:
    s.connect(("10.0.2.2", 80))
except socket.error as e:
    print("connect errno %s: %s" % (errno.errorcode.get(e.errno), e))
s.close()
try:
    socket.getaddrinfo("lab.bitsnet.test", 80)
except socket.gaierror as e:
    print("getaddrinfo: %s" % (e,))
"""


def _why_not():
    reason = bitsrun.unavailable(install=os.environ.get("FWTEST_INSTALL") == "1")
    if reason:
        return reason
    try:
        import ovmf
        ovmf.resolve(GENERATION)
    except Exception as e:  # ImportError (no catalogue), FirmwareError (no archive reachable)
        return "no OVMF %s: %s" % (GENERATION, e)
    return None


@pytest.fixture(scope="module")
def rngless_run():
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    result = bitsrun.run(code=PROGRAM, timeout=BOOT_TIMEOUT, ovmf=GENERATION, rng=False)
    print("\n".join(result.output))
    assert result.status == 0 and not result.timed_out, result.text
    return result.output


def squash(text):
    return "".join(text.split())


def names_the_rng(text):
    return all(squash(word) in squash(text) for word in RNG_WORDS)


def _detail(lines, index):
    detail = []
    for line in lines[index + 1:]:
        if not line.startswith("     "):
            break
        detail.append(line.strip())
    return " ".join(detail)


@pytest.mark.realbits
def test_selftest_fails_first_on_the_missing_rng(rngless_run):
    lines = rngless_run
    results = [(i, CHECK.match(line)) for i, line in enumerate(lines) if CHECK.match(line)]
    failed = [(i, match.group(1)) for i, match in results if match.group(2) == "FAIL"]
    assert results and results[0][1].group(1) == "firmware", lines
    assert failed and failed[0][1] == "firmware", lines
    detail = _detail(lines, failed[0][0])
    assert names_the_rng(detail), detail
    assert "RNG: none" in detail and "Hash2 yes" in detail, detail
    assert "selftest exit 1" in lines, lines


@pytest.mark.realbits
def test_socket_errors_name_the_rng(rngless_run):
    lines = rngless_run
    connect = [line for line in lines if line.startswith("connect errno ")]
    assert connect and connect[0].startswith("connect errno ENETDOWN: "), lines
    assert names_the_rng(connect[0]), connect
    lookup = [line for line in lines if line.startswith("getaddrinfo: ")]
    assert lookup and names_the_rng(lookup[0]), lines
