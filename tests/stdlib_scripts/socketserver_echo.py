"""SocketServer / socketserver TCP echo in the firmware: COUNT connections, each echoing
lines upper-cased until the client closes. Prints "READY <port>", then "DONE"."""

from __future__ import print_function

import sys

try:
    import socketserver
except ImportError:  # Python 2.7
    import SocketServer as socketserver  # type: ignore


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        for line in iter(self.rfile.readline, b""):
            self.wfile.write(line.upper())


class Server(socketserver.TCPServer):
    allow_reuse_address = True


server = Server(("", 0), Echo)
print("READY %d" % server.server_address[1])
sys.stdout.flush()
for _ in range(int(sys.argv[1])):
    server.handle_request()
server.server_close()
print("DONE")
