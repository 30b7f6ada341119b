"""HTTPS as at the BITS prompt: ``import ssl`` is bitsnet.ssl (bitsnet.install() made it so), and
urllib2 / urllib.request verify with the default context. https_bits.py URL CAFILE.

CAFILE stands in for /boot/bitsnet/ca.pem (ssl.DEFAULT_CAFILES). Prints "sha256 <hex> <bytes>"
or "error SSL <reason>"."""

from __future__ import print_function

import hashlib
import ssl
import sys

try:
    from urllib.request import urlopen
except ImportError:  # Python 2.7
    from urllib2 import urlopen  # type: ignore

assert ssl.__name__ == "bitsnet.ssl", ssl
ssl.DEFAULT_CAFILES[:] = [sys.argv[2]]
try:
    data = urlopen(sys.argv[1], timeout=30).read()
except IOError as exc:  # urllib's URLError and ssl.SSLError are both IOError/OSError
    reason = getattr(exc, "reason", exc)
    print("error SSL %s" % (getattr(reason, "reason", reason),))
    sys.exit(0)
print("sha256 %s %d" % (hashlib.sha256(data).hexdigest(), len(data)))
