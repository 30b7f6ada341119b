"""HTTPS in real BITS through the firmware's TLS (run by tests/test_ssl_realbits.py via tools/bitsrun.py).

    real_bits_https.py PLAIN_URL_BASE HTTPS_URL_BASE SIZE APPENDED_URL EXPIRED_URL PARTIAL_URL

PLAIN_URL_BASE serves ca.pem and data.bin over plain HTTP, HTTPS_URL_BASE serves data.bin over
HTTPS with a certificate from that CA for the host's address. Prints, one per line:
  tls service binding present|absent
  plain round N start / plain round N done bytes=B seconds=S sha256=HEX
  https round N start / https round N done bytes=B seconds=S sha256=HEX
  wrong host: <the SSLError>
  https version=... cipher=...
  unknown ca: <the SSLError>       (a context with only another CA, before ours was given)
  shared store: accepted|<error>   (the same, after: the firmware still trusts ours; bitsnet refuses)
  appended chain: accepted|<error> (that context against a server sending server.pem + ca2.pem)
  rtc YYYYMMDDhhmmss               (bitsnet.clock.rtc_utc: what validity periods are checked against)
  expired: accepted|<error>        (a certificate by ca.pem that ended in 2020)
  partial wildcard: accepted|<error>              (f*.bits-host.test for foo.bits-host.test, bitsnet)
  partial wildcard, flags NONE: accepted|<error>  (the same, the firmware alone with OVMF's default flags)
  verify KEY ms=M                  (x509verify.verify_chain of a leaf under a KEY CA, per call)
  pow 8192 e32 ms=M                (the dearest RSA verification sigverify accepts to compute)
"""

from __future__ import print_function

import hashlib
import socket
import sys
import time

import urllib2

import bitsnet
from bitsnet import clock, dns, tls

bitsnet.install()
import ssl  # noqa: E402  (bitsnet.ssl: BITS has none)

ROUNDS = 2


def fetch(urlopen_args, label, round_number):
    print("%s round %d start" % (label, round_number))
    start = time.time()
    response = urllib2.urlopen(*urlopen_args)
    digest = hashlib.sha256()
    got = 0
    while True:
        chunk = response.read(65536)
        if not chunk:
            break
        digest.update(chunk)
        got += len(chunk)
    response.close()
    print("%s round %d done bytes=%d seconds=%.3f sha256=%s" % (label, round_number, got, time.time() - start,
                                                                   digest.hexdigest()))


def main(argv):
    plain, https, size = argv[1], argv[2], int(argv[3])
    print("ssl module %s, expecting %d bytes" % (ssl.__name__, size))
    print("tls service binding %s" % ("present" if tls.service_handle() is not None else "absent"))
    pem = urllib2.urlopen(plain + "/ca.pem", timeout=60).read()
    other = urllib2.urlopen(plain + "/ca2.pem", timeout=60).read()
    # Before the firmware was given our CA: a context trusting only another CA is refused.
    print("unknown ca: %s" % attempt(https, ssl.create_default_context(cadata=other.decode("ascii"))))
    context = ssl.create_default_context(cadata=pem.decode("ascii"))
    for n in range(ROUNDS):
        fetch((plain + "/data.bin", None, 120), "plain", n)
    for n in range(ROUNDS):
        fetch((https + "/data.bin", None, 120, None, None, False, context), "https", n)
    host = https.split("/")[2].split(":")[0]
    port = int(https.split("/")[2].split(":")[1])
    raw = socket.create_connection((host, port), 60)
    tls_socket = context.wrap_socket(raw, server_hostname=host)
    print("https version=%s cipher=%s" % (tls_socket.version(), tls_socket.cipher()[0]))
    tls_socket.close()
    dns.hosts.add(host, "wrong.test")
    try:
        urllib2.urlopen(https.replace(host, "wrong.test") + "/data.bin", None, 60, None, None, False, context)
        print("wrong host: accepted (BAD)")
    except urllib2.URLError as exc:  # ssl.SSLError is a socket.error, which urllib2 wraps
        print("wrong host: %s" % (exc.reason,))
    # EDK2 quirk (docs/tls.md section 2.3): every CA given in this boot stays in TlsDxe's one store.
    print("shared store: %s" % attempt(https, ssl.create_default_context(cadata=other.decode("ascii"))))
    # The pooled-CA attack: the server appends ca2.pem to a chain from ca.pem; a context with only ca2.pem must refuse.
    appended, expired, partial = argv[4], argv[5], argv[6]
    print("appended chain: %s" % attempt(appended, ssl.create_default_context(cadata=other.decode("ascii"))))
    print("rtc %s" % clock.rtc_utc())
    print("expired: %s" % attempt(expired, context))
    dns.hosts.add(host, "foo.bits-host.test")
    print("partial wildcard: %s" % attempt(partial.replace(host, "foo.bits-host.test"), context))
    partial_port = int(partial.split(":")[-1])
    print("partial wildcard, flags NONE: %s" % firmware_only(host, partial_port, pem, "foo.bits-host.test"))
    https_port = int(https.split(":")[-1])
    print("firmware alone, exact name: %s" % firmware_only(host, https_port, pem, "bits-host.test"))
    print("firmware alone, f.bits-host.test: %s" % firmware_only(host, partial_port, pem, "f.bits-host.test"))
    timings(plain)
    print("live tls children %d" % tls.live_children())


def firmware_only(host, port, pem, name):
    """A handshake by the firmware alone (no check of bitsnet's after it), EfiTlsVerifyHost with
    EFI_TLS_VERIFY_FLAG_NONE: "accepted" or why not."""
    import efi
    from bitsnet import efidefs_tls as T
    sock = socket.create_connection((host, port), 60)
    child = tls.TlsChild()
    try:
        version = T.EFI_TLS_VERSION()
        version.Major, version.Minor = 3, 3
        child.must_set(T.EfiTlsVersion, version)
        child.must_set(T.EfiTlsConnectionEnd, efi.UINT32(T.EfiTlsClient))
        child.must_set(T.EfiTlsVerifyMethod, efi.UINT32(T.EFI_TLS_VERIFY_PEER))
        child.add_ca(ssl.PEM_cert_to_DER_cert(pem))
        child.set_verify_host(name, T.EFI_TLS_VERIFY_FLAG_NONE)
        child.must_set(T.EfiTlsSessionState, efi.UINT32(T.EfiTlsSessionNotStarted))
        tls.TlsSession(child, sock).handshake()
        return "accepted"
    except tls.TlsFailure as failure:
        return "refused: %s" % (failure,)
    finally:
        child.destroy()
        sock.close()


def timings(plain):
    """Time x509verify.verify_chain in BITS's Python, per key kind of the signing CA."""
    from bitsnet import x509verify
    for key in ("rsa2048", "rsa4096", "p256", "p384"):
        ca = ssl.PEM_cert_to_DER_cert(urllib2.urlopen(plain + "/t_%s_ca.pem" % key, timeout=60).read())
        leaf = ssl.PEM_cert_to_DER_cert(urllib2.urlopen(plain + "/t_%s_leaf.pem" % key, timeout=60).read())
        rounds = 3
        start = time.time()
        for _ in range(rounds):
            x509verify.verify_chain([leaf], [ca])
        print("verify %s ms=%.1f" % (key, (time.time() - start) * 1000.0 / rounds))
    # The dearest RSA key sigverify still takes (an attacker's intermediate): 8192 bits, 32-bit exponent.
    modulus = (1 << 8191) | ((1 << 8190) // 3) | 1
    start = time.time()
    pow(modulus // 7, (1 << 32) - 1, modulus)
    print("pow 8192 e32 ms=%.1f" % ((time.time() - start) * 1000.0))


def attempt(https, context):
    """"accepted", or the SSLError's text."""
    try:
        urllib2.urlopen(https + "/ca.pem", None, 60, None, None, False, context).read()
    except urllib2.URLError as exc:
        return str(exc.reason)
    return "accepted"


main(sys.argv)
