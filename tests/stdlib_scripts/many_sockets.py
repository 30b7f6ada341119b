"""Open and close COUNT client sockets against the echo peer at PORT (plus listeners, and
some sockets only dropped, never closed): run with efirun --ledger to see nothing leaks."""

from __future__ import print_function

import gc
import socket
import sys

port, count = int(sys.argv[1]), int(sys.argv[2])
for i in range(count):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"x")
    assert s.recv(1) == b"x"
    if i % 4 == 3:
        del s  # dropped, not closed: the last reference going closes it gracefully
    else:
        s.close()
for i in range(20):
    listener = socket.socket()
    listener.bind(("", 0))
    listener.listen(1)
    listener.close()
gc.collect()
print("DONE %d" % count)
