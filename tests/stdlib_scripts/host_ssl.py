"""The interpreter's own ssl over bitsnet sockets (bitsnet/hostssl.py), under tools/efirun.py
--host-stdlib: host_ssl.py URL CAFILE SILENT_PORT.

Prints "sha256 <hex> <bytes>" for a urlopen of URL with the host's ssl and CAFILE, "nonblocking
<status line>" for a handshake and request on a non-blocking SSLSocket driven by select(), and
"timeout <message>" for a handshake with a peer that never answers (SILENT_PORT, 1 s timeout)."""

from __future__ import print_function

import hashlib
import select
import socket
import ssl
import sys

try:
    from urllib.parse import urlsplit
    from urllib.request import urlopen
except ImportError:  # Python 2.7
    from urlparse import urlsplit  # type: ignore
    from urllib2 import urlopen  # type: ignore

assert socket._socket.__name__ == "bitsnet._socket", socket._socket
assert ssl.__name__ == "ssl" and hasattr(ssl, "_ssl"), ssl  # the interpreter's, not bitsnet.ssl
url, cafile, silent_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
context = ssl.create_default_context(cafile=cafile)

data = urlopen(url, context=context, timeout=30).read()
print("sha256 %s %d" % (hashlib.sha256(data).hexdigest(), len(data)))

parts = urlsplit(url)
raw = socket.create_connection((parts.hostname, parts.port), timeout=30)
raw.setblocking(False)
tls = context.wrap_socket(raw, server_hostname=parts.hostname, do_handshake_on_connect=False)
while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        select.select([tls], [], [], 10)
    except ssl.SSLWantWriteError:
        select.select([], [tls], [], 10)
tls.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (parts.path, parts.hostname)).encode("ascii"))
reply = b""
while b"\r\n" not in reply:
    try:
        chunk = tls.recv(4096)
    except ssl.SSLWantReadError:
        readable = select.select([tls], [], [], 10)[0]
        assert readable, "select saw nothing to read"
        continue
    if not chunk:
        break
    reply += chunk
print("nonblocking %s" % reply.split(b"\r\n")[0].decode("ascii"))
tls.close()

quiet = socket.create_connection(("127.0.0.1", silent_port), timeout=1.0)
try:
    context.wrap_socket(quiet, server_hostname="localhost")
    print("timeout none")
except socket.timeout as exc:
    print("timeout %s" % exc)
finally:
    quiet.close()
