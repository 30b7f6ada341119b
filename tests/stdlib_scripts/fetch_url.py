"""urllib2 / urllib.request over bitsnet: fetch URL, print "sha256 <hex> <bytes> <seconds>"."""

from __future__ import print_function

import hashlib
import socket
import sys
import time

try:
    from urllib.request import urlopen
except ImportError:  # Python 2.7
    from urllib2 import urlopen  # type: ignore

assert socket._socket.__name__ == "bitsnet._socket", socket._socket

start = time.time()
response = urlopen(sys.argv[1], timeout=30)
digest = hashlib.sha256()
size = 0
while True:
    chunk = response.read(256 * 1024)
    if not chunk:
        break
    digest.update(chunk)
    size += len(chunk)
response.close()
print("sha256 %s %d %.3f" % (digest.hexdigest(), size, time.time() - start))
