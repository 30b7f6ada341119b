"""DNS servers silent or lying, CreateEvent and CreateChild failing (docs/testing.md section 3.1), through the
socket API.

A lying server on loopback (``LyingPeer``, tests/dnspeer.py's server with more lies) answers
each name in its own wrong way: silence, another transaction ID, a truncated answer, NXDOMAIN,
SERVFAIL, a record of another type, an address owned by another name, or an answer to another
question. ``getaddrinfo`` must give the address only for the honest name and otherwise a
``gaierror`` with glibc's code, within the resolver's limits, both through the firmware's DNS4
protocol and through bitsnet's own resolver over UDP4; nothing is left behind (conftest).

Two differences between the paths are the firmware's (the simulator models DnsDxe's
ParseDnsResponse): DnsDxe matches a reply to its query by ID, QTYPE and QCLASS only and does
not compare the answer's owner name either, so an address owned by another name, or given for
another question, is taken (bitsnet's own client rejects both, RFC 5452); and an
answer of another record type makes DnsDxe abort the parse without completing the token, which
then times out (EAI_AGAIN) where the own client says EAI_NODATA.

``event_fail`` and ``create_fail``: CreateEvent or CreateChild returning EFI_OUT_OF_RESOURCES
makes the call that needed it raise ``socket.error(ENOBUFS)``, leaks nothing, and the next call
works. (bitsnet itself never calls AllocatePool; only the drivers do, for DNS4's results.)
"""

from __future__ import print_function

import errno
import struct
import time

import pytest

import conftest
import dnspeer
import peers
from bitsnet import _socket as bs
from bitsnet import dns, errors, events

import test_socket_api

net = test_socket_api.net

HONEST = "honest.example"
ADDRESS = "127.0.0.10"
FORGED = "127.0.0.66"


class LyingPeer(dnspeer.DnsPeer):
    """dnspeer's server plus three lies: ``other_type`` (a TXT record where A was asked),
    ``other_owner`` (an A record owned by another name) and ``other_question`` (the answer
    repeats another question)."""

    def answer(self, query):
        parsed = dnspeer.parse_question(query)
        if parsed is None:
            return dnspeer.DnsPeer.answer(self, query)
        ident, flags, name, qtype, question = parsed
        header = struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0)
        if name == "othertype.example":
            self.queries.append((name, qtype))
            txt = b"\x05hello"
            return header + question + struct.pack("!HHHLH", 0xC00C, 16, 1, 60, len(txt)) + txt
        if name == "otherowner.example":
            self.queries.append((name, qtype))
            owner = dnspeer.encode_name("evil.example")
            return header + question + owner + struct.pack("!HHLH", 1, 1, 60, 4) + bytes(bytearray([127, 0, 0, 66]))
        if name == "otherquestion.example":
            self.queries.append((name, qtype))
            other = dnspeer.encode_name("evil.example") + question[-4:]
            return header + other + struct.pack("!HHHLH", 0xC00C, 1, 1, 60, 4) + bytes(bytearray([127, 0, 0, 66]))
        return dnspeer.DnsPeer.answer(self, query)


@pytest.fixture
def liar():
    with LyingPeer({HONEST: [("A", ADDRESS)], "cut.example": [("A", ADDRESS), ("A", "127.0.0.11")],
                    "forged.example": [("A", FORGED)]},
                   silent=["silent.example"], servfail=["broken.example"], truncated=["cut.example"],
                   wrong_id=["forged.example"]) as running:
        yield running


@pytest.fixture
def short_dns():
    saved = dns.TIMEOUT, dns.ATTEMPTS
    dns.TIMEOUT, dns.ATTEMPTS = 0.4, 1
    yield
    dns.TIMEOUT, dns.ATTEMPTS = saved


def _boot(request, **options):
    request.node.add_marker(pytest.mark.machine(**options))
    return request.getfixturevalue("net")


# name -> (own client's result, DNS4's result): an address or a gaierror code
CASES = {
    HONEST: (ADDRESS, ADDRESS),
    "silent.example": (dns.EAI_AGAIN, dns.EAI_AGAIN),
    "forged.example": (dns.EAI_AGAIN, dns.EAI_AGAIN),  # another transaction ID: ignored, then timeout
    "cut.example": (dns.EAI_FAIL, dns.EAI_FAIL),  # TC set: no DNS over TCP here
    "nosuch.example": (dns.EAI_NONAME, dns.EAI_NONAME),
    "broken.example": (dns.EAI_AGAIN, dns.EAI_AGAIN),
    "othertype.example": (dns.EAI_NODATA, dns.EAI_AGAIN),  # DnsDxe aborts the parse: timeout
    "otherowner.example": (dns.EAI_NODATA, FORGED),  # DnsDxe takes any A record (no owner check)
    # Not an answer to our question: DnsDxe's IsValidDnsResponse matches ID, QTYPE and QCLASS only.
    "otherquestion.example": (dns.EAI_AGAIN, FORGED),
}


@pytest.mark.parametrize("dns4", [False, True], ids=["own-client", "dns4"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_lying_and_silent_servers(request, liar, short_dns, dns4, name):
    _boot(request, static=True, dns4=dns4, dns_servers=[liar.address], faults="mixed", seed=8)
    expected = CASES[name][1 if dns4 else 0]
    start = time.time()
    try:
        result = bs.getaddrinfo(name, 80, bs.AF_INET, bs.SOCK_STREAM)[0][4][0]
    except errors.gaierror as exc:
        result = exc.args[0]
    elapsed = time.time() - start
    assert result == expected, "%s via %s: %r, expected %r" % (name, "DNS4" if dns4 else "own client",
                                                               result, expected)
    # Limits: the own client's rounds; DnsDxe's three tries 2 s apart (docs/edk2.md section 6.2) plus the own
    # client's round over the servers DNS4 did not ask.
    limit = (3 * 2.0 + 2.0 if dns4 else 1.5) + dns.ATTEMPTS * dns.TIMEOUT
    assert elapsed < limit, "%s took %.2f s" % (name, elapsed)
    assert liar.queries, "the server was never asked"


# ---------------------------------------------------------------------- CreateEvent failing
def fail_create_event(machine, count):
    """Make the next ``count`` CreateEvent calls fail as EDK2's does when its pool is exhausted
    (faults.py's ``event_fail``, consulted by the simulated CreateEvent)."""
    machine.faults.configure("event_fail=%d" % count)
    return lambda: machine.faults.configure("event_fail=0")


@pytest.mark.machine(static=True)
def test_create_event_failing_is_enobufs_and_leaks_nothing(net):
    events.shutdown()  # no pooled event left idle: the next token needs a new one
    restore = fail_create_event(net, 1)
    try:
        with test_socket_api.HostListener() as listener:
            s = bs.socket()
            s.settimeout(5)
            with pytest.raises(bs.error) as info:
                s.connect(listener.address)
            assert info.value.errno == errno.ENOBUFS, info.value
            s.close()
            assert net.faults.injected.get("event_fail") == 1
            client, server = test_socket_api.connected_pair(listener)  # the next one works
            client.sendall(b"after")
            assert test_socket_api.recv_exactly(server, 5) == b"after"
            client.close()
            server.close()
        u = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
        events.shutdown()
        net.faults.configure("event_fail=1")
        with pytest.raises(bs.error) as info:
            u.sendto(b"x", (peers.HOST, 9))
        assert info.value.errno == errno.ENOBUFS, info.value
        u.close()
    finally:
        restore()
    assert conftest.lost_completions(events) == []


@pytest.mark.machine(static=True, faults="create_fail=2")
def test_create_child_failing_is_enobufs_and_leaks_nothing(net):
    """CreateChild EFI_OUT_OF_RESOURCES (TCP4 and UDP4): ENOBUFS at the call that needed the
    child; the next call makes one and works."""
    with test_socket_api.HostListener() as listener:
        s = bs.socket()
        s.settimeout(5)
        with pytest.raises(bs.error) as info:
            s.connect(listener.address)
        assert info.value.errno == errno.ENOBUFS, info.value
        s.close()
        u = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
        with pytest.raises(bs.error) as info:
            u.sendto(b"x", (peers.HOST, 9))
        assert info.value.errno == errno.ENOBUFS, info.value
        u.close()
        assert net.faults.injected.get("create_fail") == 2
        client, server = test_socket_api.connected_pair(listener)
        client.sendall(b"after")
        assert test_socket_api.recv_exactly(server, 5) == b"after"
        client.close()
        server.close()
