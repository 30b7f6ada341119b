"""selectors.DefaultSelector (PollSelector over bitsnet's select.poll) echo server, Python 3.

Serves COUNT connections (echoing everything), then exits. Prints "SELECTOR <class name>",
"READY <port>", then "DONE"."""

from __future__ import print_function

import selectors
import socket
import sys

selector = selectors.DefaultSelector()
print("SELECTOR %s" % type(selector).__name__)
listener = socket.create_server(("", 0)) if hasattr(socket, "create_server") else socket.socket()
if not hasattr(socket, "create_server"):
    listener.bind(("", 0))
    listener.listen(5)
listener.setblocking(False)
selector.register(listener, selectors.EVENT_READ)
print("READY %d" % listener.getsockname()[1])
sys.stdout.flush()
remaining = int(sys.argv[1])
finished = 0
while finished < remaining:
    events = selector.select(timeout=30)
    if not events:
        sys.exit("selectors echo: nothing happened for 30 s")
    for key, mask in events:
        if key.fileobj is listener:
            conn, _ = listener.accept()
            conn.setblocking(False)
            selector.register(conn, selectors.EVENT_READ)
            continue
        data = key.fileobj.recv(65536)
        if data:
            key.fileobj.setblocking(True)
            key.fileobj.sendall(data)
            key.fileobj.setblocking(False)
        else:
            selector.unregister(key.fileobj)
            key.fileobj.close()
            finished += 1
selector.close()
listener.close()
print("DONE")
