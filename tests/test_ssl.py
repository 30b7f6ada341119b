"""HTTPS at the boot prompt: bitsnet.ssl over the simulated firmware's EFI_TLS_PROTOCOL
(tools/efisim/tls.py, the host's OpenSSL behind it), against real HTTPS servers on 127.0.0.1
that use the host's ssl module, with a test CA made here by the ``openssl`` command.

Every failure must be the right SSLError and leave nothing behind in the firmware (the
``machine`` fixture checks the ledger: TLS children, pool, TCP children). The urllib and
httplib/http.client tests run the standard library unchanged in tools/efirun.py.
"""

from __future__ import print_function

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import conftest
import peers
import testpki

try:
    import ssl as hostssl
except ImportError:  # pragma: no cover
    hostssl = None  # type: ignore

from efisim import tls as simtls

ROOT = conftest.ROOT
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
SCRIPTS = os.path.join(ROOT, "tests", "stdlib_scripts")
ENGINE, NO_ENGINE = simtls.available()
pytestmark = pytest.mark.skipif(not ENGINE, reason=NO_ENGINE or "no TLS engine")
PY2 = sys.version_info[0] == 2
OPENSSL = testpki.OPENSSL
SERVER_PROTOCOL = getattr(hostssl, "PROTOCOL_TLS_SERVER", getattr(hostssl, "PROTOCOL_SSLv23", None))


# --- a test PKI, made once per session ----------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """The test PKI (make_pki) in a temporary directory; skips without ``openssl``."""
    if not OPENSSL:
        pytest.skip("the openssl command is needed to make the test CA")
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def make_pki(d):
    """Files in ``d``: ca.pem (the trusted CA), ca2.pem (another CA), and key/cert pairs good
    (localhost, 127.0.0.1), wronghost (other.example), unknownca (by ca2), expired."""
    for ca in ("ca", "ca2"):
        testpki.make_ca(d, ca, "/CN=bitsnet test %s" % ca)
    names = {"good": "DNS:localhost,IP:127.0.0.1", "wronghost": "DNS:other.example",
             "unknownca": "DNS:localhost,IP:127.0.0.1", "expired": "DNS:localhost,IP:127.0.0.1"}
    for name, san in names.items():
        testpki.make_request(d, name, san.split(",")[0].split(":")[1], san)
    testpki.start_ca_database(d, 1000)
    for name, ca, dates in (("good", "ca", ["-days", "2"]), ("wronghost", "ca", ["-days", "2"]),
                            ("unknownca", "ca2", ["-days", "2"]),
                            ("expired", "ca", ["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"])):
        testpki.sign(d, name, ca, dates)
    return d


class HttpsPeer(peers.ServerPeer):
    """A threaded HTTPS server on 127.0.0.1 (the host's ssl) with the named key pair, serving
    ``files``; handshake failures are counted in ``failures``."""

    def __init__(self, pki, cert, files):
        context = hostssl.SSLContext(SERVER_PROTOCOL)
        context.load_cert_chain(os.path.join(pki, cert + ".pem"), os.path.join(pki, cert + ".key"))
        server = peers.QuietHTTPServer((peers.HOST, 0), peers.files_handler(files))
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        peers.ServerPeer.__init__(self, server)

    def url(self, name, host="localhost"):
        return "https://%s:%d/%s" % (host, self.port, name)

    def __exit__(self, *exc):
        peers.ServerPeer.__exit__(self, *exc)
        self.thread.join(5)


class OneShotPeer(object):
    """A TCP server on loopback that takes one connection and gives it to ``handle`` (a
    subclass's) in a thread of its own; ``with`` starts it, and stops and joins it."""
    JOIN = 5  # s to wait for the thread at the end

    def __init__(self):
        self.stop = False
        self.sock = socket.socket()
        self.sock.bind((peers.HOST, 0))
        self.sock.listen(4)
        self.sock.settimeout(10)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve)
        self.thread.daemon = True

    def _serve(self):
        try:
            conn, _ = self.sock.accept()
        except (socket.error, socket.timeout, OSError):
            return
        try:
            conn.settimeout(10)
            self.handle(conn)
        except (socket.error, OSError):
            pass
        finally:
            conn.close()

    def handle(self, conn):
        raise NotImplementedError

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.sock.close()
        self.thread.join(self.JOIN)


class DropPeer(OneShotPeer):
    """A TCP server that reads the ClientHello and closes the connection: a server that drops
    mid-handshake."""

    def __init__(self):
        OneShotPeer.__init__(self)
        self.got = []

    def handle(self, conn):
        self.got.append(conn.recv(65536))


def _bitsnet_ssl():
    from bitsnet import _socket as bsocket
    from bitsnet import ssl as bssl
    return bsocket, bssl


def _connect(port, timeout=15):
    bsocket, _ = _bitsnet_ssl()
    s = bsocket.socket()
    s.settimeout(timeout)
    s.connect((peers.HOST, port))
    return s


def _get(tls, path, host="localhost"):
    tls.sendall(("GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)).encode("ascii"))
    chunks = []
    while True:
        data = tls.recv(65536)
        if not data:
            break
        chunks.append(data)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return head, body


def _fetch(context, port, path, host="localhost"):
    """The body of GET /PATH over a TLS connection made with ``context`` to ``port``."""
    tls = context.wrap_socket(_connect(port), server_hostname=host)
    try:
        return _get(tls, path, host)[1]
    finally:
        tls.close()


# --- in-process, over bitsnet's sockets ---------------------------------------------------------
def test_https_download_with_checksum(machine, pki):
    payload = peers.pattern(1 << 20, seed=6)
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"big.bin": payload}) as peer:
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        tls = context.wrap_socket(_connect(peer.port), server_hostname="localhost")
        try:
            assert tls.version() == "TLSv1.2"
            assert ("DNS", "localhost") in tls.getpeercert()["subjectAltName"]
            head, body = _get(tls, "big.bin")
        finally:
            tls.close()
    assert head.startswith(b"HTTP/1.0 200")
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(payload).hexdigest()


def test_ip_address_host_name(machine, pki):
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"hello"}) as peer:
        context = bssl.create_default_context(cadata=open(os.path.join(pki, "ca.pem")).read())
        assert _fetch(context, peer.port, "a", "127.0.0.1") == b"hello"


def _refused(bssl, pki, cert, ca="ca.pem", hostname="localhost", context=None):
    with HttpsPeer(pki, cert, {"a": b"x"}) as peer:
        context = context or bssl.create_default_context(cafile=os.path.join(pki, ca))
        sock = _connect(peer.port)
        try:
            # 2.7: a host name the certificate does not name is CertificateError, as in CPython 2.7
            with pytest.raises((bssl.SSLError, bssl.CertificateError)) as info:
                context.wrap_socket(sock, server_hostname=hostname)
        finally:
            sock.close()
    return info.value


def test_wrong_host_name(machine, pki):
    _, bssl = _bitsnet_ssl()
    error = _refused(bssl, pki, "wronghost")
    assert error.reason == "CERTIFICATE_VERIFY_FAILED"
    if not PY2:
        assert isinstance(error, bssl.SSLCertVerificationError)
    assert "certificate" in str(error)


def test_unknown_ca(machine, pki):
    _, bssl = _bitsnet_ssl()
    error = _refused(bssl, pki, "unknownca")
    assert error.reason == "CERTIFICATE_VERIFY_FAILED"
    assert "unknown CA" in str(error), str(error)


def test_no_ca_given_says_so(machine, pki):
    _, bssl = _bitsnet_ssl()
    context = bssl.SSLContext(bssl.PROTOCOL_TLS_CLIENT)  # no CA at all
    error = _refused(bssl, pki, "good", context=context)
    assert "no CA certificate" in str(error), str(error)


def test_each_context_trusts_only_its_own_cas(machine, pki):
    """TlsDxe keeps every CA it was given for the whole boot (docs/tls.md section 2.3), so after a context
    with ca.pem, the firmware accepts the server for a context with only ca2.pem, or none;
    bitsnet still refuses, from the chain it saw in the handshake."""
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"ok"}) as peer:
        good = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        tls = good.wrap_socket(_connect(peer.port), server_hostname="localhost")
        tls.close()
    error = _refused(bssl, pki, "good", ca="ca2.pem")
    assert error.reason == "CERTIFICATE_VERIFY_FAILED" and "does not lead to a CA of this SSLContext" in str(error), \
        str(error)
    error = _refused(bssl, pki, "good", context=bssl.SSLContext(bssl.PROTOCOL_TLS_CLIENT))
    assert "no CA certificate" in str(error), str(error)  # (test_ssl_trust.py has the chain attack)


def test_expired_certificate(machine, pki, monkeypatch):
    """EDK2's TlsDxe ignores validity periods (X509_V_FLAG_NO_CHECK_TIME, docs/tls.md section 2.3) and
    so does the simulated one; bitsnet checks them against the firmware's RTC, which the
    simulator does not have: the host's clock stands in for it here."""
    from bitsnet import clock
    _, bssl = _bitsnet_ssl()
    monkeypatch.setattr(clock, "rtc_utc", lambda: time.strftime("%Y%m%d%H%M%S", time.gmtime()))
    error = _refused(bssl, pki, "expired")
    assert error.reason == "CERTIFICATE_VERIFY_FAILED"
    assert "certificate has expired" in str(error) and "checked by bitsnet" in str(error), str(error)
    assert error.verify_code == 10  # X509_V_ERR_CERT_HAS_EXPIRED
    # OpenSSL's X509_V_FLAG_NO_CHECK_TIME turns the date check off, as in CPython (a board whose RTC is wrong)
    context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
    context.verify_flags |= 0x200000
    with HttpsPeer(pki, "expired", {"a": b"old"}) as peer:
        assert _fetch(context, peer.port, "a") == b"old"


def test_server_drops_mid_handshake(machine, pki):
    _, bssl = _bitsnet_ssl()
    with DropPeer() as peer:
        sock = _connect(peer.port)
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        try:
            with pytest.raises(bssl.SSLEOFError):
                context.wrap_socket(sock, server_hostname="localhost")
        finally:
            sock.close()
        peer.thread.join(5)
    assert peer.got and peer.got[0][:1] == b"\x16"  # it did get a ClientHello (a handshake record)


def failed_handshake(pki, port, expected, timeout):
    """(the exception, seconds taken) of a handshake with ca.pem's context to ``port`` that
    must fail with ``expected``, on a socket with ``timeout``; the socket is closed after."""
    _, bssl = _bitsnet_ssl()
    sock = _connect(port, timeout=timeout)
    context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
    started = time.time()
    try:
        with pytest.raises(expected) as info:
            context.wrap_socket(sock, server_hostname="localhost")
    finally:
        sock.close()
    return info.value, time.time() - started


def test_silent_server_times_out(machine, pki):
    """A server that accepts and never answers the ClientHello: the socket's timeout, no leak."""
    bsocket, _ = _bitsnet_ssl()
    silent = socket.socket()
    silent.bind((peers.HOST, 0))
    silent.listen(1)
    try:
        error, elapsed = failed_handshake(pki, silent.getsockname()[1], bsocket.timeout, 1.0)
        assert "timed out" in str(error)
        assert elapsed < 10
    finally:
        silent.close()


def test_unverified_context_accepts_anything(machine, pki):
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "unknownca", {"a": b"plain"}) as peer:
        context = bssl._create_unverified_context()
        tls = context.wrap_socket(_connect(peer.port), server_hostname="localhost")
        try:
            assert tls.getpeercert() == {}
            assert tls.getpeercert(binary_form=True)[:1] == b"\x30"
            assert _get(tls, "a")[1] == b"plain"
        finally:
            tls.close()


@pytest.mark.machine(tls="edk2-2019")
def test_old_firmware_host_name_checked_in_python(machine, pki):
    _, bssl = _bitsnet_ssl()
    error = _refused(bssl, pki, "wronghost")
    assert "other.example" in str(error) and "localhost" in str(error), str(error)
    with HttpsPeer(pki, "good", {"a": b"ok"}) as peer:
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        assert _fetch(context, peer.port, "a") == b"ok"


@pytest.mark.machine(tls=None)
def test_no_tls_service_binding(machine, pki):
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"x"}) as peer:
        sock = _connect(peer.port)
        try:
            with pytest.raises(bssl.SSLError) as info:
                bssl.create_default_context(cafile=os.path.join(pki, "ca.pem")).wrap_socket(
                    sock, server_hostname="localhost")
        finally:
            sock.close()
    assert "EFI_TLS_SERVICE_BINDING_PROTOCOL" in str(info.value)


def test_select_counts_decrypted_data_as_readable(machine, pki):
    from bitsnet import select as bselect
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"y" * 5000}) as peer:
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        tls = context.wrap_socket(_connect(peer.port), server_hostname="localhost")
        try:
            tls.sendall(b"GET /a HTTP/1.0\r\nHost: localhost\r\n\r\n")
            assert bselect.select([tls], [], [], 10)[0] == [tls]
            first = tls.recv(10)  # the rest of the decrypted record stays in the TLS layer
            assert first and tls.pending() > 0
            assert bselect.select([tls], [], [], 0)[0] == [tls]
            rest = b""
            while True:
                data = tls.recv(65536)
                if not data:
                    break
                rest += data
            assert (first + rest).endswith(b"y" * 5000)
        finally:
            tls.close()


def test_nonblocking_recv_wants_read(machine, pki):
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"z"}) as peer:
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        tls = context.wrap_socket(_connect(peer.port), server_hostname="localhost")
        try:
            tls.setblocking(False)
            with pytest.raises(bssl.SSLWantReadError):
                tls.recv(100)  # nothing asked, nothing sent
        finally:
            tls.close()


def test_wrap_before_connect(machine, pki):
    """wrap_socket on an unconnected socket: the handshake runs in connect(), as in CPython."""
    bsocket, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"late"}) as peer:
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        raw = bsocket.socket()
        raw.settimeout(15)
        tls = context.wrap_socket(raw, server_hostname="localhost")
        try:
            assert tls.version() is None
            tls.connect((peers.HOST, peer.port))
            assert tls.version() == "TLSv1.2"
            assert _get(tls, "a")[1] == b"late"
        finally:
            tls.close()


def test_check_hostname_needs_server_hostname(machine):
    _, bssl = _bitsnet_ssl()
    bsocket, _ = _bitsnet_ssl()
    sock = bsocket.socket()
    try:
        with pytest.raises(ValueError):
            bssl.create_default_context().wrap_socket(sock)
    finally:
        sock.close()


# --- the standard library, unchanged, in tools/efirun.py -----------------------------------------
def _efirun(script, args, timeout=90, env=None, options=()):
    """Run a script in tools/efirun.py; (exit code, stdout, stderr). The firmware ledger it prints
    at exit must be all zeros: no TLS child, pool, event or TCP child left behind."""
    command = [sys.executable, EFIRUN, "--ledger"] + list(options) + conftest.STATION_ARGS
    command += [os.path.join(SCRIPTS, script)]
    command += [str(a) for a in args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            universal_newlines=True, env=dict(os.environ, **(env or {})))
    watchdog = threading.Timer(timeout, proc.kill)  # Python 2.7's communicate() has no timeout
    watchdog.start()
    try:
        out, err = proc.communicate()
    finally:
        watchdog.cancel()
    if proc.returncode is not None and proc.returncode < 0:
        pytest.fail("efirun killed after %d s:\n%s\n%s" % (timeout, out, err))
    ledger = [line for line in err.splitlines() if line.startswith("efirun ledger:")]
    assert ledger, out + err
    leaked = [item for item in ledger[-1].split()[2:] if not item.endswith("=0")]
    assert not leaked, "efirun left %s behind:\n%s%s" % (leaked, out, err)
    return proc.returncode, out, err


@pytest.mark.parametrize("client", ["urllib", "httplib"])
def test_stdlib_https_download(pki, client):
    payload = peers.pattern(300000, seed=9)
    with HttpsPeer(pki, "good", {"f.bin": payload}) as peer:
        code, out, err = _efirun("https_get.py", [client, peer.url("f.bin"), os.path.join(pki, "ca.pem")])
    assert code == 0, out + err
    assert "sha256 %s" % hashlib.sha256(payload).hexdigest() in out, out + err


def test_hosts_own_ssl_wraps_bitsnet_sockets(pki):
    """A Python with its own ssl (--host-stdlib) keeps it after bitsnet.install(), taught to
    wrap bitsnet sockets (bitsnet/hostssl.py): urlopen, a non-blocking handshake and read driven
    by select(), and a handshake timeout with the C module's words."""
    payload = peers.pattern(150000, seed=7)
    silent = socket.socket()
    silent.bind((peers.HOST, 0))
    silent.listen(4)  # accepts (the kernel does) and never speaks
    try:
        with HttpsPeer(pki, "good", {"f.bin": payload}) as peer:
            code, out, err = _efirun("host_ssl.py", [peer.url("f.bin"), os.path.join(pki, "ca.pem"),
                                                     silent.getsockname()[1]], options=["--host-stdlib"])
    finally:
        silent.close()
    assert code == 0, out + err
    assert "sha256 %s %d" % (hashlib.sha256(payload).hexdigest(), len(payload)) in out, out + err
    assert "nonblocking HTTP/1.0 200 OK" in out, out + err
    assert "timeout The handshake operation timed out" in out, out + err


def test_efirun_no_tls(pki):
    """efirun --no-tls: a firmware without TlsDxe; the error says so, before any byte is sent."""
    with HttpsPeer(pki, "good", {"f.bin": b"x"}) as peer:
        code, out, err = _efirun("https_get.py", ["urllib", peer.url("f.bin"), os.path.join(pki, "ca.pem")],
                                 options=["--no-tls"])
    assert code == 0, out + err
    assert "error SSL NO_FIRMWARE_TLS" in out and "EFI_TLS_SERVICE_BINDING_PROTOCOL" in out, out + err


def test_stdlib_https_wrong_host_is_an_error(pki):
    with HttpsPeer(pki, "wronghost", {"f.bin": b"x"}) as peer:
        code, out, err = _efirun("https_get.py", ["urllib", peer.url("f.bin"), os.path.join(pki, "ca.pem")])
    assert code == 0, out + err
    assert "error SSL" in out and "CERTIFICATE_VERIFY_FAILED" in out, out + err
    assert "sha256" not in out


def test_bits_model_urlopen_uses_bitsnet_ssl(pki):
    """Under the simulator's model of BITS's Python (no ssl module), bitsnet.install() makes
    bitsnet.ssl the ``ssl`` module: urlopen("https://...") verifies with the default context."""
    payload = peers.pattern(200000, seed=4)
    bits = {"BITSNET_SIM_PYTHON": "bits"}
    with HttpsPeer(pki, "good", {"f.bin": payload}) as peer:
        code, out, err = _efirun("https_bits.py", [peer.url("f.bin"), os.path.join(pki, "ca.pem")], env=bits)
        assert code == 0, out + err
        assert "sha256 %s" % hashlib.sha256(payload).hexdigest() in out, out + err
        code, out, err = _efirun("https_bits.py", [peer.url("f.bin"), os.path.join(pki, "ca2.pem")], env=bits)
        assert code == 0, out + err
        assert "error SSL CERTIFICATE_VERIFY_FAILED" in out, out + err
