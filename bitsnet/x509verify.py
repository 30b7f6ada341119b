"""Does a server's certificate chain lead to one of *this* context's CA certificates? Checked in
Python, signature by signature (RFC 5280 section 6.1, the parts a TLS client needs).

EDK2 quirk: TlsDxe keeps every CA certificate any child was given in one store for the whole
boot, so the firmware's own verification says only that the chain reaches *some* CA given in
this boot (docs/tls.md section 2.3). After the firmware's handshake, bitsnet.tls_socket hands
the chain the server sent (readable in TLS 1.2, bitsnet.tls_x509) and the context's CAs to
``verify_chain``, which builds a path

    leaf -> intermediate -> ... -> a certificate signed by one of the context's CAs

using only certificates the server sent, and checks for each link: the issuer Name is the
subject Name of the next certificate (RFC 5280 section 7.1 comparison: case and spaces folded),
the signature verifies with the next certificate's public key (bitsnet.sigverify: RSA PKCS#1
v1.5 or ECDSA P-256/P-384, SHA-256/384/512), every certificate above the leaf is a CA
(basicConstraints cA, keyUsage keyCertSign if keyUsage is present, pathLenConstraint), carries
no critical extension this module does not know, and -- when the caller has a clock -- is inside
its validity period (EDK2 quirk: the firmware checks no dates, docs/tls.md section 2.6). A leaf that
*is* one of the context's CA certificates is trusted as it is (a self-signed server certificate
given as the CA, as OpenSSL trusts it); a CA certificate given need not be self-signed (EDK2's
store has X509_V_FLAG_PARTIAL_CHAIN, docs/tls.md section 2.6). docs/tls.md section 2.7 has the whole
list and the cost in BITS.

  ``verify_chain(chain, cas, now=None)``  the path (list of Certificate), or VerifyError
  ``Certificate(der)``                    the fields the checks need; VerifyError if unreadable
  ``VerifyError``                         the reason, in words (goes into the SSLError)

What is not checked here, because the firmware checked it on the same certificates in the same
handshake: that the server holds the leaf's key (its signature over the key exchange), the host
name (EfiTlsVerifyHost, or bitsnet.ssl.match_hostname), extendedKeyUsage. Not implemented:
name constraints and policies (a certificate with either marked critical is refused), RSA-PSS
and SHA-1 signatures (refused).
"""

from bitsnet import sigverify
from bitsnet.tls_x509 import _children, _oid, _ord, _text, _tlv

MAX_PATH = 10  # certificates above the leaf: OpenSSL's default depth is 100; real chains have 1-3
# Signatures checked in one verify_chain at most: a real chain needs one per link (and one more
# per CA sharing a name, at a key rollover); a server sending many certificates with the same
# name, each with an expensive key, must not make the check take minutes.
MAX_SIGNATURE_CHECKS = 8

_SIGNATURE_ALGORITHMS = {  # OID -> (key type, hash)
    "1.2.840.113549.1.1.11": ("rsa", "sha256"),
    "1.2.840.113549.1.1.12": ("rsa", "sha384"),
    "1.2.840.113549.1.1.13": ("rsa", "sha512"),
    "1.2.840.10045.4.3.2": ("ec", "sha256"),
    "1.2.840.10045.4.3.3": ("ec", "sha384"),
    "1.2.840.10045.4.3.4": ("ec", "sha512"),
}
_REFUSED_ALGORITHMS = {
    "1.2.840.113549.1.1.5": "RSA with SHA-1", "1.2.840.113549.1.1.4": "RSA with MD5",
    "1.2.840.113549.1.1.10": "RSA-PSS", "1.2.840.10045.4.1": "ECDSA with SHA-1",
}
_RSA_ENCRYPTION = "1.2.840.113549.1.1.1"
_EC_PUBLIC_KEY = "1.2.840.10045.2.1"
_CURVE_OIDS = {"1.2.840.10045.3.1.7": "prime256v1", "1.3.132.0.34": "secp384r1"}
_BASIC_CONSTRAINTS = "2.5.29.19"
_KEY_USAGE = "2.5.29.15"
# Extensions whose meaning for path validation is handled here or by the firmware (extKeyUsage,
# subjectAltName) or carries none (key identifiers): critical or not, they do not stop a path.
_UNDERSTOOD = set([_BASIC_CONSTRAINTS, _KEY_USAGE, "2.5.29.37", "2.5.29.17", "2.5.29.14", "2.5.29.35"])


class VerifyError(Exception):
    """The chain does not lead to one of the context's CAs; the message says why."""


class VerifyTimeout(VerifyError):
    """``give_up()`` said the time for the check is over."""


def _integer(data, start, end):
    return sigverify.int_from_bytes(data[start:end])


def _utc(data, tag):
    """A UTCTime (23) or GeneralizedTime (24) as 'YYYYMMDDhhmmss' (RFC 5280 section 4.1.2.5)."""
    text = _text(data)
    if tag == 23:
        text = ("19" if int(text[:2]) >= 50 else "20") + text
    digits = text[:14]
    if len(digits) != 14 or not digits.isdigit():
        raise ValueError("bad time %s" % (text,))
    return digits


class Certificate(object):
    """The parts of one DER certificate that path validation needs."""

    def __init__(self, der):
        self.der = bytes(der)
        try:
            self._parse(bytearray(self.der))
        except (ValueError, IndexError, TypeError) as exc:
            raise VerifyError("a certificate in the chain could not be read (%s)" % (exc,))

    def _parse(self, der):
        tag, cstart, cend = _tlv(der, 0)
        if tag != 0x30 or cend != len(der):
            raise ValueError("not a DER SEQUENCE")
        parts = _children(der, cstart, cend)
        if len(parts) != 3:
            raise ValueError("Certificate has %d parts" % len(parts))
        (_, tstart, tend), (_, astart, aend), (stag, sstart, send) = parts
        self.tbs = bytes(der[cstart:tend])  # the signed bytes: tbsCertificate with its own header
        self.algorithm = bytes(der[astart:aend])
        _, ostart, oend = _children(der, astart, aend)[0]
        self.signature_oid = _oid(der[ostart:oend])
        if stag != 0x03 or _ord(der, sstart) != 0:
            raise ValueError("signatureValue is not a whole-byte BIT STRING")
        self.signature = bytes(der[sstart + 1:send])
        fields = _children(der, tstart, tend)
        if fields[0][0] == 0xA0:  # [0] version
            fields = fields[1:]
        if bytes(der[fields[1][1]:fields[1][2]]) != self.algorithm:
            raise ValueError("the signed algorithm differs from the outer one (RFC 5280 section 4.1.1.2)")
        self.issuer = bytes(der[fields[2][1]:fields[2][2]])
        self.subject = bytes(der[fields[4][1]:fields[4][2]])
        times = _children(der, fields[3][1], fields[3][2])
        self.not_before = _utc(der[times[0][1]:times[0][2]], times[0][0])
        self.not_after = _utc(der[times[1][1]:times[1][2]], times[1][0])
        self._parse_key(der, fields[5])
        self.ca = None  # basicConstraints cA; None when the extension is absent
        self.path_len = None
        self.key_usage = None  # the first byte of keyUsage's bits, when present
        self.unknown_critical = []
        for tag, start, end in fields[6:]:
            if tag == 0xA3:
                self._parse_extensions(der, start, end)

    def _parse_key(self, der, spki):
        (_, astart, aend), (btag, bstart, bend) = _children(der, spki[1], spki[2])
        algorithm = _children(der, astart, aend)
        self.key_type = _oid(der[algorithm[0][1]:algorithm[0][2]])
        if btag != 0x03 or _ord(der, bstart) != 0:
            raise ValueError("subjectPublicKey is not a whole-byte BIT STRING")
        key = der[bstart + 1:bend]
        self.rsa = self.ec = None
        if self.key_type == _RSA_ENCRYPTION:
            _, kstart, kend = _tlv(key, 0)
            (_, nstart, nend), (_, estart, eend) = _children(key, kstart, kend)[:2]
            self.rsa = (_integer(key, nstart, nend), _integer(key, estart, eend))
        elif self.key_type == _EC_PUBLIC_KEY and len(algorithm) > 1 and algorithm[1][0] == 0x06:
            curve = sigverify.CURVES.get(_CURVE_OIDS.get(_oid(der[algorithm[1][1]:algorithm[1][2]]), ""))
            if curve is not None:
                self.ec = (curve, sigverify.decode_point(curve, key))

    def _parse_extensions(self, der, start, end):
        _, estart, eend = _tlv(der, start)
        for _, xstart, xend in _children(der, estart, eend):
            parts = _children(der, xstart, xend)
            oid = _oid(der[parts[0][1]:parts[0][2]])
            critical = len(parts) == 3 and parts[1][0] == 0x01 and _ord(der, parts[1][1]) != 0
            _, vstart, vend = parts[-1]
            if oid == _BASIC_CONSTRAINTS:
                self.ca, self.path_len = False, None
                _, bstart, bend = _tlv(der, vstart)
                for tag, istart, iend in _children(der, bstart, bend):
                    if tag == 0x01:
                        self.ca = _ord(der, istart) != 0
                    elif tag == 0x02:
                        self.path_len = _integer(der, istart, iend)
            elif oid == _KEY_USAGE:
                _, kstart, kend = _tlv(der, vstart)
                self.key_usage = _ord(der, kstart + 1) if kend - kstart > 1 else 0
            elif critical and oid not in _UNDERSTOOD:
                self.unknown_critical.append(oid)

    def name(self):
        """The subject's commonName as an ASCII str, for messages."""
        value = None
        data = bytearray(self.subject)
        try:
            for _, sstart, send in _children(data, 0, len(data)):
                for _, astart, aend in _children(data, sstart, send):
                    parts = _children(data, astart, aend)
                    if _oid(data[parts[0][1]:parts[0][2]]) == "2.5.4.3":
                        value = _text(bytes(data[parts[1][1]:parts[1][2]]))
        except (ValueError, IndexError):
            return "(a certificate with an unreadable subject)"
        if value is None:
            return "(a certificate without commonName)"
        text = value.encode("ascii", "backslashreplace")
        return '"%s"' % (text if isinstance(text, str) else text.decode("ascii"))

    def may_sign_certificates(self):
        """basicConstraints and keyUsage allow it to be above another certificate (RFC 5280 section
        4.2.1.9, 4.2.1.3). A CA certificate without basicConstraints (X.509 v1) passes only as a
        trust anchor, where the caller decides."""
        return self.ca is not False and (self.key_usage is None or bool(self.key_usage & 0x04))


def _name_key(name_der):
    """A Name as a tuple of RDNs of (OID, value folded), for the RFC 5280 section 7.1 comparison:
    values compared without case and with runs of spaces made one."""
    data = bytearray(name_der)
    rdns = []
    for _, sstart, send in _children(data, 0, len(data)):
        entries = []
        for _, astart, aend in _children(data, sstart, send):
            parts = _children(data, astart, aend)
            value = _text(bytes(data[parts[1][1]:parts[1][2]]))
            entries.append((_oid(data[parts[0][1]:parts[0][2]]), " ".join(value.lower().split())))
        rdns.append(tuple(sorted(entries)))
    return tuple(rdns)


def same_name(a, b):
    if a == b:
        return True
    try:
        return _name_key(a) == _name_key(b)
    except (ValueError, IndexError):
        return False


def signed_by(cert, issuer):
    """Whether ``issuer``'s public key verifies ``cert``'s signature; VerifyError for an
    algorithm or key this module does not take."""
    oid = cert.signature_oid
    if oid not in _SIGNATURE_ALGORITHMS:
        raise VerifyError("the certificate %s is signed with %s, which bitsnet does not accept" % (
            cert.name(), _REFUSED_ALGORITHMS.get(oid, "algorithm " + oid)))
    kind, hash_name = _SIGNATURE_ALGORITHMS[oid]
    if kind == "rsa":
        if issuer.rsa is None:
            return False
        n, e = issuer.rsa
        return sigverify.rsa_verify(n, e, cert.signature, hash_name, cert.tbs)
    if issuer.ec is None:
        if issuer.key_type == _EC_PUBLIC_KEY:
            raise VerifyError("the CA %s has an EC key on a curve bitsnet does not know (P-256 and P-384 only)"
                              % issuer.name())
        return False
    curve, point = issuer.ec
    try:
        _, sstart, send = _tlv(bytearray(cert.signature), 0)
        data = bytearray(cert.signature)
        (_, rstart, rend), (_, tstart, tend) = _children(data, sstart, send)
    except (ValueError, IndexError):
        return False
    return sigverify.ecdsa_verify(curve, point, (_integer(data, rstart, rend), _integer(data, tstart, tend)),
                                  hash_name, cert.tbs)


def _check_time(cert, now):
    if now is None:
        return
    if now < cert.not_before:
        raise VerifyError("the certificate %s is not valid yet (from %s UTC; now %s)" % (cert.name(), cert.not_before,
                                                                                      now))
    if now > cert.not_after:
        raise VerifyError("certificate has expired: %s (until %s UTC; now %s)" % (cert.name(), cert.not_after, now))


def _check_issuer_fields(cert):
    if cert.unknown_critical:
        raise VerifyError("the certificate %s has a critical extension bitsnet does not handle (%s)" % (
            cert.name(), ", ".join(cert.unknown_critical)))


def verify_chain(chain, cas, now=None, give_up=None):
    """The validated path [leaf, ..., anchor] from ``chain`` (the server's DER certificates, leaf
    first, as sent) to one of ``cas`` (DER; the context's own CA certificates), or VerifyError.
    ``now`` is 'YYYYMMDDhhmmss' UTC to check validity periods, or None not to; ``give_up()``, if
    given, is asked before each signature check and True ends the check (VerifyTimeout)."""
    budget = [MAX_SIGNATURE_CHECKS]

    def check(cert, issuer):
        if budget[0] <= 0:
            raise VerifyError("more than %d candidate issuers to try" % MAX_SIGNATURE_CHECKS)
        if give_up is not None and give_up():
            raise VerifyTimeout("out of time checking the certificate chain")
        budget[0] -= 1
        return signed_by(cert, issuer)

    if not chain:
        raise VerifyError("the server sent no certificate")
    anchors = []
    for der in cas:
        try:
            anchors.append(Certificate(der))
        except VerifyError:
            pass  # the firmware refused it already (SetData); it anchors nothing here either
    leaf = Certificate(chain[0])
    _check_time(leaf, now)
    if leaf.der in [a.der for a in anchors]:
        return [leaf]
    others = []
    for der in chain[1:]:
        try:
            others.append(Certificate(der))
        except VerifyError:
            pass  # an unreadable extra certificate is no link; if the path needs it, it fails below
    path = [leaf]
    current = leaf
    refused = []  # why candidates with the right name were not taken, for the message
    while True:
        below = len(path) - 1  # intermediates under the next certificate (pathLenConstraint)
        for anchor in anchors:
            if not same_name(anchor.subject, current.issuer):
                continue
            if not anchor.may_sign_certificates() or (anchor.path_len is not None and below > anchor.path_len):
                refused.append("the CA %s may not sign it (basicConstraints/keyUsage)" % anchor.name())
                continue
            if check(current, anchor):
                _check_time(anchor, now)
                return path + [anchor]
            refused.append("its signature does not verify with the key of the CA %s" % anchor.name())
        if len(path) > MAX_PATH:
            raise VerifyError("the chain is longer than %d certificates" % MAX_PATH)
        step = None
        for candidate in others:
            if candidate in path or not same_name(candidate.subject, current.issuer):
                continue
            if candidate.ca is not True or not candidate.may_sign_certificates() or (
                    candidate.path_len is not None and below > candidate.path_len):
                refused.append("%s in the chain is not a CA allowed to sign it" % candidate.name())
                continue
            if check(current, candidate):
                step = candidate
                break
            refused.append("its signature does not verify with the key of %s in the chain" % candidate.name())
        if step is None:
            why = "; ".join(refused) or "no certificate in the chain or among this SSLContext's CAs is its issuer"
            raise VerifyError("the certificate %s does not lead to a CA of this SSLContext: %s" % (current.name(), why))
        _check_issuer_fields(step)
        _check_time(step, now)
        path.append(step)
        current = step
