"""The one boundary where EFI status codes become Python socket errors.

Below this module bitsnet speaks EFI_STATUS; above it only the exception classes defined here
exist, with the errno and message shape CPython's own ``_socket`` gives (docs/architecture.md section 5):

  ``error``     OSError on Python 3; on 2.7 a subclass of IOError, as 2.7's socket.error is.
  ``herror``, ``gaierror``  subclasses of ``error`` (resolver failures).
  ``timeout``   our own deadlines (settimeout); on 3.10+ it is TimeoutError, as in CPython.
                An EFI_TIMEOUT *status* (EDK2 gave up) is ``error(ETIMEDOUT)``, not ``timeout``.

``_STATUS_TO_ERRNO`` is the one table (docs/edk2.md section 1.3); the few rows that
depend on the operation are spelled out in ``errno_for``. ``efi_boundary`` is the one place where
an ``efi.EFIException`` that escaped the layers below becomes ``error``: the socket module's
public functions and methods are wrapped in it, so no firmware exception reaches a program.

``EAI_*`` and ``EAI_MESSAGES`` are the one table of getaddrinfo's error codes (glibc's values and
``gai_strerror`` texts); ``gai_error(code)`` builds the ``gaierror`` CPython raises for one.

Errno numbers come from the ``errno`` module as ``bitsnet.errnos`` completes it (imported first,
here and by ``bitsnet/__init__``): in BITS, whose ``errno`` has only GRUB's nine names, a name is
never read before that has run. Messages come from ``strerror`` (``errnos.strerror``: BITS's
``os`` has no ``strerror``).
"""

from bitsnet import errnos  # first: completes the errno module (BITS has 9 GRUB names)

import errno
import functools
import sys

import efi

strerror = errnos.strerror

if sys.version_info[0] >= 3:
    error = OSError
else:
    class error(IOError):  # type: ignore[no-redef]
        """socket.error: a subclass of IOError in Python 2.7."""


class herror(error):  # type: ignore[valid-type,misc]
    """Host-database errors (gethostbyaddr)."""


class gaierror(error):  # type: ignore[valid-type,misc]
    """getaddrinfo/gethostbyname errors; args are (EAI_* code, message)."""


if sys.version_info >= (3, 10):
    timeout = TimeoutError
else:
    class timeout(error):  # type: ignore[no-redef,valid-type,misc]
        """A bitsnet deadline expired (settimeout)."""


# --- getaddrinfo error codes: glibc's values (netdb.h), as CPython's socket module has them --------
EAI_BADFLAGS = -1
EAI_NONAME = -2
EAI_AGAIN = -3
EAI_FAIL = -4
EAI_NODATA = -5
EAI_FAMILY = -6
EAI_SOCKTYPE = -7
EAI_SERVICE = -8
EAI_ADDRFAMILY = -9
EAI_MEMORY = -10
EAI_SYSTEM = -11
EAI_OVERFLOW = -12

EAI_MESSAGES = {  # glibc's gai_strerror
    EAI_BADFLAGS: "Bad value for ai_flags",
    EAI_NONAME: "Name or service not known",
    EAI_AGAIN: "Temporary failure in name resolution",
    EAI_FAIL: "Non-recoverable failure in name resolution",
    EAI_NODATA: "No address associated with hostname",
    EAI_FAMILY: "ai_family not supported",
    EAI_SOCKTYPE: "ai_socktype not supported",
    EAI_SERVICE: "Servname not supported for ai_socktype",
    EAI_ADDRFAMILY: "Address family for hostname not supported",
    EAI_MEMORY: "Memory allocation failure",
    EAI_SYSTEM: "System error",
    EAI_OVERFLOW: "Argument buffer overflow",
}


def gai_error(code, detail=None):
    """``gaierror(code, message)`` with glibc's message for ``code`` (``detail`` appended)."""
    message = EAI_MESSAGES[code]
    if detail:
        message = "%s (%s)" % (message, detail)
    return gaierror(code, message)


ECANCELED = errno.ECANCELED  # Python 2.7's errno lacks it; errnos added Linux's value

_STATUS_TO_ERRNO = {
    efi.EFI_NOT_READY: errno.EAGAIN,
    efi.EFI_TIMEOUT: errno.ETIMEDOUT,
    efi.EFI_CONNECTION_RESET: errno.ECONNRESET,
    efi.EFI_CONNECTION_REFUSED: errno.ECONNREFUSED,
    efi.EFI_CONNECTION_FIN: errno.ENOTCONN,  # only reached when EOF was not handled as EOF
    efi.EFI_NETWORK_UNREACHABLE: errno.ENETUNREACH,
    efi.EFI_HOST_UNREACHABLE: errno.EHOSTUNREACH,
    efi.EFI_PORT_UNREACHABLE: errno.ECONNREFUSED,
    efi.EFI_PROTOCOL_UNREACHABLE: errno.ECONNREFUSED,
    efi.EFI_ICMP_ERROR: errno.EIO,
    efi.EFI_NO_MAPPING: errno.EADDRNOTAVAIL,
    efi.EFI_ACCESS_DENIED: errno.EINVAL,
    efi.EFI_NOT_STARTED: errno.ENOTCONN,
    efi.EFI_ALREADY_STARTED: errno.EISCONN,
    efi.EFI_ABORTED: ECANCELED,
    efi.EFI_OUT_OF_RESOURCES: errno.ENOBUFS,
    efi.EFI_BAD_BUFFER_SIZE: errno.EMSGSIZE,
    efi.EFI_BUFFER_TOO_SMALL: errno.EMSGSIZE,
    efi.EFI_NOT_FOUND: errno.ENETUNREACH,  # UDP Transmit with no route
    efi.EFI_NO_MEDIA: errno.ENETDOWN,
    efi.EFI_UNSUPPORTED: errno.ENOPROTOOPT,
    efi.EFI_INVALID_PARAMETER: errno.EINVAL,
    efi.EFI_DEVICE_ERROR: errno.EIO,
    efi.EFI_NO_RESPONSE: errno.ETIMEDOUT,
}

# Rows that depend on what was being done (docs/edk2.md sections 3.3, 3.6, 3.8, 4.2).
_BY_OPERATION = {  # type: dict
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Connect): a RST answering our SYN completes the connect
    # token with EFI_CONNECTION_RESET, not the EFI_CONNECTION_REFUSED the spec names.
    ("connect", efi.EFI_CONNECTION_RESET): errno.ECONNREFUSED,
    # EDK2 quirk (TcpDxe TcpBind, docs/edk2.md section 3.8): a TCP port clash is EFI_INVALID_PARAMETER.
    ("bind", efi.EFI_INVALID_PARAMETER): errno.EADDRINUSE,
    # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): a UDP port clash is EFI_ACCESS_DENIED.
    ("udp-bind", efi.EFI_ACCESS_DENIED): errno.EADDRINUSE,
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.5): after Close() or a reset, calls answer ACCESS_DENIED: the socket is
    # not connected.
    ("send", efi.EFI_ACCESS_DENIED): errno.EPIPE,
    ("recv", efi.EFI_ACCESS_DENIED): errno.ENOTCONN,
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.5): a RST with no token pending shows only as EFI_ACCESS_DENIED
    # and GetModeData's Tcp4StateClosed; tcp.py asks with this operation once it has read that state.
    ("tcp-closed", efi.EFI_ACCESS_DENIED): errno.ECONNRESET,
    # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): a Transmit whose next hop ARP could not resolve completes
    # with EFI_NO_MAPPING.
    ("udp-send", efi.EFI_NO_MAPPING): errno.EHOSTUNREACH,
}


def status_name(status):
    # type: (int) -> str
    """'EFI_CONNECTION_RESET' for its value; unknown values in hex."""
    name = efi.efi_status_decode.get(status)
    return name if name else "EFI status 0x%x" % (status or 0)


def is_error(status):
    # type: (int) -> bool
    """EFI_ERROR(status): the top bit is set (warnings are not errors)."""
    return bool(status & efi.EFI_ERROR)


def errno_for(status, op=None):
    # type: (int, str) -> int
    """The errno CPython would report for EFI ``status`` met while doing ``op``."""
    specific = _BY_OPERATION.get((op, status))
    if specific is not None:
        return specific
    return _STATUS_TO_ERRNO.get(status, errno.EIO)


def socket_error(err, detail=None):
    """``error(err, strerror)``, CPython's shape, with ``detail`` appended to the message."""
    message = strerror(err)
    if detail:
        message = "%s (%s)" % (message, detail)
    return error(err, message)


def raise_for_status(status, op, detail=None):
    # type: (int, str, str) -> None
    """Return if ``status`` is EFI_SUCCESS; otherwise raise the matching ``error`` (``detail``,
    if given, says what was being done instead of ``op``)."""
    if status == efi.EFI_SUCCESS:
        return
    raise socket_error(errno_for(status, op), "%s (%s)" % (detail, status_name(status)) if detail
                       else "%s in %s" % (status_name(status), op))


def from_efi_exception(exc, op):
    """The ``error`` for an ``efi.EFIException`` (its status in ``args[0]``) met in ``op``."""
    status = exc.args[0] if exc.args else efi.EFI_DEVICE_ERROR
    return socket_error(errno_for(status, op), "%s in %s" % (status_name(status), op))


def efi_boundary(function, enter=None, leave=None):
    """``function`` wrapped so that an ``efi.EFIException`` escaping it is raised as ``error``
    (``from_efi_exception``, named after ``function``). ``enter()`` and ``leave()``, if given,
    run around each call (the socket layer's one-thread-at-a-time rule). The wrapper carries
    ``efi_boundary = True``, so a test can check that a public entry point is covered."""
    op = function.__name__

    @functools.wraps(function)
    def boundary(*args, **kwargs):
        if enter is not None:
            enter()
        try:
            return function(*args, **kwargs)
        except efi.EFIException as exc:
            raise from_efi_exception(exc, op)
        finally:
            if leave is not None:
                leave()
    boundary.efi_boundary = True  # type: ignore[attr-defined]
    return boundary
