"""Real peers on the host's loopback for the simulated firmware to talk to.

Each peer runs in a daemon thread of the test process, on 127.0.0.1 and an ephemeral port,
and is a context manager that stops it. They use the host's own sockets (imported before any
test could install bitsnet), so they are what a real network peer would be.
"""

from __future__ import print_function

import hashlib
import os
import socket
import threading

try:
    import socketserver
    from http.server import BaseHTTPRequestHandler, HTTPServer, SimpleHTTPRequestHandler
except ImportError:  # Python 2.7
    import SocketServer as socketserver  # type: ignore
    from BaseHTTPServer import BaseHTTPRequestHandler, HTTPServer  # type: ignore
    from SimpleHTTPServer import SimpleHTTPRequestHandler  # type: ignore

HOST = "127.0.0.1"


def send_body(handler, body):
    """Answer the request ``handler`` is serving with 200 and ``body``."""
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Quiet(SimpleHTTPRequestHandler):
    """Serves files from the server's ``root``; echoes POST bodies back; logs nothing."""

    def translate_path(self, path):
        return os.path.join(self.server.root, path.split("?", 1)[0].lstrip("/"))

    def do_POST(self):
        send_body(self, self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def log_message(self, *args):
        pass


class _ThreadingHTTPServer(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class QuietHTTPServer(_ThreadingHTTPServer):
    """A threaded HTTP server that says nothing about a client that gave up (a TLS handshake the
    client refused, a connection it reset): the tests check such refusals on the client side."""

    def handle_error(self, request, client_address):
        pass


def files_handler(files, before_get=None):
    """A request handler class serving ``files`` ({name: bytes}) at ``/name`` (404 for any other
    path), logging nothing; ``before_get(handler)``, if given, is called first on every GET."""

    class FilesHandler(BaseHTTPRequestHandler):
        def do_GET(self):
            if before_get is not None:
                before_get(self)
            body = files.get(self.path.lstrip("/"))
            if body is None:
                self.send_error(404)
                return
            send_body(self, body)

        def log_message(self, *args):
            pass

    return FilesHandler


class ServerPeer(object):
    """A socketserver ``server`` that serves on a daemon thread while the peer is entered (a
    context manager), and is shut down and closed when it is left; ``port`` is its port."""

    def __init__(self, server):
        self.server = server
        self.port = server.server_address[1]
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class HttpPeer(ServerPeer):
    """A threaded HTTP server serving ``files`` ({name: bytes}) from a temporary directory."""

    def __init__(self, tmpdir, files):
        self.root = str(tmpdir)
        for name, data in files.items():
            with open(os.path.join(self.root, name), "wb") as f:
                f.write(data)
        ServerPeer.__init__(self, _ThreadingHTTPServer((HOST, 0), _Quiet))
        self.server.root = self.root

    def url(self, name=""):
        return "http://%s:%d/%s" % (HOST, self.port, name)


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            while True:
                data = self.request.recv(65536)
                if not data:
                    return
                self.request.sendall(data)
        except socket.error:  # the firmware side aborted (RST): nothing to echo to
            return


class _ThreadingTCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class EchoPeer(ServerPeer):
    """A threaded TCP echo server: echoes until the client closes, then closes (FIN)."""

    def __init__(self):
        ServerPeer.__init__(self, _ThreadingTCPServer((HOST, 0), _EchoHandler))


class OneShotPeer(object):
    """A host listener on ``host`` (127.0.0.1, or ::1) that accepts one connection and runs
    ``handler(conn)`` on a thread; ``join()`` returns what it returned, or raises what it
    raised. ``peer`` is the address the connection came from."""

    def __init__(self, handler, host=HOST, join_timeout=15):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.server = socket.socket(family, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((host, 0))
        self.server.listen(1)
        self.server.settimeout(10)
        self.port = self.server.getsockname()[1]
        self.handler = handler
        self.join_timeout = join_timeout
        self.result = self.error = self.peer = None
        self.thread = threading.Thread(target=self._run)
        self.thread.daemon = True
        self.thread.start()

    def _run(self):
        try:
            conn, self.peer = self.server.accept()
            conn.settimeout(10)
            try:
                self.result = self.handler(conn)
            finally:
                conn.close()
        except Exception as exc:  # reported by join()
            self.error = exc

    def join(self):
        self.thread.join(self.join_timeout)
        self.server.close()
        if self.error is not None:
            raise self.error
        return self.result


def closed_port():
    """A loopback port with no listener (connecting to it is refused with a RST)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pattern(size, seed=0):
    """Deterministic, non-repeating-looking test data of ``size`` bytes."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(("%d:%d" % (seed, counter)).encode("ascii")).digest()
        counter += 1
    return bytes(out[:size])
