#!/usr/bin/env python
"""The peer that ``bitsnet.selftest`` talks to: HTTP, TCP and UDP echo, and a tiny DNS server.

Run it on any host the board can reach (it needs only a standard Python, 2.7 or 3)::

    python tools/lab.py --host 0.0.0.0 --port 8080

and at the boot prompt ``python -m bitsnet.selftest --peer LABHOST:8080``. ``tools/efirun.py
--lab`` starts one on the host's loopback for the simulator. One port is all the board needs
to know: ``GET /lab.json`` lists the others.

HTTP (the given port)
  GET /lab.json                  {"tcp_echo": P, "udp_echo": P, "dns": P, "address": ...}
  GET /bytes/N                   N bytes of a fixed pattern; header X-SHA256 carries their digest
  POST /echo                     the body back
  GET /connect/HOST/PORT/TOKEN   the lab connects to HOST:PORT, sends TOKEN and closes (FIN):
                                 proves a listening socket in the firmware is reachable
  GET /                          a short text page
TCP echo, UDP echo (one port)    everything echoed until the client closes (TCP also over IPv6 on
                                 [::1] or [::], as lab.json says: tcp_echo6, address6)
DNS (UDP)                        A records for the names in NAMES, NXDOMAIN for the rest
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
CHUNK = 64 * 1024


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
            info = {"tcp_echo": lab.echo_port, "udp_echo": lab.echo_port, "dns": lab.dns_port,
                    "address": lab.host, "names": NAMES}
            if lab.echo6 is not None:  # TCP echo over IPv6 too (bitsnet.selftest's IPv6 check)
                info.update(tcp_echo6=lab.echo6.server_address[1], address6=lab.host6)
            return self._reply(200, json.dumps(info).encode("ascii"), "application/json")
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


class _ThreadingTCPServer6(_ThreadingTCPServer):
    address_family = socket.AF_INET6


class _UdpEchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(data, self.client_address)


def dns_answer(query):
    # type: (bytes) -> bytes
    """The reply to one DNS query (RFC 1035): A records from NAMES, else NXDOMAIN."""
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
    address = NAMES.get(name)
    if address is None:
        return struct.pack("!HHHHHH", ident, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
    if qtype != 1:
        return struct.pack("!HHHHHH", ident, 0x8180, 1, 0, 0, 0) + question  # no A: empty answer
    answer = struct.pack("!HHHLH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(address)
    return struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0) + question + answer


class _DnsHandler(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        reply = dns_answer(data)
        if reply:
            sock.sendto(reply, self.client_address)


class Lab(object):
    """All the lab's servers, each in a daemon thread. ``port`` 0 picks free ports."""

    def __init__(self, host="127.0.0.1", port=0, verbose=False):
        self.host = host
        self.verbose = verbose
        self.http = _ThreadingHTTPServer((host, port), _HttpHandler)
        self.http.lab = self
        self.port = self.http.server_address[1]
        self.echo = _ThreadingTCPServer((host, 0), _EchoHandler)
        self.echo_port = self.echo.server_address[1]
        self.udp_echo = self._udp_server(_UdpEchoHandler, self.echo_port)
        self.dns = self._udp_server(_DnsHandler, 0)
        self.dns_port = self.dns.server_address[1]
        self._servers = [self.http, self.echo, self.udp_echo, self.dns]
        # An IPv6 TCP echo on the same port where the host has IPv6: [::1] for a loopback lab
        # (the simulator), [::] for --host 0.0.0.0; none for a lab bound to one IPv4 address.
        self.host6 = "::1" if host.startswith("127.") else "::" if host in ("", "0.0.0.0") else None
        self.echo6 = None
        if self.host6 is not None:
            try:
                self.echo6 = _ThreadingTCPServer6((self.host6, self.echo_port), _EchoHandler)
                self._servers.append(self.echo6)
            except (socket.error, OSError, ValueError):
                self.echo6 = None  # no IPv6 on this host, or the port is taken there

    def _udp_server(self, handler, port):
        server = socketserver.UDPServer((self.host, port), handler, bind_and_activate=False)
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        return server

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
        return ("lab on %s: http %d, tcp+udp echo %d, dns %d"
                % (self.host, self.port, self.echo_port, self.dns_port))


def main(argv=None):
    parser = argparse.ArgumentParser(description="Peer servers for bitsnet.selftest.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="HTTP port; the others are chosen free")
    parser.add_argument("--verbose", action="store_true", help="log every HTTP request")
    args = parser.parse_args(argv)
    lab = Lab(args.host, args.port, args.verbose).start()
    print(lab.describe())
    print("at the boot prompt: python -m bitsnet.selftest --peer %s:%d" % (args.host, lab.port))
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
