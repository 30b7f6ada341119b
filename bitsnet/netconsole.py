"""bitsnet.netconsole: mirror the console (``sys.stdout`` and ``sys.stderr``) to a UDP receiver.

    python -m bitsnet.netconsole [--seq] [--syslog] [--dhcp-wait S] HOST[:PORT] -- MODULE [ARGS...]

runs MODULE as ``python -m`` would, with everything it prints mirrored line by line to
HOST:PORT (default 6666, netconsole's) over UDP; from code, ``start(host, port)`` and
``stop()``. On the host, ``nc -u -l 6666`` (or ``socat -u UDP-RECV:6666 -``, or any Linux
netconsole receiver) shows the lines. With ``--syslog`` (``start(..., syslog=True)``) every
line is an RFC 5424 syslog message instead (``bitsnet.syslog``: the machine's SMBIOS identity
as HOSTNAME, APP-NAME ``bits``, the run id as PROCID, the stream as MSGID; default port 514),
for rsyslog, journald-remote or Graylog (docs/lab.md section 4).

Contents: ``start``, ``stop``, ``active``, ``add_secret``, ``NetConsole`` (the two streams and their stats),
``MirrorStream`` (what ``sys.stdout``/``sys.stderr`` are while it runs), ``Sender`` (the UDP
side: queue, socket, network bring-up), ``main``.

Rules -- a console is the last thing that may break
----------------------------------------------------
Console first: the local console sees exactly what it saw before. ``MirrorStream.write`` writes
    through to the stream it replaced first, returns what that returned, and lets its
    exceptions propagate (text the console refused is not mirrored either); only then is the
    text mirrored. Nothing is assumed of the replaced stream beyond ``write`` (BITS's console
    object has ``write`` and perhaps ``flush``); other attributes are looked up on it.
Never raises, never waits: mirroring never raises into the user's ``print`` and never waits
    on the network. The socket is non-blocking; a send that would block leaves the datagram queued for the next
    write; any other failure (no route, no address, ICMP unreachable) drops that datagram and
    is counted (``stats()``). A bug of ours is counted the same way, not raised.
One datagram per line: text is buffered per stream until a newline, so stdout and stderr
    never cut into each other's lines; a line longer than ``PAYLOAD`` bytes, or a
    partial line that grows that long, goes out in ``PAYLOAD``-byte pieces (cut on a UTF-8
    character boundary) that concatenate back to the line, as Linux's netconsole does with its
    1000-byte chunks. ``stop()`` sends a trailing partial line with a newline added, because
    receivers expect lines that end in "\\n".
No recursion: text written while the mirroring path runs (bitsnet's own DHCP progress, a
    warning printed by the socket layer) goes to the console at once ("console first") and is
    mirrored after the current text, by the outermost call.
Bounded bring-up: with bitsnet installed, ``start()`` brings the NIC up through
    ``bitsnet.ipconfig.ensure_configured(dhcp_wait)`` -- DHCP only if the NIC has no address,
    waited for at most ``DHCP_WAIT`` seconds (3 s; a lab server answers in well under one).
    EDK2 goes on with DHCP in the background after we stop waiting (docs/edk2.md section 5.2), so while the
    network is down a write only reads the NIC's address (``ipconfig.current()``: one
    GetData, no DHCP restart, no wait), at most once per retry interval (0.5 s doubling to
    8 s), and mirroring starts when the address shows. Meanwhile the last ``QUEUE_LIMIT``
    datagrams are kept and go out first; older ones are dropped and counted.

Sequence numbers (``--seq``, ``start(..., seq=True)``): every datagram then begins with its
number in decimal and a space ("17 text..."), counting from 0 every datagram made, including
those dropped before sending, so a receiver sees a gap for every datagram lost anywhere (in
syslog mode the number is RFC 5424's ``[meta sequenceId="N"]``, counting from 1). Off
by default: plain lines are what ``nc`` and standard netconsole receivers show. Linux's
extended format ("6,17,123456,-;text", ``ncfrag=`` for pieces) was not chosen: its numbers
count printk records rather than datagrams and its timestamp is kernel-specific.

Secrets (``add_secret``): the mirror goes over the network in clear, so text registered as
secret (the web REPL's access token) is replaced by ``MASK`` in every datagram, wherever a
write cut it; the local console still shows it. A partial line keeps its last bytes back (as
many as the longest secret, less one) so a secret cannot straddle two datagrams unmasked.

Limits: text written past ``sys.stdout`` (``sys.stdout.buffer``, ``os.write``, BITS's own C
output) is not mirrored; a partial line waits for its newline (or ``stop()``); one thread
(BITS has no others: writes from two threads at once may lose mirrored text); IPv4 only;
a host name is resolved when the socket is opened (prefer an address: a name costs a DNS
lookup, with its timeout, on every retry while it does not resolve).
"""

from __future__ import absolute_import, print_function

import collections
import errno
import sys

from bitsnet import clock, results

_clock = clock.monotonic  # bitsnet's one clock: deadlines handed to bitsnet are in it
PY2 = sys.version_info[0] == 2
_text_type = unicode if PY2 else str  # type: ignore[name-defined]  # noqa: F821

DEFAULT_PORT = 6666  # the Linux netconsole's default receiver port
SYSLOG_PORT = 514  # syslog over UDP (RFC 5426)
# Bytes of text per datagram: Linux netconsole's MAX_PRINT_CHUNK. Fits one Ethernet frame
# (1500 - 20 IP - 8 UDP) with room to spare, so no IP fragmentation, which neither
# every receiver path nor the simulator handles.
PAYLOAD = 1000
SEQ_ROOM = 21  # bytes kept for "<seq> " (a 20-digit number and a space) when seq=True
QUEUE_LIMIT = 256  # datagrams kept while they cannot be sent (network down, send would block)
DHCP_WAIT = 3.0  # s start() waits for DHCP (bounded bring-up); OVMF on QEMU leases in about 4 s
RETRY_MIN = 0.5  # s between checks for an address while the network is down ...
RETRY_MAX = 8.0  # ... doubling up to this
STOP_SEND_TIMEOUT = 0.2  # s stop() may wait for one queued datagram that would block
STOP_BUDGET = 1.0  # s stop() spends at most on the queue
DEFERRED_ROUNDS = 8  # no recursion: rounds of re-entrant text one outer write mirrors (the rest waits)
_WOULD_BLOCK = (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS)

MASK = b"[hidden: shown on the local console only]"

_state = {"active": None}  # the running NetConsole (one at a time: it owns sys.stdout/stderr)
_secrets = []  # type: list   # bytes never mirrored (add_secret), longest first


def add_secret(text):
    """Never mirror ``text`` (e.g. an access token): it is replaced by ``MASK`` in what goes
    over the network, for this and any later netconsole. Empty text is ignored."""
    data = _encode(text)
    if data and data not in _secrets:
        _secrets.append(data)
        _secrets.sort(key=len, reverse=True)


def _mask(data):
    for secret in _secrets:
        if secret in data:
            data = data.replace(secret, MASK)
    return data


def _held_back():
    """Bytes a partial line keeps back so a secret still being written is not cut (Secrets)."""
    return max([len(s) - 1 for s in _secrets] or [0])


# --------------------------------------------------------------------------- text to datagrams
def _encode(text):
    """The bytes to mirror for one ``write`` argument (py2 str is already bytes)."""
    if isinstance(text, bytes):
        return text
    if isinstance(text, bytearray):
        return bytes(text)
    if not isinstance(text, _text_type):
        text = _text_type(text)
    return text.encode("utf-8", "replace")


def _cut(data, limit):
    """Where to cut ``data`` so the first piece is at most ``limit`` bytes and, if the text is
    UTF-8, does not end inside a character (continuation bytes are 10xxxxxx)."""
    if len(data) <= limit:
        return len(data)
    cut = limit
    while cut > limit - 3 and bytearray(data[cut:cut + 1])[0] & 0xC0 == 0x80:
        cut -= 1
    return cut if bytearray(data[cut:cut + 1])[0] & 0xC0 != 0x80 else limit


def _errno_of(exc):
    code = getattr(exc, "errno", None)
    if code is None and getattr(exc, "args", None) and isinstance(exc.args[0], int):
        code = exc.args[0]
    return code


def _describe(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def _bitsnet_installed():
    module = sys.modules.get("_socket")
    return module is not None and getattr(module, "__name__", "") == "bitsnet._socket"


# --------------------------------------------------------------------------- the UDP side
class Sender(object):
    """The queue of datagrams, the non-blocking UDP socket, and the network bring-up (bounded bring-up)."""

    def __init__(self, host, port, seq=False, syslog=None):
        self.host, self.port, self.seq = host, int(port), bool(seq)
        self.syslog = syslog  # a bitsnet.syslog.SyslogFormat, or None: plain lines
        if syslog is not None:
            self.limit = PAYLOAD - syslog.room()
        else:
            self.limit = PAYLOAD - SEQ_ROOM if self.seq else PAYLOAD
        self.queue = collections.deque()  # type: collections.deque
        self.sock = None
        self.target = None  # type: tuple   # (address, port) once resolved
        self.next_seq = 0
        self.sent = 0
        self.dropped = 0  # datagrams never sent: queue overflow, send errors, left at stop()
        self.errors = 0  # failures seen: sends refused, bring-up attempts failed, our own bugs
        self.last_error = None  # type: str
        self._retry_at = 0.0
        self._retry_delay = RETRY_MIN

    def note_error(self, text):
        self.errors += 1
        self.last_error = text

    def enqueue(self, piece, stream="stdout"):
        """Queue one datagram's text (one datagram per line made the pieces); the oldest goes when full."""
        if self.syslog is not None:
            piece = self.syslog.message(piece, stream, self.next_seq if self.seq else None)
        elif self.seq:
            piece = ("%d " % self.next_seq).encode("ascii") + piece
        self.next_seq += 1
        self.queue.append(piece)
        while len(self.queue) > QUEUE_LIMIT:
            self.queue.popleft()
            self.dropped += 1

    # ---- bring-up
    def open(self, dhcp_wait=0.0):
        """Open the socket if the network is up (waiting up to ``dhcp_wait`` s for DHCP when
        bitsnet is installed); on failure note it and back off. Returns whether it is open."""
        if self.sock is not None:
            return True
        try:
            if _bitsnet_installed():
                from bitsnet import ipconfig
                if dhcp_wait > 0:
                    ipconfig.ensure_configured(dhcp_wait)  # prints its progress (no recursion)
                elif ipconfig.current() is None:
                    raise EnvironmentError(errno.ENETDOWN, "the NIC has no address yet")
            import socket  # now, not at import: bitsnet.install() may have replaced it since
            family, kind = socket.AF_INET, socket.SOCK_DGRAM
            target = socket.getaddrinfo(self.host, self.port, family, kind)[0][4]
            sock = socket.socket(family, kind)
            try:
                sock.setblocking(False)
            except Exception:
                sock.close()
                raise
        except Exception as exc:
            self.note_error(_describe(exc))
            self._retry_at = _clock() + self._retry_delay
            self._retry_delay = min(RETRY_MAX, self._retry_delay * 2)
            return False
        self.sock, self.target = sock, (target[0], target[1])
        self._retry_delay = RETRY_MIN
        return True

    def _ready(self):
        return self.sock is not None or (_clock() >= self._retry_at and self.open())

    # ---- sending
    def drain(self, deadline=None):
        """Send queued datagrams until the queue is empty or a send would block (never raises, never waits).
        With ``deadline`` (stop()), a send that would block may wait a little instead."""
        if not self.queue or not self._ready():
            return
        while self.queue:
            if deadline is not None:
                left = deadline - _clock()
                if left <= 0:
                    return
                self.sock.settimeout(min(STOP_SEND_TIMEOUT, left))
            data = self.queue[0]
            try:
                self.sock.sendto(data, self.target)
            except Exception as exc:
                if _errno_of(exc) in _WOULD_BLOCK and deadline is None:
                    return  # the firmware's transmit slots are busy: the next write tries again
                self.queue.popleft()
                self.dropped += 1
                self.note_error(_describe(exc))
                continue
            self.queue.popleft()
            self.sent += 1

    def close(self):
        """Last chance for the queue (bounded by STOP_BUDGET), then close the socket."""
        if self.queue and self.sock is None:
            self._retry_at = 0.0
        self.drain(_clock() + STOP_BUDGET)
        self.dropped += len(self.queue)
        self.queue.clear()
        if self.sock is not None:
            try:
                self.sock.close()
            except Exception as exc:
                self.note_error(_describe(exc))
            self.sock = None


# --------------------------------------------------------------------------- the streams
class MirrorStream(results.TeeStream):
    """``sys.stdout`` or ``sys.stderr`` while a NetConsole runs: the replaced stream first
    (console first), then the text into this stream's line buffer (one datagram per line). After ``stop()`` (if
    someone still holds it) it is a plain pass-through to the stream it replaced. Everything
    but ``write`` (``flush``, ``encoding``, ``isatty``...) is the TeeStream's: the replaced
    stream's."""

    def __init__(self, original, console, name="stdout"):
        results.TeeStream.__init__(self, original, None)
        self._console = console
        self._name = name  # "stdout" or "stderr" (the syslog severity and MSGID)
        self._pending = b""  # this stream's partial line (one datagram per line)

    def write(self, text):
        result = self._original.write(text)
        console = self._console
        if console is not None:
            console.mirror(self, text)
        return result

    def __repr__(self):
        return "<bitsnet.netconsole.MirrorStream of %r>" % (self._original,)

    # ---- one datagram per line (called by NetConsole only, inside its guard)
    def _feed(self, data, sender):
        pending = self._pending + data
        start = 0
        while True:
            end = pending.find(b"\n", start)
            if end < 0:
                break
            self._pieces(pending[start:end + 1], sender, self._name)
            start = end + 1
        rest = pending[start:]
        hold = _held_back()
        while len(rest) >= sender.limit + hold:  # a partial line a datagram long goes out now
            rest = _mask(rest)  # a secret cut in two by this piece would be (hold) bytes further on
            if len(rest) < sender.limit + hold:
                break
            cut = _cut(rest, sender.limit)
            sender.enqueue(rest[:cut], self._name)
            rest = rest[cut:]
        self._pending = rest

    @staticmethod
    def _pieces(line, sender, name):
        line = _mask(line)
        while line:
            cut = _cut(line, sender.limit)
            sender.enqueue(line[:cut], name)
            line = line[cut:]

    def _flush_partial(self, sender):
        if self._pending:
            self._pieces(self._pending + b"\n", sender, self._name)
            self._pending = b""


class NetConsole(object):
    """The mirroring of ``sys.stdout`` and ``sys.stderr`` to one receiver (see ``start``)."""

    def __init__(self, host, port=DEFAULT_PORT, seq=False, syslog=None):
        self.sender = Sender(host, port, seq, syslog)
        self.saved = (sys.stdout, sys.stderr)
        self.stdout = MirrorStream(sys.stdout, self, "stdout")
        self.stderr = MirrorStream(sys.stderr, self, "stderr")
        self._busy = False
        self._deferred = []  # type: list   # (stream, bytes) written during mirroring (no recursion)
        self.stopped = False

    @property
    def address(self):
        return "%s:%d" % (self.sender.host, self.sender.port)

    def install(self, dhcp_wait):
        sys.stdout, sys.stderr = self.stdout, self.stderr
        self._guarded(lambda: self.sender.open(dhcp_wait), drain=True)

    def mirror(self, stream, text):
        """Called by MirrorStream.write after the console took ``text`` (never raises, never waits; no recursion)."""
        try:
            data = _encode(text)
        except Exception as exc:
            self.sender.note_error(_describe(exc))
            return
        if not data:
            return
        if self._busy:
            self._deferred.append((stream, data))  # no recursion: the outer call mirrors it
            if len(self._deferred) > QUEUE_LIMIT:
                del self._deferred[0]
                self.sender.dropped += 1
            return
        self._guarded(lambda: stream._feed(data, self.sender))

    def _guarded(self, action, drain=False):
        """Run ``action`` with re-entrant text deferred (no recursion), then mirror that text, and
        send if anything was queued: a write that only extends a partial line sends nothing,
        so what the send path prints never lands inside a line the console is showing."""
        self._busy = True
        try:
            made = self.sender.next_seq
            action()
            for _ in range(DEFERRED_ROUNDS):
                while self._deferred:
                    stream, data = self._deferred.pop(0)
                    stream._feed(data, self.sender)
                if not drain and self.sender.next_seq == made:
                    break
                drain, made = False, self.sender.next_seq
                self.sender.drain()
                if not self._deferred:
                    break
        except Exception as exc:  # never raises, never waits: counted, never raised into the user's print
            self.sender.note_error("netconsole: " + _describe(exc))
        finally:
            self._busy = False

    def stats(self):
        """{sent, dropped, queued, errors, last_error, address, connected} (a dict)."""
        s = self.sender
        return {"sent": s.sent, "dropped": s.dropped, "queued": len(s.queue), "errors": s.errors,
                "last_error": s.last_error, "address": self.address, "connected": s.sock is not None}

    def close(self):
        """Put back the streams this replaced (those still in place), send what is left."""
        if self.stopped:
            return self.stats()
        self.stopped = True
        for name, mine, original in (("stdout", self.stdout, self.saved[0]), ("stderr", self.stderr, self.saved[1])):
            mine._console = None  # a pass-through from now on, whoever still holds it
            if getattr(sys, name) is mine:
                setattr(sys, name, original)
            # else: someone replaced it after us; putting ours back would undo their change
        self._busy = True  # anything printed from here on goes to the console only
        try:
            del self._deferred[:]  # text of a write still running when stop() was called
            for stream in (self.stdout, self.stderr):
                stream._flush_partial(self.sender)
            self.sender.close()
        except Exception as exc:
            self.sender.note_error("netconsole: " + _describe(exc))
        finally:
            self._busy = False
        return self.stats()


# --------------------------------------------------------------------------- the API
def start(host, port=None, seq=False, dhcp_wait=DHCP_WAIT, syslog=False, hostname=None, app_name=None):
    """Mirror ``sys.stdout`` and ``sys.stderr`` to UDP ``host``:``port`` until ``stop()``.

    Returns the NetConsole (``.stats()``). A running netconsole is stopped first, so the
    streams wrapped are always the plain ones. With bitsnet installed the NIC is brought up
    first (DHCP waited for at most ``dhcp_wait`` s); a network that is down is not an error:
    mirroring starts when it comes up (module docstring, bounded bring-up). ``syslog``: RFC 5424
    messages (``port`` default 514) with ``hostname`` (default: the machine's identity,
    ``bitsnet.machineid``) and ``app_name`` (default ``bits``)."""
    stop()
    form = None
    if syslog:
        form = _syslog_format(hostname, app_name)
    if port is None:
        port = SYSLOG_PORT if syslog else DEFAULT_PORT
    console = NetConsole(host, port, seq, form)
    _state["active"] = console
    console.install(dhcp_wait)
    return console


def _syslog_format(hostname, app_name):
    from bitsnet import machineid, syslog
    ident = machineid.identity()
    if hostname is None:
        hostname = ident["machine"] if ident["machine"] != machineid.UNKNOWN else None
    return syslog.SyslogFormat(hostname, app_name or syslog.APP_NAME, ident["run"])


def stop():
    """Restore ``sys.stdout``/``sys.stderr`` and close the socket; idempotent. Returns the
    final stats (see ``NetConsole.stats``), or None if nothing was running."""
    console = _state["active"]
    if console is None:
        return None
    _state["active"] = None
    return console.close()


def active():
    """The running NetConsole, or None."""
    return _state["active"]


# --------------------------------------------------------------------------- command line
USAGE = """usage: python -m bitsnet.netconsole [--seq] [--syslog] [--hostname NAME] [--app-name NAME]
                                    [--dhcp-wait S] HOST[:PORT] [--] MODULE [ARGS...]

Run MODULE (as python -m does) with sys.stdout and sys.stderr mirrored line by line to UDP
HOST:PORT (default port %d). Receive with: nc -u -l %d
--seq: prefix every datagram with its sequence number (gaps show drops).
--syslog: send RFC 5424 syslog messages (default port %d); --hostname and --app-name
  replace the machine's SMBIOS identity and "bits" in them.
--dhcp-wait S: seconds to wait for DHCP if the NIC has no address (default %.1f).
""" % (DEFAULT_PORT, DEFAULT_PORT, SYSLOG_PORT, DHCP_WAIT)


def parse_args(argv):
    """(host, port, options, module, module_args); ``options``: seq, dhcp_wait, syslog,
    hostname, app_name (``start``'s keywords); no argparse (small BITS trees)."""
    args = list(argv)
    options = {"seq": False, "dhcp_wait": DHCP_WAIT, "syslog": False, "hostname": None, "app_name": None}
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("-h", "--help"):
            raise SystemExit(USAGE)
        if name in ("--seq", "--syslog") and not eq:
            options[name[2:]] = True
        elif name in ("--dhcp-wait", "--hostname", "--app-name") and (eq or args):
            value = value if eq else args.pop(0)
            if name != "--dhcp-wait":
                options[name[2:].replace("-", "_")] = value
                continue
            try:
                options["dhcp_wait"] = float(value)
            except ValueError:
                raise SystemExit("netconsole: --dhcp-wait needs a number\n" + USAGE)
        else:
            raise SystemExit("netconsole: bad argument %r\n%s" % (arg, USAGE))
    if not args:
        raise SystemExit("netconsole: HOST[:PORT] missing\n" + USAGE)
    host, colon, port_text = args.pop(0).rpartition(":")
    port = None  # the mode's default
    if not colon:
        host = port_text
    else:
        try:
            port = int(port_text)
        except ValueError:
            raise SystemExit("netconsole: bad port %r\n%s" % (port_text, USAGE))
    if args and args[0] == "--":
        args.pop(0)
    if not args:
        raise SystemExit("netconsole: MODULE missing\n" + USAGE)
    return host, port, options, args[0], args[1:]


def main(argv=None):
    host, port, options, module, module_args = parse_args(sys.argv[1:] if argv is None else argv)
    from bitsnet import launch  # BITS has no runpy (docs/bits-environment.md section 2)
    console = start(host, port, **options)
    mode = "as syslog messages" if options["syslog"] else "over UDP"
    if console.sender.sock is not None:
        print("netconsole: mirroring the console to %s %s" % (console.address, mode))
    else:
        print("netconsole: network not up yet (%s); mirroring to %s starts when it is"
              % (console.sender.last_error, console.address))
    try:
        # As python -m: a traceback (KeyboardInterrupt's too) is printed, mirrored with the rest.
        status = launch.run_module(module, module_args)
    finally:
        stats = stop()
    if stats is not None and (stats["dropped"] or stats["errors"]):
        sys.stderr.write("netconsole: %d datagrams sent, %d dropped to %s (last error: %s)\n"
                         % (stats["sent"], stats["dropped"], stats["address"], stats["last_error"]))
    raise SystemExit(status)


if __name__ == "__main__":
    # Run as python -m, this file is __main__; the netconsole's state must live in the module
    # bitsnet.netconsole, where active() and stop() find it (the selftest's leak check, programs).
    from bitsnet import netconsole as _module
    _module.main()
