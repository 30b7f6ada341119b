"""The resolver against a hostile DNS server (docs/testing.md section 3.9): an answer built to burn CPU with
compression pointers is refused quickly, within the query's documented time, and the parser
looks at the query's deadline while it works. The end-to-end case runs bitsnet's own client in
the simulator against tests/dnspeer.py on loopback."""

from __future__ import print_function

import time

import pytest

import conftest
import dnspeer
from bitsnet import dns, errors, events
from efisim import machine as _machine

pytest_plugins = ["helpers"]  # the ``net`` fixture

NAME = "bomb.example"
PARSE_BUDGET = 0.5  # s one hostile answer may cost the host (bounded work: ~ms)


def question(ident=0x1234, name=NAME):
    return dns.build_query(ident, name, dns.TYPE_A)[12:]


def timed_parse(packet, deadline=None):
    start = time.time()
    try:
        outcome = dns.parse_response(packet, 0x1234, NAME, dns.TYPE_A, deadline)
    except dns.DnsFormatError as exc:
        outcome = exc
    return outcome, time.time() - start


def test_the_reported_bomb_is_refused_at_once():
    packet = dnspeer.bomb_answer(0x1234, question())
    assert 60000 < len(packet) <= 65535  # the report's ~65 KB, ~3000 records, 8000 pointers
    outcome, took = timed_parse(packet)
    assert isinstance(outcome, dns.DnsFormatError) and "compression pointers" in str(outcome)
    assert took < PARSE_BUDGET, took


@pytest.mark.parametrize("jumps", [dns.MAX_NAME_JUMPS, dns.MAX_NAME_JUMPS - 1, 8, 1])
def test_bombs_under_the_per_name_bound_stay_cheap(jumps):
    # Each owner name within the per-name bound: the per-message budget and MAX_RECORDS stop it.
    packet = dnspeer.bomb_answer(0x1234, question(), jumps=jumps)
    outcome, took = timed_parse(packet)
    assert took < PARSE_BUDGET, (jumps, took)
    if not isinstance(outcome, dns.DnsFormatError):
        rcode, truncated, records = outcome
        assert len(records) <= dns.MAX_RECORDS and all(r[3] == "127.0.0.66" for r in records)


def test_a_passed_deadline_stops_the_parse():
    packet = dnspeer.bomb_answer(0x1234, question(), jumps=1, records=200)
    outcome, _ = timed_parse(packet)
    assert not isinstance(outcome, dns.DnsFormatError)  # cheap enough to parse ...
    outcome, _ = timed_parse(packet, deadline=events.clock() - 1)
    assert isinstance(outcome, dns.DnsFormatError) and "deadline" in str(outcome)  # ... but not past it
    outcome, _ = timed_parse(packet, deadline=events.clock() + 60)
    assert not isinstance(outcome, dns.DnsFormatError)


def test_legitimate_compressed_answers_still_parse():
    # A pointer to a pointer to the question, as a compressor may write it, and many records.
    packet = dnspeer.bomb_answer(0x1234, question(), chain=3, records=100)
    rcode, truncated, records = dns.parse_response(packet, 0x1234, NAME, dns.TYPE_A)
    assert (rcode, truncated, len(records)) == (0, False, 100)
    assert records[0] == (NAME, dns.TYPE_A, dnspeer.TTL, "127.0.0.66")


@pytest.fixture
def bomber():
    records = {"fine.example": [("A", "127.0.0.1")], "other.example": [("A", "127.0.0.2")],
               "third.example": [("A", "127.0.0.3")]}
    with dnspeer.DnsPeer(records, bomb=[NAME]) as running:
        yield running


@pytest.fixture
def machine(request, bomber):
    """conftest's machine (without DNS4 unless marked), the bomber handed out by DHCP as its
    DNS server."""
    marker = request.node.get_closest_marker("machine")
    options = dict(dns_servers=[bomber.address], dns4=False)
    options.update(marker.kwargs if marker else {})
    booted = _machine.boot(conftest.machine_config(**options))
    yield booted
    crashes = list(booted.firmware.crashes)
    booted.shutdown()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)


def test_gethostbyname_against_a_bombing_server_keeps_its_time(net, bomber):
    # The documented worst case: ATTEMPTS rounds of TIMEOUT seconds per server (~4 s).
    budget = dns.ATTEMPTS * dns.TIMEOUT * len(dns.servers()) + 1.5
    start = events.clock()
    with pytest.raises(errors.gaierror) as caught:
        dns.resolve(NAME)
    took = events.clock() - start
    assert caught.value.args[0] == dns.EAI_AGAIN  # no usable answer: as for silence
    assert took < budget, (took, budget)
    assert (NAME, dns.TYPE_A) in bomber.queries
    assert dns.resolve("fine.example") == "127.0.0.1"  # the same server's honest answers still work


@pytest.mark.machine(dns4=True)
def test_the_firmwares_dns4_asks_from_random_source_ports(net, bomber, monkeypatch):
    # Through EFI_DNS4 too (its UDP child would take EDK2's next sequential port): LocalPort
    # comes from bitsnet.entropy, so an off-path forger must guess it as well as the ID.
    assert "dns4" in net.drivers
    assert dns.resolve("fine.example") == "127.0.0.1"
    assert dns.resolve("other.example") == "127.0.0.2"
    ports = [port for _address, port in bomber.clients]
    assert len(ports) == 2 and ports[0] != ports[1], ports
    assert all(dns.SOURCE_PORTS[0] <= port <= dns.SOURCE_PORTS[1] for port in ports), ports
    monkeypatch.setattr(dns.entropy, "randbelow", lambda n: 4321)  # the port is the entropy source's
    assert dns.resolve("third.example") == "127.0.0.3"
    assert bomber.clients[-1][1] == dns.SOURCE_PORTS[0] + 4321
