"""Signature verification with public keys only: RSA PKCS#1 v1.5 (RFC 8017 section 8.2.2) and
ECDSA over NIST P-256 and P-384 (FIPS 186-4 section 6.4, SEC 1 section 4.1.4), in pure Python.

Used by bitsnet.x509verify to check each link of a server's certificate chain (docs/tls.md
section 2.3). Only verification: no private key, no secret, so nothing here needs to run in
constant time. Python's ``pow`` and ``hashlib`` are all it needs, which BITS's Python 2.7 has.

  ``rsa_verify(n, e, signature, hash_name, message)``     True or False
  ``ecdsa_verify(curve, point, signature, hash_name, message)``   True or False
  ``CURVES``        curve name -> parameters (the names X.509 uses: "prime256v1", "secp384r1")
  ``decode_point(curve, data)``  an uncompressed or compressed SEC 1 point, checked on the curve

Hashes: SHA-256, SHA-384, SHA-512. SHA-1 is refused (no current CA signs with it; OpenSSL 3 at
its default security level refuses it too).
"""

import binascii
import hashlib

# DER of DigestInfo's AlgorithmIdentifier and OCTET STRING header, per hash (RFC 8017 section 9.2 note 1).
_DIGEST_INFO = {
    "sha256": binascii.unhexlify("3031300d060960864801650304020105000420"),
    "sha384": binascii.unhexlify("3041300d060960864801650304020205000430"),
    "sha512": binascii.unhexlify("3051300d060960864801650304020305000440"),
}

# Bounds on RSA keys, so that a key an attacker chose (an intermediate the server sent) cannot
# make pow() slow: in BITS under QEMU an 8192-bit modulus with a 32-bit exponent costs 0.5 s
# (docs/tls.md section 2.7), a 16384-bit one with a 64-bit exponent (OpenSSL's limits) about seven
# times that (the ratio measured on a host). Real keys are 2048-4096 bits with exponent 65537.
RSA_MAX_BITS = 8192
RSA_MIN_BITS = 1024  # OpenSSL's security level 1 (EDK2's TlsLib runs at 0: any size)
RSA_MAX_EXPONENT_BITS = 32


def hash_bytes(hash_name, message):
    """The digest of ``message`` by name; ValueError for a hash not offered."""
    if hash_name not in _DIGEST_INFO:
        raise ValueError("hash %r is not accepted" % (hash_name,))
    return getattr(hashlib, hash_name)(bytes(message)).digest()


def int_from_bytes(data):
    data = bytes(data)
    return int(binascii.hexlify(data), 16) if data else 0


def int_to_bytes(value, length):
    text = "%x" % value
    if len(text) > 2 * length:
        raise ValueError("integer too large")
    return binascii.unhexlify(text.rjust(2 * length, "0"))


def rsa_verify(n, e, signature, hash_name, message):
    """RSASSA-PKCS1-v1_5 verification: the signature raised to ``e`` mod ``n`` must be exactly the
    encoding of ``message``'s digest (built here and compared whole, so no parsing of the padding
    can be fooled)."""
    bits = n.bit_length()
    if bits < RSA_MIN_BITS or bits > RSA_MAX_BITS or e < 3 or not e & 1 or e.bit_length() > RSA_MAX_EXPONENT_BITS:
        return False
    k = (bits + 7) // 8
    signature = bytes(signature)
    if len(signature) != k:
        return False
    s = int_from_bytes(signature)
    if s >= n:
        return False
    digest_info = _DIGEST_INFO[hash_name] + hash_bytes(hash_name, message)
    if k < len(digest_info) + 11:
        return False
    expected = b"\x00\x01" + b"\xff" * (k - 3 - len(digest_info)) + b"\x00" + digest_info
    return int_to_bytes(pow(s, e, n), k) == expected


# --- ECDSA -----------------------------------------------------------------------------------
class Curve(object):
    """A short Weierstrass curve y^2 = x^3 - 3x + b over GF(p) with base point G of prime order n."""

    def __init__(self, name, p, b, gx, gy, n):
        self.name, self.p, self.b, self.g, self.n = name, p, b, (gx, gy), n
        self.size = (p.bit_length() + 7) // 8

    def contains(self, point):
        x, y = point
        p = self.p
        return 0 <= x < p and 0 <= y < p and (y * y - (x * x * x - 3 * x + self.b)) % p == 0


CURVES = {
    "prime256v1": Curve(
        "prime256v1",
        0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff,
        0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b,
        0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296,
        0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5,
        0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551),
    "secp384r1": Curve(
        "secp384r1",
        int("fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffff0000000000000000ffffffff", 16),
        int("b3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875ac656398d8a2ed19d2a85c8edd3ec2aef", 16),
        int("aa87ca22be8b05378eb1c71ef320ad746e1d3b628ba79b9859f741e082542a385502f25dbf55296c3a545e3872760ab7", 16),
        int("3617de4a96262c6f5d9e98bf9292dc29f8f41dbd289a147ce9da3113b5f0b8c00a60b1ce1d7e819d7a431d7c90ea0e5f", 16),
        int("ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973", 16)),
}


def decode_point(curve, data):
    """SEC 1 section 2.3.4: 04 X Y, or 02/03 X (y recovered: p = 3 mod 4 for both curves); the
    point must be on the curve. ValueError otherwise."""
    data = bytearray(data)
    size = curve.size
    if len(data) == 1 + 2 * size and data[0] == 4:
        point = (int_from_bytes(data[1:1 + size]), int_from_bytes(data[1 + size:]))
    elif len(data) == 1 + size and data[0] in (2, 3):
        p = curve.p
        x = int_from_bytes(data[1:])
        y = pow((x * x * x - 3 * x + curve.b) % p, (p + 1) // 4, p)
        if (y & 1) != (data[0] & 1):
            y = p - y
        point = (x, y)
    else:
        raise ValueError("not an EC point encoding for %s" % curve.name)
    if not curve.contains(point):
        raise ValueError("the point is not on %s" % curve.name)
    return point


# Jacobian coordinates (X, Y, Z) stand for (X/Z^2, Y/Z^3); None is the point at infinity. The
# formulas are the standard ones for a = -3 ("dbl-2001-b" and "add-2007-bl" in the Explicit-Formulas
# Database); one inversion at the end instead of one per step.
def _double(point, p):
    if point is None:
        return None
    x1, y1, z1 = point
    if y1 == 0:
        return None
    delta = z1 * z1 % p
    gamma = y1 * y1 % p
    beta = x1 * gamma % p
    alpha = 3 * (x1 - delta) * (x1 + delta) % p
    x3 = (alpha * alpha - 8 * beta) % p
    z3 = ((y1 + z1) * (y1 + z1) - gamma - delta) % p
    y3 = (alpha * (4 * beta - x3) - 8 * gamma * gamma) % p
    return x3, y3, z3


def _add(a, b, p):
    if a is None:
        return b
    if b is None:
        return a
    x1, y1, z1 = a
    x2, y2, z2 = b
    z1z1 = z1 * z1 % p
    z2z2 = z2 * z2 % p
    u1 = x1 * z2z2 % p
    u2 = x2 * z1z1 % p
    s1 = y1 * z2 * z2z2 % p
    s2 = y2 * z1 * z1z1 % p
    if u1 == u2:
        return _double(a, p) if s1 == s2 else None
    h = (u2 - u1) % p
    r = (s2 - s1) % p
    hh = h * h % p
    hhh = h * hh % p
    v = u1 * hh % p
    x3 = (r * r - hhh - 2 * v) % p
    y3 = (r * (v - x3) - s1 * hhh) % p
    z3 = h * z1 * z2 % p
    return x3, y3, z3


def _twin_multiply(curve, u1, u2, q):
    """u1*G + u2*Q in affine coordinates, or None for infinity (Shamir's trick: one pass of
    doublings over the bits of both scalars)."""
    p = curve.p
    g = (curve.g[0], curve.g[1], 1)
    qj = (q[0], q[1], 1)
    table = {1: g, 2: qj, 3: _add(g, qj, p)}
    result = None
    for i in range(max(u1.bit_length(), u2.bit_length()) - 1, -1, -1):
        result = _double(result, p)
        index = ((u1 >> i) & 1) | (((u2 >> i) & 1) << 1)
        if index:
            result = _add(result, table[index], p)
    if result is None or result[2] % p == 0:
        return None
    zinv = pow(result[2], p - 2, p)
    zinv2 = zinv * zinv % p
    return result[0] * zinv2 % p, result[1] * zinv2 * zinv % p


def ecdsa_verify(curve, point, signature, hash_name, message):
    """ECDSA verification of ``signature`` = (r, s) over ``message`` with public key ``point``
    (affine, already checked on the curve by decode_point)."""
    r, s = signature
    n = curve.n
    if not (0 < r < n and 0 < s < n):
        return False
    digest = hash_bytes(hash_name, message)
    e = int_from_bytes(digest)
    excess = 8 * len(digest) - n.bit_length()
    if excess > 0:
        e >>= excess  # the leftmost bits of the hash, as many as n has (SEC 1 section 4.1.4 step 5)
    w = pow(s, n - 2, n)
    x = _twin_multiply(curve, e * w % n, r * w % n, point)
    return x is not None and x[0] % n == r
