"""The interpreter's own ``ssl`` over bitsnet sockets, on a Python that has ``_ssl`` (a host).

BITS's Python has no ``_ssl``: there ``bitsnet.install()`` makes ``bitsnet.ssl`` (the firmware's
TLS) the ``ssl`` module. A Python that has its own ``ssl`` -- the simulator's machine run with the
host's standard library, or a program on a host that installs bitsnet -- keeps it, with all it
offers (server side, client certificates, TLS 1.3). But the C ``_ssl`` reads and writes a C
``_socket.socket`` itself, and refuses anything else (``_wrap_socket() argument 1 must be
_socket.socket``). This module gives ``SSLContext._wrap_socket`` a second way for a bitsnet
socket: the C TLS object is made over one end of a host socket pair, which serves as its memory
buffer (Python 2.7's ``ssl`` has no ``MemoryBIO``), and ``TlsBridge`` moves the records between
the other end and the bitsnet socket whenever the TLS object wants to read or has written.

Timing is the bitsnet socket's, as the C object's is its socket's: a blocking socket waits, one
with a timeout raises ``socket.timeout`` ("The read operation timed out"...), a non-blocking one
raises ``SSLWantReadError``/``SSLWantWriteError``. Records are taken from the bitsnet socket one
at a time (the 5-byte header says the length), as OpenSSL reads its socket without read-ahead:
a record not yet decrypted stays in the bitsnet socket, so select() on it tells the truth.
"""

from __future__ import absolute_import

import errno
import struct

_RECORD_HEADER = 5  # TLS record: type (1), version (2), length (2), RFC 5246 section 6.2.1
_MAX_OUT = 1 << 16  # encrypted bytes held here for a non-blocking socket before SSLWantWriteError
_ORIGINAL = "_bitsnet_original_wrap_socket"


def patch(ssl_module, host_socket_module):
    """Let ``ssl_module.SSLContext`` wrap bitsnet sockets (idempotent). ``host_socket_module``
    is the interpreter's C ``_socket``, for the socket pairs."""
    context_class = ssl_module.SSLContext
    if getattr(context_class, _ORIGINAL, None) is not None:
        return
    from bitsnet import _socket as bitsnet_socket
    original = context_class._wrap_socket

    def _wrap_socket(self, sock, server_side, server_hostname=None, **kwargs):
        if not isinstance(sock, bitsnet_socket.socket):
            return original(self, sock, server_side, server_hostname, **kwargs)
        return TlsBridge(ssl_module, host_socket_module, original, self, sock, server_side, server_hostname,
                         kwargs)
    _wrap_socket.__doc__ = original.__doc__
    setattr(context_class, _ORIGINAL, original)
    context_class._wrap_socket = _wrap_socket


_PAIR_CLASS = []  # type: list


def _raw_socket():
    """bitsnet's socket class: its recv/send, not those of the SSLSocket built on it (3.x)."""
    from bitsnet import _socket as bitsnet_socket
    return bitsnet_socket.socket


def _weak_referable(host_socket_module):
    """A subclass of the C socket type (a Python subclass can be weakly referenced)."""
    if not _PAIR_CLASS:
        _PAIR_CLASS.append(type("socket", (host_socket_module.socket,), {"__slots__": ("__weakref__",)}))
    return _PAIR_CLASS[0]


_MIXED = {}  # type: dict   # an SSLError class -> the same class, also bitsnet's socket.error


def _ssl_error_str(self):
    # The C SSLError's own str(): its message alone, without "[Errno N]".
    if self.strerror is not None:
        return "%s" % (self.strerror,)
    return Exception.__str__(self)


def _as_socket_error(exc):
    """Python 2.7: the C ``_ssl``'s errors derive from the C ``socket.error``, not from bitsnet's,
    and code catches ``socket.error`` (urllib2 turns it into URLError). The same error, raised as
    a class that is both."""
    from bitsnet import _socket as bitsnet_socket
    if isinstance(exc, bitsnet_socket.error):
        return exc
    cls = exc.__class__
    mixed = _MIXED.get(cls)
    if mixed is None:
        mixed = _MIXED[cls] = type(cls.__name__, (cls, bitsnet_socket.error),
                                   {"__module__": cls.__module__, "__str__": _ssl_error_str})
    twin = mixed(*exc.args)
    twin.__dict__.update(getattr(exc, "__dict__", {}))
    for name in ("reason", "library", "verify_code", "verify_message"):
        if hasattr(exc, name):
            try:
                setattr(twin, name, getattr(exc, name))
            except AttributeError:
                pass
    return twin


class TlsBridge(object):
    """Stands where the C ``_SSLSocket`` stands (``SSLSocket._sslobj``): the C object made over a
    socket pair, each call run until it no longer waits for the wire."""

    def __init__(self, ssl_module, host_socket_module, original, context, sock, server_side, server_hostname,
                 kwargs):
        self.__dict__["_ssl"] = ssl_module
        self.__dict__["_sock"] = sock  # the bitsnet socket (3.x: the SSLSocket; 2.7: its _sock)
        self.__dict__["_owner"] = kwargs.get("owner") or kwargs.get("ssl_sock") or sock
        inner, outer = host_socket_module.socketpair()
        if hasattr(inner, "detach"):  # 3.x: the C object keeps a weak reference to its socket
            inner = _weak_referable(host_socket_module)(inner.family, inner.type, inner.proto, inner.detach())
        inner.setblocking(False)
        outer.setblocking(False)
        self.__dict__["_pair"] = (inner, outer)
        self.__dict__["_out"] = b""  # encrypted bytes not yet taken by a non-blocking bitsnet socket
        self.__dict__["_head"] = b""  # the current record's header as far as it came
        self.__dict__["_body"] = 0  # bytes of the current record's body still to come
        self.__dict__["_eof"] = False
        try:
            obj = original(context, inner, server_side, server_hostname, **kwargs)
        except Exception:
            self.close()
            raise
        self.__dict__["_obj"] = obj

    # --- what SSLSocket calls -----------------------------------------------------------------
    def do_handshake(self):
        return self._run("handshake", self._obj.do_handshake)

    def read(self, *args):
        return self._run("read", self._obj.read, *args)

    def write(self, data):
        if len(self._out) >= _MAX_OUT:
            self._flush()
            if len(self._out) >= _MAX_OUT:
                raise self._ssl.SSLWantWriteError(self._ssl.SSL_ERROR_WANT_WRITE,
                                                  "The operation did not complete (write)")
        return self._run("write", self._obj.write, data)

    def shutdown(self):
        self._run("shutdown", self._obj.shutdown)
        return self._owner  # the C object returns the socket it was given: here, the bitsnet one

    def __getattr__(self, name):
        return getattr(self.__dict__["_obj"], name)

    def __setattr__(self, name, value):  # context, session, owner: the C object's attributes
        setattr(self._obj, name, value)

    def __del__(self):
        self.close()

    def close(self):
        for end in self.__dict__.get("_pair", ()):
            end.close()

    # --- moving records -----------------------------------------------------------------------
    def _run(self, what, call, *args):
        ssl = self._ssl
        while True:
            try:
                result = call(*args)
            except ssl.SSLWantReadError:
                self._flush()
                if not self._feed(what):
                    raise
                continue
            except ssl.SSLWantWriteError:
                if not self._flush():
                    raise
                continue
            except ssl.SSLError as exc:
                self._flush(quiet=True)  # an alert for the peer, as the C object would have sent it
                raise _as_socket_error(exc)
            self._flush()
            return result

    def _flush(self, quiet=False):
        """Send what the C object wrote to its end; False if a non-blocking socket kept some."""
        outer = self._pair[1]
        while True:
            try:
                chunk = outer.recv(65536)
            except (IOError, OSError):  # EAGAIN: nothing more
                break
            if not chunk:
                break
            self.__dict__["_out"] += chunk
        while self._out:
            try:
                sent = _raw_socket().send(self._sock, self._out)
            except Exception as exc:
                if quiet:  # an alert after a failure: best effort, the failure is what counts
                    self.__dict__["_out"] = b""
                    return True
                if getattr(exc, "errno", None) in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return False
                raise self._timed_out(exc, "write")
            self.__dict__["_out"] = self._out[sent:]
        return True

    def _feed(self, what):
        """Give the C object the next piece of the wire's bytes, never past the end of the record
        it is reading; False if a non-blocking socket has none yet."""
        if self._eof:
            return False
        head = self._head
        want = _RECORD_HEADER - len(head) if len(head) < _RECORD_HEADER else self._body
        try:
            data = _raw_socket().recv(self._sock, want)
        except Exception as exc:
            if getattr(exc, "errno", None) in (errno.EAGAIN, errno.EWOULDBLOCK):
                return False
            raise self._timed_out(exc, what)
        outer = self._pair[1]
        if not data:
            self.__dict__["_eof"] = True
            outer.shutdown(1)  # SHUT_WR: the C object reads end of file
            return True
        outer.sendall(data)
        if len(head) < _RECORD_HEADER:
            head += data
            if len(head) == _RECORD_HEADER:
                self.__dict__["_body"] = struct.unpack("!H", head[3:5])[0]
        else:
            self.__dict__["_body"] -= len(data)
        if len(head) == _RECORD_HEADER and self._body == 0:
            head = b""
        self.__dict__["_head"] = head
        return True

    def _timed_out(self, exc, what):
        """The C object's message for a socket timeout; any other error as it is."""
        from bitsnet import _socket as bitsnet_socket
        if isinstance(exc, bitsnet_socket.timeout):
            return bitsnet_socket.timeout("The %s operation timed out" % what)
        return exc
