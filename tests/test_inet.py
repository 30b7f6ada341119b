"""bitsnet.inet, the one place where IPv4 text becomes bytes: each strictness against the host's
own glibc (inet_pton, getaddrinfo's numeric host, inet_aton), the cases where the old parsers
disagreed ("010", "1.2.3", "0x7f.1"), and the netmask helpers. No simulator: nothing here touches
the firmware."""

from __future__ import print_function

import random
import socket as host
import sys

import pytest

from bitsnet import _socket as bs
from bitsnet import inet

SEED = 22
CASES = 20000
ALPHABET = "0123456789xX.abf _\n"  # ASCII only: CPython's getaddrinfo applies IDNA to other text

LINUX = sys.platform.startswith("linux")


def dotted(packed):
    return None if packed is None else host.inet_ntoa(packed)


@pytest.mark.parametrize("text, pton, numeric_host, aton", [
    ("010", None, "0.0.0.8", "0.0.0.8"),  # one part, octal
    ("010.0.0.1", None, "8.0.0.1", "8.0.0.1"),  # no leading zeros in pton; octal elsewhere
    ("1.2.3", None, "1.2.0.3", "1.2.0.3"),  # the last part fills the bytes left
    ("0x7f.1", None, "127.0.0.1", "127.0.0.1"),
    ("127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1"),
    ("1.2.3.4 junk", None, None, "1.2.3.4"),  # inet_aton ignores what follows whitespace
    ("0x", None, None, None),  # strtoul reads "0"; the "x" is left over
    ("01_0", None, None, None),  # not Python's int() syntax
    (u"\u0661.2.3.4", None, None, None),  # digits are ASCII digits only
])
def test_each_strictness_takes_its_own_forms(text, pton, numeric_host, aton):
    assert dotted(inet.parse_ipv4(text, strict=True)) == pton
    assert dotted(inet.parse_ipv4(text, strict=False)) == numeric_host
    assert dotted(inet.parse_aton(text)) == aton
    if all(ord(c) < 128 for c in text):  # (2.7: str() of other unicode fails, as before)
        assert inet.ipv4_text(text, strict=False) == numeric_host


def test_socket_functions_use_the_forms_cpython_does():
    assert bs.inet_aton("0x7f.1") == b"\x7f\x00\x00\x01"
    assert bs.inet_aton("1.2.3.4 junk") == b"\x01\x02\x03\x04"
    with pytest.raises(bs.error):
        bs.inet_pton(bs.AF_INET, "010.0.0.1")
    assert bs.gethostbyname("0x7f.1") == "127.0.0.1"
    assert bs.gethostbyname("010.0.0.1") == "8.0.0.1"
    assert bs.getaddrinfo("127.1", 80, bs.AF_INET, bs.SOCK_STREAM)[0][4] == ("127.0.0.1", 80)


def _texts():
    rng = random.Random(SEED)
    out = ["", "0", "00", "0x0", "255.255.255.255", "4294967295", "4294967296", "1.16777215", "1.16777216",
           "1.2.65535", "1.2.65536", "0377.0xff.255.0", "1.2.3.4.", "1..2.3", " 1.2.3.4", "1.2.3.4\t"]
    for _ in range(CASES):
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14))))
    return out


def _host(call, text):
    try:
        return call(text)
    except (host.error, UnicodeError, ValueError):
        return None


@pytest.mark.skipif(not LINUX, reason="the reference is glibc")
def test_strict_is_glibc_inet_pton():
    for text in _texts():
        assert inet.parse_ipv4(text, strict=True) == _host(lambda t: host.inet_pton(host.AF_INET, t), text), text


@pytest.mark.skipif(not LINUX, reason="the reference is glibc")
def test_not_strict_is_glibc_getaddrinfo_numeric_host():
    def numeric(text):
        address = host.getaddrinfo(text, None, host.AF_INET, 0, 0, host.AI_NUMERICHOST)[0][4][0]
        return host.inet_aton(address)
    for text in _texts():
        if "\0" in text:
            continue
        assert inet.parse_ipv4(text, strict=False) == _host(numeric, text), text


@pytest.mark.skipif(not LINUX, reason="the reference is glibc")
def test_aton_is_glibc_inet_aton():
    for text in _texts():
        assert inet.parse_aton(text) == _host(host.inet_aton, text), text


def test_netmasks():
    assert inet.prefix_length("255.255.255.0") == 24
    assert inet.prefix_length("0.0.0.0") == 0
    assert inet.netmask_text(24) == "255.255.255.0"
    assert inet.netmask_text("16") == "255.255.0.0"
    assert inet.netmask_text(0) == "0.0.0.0"
    assert inet.netmask_text("255.255.255.128") == "255.255.255.128"
    assert inet.ipv4_int("10.0.2.15") == 0x0a00020f
    with pytest.raises(ValueError):
        inet.ipv4_int("010.0.2.15")


def test_multicast_and_broadcast():
    assert inet.is_multicast("224.0.0.1") and inet.is_multicast("239.255.255.255")
    assert inet.is_multicast("255.255.255.255") and inet.is_multicast("ff02::1")
    assert not inet.is_multicast("223.255.255.255") and not inet.is_multicast("240.0.0.1")
    assert not inet.is_multicast("fe80::1") and not inet.is_multicast("127.0.0.1")


@pytest.mark.skipif(not LINUX, reason="the reference is glibc")
def test_getaddrinfo_keeps_literal_answers_and_hands_out_copies():
    """getaddrinfo keeps its answer for an address literal with a port number (netdb's table):
    the answer stays glibc's, a caller's changes to the list it got do not reach the next
    caller, names are not kept, and an unhashable argument is still the TypeError it was."""
    from bitsnet import netdb
    for text in ("10.0.2.2", "127.1", "0x7f.0.0.1"):
        expected = [tuple(entry) for entry in host.getaddrinfo(text, 80, 0, host.SOCK_STREAM)]
        first = bs.getaddrinfo(text, 80, 0, bs.SOCK_STREAM)
        assert first == expected
        first.append("junk")
        del first[0]
        assert bs.getaddrinfo(text, 80, 0, bs.SOCK_STREAM) == expected
        assert (text, 80, 0, bs.SOCK_STREAM, 0, 0) in netdb._literal_answers
    bs.getaddrinfo("localhost", 80, 0, bs.SOCK_STREAM)
    assert ("localhost", 80, 0, bs.SOCK_STREAM, 0, 0) not in netdb._literal_answers
    with pytest.raises(TypeError):
        bs.getaddrinfo("10.0.2.2", 80, [], bs.SOCK_STREAM)
