#!/usr/bin/env python
"""The peers of tools/bench.py and tools/fwbench.py: the far end of every measured connection.

    python tools/bench_peer.py --serve-peer     (what ``Peer()`` starts; also ``tools/bench.py --serve-peer``)

One process on the host's own sockets, bound to 127.0.0.1: a TCP listener speaking a one-byte
command protocol -- 'S'+u64 bulk source (send that many bytes of ``PATTERN``, close), 'K'+u64
sink (read that many bytes, answer b'k'), 'E' echo until EOF, 'C' echo one byte then close --
a UDP echo, and an HTTP server answering GET /bytes/N (HTTP/1.0, one download per connection)
and GET /small/N (HTTP/1.1 in one write, kept alive unless the request says close). It prints
its three ports on one line and serves until its stdin closes. ``Peer`` starts and stops it;
``header`` builds a command.

It runs in its own process because the measuring process replaces its ``socket`` module
(``bitsnet.install()``) and must not share its GIL with the peer.
"""

from __future__ import print_function

import os
import select as host_select
import socket as host_socket
import struct
import subprocess
import sys
import threading
import time

PEER = "127.0.0.1"
PATTERN = bytes(bytearray(range(251))) * (4 * 1024 * 1024 // 251 + 1)  # the peer's source data
_clock = getattr(time, "monotonic", time.time)


class _Conn(object):
    __slots__ = ("sock", "mode", "left", "head", "out", "offset")

    def __init__(self, sock):
        self.sock, self.mode, self.left, self.head, self.out, self.offset = sock, None, 0, b"", b"", 0


def serve_peer():
    """Bulk source ('S'+size: send size bytes, close), sink ('K'+size: read size bytes, answer
    b'k'), echo ('E': echo until EOF), one-shot ('C': echo one byte, close), UDP echo, HTTP
    GET /bytes/N. One epoll loop (1000+ idle connections cost nothing); HTTP in a thread."""
    listener = host_socket.socket()
    listener.setsockopt(host_socket.SOL_SOCKET, host_socket.SO_REUSEADDR, 1)
    listener.bind((PEER, 0))
    listener.listen(1024)
    listener.setblocking(False)
    udp = host_socket.socket(host_socket.AF_INET, host_socket.SOCK_DGRAM)
    udp.bind((PEER, 0))
    udp.setblocking(False)
    http_port = _start_http()
    sys.stdout.write("%d %d %d\n" % (listener.getsockname()[1], udp.getsockname()[1], http_port))
    sys.stdout.flush()
    ep = host_select.epoll()
    ep.register(listener.fileno(), host_select.EPOLLIN)
    ep.register(udp.fileno(), host_select.EPOLLIN)
    ep.register(sys.stdin.fileno(), host_select.EPOLLIN | host_select.EPOLLHUP)
    conns = {}
    sink = bytearray(256 * 1024)
    view = memoryview(PATTERN)
    period = len(PATTERN) - 251 * 16  # send windows start at a multiple of 251: seamless pattern
    period -= period % 251
    while True:
        for fd, mask in ep.poll(1.0):
            if fd == sys.stdin.fileno():
                return
            if fd == listener.fileno():
                while True:
                    try:
                        sock, _ = listener.accept()
                    except (OSError, IOError):
                        break
                    sock.setblocking(False)
                    sock.setsockopt(host_socket.IPPROTO_TCP, host_socket.TCP_NODELAY, 1)
                    conns[sock.fileno()] = _Conn(sock)
                    ep.register(sock.fileno(), host_select.EPOLLIN)
                continue
            if fd == udp.fileno():
                while True:
                    try:
                        data, address = udp.recvfrom(65536)
                    except (OSError, IOError):
                        break
                    try:
                        udp.sendto(data, address)
                    except (OSError, IOError):
                        pass
                continue
            conn = conns.get(fd)
            if conn is None:
                continue
            try:
                done = _serve(conn, mask, sink, view, period, ep)
            except (OSError, IOError):
                done = True
            if done:
                ep.unregister(fd)
                del conns[fd]
                conn.sock.close()


def _serve(conn, mask, sink, view, period, ep):
    """One readiness event of one peer connection; True when it is finished."""
    sock = conn.sock
    if conn.mode == "S":
        while conn.left:
            n = min(conn.left, period - conn.offset, 1024 * 1024)
            try:
                sent = sock.send(view[conn.offset:conn.offset + n])
            except (OSError, IOError) as exc:
                if exc.args[0] in (11,):
                    return False
                raise
            conn.left -= sent
            conn.offset = (conn.offset + sent) % period
        return True  # close: the FIN ends the stream
    if conn.mode == "K":
        while conn.left:
            try:
                n = sock.recv_into(sink, min(len(sink), conn.left))
            except (OSError, IOError) as exc:
                if exc.args[0] in (11,):
                    return False
                raise
            if not n:
                return True
            conn.left -= n
        sock.setblocking(True)
        sock.sendall(b"k")
        conn.mode = "E"
        sock.setblocking(False)
        return False
    try:
        data = sock.recv(65536)
    except (OSError, IOError) as exc:
        if exc.args[0] in (11,):
            return False
        raise
    if not data:
        return True
    if conn.mode is None:
        conn.head += data
        if conn.head[:1] in (b"S", b"K") and len(conn.head) < 9:
            return False
        conn.mode = conn.head[:1].decode("ascii")
        if conn.mode in ("S", "K"):
            conn.left = struct.unpack("!Q", conn.head[1:9])[0]
            data = conn.head[9:]
        else:
            data = conn.head[1:]
        conn.head = b""
        if conn.mode == "S":
            ep.modify(sock.fileno(), host_select.EPOLLOUT)
            return _serve(conn, host_select.EPOLLOUT, sink, view, period, ep)
        if conn.mode == "K":
            conn.left -= len(data)
            if conn.left <= 0:
                sock.sendall(b"k")
                conn.mode = "E"
            return False
        if not data:
            return False
    sock.setblocking(True)
    sock.sendall(data)
    sock.setblocking(False)
    return conn.mode == "C"


def _start_http():
    try:
        from http.server import BaseHTTPRequestHandler, HTTPServer
        from socketserver import ThreadingMixIn
    except ImportError:  # Python 2.7
        from BaseHTTPServer import BaseHTTPRequestHandler, HTTPServer  # type: ignore
        from SocketServer import ThreadingMixIn  # type: ignore

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            size = int(self.path.rsplit("/", 1)[-1])
            if self.path.startswith("/small/"):
                return self.small(size)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            period = len(PATTERN) - len(PATTERN) % 251
            offset = 0
            while size:
                n = min(size, period - offset, 1024 * 1024)
                self.wfile.write(PATTERN[offset:offset + n])  # bytes: 2.7's wfile writes a memoryview's repr
                size -= n
                offset = (offset + n) % period

        def small(self, size):
            # A lab-shaped exchange (tools/fwbench.py's http figures): an HTTP/1.1 response in one
            # write, the connection kept alive unless the request says close -- as an XML-RPC or
            # REST server answers; /bytes/N stays HTTP/1.0 (one download per connection).
            keep = self.request_version == "HTTP/1.1" and \
                (self.headers.get("Connection") or "").lower() != "close"
            self.close_connection = not keep
            self.connection.setsockopt(host_socket.IPPROTO_TCP, host_socket.TCP_NODELAY, 1)
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n%s\r\n" % (
                size, "" if keep else "Connection: close\r\n")
            self.wfile.write(head.encode("ascii") + PATTERN[:size])
            self.wfile.flush()

        def log_message(self, *args):
            pass

    class Server(ThreadingMixIn, HTTPServer):
        daemon_threads = True

    server = Server((PEER, 0), Handler)
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    return server.server_address[1]


class Peer(object):
    """The peer subprocess; ``tcp``, ``udp``, ``http`` are its ports on 127.0.0.1."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-peer"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode("ascii").split()
        if len(line) != 3:
            raise RuntimeError("bench peer did not start")
        self.tcp, self.udp, self.http = [int(x) for x in line]

    def stop(self):
        try:
            self.proc.stdin.close()
        except (OSError, IOError):
            pass
        deadline = _clock() + 5
        while self.proc.poll() is None and _clock() < deadline:
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def header(command, size=0):
    return command + (struct.pack("!Q", size) if command in (b"S", b"K") else b"")


if __name__ == "__main__":
    if sys.argv[1:] != ["--serve-peer"]:
        sys.exit(__doc__)
    serve_peer()
