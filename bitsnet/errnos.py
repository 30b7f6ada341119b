"""The errno names and messages bitsnet uses, and the ``errno`` module completed with them.

BITS's ``errno`` is GRUB's: nine names carrying GRUB error codes (``EINVAL`` 10, ``EINTR`` 28,
``EISDIR`` and ``ENOTDIR`` both 4, ``ENOMEM`` 3, ``ENOENT`` 5, ``ERANGE`` 11, ``ENXIO`` 12,
``EDOM`` 18) and no ``EAGAIN``, ``ECONNREFUSED`` or any other network code; its ``os`` has no
``strerror`` (docs/errors.md). Importing this module (``bitsnet`` does, before anything else)
completes the ``errno`` module in place, so that user code at the prompt can compare
``e.errno == errno.ECONNREFUSED`` and read ``errno.errorcode[e.errno]`` for every error
bitsnet raises, and so can the standard library (``socket.py``, ``asyncore``, ``SocketServer``):

* a name ``errno`` already has keeps its value (BITS's nine keep GRUB's numbers, a host keeps
  everything it has: on a host nothing changes but names its Python lacks, e.g. 2.7's
  ``ECANCELED``);
* a missing name gets Linux's value, unless that number already names something else in
  ``errno.errorcode`` (in BITS: Linux's ``EIO`` 5 is GRUB's ``ENOENT``, ``EAGAIN`` 11 is
  ``ERANGE``); then it gets the next free number from ``PRIVATE_BASE`` on, in table order, so
  the numbers are the same in every boot;
* ``EWOULDBLOCK`` is ``EAGAIN`` and ``ENOTSUP`` is ``EOPNOTSUPP``, as on Linux;
* ``errno.errorcode`` gains every number it did not have.

``strerror(n)`` is ``os.strerror`` where the OS has one (a host) and otherwise the message of
``n``'s name from ``TABLE`` (glibc's texts), so messages read the same in BITS as on Linux.
This module imports nothing BITS lacks, and nothing from the firmware.
"""

import errno
import os

# (name, Linux value, glibc's message). One tuple of constants: folded at compile time, so a
# long table cannot trip BITS's peephole assertion (docs/bits-environment.md section 9).
TABLE = (
    ("EPERM", 1, "Operation not permitted"),
    ("ENOENT", 2, "No such file or directory"),
    ("EINTR", 4, "Interrupted system call"),
    ("EIO", 5, "Input/output error"),
    ("ENXIO", 6, "No such device or address"),
    ("EBADF", 9, "Bad file descriptor"),
    ("ECHILD", 10, "No child processes"),
    ("EAGAIN", 11, "Resource temporarily unavailable"),
    ("ENOMEM", 12, "Cannot allocate memory"),
    ("EACCES", 13, "Permission denied"),
    ("EFAULT", 14, "Bad address"),
    ("EBUSY", 16, "Device or resource busy"),
    ("EEXIST", 17, "File exists"),
    ("ENOTDIR", 20, "Not a directory"),
    ("EISDIR", 21, "Is a directory"),
    ("EINVAL", 22, "Invalid argument"),
    ("ENFILE", 23, "Too many open files in system"),
    ("EMFILE", 24, "Too many open files"),
    ("ENOTTY", 25, "Inappropriate ioctl for device"),
    ("ENOSPC", 28, "No space left on device"),
    ("ESPIPE", 29, "Illegal seek"),
    ("EPIPE", 32, "Broken pipe"),
    ("EDOM", 33, "Numerical argument out of domain"),
    ("ERANGE", 34, "Numerical result out of range"),
    ("ENOSYS", 38, "Function not implemented"),
    ("EPROTO", 71, "Protocol error"),
    ("ENOTSOCK", 88, "Socket operation on non-socket"),
    ("EDESTADDRREQ", 89, "Destination address required"),
    ("EMSGSIZE", 90, "Message too long"),
    ("EPROTOTYPE", 91, "Protocol wrong type for socket"),
    ("ENOPROTOOPT", 92, "Protocol not available"),
    ("EPROTONOSUPPORT", 93, "Protocol not supported"),
    ("ESOCKTNOSUPPORT", 94, "Socket type not supported"),
    ("EOPNOTSUPP", 95, "Operation not supported"),
    ("EPFNOSUPPORT", 96, "Protocol family not supported"),
    ("EAFNOSUPPORT", 97, "Address family not supported by protocol"),
    ("EADDRINUSE", 98, "Address already in use"),
    ("EADDRNOTAVAIL", 99, "Cannot assign requested address"),
    ("ENETDOWN", 100, "Network is down"),
    ("ENETUNREACH", 101, "Network is unreachable"),
    ("ENETRESET", 102, "Network dropped connection on reset"),
    ("ECONNABORTED", 103, "Software caused connection abort"),
    ("ECONNRESET", 104, "Connection reset by peer"),
    ("ENOBUFS", 105, "No buffer space available"),
    ("EISCONN", 106, "Transport endpoint is already connected"),
    ("ENOTCONN", 107, "Transport endpoint is not connected"),
    ("ESHUTDOWN", 108, "Cannot send after transport endpoint shutdown"),
    ("ETIMEDOUT", 110, "Connection timed out"),
    ("ECONNREFUSED", 111, "Connection refused"),
    ("EHOSTDOWN", 112, "Host is down"),
    ("EHOSTUNREACH", 113, "No route to host"),
    ("EALREADY", 114, "Operation already in progress"),
    ("EINPROGRESS", 115, "Operation now in progress"),
    ("ECANCELED", 125, "Operation canceled"),
)
ALIASES = (("EWOULDBLOCK", "EAGAIN"), ("ENOTSUP", "EOPNOTSUPP"))
PRIVATE_BASE = 200  # above every Linux errno (133): numbers for names whose Linux value is taken

MESSAGES = dict((name, message) for name, _value, message in TABLE)
_os_strerror = getattr(os, "strerror", None)  # BITS quirk: its os has no strerror (docs/errors.md)


def complete(module=errno):
    """Add every name of ``TABLE`` that ``module`` lacks (see the module docstring); idempotent.
    Returns the names added, with their values, as a list of (name, value)."""
    codes = module.errorcode
    added = []
    private = PRIVATE_BASE
    for name, value, _message in TABLE:
        if hasattr(module, name):
            codes.setdefault(getattr(module, name), name)
            continue
        if value in codes:
            while private in codes:
                private += 1
            value = private
        setattr(module, name, value)
        codes[value] = name
        added.append((name, value))
    for alias, name in ALIASES:
        if not hasattr(module, alias):
            setattr(module, alias, getattr(module, name))
            added.append((alias, getattr(module, name)))
    return added


def strerror(code, module=errno):
    """The message for errno ``code``: the OS's own where it has one, else glibc's text for the
    name ``errno.errorcode`` gives it, else "Unknown error N" as glibc says."""
    if _os_strerror is not None and module is errno:
        try:
            return _os_strerror(code)
        except (ValueError, OverflowError, TypeError):
            pass
    message = MESSAGES.get(module.errorcode.get(code))
    return message if message is not None else "Unknown error %d" % (code,)


ADDED = complete()
