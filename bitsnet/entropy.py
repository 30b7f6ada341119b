"""The one entropy source of bitsnet: random bytes for secrets and unpredictable choices.

BITS has no ``random`` (an empty stub), no ``os.urandom`` and no ``_random``, and its ``hash()``
is not randomized (docs/entropy.md). This module finds the best source the machine has, once,
at the first call, in this order:

  "EFI_RNG_PROTOCOL"  the firmware's RNG (UEFI "Random Number Generator Protocol", GUID
                      3152bca5-eade-433d-862e-c01cdc291f44), GetRNG with the default algorithm
  "RDRAND"            the CPU's generator, in BITS only (CPUID.1:ECX[30] through BITS's ``bits``
                      module), run as an 31-byte machine-code stub in an EfiLoaderCode page;
                      health-checked at set-up and at every value (a CPU whose RDRAND answers a
                      constant with CF set is refused), and fed through a SHA-256 pool, never
                      handed out raw -- what Linux does (docs/entropy.md)
  "os.urandom"        the operating system's, on a host with a real OS only (the simulator)
  "weak mix: ..."     none of these: a SHA-256 pool fed with what varies -- bits.rdtsc() jitter
                      around EFI calls, RuntimeServices GetTime, BootServices
                      GetNextMonotonicCount, the clock -- and stirred again at every call.
                      Unpredictable enough for DNS query ids against an off-path guesser; not
                      for keys. ``strong()`` says which kind this is.

API (the other modules use only this):

  ``random_bytes(n)``  n bytes
  ``getrandbits(k)``   an int of k random bits
  ``randbelow(n)``     an int in [0, n), uniform (rejection sampling, no modulo bias)
  ``source()``         which source is in use (the strings above; the weak mix names its inputs)
  ``strong()``         whether it is a real generator (not the weak mix)
  ``rng_algorithms()`` what the firmware's EFI_RNG_PROTOCOL offers (GetInfo), for the selftest

A source that fails later (GetRNG answers an error, RDRAND keeps reporting no data) is dropped
and the next one taken, so a call never fails. Imports only what BITS has (hashlib has sha256
there); ``bits`` and the EFI tables are optional.
"""

import binascii
import ctypes
import hashlib
import os
import struct
import uuid

from bitsnet import clock

EFI_RNG_PROTOCOL_GUID = uuid.UUID("3152bca5-eade-433d-862e-c01cdc291f44")
RDRAND_RETRIES = 10  # Intel's advice: RDRAND may report "no data" transiently; 10 tries
# Linux's start-up test (x86_init_rdrand): 8 values, at least 5 of them different from the one
# before, else RDRAND is not used. A CPU with the known erratum (all ones, CF set) fails it.
RDRAND_SAMPLES = 8
RDRAND_MIN_CHANGES = 5
RDRAND_STUCK = (0, 0xFFFFFFFFFFFFFFFF)  # values a healthy RDRAND returns with chance 2**-63
POOL_WORDS = 4  # RDRAND values (64 bits each) fed into the pool at least per read: 256 bits
WEAK_SAMPLES = 32  # timing samples gathered when the weak mix is set up

# RDRAND stub (x86-64; uses only RAX and RCX, volatile in both the Microsoft and the SysV ABI,
# and takes no argument, so it works whichever convention efi.FUNC calls with):
#    0  mov ecx, 10              B9 0A 00 00 00
#    5  rdrand rax               48 0F C7 F0
#    9  jc 18                    72 07
#   11  dec ecx                  FF C9
#   13  jnz 5                    75 F6
#   15  xor eax, eax             31 C0          ; ten failures: return 0
#   17  ret                      C3
#   18  mov [rip+0xE7], rax      48 89 05 E7 00 00 00   ; 25 + 0xE7 = RDRAND_RESULT
#   25  mov eax, 1               B8 01 00 00 00          ; return 1: a value was stored
#   30  ret                      C3
RDRAND_STUB = binascii.unhexlify(
    "b90a000000" "480fc7f0" "7207" "ffc9" "75f6" "31c0" "c3" "488905e7000000" "b801000000" "c3")
RDRAND_RESULT = 0x100  # offset of the stored value in the stub's page
PAGE_SIZE = 4096
EfiLoaderCode = 1  # EFI_MEMORY_TYPE: BITS's LoaderCode pages are executable (docs/entropy.md)
AllocateAnyPages = 0


class EFI_RNG_PROTOCOL(ctypes.Structure):
    """UEFI's EFI_RNG_PROTOCOL: GetInfo, GetRNG."""


def _rng_fields():
    import efi
    this = ctypes.POINTER(EFI_RNG_PROTOCOL)
    EFI_RNG_PROTOCOL._fields_ = [
        ("GetInfo", efi.FUNC(this, ctypes.POINTER(efi.UINTN), ctypes.c_void_p)),
        ("GetRNG", efi.FUNC(this, ctypes.c_void_p, efi.UINTN, ctypes.c_void_p)),
    ]


# EFI_RNG_PROTOCOL algorithms (UEFI specification, "EFI RNG Algorithm Definitions"; ARM RNDR from
# MdePkg.dec), by the names rng_algorithms() gives them.
RNG_ALGORITHMS = {
    uuid.UUID("a7af67cb-603b-4d42-ba21-70bfb6293f96"): "SP800-90 Hash-256",
    uuid.UUID("c5149b43-ae85-4f53-9982-b94335d3a9e7"): "SP800-90 HMAC-256",
    uuid.UUID("44f0de6e-4d8c-4045-a8c7-4dd168856b9e"): "SP800-90 CTR-256",
    uuid.UUID("63c4785a-ca34-4012-a3c8-0b6a324f5546"): "X9.31 3DES",
    uuid.UUID("acd03321-777e-4d3d-b1c8-20cfd88820c9"): "X9.31 AES",
    uuid.UUID("e43176d7-b6e8-4827-b784-7ffdc4b68561"): "raw",
    uuid.UUID("43d2fde3-9d4e-4d79-0296-a89bca780841"): "ARM RNDR",
}
GUID_SIZE = 16


class Unavailable(Exception):
    """A source this machine does not have (or that stopped working)."""


# --- the sources ---------------------------------------------------------------------------------
class RngProtocol(object):
    """EFI_RNG_PROTOCOL on the first handle that carries it."""

    name = "EFI_RNG_PROTOCOL"
    strong = True

    def __init__(self):
        try:
            import efi
        except ImportError:
            raise Unavailable("no efi module")
        try:
            handles = efi.locate_handles(EFI_RNG_PROTOCOL_GUID)
        except Exception:  # EDK2 quirk: OVMF has no EFI_RNG_PROTOCOL (EFI_NOT_FOUND; docs/entropy.md)
            raise Unavailable("no EFI_RNG_PROTOCOL")
        if not len(handles):
            raise Unavailable("no EFI_RNG_PROTOCOL")
        if not hasattr(EFI_RNG_PROTOCOL, "_fields_"):
            _rng_fields()
        self.protocol = EFI_RNG_PROTOCOL.from_address(efi.get_protocol(handles[0], EFI_RNG_PROTOCOL_GUID))
        self.read(16)  # fail now, not in the middle of a caller's request

    def read(self, n):
        buffer = ctypes.create_string_buffer(n)
        status = self.protocol.GetRNG(ctypes.byref(self.protocol), None, n, buffer)
        if status != 0:
            raise Unavailable("GetRNG returned status 0x%x" % status)
        return buffer.raw[:n]


def _bits_module():
    try:
        import bits  # BITS's own module (CPUID, TSC, MSRs); absent on a host
    except ImportError:
        return None
    return bits if hasattr(bits, "cpuid") else None


def _efi_executable_page():
    """One EfiLoaderCode page from AllocatePages (kept for the life of the boot)."""
    import efi
    bs = efi.system_table.BootServices.contents
    address = efi.EFI_PHYSICAL_ADDRESS(0)
    status = bs.AllocatePages(AllocateAnyPages, EfiLoaderCode, 1, ctypes.byref(address))
    if status != 0:
        raise Unavailable("AllocatePages(EfiLoaderCode) returned 0x%x" % status)
    return address.value


def _efi_function(address):
    import efi
    return ctypes.cast(address, efi.FUNC(ret=efi.UINT64))


class Pool(object):
    """A SHA-256 pool: ``feed`` mixes bytes in; ``extract`` hands out blocks of SHA-256 over the
    pool and a counter, then feeds the last block back, so what was handed out cannot be
    derived from the pool afterwards."""

    def __init__(self, label):
        self.state = hashlib.sha256(label)
        self.counter = 0

    def feed(self, data):
        self.state.update(data)

    def extract(self, n):
        out = []
        while sum(len(block) for block in out) < n:
            self.counter += 1
            block = self.state.copy()
            block.update(struct.pack("<Q", self.counter))
            out.append(block.digest())
        self.state.update(out[-1])
        return b"".join(out)[:n]


class Rdrand(object):
    """RDRAND through a machine-code stub; ``page`` and ``function`` are injectable (tests run
    the same stub on a host CPU from an mmap'ed page, or a fake CPU's values).

    What Linux does with RDRAND, done here: a start-up sanity test (x86_init_rdrand: of
    ``RDRAND_SAMPLES`` values at least ``RDRAND_MIN_CHANGES`` differ from the one before), every
    later value checked too (equal to the one before, all zeros or all ones: RDRAND is dropped
    and the next source takes over), and the values only ever feed a pool whose SHA-256 output
    is what callers get: a generator that turns bad later cannot give out its raw values."""

    name = "RDRAND"
    strong = True

    def __init__(self, has_rdrand=None, page=None, function=None):
        if has_rdrand is None:
            bits = _bits_module()
            if bits is None:
                raise Unavailable("no BITS bits module: RDRAND is only used in BITS")
            has_rdrand = bool(bits.cpuid(bits.bsp_apicid(), 1).ecx & (1 << 30))
        if not has_rdrand:
            raise Unavailable("the CPU has no RDRAND (CPUID.1:ECX[30] = 0)")
        self.page = _efi_executable_page() if page is None else page
        ctypes.memmove(self.page, RDRAND_STUB, len(RDRAND_STUB))
        self.call = (function or _efi_function)(self.page)
        self.result = ctypes.c_uint64.from_address(self.page + RDRAND_RESULT)
        self.pool = Pool(b"bitsnet RDRAND pool")
        self.previous = None
        samples = [self._value() for _ in range(RDRAND_SAMPLES)]
        changes = sum(1 for a, b in zip(samples, samples[1:]) if a != b)
        if changes < RDRAND_MIN_CHANGES or any(value in RDRAND_STUCK for value in samples):
            raise Unavailable("RDRAND failed its start-up test (%d of %d values changed; first 0x%x)"
                              % (changes, RDRAND_SAMPLES - 1, samples[0]))
        for value in samples:
            self.pool.feed(struct.pack("<Q", value))

    def _value(self):
        """One raw 64-bit value (Unavailable when RDRAND reports no data ten times)."""
        if self.call() != 1:
            raise Unavailable("RDRAND reported no data %d times" % RDRAND_RETRIES)
        return self.result.value

    def read(self, n):
        for _ in range(max(POOL_WORDS, (n + 7) // 8)):  # at least as many bits in as go out
            value = self._value()
            if value == self.previous or value in RDRAND_STUCK:  # the continuous test
                raise Unavailable("RDRAND returned 0x%x %s" % (
                    value, "twice in a row" if value == self.previous else "(stuck)"))
            self.previous = value
            self.pool.feed(struct.pack("<Q", value))
        return self.pool.extract(n)


class OsUrandom(object):
    """The host OS's generator (never in BITS: its os has no urandom)."""

    name = "os.urandom"
    strong = True

    def __init__(self):
        if not hasattr(os, "urandom"):
            raise Unavailable("no os.urandom")
        self.read(16)

    def read(self, n):
        return os.urandom(n)


class WeakMix(object):
    """SHA-256 over timing noise and firmware counters; stirred at every read."""

    strong = False

    def __init__(self):
        self.inputs = []
        self.bits = _bits_module()
        self.bs = self.rt = None
        try:
            import efi
            self.bs = efi.system_table.BootServices.contents
            self.rt = efi.system_table.RuntimeServices.contents
        except Exception:
            pass  # no EFI tables (or, in the simulator, no runtime services table)
        self.pool = Pool(b"bitsnet entropy pool")
        for _ in range(WEAK_SAMPLES):
            self._stir()
        self.name = "weak mix: " + ", ".join(self.inputs)

    def _tsc(self):
        return self.bits.rdtsc() if self.bits is not None else 0

    def _sample(self, label, function):
        """Feed the TSC before, ``function()``'s bytes, and the TSC after into the pool."""
        try:
            before = self._tsc()
            data = function()
            after = self._tsc()
        except Exception:
            return
        if data is None:
            return
        self.pool.feed(struct.pack("<QQ", before & 0xFFFFFFFFFFFFFFFF, after & 0xFFFFFFFFFFFFFFFF))
        self.pool.feed(data)
        if label not in self.inputs:
            self.inputs.append(label)

    def _get_time(self):
        import efi
        now = efi.EFI_TIME()
        if self.rt is None or self.rt.GetTime(ctypes.byref(now), None) != 0:
            return None
        return ctypes.string_at(ctypes.addressof(now), ctypes.sizeof(now))

    def _monotonic_count(self):
        count = ctypes.c_uint64(0)
        if self.bs is None or self.bs.GetNextMonotonicCount(ctypes.byref(count)) != 0:
            return None
        return struct.pack("<Q", count.value)

    def _stir(self):
        if self.bits is not None:
            self._sample("TSC jitter", lambda: b"")
        self._sample("GetTime", self._get_time)
        self._sample("GetNextMonotonicCount", self._monotonic_count)
        self._sample("the clock", lambda: ("%.6f" % clock.monotonic()).encode("ascii"))
        self.pool.feed(struct.pack("<Q", id(object()) & 0xFFFFFFFFFFFFFFFF))

    def read(self, n):
        self._stir()
        return self.pool.extract(n)


SOURCES = (RngProtocol, Rdrand, OsUrandom, WeakMix)  # the order of preference
_state = {"source": None, "order": None, "skipped": []}  # type: dict


def _current():
    if _state["source"] is None:
        for kind in _state["order"] or SOURCES:
            try:
                _state["source"] = kind()
                break
            except Unavailable as e:
                _state["skipped"].append("%s: %s" % (kind.__name__, e))
    return _state["source"]


def reset(sources=None):
    """Choose the source again at the next call, from ``sources`` (default: SOURCES). Tests."""
    _state.update(source=None, order=tuple(sources) if sources else None, skipped=[])


def random_bytes(n):
    # type: (int) -> bytes
    """``n`` random bytes from the best source the machine has."""
    if n <= 0:
        return b""
    while True:
        source_now = _current()
        try:
            return source_now.read(n)
        except Unavailable as e:  # it stopped working: the next source in the order takes over
            order = list(_state["order"] or SOURCES)
            later = order[order.index(type(source_now)) + 1:] if type(source_now) in order else []
            _state.update(source=None, order=tuple(later or [WeakMix]))
            _state["skipped"].append("%s: %s" % (source_now.name, e))


def getrandbits(k):
    # type: (int) -> int
    """An int with ``k`` random bits (0 <= result < 2**k)."""
    if k <= 0:
        return 0
    data = random_bytes((k + 7) // 8)
    return int(binascii.hexlify(data), 16) >> ((8 - k % 8) % 8)


def randbelow(n):
    # type: (int) -> int
    """A uniform int in [0, n)."""
    if n <= 0:
        raise ValueError("randbelow(n) needs n > 0")
    k = n.bit_length()
    while True:
        value = getrandbits(k)
        if value < n:
            return value


def rng_algorithms():
    """The algorithms the firmware's EFI_RNG_PROTOCOL reports (GetInfo), by name (an unknown one as
    its GUID), the default first; None when the firmware has no EFI_RNG_PROTOCOL; a one-item list
    "GetInfo: STATUS" when GetInfo fails."""
    try:
        import efi
        handles = list(efi.locate_handles(EFI_RNG_PROTOCOL_GUID))
    except Exception:  # ImportError (a host), EFI_NOT_FOUND (no RNG)
        return None
    if not handles:
        return None
    if not hasattr(EFI_RNG_PROTOCOL, "_fields_"):
        _rng_fields()
    protocol = EFI_RNG_PROTOCOL.from_address(efi.get_protocol(handles[0], EFI_RNG_PROTOCOL_GUID))
    size = efi.UINTN(8 * GUID_SIZE)
    for _ in range(2):  # EFI_BUFFER_TOO_SMALL says the size: one retry with that
        buffer = ctypes.create_string_buffer(size.value)
        status = protocol.GetInfo(ctypes.byref(protocol), ctypes.byref(size), buffer)
        if status != efi.EFI_BUFFER_TOO_SMALL:
            break
    if status != 0:
        return ["GetInfo: status 0x%x" % status]
    raw = buffer.raw[:size.value - size.value % GUID_SIZE]
    guids = [uuid.UUID(bytes_le=raw[i:i + GUID_SIZE]) for i in range(0, len(raw), GUID_SIZE)]
    return [RNG_ALGORITHMS.get(guid, str(guid)) for guid in guids]


def source():
    # type: () -> str
    """The source in use: "EFI_RNG_PROTOCOL", "RDRAND", "os.urandom" or "weak mix: ..."."""
    return _current().name


def strong():
    # type: () -> bool
    """Whether the source is a real random generator (not the weak mix)."""
    return _current().strong


def skipped():
    """Why the sources before the one in use were not taken (for the selftest and docs)."""
    _current()
    return list(_state["skipped"])
