"""tools/lab.py, the selftest's peer: what lab.json tells a board (no loopback address as where
to reach the lab), what it prints to type at the boot prompt (README.rst's words), and its DNS
answers -- an empty answer carries the zone's SOA, which EDK2's DnsDxe needs (docs/edk2.md
section 6.2) -- resolved through the simulator by the firmware's DNS4 and by bitsnet's own
client, with the SOA and without it."""

from __future__ import print_function

import os
import re
import socket
import struct
import sys
import threading
import time

import pytest

import conftest
from bitsnet import dns, dnsmessage, errors
from efisim import machine as _machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import lab  # noqa: E402

pytest_plugins = ["helpers"]  # the ``net`` fixture

HEADER = 12


def query(name, qtype=dnsmessage.TYPE_A, ident=0x5150):
    return dnsmessage.build_query(ident, name, qtype)


def sections(reply):
    """(rcode, qdcount, ancount, nscount, arcount, offset just past the question)."""
    _, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", reply[:HEADER])
    _, offset = dnsmessage.read_name(bytearray(reply), HEADER)
    return flags & 0xF, qd, an, ns, ar, offset + 4


# --- lab.json and the instructions -----------------------------------------------------------------
def test_a_loopback_lab_tells_the_board_no_loopback_address():
    with lab.Lab("127.0.0.1", 0) as running:
        info = running.info()
    assert info["addresses"] == [] and info["addresses6"] == []
    assert "address" not in info and "address6" not in info  # the old keys said 127.0.0.1 and ::1
    assert info["loopback6"] is True and info["tcp_echo6"] == info["tcp_echo"]
    assert info["names"]["lab.bitsnet.test"] == "127.0.0.1"


def test_a_lab_on_every_address_lists_the_hosts_addresses_a_board_can_reach(monkeypatch):
    monkeypatch.setattr(lab, "_ipv4_addresses", lambda: ["127.0.0.1", "192.0.2.7", "10.1.2.3", "192.0.2.7"])
    monkeypatch.setattr(lab, "_ipv6_addresses", lambda: ["::1", "fe80::1", "2001:db8::7", "fd00::7", "::ffff:1.2.3.4"])
    assert lab.board_addresses("0.0.0.0") == (["192.0.2.7", "10.1.2.3"], ["2001:db8::7", "fd00::7"])
    assert lab.board_addresses("192.0.2.7") == (["192.0.2.7"], [])
    assert lab.board_addresses("127.0.0.1") == ([], [])


def test_the_hosts_own_addresses_are_found():
    v4, v6 = lab._ipv4_addresses(), lab._ipv6_addresses()
    assert "127.0.0.1" in v4, v4  # every Linux host has its loopback up
    assert all(socket.inet_pton(socket.AF_INET6, a) for a in v6)


def test_it_prints_what_to_type_with_addresses_a_board_can_reach(monkeypatch):
    with lab.Lab("127.0.0.1", 0) as running:
        text = running.instructions()
        port = running.port
    assert "127.0.0.1:%d" % port not in text and "::1" not in text.replace("::1 ", "")
    typed = "python -m bitsnet.selftest --peer 10.0.2.2:%d --listen-port 8081 --listen-via 127.0.0.1:8081" % port
    assert typed in text.splitlines()[2].strip() or typed in text, text
    assert "hostfwd=tcp:127.0.0.1:8081-:8081" in text and "fec0::2" in text, text
    monkeypatch.setattr(lab, "board_addresses", lambda host: (["192.0.2.7"], ["2001:db8::7"]))
    with lab.Lab("127.0.0.1", 0) as running:
        text = running.instructions()
        port = running.port
    assert "--peer 192.0.2.7:%d" % port in text and "--peer [2001:db8::7]:%d" % port in text, text


def test_the_readme_types_what_the_lab_prints():
    """README.rst's QEMU commands are the lab's own instructions (tests/test_real_bits.py types them)."""
    with open(os.path.join(ROOT, "README.rst")) as handle:
        readme = handle.read()
    section = readme[readme.index("**Under QEMU with user networking**"):readme.index("**IPv6.**")]
    blocks = [line.strip() for line in section.splitlines() if line.startswith("    ")]
    assert "python tools/lab.py" in blocks, blocks
    typed = [line for line in blocks if line.startswith("python -m bitsnet.selftest")]
    with lab.Lab("127.0.0.1", 8080 if _free(8080) else 0) as running:
        text = running.instructions()
        port = running.port
    assert typed and typed[0].replace(":8080", ":%d" % port) in text, (typed, text)
    forward = re.search(r"hostfwd=tcp:127\.0\.0\.1:(\d+)-:(\d+)", " ".join(blocks))
    assert forward and forward.group(1) == forward.group(2) == "8081" and forward.group(0) in text


def _free(port):
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.0.0.1", port))
        return True
    except socket.error:
        return False
    finally:
        probe.close()


# --- DNS answers ----------------------------------------------------------------------------------
def test_a_known_name_is_an_a_record():
    reply = lab.dns_answer(query("LAB.bitsnet.test"))
    rcode, truncated, records = dnsmessage.parse_response(reply, 0x5150, "lab.bitsnet.test", dnsmessage.TYPE_A)
    assert (rcode, truncated, [r[3] for r in records]) == (0, False, ["127.0.0.1"])
    assert struct.unpack("!H", reply[2:4])[0] & 0x0100  # RD echoed


@pytest.mark.parametrize("name, qtype, rcode", [
    ("nosuch.bitsnet.test", dnsmessage.TYPE_A, dnsmessage.RCODE_NXDOMAIN),
    ("example.org", dnsmessage.TYPE_A, dnsmessage.RCODE_NXDOMAIN),
    ("lab.bitsnet.test", dnsmessage.TYPE_AAAA, dnsmessage.RCODE_NOERROR),  # the name, no AAAA: NODATA
])
def test_an_empty_answer_carries_the_zones_soa(name, qtype, rcode):
    reply = lab.dns_answer(query(name, qtype))
    got, qd, an, ns, ar, question_end = sections(reply)
    assert (got, qd, an, ns, ar) == (rcode, 1, 0, 1, 0)
    # EDK2 quirk (docs/edk2.md section 6.2): DnsDxe's ParseDnsResponse drops a reply whose length
    # is <= header + question; the authority record takes it past that.
    assert len(reply) > question_end
    owner, offset = dnsmessage.read_name(bytearray(reply), question_end)
    rtype, rclass, ttl, rdlength = struct.unpack("!HHLH", reply[offset:offset + 10])
    assert (rtype, rclass, rdlength) == (6, 1, len(reply) - offset - 10)
    assert owner == ("bitsnet.test" if name.endswith("bitsnet.test") else "")
    mname, at = dnsmessage.read_name(bytearray(reply), offset + 10)
    rname, at = dnsmessage.read_name(bytearray(reply), at)
    assert (mname, rname) == ("lab.bitsnet.test", "hostmaster.bitsnet.test")
    assert struct.unpack("!L", reply[-4:])[0] == 60  # MINIMUM: how long "no such name" may be cached
    assert dnsmessage.parse_response(reply, 0x5150, name, qtype) == (rcode, False, [])


def _without_authority(reply):
    """The same reply ending right after its question: what lab.py sent before (and DnsDxe drops)."""
    _, _, _, _, _, question_end = sections(reply)
    return reply[:8] + struct.pack("!HH", 0, 0) + reply[HEADER:question_end]


class _LabDns(object):
    """lab.py's DNS answers on a loopback port, with the SOA or (``soa=False``) without it."""

    def __init__(self, soa):
        self.soa = soa
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.running = True
        self.thread = threading.Thread(target=self.serve)
        self.thread.daemon = True
        self.thread.start()

    def serve(self):
        while self.running:
            try:
                data, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            reply = lab.dns_answer(data)
            empty = struct.unpack("!H", reply[6:8])[0] == 0
            self.sock.sendto(reply if self.soa or not empty else _without_authority(reply), peer)

    def close(self):
        self.running = False
        self.thread.join(2.0)
        self.sock.close()


@pytest.fixture
def lab_dns(request):
    server = _LabDns(soa=request.param)
    yield server
    server.close()


@pytest.fixture
def machine(request, lab_dns):
    """conftest's machine with ``lab_dns`` handed out by DHCP as the DNS server."""
    marker = request.node.get_closest_marker("machine")
    options = dict(dns_servers=[lab_dns.address])
    options.update(marker.kwargs if marker else {})
    booted = _machine.boot(conftest.machine_config(**options))
    yield booted
    crashes = list(booted.firmware.crashes)
    leaked = dict((k, v) for k, v in booted.firmware.ledger().items() if v)
    booted.shutdown()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)
    assert not leaked, "firmware still holds %r after the test" % leaked


# The simulator's DNS4 does not model DnsDxe dropping a reply that ends at its question, so the
# bare NXDOMAIN goes only through bitsnet's own client (in EDK2 it would time out: the SOA is the fix).
@pytest.mark.parametrize("lab_dns, firmware_dns4", [
    pytest.param(True, True, marks=pytest.mark.machine(dns4=True), id="dns4-with-soa"),
    pytest.param(True, False, marks=pytest.mark.machine(dns4=False), id="own-client-with-soa"),
    pytest.param(False, False, marks=pytest.mark.machine(dns4=False), id="own-client-bare"),
], indirect=["lab_dns"])
def test_no_such_name_through_the_resolver(net, lab_dns, firmware_dns4):
    assert ("dns4" in net.drivers) == firmware_dns4
    assert dns.resolve("lab.bitsnet.test") == "127.0.0.1"
    start = time.time()
    with pytest.raises(errors.gaierror) as caught:
        dns.resolve("nosuch.bitsnet.test")
    assert caught.value.args[0] == dns.EAI_NONAME
    assert time.time() - start < dns.TIMEOUT  # the first answer settles it: no retry
    with pytest.raises(errors.gaierror) as caught:
        dns.lookup("lab.bitsnet.test", dns.TYPE_AAAA)  # NODATA: the name is there, without AAAA
    assert caught.value.args[0] == dns.EAI_NODATA
