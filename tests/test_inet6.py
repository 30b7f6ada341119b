"""inet_pton / inet_ntop for AF_INET6 (bitsnet/family.py, pure Python) against the host's own,
which is glibc's: every textual form (compressed, full, upper case, embedded IPv4, broken) and
every packed form (zero runs of each length and place, v4-mapped and v4-compatible).

A seeded generator makes the same large set on Python 2.7 and 3; on Python 3 hypothesis adds
shrinking searches. No simulator: these functions never touch the firmware."""

from __future__ import print_function

import random
import socket as host
import struct

import pytest

from bitsnet import _socket as bs
from bitsnet import family

try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # Python 2.7: the seeded sets below still run
    given = None

SEED = 9
PACKED_CASES = 20000
TEXT_CASES = 20000
MUTATIONS = "0123456789abcdefABCDEFg:.%::1.2 "


def outcome(call):
    """("ok", value) or the kind of exception, so that refusals compare too."""
    try:
        return ("ok", call())
    except ValueError:
        return ("ValueError",)
    except (host.error, bs.error, OSError):
        return ("error",)


def words_sample(rng):
    """Eight 16-bit groups biased towards zero runs, 1 and ffff (where the rules are)."""
    return [rng.choice((0, 0, 0, 1, 0xffff, rng.randrange(1 << 16))) for _ in range(8)]


def text_forms(rng, words):
    """Several spellings of one address, valid and not."""
    packed = struct.pack("!8H", *words)
    canonical = host.inet_ntop(host.AF_INET6, packed)
    full = ":".join("%x" % w for w in words)
    padded = ":".join("%04x" % w for w in words)
    dotted = ":".join("%x" % w for w in words[:6]) + ":%d.%d.%d.%d" % struct.unpack("!4B", packed[12:])
    forms = [canonical, canonical.upper(), full, padded, dotted]
    broken = rng.choice(forms)
    i = rng.randrange(len(broken) + 1)
    how = rng.randrange(4)
    if how == 0:
        broken = broken[:i] + rng.choice(MUTATIONS) + broken[i:]
    elif how == 1:
        broken = broken[:i] + broken[i + 1:]
    elif how == 2:
        broken = broken + ":" + rng.choice(("", "1", "::", "0.0.0.0"))
    else:
        broken = "".join(rng.choice(MUTATIONS) for _ in range(rng.randrange(1, 14)))
    return forms + [broken]


def test_ntop_formats_every_packed_form_as_glibc_does():
    rng = random.Random(SEED)
    for _ in range(PACKED_CASES):
        packed = struct.pack("!8H", *words_sample(rng))
        expected = host.inet_ntop(host.AF_INET6, packed)
        assert bs.inet_ntop(bs.AF_INET6, packed) == expected, packed
        assert bs.inet_pton(bs.AF_INET6, expected) == packed


def test_pton_accepts_and_refuses_what_glibc_does():
    rng = random.Random(SEED + 1)
    accepted = refused = 0
    for _ in range(TEXT_CASES // 6):
        for text in text_forms(rng, words_sample(rng)):
            theirs = outcome(lambda: host.inet_pton(host.AF_INET6, text))
            assert outcome(lambda: bs.inet_pton(bs.AF_INET6, text)) == theirs, text
            if theirs[0] == "ok":
                accepted += 1
            else:
                refused += 1
    assert accepted > TEXT_CASES // 2 and refused > TEXT_CASES // 20  # both sides were exercised


FIXED = [
    "::", "::1", "1::", "::ffff:1.2.3.4", "::1.2.3.4", "::0.0.0.2", "::ffff:0:1.2.3.4", "64:ff9b::1.2.3.4",
    "fe80::1", "FE80::ABCD:1", "2001:db8::", "2001:db8:0:0:1:0:0:1", "2001:0db8:0000:0000:0000:0000:0000:0001",
    "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "1::2:3:4:5:6:7", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
    "0:0:0:0:0:ffff:0:1", "1:0:0:1:0:0:0:1", "1:0:1:0:1:0:1:0", "0:0:1::", "::ffff:255.255.255.255",
    # refused by glibc
    ":::", "1:2:3:4:5:6:7:8:9", "12345::", "::g", "1::2::3", ":1::", "1::2:", "1:2:3:4:5:6:7:8::",
    "::1.2.3", "::1.2.3.4.5", "::256.1.1.1", "::01.2.3.4", "1.2.3.4", "", ":", "fe80::1%eth0", "[::1]",
    "::1.2.3.4:1", "1:2:3:4:5:6:7:1.2.3.4", " ::1", "::1 ", "0x1::", "::-1",
]


@pytest.mark.parametrize("text", FIXED)
def test_fixed_list_agrees_with_the_host(text):
    theirs = outcome(lambda: host.inet_pton(host.AF_INET6, text))
    assert outcome(lambda: bs.inet_pton(bs.AF_INET6, text)) == theirs
    if theirs[0] == "ok":
        assert bs.inet_ntop(bs.AF_INET6, theirs[1]) == host.inet_ntop(host.AF_INET6, theirs[1])


def test_argument_errors_match_cpython():
    for bad in (b"", b"\0" * 15, b"\0" * 17):
        assert outcome(lambda: bs.inet_ntop(bs.AF_INET6, bad)) == outcome(lambda: host.inet_ntop(host.AF_INET6, bad))
    with pytest.raises(TypeError):
        bs.inet_pton(bs.AF_INET6, 1)
    with pytest.raises(TypeError):
        bs.inet_ntop(bs.AF_INET6, u"::1")


def test_family_helpers():
    assert family.ipv6_literal("FE80:0::1%eth0") == "fe80::1"
    assert family.of_address("::1") is family.INET6 and family.of_address("10.0.0.1") is family.INET
    assert family.of_address("10.0.0") is None and family.of_address("::g") is None
    assert family.INET6.sockaddr("::1", 80) == ("::1", 80, 0, 0) and family.INET.sockaddr("a", 1) == ("a", 1)
    assert family.INET6.efi_text(family.INET6.efi_address("2001:db8::1")) == "2001:db8::1"


if given is not None:
    SETTINGS = settings(max_examples=500, deadline=None)

    @SETTINGS
    @given(st.binary(min_size=16, max_size=16))
    def test_property_ntop_agrees_with_the_host(packed):
        assert bs.inet_ntop(bs.AF_INET6, packed) == host.inet_ntop(host.AF_INET6, packed)

    @SETTINGS
    @given(st.lists(st.sampled_from([0, 1, 0xffff, 0x7f00, 0xabcd]), min_size=8, max_size=8))
    def test_property_zero_runs_agree_with_the_host(words):
        packed = struct.pack("!8H", *words)
        text = host.inet_ntop(host.AF_INET6, packed)
        assert bs.inet_ntop(bs.AF_INET6, packed) == text
        assert bs.inet_pton(bs.AF_INET6, text) == packed

    @SETTINGS
    @given(st.text(alphabet="0123456789abcdefABCDEF:.", max_size=45))
    def test_property_pton_agrees_with_the_host(text):
        assert outcome(lambda: bs.inet_pton(bs.AF_INET6, text)) == \
            outcome(lambda: host.inet_pton(host.AF_INET6, text))
