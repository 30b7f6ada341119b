"""Whom a bitsnet.ssl context trusts, on the simulated firmware (tools/efisim/tls.py) against real
HTTPS servers on 127.0.0.1:

* each SSLContext trusts exactly its own CAs, although the firmware keeps every CA of the boot in
  one store (docs/tls.md section 2.3): the server's chain is verified in Python up to one of the
  context's CAs; ``curl`` and ``openssl s_client`` with the same CA file are the reference;
* an IP address matches only IP address entries of subjectAltName;
* partial wildcards ("f*.example.test") are refused: bitsnet sets EFI_TLS_VERIFY_FLAG_NO_PARTIAL_WILDCARDS,
  and the simulated TlsDxe accepts them without it, as OVMF's does;
* the socket's timeout bounds the whole handshake, and the handshake bytes kept are bounded;
* a server_hostname with a NUL is refused before anything reaches the firmware.
"""

from __future__ import print_function

import os
import subprocess
import time

import pytest

import testpki
from test_ssl import ENGINE, NO_ENGINE, HttpsPeer, OneShotPeer, _bitsnet_ssl, _connect, _fetch, _refused, make_pki
from test_ssl import failed_handshake

pytestmark = pytest.mark.skipif(not ENGINE, reason=NO_ENGINE or "no TLS engine")
OPENSSL = testpki.OPENSSL
CURL = testpki._which("curl")
PROFILES = [pytest.param("edk2", marks=pytest.mark.machine(tls="edk2")),
            pytest.param("edk2-2019", marks=pytest.mark.machine(tls="edk2-2019"))]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """test_ssl's PKI (ca.pem signs good, ca2.pem signs unknownca) and: goodplusca2 (good's key,
    its chain with ca2.pem appended), certificates for 127.0.0.1 with the address only in places
    that must not match it, and a partial wildcard."""
    if not OPENSSL:
        pytest.skip("the openssl command is needed to make the test CA")
    d = make_pki(str(tmp_path_factory.mktemp("trustpki")))
    with open(os.path.join(d, "goodplusca2.pem"), "w") as f:
        f.write(open(os.path.join(d, "good.pem")).read() + open(os.path.join(d, "ca2.pem")).read())
    with open(os.path.join(d, "goodplusca2.key"), "w") as f:
        f.write(open(os.path.join(d, "good.key")).read())
    names = {"ipdns": ("127.0.0.1", "DNS:127.0.0.1"), "ipwild": ("ip wildcard", "DNS:*.0.0.1"),
             "partial": ("partial wildcard", "DNS:f*.example.test")}
    for name, (common_name, san) in names.items():
        testpki.make_request(d, name, common_name, san)
    testpki.run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "ipcn.key", "-out", "ipcn.csr", "-subj",
                 "/CN=127.0.0.1"], d)  # no subjectAltName at all
    testpki.start_ca_database(d, 5000)
    for name in list(names) + ["ipcn"]:
        testpki.sign(d, name, "ca", ["-days", "2"])
    # An intermediate CA under ca.pem, and a server certificate from it sent with the intermediate.
    testpki.run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "inter.key", "-out", "inter.csr", "-subj",
                 "/CN=bitsnet test intermediate"], d)
    with open(os.path.join(d, "inter.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n")
    testpki.run(["x509", "-req", "-in", "inter.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "77",
                 "-days", "2", "-sha256", "-extfile", "inter.ext", "-out", "inter.pem"], d)
    with open(os.path.join(d, "leaf.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost\n")
    testpki.run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "viainter.key", "-out", "viainter.csr", "-subj",
                 "/CN=localhost"], d)
    testpki.run(["x509", "-req", "-in", "viainter.csr", "-CA", "inter.pem", "-CAkey", "inter.key", "-set_serial",
                 "78", "-days", "2", "-sha256", "-extfile", "leaf.ext", "-out", "viainter_only.pem"], d)
    with open(os.path.join(d, "viainter.pem"), "w") as f:
        f.write(open(os.path.join(d, "viainter_only.pem")).read() + open(os.path.join(d, "inter.pem")).read())
    return d


def _reference_verdicts(pki, port, cafile):
    """(curl accepts, openssl s_client accepts) for https://localhost:PORT with only ``cafile``."""
    ca = os.path.join(pki, cafile)
    with open(os.devnull, "wb") as null:
        curl = subprocess.call([CURL, "-s", "-o", os.devnull, "--max-time", "20", "--cacert", ca, "--capath",
                                "/nonexistent", "--resolve", "localhost:%d:127.0.0.1" % port,
                                "https://localhost:%d/a" % port], stdout=null, stderr=null)
        proc = subprocess.Popen([OPENSSL, "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", "localhost",
                                 "-CAfile", ca, "-no-CApath", "-verify_return_error", "-verify_hostname", "localhost"],
                                stdin=subprocess.PIPE, stdout=null, stderr=null)
        proc.communicate(b"")
    return curl == 0, proc.returncode == 0


@pytest.mark.skipif(not CURL, reason="curl is the reference client (Debian package curl)")
def test_each_context_trusts_exactly_its_own_cas(machine, pki):
    """The pooled-CA attack. Context A (ca.pem) is used once, for a handshake that fails (wrong host
    name) -- the firmware now holds ca.pem for the rest of the boot. Context B trusts only ca2.pem:
    it must refuse the ca.pem-signed server sent alone and also when the server appends ca2.pem to
    its chain, as curl and openssl s_client with ca2.pem do; and accept a ca2.pem-signed server."""
    _, bssl = _bitsnet_ssl()
    error = _refused(bssl, pki, "wronghost", ca="ca.pem")  # context A: a failed handshake
    assert error.reason == "CERTIFICATE_VERIFY_FAILED"
    for server in ("good", "goodplusca2"):
        error = _refused(bssl, pki, server, ca="ca2.pem")
        assert error.reason == "CERTIFICATE_VERIFY_FAILED", str(error)
        assert "does not lead to a CA of this SSLContext" in str(error), str(error)
        with HttpsPeer(pki, server, {"a": b"x"}) as peer:
            assert _reference_verdicts(pki, peer.port, "ca2.pem") == (False, False)
            assert _reference_verdicts(pki, peer.port, "ca.pem") == (True, True)  # the reference can say yes
    context_b = bssl.create_default_context(cafile=os.path.join(pki, "ca2.pem"))
    with HttpsPeer(pki, "unknownca", {"a": b"b's own"}) as peer:
        assert _fetch(context_b, peer.port, "a") == b"b's own"
    error = _refused(bssl, pki, "good", context=bssl.SSLContext(bssl.PROTOCOL_TLS_CLIENT))
    assert "gave the firmware no CA certificate" in str(error), str(error)


def test_chain_through_an_intermediate(machine, pki):
    """The server sends its certificate and an intermediate; the context trusts the root: every
    link is checked (leaf by the intermediate, intermediate by ca.pem). A context trusting only
    ca2.pem refuses the same server after ca.pem is in the firmware's store."""
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "viainter", {"a": b"two links"}) as peer:
        context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
        assert _fetch(context, peer.port, "a") == b"two links"
    error = _refused(bssl, pki, "viainter", ca="ca2.pem")
    assert "does not lead to a CA of this SSLContext" in str(error), str(error)


@pytest.mark.parametrize("profile", PROFILES)
def test_ip_address_matches_only_ip_entries(machine, pki, profile):
    """For 127.0.0.1: a DNS entry "127.0.0.1", CN=127.0.0.1, DNS "*.0.0.1" all refused, by the
    simulated firmware (EfiTlsVerifyHost) and by bitsnet's own check (edk2-2019)."""
    _, bssl = _bitsnet_ssl()
    for cert in ("ipdns", "ipcn", "ipwild"):
        error = _refused(bssl, pki, cert, hostname="127.0.0.1")
        assert "CERTIFICATE_VERIFY_FAILED" in str(error) or isinstance(error, bssl.CertificateError), str(error)
    with HttpsPeer(pki, "good", {"a": b"ip"}) as peer:  # IP:127.0.0.1 in subjectAltName
        tls = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem")).wrap_socket(
            _connect(peer.port), server_hostname="127.0.0.1")
        tls.close()


def test_match_hostname_addresses():
    from bitsnet import ssl as bssl
    ip_in_dns = {"subjectAltName": (("DNS", "127.0.0.1"),)}
    for cert, host in ((ip_in_dns, "127.0.0.1"), ({"subject": ((("commonName", "127.0.0.1"),),)}, "127.0.0.1"),
                       ({"subjectAltName": (("DNS", "*.0.0.1"),)}, "127.0.0.1"),
                       ({"subjectAltName": (("IP Address", "::1"),)}, "127.0.0.1")):
        with pytest.raises((bssl.CertificateError, bssl.SSLError)):
            bssl.match_hostname(cert, host)
    bssl.match_hostname({"subjectAltName": (("IP Address", "2001:DB8:0:0:0:0:0:1"),)}, "2001:db8::1")
    bssl.match_hostname({"subjectAltName": (("DNS", "x"), ("IP Address", "10.0.2.2"))}, "10.0.2.2")


@pytest.mark.parametrize("profile", PROFILES)
def test_partial_wildcards_refused(machine, pki, profile):
    _, bssl = _bitsnet_ssl()
    error = _refused(bssl, pki, "partial", hostname="foo.example.test")
    assert "CERTIFICATE_VERIFY_FAILED" in str(error) or isinstance(error, bssl.CertificateError), str(error)


def _firmware_handshake(pki, cert, hostname, flags):
    """A handshake by the (simulated) firmware alone: a TLS child with EfiTlsVerifyHost(flags)."""
    from bitsnet import efidefs_tls as T
    from bitsnet import tls
    import efi
    with HttpsPeer(pki, cert, {"a": b"x"}) as peer:
        sock = _connect(peer.port)
        child = tls.TlsChild()
        try:
            child.must_set(T.EfiTlsVerifyMethod, efi.UINT32(T.EFI_TLS_VERIFY_PEER))
            with open(os.path.join(pki, "ca.pem"), "rb") as f:
                child.add_ca(f.read())
            assert child.set_verify_host(hostname, flags)
            session = tls.TlsSession(child, sock)
            try:
                session.handshake()
                return True
            except tls.TlsFailure as failure:
                return failure.kind
        finally:
            child.destroy()
            sock.close()


def test_simulated_firmware_takes_partial_wildcards_by_default(machine, pki):
    """OVMF's OpenSSL gets EfiTlsVerifyHost's flags as they are (SSL_set_hostflags): NONE accepts
    f*.example.test for foo.example.test, NO_PARTIAL_WILDCARDS refuses it (docs/tls.md section 2.4)."""
    from bitsnet import efidefs_tls as T
    assert _firmware_handshake(pki, "partial", "foo.example.test", T.EFI_TLS_VERIFY_FLAG_NONE) is True
    assert _firmware_handshake(pki, "partial", "foo.example.test",
                               T.EFI_TLS_VERIFY_FLAG_NO_PARTIAL_WILDCARDS) == "verify"
    assert _firmware_handshake(pki, "partial", "bar.example.test", T.EFI_TLS_VERIFY_FLAG_NONE) == "verify"


def test_simulated_firmware_ignores_validity_periods(machine, pki):
    """As OVMF's (measured in tests/test_ssl_realbits.py): the firmware alone accepts a certificate
    that ended in 2020; bitsnet's own check is what refuses it (test_ssl.py test_expired_certificate)."""
    from bitsnet import efidefs_tls as T
    assert _firmware_handshake(pki, "expired", "localhost", T.EFI_TLS_VERIFY_FLAG_NO_PARTIAL_WILDCARDS) is True


class HelloRequestPeer(OneShotPeer):
    """A TCP server that reads the ClientHello and then sends HelloRequest records, one every
    ``interval`` seconds, or (0) records of 4096 HelloRequests each as fast as it can, until the
    client goes away or the test ends."""

    RECORD = b"\x16\x03\x03\x00\x04" + b"\x00\x00\x00\x00"
    FULL_RECORD = b"\x16\x03\x03\x40\x00" + b"\x00\x00\x00\x00" * 4096

    JOIN = 35  # the sender's own 30 s, and some

    def __init__(self, interval):
        OneShotPeer.__init__(self)
        self.interval = interval
        self.sent = 0

    def handle(self, conn):
        conn.recv(65536)
        burst = self.RECORD if self.interval else self.FULL_RECORD
        started = time.time()
        while time.time() - started < 30 and not self.stop:
            conn.sendall(burst)
            self.sent += len(burst)
            if self.interval:
                time.sleep(self.interval)


def test_handshake_deadline(machine, pki):
    """The reviewer's server: HelloRequest records trickling in, each well within the timeout.
    The socket's timeout (1 s) bounds the whole handshake, as CPython's does."""
    bsocket, _ = _bitsnet_ssl()
    with HelloRequestPeer(0.05) as peer:
        error, elapsed = failed_handshake(pki, peer.port, bsocket.timeout, 1.0)
    assert "handshake operation timed out" in str(error)
    assert 0.9 < elapsed < 3.0, elapsed


def test_handshake_bytes_are_bounded(machine, pki):
    """The same server as fast as it can, and a socket without timeout: the handshake bytes kept
    stop at tls.HANDSHAKE_MAX with an SSLError."""
    from bitsnet import tls
    _, bssl = _bitsnet_ssl()
    with HelloRequestPeer(0) as peer:
        error, _ = failed_handshake(pki, peer.port, bssl.SSLError, None)
    assert "exceed %d bytes" % tls.HANDSHAKE_MAX in str(error), str(error)


@pytest.mark.parametrize("name", [u"localhost\0.evil.test", b"localhost\0.evil.test", u"", u".localhost"])
def test_bad_server_hostname(machine, pki, name):
    """Refused before the firmware sees it (it would check the name cut at the NUL): ValueError,
    and TypeError as CPython raises for the NUL."""
    from bitsnet import tls
    _, bssl = _bitsnet_ssl()
    with HttpsPeer(pki, "good", {"a": b"x"}) as peer:
        sock = _connect(peer.port)
        try:
            context = bssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
            if not name:
                context.check_hostname = False  # else "check_hostname requires server_hostname" first
            with pytest.raises(ValueError) as info:
                context.wrap_socket(sock, server_hostname=name)
            assert isinstance(info.value, TypeError)
        finally:
            sock.close()
    assert tls.live_children() == 0
