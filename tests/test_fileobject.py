"""bitsnet.fileobject against the stdlib's socket._fileobject, on the same byte streams.

A real peer on the host's loopback plays a script (pieces of bytes with pauses between them,
then EOF, or a hold until the test releases it); the same operations run once through the
host Python 2.7's own ``socket._fileobject`` (the reference) and once through bitsnet's, each
over its own connection, and every result -- the bytes, or the exception's type and first
argument -- must be the same.  Last, bitsnet.install() under the simulator (tools/efirun.py)
must put the class in the socket module that makefile() and urllib2 use.  On Python 3 the
module only has to import and do nothing.
"""

from __future__ import print_function

import errno
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import conftest
import peers
from bitsnet import fileobject

PY2 = sys.version_info[0] == 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLD = object()  # in a script: stop sending until release() (no EOF yet)
needs_fileobject = pytest.mark.skipif(not PY2, reason="Python 3 has no socket._fileobject (io.BufferedReader)")


def stream(size, seed=0):
    """size bytes with a newline every 1..97 bytes (lines of many lengths)."""
    data = bytearray(peers.pattern(size, seed))
    step, at = 0, 0
    while at < size:
        step = step % 97 + 1
        at += step * 7 % 97 + 1
        if at < size:
            data[at] = ord("\n")
    return bytes(data)


def pieces(data, sizes):
    """data cut at the given piece sizes (cycled), with a short pause after every few pieces."""
    out, at, i = [], 0, 0
    while at < len(data):
        n = sizes[i % len(sizes)]
        out.append(data[at:at + n])
        if i % 3 == 2:
            out.append(0.002)
        at += n
        i += 1
    return out


class ScriptPeer(object):
    """Accepts one connection and plays ``script``: bytes are sent, a float sleeps, HOLD waits for
    release(); at the end the connection is closed (EOF)."""

    def __init__(self, script):
        self.script = script
        self.released = threading.Event()
        self.listener = socket.socket()
        self.listener.bind((peers.HOST, 0))
        self.listener.listen(1)
        self.listener.settimeout(10)
        self.thread = threading.Thread(target=self._play)
        self.thread.daemon = True
        self.thread.start()

    def _play(self):
        conn, _ = self.listener.accept()
        try:
            for step in self.script:
                if step is HOLD:
                    self.released.wait(10)
                elif isinstance(step, float):
                    time.sleep(step)
                else:
                    conn.sendall(step)
        except socket.error:
            pass  # the test closed its end before the script's end (a failing recv, a close)
        finally:
            conn.close()

    def connect(self, timeout=10):
        return socket.create_connection(self.listener.getsockname(), timeout)

    def release(self):
        self.released.set()

    def close(self):
        self.released.set()
        self.thread.join(10)
        self.listener.close()


class Interrupting(object):
    """A socket whose recv raises EINTR every ``every``-th call (before asking the real one)."""

    def __init__(self, sock, every=3):
        self.sock, self.every, self.calls = sock, every, 0

    def recv(self, n, flags=0):
        self.calls += 1
        if self.calls % self.every == 0:
            raise socket.error(errno.EINTR, "Interrupted system call")
        return self.sock.recv(n, flags)

    def close(self):
        self.sock.close()


def outcome(call):
    try:
        return ("ok", call())
    except Exception as exc:
        return ("raised", type(exc).__name__, exc.args[:1])


def play(cls, script, ops, mode="rb", bufsize=-1, timeout=10, wrap=None):
    """Results of ``ops`` on a ``cls`` file object over a fresh connection to a ScriptPeer."""
    peer = ScriptPeer(script)
    try:
        sock = peer.connect(timeout)
        raw = wrap(sock) if wrap else sock
        f = cls(raw, mode, bufsize)
        results = []
        for op in ops:
            if op == "release":
                peer.release()
                continue
            if op == "close":
                f.close()
                continue
            name, args = op[0], op[1:]
            if name == "lines":
                results.append(outcome(lambda: list(f)))
            else:
                results.append(outcome(lambda: getattr(f, name)(*args)))
        f.close()
        sock.close()
        return results
    finally:
        peer.close()


def same_as_stdlib(script, ops, **kw):
    ours = fileobject.fileobject_class(socket)
    assert ours is not socket._fileobject and issubclass(ours, socket._fileobject)
    expected = play(socket._fileobject, script, ops, **kw)
    got = play(ours, script, ops, **kw)
    assert got == expected
    return got


DATA = stream(300000, seed=7)
SIZES = [1, 7, 100, 8191, 8193, 30000, 5, 65536, 70000, 2]


@needs_fileobject
@pytest.mark.parametrize("bufsize", [-1, 0, 1, 100, 1 << 20])
def test_read_all(bufsize):
    got = same_as_stdlib(pieces(DATA, SIZES), [("read",), ("read",), ("read", 10)], bufsize=bufsize)
    assert got[0] == ("ok", DATA) and got[1] == ("ok", b"") and got[2] == ("ok", b"")


@needs_fileobject
@pytest.mark.parametrize("bufsize", [-1, 0, 8192])
def test_read_sizes(bufsize):
    sizes = [0, 1, 7, 8192, 8193, 65536, 100000, 0, 3, 1 << 20, 5]
    got = same_as_stdlib(pieces(DATA, SIZES), [("read", n) for n in sizes], bufsize=bufsize)
    assert b"".join(r[1] for r in got) == DATA


@needs_fileobject
@pytest.mark.parametrize("bufsize", [-1, 0, 1, 50])
def test_readline_then_read(bufsize):
    # readline leaves a read-ahead in _rbuf: read(n) smaller, equal and larger than it, then read()
    ops = [("readline",), ("read", 1), ("readline", 5), ("read", 3), ("readline",), ("read", 20000),
           ("readline", 1000), ("read", 0), ("readline",), ("read",), ("readline",), ("read", 1)]
    got = same_as_stdlib(pieces(DATA, SIZES), ops, bufsize=bufsize)
    assert b"".join(r[1] for r in got) == DATA


LONG_LINES = b"".join(b"%d:" % i + b"x" * (i * 3001 % 20000) + b"\n" for i in range(12)) + b"no newline at EOF"


@needs_fileobject
@pytest.mark.parametrize("sizes", [[1, 2, 3], [7, 100, 8191], [30000, 5, 70000]])
def test_unbuffered_readline(sizes):
    # makefile('rb', 0), as httplib reads headers: readline peeks (recv MSG_PEEK) and takes
    # exactly the line; lines longer than READLINE_PEEK, size limits, EOF without a newline
    ops = [("readline",), ("readline", 5), ("readline", 20000), ("read", 3), ("readline",), ("readline", 1),
           ("lines",), ("readline",)]
    got = same_as_stdlib(pieces(LONG_LINES, sizes), ops, bufsize=0)
    assert b"".join(r[1] if isinstance(r[1], bytes) else b"".join(r[1]) for r in got) == LONG_LINES


@needs_fileobject
def test_unbuffered_readline_eintr_and_timeout():
    got = same_as_stdlib(pieces(LONG_LINES, [3, 5000]), [("readline",)] * 14, bufsize=0, wrap=Interrupting)
    assert b"".join(r[1] for r in got) == LONG_LINES
    script = [b"first line\nhalf a li", HOLD, b"ne\nmore\n"]
    got = same_as_stdlib(script, [("readline",), ("readline",), "release", ("readline",), ("readline",)],
                         timeout=0.3, bufsize=0)
    assert got[0] == ("ok", b"first line\n") and got[1][:2] == ("raised", "timeout")


@needs_fileobject
def test_unbuffered_readline_without_flags():
    # an object whose recv takes no flags (urllib2 wraps an HTTPResponse so): the stdlib's way
    class NoFlags(Interrupting):
        def recv(self, n):
            return self.sock.recv(n)
    got = same_as_stdlib(pieces(LONG_LINES, [100]), [("readline",), ("readline", 3), ("read",)], bufsize=0,
                         wrap=NoFlags)
    assert b"".join(r[1] for r in got) == LONG_LINES


@needs_fileobject
def test_mixed_small_pieces():
    data = stream(20000, seed=3)
    ops = [("readline",), ("read", 10), ("readline",), ("readlines", 500), ("read", 4096), ("lines",)]
    got = same_as_stdlib(pieces(data, [1, 2, 3, 50, 4000]), ops)
    assert b"".join(r[1] if isinstance(r[1], bytes) else b"".join(r[1]) for r in got) == data


@needs_fileobject
def test_eof_at_once():
    got = same_as_stdlib([], [("read",), ("read", 5), ("readline",), ("read",)])
    assert got == [("ok", b"")] * 4


@needs_fileobject
def test_read_ahead_only():
    # the whole rest arrives in one piece and is read ahead by readline: read(n) needs no recv
    ops = [("readline", 3), ("read", 2), ("read", 0), ("read",)]
    same_as_stdlib([b"abcdefgh\nij"], ops, bufsize=4096)


@needs_fileobject
@pytest.mark.parametrize("how", [("read",), ("read", 100000)])
def test_timeout(how):
    # A timeout in the middle of a read: what was gathered is lost (as the stdlib does), the file
    # object stays usable, and what the peer sends after is read.
    script = [b"first line\nsome bytes", HOLD, b"the rest\n" * 1000]
    ops = [("readline",), how, "release", ("read",)]
    got = same_as_stdlib(script, ops, timeout=0.3)
    assert got[1][:2] == ("raised", "timeout") and got[2] == ("ok", b"the rest\n" * 1000)


@needs_fileobject
def test_timeout_inside_read_ahead():
    script = [b"abc\ndefgh", HOLD, b"ij"]
    ops = [("readline",), ("read", 3), ("read", 10), "release", ("read",)]
    got = same_as_stdlib(script, ops, timeout=0.3)
    assert got[:2] == [("ok", b"abc\n"), ("ok", b"def")] and got[2][:2] == ("raised", "timeout")


@needs_fileobject
@pytest.mark.parametrize("ops", [[("read",)], [("read", 250000), ("read",)], [("readline",), ("read", 70000)]])
def test_eintr_retried(ops):
    got = same_as_stdlib(pieces(DATA, SIZES), ops, wrap=Interrupting)
    assert all(r[0] == "ok" for r in got)


@needs_fileobject
def test_other_errors_propagate():
    class Failing(Interrupting):
        def recv(self, n):
            self.calls += 1
            if self.calls == 3:
                raise socket.error(errno.ECONNRESET, "reset")
            return self.sock.recv(n)
    got = same_as_stdlib(pieces(DATA, [1000]), [("read", 200000)], wrap=Failing)
    assert got == [("raised", "error", (errno.ECONNRESET,))]


@needs_fileobject
def test_closed_file():
    ops = [("readline", 2), "close", ("read", 0), ("read", 1), ("read",)]
    got = same_as_stdlib([b"abcdef"], ops, bufsize=4096)
    # what the read-ahead holds is still served; a read that must recv meets _sock None
    assert got[:2] == [("ok", b"ab"), ("ok", b"")] and got[2] == ("ok", b"c")
    assert got[3][:2] == ("raised", "AttributeError")


@needs_fileobject
def test_urllib2_style_wrapping(tmpdir):
    # urllib2 wraps the HTTPResponse in a _fileobject whose "socket" is the response (recv = read)
    import httplib  # type: ignore
    ours = fileobject.fileobject_class(socket)
    body = stream(200000, seed=5)
    with peers.HttpPeer(tmpdir, {"f.bin": body}) as http:
        results = []
        for cls in (socket._fileobject, ours):
            saved = socket._fileobject
            socket._fileobject = cls  # httplib's makefile() and the wrapper alike
            try:
                conn = httplib.HTTPConnection(peers.HOST, http.port, timeout=10)
                conn.request("GET", "/f.bin")
                response = conn.getresponse()
                response.recv = response.read
                outer = cls(response, close=True)
                parts = [outer.read(65536), outer.readline(), outer.read(1), outer.read()]
                outer.close()
                conn.close()
                results.append(parts)
            finally:
                socket._fileobject = saved
        assert results[0] == results[1] and b"".join(results[1]) == body


@needs_fileobject
def test_install_is_idempotent():
    import imp  # type: ignore
    module = imp.new_module("socket_copy")
    module.__dict__.update(vars(socket))
    fileobject.install(module)
    installed = module._fileobject
    assert installed is not socket._fileobject and installed._bitsnet
    fileobject.install(module)
    assert module._fileobject is installed and installed.__mro__[1] is socket._fileobject


@pytest.mark.skipif(PY2, reason="Python 3 only")
def test_nothing_on_python3():
    before = socket.socket.makefile
    fileobject.install(socket)
    assert socket.socket.makefile is before and not hasattr(socket, "_fileobject")


def test_bitsnet_install_puts_it_in_socket():
    """Under the simulator's BITS prompt (bitsnet.install()): makefile() and urllib2 get it on 2.7."""
    code = ("import socket, sys; f = socket._fileobject if sys.version_info[0] == 2 else None; "
            "print('fileobject %s' % (getattr(f, '_bitsnet', None),))")
    out = subprocess.check_output([sys.executable, os.path.join(ROOT, "tools", "efirun.py")]
                                  + conftest.STATION_ARGS + ["-c", code], cwd=ROOT, universal_newlines=True)
    assert ("fileobject True" if PY2 else "fileobject None") in out
