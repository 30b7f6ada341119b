"""The drop-in ``ssl`` module for BITS: TLS client sockets over the firmware's EFI_TLS_PROTOCOL.

BITS's Python has no ``_ssl``, so neither ``ssl`` nor HTTPS. Modern EDK2 firmware has TLS
itself (TlsDxe, OpenSSL inside); this module drives it (``bitsnet.tls``, docs/tls.md) and gives
the part of the ``ssl`` API that the standard library's HTTPS clients use, on 2.7 and 3.x:
``urllib2.urlopen("https://...")``, ``urllib.request``, ``httplib``/``http.client``
``HTTPSConnection``, unmodified.

  ``create_default_context(cafile=, capath=, cadata=)``  CERT_REQUIRED, check_hostname
  ``SSLContext``   ``load_verify_locations`` (PEM file, PEM text or DER bytes), ``verify_mode``,
                   ``check_hostname``, ``load_default_certs`` (``DEFAULT_CAFILES``), ``wrap_socket``
  ``SSLSocket``    ``recv``/``recv_into``/``read``, ``send``/``sendall``/``write``, ``makefile``,
                   ``pending``, ``unwrap``, ``getpeercert``, ``cipher``, ``version``; select()
                   sees decrypted data waiting in it as readable
  ``SSLError`` and ``SSLZeroReturnError``, ``SSLWantReadError``, ``SSLWantWriteError``,
  ``SSLSyscallError``, ``SSLEOFError``, ``SSLCertVerificationError`` (3.x; ``CertificateError``)

Certificates are verified twice. By the firmware: the CA certificates go to the TLS child with
EFI_TLS_CONFIGURATION_PROTOCOL.SetData(EfiTlsConfigDataTypeCACertificate), the host name with
SetSessionData(EfiTlsVerifyHost) where the firmware has it (EDK2 since 2020; flags
NO_PARTIAL_WILDCARDS); an older TlsDxe gets the host name checked here, from the server's
certificate (readable in a TLS 1.2 handshake, docs/tls.md section 2.4). And by bitsnet, after the
handshake: the server's chain, signature by signature, up to one of the context's own CAs, and
the validity periods against the RTC (bitsnet.x509verify, docs/tls.md section 2.7). A failed
verification is an SSLError naming the reason; there is never a fallback to plain text. Client
certificates and server-side TLS are not offered (EDK2's TlsSetHostPrivateKey is EFI_UNSUPPORTED).

Give the firmware your CA: ``create_default_context(cafile="/boot/bitsnet/ca.pem")``, or put
the PEM file at ``/boot/bitsnet/ca.pem`` (``DEFAULT_CAFILES``), which default contexts load.
EDK2 quirk: TlsDxe keeps every CA certificate any child was given in one store for the whole
boot (TlsSetCaCertificate adds to the service's SSL_CTX), so the firmware trusts every CA once
given; bitsnet's own check holds each context to its own CAs (docs/tls.md section 2.3).

``bitsnet.install()`` makes this module ``ssl`` where the interpreter has none (BITS).
The socket class is in bitsnet.tls_socket, the EFI side in bitsnet.tls, certificate names in
bitsnet.tls_x509, the chain check in bitsnet.x509verify (signatures: bitsnet.sigverify).
"""

from __future__ import absolute_import

import binascii
import sys

from bitsnet import _socket as _bitsnet_socket
from bitsnet import tls as _tls

_PY3 = sys.version_info[0] >= 3

OPENSSL_VERSION = "EFI_TLS_PROTOCOL (the firmware's TLS)"
OPENSSL_VERSION_INFO = (0, 0, 0, 0, 0)
OPENSSL_VERSION_NUMBER = 0
HAS_SNI = True  # EDK2 sends it with EfiTlsVerifyHost where it can (TlsSetServerName)
HAS_ALPN = False
HAS_NPN = False
HAS_ECDH = True
HAS_TLSv1_3 = False  # bitsnet asks the firmware for TLS 1.2 (docs/tls.md section 2.2)
HAS_NEVER_CHECK_COMMON_NAME = False
CHANNEL_BINDING_TYPES = []  # type: list
DEFAULT_CAFILES = ["/boot/bitsnet/ca.pem"]  # loaded by load_default_certs() when present

CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED = 0, 1, 2
PROTOCOL_SSLv23 = PROTOCOL_TLS = 2
PROTOCOL_TLSv1 = 3
PROTOCOL_TLSv1_1 = 4
PROTOCOL_TLSv1_2 = 5
PROTOCOL_TLS_CLIENT = 16
PROTOCOL_TLS_SERVER = 17
OP_ALL = 0x80000054
OP_NO_SSLv2 = 0
OP_NO_SSLv3 = 0x02000000
OP_NO_TLSv1 = 0x04000000
OP_NO_TLSv1_1 = 0x10000000
OP_NO_TLSv1_2 = 0x08000000
OP_NO_TLSv1_3 = 0x20000000
OP_NO_COMPRESSION = 0x00020000
OP_CIPHER_SERVER_PREFERENCE = 0x00400000
OP_SINGLE_DH_USE = 0
OP_SINGLE_ECDH_USE = 0
OP_NO_TICKET = 0x00004000
VERIFY_DEFAULT = 0
VERIFY_X509_STRICT = 0x20
VERIFY_X509_TRUSTED_FIRST = 0x8000
VERIFY_CRL_CHECK_LEAF = 0x4
VERIFY_CRL_CHECK_CHAIN = 0xC
SSL_ERROR_SSL = 1
SSL_ERROR_WANT_READ = 2
SSL_ERROR_WANT_WRITE = 3
SSL_ERROR_WANT_X509_LOOKUP = 4
SSL_ERROR_SYSCALL = 5
SSL_ERROR_ZERO_RETURN = 6
SSL_ERROR_WANT_CONNECT = 7
SSL_ERROR_EOF = 8
SSL_ERROR_INVALID_ERROR_CODE = 10
_PROTOCOL_NAMES = {PROTOCOL_TLS: "TLS", PROTOCOL_TLSv1: "TLSv1", PROTOCOL_TLSv1_1: "TLSv1.1",
                   PROTOCOL_TLSv1_2: "TLSv1.2", PROTOCOL_TLS_CLIENT: "TLS_CLIENT", PROTOCOL_TLS_SERVER: "TLS_SERVER"}
socket_error = _bitsnet_socket.error  # OSError; on 2.7 socket.error, which urllib2 turns into URLError


# --- errors ----------------------------------------------------------------------------------
class SSLError(socket_error):  # type: ignore[valid-type,misc]
    """An error in the TLS layer; ``reason`` names it as OpenSSL's would (CERTIFICATE_VERIFY_FAILED...)."""

    library = "SSL"
    reason = None  # type: object

    def __str__(self):
        if len(self.args) >= 2 and isinstance(self.args[0], int):
            return str(self.args[1])
        return socket_error.__str__(self)


class SSLZeroReturnError(SSLError):
    """The peer closed the TLS session (close_notify)."""


class SSLWantReadError(SSLError):
    """Non-blocking socket: more data must arrive first."""


class SSLWantWriteError(SSLError):
    """Non-blocking socket: the transport must drain first."""


class SSLSyscallError(SSLError):
    """The transport failed under the TLS layer."""


class SSLEOFError(SSLError):
    """The transport ended where the TLS protocol does not allow it."""


class SSLCertVerificationError(SSLError, ValueError):
    """The server's certificate was not accepted (verify_code, verify_message as in CPython)."""

    verify_code = 0
    verify_message = ""


if _PY3:
    CertificateError = SSLCertVerificationError
else:
    class CertificateError(ValueError):  # type: ignore[no-redef]
        """2.7's match_hostname failure."""


def _ssl_error(cls, code, reason, message):
    error = cls(code, "[SSL: %s] %s" % (reason, message) if reason else message)
    error.reason = reason
    return error


def _from_failure(failure, context=None):
    """A bitsnet.tls.TlsFailure as the SSLError CPython would raise."""
    kind = failure.kind
    message = str(failure)
    if kind == "verify":
        if context is not None and not context._cadata:
            message += "; this SSLContext gave the firmware no CA certificate (load_verify_locations, " \
                       "or a PEM file at %s)" % DEFAULT_CAFILES[0]
        cls = SSLCertVerificationError if _PY3 else SSLError
        error = _ssl_error(cls, SSL_ERROR_SSL, "CERTIFICATE_VERIFY_FAILED", message)
        error.verify_message = message
        # X509_V_ERR_CERT_HAS_EXPIRED, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, other
        error.verify_code = {45: 10, 48: 20}.get(failure.alert, 1)
        return error
    if kind == "eof":
        return _ssl_error(SSLEOFError, SSL_ERROR_EOF, "UNEXPECTED_EOF_WHILE_READING", message)
    if kind == "alert":
        name = _tls.ALERTS.get(failure.alert, "alert").upper()
        return _ssl_error(SSLError, SSL_ERROR_SSL, "TLSV1_ALERT_" + name, message)
    if kind == "unavailable":
        return _ssl_error(SSLError, SSL_ERROR_SSL, "NO_FIRMWARE_TLS", message)
    return _ssl_error(SSLError, SSL_ERROR_SSL, kind.upper(), message)


# --- certificates ----------------------------------------------------------------------------
PEM_HEADER = "-----BEGIN CERTIFICATE-----"
PEM_FOOTER = "-----END CERTIFICATE-----"


def DER_cert_to_PEM_cert(der_cert_bytes):
    text = binascii.b2a_base64(der_cert_bytes).decode("ascii").strip()
    lines = [text[i:i + 64] for i in range(0, len(text), 64)]
    return PEM_HEADER + "\n" + "\n".join(lines) + "\n" + PEM_FOOTER + "\n"


def PEM_cert_to_DER_cert(pem_cert_string):
    certs = _pem_certs(pem_cert_string)
    if not certs:
        raise ValueError("Invalid PEM encoding; must start with %s" % PEM_HEADER)
    return certs[0]


def _pem_certs(text):
    """Every certificate in PEM ``text`` (str or bytes), as DER bytes."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    out = []
    pos = 0
    while True:
        start = text.find(PEM_HEADER, pos)
        if start < 0:
            return out
        end = text.find(PEM_FOOTER, start)
        if end < 0:
            raise SSLError(SSL_ERROR_SSL, "[X509: NO_CERTIFICATE_OR_CRL_FOUND] PEM certificate without its END line")
        body = "".join(text[start + len(PEM_HEADER):end].split())
        try:
            out.append(binascii.a2b_base64(body.encode("ascii")))
        except (binascii.Error, ValueError):
            raise SSLError(SSL_ERROR_SSL, "[PEM: BAD_BASE64_DECODE] bad base64 in a PEM certificate")
        pos = end + len(PEM_FOOTER)


def _der_certs(data):
    """Concatenated DER certificates (cadata as bytes) split at their SEQUENCE lengths."""
    data = bytearray(data)
    out = []
    while data:
        if data[0] != 0x30 or len(data) < 2:
            raise SSLError(SSL_ERROR_SSL, "[X509: NO_CERTIFICATE_OR_CRL_FOUND] cadata is not DER certificates")
        n = data[1]
        head = 2
        if n & 0x80:
            count = n & 0x7F
            n = 0
            for b in data[2:2 + count]:
                n = (n << 8) | b
            head = 2 + count
        out.append(bytes(data[:head + n]))
        del data[:head + n]
    return out


class _Purpose(object):
    def __init__(self, name, oid):
        self.name, self.oid = name, oid

    def __repr__(self):
        return "<Purpose.%s: %r>" % (self.name, self.oid)


class Purpose(object):
    SERVER_AUTH = _Purpose("SERVER_AUTH", "1.3.6.1.5.5.7.3.1")
    CLIENT_AUTH = _Purpose("CLIENT_AUTH", "1.3.6.1.5.5.7.3.2")


# --- the context -----------------------------------------------------------------------------
class SSLContext(object):
    """What a TLS client connection is to be: which CAs to trust, whether to verify."""

    sslsocket_class = None  # type: object

    def __init__(self, protocol=None):
        if protocol is None:
            protocol = PROTOCOL_TLS
        if protocol == PROTOCOL_TLS_SERVER:
            raise ValueError("server-side TLS is not available: the firmware's EFI_TLS_PROTOCOL "
                             "cannot take a private key (EDK2 TlsSetHostPrivateKey is EFI_UNSUPPORTED)")
        self.protocol = protocol
        self._cadata = []  # type: list   # DER certificates, in the order given
        self._check_hostname = protocol == PROTOCOL_TLS_CLIENT
        self._verify_mode = CERT_REQUIRED if protocol == PROTOCOL_TLS_CLIENT else CERT_NONE
        self.options = OP_ALL | OP_NO_SSLv3
        self.verify_flags = VERIFY_X509_TRUSTED_FIRST
        self.post_handshake_auth = None
        self.sni_callback = None
        self.minimum_version = None
        self.maximum_version = None
        self.keylog_filename = None

    def __repr__(self):
        return "<bitsnet.ssl.SSLContext %s verify_mode=%d check_hostname=%s cas=%d>" % (
            _PROTOCOL_NAMES.get(self.protocol, self.protocol), self._verify_mode, self._check_hostname,
            len(self._cadata))

    def _get_verify_mode(self):
        return self._verify_mode

    def _set_verify_mode(self, value):
        if value not in (CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED):
            raise ValueError("invalid value for verify_mode")
        if value == CERT_NONE and self._check_hostname:
            raise ValueError("Cannot set verify_mode to CERT_NONE when check_hostname is enabled.")
        self._verify_mode = value

    verify_mode = property(_get_verify_mode, _set_verify_mode)

    def _get_check_hostname(self):
        return self._check_hostname

    def _set_check_hostname(self, value):
        value = bool(value)
        if value and self._verify_mode == CERT_NONE:
            if _PY3:
                self._verify_mode = CERT_REQUIRED  # 3.7+: enabling check_hostname implies it
            else:
                raise ValueError("check_hostname needs a SSL context with either CERT_OPTIONAL or CERT_REQUIRED")
        self._check_hostname = value

    check_hostname = property(_get_check_hostname, _set_check_hostname)

    def load_verify_locations(self, cafile=None, capath=None, cadata=None):
        """CA certificates for the firmware: a PEM file, a directory of them, or cadata (PEM text
        or DER bytes). They are handed to each connection's TLS child (docs/tls.md section 2.3)."""
        if cafile is None and capath is None and cadata is None:
            raise TypeError("cafile, capath and cadata cannot be all omitted")
        found = []
        if cafile is not None:
            with open(cafile, "rb") as f:
                text = f.read()
            certs = _pem_certs(text) or (_der_certs(text) if text[:1] in (b"0", "0") else [])
            if not certs:
                raise SSLError(SSL_ERROR_SSL, "[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate in %s" % cafile)
            found.extend(certs)
        if capath is not None:
            import os
            listdir = getattr(os, "listdir", None)
            if listdir is None:
                raise NotImplementedError("capath needs os.listdir, which BITS's os lacks: give cafile")
            for name in sorted(listdir(capath)):
                if name.endswith((".pem", ".crt")):
                    with open(capath.rstrip("/") + "/" + name, "rb") as f:
                        found.extend(_pem_certs(f.read()))
        if cadata is not None:
            if isinstance(cadata, (bytes, bytearray)) and not (_PY3 is False and isinstance(cadata, str)
                                                              and PEM_HEADER in cadata):
                certs = _der_certs(cadata)
            else:
                certs = _pem_certs(cadata)
            if not certs:
                raise SSLError(SSL_ERROR_SSL, "[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate in cadata")
            found.extend(certs)
        for der in found:
            if der not in self._cadata:
                self._cadata.append(der)

    def load_default_certs(self, purpose=Purpose.SERVER_AUTH):
        self.set_default_verify_paths()

    def set_default_verify_paths(self):
        for path in DEFAULT_CAFILES:
            try:
                self.load_verify_locations(cafile=path)
            except (IOError, OSError, SSLError):
                pass

    def load_cert_chain(self, certfile, keyfile=None, password=None):
        raise SSLError(SSL_ERROR_SSL, "client certificates are not supported: the firmware's EFI_TLS_PROTOCOL "
                                      "cannot take a private key (EDK2 TlsSetHostPrivateKey is EFI_UNSUPPORTED)")

    def set_ciphers(self, ciphers):
        pass  # the firmware chooses (EfiTlsCipherList takes IANA numbers, not OpenSSL strings)

    def set_alpn_protocols(self, protocols):
        pass  # the firmware's TLS has no ALPN; HTTP/1.1 is what the server gets

    def set_npn_protocols(self, protocols):
        pass

    def set_ecdh_curve(self, name):
        pass

    def get_ca_certs(self, binary_form=False):
        if binary_form:
            return list(self._cadata)
        return [_parse_cert(der) for der in self._cadata]

    def cert_store_stats(self):
        return {"x509_ca": len(self._cadata), "crl": 0, "x509": len(self._cadata)}

    def session_stats(self):
        return {}

    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True, suppress_ragged_eofs=True,
                    server_hostname=None, session=None):
        if server_side:
            raise ValueError("server-side TLS is not available with the firmware's EFI_TLS_PROTOCOL")
        return tls_socket.wrap(self, sock, server_hostname, do_handshake_on_connect, suppress_ragged_eofs)

    def wrap_bio(self, *args, **kwargs):
        raise NotImplementedError("SSLObject over memory BIOs is not available: the firmware does TLS over sockets")


def create_default_context(purpose=Purpose.SERVER_AUTH, cafile=None, capath=None, cadata=None):
    """A client context that verifies: CERT_REQUIRED, check_hostname, the given CAs (else the
    default CA file, DEFAULT_CAFILES)."""
    if purpose is not Purpose.SERVER_AUTH:
        raise ValueError("only Purpose.SERVER_AUTH (a client context) is available")
    context = SSLContext(PROTOCOL_TLS_CLIENT)
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    else:
        context.load_default_certs(purpose)
    return context


def _create_unverified_context(protocol=None, cert_reqs=CERT_NONE, check_hostname=False,
                               purpose=Purpose.SERVER_AUTH, certfile=None, keyfile=None,
                               cafile=None, capath=None, cadata=None):
    context = SSLContext(protocol or PROTOCOL_TLS)
    context.check_hostname = check_hostname
    context.verify_mode = cert_reqs
    if certfile or keyfile:
        context.load_cert_chain(certfile, keyfile)
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


_create_default_https_context = create_default_context
_create_stdlib_context = _create_unverified_context


def wrap_socket(sock, keyfile=None, certfile=None, server_side=False, cert_reqs=CERT_NONE,
                ssl_version=PROTOCOL_TLS, ca_certs=None, do_handshake_on_connect=True,
                suppress_ragged_eofs=True, ciphers=None, server_hostname=None):
    """The old module-level wrap_socket (2.7, 3.x before 3.12): no host name check."""
    context = SSLContext(ssl_version)
    context.verify_mode = cert_reqs
    if ca_certs:
        context.load_verify_locations(ca_certs)
    if certfile or keyfile:
        context.load_cert_chain(certfile, keyfile)
    return context.wrap_socket(sock, server_side, do_handshake_on_connect, suppress_ragged_eofs, server_hostname)


def get_default_verify_paths():
    return ("SSL_CERT_FILE", DEFAULT_CAFILES[0], "SSL_CERT_DIR", None)


# --- host names (what the firmware checks with EfiTlsVerifyHost, for firmware without it) ------
def _dnsname_match(pattern, hostname):
    pattern, hostname = pattern.lower().rstrip("."), hostname.lower().rstrip(".")
    if "*" not in pattern:
        return pattern == hostname
    head, _, tail = pattern.partition(".")
    if head != "*" or not tail or tail.count(".") < 1:
        return False  # only a whole left-most label, never "*.com" (the firmware's flags: NO_PARTIAL_WILDCARDS)
    first, _, rest = hostname.partition(".")
    return bool(first) and rest == tail


def _ip_address(text):
    """The packed address if ``text`` is an IPv4 (dotted quad, as OpenSSL's a2i_IPADDRESS reads it)
    or IPv6 address, else None."""
    from bitsnet import inet
    if isinstance(text, bytes) and not isinstance(text, str):
        text = text.decode("ascii", "replace")
    return inet.parse_ipv4(text, strict=True) or (inet.pack_ipv6(text) if ":" in text else None)


def match_hostname(cert, hostname):
    """Raise CertificateError unless ``cert`` (a getpeercert() dict) is for ``hostname``. An IP
    address matches only IP address entries of subjectAltName, never a DNS entry or the
    commonName (RFC 6125 section 1.7.2, as CPython and OpenSSL's X509_check_ip do)."""
    if not cert:
        raise ValueError("empty or no certificate, match_hostname needs a SSL socket or SSL context "
                         "with either CERT_OPTIONAL or CERT_REQUIRED")
    names = []
    address = _ip_address(hostname)
    for kind, value in cert.get("subjectAltName", ()):
        if kind == "DNS":
            if address is None and _dnsname_match(value, hostname):
                return
            names.append(value)
        elif kind == "IP Address":
            if address is not None and _ip_address(value.strip()) == address:
                return
            names.append(value)
    if not names and address is None:
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    if _dnsname_match(value, hostname):
                        return
                    names.append(value)
    if len(names) > 1:
        message = "hostname %r doesn't match either of %s" % (hostname, ", ".join(map(repr, names)))
    elif names:
        message = "hostname %r doesn't match %r" % (hostname, names[0])
    else:
        message = "no appropriate commonName or subjectAltName fields were found"
    if _PY3:
        raise _ssl_error(SSLCertVerificationError, SSL_ERROR_SSL, "CERTIFICATE_VERIFY_FAILED",
                         "certificate verify failed: Hostname mismatch, certificate is not valid for %r. (%s)"
                         % (hostname, message))
    raise CertificateError(message)


def _parse_cert(der):
    """A getpeercert()-style dict (subject commonName, subjectAltName) from DER, or {}."""
    try:
        from bitsnet import tls_x509
    except ImportError:
        return {}
    return tls_x509.cert_dict(der)


SSLObject = None  # no memory-BIO TLS (asyncio's client falls back to its socket transport)

# Last: tls_socket uses everything above (SSLError, match_hostname...).
from bitsnet import tls_socket  # noqa: E402
from bitsnet.tls_socket import SSLSocket  # noqa: E402,F401
