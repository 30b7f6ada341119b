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

from bitsnet import tls_socket
# The API's constants and exceptions, this module's own names. In several statements:
# BITS quirk: BITS's compiler aborts on one line's bytecode over 255 bytes (docs/bits-environment.md section 9).
from bitsnet.ssl_common import (  # noqa: F401
    OPENSSL_VERSION, OPENSSL_VERSION_INFO, OPENSSL_VERSION_NUMBER, HAS_SNI, HAS_ALPN, HAS_NPN, HAS_ECDH,
    HAS_TLSv1_3, HAS_NEVER_CHECK_COMMON_NAME, CHANNEL_BINDING_TYPES, DEFAULT_CAFILES)
from bitsnet.ssl_common import (  # noqa: F401
    CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED, PROTOCOL_SSLv23, PROTOCOL_TLS, PROTOCOL_TLSv1, PROTOCOL_TLSv1_1,
    PROTOCOL_TLSv1_2, PROTOCOL_TLS_CLIENT, PROTOCOL_TLS_SERVER)
from bitsnet.ssl_common import (  # noqa: F401
    OP_ALL, OP_NO_SSLv2, OP_NO_SSLv3, OP_NO_TLSv1, OP_NO_TLSv1_1, OP_NO_TLSv1_2, OP_NO_TLSv1_3,
    OP_NO_COMPRESSION, OP_CIPHER_SERVER_PREFERENCE, OP_SINGLE_DH_USE, OP_SINGLE_ECDH_USE, OP_NO_TICKET)
from bitsnet.ssl_common import (  # noqa: F401
    VERIFY_DEFAULT, VERIFY_X509_STRICT, VERIFY_X509_TRUSTED_FIRST, VERIFY_CRL_CHECK_LEAF, VERIFY_CRL_CHECK_CHAIN)
from bitsnet.ssl_common import (  # noqa: F401
    SSL_ERROR_SSL, SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_X509_LOOKUP, SSL_ERROR_SYSCALL,
    SSL_ERROR_ZERO_RETURN, SSL_ERROR_WANT_CONNECT, SSL_ERROR_EOF, SSL_ERROR_INVALID_ERROR_CODE)
from bitsnet.ssl_common import (  # noqa: F401
    socket_error, SSLError, SSLZeroReturnError, SSLWantReadError, SSLWantWriteError, SSLSyscallError, SSLEOFError,
    SSLCertVerificationError, CertificateError, match_hostname)
from bitsnet.ssl_common import _PY3, _dnsname_match, _from_failure, _ip_address, _ssl_error  # noqa: F401

_PROTOCOL_NAMES = {PROTOCOL_TLS: "TLS", PROTOCOL_TLSv1: "TLSv1", PROTOCOL_TLSv1_1: "TLSv1.1",
                   PROTOCOL_TLSv1_2: "TLSv1.2", PROTOCOL_TLS_CLIENT: "TLS_CLIENT", PROTOCOL_TLS_SERVER: "TLS_SERVER"}


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


def _parse_cert(der):
    """A getpeercert()-style dict (subject commonName, subjectAltName) from DER, or {}."""
    try:
        from bitsnet import tls_x509
    except ImportError:
        return {}
    return tls_x509.cert_dict(der)


SSLObject = None  # no memory-BIO TLS (asyncio's client falls back to its socket transport)
SSLSocket = tls_socket.SSLSocket
