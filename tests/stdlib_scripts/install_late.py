"""bitsnet.install() after the host's socket, select and their users were imported (run with
efirun --no-install): they are rebuilt on bitsnet, subprocess (on a host) keeps the OS's select, and a
second install() changes nothing. Then fetch URL and print "sha256 <hex> <bytes>"."""

from __future__ import print_function

import hashlib
import select
import socket
import sys

try:
    import subprocess
except ImportError:  # BITS (and the simulator's model of it) has no subprocess
    subprocess = None  # type: ignore[assignment]

try:
    import http.client as httplib
    import selectors
    import socketserver
    import urllib.request as urllib2
except ImportError:  # Python 2.7
    import httplib  # type: ignore
    import SocketServer as socketserver  # type: ignore
    import urllib2  # type: ignore
    selectors = None

import bitsnet

host_socket, host_select = socket, select
bitsnet.install()
first = (sys.modules["socket"], sys.modules["select"], sys.modules["_socket"])
bitsnet.install()
assert (sys.modules["socket"], sys.modules["select"], sys.modules["_socket"]) == first
import socket  # noqa: E402,F811
import select  # noqa: E402,F811
assert socket is not host_socket and socket._socket.__name__ == "bitsnet._socket"
assert select.__name__ == "bitsnet.select" and bitsnet.installed()
if sys.version_info[0] >= 3:
    import http.client as httplib2
    import selectors as selectors2
    import socketserver as socketserver2
    import urllib.request as urllib3
    assert selectors2 is not selectors and selectors2.DefaultSelector.__name__ == "PollSelector"
    assert selectors2.select is select
else:
    import httplib as httplib2  # type: ignore
    import SocketServer as socketserver2  # type: ignore
    import urllib2 as urllib3  # type: ignore
assert httplib2 is not httplib and httplib2.socket is socket and urllib3 is not urllib2
assert socketserver2 is not socketserver and socketserver2.socket is socket
if sys.version_info[0] >= 3:
    assert socketserver2.selectors is selectors2
else:
    assert socketserver2.select is select
if subprocess is not None:  # on a host, subprocess keeps the OS's select
    assert subprocess.check_output([sys.executable, "-c", "print('child')"]).strip() == b"child"
response = urllib3.urlopen(sys.argv[1], timeout=10)
data = response.read()
response.close()
print("sha256 %s %d" % (hashlib.sha256(data).hexdigest(), len(data)))
