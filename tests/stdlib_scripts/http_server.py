"""BaseHTTPServer / http.server in the firmware: answer COUNT requests, then exit.

Prints "READY <port>" once listening. A POST is answered with "<path> <body reversed>".
"""

from __future__ import print_function

import sys

try:
    from http.server import BaseHTTPRequestHandler, HTTPServer
except ImportError:  # Python 2.7
    from BaseHTTPServer import BaseHTTPRequestHandler, HTTPServer  # type: ignore


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        reply = self.path.encode("ascii") + b" " + body[::-1]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def do_GET(self):
        reply = b"hello from the firmware\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = HTTPServer(("", 0), Handler)
print("READY %d" % server.server_address[1])
sys.stdout.flush()
for _ in range(int(sys.argv[1])):
    server.handle_request()
server.server_close()
print("DONE")
