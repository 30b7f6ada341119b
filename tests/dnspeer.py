"""A small DNS server on loopback for the tests (RFC 1035 over UDP, one question per query).

``DnsPeer(records)`` serves ``records``: {name: [(type, value), ...]} with ``type`` "A" (value:
dotted quad), "AAAA" (value: IPv6 text), "CNAME" (value: target name; the chain is followed within the table and every
record of it is answered, as a recursive server does) or "PTR" (value: name; the key is the
in-addr.arpa name, see ``reverse_name``). Unknown names get NXDOMAIN. Behaviours per name:
``silent`` (never answered), ``servfail`` (rcode 2), ``truncated`` (TC bit set and the answer
cut short), ``wrong_id`` (the answer carries another ID), ``bomb`` (``bomb_answer``: a CPU
bomb of compression pointers, docs/testing.md section 3.9), ``one_hop`` (the answer holds the
name's own records only: a CNAME target must be asked for again), ``slow`` ({name: seconds}
to wait before answering). A name value may be a tuple of raw label bytes (labels a text name
cannot spell: a dot, NUL or ESC inside one). ``queries`` records (name, qtype)
of every query received, in order. Runs in a daemon thread on 127.0.0.1 and an ephemeral port;
use it as a context manager.
"""

from __future__ import print_function

import socket
import struct
import threading
import time

HOST = "127.0.0.1"
TYPES = {"A": 1, "CNAME": 5, "PTR": 12, "AAAA": 28}
TTL = 60


def encode_name(name):
    # type: (str) -> bytes
    if isinstance(name, tuple):  # raw labels
        return b"".join(struct.pack("!B", len(label)) + label for label in name) + b"\x00"
    out = b""
    for label in name.strip(".").split("."):
        if label:
            raw = label.encode("ascii")
            out += struct.pack("!B", len(raw)) + raw
    return out + b"\x00"


def reverse_name(address):
    # type: (str) -> str
    return ".".join(reversed(address.split("."))) + ".in-addr.arpa"


def parse_question(query):
    """(ident, flags, name, qtype, question bytes) of a query, or None if it is malformed."""
    if len(query) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", query[:6])
    data = bytearray(query)
    labels, offset = [], 12
    while offset < len(data) and data[offset]:
        length = data[offset]
        if length > 63:
            return None
        labels.append(bytes(data[offset + 1:offset + 1 + length]).decode("ascii", "replace"))
        offset += length + 1
    end = offset + 5
    if qdcount != 1 or end > len(data):
        return None
    qtype = struct.unpack("!H", query[offset + 1:offset + 3])[0]
    return ident, flags, ".".join(labels).lower(), qtype, query[12:end]


def bomb_answer(ident, question, rd=0x0100, chain=8000, records=3000, jumps=None):
    """A valid-looking answer built to burn CPU in a parser that bounds pointer direction but
    not work (docs/testing.md section 3.9): one record of an unknown type whose data is a chain of ``chain``
    compression pointers, each to the one before (the first to the question), then
    ``records`` A records whose owner names all point at the chain's end, so every owner
    costs ``chain`` backward jumps. ``jumps``: start that many pointers from the end instead
    (a bomb that stays under a per-name bound). Fits in 65535 bytes as made by default."""
    head = 12 + len(question)
    owner = struct.pack("!H", 0xC00C)
    data_start = head + len(owner) + 10
    pointers = [struct.pack("!H", 0xC00C)]
    for i in range(1, chain):
        pointers.append(struct.pack("!H", 0xC000 | (data_start + 2 * (i - 1))))
    rdata = b"".join(pointers)
    first = owner + struct.pack("!HHLH", 99, 1, TTL, len(rdata)) + rdata  # type 99: skipped
    last = data_start + 2 * (chain - 1 if jumps is None else min(chain - 1, jumps))
    assert last < 0x4000, "a pointer holds 14 bits"
    record = struct.pack("!H", 0xC000 | last) + struct.pack("!HHLH", 1, 1, TTL, 4) + socket.inet_aton("127.0.0.66")
    body = first + record * records
    return struct.pack("!HHHHHH", ident, 0x8080 | rd, 1, records + 1, 0, 0) + question + body


class DnsPeer(object):
    one_hop = frozenset()  # type: frozenset   # (class defaults: a codec-only peer made with __new__)
    slow = {}  # type: dict
    def __init__(self, records=None, silent=(), servfail=(), truncated=(), wrong_id=(), bomb=(), one_hop=(),
                 slow=None):
        self.one_hop = set(n.lower() for n in one_hop)
        self.slow = dict((k.lower(), v) for k, v in (slow or {}).items())
        self.bomb = set(n.lower() for n in bomb)
        self.records = dict((k.lower(), v) for k, v in (records or {}).items())
        self.silent = set(n.lower() for n in silent)
        self.servfail = set(n.lower() for n in servfail)
        self.truncated = set(n.lower() for n in truncated)
        self.wrong_id = set(n.lower() for n in wrong_id)
        self.queries = []  # type: list
        self.clients = []  # type: list   # (address, port) each query came from
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.address = "%s:%d" % (HOST, self.port)
        self._stop = False
        self.thread = threading.Thread(target=self._serve, name="dnspeer")
        self.thread.daemon = True

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self.thread.join(5)
        self.sock.close()

    def _serve(self):
        while not self._stop:
            try:
                query, client = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except (OSError, IOError):
                return
            self.clients.append(client)
            reply = self.answer(query)
            if reply:
                try:
                    self.sock.sendto(reply, client)
                except (OSError, IOError):
                    pass

    def chain(self, name, qtype):
        """The answer records for (name, qtype): CNAMEs followed, then the records of the type."""
        out, seen = [], set()
        while name not in seen:
            seen.add(name)
            records = self.records.get(name, [])
            wanted = [(name, t, v) for t, v in records if TYPES[t] == qtype]
            if wanted:
                return out + wanted
            cnames = [(name, t, v) for t, v in records if t == "CNAME"]
            if not cnames:
                return out
            out.append(cnames[0])
            if name in self.one_hop or isinstance(cnames[0][2], tuple):
                return out
            name = cnames[0][2].lower()
        return out

    def answer(self, query):
        # type: (bytes) -> bytes
        parsed = parse_question(query)
        if parsed is None:
            return struct.pack("!HHHHHH", struct.unpack("!H", query[:2])[0] if len(query) >= 2 else 0,
                               0x8001, 0, 0, 0, 0)  # FORMERR
        ident, flags, name, qtype, question = parsed
        self.queries.append((name, qtype))
        if name in self.silent:
            return b""
        if name in self.slow:
            time.sleep(self.slow[name])
        if name in getattr(self, "bomb", ()):
            return bomb_answer(ident, question, flags & 0x0100)
        if name in self.wrong_id:
            ident ^= 0x5A5A
        rd = flags & 0x0100
        if name in self.servfail:
            return struct.pack("!HHHHHH", ident, 0x8082 | rd, 1, 0, 0, 0) + question
        if name not in self.records:
            return struct.pack("!HHHHHH", ident, 0x8083 | rd, 1, 0, 0, 0) + question  # NXDOMAIN
        answers = b""
        records = self.chain(name, qtype)
        offsets = {name: 12}  # names already in the message, for compression pointers
        base = 12 + len(question)
        for owner, kind, value in records:
            if owner in offsets and not isinstance(owner, tuple):
                answers += struct.pack("!H", 0xC000 | offsets[owner])
            else:
                answers += encode_name(owner)
            if kind == "A":
                rdata = socket.inet_aton(value)
            elif kind == "AAAA":
                rdata = socket.inet_pton(socket.AF_INET6, value)
            else:
                rdata = encode_name(value)
                if not isinstance(value, tuple):
                    offsets.setdefault(value.lower(), base + len(answers) + 10)
            answers += struct.pack("!HHLH", TYPES[kind], 1, TTL, len(rdata)) + rdata
        flags = 0x8080 | rd  # QR, RA
        if name in self.truncated:
            flags |= 0x0200  # TC
            answers = answers[:len(answers) // 2]
        return struct.pack("!HHHHHH", ident, flags, 1, len(records), 0, 0) + question + answers
