#!/usr/bin/env python
"""The peer that ``bitsnet.selftest`` talks to: HTTP, TCP and UDP echo, and a tiny DNS server.

Run it on any host the board can reach (it needs only a standard Python, 2.7 or 3)::

    python tools/lab.py --host 0.0.0.0 --port 8080

It prints what to type at the boot prompt, once per address a board can reach it at: every
non-loopback address of the host (``--host 0.0.0.0``), or the one it is bound to. A lab on the
host's loopback (the default, 127.0.0.1) is reachable only from the same host -- which includes
a QEMU guest on user networking, where the host is 10.0.2.2 and fec0::2 to the guest and a
connection to them lands on the host's 127.0.0.1 and ::1. ``tools/efirun.py --lab`` starts one on
the host's loopback for the simulator. One port is all the board needs to know: ``GET /lab.json``
lists the others.

HTTP (the given port)
  GET /lab.json                  {"tcp_echo": P, "udp_echo": P, "dns": P, "tcp_echo6": P,
                                  "addresses": [...], "addresses6": [...], "loopback6": bool,
                                  "names": {NAME: ADDRESS}}: ``addresses``/``addresses6`` are where
                                 a board can reach the lab (never a loopback address: empty for a
                                 loopback lab); ``loopback6`` says that its IPv6 servers take
                                 connections to ::1 (what fec0::2 leads to under QEMU)
  GET /bytes/N                   N bytes of a fixed pattern; header X-SHA256 carries their digest
  POST /echo                     the body back
  GET /connect/HOST/PORT/TOKEN   the lab connects to HOST:PORT, sends TOKEN and closes (FIN):
                                 proves a listening socket in the firmware is reachable
  GET /                          a short text page
TCP echo, UDP echo (one port)    everything echoed until the client closes
DNS (UDP)                        A records for the names in ``names``, NXDOMAIN for the rest
Every server listens on IPv6 too, at the same port ([::1] for a loopback lab, [::] for
--host 0.0.0.0), where the host has IPv6.
"""

from __future__ import print_function

import argparse
import hashlib
import json
import socket
import struct
import sys
import threading
import time

try:
    import socketserver
    from http.server import BaseHTTPRequestHandler, HTTPServer
except ImportError:  # Python 2.7
    import SocketServer as socketserver  # type: ignore
    from BaseHTTPServer import BaseHTTPRequestHandler, HTTPServer  # type: ignore

NAMES = {"lab.bitsnet.test": "127.0.0.1", "localhost.bitsnet.test": "127.0.0.1"}
ZONE = "bitsnet.test"  # the zone the lab answers for: its SOA goes with every empty answer
CHUNK = 64 * 1024
QEMU_HOST = ("10.0.2.2", "fec0::2")  # the host (its loopback) as a QEMU guest on user networking sees it


def pattern(size):
    """The bytes /bytes/N serves: a repeating 251-byte ramp (prime length: no alignment luck)."""
    ramp = bytes(bytearray(range(251)))
    return (ramp * (size // 251 + 1))[:size]


class _HttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def _reply(self, code, body, content_type="text/plain", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        lab = self.server.lab
        if parts == ["lab.json"]:
            return self._reply(200, json.dumps(lab.info()).encode("ascii"), "application/json")
        if len(parts) == 2 and parts[0] == "bytes" and parts[1].isdigit():
            size = int(parts[1])
            data = pattern(size)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.send_header("X-SHA256", hashlib.sha256(data).hexdigest())
            self.end_headers()
            for start in range(0, size, CHUNK):
                self.wfile.write(data[start:start + CHUNK])
            return None
        if len(parts) == 4 and parts[0] == "connect":
            return self._connect_back(parts[1], parts[2], parts[3])
        if not parts:
            return self._reply(200, b"bitsnet lab: see tools/lab.py\n")
        return self._reply(404, b"no such page\n")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._reply(200, body, "application/octet-stream")

    def _connect_back(self, host, port, token):
        try:
            conn = socket.create_connection((host, int(port)), timeout=10)
            try:
                conn.sendall(token.encode("ascii"))
            finally:
                conn.close()
        except (socket.error, ValueError) as exc:
            return self._reply(502, ("could not connect to %s:%s: %s\n" % (host, port, exc)).encode("ascii"))
        return self._reply(200, b"sent\n")

    def log_message(self, fmt, *args):
        if self.server.lab.verbose:
            BaseHTTPRequestHandler.log_message(self, fmt, *args)


class _ThreadingHTTPServer(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(CHUNK)
            if not data:
                return
            self.request.sendall(data)


class _ThreadingTCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _V6Only:  # no base: 2.7's SocketServer classes are old-style
    """An IPv6 server beside its IPv4 twin on the same port: [::] must not claim IPv4 as well
    (Linux's default, bindv6only 0, would make the second bind fail)."""
    address_family = int(socket.AF_INET6)  # type: int

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        return self._base.server_bind(self)


class _ThreadingTCPServer6(_V6Only, _ThreadingTCPServer):
    _base = _ThreadingTCPServer


class _ThreadingHTTPServer6(_V6Only, _ThreadingHTTPServer):
    _base = _ThreadingHTTPServer


class _UdpServer6(_V6Only, socketserver.UDPServer):
    _base = socketserver.UDPServer


class _UdpEchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(data, self.client_address)


def _encode_name(name):
    labels = [label.encode("ascii") for label in name.split(".") if label]
    return b"".join(struct.pack("!B", len(label)) + label for label in labels) + b"\0"


def _soa(name):
    """The zone's SOA record (RFC 1035 3.3.13), for the authority section of an empty answer about
    ``name``: our zone's for names in it, the root's otherwise."""
    zone = ZONE if name == ZONE or name.endswith("." + ZONE) else ""
    rdata = (_encode_name("lab." + ZONE) + _encode_name("hostmaster." + ZONE)
             + struct.pack("!LLLLL", 1, 3600, 600, 86400, 60))
    return _encode_name(zone) + struct.pack("!HHLH", 6, 1, 60, len(rdata)) + rdata


def dns_answer(query, names=None):
    # type: (bytes, dict) -> bytes
    """The reply to one DNS query (RFC 1035): A records from ``names`` (default NAMES), else an
    empty answer -- NXDOMAIN for an unknown name -- with the zone's SOA in the authority section,
    as real servers send it (RFC 2308 section 3)."""
    names = NAMES if names is None else names
    if len(query) < 12:
        return b""
    ident, flags, qdcount = struct.unpack("!HHH", query[:6])
    labels, offset = [], 12
    while offset < len(query) and bytearray(query)[offset]:
        length = bytearray(query)[offset]
        labels.append(query[offset + 1:offset + 1 + length].decode("ascii", "replace"))
        offset += length + 1
    question_end = offset + 5  # the zero label, QTYPE, QCLASS
    if qdcount != 1 or question_end > len(query):
        return struct.pack("!HHHHHH", ident, 0x8001, 0, 0, 0, 0)  # FORMERR
    qtype = struct.unpack("!H", query[offset + 1:offset + 3])[0]
    name = ".".join(labels).lower()
    question = query[12:question_end]
    rd = flags & 0x0100  # recursion desired, echoed back (RFC 1035 4.1.1)
    address = names.get(name)
    if address is None or qtype != 1:
        # EDK2 quirk: DnsDxe drops a reply that ends right after its question and waits on until
        # it times out (docs/edk2.md section 6.2): an empty answer carries the zone's SOA, as
        # real servers send it, so the firmware's DNS4 sees "no such name" at once.
        rcode = 3 if address is None else 0  # NXDOMAIN, or the name exists without an A record
        return struct.pack("!HHHHHH", ident, 0x8480 | rd | rcode, 1, 0, 1, 0) + question + _soa(name)
    answer = struct.pack("!HHHLH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(address)
    return struct.pack("!HHHHHH", ident, 0x8480 | rd, 1, 1, 0, 0) + question + answer


class _DnsHandler(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        reply = dns_answer(data, self.server.names)
        if reply:
            sock.sendto(reply, self.client_address)


def _ipv4_addresses():
    """The host's IPv4 addresses, every interface (Linux: SIOCGIFCONF; elsewhere what the host name
    resolves to)."""
    found = []
    try:
        import array
        import fcntl
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            size = 40 * 128  # struct ifreq is 40 bytes on 64-bit Linux (32 on 32-bit)
            buf = array.array("B", b"\0" * size)
            request = struct.pack("iL", size, buf.buffer_info()[0])
            used = struct.unpack("iL", fcntl.ioctl(sock.fileno(), 0x8912, request))[0]  # SIOCGIFCONF
        finally:
            sock.close()
        data = buf.tobytes() if hasattr(buf, "tobytes") else buf.tostring()
        step = 40 if struct.calcsize("L") == 8 else 32
        for at in range(0, used, step):
            found.append(socket.inet_ntoa(data[at + 20:at + 24]))  # ifr_addr: sockaddr_in's address
    except (ImportError, IOError, OSError):
        try:
            found = [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
        except socket.error:
            pass
    return found


def _ipv6_addresses():
    """The host's IPv6 addresses (Linux: /proc/net/if_inet6; elsewhere what the host name resolves to)."""
    found = []
    try:
        with open("/proc/net/if_inet6") as table:
            for line in table:
                raw = line.split()[0]
                found.append(":".join(raw[i:i + 4] for i in range(0, 32, 4)))
    except (IOError, OSError):
        try:
            found = [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET6)]
        except socket.error:
            pass
    packed = []
    for address in found:
        try:
            packed.append(socket.inet_pton(socket.AF_INET6, address.split("%")[0]))
        except (socket.error, ValueError, AttributeError):
            continue
    return [socket.inet_ntop(socket.AF_INET6, p) for p in packed]


def board_addresses(host):
    """([IPv4], [IPv6]): where a board can reach a lab bound to ``host``. Never a loopback address
    (a board's own loopback is not the lab), nor an IPv6 link-local one (it needs the board's
    interface named too); a lab on loopback has none -- only a NAT to the host's loopback, as
    QEMU's user networking is, reaches it."""
    def usable4(address):
        return not address.startswith(("127.", "0."))

    def usable6(address):
        return address != "::1" and not address.lower().startswith(("fe8", "fe9", "fea", "feb", "::ffff:"))
    if host in ("", "0.0.0.0"):
        v4 = [a for a in _ipv4_addresses() if usable4(a)]
        v6 = [a for a in _ipv6_addresses() if usable6(a)]
    else:
        v4, v6 = [a for a in [host] if usable4(a)], []
    return sorted(set(v4), key=v4.index), sorted(set(v6), key=v6.index)


class Lab(object):
    """All the lab's servers, each in a daemon thread. ``port`` 0 picks free ports."""

    def __init__(self, host="127.0.0.1", port=0, verbose=False):
        self.host = host
        self.verbose = verbose
        self.addresses, self.addresses6 = board_addresses(host)
        self.names = dict(NAMES)
        if self.addresses:  # lab.bitsnet.test is the lab itself, where a board reaches it
            self.names["lab." + ZONE] = self.addresses[0]
        self.http = _ThreadingHTTPServer((host, port), _HttpHandler)
        self.port = self.http.server_address[1]
        self.echo = _ThreadingTCPServer((host, 0), _EchoHandler)
        self.echo_port = self.echo.server_address[1]
        self.udp_echo = self._udp_server(_UdpEchoHandler, host, self.echo_port)
        self.dns = self._udp_server(_DnsHandler, host, 0)
        self.dns_port = self.dns.server_address[1]
        self._servers = [self.http, self.echo, self.udp_echo, self.dns]
        # The same servers over IPv6, on the same ports, where the host has IPv6: [::1] for a
        # loopback lab (the simulator; fec0::2 under QEMU), [::] for --host 0.0.0.0; none for a
        # lab bound to one IPv4 address.
        self.host6 = "::1" if host.startswith("127.") else "::" if host in ("", "0.0.0.0") else None
        self.echo6 = None
        if self.host6 is not None:
            try:
                servers6 = [_ThreadingHTTPServer6((self.host6, self.port), _HttpHandler),
                            _ThreadingTCPServer6((self.host6, self.echo_port), _EchoHandler),
                            self._udp_server(_UdpEchoHandler, self.host6, self.echo_port),
                            self._udp_server(_DnsHandler, self.host6, self.dns_port)]
            except (socket.error, OSError, ValueError):
                servers6 = []  # no IPv6 on this host, or a port is taken there
            if servers6:
                self.echo6 = servers6[1]
                self._servers.extend(servers6)
        for server in self._servers:
            server.lab = self
            server.names = self.names
        if self.echo6 is None:
            self.addresses6 = []

    @staticmethod
    def _udp_server(handler, host, port):
        server_class = _UdpServer6 if ":" in host else socketserver.UDPServer
        server = server_class((host, port), handler, bind_and_activate=False)
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        return server

    def info(self):
        """What ``GET /lab.json`` says (see the module docstring)."""
        info = {"tcp_echo": self.echo_port, "udp_echo": self.echo_port, "dns": self.dns_port,
                "addresses": self.addresses, "addresses6": self.addresses6, "names": self.names,
                "loopback6": self.echo6 is not None}
        if self.echo6 is not None:
            info["tcp_echo6"] = self.echo_port
        return info

    def start(self):
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
            thread.daemon = True
            thread.start()
        return self

    def stop(self):
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def describe(self):
        six = "; the same on [%s]" % self.host6 if self.echo6 is not None else ""
        return ("lab on %s: http %d, tcp+udp echo %d, dns %d%s"
                % (self.host, self.port, self.echo_port, self.dns_port, six))

    def instructions(self):
        """What to type at the boot prompt (the README's words): one line per address a board can
        reach, and the QEMU user networking case for a lab on the host's loopback."""
        lines = []
        command = "python -m bitsnet.selftest --peer %s:%d"
        for address in self.addresses:
            lines.append("  " + command % (address, self.port))
        for address in self.addresses6:
            lines.append("  " + command % ("[%s]" % address, self.port))
        if lines:
            lines.insert(0, "at the boot prompt of a board that reaches this host, one of:")
        elif not self.host.startswith("127."):
            lines.append("this host has no address a board can reach (only loopback)")
        if self.host.startswith("127.") or self.host in ("", "0.0.0.0"):
            lines.append("in a QEMU guest on this host with user networking (the host is %s and %s there;"
                         % QEMU_HOST)
            lines.append("start QEMU with -netdev user,...,hostfwd=tcp:127.0.0.1:8081-:8081 for the lab's"
                         " connection back):")
            lines.append("  " + command % (QEMU_HOST[0], self.port)
                         + " --listen-port 8081 --listen-via 127.0.0.1:8081")
            if self.echo6 is not None:
                lines.append("  (its IPv6 check dials %s by itself: the lab was reached at %s)"
                             % (QEMU_HOST[1], QEMU_HOST[0]))
        return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Peer servers for bitsnet.selftest.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="IPv4 address to listen on (default 127.0.0.1: this host and QEMU guests on it; "
                             "0.0.0.0: every address); IPv6 follows ([::1] or [::])")
    parser.add_argument("--port", type=int, default=8080, help="HTTP port; the others are chosen free")
    parser.add_argument("--verbose", action="store_true", help="log every HTTP request")
    args = parser.parse_args(argv)
    lab = Lab(args.host, args.port, args.verbose).start()
    print(lab.describe())
    print(lab.instructions())
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
