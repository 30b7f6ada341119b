"""The BITS drop-in (bits/boot/python first on sys.path, as /boot/python is in BITS; run with
efirun --no-install): plain "import socket" uses bitsnet. Fetch URL, print "sha256 <hex> <bytes>"."""

from __future__ import print_function

import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bits", "boot", "python"))
# In BITS nothing imports socket before the user does; here the simulator itself did (it
# holds its own references to the host's modules and keeps them). Forget them, as BITS would
# never have had them.
for name in ("socket", "_socket", "select", "selectors"):
    sys.modules.pop(name, None)

import socket  # noqa: E402

assert socket._socket.__name__ == "bitsnet._socket", socket._socket
assert sys.modules["select"].__name__ == "bitsnet.select"
try:
    from urllib.request import urlopen
except ImportError:  # Python 2.7
    from urllib2 import urlopen  # type: ignore
response = urlopen(sys.argv[1], timeout=10)
data = response.read()
response.close()
print("sha256 %s %d" % (hashlib.sha256(data).hexdigest(), len(data)))
