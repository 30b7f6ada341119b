"""What bitsnet.ssl and bitsnet.tls_socket share: the ``ssl`` API's constants, its exception
classes, and the pure helpers both raise them with (a tls.TlsFailure as the SSLError CPython
would raise; the host-name match of ``match_hostname``).

A leaf under the two: bitsnet.ssl (the module programs import) re-exports every public name here
as its own, and bitsnet.tls_socket (the socket type) takes them from here, so neither imports the
other's module to raise an error. The exception classes say ``bitsnet.ssl`` is their module, the
name programs and tracebacks know them by.
"""

from __future__ import absolute_import

import sys

from bitsnet import errors as _errors
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
socket_error = _errors.error  # OSError; on 2.7 socket.error, which urllib2 turns into URLError


# --- errors ----------------------------------------------------------------------------------
class SSLError(socket_error):  # type: ignore[valid-type,misc]
    """An error in the TLS layer; ``reason`` names it as OpenSSL's would (CERTIFICATE_VERIFY_FAILED...)."""

    __module__ = "bitsnet.ssl"
    library = "SSL"
    reason = None  # type: object

    def __str__(self):
        if len(self.args) >= 2 and isinstance(self.args[0], int):
            return str(self.args[1])
        return socket_error.__str__(self)


class SSLZeroReturnError(SSLError):
    """The peer closed the TLS session (close_notify)."""

    __module__ = "bitsnet.ssl"


class SSLWantReadError(SSLError):
    """Non-blocking socket: more data must arrive first."""

    __module__ = "bitsnet.ssl"


class SSLWantWriteError(SSLError):
    """Non-blocking socket: the transport must drain first."""

    __module__ = "bitsnet.ssl"


class SSLSyscallError(SSLError):
    """The transport failed under the TLS layer."""

    __module__ = "bitsnet.ssl"


class SSLEOFError(SSLError):
    """The transport ended where the TLS protocol does not allow it."""

    __module__ = "bitsnet.ssl"


class SSLCertVerificationError(SSLError, ValueError):
    """The server's certificate was not accepted (verify_code, verify_message as in CPython)."""

    __module__ = "bitsnet.ssl"

    verify_code = 0
    verify_message = ""


if _PY3:
    CertificateError = SSLCertVerificationError
else:
    class CertificateError(ValueError):  # type: ignore[no-redef]
        """2.7's match_hostname failure."""

        __module__ = "bitsnet.ssl"


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
