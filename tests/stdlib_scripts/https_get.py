"""HTTPS through the unchanged standard library over bitsnet.ssl: https_get.py urllib|httplib URL CAFILE.

Prints "sha256 <hex> <bytes> <seconds>", or "error SSL <reason> <message>" for an SSLError.
The context comes from bitsnet.ssl (on a host the interpreter's own ssl stays ``ssl``; in BITS,
bitsnet.install() makes bitsnet.ssl the ``ssl`` module and no context needs passing)."""

from __future__ import print_function

import hashlib
import socket
import sys
import time

from bitsnet import ssl as bitsnet_ssl

try:
    from urllib.parse import urlsplit
    from urllib.request import urlopen
    from http.client import HTTPSConnection
except ImportError:  # Python 2.7
    from urlparse import urlsplit  # type: ignore
    from urllib2 import urlopen  # type: ignore
    from httplib import HTTPSConnection  # type: ignore

assert socket._socket.__name__ == "bitsnet._socket", socket._socket
client, url, cafile = sys.argv[1:4]
context = bitsnet_ssl.create_default_context(cafile=cafile)
start = time.time()
try:
    if client == "urllib":
        response = urlopen(url, timeout=30, context=context)
    else:
        parts = urlsplit(url)
        connection = HTTPSConnection(parts.hostname, parts.port, timeout=30, context=context)
        connection.request("GET", parts.path)
        response = connection.getresponse()
        assert response.status == 200, response.status
    digest = hashlib.sha256()
    size = 0
    while True:
        chunk = response.read(256 * 1024)
        if not chunk:
            break
        digest.update(chunk)
        size += len(chunk)
    response.close()
except Exception as exc:
    reason = getattr(exc, "reason", None)
    reason = getattr(reason, "reason", reason)  # urllib wraps it in URLError(reason=SSLError)
    if isinstance(getattr(exc, "reason", None), bitsnet_ssl.SSLError) or isinstance(exc, bitsnet_ssl.SSLError):
        print("error SSL %s %s" % (reason, getattr(exc, "reason", exc)))
        sys.exit(0)
    raise
print("sha256 %s %d %.3f" % (digest.hexdigest(), size, time.time() - start))
