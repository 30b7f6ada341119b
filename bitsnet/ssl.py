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

Certificates are verified by the firmware: the CA certificates go to the TLS child with
EFI_TLS_CONFIGURATION_PROTOCOL.SetData(EfiTlsConfigDataTypeCACertificate), the host name with
SetSessionData(EfiTlsVerifyHost) where the firmware has it (EDK2 since 2020); an older TlsDxe
gets the host name checked here, from the server's certificate (readable in a TLS 1.2
handshake, docs/tls.md 2.4). A failed verification is an SSLError naming the reason; there is
never a fallback to plain text. Client certificates and server-side TLS are not offered (EDK2's
TlsSetHostPrivateKey is EFI_UNSUPPORTED).

Give the firmware your CA: ``create_default_context(cafile="/boot/bitsnet/ca.pem")``, or put
the PEM file at ``/boot/bitsnet/ca.pem`` (``DEFAULT_CAFILES``), which default contexts load.
EDK2 quirk: TlsDxe keeps every CA certificate any child was given in one store for the whole
boot (TlsSetCaCertificate adds to the service's SSL_CTX), so a CA once given stays trusted.

``bitsnet.install()`` makes this module ``ssl`` where the interpreter has none (BITS).
"""

from __future__ import absolute_import

import binascii
import errno as _errno
import sys

try:
    from typing import Any  # noqa: F401  (type comments; BITS has no typing)
except ImportError:
    pass

from bitsnet import _socket as _bitsnet_socket
from bitsnet import efidefs_tls as T
from bitsnet import tls as _tls

_PY3 = sys.version_info[0] >= 3

OPENSSL_VERSION = "EFI_TLS_PROTOCOL (the firmware's TLS)"
OPENSSL_VERSION_INFO = (0, 0, 0, 0, 0)
OPENSSL_VERSION_NUMBER = 0
HAS_SNI = True  # EDK2 sends it with EfiTlsVerifyHost where it can (TlsSetServerName)
HAS_ALPN = False
HAS_NPN = False
HAS_ECDH = True
HAS_TLSv1_3 = False  # bitsnet asks the firmware for TLS 1.2 (docs/tls.md 2.2)
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
        or DER bytes). They are handed to each connection's TLS child (docs/tls.md 2.3)."""
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
        return _wrap(self, sock, server_hostname, do_handshake_on_connect, suppress_ragged_eofs)

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
        return False  # only a whole left-most label, and never "*.com" (EDK2's flags: NONE)
    first, _, rest = hostname.partition(".")
    return bool(first) and rest == tail


def match_hostname(cert, hostname):
    """Raise CertificateError unless ``cert`` (a getpeercert() dict) is for ``hostname``."""
    if not cert:
        raise ValueError("empty or no certificate, match_hostname needs a SSL socket or SSL context "
                         "with either CERT_OPTIONAL or CERT_REQUIRED")
    names = []
    for kind, value in cert.get("subjectAltName", ()):
        if kind == "DNS":
            if _dnsname_match(value, hostname):
                return
            names.append(value)
        elif kind == "IP Address":
            if value == hostname:
                return
            names.append(value)
    if not names:
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


# --- the socket ------------------------------------------------------------------------------
_classes = {}  # type: dict   # socket class -> the SSLSocket class built over it


def _wrap(context, sock, server_hostname, do_handshake_on_connect, suppress_ragged_eofs):
    if context.check_hostname and not server_hostname:
        raise ValueError("check_hostname requires server_hostname")
    base = type(sock)
    cls = _classes.get(base)
    if cls is None:
        if isinstance(sock, _bitsnet_socket.socket):
            kind = "py3socket" if hasattr(base, "_real_close") else "raw"
        elif hasattr(sock, "_sock"):
            kind = "py2socket"
        else:
            raise TypeError("wrap_socket needs a bitsnet socket, not %r" % (sock,))
        cls = type("SSLSocket", (SSLSocket, base), {"_base": base, "_kind": kind})
        _classes[base] = cls
    return cls._create(sock, context, server_hostname, do_handshake_on_connect, suppress_ragged_eofs)


class _Transport(object):
    """The raw TCP byte stream under the TLS records: the socket's own recv/send (bypassing
    the TLS methods), with non-blocking "try again" as tls.WouldBlock."""

    def __init__(self, recv, send):
        self._recv, self._send = recv, send

    def recv(self, n):
        try:
            return self._recv(n)
        except socket_error as exc:
            if getattr(exc, "errno", None) in (_errno.EAGAIN, getattr(_errno, "EWOULDBLOCK", _errno.EAGAIN)) \
                    and not isinstance(exc, _bitsnet_socket.timeout):
                raise _tls.WouldBlock(False)
            raise

    def send(self, data):
        try:
            return self._send(data)
        except socket_error as exc:
            if getattr(exc, "errno", None) in (_errno.EAGAIN, getattr(_errno, "EWOULDBLOCK", _errno.EAGAIN)) \
                    and not isinstance(exc, _bitsnet_socket.timeout):
                raise _tls.WouldBlock(True)
            raise


class _TlsEndpoint(object):
    """The TCP endpoint as select() sees it while TLS runs over it: readable also when the
    TLS layer holds decrypted data or a whole received record (CPython's ssl leaves that to
    the caller's pending(); here select() and selectors just work)."""

    def __init__(self, inner, session):
        self.__dict__["_inner"] = inner
        self.__dict__["_session"] = session

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)

    def can_recv(self):
        session = self._session
        return bool(session.plain) or session.buffered_record() or session.eof or self._inner.can_recv()


class SSLSocket(object):
    """A TLS client socket (the class ``wrap_socket`` returns is this mixed into the socket's
    own class, so it stays a ``socket.socket``)."""

    _base = None  # type: Any   # the socket class mixed with (set per built class)
    _kind = "raw"  # "py3socket" (3.x socket.socket), "py2socket" (2.7's wrapper), "raw" (bitsnet's)

    @classmethod
    def _create(cls, sock, context, server_hostname, do_handshake_on_connect, suppress_ragged_eofs):
        if getattr(sock, "type", _bitsnet_socket.SOCK_STREAM) != _bitsnet_socket.SOCK_STREAM:
            raise NotImplementedError("only stream sockets are supported")
        timeout = sock.gettimeout()
        base = cls._base
        if cls._kind == "py2socket":  # 2.7's socket.socket: a wrapper around a bitsnet socket in _sock
            self = cls.__new__(cls)
            base.__init__(self, _sock=sock._sock)
            for name in ("recv", "recvfrom", "recv_into", "recvfrom_into", "send", "sendto"):
                self.__dict__.pop(name, None)  # 2.7's socket object put its _sock's methods here
            rawsock = sock._sock
            transport = _Transport(rawsock.recv, rawsock.send)
        else:  # 3.x's socket.socket, or a bitsnet socket itself: take over its fd
            self = cls.__new__(cls)
            base.__init__(self, sock.family, sock.type, sock.proto, fileno=sock.detach())
            transport = _Transport(lambda n: base.recv(self, n), lambda data: base.send(self, data))
        self._makefile_refs = 0
        self.settimeout(timeout)
        self._context = context
        self.server_hostname = server_hostname
        self.server_side = False
        self.do_handshake_on_connect = do_handshake_on_connect
        self.suppress_ragged_eofs = suppress_ragged_eofs
        self._transport = transport
        self._check_in_python = False
        self._closed_tls = False
        self._session = None
        self._endpoint_hook = None
        child = None
        try:
            child = _configured_child(context, server_hostname)
            self._check_in_python = not child.verifies_host
            self._session = _tls.TlsSession(child, transport)
            if child.verifies_host:
                self._session.verify_host_name = server_hostname
            self._hook_select()
            connected = True
            try:
                self.getpeername()
            except socket_error:
                connected = False
            if connected and do_handshake_on_connect:
                self.do_handshake()
        except BaseException:
            self._teardown()
            if child is not None:
                child.destroy()
            raise
        return self

    # -- plumbing
    def _hook_select(self):
        descriptor = _bitsnet_socket.lookup(self.fileno())
        if descriptor is not None and not isinstance(descriptor.endpoint, _TlsEndpoint):
            self._endpoint_hook = (descriptor, descriptor.endpoint)
            descriptor.endpoint = _TlsEndpoint(descriptor.endpoint, self._session)

    def _unhook_select(self):
        hook, self._endpoint_hook = self._endpoint_hook, None
        if hook is not None and isinstance(hook[0].endpoint, _TlsEndpoint):
            hook[0].endpoint = hook[1]

    def _teardown(self):
        """Forget the TLS child (DestroyChild) and the select() hook; the TCP socket stays."""
        self._unhook_select()
        session, self._session = self._session, None
        if session is not None:
            session.child.destroy()

    def _call(self, func, *args):
        """Run a session step, turning tls failures into SSLError (and waits into Want*)."""
        try:
            return func(*args)
        except _tls.WouldBlock as block:
            if block.writing:
                raise _ssl_error(SSLWantWriteError, SSL_ERROR_WANT_WRITE, None,
                                 "The operation did not complete (write)")
            raise _ssl_error(SSLWantReadError, SSL_ERROR_WANT_READ, None, "The operation did not complete (read)")
        except _tls.TlsFailure as failure:
            raise _from_failure(failure, self._context)

    def _live_session(self):
        if self._session is None:
            raise socket_error(_errno.EBADF, "Bad file descriptor" if self._closed_tls
                               else "the TLS session is gone (unwrapped or failed)")
        return self._session

    # -- handshake
    @property
    def context(self):
        return self._context

    def do_handshake(self, block=False):
        session = self._live_session()
        self._call(session.handshake)
        if self._check_in_python and self._context.check_hostname and not getattr(self, "_host_checked", False):
            self._check_host_in_python(session)

    def _check_host_in_python(self, session):
        """EDK2 before 2020 has no EfiTlsVerifyHost: check the name here (docs/tls.md 2.4)."""
        from bitsnet import tls_x509
        der = tls_x509.server_certificate(bytes(session.handshake_messages))
        if der is None:
            self._teardown()
            raise _ssl_error(SSLCertVerificationError if _PY3 else SSLError, SSL_ERROR_SSL, "CERTIFICATE_VERIFY_FAILED",
                             "cannot check the host name: this firmware's TLS has no EfiTlsVerifyHost and the "
                             "server's certificate was not readable in the handshake")
        try:
            match_hostname(tls_x509.cert_dict(der), self.server_hostname)
        except (CertificateError, SSLError):
            self._teardown()
            raise
        self._host_checked = True

    def connect(self, address):
        self._connect_then_handshake(address)

    def connect_ex(self, address):
        try:
            self._connect_then_handshake(address)
        except socket_error as exc:
            return getattr(exc, "errno", None) or _errno.EIO
        return 0

    def _connect_then_handshake(self, address):
        if self._session is not None and self._session.started:
            raise ValueError("attempt to connect already-connected SSLSocket!")
        if self._kind == "py2socket":
            self._sock.connect(address)
        else:
            self._base.connect(self, address)
        if self.do_handshake_on_connect:
            self.do_handshake()

    # -- reading
    def read(self, len=1024, buffer=None):
        session = self._live_session()
        if not session.established:
            self.do_handshake()
        while not session.plain:
            if session.eof:
                if session.inbuf and not self.suppress_ragged_eofs:
                    raise _ssl_error(SSLEOFError, SSL_ERROR_EOF, "UNEXPECTED_EOF_WHILE_READING",
                                     "EOF occurred in violation of protocol")
                return 0 if buffer is not None else b""
            self._call(session.read_more)
        n = min(len, session.pending()) if len > 0 else session.pending()
        data, session.plain = session.plain[:n], session.plain[n:]
        if buffer is not None:
            buffer[:n] = data
            return n
        return data

    def recv(self, buflen=1024, flags=0):
        if flags:
            raise ValueError("non-zero flags not allowed in calls to recv() on %s" % self.__class__)
        return self.read(buflen)

    def recv_into(self, buffer, nbytes=None, flags=0):
        if flags:
            raise ValueError("non-zero flags not allowed in calls to recv_into() on %s" % self.__class__)
        view = memoryview(buffer)
        if not nbytes:
            nbytes = len(view)
        return self.read(nbytes, view.cast("B") if _PY3 else view)

    def recvfrom(self, buflen=1024, flags=0):
        return self.recv(buflen, flags), None

    def recvfrom_into(self, buffer, nbytes=None, flags=0):
        return self.recv_into(buffer, nbytes, flags), None

    def pending(self):
        return 0 if self._session is None else self._session.pending()

    # -- writing
    def write(self, data):
        session = self._live_session()
        if not session.established:
            self.do_handshake()
        if session.outbuf:
            self._call(session.flush)  # SSLWantWriteError here: nothing of ``data`` was taken
        data = bytes(memoryview(data).tobytes()) if not isinstance(data, bytes) else data
        try:
            return self._call(session.write, data)
        except SSLWantWriteError:
            return len(data)  # encrypted and queued: flushed by the next call

    def send(self, data, flags=0):
        if flags:
            raise ValueError("non-zero flags not allowed in calls to send() on %s" % self.__class__)
        return self.write(data)

    def sendall(self, data, flags=0):
        if flags:
            raise ValueError("non-zero flags not allowed in calls to sendall() on %s" % self.__class__)
        view = memoryview(data)
        total = len(view) * view.itemsize
        sent = 0
        while sent < total:
            sent += self.send(view[sent:].tobytes())
        if self._session is not None and self._session.outbuf:
            self._call(self._session.flush)

    def sendto(self, data, flags_or_addr, addr=None):
        raise ValueError("sendto not allowed on instances of %s" % self.__class__)

    # -- information
    def getpeercert(self, binary_form=False):
        session = self._live_session()
        if not session.established:
            raise ValueError("handshake not done yet")
        from bitsnet import tls_x509
        der = tls_x509.server_certificate(bytes(session.handshake_messages))
        if binary_form:
            return der
        if self._context.verify_mode == CERT_NONE or der is None:
            return {}
        return tls_x509.cert_dict(der)

    def cipher(self):
        if self._session is None or not self._session.established:
            return None
        return (_cipher_name(self._session.child), self.version(), None)

    def shared_ciphers(self):
        return None

    def version(self):
        if self._session is None or not self._session.established:
            return None
        return "TLSv1.2"

    def compression(self):
        return None

    def selected_alpn_protocol(self):
        return None

    def selected_npn_protocol(self):
        return None

    def get_channel_binding(self, cb_type="tls-unique"):
        return None

    session = None
    session_reused = False

    # -- the end
    def unwrap(self):
        """close_notify, then the plain socket (the TLS child is destroyed)."""
        session = self._live_session()
        session.close_notify()
        try:
            self._call(session.flush)
        finally:
            self._teardown()
        if self._kind == "py2socket":
            import socket as _stdsocket
            return _stdsocket.socket(_sock=self._sock)
        return self._base(self.family, self.type, self.proto, fileno=self.detach())

    def shutdown(self, how):
        self._send_close_notify()
        if self._kind == "py2socket":
            self._sock.shutdown(how)
        else:
            self._base.shutdown(self, how)

    def _send_close_notify(self):
        session = self._session
        if session is None or self._closed_tls:
            return
        self._closed_tls = True
        try:
            session.close_notify()
            session.flush()
        except Exception:
            pass  # best effort: the peer may be gone already

    def _end_tls(self):
        self._send_close_notify()
        self._teardown()
        self._closed_tls = True

    def _real_close(self):  # 3.x's socket.socket.close() calls it once no makefile() is open
        self._end_tls()
        self._base._real_close(self)

    def detach(self):
        self._teardown()
        return self._base.detach(self)

    def makefile(self, mode="r", *args, **kwargs):
        if self._kind == "py3socket":
            return self._base.makefile(self, mode, *args, **kwargs)
        import socket as _stdsocket
        self._makefile_refs += 1
        bufsize = args[0] if args else kwargs.get("bufsize", kwargs.get("buffering", -1))
        return _stdsocket._fileobject(self, mode, -1 if bufsize is None else bufsize, close=True)

    def close(self):
        if self._kind == "py3socket":
            self._base.close(self)  # -> _real_close when no makefile() object is open
        elif self._makefile_refs < 1:
            self._end_tls()
            self._base.close(self)
        else:
            self._makefile_refs -= 1

    def dup(self):
        raise NotImplementedError("Can't dup() %s instances" % self.__class__.__name__)

    def accept(self):
        raise NotImplementedError("server-side TLS is not available with the firmware's EFI_TLS_PROTOCOL")

    def __del__(self):
        try:
            self._teardown()
        except Exception:
            pass
        parent = getattr(getattr(self, "_base", None), "__del__", None)
        if parent is not None:
            parent(self)


def _configured_child(context, server_hostname):
    """A TLS child set up as ``context`` says (docs/tls.md 2): TLS 1.2, client, the verify
    method, the CAs, the host name; ``verifies_host`` tells whether the firmware checks it."""
    try:
        child = _tls.TlsChild()
    except _tls.TlsFailure as failure:
        raise _from_failure(failure, context)
    child.verifies_host = False
    try:
        version = T.EFI_TLS_VERSION()
        version.Major, version.Minor = 3, 3
        child.must_set(T.EfiTlsVersion, version)
        import efi
        child.must_set(T.EfiTlsConnectionEnd, efi.UINT32(T.EfiTlsClient))
        verify = T.EFI_TLS_VERIFY_NONE if context.verify_mode == CERT_NONE else T.EFI_TLS_VERIFY_PEER
        child.must_set(T.EfiTlsVerifyMethod, efi.UINT32(verify))
        if verify != T.EFI_TLS_VERIFY_NONE:
            for der in context._cadata:
                child.add_ca(der)
            if context.check_hostname and server_hostname:
                child.verifies_host = child.set_verify_host(_host_bytes(server_hostname))
        child.must_set(T.EfiTlsSessionState, efi.UINT32(T.EfiTlsSessionNotStarted))
    except _tls.TlsFailure as failure:
        child.destroy()
        raise _from_failure(failure, context)
    except BaseException:
        child.destroy()
        raise
    return child


def _host_bytes(hostname):
    if isinstance(hostname, bytes):
        return hostname
    try:
        return hostname.encode("ascii")
    except UnicodeError:
        raise ValueError("server_hostname %r: only ASCII host names (the firmware takes CHAR8)" % (hostname,))


def _cipher_name(child):
    import ctypes

    import efi
    value = (ctypes.c_uint8 * 2)()
    size = efi.UINTN(2)
    status = child.tls.GetSessionData(ctypes.byref(child.tls), T.EfiTlsCipherList, ctypes.byref(value),
                                      ctypes.byref(size))
    if status != efi.EFI_SUCCESS:
        return "unknown"
    return "0x{:02x}{:02x}".format(value[0], value[1])


SSLObject = None  # no memory-BIO TLS (asyncio's client falls back to its socket transport)
