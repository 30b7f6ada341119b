"""bitsnet.dnsmessage: DNS messages (RFC 1035 section 4), built and parsed; no I/O, no firmware.

``build_query`` makes one query (RD set, one question); ``parse_response`` takes any byte string
and returns ``(rcode, truncated, records)`` for an answer to that question, or raises
``DnsFormatError``. The parser is written for hostile input: every length and pointer is
bounds-checked, compression pointers must point strictly backwards (no loops), names stay within
255 bytes, and its work is bounded (``MAX_NAME_JUMPS`` pointers per name, ``MAX_PARSE_STEPS``
labels and pointers per message, ``MAX_RECORDS`` records, the caller's deadline looked at every
``DEADLINE_EVERY`` records). ``bitsnet.dns`` is the resolver that uses it.
"""

import struct

from bitsnet import clock, inet

MAX_NAME = 255  # RFC 1035 2.3.4
# Parse-work bounds (hostile answers). Real compressors make at most a few jumps per name; a
# 512-byte answer (we send no EDNS) holds a few dozen records of a few labels each.
MAX_NAME_JUMPS = 32  # compression pointers followed in one name
MAX_PARSE_STEPS = 8192  # labels plus pointers read in one message
MAX_RECORDS = 256  # answer records read from one message; later ones are ignored
DEADLINE_EVERY = 32  # records parsed between looks at the deadline
MAX_LABEL = 63
TYPE_A, TYPE_CNAME, TYPE_PTR, TYPE_AAAA = 1, 5, 12, 28  # AAAA: RFC 3596
CLASS_IN = 1
FLAG_QR, FLAG_TC, FLAG_RD = 0x8000, 0x0200, 0x0100
RCODE_NOERROR, RCODE_FORMERR, RCODE_SERVFAIL, RCODE_NXDOMAIN = 0, 1, 2, 3


class DnsFormatError(ValueError):
    """A message that is not a well-formed answer to our question."""


def encode_name(name):
    # type: (str) -> bytes
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        if not raw or len(raw) > MAX_LABEL:
            raise ValueError("bad label in %r" % name)
        out += struct.pack("!B", len(raw)) + raw
    if len(out) + 1 > MAX_NAME:
        raise ValueError("name too long: %r" % name)
    return out + b"\x00"


def build_query(ident, qname, qtype):
    # type: (int, str, int) -> bytes
    """One question, recursion desired."""
    return struct.pack("!HHHHHH", ident, FLAG_RD, 1, 0, 0, 0) + encode_name(qname) + struct.pack("!HH", qtype,
                                                                                                 CLASS_IN)


# What a label of a host name that reaches a caller may hold (gethostbyaddr's name, a CNAME
# target, an alias): letters, digits, "-" (not first) and "_" (service labels). glibc's
# resolver likewise skips a PTR or CNAME record whose name fails its res_hnok/res_dnok check.
# Without it, answers with ESC, NUL, CR/LF or "." inside a label reached programs as names.
_HOST_CHARS = frozenset(bytearray(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))


def host_label_ok(label):
    # type: (bytes) -> bool
    """Whether ``label`` (its bytes) belongs in a printable host name: see ``_HOST_CHARS``."""
    data = bytearray(label)
    return bool(data) and data[0] != 0x2D and all(b in _HOST_CHARS for b in data)


def read_name(packet, offset, budget=None, host_name=False):
    """(name, offset after it in the original position) with compression (RFC 1035 4.1.4).

    ``packet`` is a bytearray. Pointers must point strictly before the label that holds them,
    so every jump goes backwards and the walk ends; the name stays within 255 bytes and
    ``MAX_NAME_JUMPS`` pointers. ``budget`` (a one-item list: labels and pointers the message
    may still read, ``MAX_PARSE_STEPS`` at its start) is spent and checked. ``host_name``: the
    name is None unless every label passes ``host_label_ok`` (the walk still ends where it
    would, so the caller can skip the record).
    """
    if budget is None:
        budget = [MAX_PARSE_STEPS]
    jumps = 0
    bad = False
    labels = []
    length_total = 0
    end = None
    position = offset
    while True:
        budget[0] -= 1
        if budget[0] < 0:
            raise DnsFormatError("too much parsing work for one message")
        if position >= len(packet):
            raise DnsFormatError("name runs past the end")
        length = packet[position]
        if length & 0xC0 == 0xC0:
            if position + 1 >= len(packet):
                raise DnsFormatError("truncated pointer")
            target = ((length & 0x3F) << 8) | packet[position + 1]
            if end is None:
                end = position + 2
            if target >= position:
                raise DnsFormatError("forward or looping compression pointer")
            jumps += 1
            if jumps > MAX_NAME_JUMPS:
                raise DnsFormatError("more than %d compression pointers in one name" % MAX_NAME_JUMPS)
            position = target
            continue
        if length & 0xC0:
            raise DnsFormatError("reserved label type")
        if length == 0:
            if end is None:
                end = position + 1
            return (None if bad else ".".join(labels)), end
        if position + 1 + length > len(packet):
            raise DnsFormatError("label runs past the end")
        length_total += length + 1
        if length_total + 1 > MAX_NAME:
            raise DnsFormatError("name longer than 255 bytes")
        label = bytes(packet[position + 1:position + 1 + length])
        bad = bad or (host_name and not host_label_ok(label))
        labels.append(label if str is bytes else label.decode("latin-1"))  # native str on 2.7 and 3
        position += 1 + length


def parse_response(data, ident, qname, qtype, deadline=None):
    """(rcode, truncated, [(owner, type, ttl, value)]) of an answer to (ident, qname, qtype).

    Raises DnsFormatError for anything else: not a response, another ID or question, broken
    lengths or names, more parsing work than ``MAX_PARSE_STEPS``, ``deadline`` (the
    ``clock.monotonic()`` time the query gives up) passed while parsing. A, AAAA and CNAME/PTR
    records are decoded; other types are skipped; records past ``MAX_RECORDS`` are ignored, and
    so are records whose owner, or whose CNAME/PTR target, is not a printable host name
    (``host_label_ok``): such a name never reaches a caller.
    """
    budget = [MAX_PARSE_STEPS]
    packet = bytearray(data)
    if len(packet) < 12:
        raise DnsFormatError("shorter than a header")
    got_id, flags, qdcount, ancount, _nscount, _arcount = struct.unpack("!HHHHHH", bytes(packet[:12]))
    if got_id != ident:
        raise DnsFormatError("another ID")
    if not flags & FLAG_QR or (flags >> 11) & 0xF:
        raise DnsFormatError("not a standard query response")
    rcode = flags & 0xF
    if qdcount != 1:
        if rcode != RCODE_NOERROR and qdcount == 0:
            return rcode, bool(flags & FLAG_TC), []  # some servers drop the question on errors
        raise DnsFormatError("%d questions" % qdcount)
    name, offset = read_name(packet, 12, budget)
    if offset + 4 > len(packet):
        raise DnsFormatError("question runs past the end")
    got_type, got_class = struct.unpack("!HH", bytes(packet[offset:offset + 4]))
    offset += 4
    if name.lower() != qname.rstrip(".").lower() or got_type != qtype or got_class != CLASS_IN:
        raise DnsFormatError("another question")
    truncated = bool(flags & FLAG_TC)
    records = []
    if truncated:
        return rcode, True, records  # rejected by the caller; the rest may be cut anywhere
    for count in range(min(ancount, MAX_RECORDS)):
        if deadline is not None and count % DEADLINE_EVERY == DEADLINE_EVERY - 1 and clock.monotonic() > deadline:
            raise DnsFormatError("the query's deadline passed while parsing its answer")
        owner, offset = read_name(packet, offset, budget, host_name=True)
        if offset + 10 > len(packet):
            raise DnsFormatError("record header runs past the end")
        rtype, rclass, ttl, rdlength = struct.unpack("!HHLH", bytes(packet[offset:offset + 10]))
        offset += 10
        rdata_end = offset + rdlength
        if rdata_end > len(packet):
            raise DnsFormatError("record data runs past the end")
        ttl = ttl if ttl < 0x80000000 else 0  # RFC 2181 8: a TTL with the top bit set means 0
        if rclass == CLASS_IN and owner is not None:
            if rtype == TYPE_A:
                if rdlength != 4:
                    raise DnsFormatError("A record of %d bytes" % rdlength)
                records.append((owner, rtype, ttl, inet.format_ipv4(bytes(packet[offset:offset + 4]))))
            elif rtype == TYPE_AAAA:
                if rdlength != 16:
                    raise DnsFormatError("AAAA record of %d bytes" % rdlength)
                records.append((owner, rtype, ttl, inet.format_ipv6(bytes(packet[offset:offset + 16]))))
            elif rtype in (TYPE_CNAME, TYPE_PTR):
                target, used = read_name(packet, offset, budget, host_name=True)
                if used > rdata_end:
                    raise DnsFormatError("name runs past its record")
                if target is not None:
                    records.append((owner, rtype, ttl, target))
        offset = rdata_end
    return rcode, False, records
