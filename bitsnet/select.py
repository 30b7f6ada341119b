"""The drop-in ``select``: ``select()`` and ``poll()`` over bitsnet's sockets.

``select(rlist, wlist, xlist[, timeout])`` and ``poll()`` objects (``register``, ``modify``,
``unregister``, ``poll([ms])``) with CPython's semantics, so that SocketServer/socketserver,
asyncore and ``selectors`` (which then picks ``PollSelector`` as ``DefaultSelector``) work. There
is deliberately no ``epoll``, ``kqueue`` or ``devpoll``.

Arguments are socket objects (anything with ``fileno()``) or the integers ``fileno()`` gave;
both are looked up in ``_socket``'s fd table (never handed to an OS). Readiness comes only from
the endpoint predicates (``can_recv``, ``can_send``, ``acceptable``...), evaluated in one wait
loop: ``events.wait_until(ready, deadline, poll=<one endpoint's progress() per round>)``.

Side effect worth knowing: asking whether a socket is readable keeps one EFI Receive (or, for
a listening socket, one Accept) outstanding on it -- that is how arriving data is noticed at
all. The data is held in the socket's receive buffer until ``recv`` takes it.

``select`` is an instance of a class, not a plain function: ``selectors.SelectSelector`` stores
it as a class attribute, where a function would become a method and receive ``self``.
"""

from __future__ import absolute_import

import errno as _errno
import math as _math
import sys as _sys

from bitsnet import _socket
from bitsnet import clock as _clock
from bitsnet import errors as _errors
from bitsnet import events as _events
from bitsnet import pyarg as _pyarg

if _sys.version_info[0] >= 3:
    error = OSError
else:
    class error(Exception):  # type: ignore[no-redef]
        """select.error: in 2.7 its own class, args (errno, message)."""

POLLIN = 0x001
POLLPRI = 0x002
POLLOUT = 0x004
POLLERR = 0x008
POLLHUP = 0x010
POLLNVAL = 0x020
POLLRDNORM = 0x040
POLLRDBAND = 0x080
POLLWRNORM = 0x100
POLLWRBAND = 0x200
POLLMSG = 0x400

_READABLE = POLLIN | POLLRDNORM
_WRITABLE = POLLOUT | POLLWRNORM
_ALWAYS = POLLERR | POLLHUP | POLLNVAL  # reported whether asked for or not, as by poll(2)


def _fd_of(obj):
    """An int fd, or an object's fileno(), as CPython's select checks it
    (PyObject_AsFileDescriptor): a bool is an int; the value must fit a C int -- OverflowError on
    3.x; on 2.7 the failed conversion's -1 meets the negative check -- and not be negative."""
    if isinstance(obj, _pyarg.INT_TYPES):
        fd = obj
    else:
        fileno = getattr(obj, "fileno", None)
        if fileno is None:
            raise TypeError("argument must be an int, or have a fileno() method.")
        fd = fileno()
        if not isinstance(fd, _pyarg.INT_TYPES):
            raise TypeError("fileno() returned a non-integer")
    if not _pyarg.C_INT[0] <= fd <= _pyarg.C_INT[1]:
        if _sys.version_info[0] >= 3:
            raise OverflowError("Python int too large to convert to C int")
        fd = -1
    if fd < 0:
        raise ValueError("file descriptor cannot be a negative integer (%d)" % fd)
    return int(fd)


def _bad_fd():
    return error(_errno.EBADF, "Bad file descriptor")


def _events_of(descriptor, wanted=_READABLE | _WRITABLE):
    """poll(2)-style event bits for the socket ``descriptor`` names, right now. Only the
    predicates ``wanted`` needs are asked (poll() asks this of every socket on every round);
    the _ALWAYS bits are reported regardless."""
    endpoint = descriptor.endpoint
    if endpoint.listening:
        return _READABLE if wanted & _READABLE and endpoint.acceptable() else 0
    if endpoint.connecting:
        return 0
    # Linux (tcp_poll, datagram_poll): POLLERR while an error is pending, until SO_ERROR (or
    # the recv/send that raises it) takes it.
    mask = POLLERR if endpoint.has_error() else 0
    if wanted & _READABLE and (endpoint.read_shut or endpoint.can_recv()):
        mask |= _READABLE
    if endpoint.connected:
        if wanted & _WRITABLE and endpoint.can_send():
            mask |= _WRITABLE
        if endpoint.hung_up():
            mask |= POLLHUP  # reset: still "connected" until recv/send report it
    elif descriptor.type == _socket.SOCK_STREAM and endpoint.never_connected:
        # Linux tcp_poll on a TCP socket that never connected (TCP_CLOSE, nothing shut down):
        # POLLOUT|POLLHUP, not POLLIN (select() still calls it readable: POLLHUP counts there).
        mask = (mask & ~_READABLE) | _WRITABLE | POLLHUP
    else:
        # Failed, reset or closed: recv and send return at once (EOF or the error), so the
        # socket is readable and writable, and hung up -- as Linux reports it.
        mask |= _READABLE | _WRITABLE | POLLHUP
    if mask & POLLERR and descriptor.type == _socket.SOCK_DGRAM and not endpoint.read_shut \
            and not endpoint.pending():
        # Linux datagram_poll: an error alone is POLLERR, not POLLIN (can_recv() counts it, as
        # recv returns at once with it -- and select() reports such a socket readable).
        mask &= ~_READABLE
    return mask


def _readable(descriptor):
    """select()'s read test: ``_events_of(descriptor) & (_READABLE | POLLHUP)``, with one
    predicate instead of four -- select() asks this of every socket on every round. The same
    answer, because ``can_recv()`` is already True for a socket that is not connected (never
    connected, failed, reset, closed: recv returns at once), is what ``acceptable()`` adds up
    to for a listener, and is False while connecting."""
    endpoint = descriptor.endpoint
    return endpoint.read_shut or endpoint.can_recv()


def _writable(descriptor):
    """select()'s write test: ``_events_of(descriptor) & _WRITABLE``, likewise: ``can_send()``
    is True for a socket that is not connected and False while connecting; a listener is
    never writable."""
    endpoint = descriptor.endpoint
    return not endpoint.listening and endpoint.can_send()


class _Waiter(object):
    """One wait over a set of fds: the endpoints to Poll, and what to check each round."""

    def __init__(self, fds):
        self.descriptors = {}
        for fd in fds:
            descriptor = _socket.lookup(fd)
            if descriptor is not None:
                self.descriptors[fd] = descriptor
        endpoints = {}
        for descriptor in self.descriptors.values():
            endpoints[id(descriptor.endpoint)] = descriptor.endpoint
        self.endpoints = list(endpoints.values())
        self._turn = 0

    def progress(self):
        # One Poll per round, through one endpoint in turn: EDK2's Poll pulls the NIC's next
        # frame whichever child it is called on (docs/edk2.md section 3.3 Poll: the children share IP, MNP and
        # SNP), so Polling every endpoint would cost O(sockets) EFI calls per round, for nothing
        # when they are idle. progress() (stack.pump) consumes the completions of every
        # endpoint (stack.dirty), and the readiness predicates consume their own, so the
        # others lose nothing by not being Polled themselves.
        if self.endpoints:
            self.endpoints[self._turn % len(self.endpoints)].progress()
            self._turn += 1

    def wait(self, ready, timeout):
        """Poll once, then wait until ``ready()`` or ``timeout`` seconds."""
        self.progress()
        deadline = None if timeout is None else _clock.monotonic() + timeout
        return _events.wait_until(ready, deadline, poll=self.progress)


_MAX_SECONDS = 9.2e9  # CPython's _PyTime_t (int64 nanoseconds) limit


def _finite(value, scale):
    """``value`` (a number) as a float, with CPython's NaN and overflow errors."""
    seconds = float(value)
    if seconds != seconds:
        raise ValueError("Invalid value NaN (not a number)")
    if abs(seconds) / scale > _MAX_SECONDS:
        raise OverflowError("timeout is too large")
    return seconds


def _timeout_seconds(timeout):
    if timeout is None:
        return None
    if not isinstance(timeout, (int, float)):
        try:
            timeout = float(timeout)
        except (TypeError, ValueError, AttributeError):
            raise TypeError("timeout must be a float or None")
    seconds = _finite(timeout, 1.0)
    if seconds < 0:
        if _sys.version_info[0] >= 3:
            raise ValueError("timeout must be non-negative")
        raise error(_errno.EINVAL, "Invalid argument")
    return seconds


class _Select(object):
    """select(rlist, wlist, xlist[, timeout]) -> (rlist, wlist, xlist)

    Wait until one or more sockets are ready for some kind of I/O.
    The first three arguments are iterables of sockets (or their fileno() integers):
    rlist -- wait until ready for reading
    wlist -- wait until ready for writing
    xlist -- wait for an "exceptional condition" (TCP urgent data: never, over EFI)
    The optional 4th argument is a timeout in seconds (a float); None or absent waits for
    ever, 0 only polls. Returns the subsets of the three arguments that are ready."""

    def __call__(self, rlist, wlist, xlist, timeout=None):
        seconds = _timeout_seconds(timeout)
        lists = [[(obj, _fd_of(obj)) for obj in each] for each in (rlist, wlist, xlist)]
        waiter = _Waiter(fd for each in lists for _, fd in each)
        for each in lists:
            for _, fd in each:
                if fd not in waiter.descriptors:
                    if fd >= _socket.FD_SETSIZE:  # CPython checks the range before select(2) runs
                        raise ValueError("filedescriptor out of range in select()")
                    raise _bad_fd()
        result = [[], [], []]
        descriptors = waiter.descriptors

        def ready():
            result[0] = [obj for obj, fd in lists[0] if _readable(descriptors[fd])]
            result[1] = [obj for obj, fd in lists[1] if _writable(descriptors[fd])]
            return bool(result[0] or result[1])

        _wait_ready(waiter, ready, seconds)
        return result[0], result[1], []

    def __repr__(self):
        return "<built-in function select>"


select = _Select()


def _event_mask(eventmask):
    """A poll event mask (C unsigned short), with CPython's errors."""
    if not isinstance(eventmask, _socket._INT_TYPES):
        raise TypeError("'%s' object cannot be interpreted as an integer" % type(eventmask).__name__)
    if eventmask < 0:
        raise ValueError("value must be positive")
    if eventmask > 0xffff:
        raise OverflowError("Python int too large for C unsigned short")
    return eventmask


def _wait_ready(waiter, ready, seconds):
    """select() and poll.poll()'s wait, behind the socket module's boundary (below)."""
    waiter.wait(ready, seconds)


# One thread at a time, and EFI errors as socket errors, as for every socket entry point.
_wait_ready = _errors.efi_boundary(_wait_ready, _socket._enter, _socket._leave)


class poll(object):
    """poll() -> a polling object: register(fd[, eventmask]), modify(fd, eventmask),
    unregister(fd), poll([timeout]) with the timeout in milliseconds."""

    def __init__(self):
        self._registered = {}  # fd -> eventmask

    def register(self, fd, eventmask=POLLIN | POLLPRI | POLLOUT):
        """register(fd[, eventmask]): watch fd (a socket or its fileno()) for eventmask."""
        fd = _fd_of(fd)
        self._registered[fd] = _event_mask(eventmask)

    def modify(self, fd, eventmask):
        """modify(fd, eventmask): change the events watched for a registered fd."""
        fd = _fd_of(fd)
        eventmask = _event_mask(eventmask)
        if fd not in self._registered:
            raise error(_errno.ENOENT, "No such file or directory")
        self._registered[fd] = eventmask

    def unregister(self, fd):
        """unregister(fd): stop watching fd."""
        fd = _fd_of(fd)
        if fd not in self._registered:
            raise KeyError(fd)
        del self._registered[fd]

    def poll(self, timeout=None):
        """poll([timeout]) -> list of (fd, event) pairs; timeout in milliseconds, None or
        negative waits for ever."""
        if timeout is not None:
            if not isinstance(timeout, (int, float)):
                try:
                    timeout = float(timeout)
                except (TypeError, ValueError, AttributeError):
                    raise TypeError("timeout must be an integer or None")
            milliseconds = _finite(timeout, 1000.0)
            timeout = None if milliseconds < 0 else _math.ceil(milliseconds) / 1000.0
        registered = list(self._registered.items())
        waiter = _Waiter(fd for fd, _ in registered)
        result = []  # type: list

        def ready():
            del result[:]
            for fd, wanted in registered:
                descriptor = waiter.descriptors.get(fd)
                if descriptor is None or _socket.lookup(fd) is not descriptor:
                    result.append((fd, POLLNVAL))
                    continue
                revents = _events_of(descriptor, wanted) & (wanted | _ALWAYS)
                if revents:
                    result.append((fd, revents))
            return bool(result)

        _wait_ready(waiter, ready, timeout)
        return list(result)
