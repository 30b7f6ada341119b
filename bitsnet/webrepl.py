"""bitsnet.webrepl: a Python console in the browser, running in the firmware's interpreter.

    python -m bitsnet.webrepl [--port P] [--bind ADDR] [--token T]

prints on the firmware console the URL to open (with a random access token) and serves one
self-contained page (HTML, CSS and JavaScript inline) that behaves like the interactive
interpreter: one persistent namespace, multi-line blocks, tracebacks, history on the arrow keys,
Ctrl-C / the Interrupt button, ``exit()`` to stop the server and return to the boot prompt.

Contents: ``make_token``, ``token_source``, ``tokens_equal`` (the access check), ``Transcript`` (the console
text), ``ReplConsole`` (``bitsnet.console.Console`` that defers running), ``ReplServer``
(``HTTPServer`` driven by our own select loop), ``main``. It imports nothing BITS lacks (no
``code``, ``codeop``, ``ast``, ``io``, ``hmac``, ``random``, ``os.urandom``).

Design -- how one thread serves HTTP while arbitrary user code runs
--------------------------------------------------------------------
BITS has no threads, so the server and the user's code share the one thread:

Rule 1: every request is answered at once. ``POST /push`` only *compiles* the line (with
    ``bitsnet.console``, which decides as ``codeop`` does whether a block is complete);
    complete code is queued and answered "running". The browser then polls ``GET /poll`` for
    output and state. No response ever waits for user code.
Rule 2: the select loop (``ReplServer.service``) owns all sockets, non-blocking. A connection
    is read into a buffer until a whole request (headers + Content-Length body) is there, then
    handed to a ``BaseHTTPRequestHandler`` over in-memory files; the response is written back as
    the socket accepts it. A connection that has not completed its request and taken its
    response within ``CLIENT_TIMEOUT`` is dropped, so a broken or slow client never stalls us.
Rule 3: queued code runs from the top of the loop with ``sys.settrace`` installed. The line
    tracer counts events; every ``TICKS`` events it reads the clock and, at most every
    ``SERVICE_INTERVAL``, runs ``service(0)``: polls are answered (with the output so far),
    an interrupt request raises ``KeyboardInterrupt`` inside the user's code at its next line.
Rule 4: never re-enter the network stack: the loop is not serviced while any frame between the
    user's code and the tracer belongs to bitsnet or efi (the user's own socket calls), and
    frames of those modules are not traced at all.

Limits that follow: code blocked inside one C call (``time.sleep(60)``, a blocking socket
wait, ``sum(range(10**10))``) is neither interruptible nor served until the call returns; code
that catches ``KeyboardInterrupt`` and carries on cannot be interrupted again (CPython removes a
trace function that raised); code that sets its own ``sys.settrace`` (pdb) turns the servicing
off. Tracing slows Python code down about 5x (CPython 3.11). ``input()`` raises EOFError: the
firmware keyboard is not the browser's. Alternatives weighed: BITS has neither threads nor
signals; a periodic firmware timer whose notify function makes a ``Py_AddPendingCall`` (as
``trampoline.c`` does for events) would interrupt without tracing, but needs a hook in
``events.py`` that does not exist yet.

Access: every request must carry the token (header ``X-Repl-Token`` or query ``token``),
compared in constant time; otherwise 403 and nothing runs. The token and session ids come from
``bitsnet.entropy``; the console says which source that was, and warns when it is not a strong
one (BITS on a board without an RNG protocol or RDRAND: pass ``--token`` then). Only one browser session at a time:
``POST /session`` claims the console, a second claim gets 409 with a message saying why; a session
without contact for ``SESSION_IDLE`` seconds (the page beats every 2 s) may be taken over.
Responses are plain text with ``X-Repl-*`` headers (BITS ships no ``json``).
"""

from __future__ import absolute_import, print_function

import errno
import linecache
import socket
import sys
import time
import traceback

try:
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from socketserver import TCPServer
    from urllib.parse import parse_qs, urlsplit
except ImportError:  # Python 2.7
    from BaseHTTPServer import BaseHTTPRequestHandler, HTTPServer  # type: ignore
    from SocketServer import TCPServer  # type: ignore
    from urlparse import parse_qs, urlsplit  # type: ignore

import select

from bitsnet import clock
from bitsnet import console as _console

PY2 = sys.version_info[0] == 2
try:
    from _operator import _compare_digest  # Python 3: what hmac.compare_digest is
except ImportError:
    try:
        # BITS quirk: no hmac (docs/bits-environment.md section 2); 2.7.7+ has the C function here.
        from operator import _compare_digest  # type: ignore[attr-defined,no-redef]
    except ImportError:
        _compare_digest = None  # type: ignore[assignment]
_clock = clock.monotonic  # bitsnet's one clock: deadlines handed to bitsnet are in it

DEFAULT_PORT = 8080  # the usual "second web server" port; the firmware has no other server
TOKEN_BYTES = 16  # 128 bits: unguessable over any network a firmware console sits on
TICKS = 1000  # trace events between clock reads: keeps the tracer's cost to one decrement per line
SERVICE_INTERVAL = 0.05  # s between HTTP services while code runs: polls see output within ~50 ms
IDLE_WAIT = 0.25  # s one select waits while idle (the loop also checks deadlines this often)
CLIENT_TIMEOUT = 10.0  # s for a connection to send its request and take its response
SESSION_IDLE = 10.0  # s without contact after which another browser may take the console
MAX_CONNECTIONS = 16  # more wait in the listen backlog: bounded work per service
MAX_HEADER = 16 * 1024
MAX_BODY = 1024 * 1024  # a pasted script of 1 MiB is plenty
TRANSCRIPT_LIMIT = 1024 * 1024  # characters of console text kept for polls and page reloads
STOP_GRACE = 1.5  # s the server keeps answering after exit() so the page sees "closed"
_UNTRACED = ("bitsnet", "efi", "_efi", "efisim")  # module name prefixes: network stack (Rule 4)
_THIS_FILE = (lambda: 0).__code__.co_filename
# errno has these names in BITS too: importing bitsnet completes it (bitsnet/errnos.py).
_WOULD_BLOCK = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)


# --------------------------------------------------------------------------- access token
def make_token(nbytes=TOKEN_BYTES):
    """A random hex token of ``nbytes`` bytes from ``bitsnet.entropy`` (BITS has no
    ``os.urandom`` and its ``random`` is an empty stub)."""
    from bitsnet import entropy
    return _hex(entropy.random_bytes(nbytes))


def token_source():
    """Where a token from ``make_token`` comes from, with a warning when that is not a strong
    random source (BITS on a machine with neither EFI_RNG_PROTOCOL nor RDRAND)."""
    from bitsnet import entropy
    if entropy.strong():
        return entropy.source()
    return ("%s -- WARNING: not a strong random source; someone who can observe this machine's timing "
            "might guess the token: pass --token for a better one" % entropy.source())


def _hex(data):
    return "".join("%02x" % b for b in bytearray(data))


def tokens_equal(given, expected):
    # type: (str, str) -> bool
    """Compare without a timing leak: the C ``_compare_digest`` behind ``hmac.compare_digest``
    (Python 2.7.7+ and 3, BITS's 2.7.10 included), else the same XOR-accumulate loop."""
    given_bytes = given.encode("utf-8") if not isinstance(given, bytes) else given
    expected_bytes = expected.encode("utf-8") if not isinstance(expected, bytes) else expected
    if _compare_digest is not None:
        return _compare_digest(given_bytes, expected_bytes)
    result = len(given_bytes) ^ len(expected_bytes)
    for x, y in zip(bytearray(given_bytes), bytearray(expected_bytes)):
        result |= x ^ y
    return result == 0


# --------------------------------------------------------------------------- console text
class Transcript(object):
    """Everything the console shows, as text with absolute offsets (polls ask "since N");
    bounded: the oldest text is dropped beyond ``limit`` characters."""

    def __init__(self, limit=TRANSCRIPT_LIMIT):
        self.limit = limit
        self._chunks = []  # type: list
        self._base = 0  # offset of the first character still held
        self._length = 0  # characters held

    @property
    def end(self):
        return self._base + self._length

    def write(self, text):
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if not text:
            return
        self._chunks.append(text)
        self._length += len(text)
        if self._length > self.limit:
            held = "".join(self._chunks)[-(self.limit // 2):]
            self._base += self._length - len(held)
            self._chunks, self._length = [held], len(held)

    def since(self, offset):
        """Text from ``offset`` on (with a note if some of it was dropped)."""
        held = "".join(self._chunks)
        self._chunks = [held] if held else []
        if offset >= self._base:
            return held[offset - self._base:]
        return "[... %d characters of output dropped ...]\n%s" % (self._base - offset, held)


class _ConsoleFile(object):
    """sys.stdout/sys.stderr while user code runs: writes go to the transcript."""
    encoding = "utf-8"
    errors = "replace"
    softspace = 0  # the 2.7 print statement reads and sets it

    def __init__(self, transcript):
        self._transcript = transcript

    def write(self, text):
        self._transcript.write(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False


class _NoInput(object):
    """sys.stdin while user code runs: the firmware keyboard belongs to whoever stands at the
    machine, and waiting on it would stop the server; input() gets EOFError at once."""
    encoding = "utf-8"

    def readline(self, *args):
        raise EOFError("no console input in the web REPL (input() cannot be answered from the browser)")

    read = readline

    def isatty(self):
        return False


# --------------------------------------------------------------------------- interpreter
class ReplConsole(_console.Console):
    """The interactive interpreter with compiling and running split apart (Rule 1)."""

    def __init__(self, transcript):
        _console.Console.__init__(self, {"__name__": "__console__", "__doc__": None}, "<console>")
        _console.install_exit(self.locals)  # BITS has no exit() builtin (no site)
        self.transcript = transcript
        self.raised_by_tracer = False  # set when the tracer raised KeyboardInterrupt (Rule 3)

    def write(self, data):
        self.transcript.write(data)

    def push_line(self, line):
        """Add one line; returns compiled code ready to run, or None (more input needed, or a
        syntax error, already written)."""
        self.transcript.write(self.prompt() + line + "\n")
        self.buffer.append(line)
        source = "\n".join(self.buffer)
        try:
            compiled = self.compile(source, self.filename, "single")
        except (OverflowError, SyntaxError, ValueError):
            self.resetbuffer()
            self.showsyntaxerror(self.filename)
            return None
        if compiled is not None:
            self.resetbuffer()
            if not PY2:
                compiled = self._traceable(source, compiled)
        return compiled

    def _traceable(self, source, compiled):
        """CPython 3 compiles a loop whose body is a ``pass`` on the loop's own line
        (``while True: pass``) into a jump to itself, and a jump to the same instruction emits
        no "line" trace event: the tracer would never run (2.7, BITS's Python, does emit them).
        Moving the ``pass`` to the next line number makes the compiler keep a NOP there and the
        loop a backward jump, which is traced. Nothing else changes: ``pass`` cannot raise.
        Done on the syntax tree of the built-in ``_ast`` (BITS has it; ``ast`` it has not)."""
        import _ast
        flags = self.compile.flags & _console.FUTURE_FLAGS  # from __future__ statements so far
        try:
            tree = compile(source, self.filename, "single", flags | _ast.PyCF_ONLY_AST, True)
            moved = False
            todo = [tree]  # every node, without recursion (ast.walk's job)
            while todo:
                node = todo.pop()
                for field in node._fields:
                    value = getattr(node, field, None)
                    todo.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, _ast.AST))
                if not isinstance(node, (_ast.While, _ast.For)):
                    continue
                for stmt in node.body:
                    if isinstance(stmt, _ast.Pass) and stmt.lineno == node.lineno:
                        stmt.lineno = node.lineno + 1
                        if hasattr(stmt, "end_lineno"):
                            stmt.end_lineno = stmt.lineno
                        moved = True
            return compile(tree, self.filename, "single", flags, True) if moved else compiled
        except Exception:
            return compiled

    def showtraceback(self):
        """As the interpreter shows it: without this module's frames (the exec frame, and the
        tracer's when it raised KeyboardInterrupt for an interrupt request)."""
        etype, value, tb = sys.exc_info()
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
        tb = tb.tb_next if tb is not None else None
        if PY2 or self.raised_by_tracer:
            # 2.7 and 3.6 record the frame a trace function raised in twice: drop the repeat.
            # (Elsewhere 3 keeps format_exception, which also shows chained exceptions.)
            entries, previous = [], None
            while tb is not None:
                if (tb.tb_frame, tb.tb_lineno) != previous:
                    code_ = tb.tb_frame.f_code
                    entries.append((code_.co_filename, tb.tb_lineno, code_.co_name,
                                    (linecache.getline(code_.co_filename, tb.tb_lineno) or "").strip() or None))
                previous = (tb.tb_frame, tb.tb_lineno)
                tb = tb.tb_next
            lines = ["Traceback (most recent call last):\n"] if entries else []
            lines += traceback.format_list(entries) + traceback.format_exception_only(etype, value)
        else:
            lines = traceback.format_exception(etype, value, tb)
        ours = '  File "%s"' % _THIS_FILE
        self.write("".join(line for line in lines if not (line.startswith(ours) and (
            "in trace_line\n" in line or "in _tick\n" in line))))

    def run_compiled(self, compiled):
        """Run code in the namespace; the traceback skips this frame, as the interpreter's does.
        SystemExit propagates (the caller stops the server)."""
        self.raised_by_tracer = False
        try:
            exec(compiled, self.locals)
        except SystemExit:
            raise
        except BaseException:  # KeyboardInterrupt too: shown like the interpreter shows it
            self.showtraceback()


# The frame that exec()s user code: the tracer's stack walk stops there (Rule 4).
_RUN_CODE = getattr(ReplConsole.run_compiled, "__func__", ReplConsole.run_compiled).__code__


# --------------------------------------------------------------------------- HTTP
class _Connection(object):
    """One client socket: bytes in until a request is complete, response bytes out (Rule 2)."""

    def __init__(self, sock, address, now):
        self.sock = sock
        self.address = address
        self.inbuf = b""
        self.outbuf = b""
        self.answered = False
        self.deadline = now + CLIENT_TIMEOUT

    def complete_request(self):
        """The raw request once headers and body are all here, else None; ValueError if bad."""
        end = self.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.inbuf) > MAX_HEADER:
                raise ValueError("request header too large")
            return None
        length = 0
        for line in self.inbuf[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value.strip())
            elif name == b"transfer-encoding":
                raise ValueError("chunked bodies are not supported")
        if length < 0 or length > MAX_BODY:
            raise ValueError("request body too large")
        if len(self.inbuf) < end + 4 + length:
            return None
        return self.inbuf[:end + 4 + length]


class _Bytes(object):
    """An in-memory binary file: the request for the handler to read, its response written.
    BITS has no ``io`` (docs/bits-environment.md section 2); this one class serves both
    Pythons, so the host tests run the code path BITS runs."""

    def __init__(self, data=b""):
        self._data = data
        self._pos = 0
        self._out = []  # type: list

    def readline(self, limit=-1):
        end = self._data.find(b"\n", self._pos)
        end = len(self._data) if end < 0 else end + 1
        if limit is not None and limit >= 0:
            end = min(end, self._pos + limit)
        line, self._pos = self._data[self._pos:end], end
        return line

    def read(self, size=-1):
        end = len(self._data) if size is None or size < 0 else min(len(self._data), self._pos + size)
        data, self._pos = self._data[self._pos:end], end
        return data

    def write(self, data):
        self._out.append(bytes(data))
        return len(data)

    def flush(self):
        pass

    def getvalue(self):
        return b"".join(self._out)


class _Handler(BaseHTTPRequestHandler):
    """Standard request parsing and response formatting over in-memory files (Rule 2)."""
    protocol_version = "HTTP/1.0"  # one request per connection: nothing to keep track of
    server_version = "bitsnet-webrepl"

    def __init__(self, raw, client_address, server):  # pylint: disable=super-init-not-called
        # BaseRequestHandler.__init__ would read from a socket; the request is already here.
        self.request = None
        self.client_address = client_address
        self.server = server
        self.rfile = _Bytes(raw)
        self.wfile = _Bytes()
        self.close_connection = True
        self.handle_one_request()
        if hasattr(self, "_headers_buffer") and self._headers_buffer:
            self.flush_headers()

    def do_GET(self):
        self.server.app.dispatch(self)

    do_POST = do_GET

    def address_string(self):
        return self.client_address[0]  # 2.7 would ask DNS

    def log_message(self, *args):
        pass  # the firmware console is for the URL and real events, not an access log

    def reply(self, status, body=b"", content_type="text/plain; charset=utf-8", headers=()):
        if not isinstance(body, bytes):
            body = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")  # the token is in the page's URL
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Connection", "close")
        for name, value in headers:
            self.send_header(name, str(value))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class ReplServer(HTTPServer):
    """HTTPServer for binding and request classes; the loop is ours (Rules 2-4)."""

    def __init__(self, address, app):
        self.app = app
        self.connections = []  # type: list
        HTTPServer.__init__(self, address, _Handler)
        self.socket.setblocking(False)

    def server_bind(self):
        # HTTPServer.server_bind also asks DNS for our name (getfqdn), which a firmware may
        # not answer for a long time; the name is not needed.
        TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def service(self, timeout):
        """One select round: accept, read, answer, write, expire (never blocks past timeout)."""
        readers = [c.sock for c in self.connections if not c.answered]
        if len(self.connections) < MAX_CONNECTIONS:
            readers.append(self.socket)
        writers = [c.sock for c in self.connections if c.outbuf]
        readable, writable, _ = select.select(readers, writers, [], timeout)
        now = _clock()
        if self.socket in readable:
            self._accept(now)
        for conn in list(self.connections):
            if conn.sock in readable:
                self._read(conn)
            if conn.sock in writable or (conn.answered and conn.outbuf):
                self._write(conn)
            if conn in self.connections and now > conn.deadline:
                self._drop(conn)

    def _accept(self, now):
        try:
            sock, address = self.socket.accept()
        except socket.error as exc:
            if exc.args and exc.args[0] in _WOULD_BLOCK:
                return
            raise
        sock.setblocking(False)
        self.connections.append(_Connection(sock, address, now))

    def _read(self, conn):
        try:
            data = conn.sock.recv(65536)
        except socket.error as exc:
            if exc.args and exc.args[0] in _WOULD_BLOCK:
                return
            return self._drop(conn)
        if not data:
            return self._drop(conn)
        conn.inbuf += data
        try:
            raw = conn.complete_request()
        except ValueError as exc:
            conn.outbuf = ("HTTP/1.0 400 Bad Request\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                           % (len(str(exc)), exc)).encode("ascii")
            conn.answered = True
            return
        if raw is not None:
            conn.answered = True
            handler = _Handler(raw, conn.address, self)
            conn.outbuf = handler.wfile.getvalue()

    def _write(self, conn):
        try:
            sent = conn.sock.send(conn.outbuf[:65536])
        except socket.error as exc:
            if exc.args and exc.args[0] in _WOULD_BLOCK:
                return
            return self._drop(conn)
        conn.outbuf = conn.outbuf[sent:]
        if not conn.outbuf:
            self._drop(conn)

    def _drop(self, conn):
        if conn in self.connections:
            self.connections.remove(conn)
        try:
            conn.sock.close()
        except socket.error:
            pass

    def server_close(self):
        for conn in list(self.connections):
            self._drop(conn)
        HTTPServer.server_close(self)


# --------------------------------------------------------------------------- the application
class _Session(object):
    def __init__(self, ident, address, now):
        self.ident = ident
        self.address = address
        # BITS quirk: time has no strftime (docs/bits-environment.md section 5).
        self.started = "%02d:%02d:%02d" % tuple(time.gmtime()[3:6])
        self.last_seen = now


class WebRepl(object):
    """The console's state and its HTTP routes; ``serve()`` is the main loop."""

    def __init__(self, bind="", port=DEFAULT_PORT, token=None, console=None):
        self.console = console or sys.stdout  # the firmware console, kept while runs capture
        self.token = token or make_token()
        self.token_source = "--token" if token else token_source()
        self.transcript = Transcript()
        self.interpreter = ReplConsole(self.transcript)
        self.session = None  # type: _Session
        self.pending = None  # compiled code waiting for the top of the loop
        self.running = False
        self.interrupt_requested = False
        self.stopping = False
        self.denied = 0
        self._next_service = 0.0
        self.server = ReplServer((bind, port), self)
        self.transcript.write("Python %s on bitsnet webrepl\n" % sys.version.split()[0])
        self.transcript.write("Ctrl-C or the Interrupt button stops a running command; exit() stops the server.\n")

    # ---- console output
    def log(self, message):
        self.console.write("webrepl: %s\n" % message)
        self.console.flush()

    def url(self):
        host, port = self.server.server_address[:2]
        if host in ("", "0.0.0.0"):
            host = _station_address() or host
        return "http://%s:%d/?token=%s" % (host, port, self.token)

    # ---- the loop
    def serve(self):
        self.log("open %s" % self.url())
        self.log("access token from %s" % self.token_source)
        try:
            while not self.stopping:
                self._service(IDLE_WAIT)
                if self.pending is not None:
                    compiled, self.pending = self.pending, None
                    self._run(compiled)
            grace = _clock() + STOP_GRACE
            while _clock() < grace:
                self._service(0.05)
        finally:
            self.server.server_close()
        self.log("stopped")

    def _service(self, timeout):
        try:
            self.server.service(timeout)
        except Exception:  # a fault in serving must not reach the user's code or end the loop
            self.log("error while serving:\n" + traceback.format_exc())

    def _run(self, compiled):
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdout = sys.stderr = _ConsoleFile(self.transcript)
        sys.stdin = _NoInput()
        self.running = True
        self.interrupt_requested = False
        self._next_service = _clock() + SERVICE_INTERVAL
        sys.settrace(self._tracer())
        try:
            self.interpreter.run_compiled(compiled)
        except SystemExit:
            self.transcript.write("[exit(): the web REPL stops; back to the boot prompt]\n")
            self.stopping = True
        finally:
            sys.settrace(None)
            sys.stdin, sys.stdout, sys.stderr = saved
            self.running = False
            if self.session is not None:
                self.session.last_seen = _clock()  # a long run is not a session gone idle

    def _tracer(self):
        """The trace functions of Rule 3/4 as closures (the line tracer runs on every line)."""
        countdown = [TICKS]
        tick = self._tick

        def trace_line(frame, event, arg):
            countdown[0] -= 1
            if countdown[0] <= 0:
                countdown[0] = TICKS
                tick(frame)
            return trace_line

        def trace_call(frame, event, arg):
            if str(frame.f_globals.get("__name__", "")).startswith(_UNTRACED):
                return None
            return trace_line
        return trace_call

    def _tick(self, frame):
        now = _clock()
        if now < self._next_service:
            return
        self._next_service = now + SERVICE_INTERVAL
        walk = frame
        while walk is not None and walk.f_code is not _RUN_CODE:
            if str(walk.f_globals.get("__name__", "")).startswith(_UNTRACED):
                return  # inside the network stack: servicing now would re-enter it (Rule 4)
            walk = walk.f_back
        self._service(0)
        if self.interrupt_requested:
            self.interrupt_requested = False
            self.interpreter.raised_by_tracer = True
            raise KeyboardInterrupt

    # ---- routes
    def dispatch(self, request):
        parts = urlsplit(request.path)
        query = parse_qs(parts.query)
        token = request.headers.get("X-Repl-Token") or (query.get("token") or [""])[0]
        if not tokens_equal(token, self.token):
            self.denied += 1
            if self.denied <= 3 or self.denied % 100 == 0:
                self.log("refused %s %s from %s: wrong or missing token (%d so far)"
                         % (request.command, parts.path, request.client_address[0], self.denied))
            return request.reply(403, "403 Forbidden: wrong or missing access token; open the URL printed on the "
                                      "firmware console.\n")
        path = parts.path
        if path == "/" and request.command == "GET":
            return request.reply(200, PAGE, "text/html; charset=utf-8")
        if path == "/session" and request.command == "POST":
            return self._claim(request)
        ident = request.headers.get("X-Repl-Session") or (query.get("session") or [""])[0]
        if self.session is None or not tokens_equal(ident, self.session.ident):
            return request.reply(409, "This page no longer holds the console (another browser took it over, or "
                                      "the server restarted). Reload to try again.\n",
                                 headers=[("X-Repl-Error", "session")])
        self.session.last_seen = _clock()
        if path == "/poll" and request.command == "GET":
            return self._state_reply(request, "", since=int((query.get("since") or ["0"])[0]))
        if path == "/push" and request.command == "POST":
            return self._push(request)
        if path == "/interrupt" and request.command == "POST":
            self._interrupt()
            return self._state_reply(request, "")
        if path == "/release" and request.command == "POST":
            self.session = None
            return request.reply(200, "released\n")
        return request.reply(404, "404 Not Found\n")

    def _state(self):
        if self.stopping:
            return "closed"
        if self.running or self.pending is not None:
            return "running"
        return "more" if self.interpreter.buffer else "ready"

    def _state_reply(self, request, body, status=200, since=None):
        """Answer with the state; with ``since``, also the console text from there and the
        offset to ask from next time (only polls carry text: one reader, no gaps)."""
        headers = [("X-Repl-State", self._state())]
        if since is not None:
            body = self.transcript.since(since)
            headers.append(("X-Repl-Next", self.transcript.end))
        return request.reply(status, body, headers=headers)

    def _claim(self, request):
        now = _clock()
        held = self.session
        mine = held is not None and tokens_equal(request.headers.get("X-Repl-Session") or "", held.ident)
        if held is not None and not mine and (self.running or now - held.last_seen < SESSION_IDLE):
            return request.reply(409, "This firmware console is already in use by another browser page (%s, since "
                                      "%s UTC). One session at a time: close that page, or wait -- a page that is "
                                      "gone is released after %d s.\n"
                                      % (held.address, held.started, SESSION_IDLE),
                                 headers=[("X-Repl-Error", "busy")])
        if not mine:
            self.session = _Session(make_token(8), request.client_address[0], now)
            if held is not None:
                self.log("session of %s taken over by %s (idle)" % (held.address, self.session.address))
            else:
                self.log("session opened by %s" % self.session.address)
        return request.reply(200, self.transcript.since(0),
                             headers=[("X-Repl-Session", self.session.ident), ("X-Repl-State", self._state()),
                                      ("X-Repl-Next", self.transcript.end)])

    def _push(self, request):
        if self._state() in ("running", "closed"):
            return self._state_reply(request, "busy: a command is still running\n", status=409)
        length = int(request.headers.get("Content-Length") or 0)
        source = request.rfile.read(length).decode("utf-8", "replace")
        lines = source.replace("\r\n", "\n").split("\n")
        if len(lines) > 1:
            return self._state_reply(request, "one line per push\n", status=400)
        self.pending = self.interpreter.push_line(lines[0])
        return self._state_reply(request, "")

    def _interrupt(self):
        if self.running:
            self.interrupt_requested = True
            return
        # Ctrl-C at the prompt: the interpreter drops a half-typed block, says KeyboardInterrupt.
        self.pending = None
        self.interpreter.resetbuffer()
        self.transcript.write("\nKeyboardInterrupt\n")


def _station_address():
    """The address a browser should use when bound to all interfaces."""
    try:
        from bitsnet import installed, ipconfig
        if installed():
            info = ipconfig.current()
            return info.address if info is not None else None
    except Exception:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except socket.error:
        return None


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bitsnet webrepl</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
html,body{margin:0;height:100%;background:#1d1f21;color:#c5c8c6;font:14px/1.35 ui-monospace,Menlo,Consolas,monospace}
header{display:flex;gap:1em;align-items:center;padding:.4em .8em;background:#282a2e;border-bottom:1px solid #373b41}
header b{color:#81a2be} #status{flex:1;color:#969896} #status.running{color:#f0c674} #status.bad{color:#cc6666}
button{font:inherit;background:#373b41;color:#c5c8c6;border:1px solid #4d5057;border-radius:3px;padding:.15em .7em}
button:hover{background:#4d5057}
main{padding:.5em .8em;height:calc(100% - 2.6em);overflow:auto;box-sizing:border-box}
pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:inherit}
#line{display:flex} #prompt{white-space:pre;color:#b5bd68}
textarea{flex:1;background:transparent;color:inherit;border:0;outline:0;resize:none;padding:0;font:inherit}
</style></head><body>
<header><b>bitsnet webrepl</b><span id="status">connecting...</span>
<button id="stop" title="Ctrl-C">Interrupt</button></header>
<main id="main"><pre id="out"></pre>
<div id="line"><span id="prompt">&gt;&gt;&gt; </span><textarea id="in" rows="1" spellcheck="false"
 autocomplete="off" autofocus></textarea></div></main>
<script>
"use strict";
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const out = $("out"), input = $("in"), prompt = $("prompt"), status = $("status"), main = $("main");
const repl = window.repl = {session: "", next: 0, state: "connecting", history: [], hpos: 0, queue: [],
                            busy: false, timer: 0, polling: false, again: false};
function show(text) {
  if (!text) return;
  out.appendChild(document.createTextNode(text));
  main.scrollTop = main.scrollHeight;
}
function call(method, path, body) {
  return fetch(path, {method: method, body: body, cache: "no-store",
                      headers: {"X-Repl-Token": TOKEN, "X-Repl-Session": repl.session}});
}
function setState(state, note) {
  repl.state = state;
  prompt.textContent = state === "more" ? "... " : state === "ready" ? ">>> " : "";
  input.disabled = state === "closed" || state === "lost";
  status.className = state === "running" ? "running" : (state === "closed" || state === "lost") ? "bad" : "";
  status.textContent = note || {ready: "ready", more: "block: an empty line ends it", running: "running...",
                                closed: "the web REPL has stopped"}[state] || state;
}
async function take(resp, since) {
  const text = await resp.text();
  if (resp.status === 409 && resp.headers.get("X-Repl-Error")) {
    show(text); setState("lost", resp.headers.get("X-Repl-Error") === "busy" ? "console in use elsewhere"
                                                                         : "session lost: reload");
    return false;
  }
  if (resp.status === 403) { show(text); setState("lost", "forbidden: wrong token"); return false; }
  const next = resp.headers.get("X-Repl-Next");
  if (next !== null && since === repl.next) {  // a late answer to an old offset is dropped
    show(text); repl.next = +next;
  }
  const state = resp.headers.get("X-Repl-State");
  if (state) setState(state);
  return true;
}
async function poll() {  // one poll in flight at a time; a request meanwhile polls again after
  clearTimeout(repl.timer);
  if (repl.polling) { repl.again = true; return; }
  if (repl.state === "lost" || repl.state === "closed") return;
  repl.polling = true;
  try {
    const since = repl.next;
    if (!await take(await call("GET", "/poll?since=" + since), since)) return;
  } catch (e) { setState(repl.state, "no answer from the firmware; retrying"); }
  finally { repl.polling = false; }
  pump();
  const soon = repl.again || repl.state === "running";
  repl.again = false;
  repl.timer = setTimeout(poll, soon ? 150 : 2000);
}
async function pump() {
  if (repl.busy || repl.state === "running" || !repl.queue.length) return;
  if (repl.state !== "ready" && repl.state !== "more") return;
  repl.busy = true;
  const line = repl.queue.shift();
  try {
    const resp = await call("POST", "/push", line);
    if (resp.status === 409 && !resp.headers.get("X-Repl-Error")) repl.queue.unshift(line);
    await take(resp);
  } finally { repl.busy = false; }
  poll();
}
function submit() {
  const text = input.value;
  input.value = "";
  if (text.trim()) { repl.history.push(text); }
  repl.hpos = repl.history.length;
  for (const line of text.split(/\\r?\\n/)) repl.queue.push(line);
  pump();
}
async function interrupt() {
  repl.queue = [];
  await take(await call("POST", "/interrupt"));
  poll();
}
input.addEventListener("keydown", (ev) => {
  const before = input.value.slice(0, input.selectionStart), after = input.value.slice(input.selectionEnd);
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); submit(); }
  else if (ev.key === "ArrowUp" && before.indexOf("\\n") < 0 && repl.hpos > 0) {
    ev.preventDefault(); input.value = repl.history[--repl.hpos];
  } else if (ev.key === "ArrowDown" && after.indexOf("\\n") < 0 && repl.hpos < repl.history.length) {
    ev.preventDefault(); repl.hpos++; input.value = repl.history[repl.hpos] || "";
  } else if (ev.key === "Tab") {
    ev.preventDefault(); input.setRangeText("    ", input.selectionStart, input.selectionEnd, "end");
  } else if (ev.key === "c" && ev.ctrlKey && input.selectionStart === input.selectionEnd) {
    ev.preventDefault(); interrupt();
  }
});
input.addEventListener("input", () => { input.rows = Math.min(12, input.value.split("\\n").length); });
$("stop").addEventListener("click", interrupt);
main.addEventListener("click", () => { if (!getSelection().toString()) input.focus(); });
addEventListener("pagehide", () => {
  if (repl.session) navigator.sendBeacon("/release?token=" + encodeURIComponent(TOKEN) + "&session=" +
                                         encodeURIComponent(repl.session));
});
(async () => {
  const resp = await call("POST", "/session");
  repl.session = resp.headers.get("X-Repl-Session") || "";
  if (await take(resp, 0)) poll();
})();
</script></body></html>
"""


USAGE = """usage: python -m bitsnet.webrepl [--port P] [--bind ADDR] [--token T]

Serve a Python console for this machine's interpreter to a browser. Prints the URL to open,
with its access token. --port: TCP port (default %d); --bind: local address (default: all);
--token: use this access token instead of a random one.
""" % DEFAULT_PORT


def parse_args(argv):
    """(bind, port, token) from the command line (no argparse: small BITS trees lack it)."""
    options = {"--port": str(DEFAULT_PORT), "--bind": "", "--token": None}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("-h", "--help"):
            raise SystemExit(USAGE)
        if name not in options or (not eq and not args):
            raise SystemExit("webrepl: bad argument %r\n%s" % (arg, USAGE))
        options[name] = value if eq else args.pop(0)
    try:
        port = int(options["--port"])
    except ValueError:
        raise SystemExit("webrepl: --port needs a number\n" + USAGE)
    return options["--bind"], port, options["--token"]


def main(argv=None):
    bind, port, token = parse_args(sys.argv[1:] if argv is None else argv)
    WebRepl(bind, port, token).serve()


if __name__ == "__main__":
    main()
