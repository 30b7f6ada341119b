"""Python 2.7's ``socket._fileobject`` with a ``read()`` that copies each received byte once.

``sock.makefile().read()``, httplib's responses and urllib2's (both read through a
``_fileobject``) get the stdlib's ``read()`` semantics -- the ``_rbuf`` read-ahead that
``readline`` leaves, ``EINTR`` retried, ``size`` < 0 meaning up to EOF, data gathered so far lost
when ``recv`` raises, ``AttributeError`` on a closed file -- but gather the ``recv``ed chunks in
a list and join them once (a single chunk is returned as it is), instead of writing every chunk
into a growing ``cStringIO`` and copying it out again -- and, unbuffered (``makefile('rb', 0)``,
httplib's responses), a ``readline()`` that finds the line's end with ``recv(MSG_PEEK)`` and
takes exactly the line, instead of ``recv(1)`` per byte.  Everything else is the stdlib's class.

``install(socket)`` puts the class in the socket module, where ``socket.makefile`` and urllib2
look ``_fileobject`` up; ``bitsnet.install()`` calls it on Python 2.  Python 3's ``makefile``
is ``io.BufferedReader`` over ``SocketIO``: nothing to do there, ``install`` does nothing.
"""

import sys

# BITS quirk: memcpy is GRUB's byte-by-byte loop (realloc: malloc + copy + free), so every copy
# of the payload costs ~2 ns a byte under QEMU TCG; the stdlib's read() -- 8 KiB slices written
# into a cStringIO that grows by doubling, then getvalue() -- costs 15-18 ns a byte, ~20% of a
# download, and holds up to 3x the download in a heap of ~25 MiB (docs/performance.md section 6).

# recv size for read() up to EOF: the stdlib asks for 8 KiB at a time, which costs a recv call
# (and a slice of the received chunk) per 8 KiB; bitsnet hands a whole received chunk (up to one
# 64 KiB Receive) over uncopied when asked for at least that much.  Any size gives the same bytes.
READ_ALL_RECV = 64 * 1024
# Unbuffered readline (httplib reads a response's status line and headers through
# makefile('rb', 0)): the stdlib calls recv(1) for every byte, because reading ahead would take
# bytes that belong to whoever reads the socket next.  Peeking takes nothing: look at up to
# READLINE_PEEK buffered bytes, then recv exactly up to the newline -- two socket calls a line
# instead of one a byte (in real BITS a keep-alive HTTP request paid ~100 recv(1) calls,
# docs/performance.md section 7).  The same bytes are returned, and the same left unread.
READLINE_PEEK = 8192  # 0: the stdlib's recv(1) loop


def fileobject_class(socket_module):
    """A subclass of ``socket_module._fileobject`` whose ``read()`` joins once (see above)."""
    base = socket_module._fileobject
    if getattr(base, "_bitsnet", False):
        return base
    base_read = base.read
    StringIO = socket_module.StringIO
    error = socket_module.error
    EINTR = socket_module.EINTR
    MSG_PEEK = getattr(socket_module, "MSG_PEEK", None)
    base_readline = base.readline

    class _fileobject(base):
        __doc__ = base.__doc__
        __slots__ = ()
        _bitsnet = True

        def read(self, size=-1):
            buf = self._rbuf
            buf.seek(0, 2)  # seek end
            buffered = buf.tell()
            if 0 <= size <= buffered:
                return base_read(self, size)  # all of it from the read-ahead: no recv at all
            # As the stdlib: the read-ahead becomes the start of the result, and _rbuf is empty
            # from now on (so a recv error other than EINTR loses what was gathered).
            self._rbuf = StringIO()
            chunks = [buf.getvalue()] if buffered else []
            del buf
            if size < 0:
                rbufsize = max(self._rbufsize, READ_ALL_RECV)
                while True:
                    data = self._recv(rbufsize)
                    if not data:
                        break
                    chunks.append(data)
            else:
                left = size - buffered
                while left:
                    data = self._recv(left)
                    if not data:
                        break
                    n = len(data)
                    assert n <= left, "recv(%d) returned %d bytes" % (left, n)
                    chunks.append(data)
                    left -= n
            if len(chunks) == 1 and type(chunks[0]) is str:
                return chunks[0]
            return "".join(chunks)

        def readline(self, size=-1):
            if self._rbufsize != 1 or not size or MSG_PEEK is None or not READLINE_PEEK:
                return base_readline(self, size)
            buf = self._rbuf
            buf.seek(0, 2)
            if buf.tell():
                return base_readline(self, size)  # a read-ahead left by another call: the stdlib's way
            pieces = []
            got = 0
            while size < 0 or got < size:
                want = READLINE_PEEK if size < 0 else min(size - got, READLINE_PEEK)
                while True:
                    try:
                        peeked = self._sock.recv(want, MSG_PEEK)
                        break
                    except error as e:
                        if e.args[0] != EINTR:
                            raise
                    except (TypeError, ValueError):
                        # a "socket" whose recv takes no flags (urllib2 wraps a response: TypeError)
                        # or refuses them (an SSLSocket, as CPython's ssl: ValueError, httplib's HTTPS)
                        if pieces:
                            raise
                        return base_readline(self, size)
                if not peeked:
                    break  # EOF
                end = peeked.find("\n")
                n = end + 1 if end >= 0 else len(peeked)
                data = self._recv(n)  # buffered already: what was peeked, or the first part of it
                pieces.append(data)
                got += len(data)
                if end >= 0 and len(data) == n:
                    break
            if len(pieces) == 1:
                return pieces[0]
            return "".join(pieces)

        def _recv(self, n):
            """One recv, retried on EINTR as the stdlib's loops do."""
            while True:
                try:
                    return self._sock.recv(n)
                except error as e:
                    if e.args[0] != EINTR:
                        raise

    return _fileobject


def install(socket_module=None):
    """Give ``socket_module`` (default: ``import socket``) this ``_fileobject``; idempotent.
    Nothing on Python 3 (its socket module has no ``_fileobject``)."""
    if sys.version_info[0] >= 3:
        return
    if socket_module is None:
        import socket as socket_module
    socket_module._fileobject = fileobject_class(socket_module)
