"""tests/scripts/raw_http_get.py -- raw EFI TCP4 through ctypes, written only from the spec --
run under tools/efirun.py against a real HTTP server on loopback, on both firmware profiles,
with the firmware's leak ledger checked at exit."""

from __future__ import print_function

import os
import re

import pytest

import processes
from peers import HttpPeer, closed_port, pattern
from processes import ledger

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "scripts")
RUN_TIMEOUT = 90.0  # seconds for one efirun process; the script's own waits are shorter
BODY = b"hello from the host\n"
BIG = pattern(300 * 1024, seed=3)  # several 64 KiB Receives


def run_efirun(args, timeout=RUN_TIMEOUT):
    """(exit status, stdout bytes, stderr text) of ``python tools/efirun.py ARGS``; killed on timeout."""
    return processes.run_efirun(args, timeout, cwd=ROOT)


@pytest.fixture
def http(tmpdir):
    with HttpPeer(tmpdir, {"hello.txt": BODY, "big.bin": BIG}) as peer:
        yield peer


@pytest.mark.parametrize("profile", ["edk2", "edk2-2015"])
def test_raw_http_get_prints_the_body_and_leaks_nothing(http, profile):
    status, out, err = run_efirun(["--firmware", profile, "--ledger",
                                   os.path.join(SCRIPTS, "raw_http_get.py"), str(http.port), "hello.txt"])
    assert status == 0, err
    assert out == BODY
    assert "DHCP" in err  # the script had to bring the address up itself
    counts = ledger(err)
    assert counts.pop("tcp4_children") == 0 and counts.pop("events") == 0 and counts.pop("pool") == 0
    assert all(v == 0 for v in counts.values()), counts


def test_raw_http_get_large_body(http):
    status, out, err = run_efirun(["--ledger", os.path.join(SCRIPTS, "raw_http_get.py"), str(http.port), "big.bin"])
    assert status == 0, err
    assert out == BIG
    assert all(v == 0 for v in ledger(err).values()), err


def test_raw_http_get_on_a_static_machine_needs_no_dhcp(http):
    status, out, err = run_efirun(["--static", "--address", "127.0.0.7/8", "--ledger",
                                   os.path.join(SCRIPTS, "raw_http_get.py"), str(http.port), "hello.txt"])
    assert status == 0, err
    assert out == BODY
    assert "DHCP" not in err and "address 127.0.0.7/255.0.0.0" in err


def test_raw_http_get_404_fails_cleanly(http):
    status, out, err = run_efirun(["--ledger", os.path.join(SCRIPTS, "raw_http_get.py"), str(http.port), "nope"])
    assert status == 1
    assert "404" in err
    assert all(v == 0 for v in ledger(err).values()), err


def test_raw_http_get_refused_connection_tears_down():
    status, out, err = run_efirun(["--ledger", os.path.join(SCRIPTS, "raw_http_get.py"), str(closed_port())])
    assert status == 1
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3): a RST answering our SYN completes Connect with
    # EFI_CONNECTION_RESET, not EFI_CONNECTION_REFUSED.
    assert "EFI_CONNECTION_RESET" in err
    assert all(v == 0 for v in ledger(err).values()), err


def test_raw_leaky_shows_in_the_ledger(http):
    status, out, err = run_efirun(["--ledger", os.path.join(SCRIPTS, "raw_leaky.py"), str(http.port), "hello.txt"])
    assert status == 0, err
    assert out == BODY
    counts = ledger(err)
    assert counts["tcp4_children"] == 1
    assert counts["events"] >= 3  # connect, transmit and receive events were never closed


def test_raw_scripts_use_only_efi():
    # Written from the spec and docs/bits-efi.md alone: no bitsnet, no simulator.
    for name in ("raw_http_get.py", "raw_leaky.py"):
        with open(os.path.join(SCRIPTS, name)) as f:
            source = f.read()
        imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", source, re.M)
        assert not [m for m in imports if m.split(".")[0] in ("bitsnet", "efisim", "_efi")], imports
