"""The endpoint behind ``socketpair()``: an in-memory byte stream to its twin, no firmware.

``PairEndpoint`` offers what select.py and the socket type ask of an endpoint (the members
``TcpEndpoint`` and ``UdpEndpoint`` have), so a pair works with select/poll/selectors --
asyncio's self-pipe is one (the fallback in socket.py would need a
loopback interface, which EDK2 does not have, docs/edk2.md section 3.10). ``pair()`` makes two linked ends;
``_socket.socketpair`` wraps them in sockets.
"""

import errno

from bitsnet import buffers, errors
from bitsnet.constants import SHUT_RD, SHUT_RDWR, SHUT_WR
from bitsnet.endpoint import StreamEndpoint


def _error(err):
    return errors.socket_error(err)


class PairEndpoint(StreamEndpoint):
    """One end of ``socketpair()`` (see the module docstring)."""

    LIMIT = 256 * 1024  # bytes the twin may queue here before send() would block
    listening = False
    connecting = False
    failed = False
    never_connected = False  # connected from birth
    # SHUT_RD is the endpoint's, set by shutdown(), as Linux's AF_UNIX stream: recv returns what
    # is queued, then b"" at once; the twin's send raises EPIPE from then on.
    read_shut = False
    plain_stream = False  # the socket layer's generic way (its fast paths are for TCP's firmware waits)
    local_address = remote_address = ("127.0.0.1", 0)

    def __init__(self):
        self.peer = None  # type: PairEndpoint
        self._rx = buffers.ByteQueue()
        self._eof = False  # the twin shut down writing or closed
        self._write_shut = False
        self._user_closed = False
        self._options = {"reuseaddr": False, "keepalive": False, "nodelay": False, "rcvbuf": self.LIMIT,
                         "sndbuf": self.LIMIT, "linger": None}

    connected = property(lambda self: not self._user_closed)
    closed = property(lambda self: self._user_closed)

    def bind(self, address, deadline=None):
        raise _error(errno.EINVAL)

    def connect_start(self, address, deadline=None):
        raise _error(errno.EISCONN)

    connect_later = connect_start

    def disconnect(self):
        pass  # a pair is connected from birth: no connect ever fails

    def send_urgent(self, data):
        return self.send(data)  # a pipe in memory has no urgent data: MSG_OOB bytes go inline

    def listen(self, backlog):
        raise _error(errno.EINVAL)

    def accept(self):
        raise _error(errno.EINVAL)

    def recv_into(self, buffer, nbytes=None, peek=False):
        if self._rx:
            return self._rx.readinto(buffer, nbytes, consume=not peek)
        return 0 if self._eof or self.read_shut else None

    def recv(self, nbytes, peek=False):
        if self._rx:
            return self._rx.peek(nbytes) if peek else self._rx.read(nbytes)
        return b"" if self._eof or self.read_shut else None

    def recv_blocking(self, nbytes, timeout):
        raise NotImplementedError("PairEndpoint.recv_blocking: plain_stream is False, the socket layer never asks")

    def send(self, data):
        peer = self.peer
        if self._write_shut or peer is None or peer.read_shut:
            raise _error(errno.EPIPE)
        space = self.LIMIT - len(peer._rx)
        if space <= 0:
            return None
        view = memoryview(data)
        n = min(len(view), space)
        peer._rx.append(view[:n].tobytes())
        return n

    def shutdown(self, how):
        self.read_shut = self.read_shut or how in (SHUT_RD, SHUT_RDWR)
        if how in (SHUT_WR, SHUT_RDWR):
            self._write_shut = True
            if self.peer is not None:
                self.peer._eof = True

    def close(self, abort=False):
        self._user_closed = True
        peer, self.peer = self.peer, None
        if peer is not None:
            peer._eof = True
            peer.peer = None

    def progress(self):
        pass

    def can_recv(self):
        return bool(self._rx) or self._eof or self.read_shut

    def can_send(self):
        peer = self.peer
        return self._write_shut or peer is None or peer.read_shut or len(peer._rx) < self.LIMIT

    def acceptable(self):
        return False

    def take_error(self):
        return 0

    def has_error(self):  # an in-memory pipe has no errors to report (poll's POLLERR)
        return False

    def hung_up(self):  # the twin's close is EOF (POLLIN), as for a Unix-domain pair
        return False

    def set_option(self, name, value):
        self._options[name] = value

    def get_option(self, name):
        return self._options[name]


def pair():
    """Two linked ends: what one sends, the other receives."""
    first, second = PairEndpoint(), PairEndpoint()
    first.peer, second.peer = second, first
    return first, second
