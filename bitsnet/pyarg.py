"""CPython's argument parsing, as the socket module's C code meets it: the exceptions and
messages ``PyArg_Parse*`` and the number converters raise for a wrong argument.

``_socket`` (and ``inet``, ``netdb``) check every argument here before anything else, so that a
program that passes the wrong thing gets the TypeError, OverflowError or ValueError CPython
gives -- for 2.7 and for 3.x, whose words differ -- and never a firmware error. Each function is
named after what it converts, with the PyArg format letter in its docstring ("i", "n", "s",
"y*"...). Nothing here touches the firmware.
"""

import sys

try:
    INT_TYPES = (int, long)  # type: ignore[name-defined]  # noqa: F821   # 2.7: ints may be longs
except NameError:
    INT_TYPES = (int,)  # type: ignore[assignment]

UNICODE = type(u"")  # str on 3, unicode on 2.7

C_INT = (-2 ** 31, 2 ** 31 - 1)
C_LONG = (-2 ** 63, 2 ** 63 - 1)
DEFAULT_ARG = -1 if sys.version_info >= (3, 7) else object()  # socket()'s omitted argument (3.7+: -1)
SSIZE_MAX = 2 ** 63 - 1
MAX_TIMEOUT = 9.2e9  # seconds: beyond it CPython's _PyTime_t (int64 ns) overflows

# PyArg's words for a non-integer where a C int is wanted: 2.7's and 3.x's differ.
_NOT_AN_INTEGER = ("'%s' object cannot be interpreted as an integer" if sys.version_info[0] >= 3
                   else "an integer is required%.0s")  # 2.7 names no type: the %.0s drops it


def integer(value, who="", bounds=C_INT):
    """``value`` as a C int (PyArg "i"): TypeError for non-integers (bool is an int),
    OverflowError outside ``bounds``."""
    if type(value) is int and bounds[0] <= value <= bounds[1]:
        return value  # the common case, first: every recv and send checks its flags
    if not isinstance(value, INT_TYPES):
        raise TypeError(_NOT_AN_INTEGER % type(value).__name__)
    if not bounds[0] <= value <= bounds[1]:
        raise OverflowError("%sPython int too large to convert to C %s" % (
            who and who + ": ", "long" if bounds is C_LONG else "int"))
    return int(value)


def omitted(value):
    """socket()'s argument left out (3.7+: -1, what socket.py passes for it; before, -1 is EINVAL)."""
    return value is DEFAULT_ARG or (sys.version_info >= (3, 7) and isinstance(value, int) and value == -1)


def size(value):
    """A buffer size (PyArg "n", Py_ssize_t)."""
    return integer(value, "", (-SSIZE_MAX - 1, SSIZE_MAX))


def unsigned(x, bits, who):
    """An unsigned C integer of ``bits`` bits (htons, htonl...), with CPython's messages."""
    if not isinstance(x, INT_TYPES):
        raise TypeError("expected int, %s found" % type(x).__name__)
    if x < 0:
        raise OverflowError("%s: can't convert negative Python int to C %d-bit unsigned integer" % (who, bits))
    if x >> bits:
        raise OverflowError("%s: Python int too large to convert to C %d-bit unsigned integer" % (who, bits))
    return int(x)


def seconds(value):
    """A timeout in seconds as CPython converts it: TypeError, ValueError for NaN,
    OverflowError when it does not fit; None stays None."""
    if value is None:
        return None
    if not isinstance(value, INT_TYPES + (float,)):
        try:
            value = float(value)  # objects with __float__ (Decimal, numpy)
        except (TypeError, ValueError, AttributeError):
            raise TypeError("Timeout value must be int, float or None")
    if value != value:
        raise ValueError("Invalid value NaN (not a number)")
    if abs(value) > MAX_TIMEOUT:
        raise OverflowError("timestamp too large to convert to C _PyTime_t")
    return float(value)


def text(value, who):
    """A text argument (PyArg "s"): str only (2.7: str or ASCII unicode), no NUL."""
    if sys.version_info[0] < 3 and isinstance(value, unicode):  # noqa: F821
        value = value.encode("ascii")
    if not isinstance(value, str):
        raise TypeError("%s must be str, not %s" % (who, type(value).__name__))
    if "\0" in value:
        raise ValueError("embedded null character")
    return value


def bytes_copy(value):
    """A bytes-like argument (PyArg "y*") as bytes: TypeError for str (3.x), ints and the like."""
    if isinstance(value, INT_TYPES) or (sys.version_info[0] >= 3 and isinstance(value, str)):
        raise TypeError("a bytes-like object is required, not '%s'" % type(value).__name__)
    return memoryview(value).tobytes()


# What PyArg "y*" refuses outright (the rest is left to memoryview()): ints, None, and on 3.x str.
_NOT_BYTES_LIKE = INT_TYPES + (type(None),) + ((str,) if sys.version_info[0] >= 3 else ())


def bytes_view(value):
    """Data to send (PyArg "y*"): the object itself if it is bytes-like, else TypeError."""
    if isinstance(value, _NOT_BYTES_LIKE):
        raise TypeError("a bytes-like object is required, not '%s'" % type(value).__name__)
    return value


def send_buffer(data):
    """Data to send as (object, byte-wise memoryview of it); an object that is not byte-wise
    (array('i'), a 2-D view) is copied to bytes first, as CPython counts bytes, not items."""
    if isinstance(data, _NOT_BYTES_LIKE):
        bytes_view(data)  # raises the TypeError
    try:
        view = memoryview(data)
    except TypeError:
        if sys.version_info[0] >= 3:  # CPython's "y*" message, not memoryview()'s
            raise TypeError("a bytes-like object is required, not '%s'" % type(data).__name__)
        data = old_buffer_bytes(data)
        view = memoryview(data)
    if not getattr(view, "c_contiguous", True):  # (2.7's memoryview has none that is not)
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    if view.ndim != 1 or view.itemsize != 1:
        data = view.tobytes()
        view = memoryview(data)
    return data, view


def old_buffer_bytes(data):
    """2.7: what CPython 2.7's "s*" takes besides the new buffer protocol -- ASCII unicode
    (the default encoding), buffer, array.array, mmap (old-style buffers) -- as a str."""
    if isinstance(data, unicode):  # type: ignore[name-defined]  # noqa: F821
        return data.encode("ascii")  # UnicodeEncodeError for other text, as CPython 2.7
    try:
        return str(buffer(data))  # type: ignore[name-defined]  # noqa: F821
    except TypeError:
        raise TypeError("must be string or buffer, not %s" % type(data).__name__)


def old_writable_view(target):
    """2.7: a writable byte-wise memoryview of an old-style writable buffer (array.array...),
    as CPython 2.7's "w*" takes it; TypeError if it has none."""
    import ctypes
    try:
        size = len(buffer(target))  # type: ignore[name-defined]  # noqa: F821
        return memoryview((ctypes.c_char * size).from_buffer(target))  # keeps ``target`` alive
    except (TypeError, ValueError):
        raise TypeError("argument 1 must be read-write buffer, not %s" % type(target).__name__)


def writable_buffer(buffer, nbytes, who):
    """(the buffer to write into, how many bytes): CPython's checks of recv_into's
    arguments (PyArg "w*" and "n"); on 2.7 an old-style buffer (array.array) becomes a
    memoryview of it."""
    if isinstance(buffer, INT_TYPES) or buffer is None or \
            (sys.version_info[0] >= 3 and isinstance(buffer, str)):
        raise TypeError("%s() argument 'buffer' must be read-write bytes-like object, not %s"
                        % (who, type(buffer).__name__))
    try:
        view = memoryview(buffer)
    except TypeError:
        if sys.version_info[0] >= 3:
            raise
        view = buffer = old_writable_view(buffer)  # 2.7: array.array and other old buffers
    if view.readonly or not getattr(view, "c_contiguous", True):  # "w*" wants a contiguous buffer
        raise TypeError("%s() argument 'buffer' must be read-write bytes-like object, not %s"
                        % (who, type(buffer).__name__))
    nbytes = size(nbytes)
    if nbytes < 0:
        raise ValueError("negative buffersize in %s" % who)
    available = len(view) * view.itemsize
    if nbytes == 0:
        return buffer, available
    if nbytes > available:
        raise ValueError("buffer too small for requested bytes")
    return buffer, nbytes
