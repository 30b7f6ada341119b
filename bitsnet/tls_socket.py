"""SSLSocket: a bitsnet TCP socket with TLS through the firmware (bitsnet.tls), for bitsnet.ssl.

``wrap(context, sock, ...)`` (SSLContext.wrap_socket) builds, once per socket class, a class
that mixes ``SSLSocket`` into the socket's own class -- 3.x's ``socket.socket``, 2.7's wrapper,
or bitsnet's ``_socket.socket`` -- so the result is still a socket for ``isinstance``,
``makefile`` and ``select``, takes over the fd, and routes recv/send through the TLS session.
Raw TLS records go through the base class's own recv/send (``_Transport``). While TLS runs,
the fd's endpoint is a ``TlsEndpoint`` over the TCP one, so that select()/poll() count decrypted
data waiting in the TLS layer as readable.

Imported by bitsnet.ssl (it names ``SSLSocket``); the API's constants and exceptions come from
bitsnet.ssl_common, the leaf both share.
"""

from __future__ import absolute_import

import errno as _errno
import weakref

try:
    from typing import Any  # noqa: F401  (type comments; BITS has no typing)
except ImportError:
    pass

from bitsnet import _socket as _bitsnet_socket
from bitsnet import clock
from bitsnet import efidefs_tls as T
from bitsnet import endpoint as _endpoint
from bitsnet import ssl_common as _api
from bitsnet import tls as _tls

_classes = {}  # type: dict   # socket class -> the SSLSocket class built over it
_NO_CHECK_TIME = 0x200000  # OpenSSL's X509_V_FLAG_NO_CHECK_TIME (CPython's ssl has no name for it)


class ServerHostnameError(ValueError, TypeError):
    """A server_hostname the firmware cannot take as it is: with a NUL the firmware would check the
    name cut at the NUL (CHAR8 string). CPython raises TypeError for the NUL ("encoded string
    without null bytes") and ValueError for an empty or dotted name; this is both."""


def _check_server_hostname(name):
    if name is None:
        return
    text = name.decode("latin-1") if isinstance(name, bytes) and not isinstance(name, str) else name
    if "\0" in text:
        raise ServerHostnameError("server_hostname must not contain a NUL character: %r" % (name,))
    if not text or text.startswith("."):
        raise ServerHostnameError("server_hostname cannot be an empty string or start with a leading dot.")


def wrap(context, sock, server_hostname, do_handshake_on_connect, suppress_ragged_eofs):
    _check_server_hostname(server_hostname)
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

    def __init__(self, recv, send, timeouts):
        self._recv, self._send = recv, send
        self._gettimeout, self._settimeout = timeouts
        self.deadline = None  # clock.monotonic() by which the handshake must be done, or None

    def recv(self, n):
        if self.deadline is None:
            return self._recv_once(n)
        # The socket's timeout bounds the whole handshake, as in CPython 3.5+: a server trickling
        # records (HelloRequest after HelloRequest) each within the timeout must not keep it going.
        timeout = self._gettimeout()
        remaining = self.deadline - clock.monotonic()
        if remaining <= 0:
            raise _bitsnet_socket.timeout("The handshake operation timed out")
        self._settimeout(min(timeout, remaining) if timeout else remaining)
        try:
            return self._recv_once(n)
        except _bitsnet_socket.timeout:
            raise _bitsnet_socket.timeout("The handshake operation timed out")
        finally:
            self._settimeout(timeout)

    def _recv_once(self, n):
        try:
            return self._recv(n)
        except _api.socket_error as exc:
            if getattr(exc, "errno", None) in (_errno.EAGAIN, getattr(_errno, "EWOULDBLOCK", _errno.EAGAIN)) \
                    and not isinstance(exc, _bitsnet_socket.timeout):
                raise _tls.WouldBlock(False)
            raise

    def send(self, data):
        try:
            return self._send(data)
        except _api.socket_error as exc:
            if getattr(exc, "errno", None) in (_errno.EAGAIN, getattr(_errno, "EWOULDBLOCK", _errno.EAGAIN)) \
                    and not isinstance(exc, _bitsnet_socket.timeout):
                raise _tls.WouldBlock(True)
            raise


class TlsEndpoint(_endpoint.StreamEndpoint):
    """The fd's endpoint while TLS runs over a TCP one: that endpoint, readable also when the TLS
    layer holds decrypted data or a whole received record (CPython's ssl leaves that to the
    caller's pending(); here select() and selectors just work). Every other member of the
    interface is the TCP endpoint's own (``_forward`` below)."""

    __slots__ = ("inner", "session")
    # Not the TCP endpoint's: the socket layer's fast paths would read around the TLS layer's
    # own readiness (can_recv above); the generic way asks it.
    plain_stream = False

    def __init__(self, inner, session):
        self.inner = inner  # the TCP endpoint, back in the fd table when TLS ends (unwrap, close)
        self.session = session

    def can_recv(self):
        session = self.session
        return bool(session.plain) or session.buffered_record() or session.eof or self.inner.can_recv()


def _forward(name, member):
    """A member of the interface that is the TCP endpoint's as it is."""
    if isinstance(member, property):
        return property(lambda self: getattr(self.inner, name), doc=member.__doc__)

    def method(self, *args, **kwargs):
        return getattr(self.inner, name)(*args, **kwargs)
    method.__name__, method.__doc__ = name, member.__doc__
    return method


for _interface in (_endpoint.Endpoint, _endpoint.StreamEndpoint):
    for _name, _member in sorted(vars(_interface).items()):
        if not _name.startswith("_") and _name not in vars(TlsEndpoint):
            setattr(TlsEndpoint, _name, _forward(_name, _member))


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
            transport = _Transport(rawsock.recv, rawsock.send, (rawsock.gettimeout, rawsock.settimeout))
        else:  # 3.x's socket.socket, or a bitsnet socket itself: take over its fd
            self = cls.__new__(cls)
            base.__init__(self, sock.family, sock.type, sock.proto, fileno=sock.detach())
            # Through a weak reference: a cycle through __del__ would never be collected on 2.7.
            owner = weakref.ref(self)
            transport = _Transport(lambda n: base.recv(owner(), n), lambda data: base.send(owner(), data),
                                   (lambda: base.gettimeout(owner()), lambda value: base.settimeout(owner(), value)))
        self._makefile_refs = 0
        self._cas_checked = self._host_checked = False  # the Python-side checks, done once a session
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
            except _api.socket_error:
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
        if descriptor is not None and not isinstance(descriptor.endpoint, TlsEndpoint):
            self._endpoint_hook = (descriptor, descriptor.endpoint)
            descriptor.endpoint = TlsEndpoint(descriptor.endpoint, self._session)

    def _unhook_select(self):
        hook, self._endpoint_hook = self._endpoint_hook, None
        if hook is not None and isinstance(hook[0].endpoint, TlsEndpoint):
            hook[0].endpoint = hook[1]

    def _teardown(self):
        """Forget the TLS child (DestroyChild) and the select() hook; the TCP socket stays."""
        self._unhook_select()
        session, self._session = self._session, None
        if session is not None:
            session.child.destroy()

    def _call(self, func, *args):
        """Run a session step, turning tls failures into SSLError (and waits into SSLWant*Error)."""
        try:
            return func(*args)
        except _tls.WouldBlock as block:
            if block.writing:
                raise _api._ssl_error(_api.SSLWantWriteError, _api.SSL_ERROR_WANT_WRITE, None,
                                      "The operation did not complete (write)")
            raise _api._ssl_error(_api.SSLWantReadError, _api.SSL_ERROR_WANT_READ, None,
                                  "The operation did not complete (read)")
        except _tls.TlsFailure as failure:
            raise _api._from_failure(failure, self._context)

    def _live_session(self):
        if self._session is None:
            raise _api.socket_error(_errno.EBADF, "Bad file descriptor" if self._closed_tls
                               else "the TLS session is gone (unwrapped or failed)")
        return self._session

    # -- handshake
    @property
    def context(self):
        return self._context

    def do_handshake(self, block=False):
        session = self._live_session()
        timeout = self.gettimeout()
        deadline = clock.monotonic() + timeout if timeout else None
        if not session.established:
            self._transport.deadline = deadline
        try:
            self._call(session.handshake)
        finally:
            self._transport.deadline = None
        if self._context.verify_mode != _api.CERT_NONE and not self._cas_checked:
            self._check_context_cas(session, deadline)
        if self._check_in_python and self._context.check_hostname and not self._host_checked:
            self._check_host_in_python(session)

    def _check_context_cas(self, session, deadline):
        """EDK2 quirk (docs/tls.md section 2.3): the firmware trusts every CA given in this boot, not just
        this context's. Verify the chain the server sent (readable in TLS 1.2) in Python, signature by
        signature, up to one of this context's own CAs (bitsnet.x509verify, docs/tls.md section 2.7), as
        CPython's ssl would; validity periods against the firmware's RTC, which the firmware's own
        check ignores (EDK2 quirk: TlsNew sets X509_V_FLAG_NO_CHECK_TIME, docs/tls.md section 2.6)."""
        from bitsnet import tls_x509, x509verify
        cas = self._context._cadata
        chain = tls_x509.server_certificates(bytes(session.handshake_messages))
        self._cas_checked = True
        if not cas:
            why = "this SSLContext gave the firmware no CA certificate, so the server's certificate cannot be checked"
        elif not chain:
            why = "the server's certificate was not readable in the handshake, so it cannot be checked against " \
                  "this SSLContext's CAs"
        else:
            give_up = None if deadline is None else (lambda: clock.monotonic() > deadline)
            # OpenSSL's X509_V_FLAG_NO_CHECK_TIME in verify_flags turns the date check off, as it
            # would in CPython: for a board whose RTC is wrong.
            now = None if self._context.verify_flags & _NO_CHECK_TIME else clock.rtc_utc()
            try:
                x509verify.verify_chain(chain, cas, now, give_up)
                return
            except x509verify.VerifyTimeout:
                self._teardown()
                raise _bitsnet_socket.timeout("The handshake operation timed out")
            except x509verify.VerifyError as exc:
                why = str(exc)
            except Exception as exc:  # a certificate this reader trips over: refused, never let through
                why = "the server's chain could not be checked (%s: %s)" % (type(exc).__name__, exc)
        self._teardown()
        cls = _api.SSLCertVerificationError if _api._PY3 else _api.SSLError
        # X509_V_ERR_CERT_HAS_EXPIRED, _CERT_NOT_YET_VALID, _UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        code = 10 if "has expired" in why else 9 if "not valid yet" in why else 20
        because = "the firmware's own check ignores validity periods, docs/tls.md section 2.6" if code != 20 else \
            "the firmware's own check trusts every CA given in this boot, docs/tls.md section 2.3"
        error = _api._ssl_error(cls, _api.SSL_ERROR_SSL, "CERTIFICATE_VERIFY_FAILED",
                                "certificate verify failed: %s (checked by bitsnet: %s)" % (why, because))
        error.verify_message = why
        error.verify_code = code
        raise error

    def _check_host_in_python(self, session):
        """EDK2 quirk: EDK2 before 2020 has no EfiTlsVerifyHost: check the name here (docs/tls.md
        section 2.4)."""
        from bitsnet import tls_x509
        der = tls_x509.server_certificate(bytes(session.handshake_messages))
        if der is None:
            self._teardown()
            cls = _api.SSLCertVerificationError if _api._PY3 else _api.SSLError
            raise _api._ssl_error(cls, _api.SSL_ERROR_SSL, "CERTIFICATE_VERIFY_FAILED",
                                  "cannot check the host name: this firmware's TLS has no EfiTlsVerifyHost and the "
                                  "server's certificate was not readable in the handshake")
        try:
            _api.match_hostname(tls_x509.cert_dict(der), self.server_hostname)
        except (_api.CertificateError, _api.SSLError):
            self._teardown()
            raise
        self._host_checked = True

    def connect(self, address):
        self._connect_then_handshake(address)

    def connect_ex(self, address):
        try:
            self._connect_then_handshake(address)
        except _api.socket_error as exc:
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
                    raise _api._ssl_error(_api.SSLEOFError, _api.SSL_ERROR_EOF, "UNEXPECTED_EOF_WHILE_READING",
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
        return self.read(nbytes, view.cast("B") if _api._PY3 else view)

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
            self._call(session.flush)  # _api.SSLWantWriteError here: nothing of ``data`` was taken
        data = bytes(memoryview(data).tobytes()) if not isinstance(data, bytes) else data
        try:
            return self._call(session.write, data)
        except _api.SSLWantWriteError:
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
        if self._context.verify_mode == _api.CERT_NONE or der is None:
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
    """A TLS child set up as ``context`` says (docs/tls.md section 2): TLS 1.2, client, the verify
    method, the CAs, the host name; ``verifies_host`` tells whether the firmware checks it."""
    try:
        child = _tls.TlsChild()
    except _tls.TlsFailure as failure:
        raise _api._from_failure(failure, context)
    child.verifies_host = False
    try:
        version = T.EFI_TLS_VERSION()
        version.Major, version.Minor = 3, 3
        child.must_set(T.EfiTlsVersion, version)
        import efi
        child.must_set(T.EfiTlsConnectionEnd, efi.UINT32(T.EfiTlsClient))
        verify = T.EFI_TLS_VERIFY_NONE if context.verify_mode == _api.CERT_NONE else T.EFI_TLS_VERIFY_PEER
        child.must_set(T.EfiTlsVerifyMethod, efi.UINT32(verify))
        if verify != T.EFI_TLS_VERIFY_NONE:
            for der in context._cadata:
                child.add_ca(der)
            if context.check_hostname and server_hostname:
                child.verifies_host = child.set_verify_host(_host_bytes(server_hostname))
        child.must_set(T.EfiTlsSessionState, efi.UINT32(T.EfiTlsSessionNotStarted))
    except _tls.TlsFailure as failure:
        child.destroy()
        raise _api._from_failure(failure, context)
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
