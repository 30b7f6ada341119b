"""``python -m bitsnet.selftest`` end to end, the README's main job: run by tools/efirun.py on the
simulated machine against tools/lab.py's real peers on loopback (``--lab``); and with a failure
injected (no DHCP answer, the peer down) it must say what is wrong and exit non-zero."""

from __future__ import print_function

import os
import re
import socket
import threading

import pytest

import processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_TIMEOUT = 180.0  # the whole selftest takes a few seconds; this only stops a hang
STEP_TIMEOUT = "5"  # selftest --timeout for the failure runs: each waits for it once
NO_DHCP_TIMEOUT = "1"  # the DHCP step waits its whole timeout for an answer that never comes
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(, (\d+) skipped)?$")
# The checks that need the lab; each line reads " N <title> ..... PASS 0.12 s".
TRAFFIC_CHECKS = ("TCP connect to lab", "TCP echo", "HTTP download", "listening socket reached from lab")


def selftest(*args):
    """(exit status, stdout lines, stderr) of ``python tools/efirun.py ARGS`` (ARGS hold -m ...)."""
    status, out, err = processes.run_efirun(args, RUN_TIMEOUT)
    return status, out.decode("utf-8", "replace").splitlines(), err


def squash(text):
    """``text`` without whitespace: the report wraps long lines at column 79, inside words too."""
    return "".join(text.split()).lower()


def result_of(lines, title):
    """PASS/FAIL/SKIP of the check called ``title``, and the detail lines below it (joined)."""
    for i, line in enumerate(lines):
        match = re.match(r"^ ?\d+ (.*?) \.+ (PASS|FAIL|SKIP) [\d.]+ s$", line)
        if match and match.group(1).startswith(title):
            detail = []
            for following in lines[i + 1:]:
                if not following.startswith("     "):
                    break
                detail.append(following.strip())
            return match.group(2), " ".join(detail)
    raise AssertionError("no check %r in the report:\n%s" % (title, "\n".join(lines)))


def closed_port():
    """A loopback port with nothing listening (bound once, then released)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
    finally:
        probe.close()


def test_main_job_passes_against_the_lab():
    status, lines, err = selftest("--lab", "-m", "bitsnet.selftest")
    report = "\n".join(lines) + "\n" + err
    assert "efirun: lab on 127.0.0.1: http " in err, report
    assert lines and SUMMARY.match(lines[-1]), report
    passed, failed = int(SUMMARY.match(lines[-1]).group(1)), int(SUMMARY.match(lines[-1]).group(2))
    assert (status, failed) == (0, 0), report
    assert passed == len([line for line in lines if re.search(r" PASS [\d.]+ s$", line)])
    # --lab exports BITSNET_LAB: the selftest must use it as its peer and move real traffic.
    assert not [line for line in lines if line.startswith("no --peer")], \
        "selftest ignored BITSNET_LAB (its default --peer):\n" + report
    for title in TRAFFIC_CHECKS:
        assert result_of(lines, title)[0] == "PASS", (title, report)
    assert squash(result_of(lines, "gateway and DNS servers")[1]).endswith("dnsservers127.0.0.1"), report  # lab's
    # The lab's own DNS, asked directly (its port is in lab.json): a name it has, and one it has not.
    result, detail = result_of(lines, "DNS query to the lab's server")
    assert result == "PASS" and squash("lab.bitsnet.test -> 127.0.0.1") in squash(detail), report
    assert squash("no such name (NXDOMAIN); answered by the lab's DNS at 127.0.0.1") in squash(detail), report
    # The lab is on this machine's loopback (reached at 127.0.0.1): its IPv6 echo is at ::1.
    result, detail = result_of(lines, "TCP echo over IPv6")
    assert result == "PASS" and squash("[::1]:") in squash(detail) and "loopback" in detail, report
    assert result_of(lines, "socket layer released everything")[0] == "PASS", report


def test_no_dhcp_answer_is_explained():
    status, lines, err = selftest("--lab", "--no-dhcp", "-m", "bitsnet.selftest", "--timeout", NO_DHCP_TIMEOUT)
    report = "\n".join(lines) + "\n" + err
    assert status != 0, report
    result, detail = result_of(lines, "IPv4 address")
    assert result == "FAIL" and "dhcp" in squash(detail) and "noanswer" in squash(detail), report
    match = SUMMARY.match(lines[-1])
    assert match and int(match.group(2)) >= 1, report
    assert "Traceback" not in report


def test_peer_down_is_explained():
    port = closed_port()
    status, lines, err = selftest("--lab", "-m", "bitsnet.selftest", "--peer", "127.0.0.1:%d" % port,
                                  "--timeout", STEP_TIMEOUT)
    report = "\n".join(lines) + "\n" + err
    assert status != 0, report
    result, detail = result_of(lines, "TCP connect to lab 127.0.0.1:%d" % port)
    assert result == "FAIL" and "refused" in squash(detail), report
    for title in TRAFFIC_CHECKS[1:]:  # nothing to talk to: not attempted
        assert not [line for line in lines if re.match(r"^ ?\d+ %s " % re.escape(title), line)], report
    assert result_of(lines, "socket layer released everything")[0] == "PASS", report
    match = SUMMARY.match(lines[-1])
    assert match and int(match.group(2)) == 1, report
    assert "Traceback" not in report


def test_through_the_grub_python_command():
    # What "python -m bitsnet.selftest" at the GRUB prompt runs (bitsnet.launch, no runpy).
    code = ("import sys; from bitsnet import launch; "
            "sys.exit(0 if launch.python_command(['python', '-m', 'bitsnet.selftest']) else 1)")
    status, lines, err = selftest("--lab", "-c", code)
    report = "\n".join(lines) + "\n" + err
    match = SUMMARY.match(lines[-1]) if lines else None
    assert match and int(match.group(2)) == 0 and status == 0, report
    assert result_of(lines, "TCP echo")[0] == "PASS", report


def test_lab_json_is_read_without_the_json_module():
    import json
    from bitsnet.selftest import parse_json  # conftest puts the simulator's efi on sys.path
    document = {"tcp_echo": 40001, "udp_echo": 40002, "address": "127.0.0.1", "address6": None,
                "names": ["lab.test", "b"], "ok": True, "rate": 1.5, "text": u"a\"b\\c\n\u00e9",
                "nested": {"x": [[], {}, [1, -2]]}}
    text = json.dumps(document)
    assert parse_json(text) == json.loads(text)
    for bad in ("[1", "{]", "[1] x", "", "nope"):
        try:
            parse_json(bad)
        except ValueError:
            continue
        raise AssertionError("accepted %r" % bad)


def test_listening_check_through_a_port_forward():
    # What H3's QEMU runner needs: the lab cannot reach the guest, so the listening socket takes a
    # fixed port and the lab connects to a forward of it (here: a one-connection TCP relay on
    # 127.0.0.1 to the simulated machine's station address, playing QEMU's hostfwd).
    import conftest
    listen_port = conftest.port(7)
    relay = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    relay.bind(("127.0.0.1", 0))
    relay.listen(1)
    relay_port = relay.getsockname()[1]
    relayed = []

    def forward():
        conn, _ = relay.accept()
        upstream = socket.create_connection((conftest.STATION, listen_port), 10)
        try:
            while True:  # the lab sends the token and closes; the selftest only reads
                data = conn.recv(4096)
                if not data:
                    break
                relayed.append(data)
                upstream.sendall(data)
        finally:
            upstream.close()
            conn.close()
    thread = threading.Thread(target=forward)
    thread.daemon = True
    thread.start()
    try:
        status, lines, err = selftest("--lab", *(conftest.STATION_ARGS + [
            "-m", "bitsnet.selftest", "--listen-port", str(listen_port),
            "--listen-via", "127.0.0.1:%d" % relay_port]))
    finally:
        relay.close()
    report = "\n".join(lines) + "\n" + err
    result, detail = result_of(lines, "listening socket reached from lab")
    assert result == "PASS" and ("port %d reached" % listen_port) in detail, report
    assert squash("(the lab connected to 127.0.0.1:%d)" % relay_port) in squash(detail), report
    assert b"".join(relayed) == ("bitsnet-%d" % listen_port).encode("ascii"), report
    assert re.search(r"events: (trampoline|efi-hook|check-event)$", lines[0]), report


@pytest.mark.parametrize("text, expected", [
    ("10.0.2.2", ("10.0.2.2", 8080)),
    ("10.0.2.2:8090", ("10.0.2.2", 8090)),
    ("lab.example:81", ("lab.example", 81)),
    ("[fec0::2]:8080", ("fec0::2", 8080)),
    ("[fec0::2]", ("fec0::2", 8080)),
    ("fec0::2", ("fec0::2", 8080)),
    ("::1", ("::1", 8080)),
])
def test_peer_forms(text, expected):
    from bitsnet.selftest import _split_peer
    assert _split_peer(text) == expected


@pytest.mark.parametrize("text", ["[fec0::2", "[fec0::2]8080", "10.0.2.2:http", ":8080", "[]:80"])
def test_bad_peers_are_value_errors(text):
    from bitsnet.selftest import _split_peer
    with pytest.raises(ValueError):
        _split_peer(text)


def test_a_bad_peer_is_a_usage_error():
    status, lines, err = selftest("-m", "bitsnet.selftest", "--peer", "[fec0::2")
    assert status == 2 and "bad peer" in err, (lines, err)


QEMU_BOARD = ["fe80::5054:ff:fe12:3456", "fec0::5054:ff:fe12:3456"]
LAN_BOARD = ["fe80::5054:ff:fe12:3456", "2001:db8::15"]
LINK_LOCAL_BOARD = ["fe80::5054:ff:fe12:3456"]
LOOPBACK_LAB = {"tcp_echo6": 9, "loopback6": True, "addresses6": []}
ALL_ADDRESSES_LAB = {"tcp_echo6": 9, "loopback6": True, "addresses6": ["2001:db8::2"]}


@pytest.mark.parametrize("peer, lab, board, peer6, expected", [
    ("10.0.2.2", LOOPBACK_LAB, QEMU_BOARD, None, "fec0::2"),  # QEMU user networking, as the README runs it
    ("10.0.2.2", LOOPBACK_LAB, QEMU_BOARD, "fd00::9", "fd00::9"),  # --peer6 first
    ("fec0::2", LOOPBACK_LAB, QEMU_BOARD, None, "fec0::2"),  # --peer [fec0::2]:8080
    ("127.0.0.1", LOOPBACK_LAB, LAN_BOARD, None, "::1"),  # the simulator: lab and board share a host
    ("192.0.2.2", ALL_ADDRESSES_LAB, LAN_BOARD, None, "2001:db8::2"),  # the lab's own address
    ("10.0.2.2", ALL_ADDRESSES_LAB, QEMU_BOARD, None, "fec0::2"),  # QEMU: the NAT'd name beats lab.json's
])
def test_ipv6_target(monkeypatch, peer, lab, board, peer6, expected):
    from bitsnet import ipconfig, selftest as module
    monkeypatch.setattr(ipconfig, "current6", lambda: ipconfig.Ip6Info(board[-1], board, None, []))
    assert module._ipv6_target(peer, lab, peer6)[0] == expected


@pytest.mark.parametrize("peer, lab, board, why", [
    ("10.0.2.2", LOOPBACK_LAB, LAN_BOARD, "--peer6 fec0::2"),  # 10.0.2.2 outside slirp's fec0::/64
    ("192.0.2.2", LOOPBACK_LAB, LAN_BOARD, "gave no IPv6 address a board can reach"),
    ("192.0.2.2", ALL_ADDRESSES_LAB, LINK_LOCAL_BOARD, "only a link-local IPv6 address"),
])
def test_no_reachable_ipv6_is_a_skip_saying_why(monkeypatch, peer, lab, board, why):
    from bitsnet import ipconfig, selftest as module
    monkeypatch.setattr(ipconfig, "current6", lambda: ipconfig.Ip6Info(board[-1], board, None, []))
    with pytest.raises(module.Skip) as caught:
        module._ipv6_target(peer, lab, None)
    assert why in str(caught.value)


def test_a_lab_without_ipv6_is_a_skip():
    from bitsnet import selftest as module
    with pytest.raises(module.Skip) as caught:
        module.check_tcp_echo6(None, "192.0.2.2", {"tcp_echo": 9}, None, 1.0)
    assert "no IPv6 echo" in str(caught.value)


def test_an_ipv6_peer_runs_every_traffic_check_over_ipv6():
    # --peer [ADDR]:PORT: the lab serves HTTP, echo and DNS on [::1] too (tools/lab.py).
    code = ("import os, sys; from bitsnet import selftest; "
            "sys.exit(selftest.main(['--peer', '[::1]:' + os.environ['BITSNET_LAB'].split(':')[1]]))")
    status, lines, err = selftest("--lab", "-c", code)
    report = "\n".join(lines) + "\n" + err
    assert status == 0 and SUMMARY.match(lines[-1]) and SUMMARY.match(lines[-1]).group(2) == "0", report
    assert [line for line in lines if re.match(r"^ ?\d+ TCP connect to lab \[::1\]:\d+ \.+ PASS", line)], report
    assert squash("answered by the lab's DNS at ::1 port") in squash(result_of(lines, "DNS query")[1]), report
    assert squash("[::1]:") in squash(result_of(lines, "TCP echo over IPv6")[1]), report
    assert squash("datagram echoed by ::1 port") in squash(result_of(lines, "UDP echo")[1]), report
