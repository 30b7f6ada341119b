"""Python 2's urllib.urlopen (not urllib2) over bitsnet: fetch URL, print "sha256 <hex> <bytes>".

Its URLopener keeps os.unlink, which BITS's os lacks: bitsnet.install() gives os one
(docs/bits-environment.md section 4)."""

from __future__ import print_function

import hashlib
import sys
import urllib

response = urllib.urlopen(sys.argv[1])
data = response.read()
response.close()
print("sha256 %s %d" % (hashlib.sha256(data).hexdigest(), len(data)))
