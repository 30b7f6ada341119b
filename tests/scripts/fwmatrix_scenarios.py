"""The compact scenario set tests/test_fwmatrix.py runs in real BITS on each firmware generation and NIC.

    fwmatrix_scenarios.py --lab HOST:PORT --echo PORT --host6 ADDR --plain URL --https URL --size N
                          --netconsole PORT SECTION...

Sections (each prints ``== NAME`` first, ``NAME key=value`` lines, and ``== NAME PASS`` or
``== NAME FAIL reason`` last, as tests/scripts/real_bits_battery.py does):
  selftest      python -m bitsnet.selftest --peer LAB: firmware protocols, DHCP, DNS, TCP and UDP
                echo, HTTP download, a listening socket reached from the host
  netconsole    bitsnet.netconsole mirrors five lines to the host's UDP receiver at HOST:NETCONSOLE
  https         the CA from PLAIN/ca.pem, then urllib2 GET HTTPS/data.bin (SIZE bytes) through the
                firmware's TLS: bytes, sha256, the negotiated version and cipher
  http_server   a BaseHTTPServer on port 8000 answers requests from the host (hostfwd) until
                the host asks for /done: the answers before it have all arrived by then (a
                close() finishes in the background, and a program that ends at once would power
                the machine off under the last answer)
  ipv6          TCP echo to [HOST6]:ECHO over IPv6; where the firmware has no TCP6 the socket call
                must fail with EAFNOSUPPORT (``ipv6 errno=EAFNOSUPPORT``), which the host side
                expects for such a generation

Runs on BITS's Python 2.7 (and lints on 3): short lines, no float repr, only BITS's modules.
"""

from __future__ import print_function

import errno
import hashlib
import socket
import sys
import time

HTTP_PORT = 8000
CLIENTS = 3


def section_selftest(opts):
    from bitsnet import selftest
    status = selftest.main(["--peer", opts["lab"], "--timeout", "60"])
    print("selftest status=%s" % status)
    if status:
        raise AssertionError("the selftest failed")


def section_netconsole(opts):
    from bitsnet import netconsole
    host = opts["lab"].split(":")[0]
    console = netconsole.start(host, opts["netconsole"])
    try:
        for i in range(5):
            print("netconsole line %d of 5" % (i + 1))
    finally:
        netconsole.stop()
    stats = console.stats()
    print("netconsole stats %s" % " ".join("%s=%s" % kv for kv in sorted(stats.items())
                                           if not isinstance(kv[1], dict)))
    print("netconsole done")
    sys.stdout.flush()


def section_https(opts):
    import urllib2
    import bitsnet
    bitsnet.install()
    import ssl
    pem = urllib2.urlopen(opts["plain"] + "/ca.pem", timeout=60).read()
    context = ssl.create_default_context(cadata=pem.decode("ascii"))
    start = time.time()
    url = opts["https"] + "/data.bin"
    response = urllib2.urlopen(url, None, 120, None, None, False, context)
    digest = hashlib.sha256()
    got = 0
    while True:
        chunk = response.read(65536)
        if not chunk:
            break
        digest.update(chunk)
        got += len(chunk)
    response.close()
    print("https bytes=%d seconds=%.3f" % (got, time.time() - start))
    print("https sha256=%s" % digest.hexdigest())
    host, port = opts["https"].split("/")[2].split(":")
    raw = socket.create_connection((host, int(port)), 60)
    tls_socket = context.wrap_socket(raw, server_hostname=host)
    cipher = tls_socket.cipher()[0]
    print("https version=%s cipher=%s" % (tls_socket.version(), cipher))
    tls_socket.close()
    if got != opts["size"]:
        raise AssertionError("got %d of %d bytes" % (got, opts["size"]))


def section_http_server(opts):
    import BaseHTTPServer

    paths = []

    class Hello(BaseHTTPServer.BaseHTTPRequestHandler):
        def do_GET(self):
            paths.append(self.path)
            body = "hello from firmware %s\n" % self.path
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = BaseHTTPServer.HTTPServer(("", HTTP_PORT), Hello)
    server.timeout = 60
    served = 0
    try:
        print("ready http %d" % HTTP_PORT)
        sys.stdout.flush()
        while "/done" not in paths and len(paths) <= CLIENTS:
            server.handle_request()
            served += 1
    finally:
        server.server_close()
    print("http_server served=%d paths=%s" % (served, ",".join(paths)))
    if paths[-1:] != ["/done"]:
        raise AssertionError("the host never asked for /done")


def section_ipv6(opts):
    import bitsnet
    bitsnet.install()
    import socket as bits_socket
    try:
        sock = bits_socket.socket(bits_socket.AF_INET6, bits_socket.SOCK_STREAM)
    except bits_socket.error as exc:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        print("ipv6 errno=%s" % name)
        print("ipv6 message=%s" % exc)
        return
    sock.settimeout(60)
    try:
        sock.connect((opts["host6"], opts["echo"]))
        payload = b"fwmatrix over IPv6 " * 100
        sock.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    finally:
        sock.close()
    print("ipv6 echoed=%s bytes=%d" % (got == payload, len(got)))
    if got != payload:
        raise AssertionError("the echo came back different")


def parse(argv):
    opts = {"sections": []}
    numbers = ("echo", "size", "netconsole")
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--"):
            key = word[2:]
            value = argv[i + 1]
            opts[key] = int(value) if key in numbers else value
            i += 2
        else:
            opts["sections"].append(word)
            i += 1
    return opts


def main(argv):
    opts = parse(argv[1:])
    failed = 0
    for name in opts["sections"]:
        print("== %s" % name)
        sys.stdout.flush()
        try:
            globals()["section_" + name](opts)
        except Exception as exc:
            failed += 1
            print("== %s FAIL %s: %s" % (name, exc.__class__.__name__, exc))
        else:
            print("== %s PASS" % name)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
