"""Just enough X.509 to name a server: its certificate out of a TLS 1.2 handshake, and the
names in it (subject commonName, subjectAltName DNS and IP entries, validity), as
``getpeercert()`` shows them.

EFI_TLS_PROTOCOL has no way to hand out the peer's certificate (GetSessionData has no such data
type, docs/tls.md section 2.5), but in TLS 1.2 the server's Certificate handshake message travels in
clear text and bitsnet sees every record it feeds the firmware. Used for ``getpeercert()`` and
for the host-name check on firmware whose TlsDxe has no EfiTlsVerifyHost (docs/tls.md section 2.4).
No signature is checked here: bitsnet.x509verify does that, with this module's DER reader.
"""

import struct

_OID_COMMON_NAME = "2.5.4.3"
_OID_SUBJECT_ALT_NAME = "2.5.29.17"
_NAMES = {"2.5.4.3": "commonName", "2.5.4.6": "countryName", "2.5.4.7": "localityName",
          "2.5.4.8": "stateOrProvinceName", "2.5.4.10": "organizationName", "2.5.4.11": "organizationalUnitName"}


def _ord(data, i):
    value = data[i]
    return value if isinstance(value, int) else ord(value)


def _tlv(data, pos):
    """(tag, value start, value end) of the DER element at ``pos``."""
    tag = _ord(data, pos)
    n = _ord(data, pos + 1)
    pos += 2
    if n & 0x80:
        count = n & 0x7F
        n = 0
        for i in range(count):
            n = (n << 8) | _ord(data, pos + i)
        pos += count
    if pos + n > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + n


def _children(data, start, end):
    out = []
    pos = start
    while pos < end:
        tag, vstart, vend = _tlv(data, pos)
        out.append((tag, vstart, vend))
        pos = vend
    return out


def _oid(data):
    values = []
    n = 0
    for i in range(len(data)):
        b = _ord(data, i)
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            values.append(n)
            n = 0
    first = values[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(v) for v in head + values[1:])


def _text(data):
    try:
        return data.decode("utf-8")
    except (UnicodeError, AttributeError):
        return data.decode("latin-1")


def server_certificate(handshake):
    """The first certificate (DER) of the Certificate message (type 11) in the server's
    handshake bytes, or None (TLS 1.3 encrypts it; a malformed message)."""
    pos = 0
    try:
        while pos + 4 <= len(handshake):
            kind = _ord(handshake, pos)
            length = struct.unpack(">I", b"\0" + bytes(handshake[pos + 1:pos + 4]))[0]
            body = handshake[pos + 4:pos + 4 + length]
            if kind == 11 and len(body) >= 6:
                first = struct.unpack(">I", b"\0" + bytes(body[3:6]))[0]
                der = bytes(body[6:6 + first])
                return der if len(der) == first else None
            pos += 4 + length
    except (ValueError, struct.error, IndexError):
        return None
    return None


def server_certificates(handshake):
    """Every certificate (DER) of the server's Certificate message, leaf first; [] if unreadable."""
    leaf = server_certificate(handshake)
    if leaf is None:
        return []
    pos = 0
    while pos + 4 <= len(handshake):
        kind = _ord(handshake, pos)
        length = struct.unpack(">I", b"\0" + bytes(handshake[pos + 1:pos + 4]))[0]
        if kind == 11:
            body = bytes(handshake[pos + 4:pos + 4 + length])
            certs, at = [], 3
            while at + 3 <= len(body):
                n = struct.unpack(">I", b"\0" + body[at:at + 3])[0]
                certs.append(body[at + 3:at + 3 + n])
                at += 3 + n
            return certs
        pos += 4 + length
    return [leaf]


def _name(data, start, end):
    rdns = []
    for _, sstart, send in _children(data, start, end):  # SET
        entries = []
        for _, astart, aend in _children(data, sstart, send):  # SEQUENCE {OID, value}
            parts = _children(data, astart, aend)
            if len(parts) >= 2:
                oid = _oid(data[parts[0][1]:parts[0][2]])
                entries.append((_NAMES.get(oid, oid), _text(data[parts[1][1]:parts[1][2]])))
        rdns.append(tuple(entries))
    return tuple(rdns)


def _time(data):
    text = _text(data)
    if len(text) == 13:  # UTCTime YYMMDDhhmmssZ
        year = int(text[:2])
        text = ("19" if year >= 50 else "20") + text
    months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
    return "{} {:2d} {}:{}:{} {} GMT".format(months[int(text[4:6]) - 1], int(text[6:8]), text[8:10], text[10:12],
                                        text[12:14], text[:4])


def cert_dict(der):
    """getpeercert()'s dict for a DER certificate: subject, issuer, notBefore/notAfter,
    subjectAltName; {} if it cannot be read."""
    try:
        _, cstart, cend = _tlv(der, 0)
        tbs = _children(der, cstart, cend)[0]
        fields = _children(der, tbs[1], tbs[2])
        if fields[0][0] == 0xA0:  # [0] version
            fields = fields[1:]
        issuer, validity, subject = fields[2], fields[3], fields[4]
        result = {"subject": _name(der, subject[1], subject[2]), "issuer": _name(der, issuer[1], issuer[2])}
        times = _children(der, validity[1], validity[2])
        result["notBefore"] = _time(der[times[0][1]:times[0][2]])
        result["notAfter"] = _time(der[times[1][1]:times[1][2]])
        for tag, start, end in fields[6:]:
            if tag != 0xA3:
                continue
            _, estart, eend = _tlv(der, start)
            for _, xstart, xend in _children(der, estart, eend):
                parts = _children(der, xstart, xend)
                if _oid(der[parts[0][1]:parts[0][2]]) != _OID_SUBJECT_ALT_NAME:
                    continue
                octets = parts[-1]
                _, gstart, gend = _tlv(der, octets[1])
                names = []
                for gtag, vstart, vend in _children(der, gstart, gend):
                    value = der[vstart:vend]
                    if gtag == 0x82:
                        names.append(("DNS", _text(value)))
                    elif gtag == 0x87 and len(value) == 4:
                        names.append(("IP Address", "%d.%d.%d.%d" % tuple(_ord(value, i) for i in range(4))))
                    elif gtag == 0x87 and len(value) == 16:
                        groups = struct.unpack(">8H", bytes(value))
                        names.append(("IP Address", ":".join("{:X}".format(g) for g in groups)))
                result["subjectAltName"] = tuple(names)
        return result
    except (ValueError, IndexError, struct.error):
        return {}
