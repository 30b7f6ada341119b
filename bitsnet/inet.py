"""IP address text <-> packed bytes, the one place: glibc's rules, in pure Python.

Parsers return None for text that is not an address; they never raise. Which forms are taken
is always named by the caller:

``parse_ipv4(text, strict=True)``   inet_pton(AF_INET): exactly "a.b.c.d", each part decimal
                                    0..255 without leading zeros ("010" is refused).
``parse_ipv4(text, strict=False)``  what glibc's getaddrinfo and gethostbyname take for a
                                    numeric host (its ``__inet_aton_exact``): 1 to 4 parts, each
                                    C-style decimal, 0x hex or 0 octal ("010" is 8), the last
                                    filling the bytes left ("1.2.3" is 1.2.0.3, "0x7f.1"
                                    127.0.0.1), nothing after it.
``parse_aton(text)``                inet_aton itself: as strict=False, but anything after ASCII
                                    whitespace is ignored ("1.2.3.4 junk" is 1.2.3.4).
``pack_ipv6(text)``                 inet_pton(AF_INET6) (RFC 4291 2.2 as glibc reads it).

``format_ipv4``/``format_ipv6`` are inet_ntop; ``ipv4_text``/``ipv6_literal`` give the
canonical text of a literal. Netmasks: ``prefix_length``, ``netmask_text``.

The socket module's functions over them -- ``inet_aton``, ``inet_ntoa``, ``inet_pton``,
``inet_ntop``, ``htons``/``ntohs``/``htonl``/``ntohl`` -- are here too, with CPython's argument
checks and messages; ``_socket`` exports them. Nothing here touches the firmware.
"""

import errno
import struct

from bitsnet import errors, pyarg
from bitsnet.constants import AF_INET, AF_INET6

try:
    from typing import Optional  # noqa: F401  (type comments)
except ImportError:  # BITS's Python 2.7 has no typing module
    pass

_DECIMAL = "0123456789"
_OCTAL = "01234567"
_HEX = "0123456789abcdefABCDEF"
_SPACE = " \t\n\v\f\r"  # C's isspace() in the "C" locale


# --- IPv4 ---------------------------------------------------------------------------------------
def parse_aton(text, exact=False):
    # type: (str, bool) -> Optional[bytes]
    """glibc's inet_aton: 1-4 parts, each strtoul base 0 (0x hex, 0 octal), the last filling
    the remaining bytes; anything after ASCII whitespace is ignored (``exact``: nothing may
    follow, glibc's ``__inet_aton_exact``). 4 bytes or None."""
    parts = []
    i, n = 0, len(text)
    while True:
        if i >= n or not "0" <= text[i] <= "9":
            return None
        start = i
        if text[i] == "0" and i + 1 < n and text[i + 1] in "xX" and i + 2 < n and text[i + 2] in _HEX:
            i += 2
            digits, base = _HEX, 16
        elif text[i] == "0":
            digits, base = _OCTAL, 8
        else:
            digits, base = _DECIMAL, 10
        begin = i
        while i < n and text[i] in digits:
            i += 1
        value = int(text[begin:i], base) if i > begin else 0
        if value > 0xffffffff or i == start:
            return None
        parts.append(value)
        if i < n and text[i] == ".":
            if len(parts) > 3 or value > 0xff:
                return None
            i += 1
            continue
        break
    if i < n and (exact or text[i] not in _SPACE):
        return None
    last_bits = 8 * (5 - len(parts))
    if parts[-1] >= 1 << last_bits:
        return None
    value = parts[-1]
    for k, part in enumerate(parts[:-1]):
        value |= part << (24 - 8 * k)
    return struct.pack("!I", value)


# Speed (docs/performance.md section 7): a TCP connect parsed the same few addresses a dozen
# times (the peer, the station, the netmask, the routes), a tenth of its Python time in real
# BITS. The answers are pure functions of the text: remember up to PARSED_MAX of them.
PARSED_MAX = 64
_parsed = {}  # type: dict   # (text, strict) -> packed bytes or None


def parse_ipv4(text, strict):
    # type: (str, bool) -> Optional[bytes]
    """4 packed bytes for ``text``, or None. ``strict``: inet_pton's a.b.c.d (decimal, no
    leading zeros); otherwise the numeric-host forms of getaddrinfo (see the module docstring)."""
    key = (text, strict)
    cacheable = True
    try:
        return _parsed[key]
    except KeyError:
        pass
    except TypeError:  # not hashable: parsed below, and refused there as a non-string
        cacheable = False
    packed = _parse_ipv4(text, strict)
    if cacheable and PARSED_MAX:
        if len(_parsed) >= PARSED_MAX:
            _parsed.clear()
        _parsed[key] = packed
    return packed


def _parse_ipv4(text, strict):
    if not strict:
        return parse_aton(text, exact=True)
    parts = text.split(".")
    if len(parts) != 4:
        return None
    for part in parts:
        if not part or len(part) > 3 or part.strip(_DECIMAL) or (len(part) > 1 and part[0] == "0") or \
                int(part) > 255:
            return None
    return struct.pack("!4B", *[int(p) for p in parts])


def format_ipv4(packed):
    # type: (bytes) -> str
    """inet_ntop(AF_INET) of 4 bytes: "a.b.c.d"."""
    return "%d.%d.%d.%d" % struct.unpack("!4B", packed)


def ipv4_text(text, strict):
    # type: (str, bool) -> Optional[str]
    """The canonical dotted quad of an IPv4 literal (``parse_ipv4`` with ``strict``), or None."""
    packed = parse_ipv4(str(text), strict)
    return None if packed is None else format_ipv4(packed)


def ipv4_int(text):
    # type: (str) -> int
    """The 32-bit number of a dotted quad (inet_pton's form); ValueError for anything else."""
    packed = parse_ipv4(text, strict=True)
    if packed is None:
        raise ValueError("not an IPv4 address: %r" % (text,))
    return struct.unpack("!I", packed)[0]


def prefix_length(netmask):
    # type: (str) -> int
    """24 for "255.255.255.0": the number of one bits in a dotted-quad netmask."""
    return bin(ipv4_int(netmask)).count("1")


def netmask_text(prefix):
    """"255.255.255.0" for 24 (an int or a string of digits); any other text is returned as
    it is (already a dotted-quad netmask)."""
    if isinstance(prefix, int) or (isinstance(prefix, str) and prefix.isdigit()):
        bits = int(prefix)
        value = (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF if bits else 0
        return format_ipv4(struct.pack("!I", value))
    return prefix


# --- IPv6 ---------------------------------------------------------------------------------------
def pack_ipv6(text):
    # type: (str) -> Optional[bytes]
    """inet_pton(AF_INET6): 16 bytes, or None. Groups of 1-4 hex digits, at most one "::"
    standing for at least one zero group, and a dotted quad as the last 32 bits (RFC 4291 2.2,
    as glibc's inet_pton6 reads it: no zone index, no brackets)."""
    if not text or len(text) > 45:
        return None
    head, sep, tail = text.partition("::")
    if "::" in tail or (sep and (head.endswith(":") or tail.startswith(":"))):
        return None
    left = head.split(":") if head else []
    right = tail.split(":") if tail else []
    last = right if sep else left
    if last and "." in last[-1]:
        v4 = parse_ipv4(last.pop(), strict=True)
        if v4 is None:
            return None
        last.extend("%x" % word for word in struct.unpack("!2H", v4))
    for group in left + right:
        if not 1 <= len(group) <= 4 or any(c not in _HEX for c in group):
            return None
    missing = 8 - len(left) - len(right)
    if (sep and missing < 1) or (not sep and missing != 0):
        return None
    return struct.pack("!8H", *([int(g, 16) for g in left] + [0] * missing + [int(g, 16) for g in right]))


def format_ipv6(packed):
    # type: (bytes) -> str
    """inet_ntop(AF_INET6) of 16 bytes, as glibc writes it (RFC 5952 but for the embedded IPv4
    rule): lower-case hex without leading zeros; the longest run of two or more zero groups
    (the first of equal runs) as "::"; "::a.b.c.d" and "::ffff:a.b.c.d" when the first 6 (or 5,
    then ffff) groups are zero."""
    words = struct.unpack("!8H", packed)
    best, best_len, run, run_len = -1, 0, -1, 0
    for i, word in enumerate(words):
        if word == 0:
            if run < 0:
                run, run_len = i, 0
            run_len += 1
            if run_len > best_len:
                best, best_len = run, run_len
        else:
            run = -1
    if best_len < 2:
        best, best_len = -1, 0
    out = []
    for i in range(8):
        if best <= i < best + best_len:
            if i == best:
                out.append(":")
            continue
        if i:
            out.append(":")
        if i == 6 and best == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xffff)):
            out.append(format_ipv4(packed[12:]))
            break
        out.append("%x" % words[i])
    if best >= 0 and best + best_len == 8:
        out.append(":")
    return "".join(out)


def ipv6_literal(text):
    # type: (str) -> Optional[str]
    """The canonical text of an IPv6 literal (``%scope`` kept off), or None."""
    packed = pack_ipv6(text.split("%", 1)[0]) if "%" in text else pack_ipv6(text)
    return None if packed is None else format_ipv6(packed)


def is_multicast(address):
    # type: (str) -> bool
    """A multicast (224/4, ff00::/8) or the limited broadcast address, given in canonical
    text (``format_ipv4``/``format_ipv6``): no TCP connection goes there."""
    if ":" in address:
        return address[:2].lower() == "ff"
    first = address.split(".", 1)[0]
    return address == "255.255.255.255" or (first.isdigit() and 224 <= int(first) <= 239)


# --- The socket module's functions -----------------------------------------------------------------
def inet_aton(string):
    """inet_aton(string) -> bytes giving packed 32-bit IP representation"""
    packed = parse_aton(pyarg.text(string, "inet_aton() argument 1"))
    if packed is None:
        raise errors.error("illegal IP address string passed to inet_aton")
    return packed


def inet_ntoa(packed_ip):
    """inet_ntoa(packed_ip) -> ip_address_string"""
    packed = bytearray(pyarg.bytes_copy(packed_ip))
    if len(packed) != 4:
        raise errors.error("packed IP wrong length for inet_ntoa")
    return "%d.%d.%d.%d" % tuple(packed)


def inet_pton(address_family, ip_string):
    """inet_pton(af, ip) -> packed IP address string (AF_INET or AF_INET6)"""
    address_family = pyarg.integer(address_family)
    ip_string = pyarg.text(ip_string, "inet_pton() argument 2")
    if address_family == AF_INET:
        packed = parse_ipv4(ip_string, strict=True)
    elif address_family == AF_INET6:
        packed = pack_ipv6(ip_string)
    else:
        raise errors.socket_error(errno.EAFNOSUPPORT)
    if packed is None:
        raise errors.error("illegal IP address string passed to inet_pton")
    return packed


def inet_ntop(address_family, packed_ip):
    """inet_ntop(af, packed_ip) -> string formatted IP address (glibc's formatting)"""
    address_family = pyarg.integer(address_family)
    packed = pyarg.bytes_copy(packed_ip)
    if address_family == AF_INET:
        if len(packed) != 4:
            raise ValueError("invalid length of packed IP address string")
        return inet_ntoa(packed)
    if address_family != AF_INET6:
        raise ValueError("unknown address family %d" % address_family)
    if len(packed) != 16:
        raise ValueError("invalid length of packed IP address string")
    return format_ipv6(packed)


def htons(x):
    """htons(integer) -> integer: 16-bit host to network byte order."""
    return struct.unpack("!H", struct.pack("=H", pyarg.unsigned(x, 16, "htons")))[0]


def ntohs(x):
    """ntohs(integer) -> integer: 16-bit network to host byte order."""
    return struct.unpack("=H", struct.pack("!H", pyarg.unsigned(x, 16, "ntohs")))[0]


def htonl(x):
    """htonl(integer) -> integer: 32-bit host to network byte order."""
    return struct.unpack("!I", struct.pack("=I", pyarg.unsigned(x, 32, "htonl")))[0]


def ntohl(x):
    """ntohl(integer) -> integer: 32-bit network to host byte order."""
    return struct.unpack("=I", struct.pack("!I", pyarg.unsigned(x, 32, "ntohl")))[0]
