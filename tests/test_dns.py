"""bitsnet.dns: the message codec (round trips, hostile input, a fuzz run), the hosts table, and
resolution through the simulator against a real DNS server on loopback (tests/dnspeer.py),
with the firmware's DNS4 and without it (bitsnet's own client over UdpEndpoint)."""

from __future__ import print_function

import random
import socket
import struct
import time

import pytest

import conftest
import dnspeer
from bitsnet import dns, errors, events, udp
from efisim import machine as _machine
from helpers import wait

pytest_plugins = ["helpers"]  # the ``net`` fixture

LAB = "127.0.0.1"
LEASE = conftest.STATION
RECORDS = {
    "labserver.example": [("A", LAB)],
    "www.example": [("CNAME", "front.example")],
    "front.example": [("CNAME", "host.example")],
    "host.example": [("A", "127.0.0.10"), ("A", "127.0.0.11")],
    "dangling.example": [("CNAME", "other.example")],  # other.example: the peer's NXDOMAIN
    "noaddress.example": [("PTR", "x.example")],  # exists, but no A record
    dnspeer.reverse_name(LAB): [("PTR", "labserver.example")],
    dnspeer.reverse_name("127.0.0.10"): [("PTR", "host.example")],
    "cut.example": [("A", "127.0.0.12"), ("A", "127.0.0.13")],
}
WITH_DNS4 = pytest.param(True, marks=pytest.mark.machine(dns4=True), id="dns4")
OWN_CLIENT = pytest.param(False, marks=pytest.mark.machine(dns4=False), id="own-client")
FUZZ_ROUNDS = 4000


def answer(name, qtype=dns.TYPE_A, ident=0x1234, **behaviour):
    peer = dnspeer.DnsPeer.__new__(dnspeer.DnsPeer)  # its codec only, no socket
    peer.records = dict((k.lower(), v) for k, v in RECORDS.items())
    for kind in ("silent", "servfail", "truncated", "wrong_id"):
        setattr(peer, kind, set(behaviour.get(kind, ())))
    peer.queries = []
    return peer.answer(dns.build_query(ident, name, qtype))


# --- the codec, no firmware -------------------------------------------------------------------
def test_answers_parse_with_compression_cname_chains_and_ptr():
    rcode, truncated, records = dns.parse_response(answer("www.example"), 0x1234, "www.example", dns.TYPE_A)
    assert (rcode, truncated) == (0, False)
    assert [(r[0], r[1], r[3]) for r in records] == [
        ("www.example", dns.TYPE_CNAME, "front.example"), ("front.example", dns.TYPE_CNAME, "host.example"),
        ("host.example", dns.TYPE_A, "127.0.0.10"), ("host.example", dns.TYPE_A, "127.0.0.11")]
    assert dns.follow_chain(records, "WWW.example") == ("host.example", ["127.0.0.10", "127.0.0.11"])
    qname = dnspeer.reverse_name(LAB)
    rcode, _, records = dns.parse_response(answer(qname, dns.TYPE_PTR), 0x1234, qname, dns.TYPE_PTR)
    assert records[0][1:] == (dns.TYPE_PTR, dnspeer.TTL, "labserver.example")
    rcode, _, records = dns.parse_response(answer("nosuch.example"), 0x1234, "nosuch.example", dns.TYPE_A)
    assert (rcode, records) == (dns.RCODE_NXDOMAIN, [])
    rcode, truncated, _ = dns.parse_response(answer("cut.example", truncated=["cut.example"]), 0x1234,
                                             "cut.example", dns.TYPE_A)
    assert truncated


@pytest.mark.parametrize("packet, why", [
    (answer("labserver.example", ident=0x4321), "another ID"),
    (answer("www.example"), "another question"),
    (answer("labserver.example")[:11], "shorter than a header"),
    (dns.build_query(0x1234, "labserver.example", dns.TYPE_A), "not a standard query response"),
])
def test_answers_to_something_else_are_rejected(packet, why):
    with pytest.raises(dns.DnsFormatError) as caught:
        dns.parse_response(packet, 0x1234, "labserver.example", dns.TYPE_A)
    assert why in str(caught.value)


def hostile(answer_name_bytes, ancount=1, rdata=b"\x7f\x00\x00\x01", rdlength=None):
    question = dns.encode_name("a.example") + struct.pack("!HH", dns.TYPE_A, dns.CLASS_IN)
    header = struct.pack("!HHHHHH", 7, 0x8180, 1, ancount, 0, 0)
    record = answer_name_bytes + struct.pack("!HHLH", dns.TYPE_A, 1, 60, len(rdata) if rdlength is None else
                                             rdlength) + rdata
    return header + question + record


@pytest.mark.parametrize("packet, why", [
    (hostile(b"\xc0\x1d"), "forward or looping"),  # points at itself
    (hostile(b"\x01x\xc0\x1d"), "forward or looping"),  # points at its own first label: a loop
    (hostile(b"\xc0\xff"), "forward or looping"),  # beyond the packet
    (hostile(b"\xc0\x0c")[:28], "truncated pointer"),  # the packet ends inside the pointer
    (hostile(b"\x3fabc"), "label runs past the end"),
    (hostile(b"\x80abc\x00"), "reserved label type"),
    (hostile(b"\xc0\x0c", rdlength=200), "record data runs past the end"),
    (hostile(b"\xc0\x0c", rdata=b"\x01\x02", rdlength=2), "A record of 2 bytes"),
    (hostile(b"\xc0\x0c", ancount=2), "runs past the end"),  # a lying count
    (hostile(b"\x3f" + b"a" * 63 + b"\x3f" + b"b" * 63 + b"\x3f" + b"c" * 63 + b"\x3f" + b"d" * 63 + b"\x00"),
     "longer than 255"),
])
def test_hostile_names_and_lengths_are_format_errors(packet, why):
    with pytest.raises(dns.DnsFormatError) as caught:
        dns.parse_response(packet, 7, "a.example", dns.TYPE_A)
    assert why in str(caught.value)


def _check_parsed(result):
    rcode, truncated, records = result
    assert 0 <= rcode <= 15 and truncated in (True, False)
    for owner, rtype, ttl, value in records:
        assert isinstance(owner, str) and len(owner) <= 255 and 0 <= ttl < 2 ** 31
        assert rtype in (dns.TYPE_A, dns.TYPE_CNAME, dns.TYPE_PTR) and isinstance(value, str)


def test_fuzz_random_and_mutated_packets_only_ever_give_format_errors():
    rng = random.Random(5)
    seeds = [(answer(n), n) for n in ("labserver.example", "www.example", "host.example", "nosuch.example")]
    seeds.append((answer(dnspeer.reverse_name(LAB), dns.TYPE_PTR), dnspeer.reverse_name(LAB)))
    parsed = rejected = 0
    for round_number in range(FUZZ_ROUNDS):
        base, name = seeds[round_number % len(seeds)]
        qtype = dns.TYPE_PTR if name.endswith("arpa") else dns.TYPE_A
        packet = bytearray(base)
        kind = round_number % 5
        if kind == 0:  # pure noise, sometimes with our header so the parser goes deeper
            packet = bytearray(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
            if rng.random() < 0.5 and len(packet) >= 12:
                packet[:4] = base[:4]
        elif kind == 1:  # bit flips
            for _ in range(rng.randint(1, 8)):
                packet[rng.randrange(len(packet))] ^= 1 << rng.randrange(8)
        elif kind == 2:  # truncation / extension
            packet = packet[:rng.randrange(len(packet) + 1)] + bytearray(rng.getrandbits(8)
                                                                         for _ in range(rng.randint(0, 8)))
        elif kind == 3:  # compression pointers anywhere
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(12, len(packet) - 1)
                packet[at] = 0xC0 | rng.randrange(4)
                packet[at + 1] = rng.randrange(256)
        else:  # lying counts and lengths
            packet[6:8] = struct.pack("!H", rng.choice([0, 1, 2, 5, 200, 65535]))
            at = rng.randrange(12, len(packet) - 1)
            packet[at:at + 2] = struct.pack("!H", rng.randrange(65536))
        try:
            _check_parsed(dns.parse_response(bytes(packet), 0x1234, name, qtype))
            parsed += 1
        except dns.DnsFormatError:
            rejected += 1
    assert parsed + rejected == FUZZ_ROUNDS and parsed > 100 and rejected > 1000


def test_query_encoding_and_bad_names():
    query = dns.build_query(0xBEEF, "Lab.Example.", dns.TYPE_A)
    assert dnspeer.parse_question(query)[:4] == (0xBEEF, dns.FLAG_RD, "lab.example", dns.TYPE_A)
    for bad in ("", "a..b", "x" * 64 + ".example", ".".join(["abcdefghi"] * 30)):
        with pytest.raises(errors.gaierror) as caught:
            dns.lookup(bad)
        assert caught.value.args == (dns.EAI_NONAME, "Name or service not known")


def test_eai_codes_are_the_host_cpython_ones():
    for name in ("EAI_AGAIN", "EAI_BADFLAGS", "EAI_FAIL", "EAI_FAMILY", "EAI_MEMORY", "EAI_NODATA",
                 "EAI_NONAME", "EAI_SERVICE", "EAI_SOCKTYPE", "EAI_SYSTEM", "EAI_ADDRFAMILY", "EAI_OVERFLOW"):
        if hasattr(socket, name):
            assert getattr(dns, name) == getattr(socket, name), name
    assert issubclass(errors.gaierror, errors.error) and issubclass(errors.herror, errors.error)


def test_hosts_table_literals_and_file(tmpdir):
    table = dns.HostsTable()
    assert table.lookup("LOCALHOST.") == dns.Answer("localhost", [], ["127.0.0.1"])
    path = tmpdir.join("hosts")
    path.write("# lab machines\n10.0.0.5  labserver labserver.example  # the server\n"
               "10.0.0.6 printer\nnot-an-address foo\n\n")
    assert table.load(str(path)) == 2
    assert table.lookup("labserver.example") == dns.Answer("labserver", ["labserver.example"], ["10.0.0.5"])
    assert table.reverse("10.0.0.6") == ("printer", [])
    assert dns.lookup("10.1.2.3") == dns.Answer("10.1.2.3", [], ["10.1.2.3"])  # no firmware needed


def test_hosts_files_are_read_at_the_first_lookup(tmpdir, monkeypatch):
    path = tmpdir.join("bits-hosts")
    path.write("10.0.0.5 labserver.example\n")
    monkeypatch.setattr(dns, "HOSTS_FILES", [str(tmpdir.join("missing")), str(path)])
    dns.reset()
    try:
        assert dns.resolve("labserver.example") == "10.0.0.5"  # no firmware, no DNS
        assert dns.reverse("10.0.0.5") == ("labserver.example", [])
    finally:
        dns.hosts.clear()
        dns.reset()


# --- through the simulator ------------------------------------------------------------------
@pytest.fixture
def peer():
    with dnspeer.DnsPeer(RECORDS, silent=["silent.example"], servfail=["broken.example"],
                         truncated=["cut.example"], wrong_id=["forged.example"]) as running:
        yield running


@pytest.fixture
def machine(request, peer):
    """conftest's machine, with ``peer`` handed out by DHCP as the DNS server (its real port)."""
    marker = request.node.get_closest_marker("machine")
    options = dict(dns_servers=[peer.address])
    options.update(marker.kwargs if marker else {})
    booted = _machine.boot(conftest.machine_config(**options))
    yield booted
    crashes = list(booted.firmware.crashes)
    ledger = booted.firmware.ledger()
    booted.shutdown()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)
    leaked = dict((k, v) for k, v in ledger.items() if v)
    assert not leaked, "firmware still holds %r after the test" % leaked


@pytest.fixture
def quick():
    """Short resolver timeouts for the tests that wait for silence."""
    saved = dns.TIMEOUT, dns.ATTEMPTS, dns.MAX_CACHE_TTL
    dns.TIMEOUT, dns.ATTEMPTS = 0.3, 1
    yield
    dns.TIMEOUT, dns.ATTEMPTS, dns.MAX_CACHE_TTL = saved


@pytest.mark.parametrize("firmware_dns4", [WITH_DNS4, OWN_CLIENT])
def test_name_to_address_with_and_without_dns4(net, peer, firmware_dns4, monkeypatch):
    assert ("dns4" in net.drivers) == firmware_dns4
    if firmware_dns4:
        def own_client(*args):
            raise AssertionError("DNS4 should have answered %r" % (args,))
        monkeypatch.setattr(dns, "_query_servers", own_client)
    assert dns.resolve("labserver.example") == LAB
    answer_ = dns.lookup("host.example")
    assert answer_.addresses == ["127.0.0.10", "127.0.0.11"]
    assert ("labserver.example", dns.TYPE_A) in peer.queries
    with pytest.raises(errors.gaierror) as caught:
        dns.resolve("nosuch.example")
    assert caught.value.args == (dns.EAI_NONAME, "Name or service not known")
    assert udp.live_endpoints() == 0


@pytest.mark.parametrize("firmware_dns4", [WITH_DNS4, OWN_CLIENT])
def test_reverse_lookup_is_a_ptr_query(net, peer, firmware_dns4):
    assert dns.reverse(LAB) == ("localhost", [])  # the hosts table first
    assert dns.reverse("127.0.0.10") == ("host.example", [])
    with pytest.raises(errors.herror) as caught:
        dns.reverse("127.0.0.99")
    assert caught.value.args == (dns.HOST_NOT_FOUND, "Unknown host")


@pytest.mark.machine(dns4=False)
def test_cname_chain_gives_canonical_name_and_aliases(net, peer):
    assert dns.lookup("www.example") == dns.Answer("host.example", ["www.example", "front.example"],
                                                   ["127.0.0.10", "127.0.0.11"])
    with pytest.raises(errors.gaierror) as caught:
        dns.lookup("dangling.example")  # the chain's target is re-queried: NXDOMAIN
    assert caught.value.args[0] == dns.EAI_NONAME
    assert ("other.example", dns.TYPE_A) in peer.queries
    with pytest.raises(errors.gaierror) as caught:
        dns.lookup("noaddress.example")
    assert caught.value.args == (dns.EAI_NODATA, "No address associated with hostname")


@pytest.mark.machine(dns4=False)
@pytest.mark.parametrize("name, code", [("silent.example", dns.EAI_AGAIN), ("forged.example", dns.EAI_AGAIN),
                                        ("broken.example", dns.EAI_AGAIN), ("cut.example", dns.EAI_FAIL)])
def test_failures_map_to_glibc_codes(net, peer, quick, name, code):
    start = events.clock()
    with pytest.raises(errors.gaierror) as caught:
        dns.resolve(name)
    assert caught.value.args == (code, dns.EAI_MESSAGES[code])
    assert events.clock() - start < 3


@pytest.mark.machine(dns4=True)
def test_dns4_timeout_falls_back_to_the_other_servers(net, peer, quick):
    # docs/edk2.md section 6.2: EDK2's DnsDxe asks only DnsServerList[0]; bitsnet asks the rest itself.
    mute = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    mute.bind(("127.0.0.4", 0))
    net.nic.dns_ports["127.0.0.4"] = mute.getsockname()[1]
    dns.set_servers(["127.0.0.4", LAB])
    start = events.clock()
    assert dns.resolve("labserver.example") == LAB
    assert events.clock() - start < 8
    assert mute.recvfrom(512)  # DNS4 did ask the first server
    mute.close()


@pytest.mark.machine(dns4=False)
def test_several_servers_silent_first(net, peer, quick):
    mute = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    mute.bind(("127.0.0.4", 0))
    mute.settimeout(5)
    net.nic.dns_ports["127.0.0.4"] = mute.getsockname()[1]
    dns.set_servers(["127.0.0.4", LAB])
    assert dns.resolve("labserver.example") == LAB
    assert dnspeer.parse_question(mute.recvfrom(512)[0])[2] == "labserver.example"
    mute.close()


@pytest.mark.machine(dns4=False)
def test_answers_are_cached_for_their_ttl_and_hosts_come_first(net, peer, quick):
    dns.resolve("labserver.example")
    asked = len(peer.queries)
    assert dns.resolve("LABSERVER.example.") == LAB and len(peer.queries) == asked  # from the cache
    dns.MAX_CACHE_TTL = 0.2
    dns.reset()
    dns.resolve("labserver.example")
    time.sleep(0.3)
    dns.resolve("labserver.example")
    assert len(peer.queries) == asked + 2  # expired: asked again
    dns.hosts.add("10.9.8.7", "labserver.example")
    try:
        assert dns.resolve("labserver.example") == "10.9.8.7"
    finally:
        dns.hosts.clear()


@pytest.mark.machine(dns4=False, static=True, dns_servers=[])
def test_no_dns_server_means_no_name(net):
    with pytest.raises(errors.gaierror) as caught:
        dns.resolve("labserver.example")
    assert caught.value.args[0] == dns.EAI_NONAME
    assert dns.resolve("localhost") == "127.0.0.1"


@pytest.mark.machine(dns4=False)
def test_resolve_then_connect_by_name(net, peer):
    from peers import EchoPeer
    from bitsnet import tcp
    with EchoPeer() as echo:
        ep = tcp.TcpEndpoint()
        ep.connect_start((dns.resolve("labserver.example"), echo.port))
        assert wait(lambda: not ep.connecting, ep) and ep.connected
        ep.close()


class _NoIdnaText(type(u"")):
    """Text whose "idna" codec is missing, as in BITS (no stringprep for encodings.idna)."""

    def encode(self, encoding="ascii", errors="strict"):
        if encoding == "idna":
            raise LookupError("unknown encoding: idna")
        return type(u"")(self).encode(encoding, errors)


@pytest.mark.parametrize("name", [u"labserver.example", u"b\u00fccher.example", u"\u4f8b\u3002\u30c6\u30b9\u30c8",
                                  u"M\u00dcNCHEN.example"])
def test_host_names_are_encoded_without_the_idna_codec(name):
    # As with the codec (nameprep lower-cases): "xn--" + punycode for each non-ASCII label.
    expected = str(name.lower().encode("idna").decode("ascii"))
    assert dns.to_ascii(_NoIdnaText(name)) == expected
    assert dns.to_ascii(name).lower() == expected


def test_text_host_names_resolve_without_the_idna_codec():
    from bitsnet import _socket
    assert _socket.gethostbyname(_NoIdnaText(u"localhost")) == "127.0.0.1"
    assert _socket.gethostbyname(u"localhost") == "127.0.0.1"


@pytest.mark.machine(dns4=False)
def test_own_client_queries_come_from_random_source_ports(net, peer):
    # RFC 5452: a forger must guess the source port as well as the id.
    dns.resolve("labserver.example")
    dns.reset()
    dns.resolve("labserver.example")
    ports = [port for _address, port in peer.clients]
    assert len(ports) == 2 and ports[0] != ports[1]
    assert all(dns.SOURCE_PORTS[0] <= port <= dns.SOURCE_PORTS[1] for port in ports)
    assert udp.live_endpoints() == 0
