"""bitsnet.webrepl: a Python console in the browser, running in the firmware's interpreter.

    python -m bitsnet.webrepl [--port P] [--bind ADDR] [--token T]

prints on the firmware console the URL to open (with a random access token) and serves one
self-contained page (HTML, CSS and JavaScript inline) that behaves like the interactive
interpreter: one persistent namespace, multi-line blocks, tracebacks, history on the arrow keys,
Ctrl-C / the Interrupt button, ``exit()`` to stop the server and return to the boot prompt.

Contents: ``make_token``, ``check_token`` (a --token of one's own), ``token_source``, ``tokens_equal``
(the access check), ``Transcript`` (the console text), ``ReplConsole`` (``bitsnet.console.Console``
that defers running), ``ReplServer`` (the listening socket, driven by our own select loop),
``WebRepl`` (admission, routes, the loop), ``main``. Beside it: ``bitsnet.webrepl_bounds``
(``check_source``, the input bounds), ``bitsnet.webrepl_http`` (the HTTP messages: ``parse_head``,
``Request``, ``host_allowed``) and ``bitsnet.webrepl_page`` (the page). It
imports nothing BITS lacks (no ``code``, ``codeop``, ``ast``, ``io``, ``hmac``, ``random``, ``os.urandom``).

Design -- how one thread serves HTTP while arbitrary user code runs
--------------------------------------------------------------------
BITS has no threads, so the server and the user's code share the one thread:

Answer at once, every request. ``POST /push`` only *compiles* the line (with
    ``bitsnet.console``, which decides as ``codeop`` does whether a block is complete);
    complete code is queued and answered "running". The browser then polls ``GET /poll`` for
    output and state. No response ever waits for user code.
One loop owns the sockets: the select loop (``ReplServer.service``), non-blocking. A
    connection is read into a buffer until its request head is there (``MAX_HEADER``), which our
    own small parser reads (``parse_head``: HTTP/1.x, origin-form paths only; anything else is a
    400 at once, never an exception); then "token first" admits it or answers it; an admitted
    request's body is read, the route runs, and the response is written back as the socket
    accepts it.
Code runs under the tracer: queued code runs from the top of the loop with ``sys.settrace``
    installed. The line tracer counts events; every ``TICKS`` events it reads the clock and, at
    most every ``SERVICE_INTERVAL``, runs ``service(0)``: polls are answered (with the output so
    far), an interrupt request raises ``KeyboardInterrupt`` inside the user's code at its next
    line.
No re-entry into the network stack: the loop is not serviced while any frame between the
    user's code and the tracer belongs to bitsnet or efi (the user's own socket calls), and
    frames of those modules are not traced at all.

Token first: nothing of a request is looked at beyond its head before the token, which is
    checked first, then Host and Origin (``host_allowed``: an IP literal, localhost, or a name
    given with ``--allow-host``, so DNS rebinding fails; an Origin must be the page's own), then
    the announced body length; only then is the body read. Refusals are answered at once (the
    body is never read) and logged at a bounded rate (``LOG_BURST`` per ``LOG_WINDOW``), as are
    our own faults, whose tracebacks go to the browser (500) when a request caused them. Slots:
    ``MAX_CONNECTIONS``; a connection has ``HEADER_TIMEOUT`` to send its head, and when the slots
    are full the oldest connection without the token (that has been read at least once) is
    dropped for a new one, so idle or slow clients (slowloris) cannot keep a real one out; an
    admitted connection has ``CLIENT_TIMEOUT`` to finish.
Bounded input, before it is compiled: ``check_source`` on the text (line and block sizes,
    and an estimate of the parser's and compiler's recursion -- brackets, operator/attribute/call
    chains, indentation, elif clauses, with items -- within ``MAX_DEPTH``),
    then ``check_code`` on the complete block's syntax tree (the bytes and
    lines between line-number entries and the basic blocks 2.7's compiler would make, counted
    by ``bitsnet.webrepl_lnotab``), so no input overflows BITS's 128 KiB C stack (it has no
    guard page), makes 2.7 segfault, or hits BITS's compiler abort on a byte 255 in a
    line-number table. Whether a block is complete is asked of the parser alone
    (``PyCF_ONLY_AST``): no code is generated before the checks. Any exception of the REPL's
    own code reaches the browser, never the loop.

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
compared in constant time; otherwise 403 and nothing runs ("token first"). The URL with the
token is printed on the firmware console; a netconsole mirroring it shows a mask instead
(``bitsnet.netconsole.add_secret``): the token never crosses the network in clear from here.
The token and session ids come from ``bitsnet.entropy``; the console says which source that
was, and warns when it is not a strong one (BITS on a board without an RNG protocol or
RDRAND: pass ``--token`` then). Only one browser session at a time: ``POST /session`` claims
the console, a second claim gets 409 with a message saying why; a session without contact
for ``SESSION_IDLE`` seconds (the page beats every 2 s) may be taken over.
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
    from socketserver import TCPServer
except ImportError:  # Python 2.7
    from SocketServer import TCPServer  # type: ignore

import select

from bitsnet import clock
from bitsnet import console as _console
from bitsnet.webrepl_bounds import MAX_LINE, check_code, check_source
from bitsnet.webrepl_bounds import MAX_BLOCK, MAX_BLOCK_LINES, MAX_BLOCKS, MAX_DEPTH  # noqa: F401 (webrepl.MAX_*)
from bitsnet.webrepl_bounds import MAX_LINE_STEP, MAX_STEP  # noqa: F401
from bitsnet.webrepl_http import _REASONS, BadRequest, Request, host_allowed, http_response, is_decimal, parse_head
from bitsnet.webrepl_page import PAGE

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
# A --token of one's own: at least this many characters, each one of the URI's unreserved ones
# (RFC 3986 2.3: it travels unencoded in the URL and the header). 20 random letters and digits
# are 119 bits; ``openssl rand -hex 16`` on another machine gives 32 hex digits (128 bits).
MIN_TOKEN_CHARS = 20
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
TICKS = 1000  # trace events between clock reads: keeps the tracer's cost to one decrement per line
SERVICE_INTERVAL = 0.05  # s between HTTP services while code runs: polls see output within ~50 ms
IDLE_WAIT = 0.25  # s one select waits while idle (the loop also checks deadlines this often)
HEADER_TIMEOUT = 3.0  # s from accept to a complete request head; idle and slow clients go (token first)
CLIENT_TIMEOUT = 10.0  # s for an admitted request (right token) to send its body and take its response
SESSION_IDLE = 10.0  # s without contact after which another browser may take the console
MAX_CONNECTIONS = 16  # more wait in the listen backlog: bounded work per service
# A flood of connections waits in the backlog rather than in the SYN retries (1 s) of a full
# queue. In BITS each backlog place is an Accept token posted to EDK2 (bitsnet/tcp.py), whose
# completions must fit BITS's 31 pending calls: fewer there.
IN_BITS = "_bits" in sys.builtin_module_names
LISTEN_BACKLOG = 16 if IN_BITS else 128
ACCEPTS_PER_ROUND = 8  # connections accepted per select round (each may evict an older one)
EVICT_GRACE = 0.05  # s a connection without the token is safe from eviction: a client sends its head at once
MAX_HEADER = 8 * 1024  # request line and headers
MAX_BODY = 64 * 1024  # one pushed line (the page pushes a paste line by line)
LOG_BURST = 5  # console lines about refusals (and, separately, our own faults) ...
LOG_WINDOW = 10.0  # ... per this many seconds; the rest are counted
TRANSCRIPT_LIMIT = 1024 * 1024  # characters of console text kept for polls and page reloads
STOP_GRACE = 1.5  # s the server keeps answering after exit() so the page sees "closed"
_NETWORK_STACK = ("bitsnet", "efi", "_efi")  # module name prefixes never traced (no re-entry)


def _untraced():
    """The network stack's module prefixes, and any loaded package that stands in for the
    firmware (it declares ``__bitsnet_firmware__ = True``; on a host the simulator does): its
    frames are the firmware's, which in BITS is C and never traced (no re-entry)."""
    stand_ins = tuple(name for name, module in list(sys.modules.items())
                      if "." not in name and getattr(module, "__bitsnet_firmware__", False) is True)
    return _NETWORK_STACK + stand_ins
_THIS_FILE = (lambda: 0).__code__.co_filename
# BITS quirk: a 128 KiB C stack with no guard page (docs/bits-environment.md section 11) holds
# 175-320 Python levels while the recursion limit is 1000: a runaway recursion in the user's
# code would overwrite firmware memory. In BITS, user code runs with this many levels above
# the REPL's own frames, so it ends in RecursionError instead.
BITS_RECURSION = 140
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
            "might guess the token: pass --token with %d or more random characters made elsewhere, or give "
            "the machine EFI_RNG_PROTOCOL or RDRAND (README, Security)" % (entropy.source(), MIN_TOKEN_CHARS))


def check_token(token):
    """None if ``token`` (given with --token) is acceptable, else why not: a short or
    unprintable token would undo what the random one guarantees (the review: ``--token 1``)."""
    if len(token) < MIN_TOKEN_CHARS:
        return "a token of at least %d characters is needed (e.g. openssl rand -hex 16)" % MIN_TOKEN_CHARS
    if not all(c in _TOKEN_CHARS for c in token):
        return "a token may hold only letters, digits and - . _ ~ (it travels in the URL)"
    return None


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
    """The interactive interpreter with compiling and running split apart (answer at once)."""

    def __init__(self, transcript):
        _console.Console.__init__(self, {"__name__": "__console__", "__doc__": None}, "<console>")
        _console.install_exit(self.locals)  # BITS has no exit() builtin (no site)
        self.transcript = transcript
        self.raised_by_tracer = False  # set when the tracer raised KeyboardInterrupt (code runs under the tracer)

    def write(self, data):
        self.transcript.write(data)

    def push_line(self, line):
        """Add one line; returns compiled code ready to run, or None (more input needed, or a
        syntax error, already written)."""
        if len(line) > MAX_LINE:
            self.transcript.write(self.prompt() + line[:80] + "[... %d characters]\n" % (len(line) - 80))
            return self._refuse("a line of more than %d characters" % MAX_LINE)
        self.transcript.write(self.prompt() + line + "\n")
        self.buffer.append(line)
        source = "\n".join(self.buffer)
        why = check_source(source)  # before anything parses it: the parser recurses too
        if why is not None:
            return self._refuse(why)
        try:
            # Whether the block is complete, from its syntax tree alone: 2.7's code generator
            # (which BITS aborts in) runs only once the tree has passed check_code.
            tree = self.compile(source, self.filename, "single", only_ast=True)
            if tree is None:
                return None  # more lines to come
            why = check_code(tree)
            if why is not None:
                return self._refuse(why)
            compiled = self.compile(source, self.filename, "single")
        except (OverflowError, SyntaxError, ValueError):
            self.resetbuffer()
            self.showsyntaxerror(self.filename)
            return None
        except Exception as exc:  # MemoryError, RecursionError... whatever slipped past the bounds
            self.resetbuffer()
            self.write("%s: %s (while compiling)\n" % (type(exc).__name__, exc))
            return None
        if compiled is not None:
            self.resetbuffer()
            if not PY2:
                compiled = self._traceable(source, compiled)
        return compiled

    def _refuse(self, why):
        """Drop the block being typed, as a syntax error does, saying why (bounded input)."""
        self.resetbuffer()
        self.write("InputRefused: %s; nothing was compiled or run\n" % why)
        return None

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


# The frame that exec()s user code: the tracer's stack walk stops there (no re-entry).
_RUN_CODE = getattr(ReplConsole.run_compiled, "__func__", ReplConsole.run_compiled).__code__


# --------------------------------------------------------------------------- the server loop
class _Connection(object):
    """One client socket: its request head, then (once admitted) its body, then the response
    (one loop owns the sockets). ``trusted`` once the head carried the right token: only such a connection is
    given CLIENT_TIMEOUT and kept when the slots are full (token first)."""

    def __init__(self, sock, address, now, serial):
        self.sock = sock
        self.address = address
        self.serial = serial  # accept order: the oldest untrusted connection is evicted first
        self.inbuf = b""
        self.outbuf = b""
        self.request = None  # type: Request
        self.length = 0  # body bytes the admitted request announced
        self.answered = False
        self.trusted = False
        self.selected = False  # it has been in one select since it was accepted
        self.accepted = now
        self.deadline = now + HEADER_TIMEOUT


class ReplServer(TCPServer):
    """The listening socket (TCPServer binds and listens); the loop is ours (the rules above)."""
    request_queue_size = LISTEN_BACKLOG  # connections waiting to be accepted while we evict
    allow_reuse_address = True

    def __init__(self, address, app):
        self.app = app
        self.connections = []  # type: list
        self._serial = 0
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        TCPServer.__init__(self, address, None)
        self.socket.setblocking(False)

    def service(self, timeout):
        """One select round: read, answer, write, expire, then accept (never blocks past
        timeout). Accepting last lets a connection accepted last round be read before it
        can be evicted."""
        readers = [c.sock for c in self.connections if not c.answered]
        if len(self.connections) < MAX_CONNECTIONS or self._evictable():
            readers.append(self.socket)
        else:  # full: look again when the oldest connection without the token may be evicted
            waiting = [c.accepted for c in self.connections if not c.trusted]
            if waiting:
                timeout = max(0.0, min(timeout, min(waiting) + EVICT_GRACE - _clock()))
        writers = [c.sock for c in self.connections if c.outbuf]
        readable, writable, _ = select.select(readers, writers, [], timeout)
        now = _clock()
        for conn in list(self.connections):
            conn.selected = True
            if conn.sock in readable:
                self._read(conn, now)
            if conn in self.connections and (conn.sock in writable or (conn.answered and conn.outbuf)):
                self._write(conn)
            if conn in self.connections and now > conn.deadline:
                self._drop(conn)
        if self.socket in readable:
            self._accept(now)

    def _evictable(self, now=None):
        """The oldest connection without the token that has had its chance to send its head
        (``EVICT_GRACE``, and one select since it was accepted)."""
        before = (_clock() if now is None else now) - EVICT_GRACE
        candidates = [c for c in self.connections if not c.trusted and c.selected and c.accepted <= before]
        return min(candidates, key=lambda c: c.serial) if candidates else None

    def _accept(self, now):
        for _ in range(ACCEPTS_PER_ROUND):
            if len(self.connections) >= MAX_CONNECTIONS:
                victim = self._evictable(now)
                if victim is None:
                    return
                self.app.evicted += 1
                self._drop(victim)
            try:
                sock, address = self.socket.accept()
            except socket.error as exc:
                if exc.args and exc.args[0] in _WOULD_BLOCK:
                    return
                raise
            try:
                sock.setblocking(False)
            except socket.error:
                sock.close()
                continue
            self._serial += 1
            conn = _Connection(sock, address, now, self._serial)
            self.connections.append(conn)
            self._read(conn, now)  # a client that waited in the backlog has sent its head by now

    def _read(self, conn, now):
        try:
            data = conn.sock.recv(65536)
        except socket.error as exc:
            if exc.args and exc.args[0] in _WOULD_BLOCK:
                return
            return self._drop(conn)
        if not data:
            return self._drop(conn)
        conn.inbuf += data
        if conn.request is None:
            end = conn.inbuf.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEADER:
                if len(conn.inbuf) > MAX_HEADER:
                    self._refuse(conn, BadRequest(431, "request head larger than %d bytes" % MAX_HEADER))
                return
            head, conn.inbuf = conn.inbuf[:end], conn.inbuf[end + 4:]
            request = None
            try:
                request = Request(*(parse_head(head) + (conn.address,)))
                conn.length = self.app.admit(request)  # the token first, then the rest
            except BadRequest as exc:
                exc.request = request
                return self._refuse(conn, exc)
            conn.request, conn.trusted, conn.deadline = request, True, now + CLIENT_TIMEOUT
        if len(conn.inbuf) < conn.length:
            return
        conn.request.body, conn.inbuf = conn.inbuf[:conn.length], b""
        conn.outbuf = self.app.handle(conn.request)
        conn.answered = True

    def _refuse(self, conn, exc):
        """Answer at once and read no more: the body of a refused request is never read."""
        self.app.refused(conn.address, exc)
        conn.outbuf = http_response(exc.status, "%d %s: %s\n" % (exc.status, _REASONS.get(exc.status, "Error"),
                                                                 exc.reason))
        conn.answered = True
        conn.inbuf = b""

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
        TCPServer.server_close(self)


class _RateLimited(object):
    """Console lines at a bounded rate: ``LOG_BURST`` per ``LOG_WINDOW`` seconds; the lines
    held back are counted and the next line let through says how many."""

    def __init__(self, write):
        self._write = write
        self._window_end = 0.0
        self._used = 0
        self.suppressed = 0

    def __call__(self, text):
        now = _clock()
        if now >= self._window_end:
            self._window_end, self._used = now + LOG_WINDOW, 0
        if self._used >= LOG_BURST:
            self.suppressed += 1
            return
        self._used += 1
        if self.suppressed:
            text += " [%d similar lines not shown]" % self.suppressed
            self.suppressed = 0
        self._write(text)


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

    def __init__(self, bind="", port=DEFAULT_PORT, token=None, console=None, allow_hosts=()):
        self.console = console or sys.stdout  # the firmware console, kept while runs capture
        why = check_token(token) if token is not None else None
        if why:
            raise ValueError("webrepl: --token refused: " + why)
        self.token = token or make_token()
        self.token_source = "--token" if token else token_source()
        self.allow_hosts = tuple(h.lower().rstrip(".") for h in allow_hosts)
        self._untraced = _NETWORK_STACK  # and the firmware's stand-ins, from each run's _tracer()
        from bitsnet import netconsole
        netconsole.add_secret(self.token)  # the console mirrored over the network shows a mask instead
        self.transcript = Transcript()
        self.interpreter = ReplConsole(self.transcript)
        self.session = None  # type: _Session
        self.pending = None  # compiled code waiting for the top of the loop
        self.running = False
        self.interrupt_requested = False
        self.stopping = False
        self.denied = 0  # requests refused (any reason)
        self.evicted = 0  # connections without the token dropped to make room (token first)
        self.errors = 0  # faults of our own while serving
        self._refusal_log = _RateLimited(self.log)
        self._error_log = _RateLimited(self.log)
        self._next_service = 0.0
        self.server = ReplServer((bind, port), self)
        self.transcript.write("Python %s on bitsnet webrepl\n" % sys.version.split()[0])
        self.transcript.write("Ctrl-C or the Interrupt button stops a running command; exit() stops the server.\n")

    # ---- console output
    def log(self, message):
        if not isinstance(message, str):  # 2.7 unicode (header text): BITS's console takes ASCII only
            message = message.encode("ascii", "backslashreplace")
        elif not PY2:
            message = message.encode("ascii", "backslashreplace").decode("ascii")  # no raw bytes from a peer
        self.console.write("webrepl: %s\n" % message)
        flush = getattr(self.console, "flush", None)  # BITS's console object may have no flush
        if flush is not None:
            flush()

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
            self.errors += 1
            self._error_log("error while serving (%d so far):\n%s" % (self.errors, traceback.format_exc().rstrip()))

    def _run(self, compiled):
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdout = sys.stderr = _ConsoleFile(self.transcript)
        sys.stdin = _NoInput()
        self.running = True
        self.interrupt_requested = False
        self._next_service = _clock() + SERVICE_INTERVAL
        limit = sys.getrecursionlimit()
        if IN_BITS:
            sys.setrecursionlimit(_depth() + BITS_RECURSION)
        sys.settrace(self._tracer())
        try:
            self.interpreter.run_compiled(compiled)
        except SystemExit:
            self.transcript.write("[exit(): the web REPL stops; back to the boot prompt]\n")
            self.stopping = True
        except (Exception, KeyboardInterrupt):  # a fault (or an interrupt) while showing the user's error
            self.transcript.write("webrepl: internal error:\n" + traceback.format_exc())
        finally:
            sys.settrace(None)
            sys.setrecursionlimit(limit)
            sys.stdin, sys.stdout, sys.stderr = saved
            self.running = False
            if self.session is not None:
                self.session.last_seen = _clock()  # a long run is not a session gone idle

    def _tracer(self):
        """The trace functions ("code runs under the tracer", "no re-entry") as closures (the line
        tracer runs on every line)."""
        countdown = [TICKS]
        tick = self._tick
        untraced = self._untraced = _untraced()

        def trace_line(frame, event, arg):
            countdown[0] -= 1
            if countdown[0] <= 0:
                countdown[0] = TICKS
                tick(frame)
            return trace_line

        def trace_call(frame, event, arg):
            if str(frame.f_globals.get("__name__", "")).startswith(untraced):
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
            if str(walk.f_globals.get("__name__", "")).startswith(self._untraced):
                return  # inside the network stack: servicing now would re-enter it (no re-entry)
            walk = walk.f_back
        self._service(0)
        if self.interrupt_requested:
            self.interrupt_requested = False
            self.interpreter.raised_by_tracer = True
            raise KeyboardInterrupt

    # ---- admission (token first), then routes
    def admit(self, request):
        """Whether a request head may go on: the token before anything else, then Host and
        Origin (DNS rebinding, cross-site pages), then the body's announced length, which is
        returned. Raises BadRequest; nothing of the request has run or been buffered beyond
        its head."""
        token = request.header("X-Repl-Token") or request.param("token")
        if not tokens_equal(token, self.token):
            raise BadRequest(403, "wrong or missing access token; open the URL printed on the firmware console")
        host = request.header("Host")
        if not host and request.version != "HTTP/1.0":
            raise BadRequest(400, "no Host header")
        if host and not host_allowed(host, self.allow_hosts):
            raise BadRequest(403, "Host %s is not an address of this machine (--allow-host NAME allows a name)"
                             % host[:80])
        origin = request.header("Origin")
        if origin and origin.lower() != "http://" + host.lower():
            raise BadRequest(403, "a request from another origin (%s)" % origin[:80])
        if request.header("Sec-Fetch-Site") == "cross-site":
            raise BadRequest(403, "a request from another site")
        if "transfer-encoding" in request.headers:
            raise BadRequest(501, "chunked bodies are not supported")
        length = request.headers.get("content-length", "0")
        if not is_decimal(length) or len(length) > 9:  # not isdigit(): u"\xb2" is a digit to it, not to int()
            raise BadRequest(400, "bad Content-Length")
        if int(length) > MAX_BODY:
            raise BadRequest(413, "a body larger than %d bytes" % MAX_BODY)
        return int(length)

    def refused(self, address, exc):
        """Count a refusal and log it at a bounded rate (never a traceback: nothing failed)."""
        self.denied += 1
        request = getattr(exc, "request", None)
        what = "%s %s" % (request.command, request.path[:60]) if request is not None else "a request"
        self._refusal_log("refused %s from %s: %d %s (%d refused so far)"
                          % (what, address[0], exc.status, exc.reason, self.denied))

    def handle(self, request):
        """The response bytes for an admitted request. A fault of ours is answered 500 with its
        traceback (the browser shows it), logged at a bounded rate, and serving goes on."""
        try:
            self.dispatch(request)
        except Exception:
            self.errors += 1
            text = traceback.format_exc()
            self._error_log("error answering %s %s (%d so far): %s"
                            % (request.command, request.path[:60], self.errors, text.rstrip().splitlines()[-1]))
            request.reply(500, "500: the web REPL failed on this request; it keeps serving.\n" + text)
        if request.response is None:
            request.reply(500, "500: no response\n")
        return request.response

    def dispatch(self, request):
        path = request.path
        if path == "/" and request.command in ("GET", "HEAD"):
            return request.reply(200, PAGE, "text/html; charset=utf-8")
        if path == "/session" and request.command == "POST":
            return self._claim(request)
        ident = request.header("X-Repl-Session") or request.param("session")
        if self.session is None or not tokens_equal(ident, self.session.ident):
            return request.reply(409, "This page no longer holds the console (another browser took it over, or "
                                      "the server restarted). Reload to try again.\n",
                                 headers=[("X-Repl-Error", "session")])
        self.session.last_seen = _clock()
        if path == "/poll" and request.command == "GET":
            since = request.param("since", "0")
            if not is_decimal(since) or len(since) > 15:
                return request.reply(400, "since: a character offset (a decimal number) is expected\n")
            return self._state_reply(request, "", since=int(since))
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
        mine = held is not None and tokens_equal(request.header("X-Repl-Session"), held.ident)
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
        source = request.body.decode("utf-8", "replace")
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


def _depth():
    """Python frames on the stack now."""
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


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




USAGE = """usage: python -m bitsnet.webrepl [--port P] [--bind ADDR] [--token T] [--allow-host NAMES]

Serve a Python console for this machine's interpreter to a browser. Prints the URL to open,
with its access token. --port: TCP port (default %d); --bind: local address (default: all);
--token: use this access token instead of a random one (%d or more letters, digits, - . _ ~;
e.g. from openssl rand -hex 16 on another machine); --allow-host: comma-separated host
names the browser may use besides IP addresses and localhost (others are refused: DNS rebinding).
""" % (DEFAULT_PORT, MIN_TOKEN_CHARS)


def parse_args(argv):
    """(bind, port, token, allowed host names) from the command line (no argparse: small BITS
    trees lack it)."""
    options = {"--port": str(DEFAULT_PORT), "--bind": "", "--token": None, "--allow-host": ""}
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
    allow = tuple(name for name in options["--allow-host"].split(",") if name)
    why = check_token(options["--token"]) if options["--token"] is not None else None
    if why:
        raise SystemExit("webrepl: --token refused: %s\n%s" % (why, USAGE))
    return options["--bind"], port, options["--token"], allow


def main(argv=None):
    bind, port, token, allow = parse_args(sys.argv[1:] if argv is None else argv)
    WebRepl(bind, port, token, allow_hosts=allow).serve()


if __name__ == "__main__":
    main()
