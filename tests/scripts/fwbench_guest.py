"""tools/fwbench.py's measurements inside real BITS: raw EFI loops, bitsnet's socket API, BITS's own.

    fwbench_guest.py --peer HOST:PORT --http PORT [--size N] [--send-size N] [--trips N]
                     [--conns N] SECTION...

The peer is tools/bench.py's (``--serve-peer``): 'S'+u64 bulk source, 'K'+u64 sink answering
'k', 'E' echo, 'C' one-byte echo then close; HTTP GET /bytes/N.  tests/firmware/bench.c speaks
the same protocol, so every figure here has its C counterpart.

Sections:
  c         tests/firmware/bench.c, loaded from /boot/bitsrun/bench.efi with LoadImage (from memory)
            and started with its configuration as LoadOptions: the C ceiling, in this same boot;
            it prints its own ``@@ fig NAME VALUE`` lines straight to the serial port.  Once it
            ran, every later figure of raw and api is preceded by its own C run of the same kind
            (``pair``): the host divides each Python figure by the C figure just before it
  raw       the leanest raw-EFI Python loop: one Receive (64 KiB, one buffer and token reused),
            Poll until CheckEvent says it completed -- ``raw_recv`` re-posts at once,
            ``raw_recv_batch`` Polls 16 times first (bitsnet's trick); ``raw_send``; ``raw_trips``
  api       the socket module in place (bitsnet or BITS's own): recv_into, recv, makefile().read(),
            urllib2, sendall, 1-byte round trips, connections
  profile   bitsnet's receive path counted (recv_into download): Polls, Receives, Python calls
            per frame and where the time goes (TSC)
  batch     A/B of stack.POLL_BATCH over --batches (alternating, --reps times): recv_into, recv
  sendab    A/B of stack.SEND_POLL_BATCH over --batches (alternating, --reps times): sendall
  copies    what a copy of the payload costs (GRUB's byte-wise memcpy): slice, join, string_at, the
            stdlib _fileobject's 8 KiB slices + cStringIO; and how much heap there is
  fileab    A/B of makefile().read() and urllib2 through the stdlib's socket._fileobject and
            bitsnet.fileobject's (alternating, --reps times; figures NAME_stdlib, NAME_bitsnet),
            recv beside them as the reference

Each figure is one line ``fig NAME VALUE`` (MB/s or per second, '%.3f'); ``info`` lines are
notes; ``prof`` lines the profile table, ``copy`` lines those of section copies.  Runs on BITS's
Python 2.7 (lints on 3).
"""

from __future__ import print_function

import ctypes
import struct
import sys
import time

CHUNK = 64 * 1024
FRAME = 1448  # TCP payload of one 1500-byte frame with timestamps: the unit of "per frame"
OPTS = {"size": 8 * 1024 * 1024, "send_size": 8 * 1024 * 1024, "trips": 300, "conns": 20, "repeat": 1,
        "reps": 5, "batches": "16,32"}


def say(text):
    print(text)
    sys.stdout.flush()


def fig(name, value):
    say("fig %s %.3f" % (name, value))


def header(command, size=0):
    return command + (struct.pack("!Q", size) if command in (b"S", b"K") else b"")


def elapsed(start):
    return max(time.time() - start, 0.001)


# ---------------------------------------------------------------- the C ceiling
_PAIRED = {"on": False}  # section c found the C app: every later figure gets its own C run first


def run_c(opts, size=0, send_size=0, trips=0, conns=0):
    """bench.efi once, with this configuration; it prints its own "@@ fig" lines."""
    import efi
    bs = efi.system_table.BootServices.contents
    with open("/boot/bitsrun/bench.efi", "rb") as handle:
        data = handle.read()
    image = ctypes.create_string_buffer(data, len(data))
    child = efi.EFI_HANDLE()
    efi.check_status(bs.LoadImage(False, efi._efi._image_handle, None, ctypes.addressof(image), len(data),
                                  ctypes.byref(child)))
    loaded = efi.EFI_LOADED_IMAGE_PROTOCOL.from_handle(child.value)
    line = "%d %d %d %d %d 1 8" % (opts["port"], size, send_size, trips, conns)
    options = ctypes.create_string_buffer(line.encode("ascii"))
    loaded.LoadOptions = ctypes.addressof(options)
    loaded.LoadOptionsSize = len(line)
    exit_size = efi.UINTN()
    exit_data = ctypes.POINTER(efi.CHAR16)()
    # An application that returns from its entry point is unloaded by the firmware (UEFI spec).
    return bs.StartImage(child.value, ctypes.byref(exit_size), ctypes.byref(exit_data))


def pair(opts, kind):
    """The C figure of this kind, measured right before the Python one (the host pairs them)."""
    if not _PAIRED["on"]:
        return
    if kind == "recv":
        run_c(opts, size=opts["size"])
    elif kind == "send":
        run_c(opts, send_size=opts["send_size"])
    elif kind == "trips":
        run_c(opts, trips=opts["trips"])
    else:
        run_c(opts, conns=opts["conns"])


def section_c(opts):
    try:  # bitsnet restarts the stopped timer (DHCP needs it) and brings the address up first
        from bitsnet import ipconfig
        ipconfig.ensure_configured()
    except ImportError:
        pass  # BITS's own socket: tools/bitsrun.py restarted the timer; the C app waits for DHCP
    status = run_c(opts, opts["size"], opts["send_size"], opts["trips"], opts["conns"])
    say("info c status %d" % status)
    _PAIRED["on"] = status == 0


# ---------------------------------------------------------------- the raw-EFI loop
class Raw(object):
    """One TCP4 child driven with Type-0 events and CheckEvent: nothing but the EFI calls."""

    def __init__(self, host, port):
        import efi
        from bitsnet import efidefs, ipconfig
        ipconfig.ensure_configured()  # DHCP, through bitsnet: the raw loop's Configure needs the address
        self.efi, self.d = efi, efidefs
        self.bs = efi.system_table.BootServices.contents
        self.events = []
        handles = efi.locate_handles(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
        self.sb = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL.from_handle(handles[0])
        self.host, self.port = host, port

    def event(self):
        event = self.efi.EFI_EVENT()
        self.efi.check_status(self.bs.CreateEvent(0, 0, self.efi.EFI_EVENT_NOTIFY(), None, ctypes.byref(event)))
        self.events.append(event.value)
        return event.value

    def connect(self):
        handle = self.efi.EFI_HANDLE()
        self.efi.check_status(self.sb.CreateChild(ctypes.byref(self.sb), ctypes.byref(handle)))
        proto = self.d.EFI_TCP4_PROTOCOL.from_handle(handle.value)
        cfg = self.d.EFI_TCP4_CONFIG_DATA()
        cfg.TimeToLive = 64
        ap = cfg.AccessPoint
        ap.UseDefaultAddress = True
        ap.RemoteAddress = self.d.ipv4(self.host)
        ap.RemotePort = self.port
        ap.ActiveFlag = True
        self.efi.check_status(proto.Configure(ctypes.byref(proto), ctypes.byref(cfg)))
        token = self.d.EFI_TCP4_CONNECTION_TOKEN()
        token.CompletionToken.Event = self.event()
        self.efi.check_status(proto.Connect(ctypes.byref(proto), ctypes.byref(token)))
        self.efi.check_status(self.wait(proto, token.CompletionToken))
        return handle.value, proto

    def wait(self, proto, completion):
        check, event, poll, this = self.bs.CheckEvent, completion.Event, proto.Poll, ctypes.byref(proto)
        deadline = time.time() + 30
        while check(event) != 0:
            poll(this)
            if time.time() > deadline:
                raise RuntimeError("raw EFI wait timed out")
        return completion.Status

    def io(self, size, tx=False):
        token = self.d.EFI_TCP4_IO_TOKEN()
        token.CompletionToken.Event = self.event()
        packet = (self.d.EFI_TCP4_TRANSMIT_DATA if tx else self.d.EFI_TCP4_RECEIVE_DATA)()
        buf = ctypes.create_string_buffer(size)
        packet.DataLength = size
        packet.FragmentCount = 1
        packet.FragmentTable[0].FragmentLength = size
        packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
        if tx:
            packet.Push = True
            token.Packet.TxData = ctypes.pointer(packet)
        else:
            token.Packet.RxData = ctypes.pointer(packet)
        token.packet, token.buf, token.frag = packet, buf, packet.FragmentTable[0]
        return token

    def send(self, proto, token, data):
        ctypes.memmove(token.buf, data, len(data))
        token.packet.DataLength = token.frag.FragmentLength = len(data)
        self.efi.check_status(proto.Transmit(ctypes.byref(proto), ctypes.byref(token)))
        self.efi.check_status(self.wait(proto, token.CompletionToken))

    def receive(self, proto, token, size):
        token.packet.DataLength = token.frag.FragmentLength = size
        status = proto.Receive(ctypes.byref(proto), ctypes.byref(token))
        if status == self.efi.EFI_CONNECTION_FIN:
            return 0
        self.efi.check_status(status)
        status = self.wait(proto, token.CompletionToken)
        if status == self.efi.EFI_CONNECTION_FIN:
            return 0
        self.efi.check_status(status)
        return token.packet.DataLength

    def destroy(self, handle):
        self.sb.DestroyChild(ctypes.byref(self.sb), handle)

    def finish(self):
        for event in self.events:
            self.bs.CloseEvent(event)


def raw_recv(raw, size, batch):
    handle, proto = raw.connect()
    tx, rx = raw.io(16, tx=True), raw.io(CHUNK)
    this = ctypes.byref(proto)
    start = time.time()
    raw.send(proto, tx, header(b"S", size))
    got = 0
    while got < size:
        n = raw.receive(proto, rx, CHUNK)
        if not n:
            break
        got += n
        for _ in range(batch):
            proto.Poll(this)
    seconds = elapsed(start)
    raw.destroy(handle)
    return got, seconds


def section_raw(opts):
    raw = Raw(opts["host"], opts["port"])
    try:
        size = opts["size"]
        for name, batch in (("raw_recv", 0), ("raw_recv_batch", 16)):
            pair(opts, "recv")
            got, seconds = raw_recv(raw, size, batch)
            if got != size:
                say("info %s short %d" % (name, got))
            fig(name, got / seconds / 1e6)
        pair(opts, "send")
        handle, proto = raw.connect()
        tx, rx = raw.io(CHUNK, tx=True), raw.io(16)
        start = time.time()
        raw.send(proto, tx, header(b"K", opts["send_size"]))
        left = opts["send_size"]
        while left:
            n = min(left, CHUNK)
            raw.send(proto, tx, b"b" * n)
            left -= n
        raw.receive(proto, rx, 16)
        fig("raw_send", opts["send_size"] / elapsed(start) / 1e6)
        raw.destroy(handle)
        pair(opts, "trips")
        handle, proto = raw.connect()
        tx, rx = raw.io(16, tx=True), raw.io(16)
        raw.send(proto, tx, b"E")
        start = time.time()
        for _ in range(opts["trips"]):
            raw.send(proto, tx, b"x")
            raw.receive(proto, rx, 16)
        fig("raw_trips", opts["trips"] / elapsed(start))
        raw.destroy(handle)
    finally:
        raw.finish()


# ---------------------------------------------------------------- the socket API
def connect(socket, opts):
    sock = socket.create_connection((opts["host"], opts["port"]), 30)
    if hasattr(socket, "TCP_NODELAY"):  # BITS's own _socket has no TCP options
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def api_recv(socket, opts, how):
    size = opts["size"]
    if how == "urllib":
        import urllib2
        start = time.time()
        response = urllib2.urlopen("http://%s:%d/bytes/%d" % (opts["host"], opts["http"], size), timeout=30)
        got = 0
        while True:
            data = response.read(CHUNK)
            if not data:
                break
            got += len(data)
        response.close()
        return got, elapsed(start)
    sock = connect(socket, opts)
    start = time.time()
    sock.sendall(header(b"S", size))
    got = 0
    if how == "recv_into":
        buf = bytearray(CHUNK)
        while got < size:
            n = sock.recv_into(buf)
            if not n:
                break
            got += n
    elif how == "recv":
        while got < size:
            data = sock.recv(CHUNK)
            if not data:
                break
            got += len(data)
    else:
        stream = sock.makefile("rb")
        got = len(stream.read())
        stream.close()
    seconds = elapsed(start)
    sock.close()
    return got, seconds


def api_send(socket, opts, sndbuf=None):
    size = opts["send_size"]
    if sndbuf is None:
        sock = connect(socket, opts)
    else:  # options reach EDK2 at Configure: set before connect
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(30)
        sock.connect((opts["host"], opts["port"]))
    block = b"b" * (16 * CHUNK)
    start = time.time()
    sock.sendall(header(b"K", size))
    left = size
    while left:
        n = min(left, len(block))
        sock.sendall(block if n == len(block) else block[:n])
        left -= n
    reply = sock.recv(1)
    seconds = elapsed(start)
    sock.close()
    return reply == b"k", seconds


def api_trips(socket, opts):
    sock = connect(socket, opts)
    sock.sendall(b"E")
    start = time.time()
    for _ in range(opts["trips"]):
        sock.sendall(b"x")
        if sock.recv(1) != b"x":
            raise AssertionError("echo")
    seconds = elapsed(start)
    sock.close()
    return opts["trips"] / seconds


def api_conns(socket, opts):
    start = time.time()
    for _ in range(opts["conns"]):
        sock = connect(socket, opts)
        sock.sendall(b"Cx")
        if sock.recv(1) != b"x":
            raise AssertionError("one-shot")
        sock.close()
    # Timed up to the last close(): graceful closes end in the background (bitsnet's reaper, BITS's
    # own close(), bench.c alike); waiting for them would time the last one's TIME_WAIT (2 s).
    rate = opts["conns"] / elapsed(start)
    try:
        from bitsnet import events, stack, tcp
        events.wait_until(lambda: not tcp._closing, time.time() + 30, poll=stack.pump)
    except ImportError:
        pass
    return rate


def section_api(opts):
    import socket
    say("info socket %s" % getattr(socket, "__file__", "?"))
    try:
        from bitsnet import events
        say("info event-mode %s" % events.mode())
    except ImportError:
        pass
    size = opts["size"]
    ways = ["recv_into", "recv", "makefile", "urllib"]
    if not hasattr(socket.socket, "recv_into"):
        ways.remove("recv_into")
    for how in ways:
        pair(opts, "recv")
        try:
            got, seconds = api_recv(socket, opts, how)
        except Exception as exc:  # the stock socket lacks things: say so, go on
            say("info %s failed %s: %s" % (how, exc.__class__.__name__, exc))
            continue
        if got != size:
            say("info %s short %d" % (how, got))
        fig(how, got / seconds / 1e6)
    pair(opts, "send")
    good, seconds = api_send(socket, opts)
    fig("send", opts["send_size"] / seconds / 1e6)
    if not good:
        say("info send no reply")
    pair(opts, "trips")
    fig("trips", api_trips(socket, opts))
    pair(opts, "conns")
    fig("conns", api_conns(socket, opts))


# ---------------------------------------------------------------- the profile
def section_profile(opts):
    """Counters on bitsnet's receive path during recv_into downloads (see docs/performance.md)."""
    import socket
    import bits
    from bitsnet import events, tcp
    start, t0 = time.time(), bits.rdtsc()
    while time.time() - start < 0.5:
        pass
    tsc_per_us = (bits.rdtsc() - t0) / (elapsed(start) * 1e6)
    live_counts, live_cycles = {}, {}

    def counting(name, function):
        def wrapper(*args):
            live_counts[name] = live_counts.get(name, 0) + 1
            begin = bits.rdtsc()
            try:
                return function(*args)
            finally:
                live_cycles[name] = live_cycles.get(name, 0) + bits.rdtsc() - begin
        return wrapper

    original_create = tcp.TcpEndpoint._ensure_child

    def instrumented(self):
        result = original_create(self)
        proto = self._proto
        for name in ("Poll", "Receive", "Transmit"):
            self._calls[name] = (proto, counting(name, getattr(proto, name)), ctypes.byref(proto))
        self.poll_target = (counting("Poll", proto.Poll), ctypes.byref(proto))  # stack.pump Polls through it
        return result

    tcp.TcpEndpoint._ensure_child = instrumented
    # tcp's ctypes, with string_at counted (one per Receive completion): a module copy, so that
    # every other attribute costs what it did
    import types
    counted = types.ModuleType("ctypes")
    counted.__dict__.update(ctypes.__dict__)
    counted.string_at = counting("string_at", ctypes.string_at)
    tcp.ctypes = counted
    size = opts["size"]
    try:
        sock = connect(socket, opts)
        sock.sendall(header(b"S", size))
        buf = bytearray(CHUNK)
        got, calls = 0, [0]
        stats0 = dict(events.stats)
        begin = bits.rdtsc()
        while got < size:
            n = sock.recv_into(buf)
            if not n:
                break
            got += n
        total = bits.rdtsc() - begin
        sock.close()
        counts, cycles = dict(live_counts), dict(live_cycles)  # the timed run's alone (wrappers stay on)
        completions = events.stats["completions"] - stats0["completions"]
        # The same again with the Python profiler counting calls (slower: counts only).
        sock = connect(socket, opts)
        sock.sendall(header(b"S", size // 4))
        per_function = {}

        def profiler(frame, event, arg):
            if event == "call":
                calls[0] += 1
                key = frame.f_code.co_name
                per_function[key] = per_function.get(key, 0) + 1
        got2 = 0
        sys.setprofile(profiler)
        try:
            while got2 < size // 4:
                n = sock.recv_into(buf)
                if not n:
                    break
                got2 += n
        finally:
            sys.setprofile(None)
        sock.close()
    finally:
        tcp.TcpEndpoint._ensure_child = original_create
        tcp.ctypes = ctypes
    frames = max(got // FRAME, 1)
    frames2 = max(got2 // FRAME, 1)
    us = total / tsc_per_us
    say("prof bytes=%d frames~%d (bytes/%d) seconds=%.3f MB/s=%.3f" % (got, frames, FRAME, us / 1e6,
                                                                      got / us if us else 0.0))
    say("prof per-frame total_us=%.3f" % (us / frames))
    inside = 0
    for name in ("Poll", "Receive", "Transmit", "string_at"):
        n = counts.get(name, 0)
        spent = cycles.get(name, 0) / tsc_per_us
        inside += spent
        say("prof %-10s calls/frame=%.3f us/frame=%.3f us/call=%.3f" % (
            name, n / float(frames), spent / frames, spent / n if n else 0.0))
    say("prof completions/frame=%.3f bytes/completion=%.3f" % (
        completions / float(frames), got / float(completions) if completions else 0.0))
    say("prof python(other) us/frame=%.3f" % ((us - inside) / frames))
    say("prof python-calls/frame=%.3f (profiled run, %d bytes)" % (calls[0] / float(frames2), got2))
    top = sorted(per_function.items(), key=lambda item: -item[1])[:12]
    for name, n in top:
        say("prof   %-24s %.3f/frame" % (name, n / float(frames2)))


def section_sendab(opts):
    """A/B of the send path in one boot: stack.SEND_POLL_BATCH over --batches (alternating)."""
    import socket
    from bitsnet import stack, tcp
    combos = [(256 * 1024, 64 * 1024, 4, batch) for batch in [int(v) for v in opts["batches"].split(",")]]
    saved = tcp.TRANSMIT_CHUNK, tcp.MAX_TRANSMITS, stack.SEND_POLL_BATCH
    results = {}
    try:
        for _ in range(opts["reps"]):
            for combo in combos:
                tcp.TRANSMIT_CHUNK, tcp.MAX_TRANSMITS, stack.SEND_POLL_BATCH = combo[1:]
                good, seconds = api_send(socket, opts, sndbuf=combo[0])
                results.setdefault(combo, []).append(opts["send_size"] / seconds / 1e6)
    finally:
        tcp.TRANSMIT_CHUNK, tcp.MAX_TRANSMITS, stack.SEND_POLL_BATCH = saved
    for combo, rates in sorted(results.items()):
        rates.sort()
        say("sendab sndbuf=%d chunk=%d transmits=%d SEND_POLL_BATCH=%d median=%.3f min=%.3f max=%.3f" % (
            combo + (rates[len(rates) // 2], rates[0], rates[-1])))


def section_batch(opts):
    """A/B of stack.POLL_BATCH in one boot: the values alternate, so the host's load hits all alike."""
    import socket
    from bitsnet import stack
    values = [int(v) for v in opts["batches"].split(",")]
    original = stack.POLL_BATCH
    results = {}
    try:
        for _ in range(opts["reps"]):
            for value in values:
                stack.POLL_BATCH = value
                for how in ("recv_into", "recv"):
                    got, seconds = api_recv(socket, opts, how)
                    results.setdefault((value, how), []).append(got / seconds / 1e6)
    finally:
        stack.POLL_BATCH = original
    for (value, how), rates in sorted(results.items()):
        rates.sort()
        say("batch POLL_BATCH=%d %-9s median=%.3f min=%.3f max=%.3f" % (value, how, rates[len(rates) // 2],
                                                                        rates[0], rates[-1]))


def section_copies(opts):
    """What a copy of the payload costs in BITS (memcpy is GRUB's byte loop): ns per byte of a
    string slice, a join, ctypes.string_at, and the stdlib _fileobject's way of gathering (8 KiB
    slices of a received chunk, written into a cStringIO, getvalue)."""
    try:
        from cStringIO import StringIO
    except ImportError:  # linted on Python 3
        from io import BytesIO as StringIO
    size = 2 * 1024 * 1024  # BITS's heap holds ~28 MiB in all: room for the copies below
    big = b"x" * size
    chunks = [big[at:at + 46336] for at in range(0, size, 46336)]  # 32 frames: one batched Receive
    buf = ctypes.create_string_buffer(CHUNK)
    address = ctypes.addressof(buf)

    def gather_stdlib():
        out = StringIO()
        for chunk in chunks:
            for at in range(0, len(chunk), 8192):
                out.write(chunk[at:at + 8192])
        return out.getvalue()

    def string_at():
        for _ in range(size // CHUNK):
            ctypes.string_at(address, CHUNK)

    cases = [("slice", lambda: big[1:]), ("join", lambda: b"".join(chunks)), ("string_at", string_at),
             ("slices8k", lambda: [c[at:at + 8192] for c in chunks for at in range(0, len(c), 8192)]),
             ("stdlib_gather", gather_stdlib)]
    for name, function in cases:
        best = None
        for _ in range(opts["reps"]):
            start = time.time()
            for _ in range(4):
                function()
            seconds = elapsed(start) / 4
            best = seconds if best is None else min(best, seconds)
        say("copy %-14s ns/byte=%.3f (best of %d, %d bytes)" % (name, best * 1e9 / size, opts["reps"], size))
    held = []
    try:
        while True:
            held.append(b"y" * (1024 * 1024))
    except MemoryError:
        pass
    count = len(held)
    del held
    say("copy heap: %d MiB allocatable in 1 MiB strings" % count)


def section_fileab(opts):
    """A/B in one boot: makefile().read() and urllib2 through the stdlib's socket._fileobject
    and through bitsnet.fileobject's (alternating --reps times), recv as the reference, each
    paired with its C run."""
    import socket
    ours = socket._fileobject
    stdlib = ours.__mro__[1] if getattr(ours, "_bitsnet", False) else ours
    try:
        for _ in range(opts["reps"]):
            pair(opts, "recv")  # the reference: recv(65536) in a loop, no file object
            got, seconds = api_recv(socket, opts, "recv")
            fig("recv", got / seconds / 1e6)
            for label, cls in (("stdlib", stdlib), ("bitsnet", ours)):
                socket._fileobject = cls
                for how in ("makefile", "urllib"):
                    pair(opts, "recv")
                    try:
                        got, seconds = api_recv(socket, opts, how)
                    except MemoryError:
                        say("info fileab %s %s MemoryError" % (label, how))
                        continue
                    fig("%s_%s" % (how, label), got / seconds / 1e6)
    finally:
        socket._fileobject = ours


SECTIONS = {"c": section_c, "raw": section_raw, "api": section_api, "profile": section_profile,
            "batch": section_batch, "sendab": section_sendab, "copies": section_copies, "fileab": section_fileab}


def main(argv):
    opts = dict(OPTS)
    sections = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--peer":
            host, port = argv[i + 1].rsplit(":", 1)
            opts["host"], opts["port"] = host, int(port)
            i += 2
        elif arg == "--batches":
            opts["batches"] = argv[i + 1]
            i += 2
        elif arg.startswith("--") and arg[2:].replace("-", "_") in ("http", "size", "send_size", "trips", "conns",
                                                                     "repeat", "reps"):
            opts[arg[2:].replace("-", "_")] = int(argv[i + 1])
            i += 2
        else:
            sections.append(arg)
            i += 1
    for _ in range(opts["repeat"]):
        for name in sections:
            say("== %s" % name)
            SECTIONS[name](opts)
    say("== done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
