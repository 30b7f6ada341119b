"""Errors as the stdlib socket module shows them: refused, timeout, gaierror, then a
create_connection to a silent peer at SILENT_PORT with a timeout. Prints one line each."""

from __future__ import print_function

import errno
import socket
import sys
import time

closed_port, silent_port = int(sys.argv[1]), int(sys.argv[2])
try:
    socket.create_connection(("127.0.0.1", closed_port), timeout=5)
except socket.error as exc:
    print("refused %s %s" % (exc.args[0] == errno.ECONNREFUSED, type(exc).__name__))
try:
    socket.create_connection(("no-such-host.invalid", 80))
except socket.gaierror as exc:
    print("gaierror %d" % exc.args[0])
s = socket.create_connection(("127.0.0.1", silent_port), timeout=0.3)
start = time.time()
try:
    s.recv(10)
except socket.timeout as exc:
    print("timeout %s %.1f" % (exc, time.time() - start))
s.close()
