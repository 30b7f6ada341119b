"""A non-blocking chat server built on select.select, in the firmware.

Each client gets "welcome <n>\n" when accepted; every line a client sends is broadcast to all
clients as "<n>: <line>\n". The server exits once CLIENTS clients have come and gone.
Prints "READY <port>", then "DONE <lines broadcast>".
"""

from __future__ import print_function

import errno
import select
import socket
import sys

expected = int(sys.argv[1])
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", 0))
listener.listen(expected)
listener.setblocking(False)
print("READY %d" % listener.getsockname()[1])
sys.stdout.flush()

clients = {}  # socket -> [number, received bytes, bytes to send]
seen = 0
broadcast = 0
while seen < expected or clients:
    writers = [s for s, state in clients.items() if state[2]]
    readable, writable, _ = select.select([listener] + list(clients), writers, [], 30)
    if not readable and not writable:
        sys.exit("chat server: nothing happened for 30 s")
    for sock in readable:
        if sock is listener:
            try:
                conn, address = listener.accept()
            except socket.error as exc:
                if exc.args[0] in (errno.EAGAIN, errno.EWOULDBLOCK):
                    continue
                raise
            conn.setblocking(False)
            clients[conn] = [seen, b"", ("welcome %d\n" % seen).encode("ascii")]
            seen += 1
            continue
        state = clients[sock]
        data = sock.recv(4096)
        if not data:
            sock.close()
            del clients[sock]
            continue
        state[1] += data
        while b"\n" in state[1]:
            line, state[1] = state[1].split(b"\n", 1)
            message = ("%d: " % state[0]).encode("ascii") + line + b"\n"
            broadcast += 1
            for other in clients.values():
                other[2] += message
    for sock in writable:
        if sock in clients:
            state = clients[sock]
            sent = sock.send(state[2])
            state[2] = state[2][sent:]
listener.close()
print("DONE %d" % broadcast)
