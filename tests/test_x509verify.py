"""bitsnet.x509verify and bitsnet.sigverify on certificates made here by the ``openssl`` command:
RSA 2048/4096 with SHA-256/384, EC P-256/P-384, intermediates; tampered signatures, a CA that
shares the issuer's name but not its key, a server that appends another CA, SHA-1, path-length
and basicConstraints limits, validity periods. ``openssl verify`` is asked the same question each
time as the reference. Pure Python: no simulator, so it runs the same on 2.7 and 3.
"""

from __future__ import print_function

import binascii
import os
import subprocess
import time

import pytest

import testpki
from bitsnet import sigverify, x509verify

OPENSSL = testpki.OPENSSL
pytestmark = pytest.mark.skipif(not OPENSSL, reason="the openssl command makes the test certificates")

KEYS = dict((name, options) for name, (options, _) in testpki.KEYS.items())  # openssl req key options
CA_EXT = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"


def _openssl(d, args, stdin=None):
    proc = subprocess.Popen([OPENSSL] + args, cwd=d, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    out = proc.communicate(stdin)[0]
    return proc.returncode, out.decode("ascii", "replace")


def _run(d, args):
    code, out = _openssl(d, args)
    assert code == 0, out


def ca(d, name, key="rsa2048", digest="sha256", subject=None):
    """A self-signed CA ``NAME.pem``/``NAME.key``."""
    _run(d, ["req", "-x509"] + KEYS[key] + ["-nodes", "-" + digest, "-keyout", name + ".key", "-out", name + ".pem",
                                          "-days", "3", "-subj", subject or "/CN=%s" % name,
                                          "-addext", "basicConstraints=critical,CA:TRUE",
                                          "-addext", "keyUsage=critical,keyCertSign,cRLSign"])


def cert(d, name, issuer, key="rsa2048", digest="sha256", extensions="", dates=("-days", "2")):
    """``NAME.pem`` for CN=NAME signed by ``issuer`` with ``digest``; ``extensions`` (openssl
    config lines) make it a CA or give it other extensions."""
    _run(d, ["req"] + KEYS[key] + ["-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name])
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write(extensions or "basicConstraints=CA:FALSE\n")
    args = ["x509", "-req", "-in", name + ".csr", "-CA", issuer + ".pem", "-CAkey", issuer + ".key",
            "-set_serial", str(int(time.time() * 1000) % 1000000 + len(name)), "-out", name + ".pem",
            "-" + digest, "-extfile", name + ".ext"]
    if dates[0] == "-days":
        args += list(dates)
        _run(d, args)
    else:  # explicit dates: `openssl ca` is the tool that takes them
        testpki.start_ca_database(d, 3000 + len(name))
        with open(os.path.join(d, "ca.cnf"), "a") as f:
            f.write("[ exts ]\n" + (extensions or "basicConstraints=CA:FALSE\n"))
        _run(d, ["ca", "-batch", "-config", "ca.cnf", "-notext", "-cert", issuer + ".pem", "-keyfile", issuer + ".key",
                 "-in", name + ".csr", "-out", name + ".pem", "-md", digest, "-extensions", "exts"] + list(dates))


def der(d, name):
    with open(os.path.join(d, name + ".pem")) as f:
        text = f.read()
    body = text.split("-----BEGIN CERTIFICATE-----")[1].split("-----END CERTIFICATE-----")[0]
    return binascii.a2b_base64("".join(body.split()).encode("ascii"))


def openssl_accepts(d, leaf, cas, untrusted=()):
    """The reference: ``openssl verify`` with exactly these CAs and extra certificates, and
    -partial_chain as EDK2's TlsNew sets it (docs/tls.md section 2.3)."""
    with open(os.path.join(d, "trusted.pem"), "w") as f:
        for name in cas:
            f.write(open(os.path.join(d, name + ".pem")).read())
    args = ["verify", "-partial_chain", "-no-CApath", "-no-CAstore", "-CAfile", "trusted.pem"]
    if untrusted:
        with open(os.path.join(d, "untrusted.pem"), "w") as f:
            for name in untrusted:
                f.write(open(os.path.join(d, name + ".pem")).read())
        args += ["-untrusted", "untrusted.pem"]
    code, out = _openssl(d, args + [leaf + ".pem"])
    if "-no-CAstore" in out or "unknown option" in out:  # OpenSSL 1.1: no -no-CAstore
        code, out = _openssl(d, [a for a in args if a != "-no-CAstore"] + [leaf + ".pem"])
    return code == 0


def accepts(d, leaf, cas, untrusted=(), now=None):
    """bitsnet's answer, the same question; checked against openssl's where ``now`` is None."""
    try:
        x509verify.verify_chain([der(d, leaf)] + [der(d, n) for n in untrusted], [der(d, n) for n in cas], now)
        ours = True
    except x509verify.VerifyError as exc:
        ours = str(exc)
    if now is None:
        assert (ours is True) == openssl_accepts(d, leaf, cas, untrusted), (leaf, cas, untrusted, ours)
    return ours


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    return str(tmp_path_factory.mktemp("x509verify"))


@pytest.mark.parametrize("key,digest", [("rsa2048", "sha256"), ("rsa4096", "sha384"), ("p256", "sha256"),
                                        ("p384", "sha384"), ("rsa2048", "sha512")])
def test_leaf_signed_by_the_context_ca(d, key, digest):
    ca(d, "ca_" + key + digest, key, digest)
    cert(d, "leaf_" + key + digest, "ca_" + key + digest, "p256" if key == "rsa2048" else "rsa2048", digest)
    started = time.time()
    assert accepts(d, "leaf_" + key + digest, ["ca_" + key + digest]) is True
    print("%s/%s: %.1f ms per chain" % (key, digest, 1000 * (time.time() - started)))


def test_through_intermediates(d):
    ca(d, "root")
    cert(d, "inter1", "root", "p384", "sha256", CA_EXT)
    cert(d, "inter2", "inter1", "rsa2048", "sha384", CA_EXT)
    cert(d, "deep", "inter2")
    assert accepts(d, "deep", ["root"], ["inter2", "inter1"]) is True
    assert accepts(d, "deep", ["root"], ["inter1", "inter2"]) is True  # order in the message does not matter
    assert accepts(d, "deep", ["inter1"], ["inter2"]) is True  # an intermediate given as the CA anchors
    assert "does not lead" in accepts(d, "deep", ["root"], ["inter2"])  # a link missing


def test_tampered_signature_and_tampered_body(d):
    for key in ("rsa2048", "p256"):
        ca(d, "tca_" + key, key)
        cert(d, "tleaf_" + key, "tca_" + key)
        good = der(d, "tleaf_" + key)
        x509verify.verify_chain([good], [der(d, "tca_" + key)])
        tampered_signature = good[:-5] + bytes(bytearray([good[-5:-4][0] ^ 1 if isinstance(good[0], int)
                                                          else ord(good[-5:-4]) ^ 1])) + good[-4:]
        body = bytearray(good)
        at = bytes(body).index(b"tleaf_")
        body[at] ^= 0x20  # "Tleaf_": the signed bytes changed, the signature not
        for changed in (tampered_signature, bytes(body)):
            with pytest.raises(x509verify.VerifyError) as info:
                x509verify.verify_chain([changed], [der(d, "tca_" + key)])
            assert "signature does not verify" in str(info.value), str(info.value)


def test_same_name_other_key_is_refused(d):
    """The wrong-issuer chain: a CA with the issuer's exact Name but another key."""
    ca(d, "realca", subject="/CN=bitsnet shared name")
    ca(d, "fakeca", subject="/CN=bitsnet shared name")
    cert(d, "byreal", "realca")
    assert "signature does not verify with the key of the CA" in accepts(d, "byreal", ["fakeca"])
    assert accepts(d, "byreal", ["fakeca", "realca"]) is True  # key rollover: both tried


def test_server_appending_the_context_ca_is_refused(d):
    """The pooled-CA attack, at this level: the leaf is CA A's, the server appends CA B, the
    context trusts CA B only."""
    ca(d, "attack_a")
    ca(d, "attack_b")
    cert(d, "attack_leaf", "attack_a")
    assert "does not lead to a CA of this SSLContext" in accepts(d, "attack_leaf", ["attack_b"], ["attack_b"])
    assert "does not lead" in accepts(d, "attack_leaf", ["attack_b"], ["attack_b", "attack_a"])  # A is no CA here
    assert accepts(d, "attack_leaf", ["attack_a"], ["attack_b"]) is True


def test_ca_constraints(d):
    ca(d, "croot")
    cert(d, "notca", "croot", extensions="basicConstraints=critical,CA:FALSE\n")
    cert(d, "undernotca", "notca")
    assert "not a CA allowed to sign" in accepts(d, "undernotca", ["croot"], ["notca"])
    cert(d, "nosign", "croot", extensions="basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature\n")
    cert(d, "undernosign", "nosign")
    assert "not a CA allowed to sign" in accepts(d, "undernosign", ["croot"], ["nosign"])
    cert(d, "len0", "croot", extensions="basicConstraints=critical,CA:TRUE,pathlen:0\n")
    cert(d, "len0child", "len0", extensions=CA_EXT)
    cert(d, "len0leaf", "len0child")
    assert "not a CA allowed to sign" in accepts(d, "len0leaf", ["croot"], ["len0child", "len0"])
    cert(d, "len0direct", "len0")
    assert accepts(d, "len0direct", ["croot"], ["len0"]) is True


def test_work_is_bounded(d):
    """Nine CAs in the chain, all with the leaf's issuer Name and none its signer: the check stops
    after MAX_SIGNATURE_CHECKS signatures; and give_up() ends it before the first."""
    ca(d, "boundsigner", subject="/CN=bitsnet bound")
    cert(d, "boundleaf", "boundsigner")
    for i in range(9):
        ca(d, "decoy%d" % i, subject="/CN=bitsnet bound")
    chain = [der(d, "boundleaf")] + [der(d, "decoy%d" % i) for i in range(9)]
    with pytest.raises(x509verify.VerifyError) as info:
        x509verify.verify_chain(chain, [der(d, "decoy0")])
    assert "more than %d candidate issuers" % x509verify.MAX_SIGNATURE_CHECKS in str(info.value), str(info.value)
    with pytest.raises(x509verify.VerifyTimeout):
        x509verify.verify_chain([der(d, "boundleaf")], [der(d, "boundsigner")], give_up=lambda: True)
    assert x509verify.verify_chain([der(d, "boundleaf")], [der(d, "boundsigner")], give_up=lambda: False)


def test_sha1_is_refused_with_its_name(d):
    ca(d, "sha1ca")
    cert(d, "sha1leaf", "sha1ca", digest="sha1")
    with pytest.raises(x509verify.VerifyError) as info:
        x509verify.verify_chain([der(d, "sha1leaf")], [der(d, "sha1ca")])
    assert "RSA with SHA-1" in str(info.value)


def test_self_signed_leaf_given_as_the_ca(d):
    ca(d, "selfsigned")
    assert accepts(d, "selfsigned", ["selfsigned"]) is True


def test_validity_periods(d):
    ca(d, "vca")
    cert(d, "old", "vca", dates=("-startdate", "20200101000000Z", "-enddate", "20200102000000Z"))
    assert "expired" in accepts(d, "old", ["vca"], now=time.strftime("%Y%m%d%H%M%S", time.gmtime()))
    assert accepts(d, "old", ["vca"], now="20200101120000") is not True  # the CA is not valid then
    cert(d, "young", "vca")
    assert "not valid yet" in accepts(d, "young", ["vca"], now="20200101120000")
    assert accepts(d, "young", ["vca"], now=time.strftime("%Y%m%d%H%M%S", time.gmtime())) is True


def test_unreadable_certificates(d):
    ca(d, "uca")
    with pytest.raises(x509verify.VerifyError):
        x509verify.verify_chain([b"\x30\x03\x02\x01\x00"], [der(d, "uca")])
    with pytest.raises(x509verify.VerifyError):
        x509verify.verify_chain([], [der(d, "uca")])


def test_rsa_verify_bounds():
    """Keys and signatures out of range are refused before any arithmetic."""
    n = (1 << 2047) + 1
    assert not sigverify.rsa_verify(n, 65537, b"\x00" * 256, "sha256", b"m")  # signature 0 never verifies
    assert not sigverify.rsa_verify(n, 65537, b"\xff" * 256, "sha256", b"m")  # >= n
    assert not sigverify.rsa_verify(n, (1 << 100) + 1, b"\x01" * 256, "sha256", b"m")  # huge exponent
    assert not sigverify.rsa_verify(n, (1 << 33) + 1, b"\x01" * 256, "sha256", b"m")  # above 2^32
    big = (1 << 8199) + 1
    assert not sigverify.rsa_verify(big, 65537, b"\x01" * 1025, "sha256", b"m")  # above 8192 bits
    assert not sigverify.rsa_verify((1 << 511) + 1, 65537, b"\x01" * 64, "sha256", b"m")  # 512-bit key


def test_ec_points_must_be_on_the_curve():
    curve = sigverify.CURVES["prime256v1"]
    gx, gy = curve.g
    size = curve.size
    encoded = b"\x04" + sigverify.int_to_bytes(gx, size) + sigverify.int_to_bytes(gy, size)
    assert sigverify.decode_point(curve, encoded) == (gx, gy)
    compressed = bytes(bytearray([2 + (gy & 1)])) + sigverify.int_to_bytes(gx, size)
    assert sigverify.decode_point(curve, compressed) == (gx, gy)
    with pytest.raises(ValueError):
        sigverify.decode_point(curve, b"\x04" + sigverify.int_to_bytes(gx, size) + sigverify.int_to_bytes(gy + 1, size))
