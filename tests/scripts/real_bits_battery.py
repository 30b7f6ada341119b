"""The battery tests/test_real_bits.py runs in real BITS (tools/bitsrun.py), in one boot.

    real_bits_battery.py --lab HOST:PORT --echo PORT --closed PORT --tarpit PORT [--size N] [--rounds N]
                         SECTION...

Sections (each prints ``== NAME`` first, ``NAME key=value`` lines, and ``== NAME PASS`` or
``== NAME FAIL reason`` last; the host side asserts on them):
  download      urllib2 GET /bytes/N from the lab, --rounds times (default 3; the best counts, so a
                moment of load on the host does not decide the rate): bytes, seconds, MB/s, sha256
                against X-SHA256 (after a 1-byte GET that brings the address up: DHCP is not timed)
  http_server   a BaseHTTPServer on port 8000 answers 3 requests from the host (hostfwd), then stops
  select_server a select() server on port 8001 serves 3 host clients at once (upper-cases a line)
  refused       connect to a port nobody listens on: socket.error with errno.ECONNREFUSED
  timeout       connect with a 2 s timeout to a peer that never answers the SYN: socket.timeout
  udp           a datagram to the lab's UDP echo and back
  dns           bitsnet.configure(dns=[HOST]) then a name the lab's DNS server knows, and one it does not
  urllib        Python 2's urllib.urlopen (not urllib2) GET /bytes/N: its URLopener keeps os.unlink,
                which BITS's os lacks until bitsnet.install() adds it

Runs on BITS's Python 2.7 (and lints on 3): short lines, no float repr, only BITS's modules.
"""

from __future__ import print_function

import errno
import hashlib
import socket
import sys
import time

HTTP_PORT = 8000
SELECT_PORT = 8001
CLIENTS = 3


def _mbps(size, seconds):
    return "%.3f" % (size / max(seconds, 0.001) / 1e6)


def _download_once(urlopen, url):
    """(bytes, seconds, sha256 good) of one urllib2 GET, read in 64 KiB pieces."""
    start = time.time()
    response = urlopen(url, timeout=60)
    digest = hashlib.sha256()
    got = 0
    while True:
        chunk = response.read(65536)
        if not chunk:
            break
        digest.update(chunk)
        got += len(chunk)
    seconds = time.time() - start
    info = response.info()
    expected = info.getheader("X-SHA256") if hasattr(info, "getheader") else info.get("X-SHA256")
    response.close()
    return got, seconds, digest.hexdigest() == expected


def _calibrate():
    """A fixed amount of pure-Python work (a few tenths of a second in BITS under TCG)."""
    total, i = 0, 0
    while i < CALIBRATE_STEPS:
        total += i & 7
        i += 1
    return total


CALIBRATE_STEPS = 200000


def section_download(opts):
    try:
        from urllib2 import urlopen
    except ImportError:
        from urllib.request import urlopen  # type: ignore
    size = opts["size"]
    # The address first (DHCP, the timer restart), so that the rate is the transfer's alone.
    urlopen("http://%s/bytes/1" % opts["lab"], timeout=60).read()
    url = "http://%s/bytes/%d" % (opts["lab"], size)
    best = None
    all_good = True
    for round_number in range(opts["rounds"]):
        # The host timestamps the calibrate, start and done lines: a check of the guest's clock,
        # and how fast this guest runs Python just now (tests/test_real_bits.py _host_rates).
        print("download round %d calibrate" % round_number)
        sys.stdout.flush()
        _calibrate()
        print("download round %d start" % round_number)
        sys.stdout.flush()
        got, seconds, good = _download_once(urlopen, url)
        print("download round %d done bytes=%d seconds=%.3f rate=%s" % (round_number, got, seconds,
                                                                         _mbps(got, seconds)))
        sys.stdout.flush()
        all_good = all_good and good and got == size
        if best is None or seconds < best:
            best = seconds
    print("download bytes=%d seconds=%.3f (best of %d)" % (size, best, opts["rounds"]))
    print("download rate=%s MB/s" % _mbps(size, best))
    print("download sha256=%s" % ("ok" if all_good else "BAD"))
    if not all_good:
        raise AssertionError("a round got fewer bytes than %d or a bad checksum" % size)


def section_urllib(opts):
    import urllib
    size = 100000
    response = urllib.urlopen("http://%s/bytes/%d" % (opts["lab"], size))  # type: ignore[attr-defined]
    data = response.read()
    expected = response.info().getheader("X-SHA256")
    response.close()
    good = hashlib.sha256(data).hexdigest() == expected
    print("urllib bytes=%d" % len(data))
    print("urllib sha256=%s" % ("ok" if good else "BAD"))
    if len(data) != size or not good:
        raise AssertionError("urllib.urlopen got %d bytes, checksum %s" % (len(data), good))


def section_http_server(opts):
    import BaseHTTPServer

    class Hello(BaseHTTPServer.BaseHTTPRequestHandler):
        def do_GET(self):
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
        for _ in range(CLIENTS):
            server.handle_request()
            served += 1
    finally:
        server.server_close()
    print("http_server served=%d" % served)


def section_select_server(opts):
    import select
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("", SELECT_PORT))
    listener.listen(5)
    clients = {}
    done = 0
    most = 0
    deadline = time.time() + 60
    print("ready select %d" % SELECT_PORT)
    sys.stdout.flush()
    try:
        while done < CLIENTS and time.time() < deadline:
            readable, _, _ = select.select([listener] + list(clients), [], [], 1.0)
            for sock in readable:
                if sock is listener:
                    conn, _ = listener.accept()
                    clients[conn] = b""
                    most = max(most, len(clients))
                    continue
                data = sock.recv(4096)
                if data:
                    clients[sock] += data
                    if clients[sock].endswith(b"\n"):
                        sock.sendall(clients[sock].upper())
                        clients[sock] = b""
                    continue
                del clients[sock]
                sock.close()
                done += 1
    finally:
        for sock in clients:
            sock.close()
        listener.close()
    print("select_server served=%d at_once=%d" % (done, most))
    if done != CLIENTS:
        raise AssertionError("served %d of %d clients" % (done, CLIENTS))


def section_refused(opts):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(20)
    try:
        sock.connect((opts["host"], opts["closed"]))
    except socket.timeout:
        raise AssertionError("timed out instead of refused")
    except socket.error as exc:
        code = exc.args[0] if exc.args else None
        name = errno.errorcode.get(code, "?") if hasattr(errno, "errorcode") else "?"
        print("refused errno=%s name=%s" % (code, name))
        print("refused is_ECONNREFUSED=%s" % (code == getattr(errno, "ECONNREFUSED", None)))
        if code != getattr(errno, "ECONNREFUSED", None):
            raise AssertionError("errno %r, not ECONNREFUSED" % (code,))
        return
    finally:
        sock.close()
    raise AssertionError("connect succeeded")


BURST = 600  # connections one after the other to the lab's HTTP server


def section_burst(opts):
    """A burst of short connections to one peer, each a GET of one byte: none refused, none
    stalled. (With a random port per connection, about 1 in 200 met a port of the last seconds
    still held by QEMU's user network and was refused: bitsnet/child.py random_port.)"""
    host, _, port = opts["lab"].partition(":")
    failures, slowest, start = [], 0.0, time.time()
    for _ in range(BURST):
        began = time.time()
        try:
            sock = socket.create_connection((host, int(port or 80)), timeout=10)
            try:
                sock.sendall(b"GET /bytes/1 HTTP/1.0\r\n\r\n")
                while sock.recv(4096):
                    pass
            finally:
                sock.close()
        except socket.error as exc:
            failures.append(exc.args[0] if exc.args else str(exc))
        slowest = max(slowest, time.time() - began)
    print("burst connections=%d failed=%d slowest=%.3f seconds=%.1f" % (BURST, len(failures), slowest,
                                                                        time.time() - start))
    if failures:
        raise AssertionError("%d of %d connections failed: %r" % (len(failures), BURST, failures[:5]))


def section_broken_pipe(opts):
    """Writing to a peer that closed: the lab answers and closes (FIN), our next bytes draw its
    RST, and a send after that raises EPIPE -- Linux's errno for a RST after the peer's FIN --
    while recv stays at EOF."""
    host, _, port = opts["lab"].partition(":")
    sock = socket.create_connection((host, int(port or 80)), timeout=10)
    try:
        sock.sendall(b"GET /bytes/1 HTTP/1.0\r\n\r\n")
        while sock.recv(4096):
            pass
        sends, code, deadline = 0, None, time.time() + 5
        while code is None and time.time() < deadline:
            try:
                sock.send(b"x")
                sends += 1
                time.sleep(0.2)
            except socket.error as exc:
                code = exc.args[0] if exc.args else None
        name = errno.errorcode.get(code, "?") if hasattr(errno, "errorcode") else "?"
        print("broken_pipe sends=%d errno=%s name=%s eof=%r" % (sends, code, name, sock.recv(10) == b""))
        if code != getattr(errno, "EPIPE", 32):
            raise AssertionError("errno %r, not EPIPE" % (code,))
    finally:
        sock.close()


def section_timeout(opts):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    start = time.time()
    try:
        sock.connect((opts["host"], opts["tarpit"]))
    except socket.timeout as exc:
        print("timeout after=%.3f s message=%s" % (time.time() - start, exc))
        return
    except socket.error as exc:
        raise AssertionError("socket.error %r instead of socket.timeout" % (exc.args,))
    finally:
        sock.close()
    raise AssertionError("connect succeeded")


def section_udp(opts):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(10)
    try:
        payload = b"bitsnet real BITS udp"
        start = time.time()
        sock.sendto(payload, (opts["host"], opts["echo"]))
        data, source = sock.recvfrom(2048)
        print("udp echoed=%s from=%s:%d ms=%.3f" % (data == payload, source[0], source[1],
                                                    (time.time() - start) * 1000))
        if data != payload:
            raise AssertionError("echo came back as %r" % data)
    finally:
        sock.close()


def section_dns(opts):
    import bitsnet
    bitsnet.configure(dns=[opts["host"]])
    address = socket.gethostbyname("lab.bitsnet.test")
    print("dns lab.bitsnet.test=%s" % address)
    start = time.time()
    try:
        socket.gethostbyname("nowhere.bitsnet.test")
        missing = "resolved"
    except socket.gaierror as exc:
        missing = "gaierror %s" % (exc.args[0],)
    print("dns nowhere.bitsnet.test=%s ms=%d" % (missing, (time.time() - start) * 1000))
    if address != "127.0.0.1" or not missing.startswith("gaierror"):
        raise AssertionError("lookups gave %s and %s" % (address, missing))


SECTIONS = {"download": section_download, "http_server": section_http_server,
            "select_server": section_select_server, "refused": section_refused,
            "timeout": section_timeout, "udp": section_udp, "dns": section_dns,
            "urllib": section_urllib, "burst": section_burst, "broken_pipe": section_broken_pipe}


def parse(argv):
    opts = {"size": 8 * 1024 * 1024, "rounds": 3, "sections": []}
    words = list(argv)
    while words:
        word = words.pop(0)
        if word in ("--lab", "--echo", "--closed", "--tarpit", "--size", "--rounds"):
            value = words.pop(0)
            opts[word[2:]] = value if word == "--lab" else int(value)
        else:
            opts["sections"].append(word)
    opts["host"] = opts["lab"].partition(":")[0]
    return opts


def main(argv):
    import traceback
    opts = parse(argv)
    failed = 0
    for name in opts["sections"]:
        print("== %s" % name)
        start = time.time()
        try:
            SECTIONS[name](opts)
            verdict = "PASS"
        except Exception as exc:
            traceback.print_exc()
            verdict = "FAIL %s: %s" % (exc.__class__.__name__, exc)
            failed += 1
        print("== %s %s (%.3f s)" % (name, verdict, time.time() - start))
        sys.stdout.flush()
    print("battery failed=%d" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
