"""bitsnet.entropy: every source in its order -- the firmware's EFI_RNG_PROTOCOL (simulated, as
OVMF with RngDxe has it), RDRAND (the machine-code stub, run on this host's CPU), the host's
os.urandom, the weak mix -- falling back when one fails, and the API the other modules use."""

from __future__ import print_function

import binascii
import collections
import ctypes
import itertools
import mmap
import platform
import sys
import types

import pytest

from bitsnet import dns, entropy, errors

pytest_plugins = ["helpers"]  # the ``net`` fixture


@pytest.fixture(autouse=True)
def fresh_choice():
    entropy.reset()
    yield
    entropy.reset()


def check_api():
    """The API behaves whatever the source."""
    assert entropy.random_bytes(0) == b""
    for n in (1, 7, 8, 33, 100):
        assert len(entropy.random_bytes(n)) == n
    assert entropy.random_bytes(32) != entropy.random_bytes(32)
    assert entropy.getrandbits(0) == 0
    for k in (1, 5, 16, 63, 64, 65):
        assert 0 <= entropy.getrandbits(k) < 2 ** k
    assert max(entropy.getrandbits(16) for _ in range(64)) >= 2 ** 12  # high bits are used
    counts = collections.Counter(entropy.randbelow(3) for _ in range(600))
    assert set(counts) == set([0, 1, 2]) and min(counts.values()) > 120
    with pytest.raises(ValueError):
        entropy.randbelow(0)


def test_on_a_host_machine_without_rng_it_is_os_urandom(net):
    assert entropy.source() == "os.urandom" and entropy.strong()
    assert any(reason.startswith("RngProtocol: no EFI_RNG_PROTOCOL") for reason in entropy.skipped())
    check_api()


@pytest.mark.machine(rng=True)
def test_the_firmware_rng_comes_first(net):
    assert entropy.source() == "EFI_RNG_PROTOCOL" and entropy.strong()
    before = net.rng.calls
    check_api()
    assert net.rng.calls > before + 10


@pytest.mark.machine(rng=True)
def test_a_firmware_rng_that_fails_is_passed_over(net):
    net.rng.fail = 0x8000000000000006  # EFI_NOT_READY: no entropy yet
    assert entropy.source() == "os.urandom"
    assert any("GetRNG returned status 0x8000000000000006" in reason for reason in entropy.skipped())


@pytest.mark.machine(rng=True)
def test_a_source_that_stops_working_hands_over_to_the_next(net):
    assert entropy.source() == "EFI_RNG_PROTOCOL"
    net.rng.fail = 0x8000000000000007  # EFI_DEVICE_ERROR
    assert len(entropy.random_bytes(16)) == 16
    assert entropy.source() == "os.urandom"


def test_the_weak_mix_without_bits(net):
    entropy.reset([entropy.WeakMix])
    assert entropy.source().startswith("weak mix: ") and not entropy.strong()
    assert "the clock" in entropy.source()
    check_api()


def test_the_weak_mix_names_what_it_read(net, monkeypatch):
    ticks = itertools.count(10 ** 9, 7)
    fake_bits = types.ModuleType("bits")
    fake_bits.rdtsc = lambda: next(ticks)
    fake_bits.cpuid = lambda apicid, eax, ecx=0: None
    monkeypatch.setitem(sys.modules, "bits", fake_bits)
    entropy.reset([entropy.WeakMix])
    assert entropy.source().startswith("weak mix: TSC jitter, ")
    check_api()


def fake_bits_cpu(rdrand):
    module = types.ModuleType("bits")
    result = collections.namedtuple("cpuid_result", "eax ebx ecx edx")
    module.bsp_apicid = lambda: 0
    module.cpuid = lambda apicid, eax, ecx=0: result(0, 0, (1 << 30) if rdrand else 0, 0)
    return module


def test_rdrand_is_skipped_without_bits_or_without_the_cpuid_bit(monkeypatch):
    with pytest.raises(entropy.Unavailable) as caught:
        entropy.Rdrand()
    assert "only used in BITS" in str(caught.value)
    monkeypatch.setitem(sys.modules, "bits", fake_bits_cpu(rdrand=False))
    with pytest.raises(entropy.Unavailable) as caught:
        entropy.Rdrand()
    assert "CPUID.1:ECX[30] = 0" in str(caught.value)


def host_has_rdrand():
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open("/proc/cpuinfo") as info:
            return " rdrand" in info.read()
    except IOError:
        return False


@pytest.mark.skipif(not host_has_rdrand(), reason="this CPU has no RDRAND")
def test_the_rdrand_stub_runs_on_this_cpu():
    # The very bytes BITS puts in its EfiLoaderCode page, run from an executable mmap here.
    page = mmap.mmap(-1, entropy.PAGE_SIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    try:
        source = entropy.Rdrand(has_rdrand=True, page=address,
                                function=lambda a: ctypes.cast(a, ctypes.CFUNCTYPE(ctypes.c_uint64)))
        values = [source.read(8) for _ in range(8)]
        assert len(set(values)) == 8 and all(len(v) == 8 for v in values)
        assert len(source.read(20)) == 20
        entropy.reset([lambda: source])
        check_api()
        source = None  # the ctypes view into the page goes before the page
    finally:
        entropy.reset()
        import gc
        gc.collect()
        page.close()


def test_dns_query_ids_come_from_entropy(monkeypatch):
    asked = []
    monkeypatch.setattr(entropy, "getrandbits", lambda k: asked.append(k) or (0x5a5a if k == 16 else 1))
    seen = []
    monkeypatch.setattr(dns, "_exchange", lambda ep, query, server, ident, q, t, deadline=None: seen.append(ident))

    ports = []

    class FakeEndpoint(object):
        def bind(self, address):
            ports.append(address[1])

        def close(self):
            pass

    from bitsnet import udp
    monkeypatch.setattr(udp, "UdpEndpoint", FakeEndpoint)
    with pytest.raises(errors.gaierror):
        dns._query_servers("name.example", dns.TYPE_A, ["127.0.0.1"])
    assert [k for k in asked if k == 16] == [16] * dns.ATTEMPTS and seen == [0x5a5a] * dns.ATTEMPTS
    assert ports == [dns.SOURCE_PORTS[0] + 1] * dns.ATTEMPTS  # source ports from entropy too


def fake_rdrand(values):
    """An Rdrand whose CPU answers ``values`` (an iterator of 64-bit ints, CF always set): the
    stub's page is a plain buffer, and the "call" stores the next value where the stub would."""
    page = ctypes.create_string_buffer(entropy.PAGE_SIZE)
    address = ctypes.addressof(page)

    def function(at):
        result = ctypes.c_uint64.from_address(at + entropy.RDRAND_RESULT)

        def call():
            result.value = next(values)
            return 1
        return call
    source = entropy.Rdrand(has_rdrand=True, page=address, function=function)
    source.buffer = page  # kept alive with the source
    return source


def test_an_rdrand_answering_a_constant_is_refused_at_start_up(net, monkeypatch):
    # The review: a CPU whose RDRAND returns all ones with CF set (a known erratum) gave a
    # constant token with strong() True. Linux's start-up test refuses it; so does ours.
    for stuck in (0xFFFFFFFFFFFFFFFF, 0, 0x1234):
        with pytest.raises(entropy.Unavailable) as caught:
            fake_rdrand(itertools.repeat(stuck))
        assert "start-up test" in str(caught.value)
    # Mostly constant (fewer than RDRAND_MIN_CHANGES changes in RDRAND_SAMPLES): refused too.
    with pytest.raises(entropy.Unavailable):
        fake_rdrand(iter([1, 1, 1, 2, 2, 2, 3, 3] + list(range(10, 100))))
    # In the chain as BITS runs it: RDRAND refused, the next source taken, the reason kept.
    monkeypatch.setitem(sys.modules, "bits", fake_bits_cpu(rdrand=True))
    monkeypatch.setattr(entropy, "_efi_executable_page", lambda: ctypes.addressof(page))
    page = ctypes.create_string_buffer(entropy.PAGE_SIZE)
    monkeypatch.setattr(entropy, "_efi_function", lambda at: lambda: (
        setattr(ctypes.c_uint64.from_address(at + entropy.RDRAND_RESULT), "value", 0xFFFFFFFFFFFFFFFF) or 1))
    entropy.reset([entropy.Rdrand, entropy.WeakMix])
    assert entropy.source().startswith("weak mix") and not entropy.strong()
    assert any("RDRAND failed its start-up test" in reason for reason in entropy.skipped())


def test_rdrand_output_goes_through_the_pool_and_a_later_fault_drops_it(net):
    counter = itertools.count(0x0123456789abcdef, 0x1111)
    source = fake_rdrand(counter)
    data = source.read(64)
    assert len(data) == 64 and len(set(data[i:i + 8] for i in range(0, 64, 8))) == 8
    # Raw RDRAND would be consecutive counter values; the pool's output is not.
    words = [int(binascii.hexlify(data[i:i + 8][::-1]), 16) for i in range(0, 64, 8)]
    assert all(b - a != 0x1111 for a, b in zip(words, words[1:])), words
    entropy.reset([lambda: source, entropy.WeakMix])
    assert entropy.source() == "RDRAND" and entropy.strong()
    check_api()
    # The CPU turns bad (the same value twice, or all ones): RDRAND is dropped, the next source
    # answers, and nothing of the stuck values is handed out.
    stuck = itertools.repeat(0xFFFFFFFFFFFFFFFF)
    source.call = lambda: (setattr(source.result, "value", next(stuck)) or 1)
    assert len(entropy.random_bytes(16)) == 16
    assert entropy.source().startswith("weak mix") and not entropy.strong()
    assert any("RDRAND returned 0xffffffffffffffff" in reason for reason in entropy.skipped())
