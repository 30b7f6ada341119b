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
            ``raw_recv_batch`` Polls 16 times first (bitsnet's trick); ``raw_send``; ``raw_trips``;
            ``raw_conns`` (bench.c's ``connections`` from Python: the ceiling of the connection path)
  api       the socket module in place (bitsnet or BITS's own): recv_into, recv, makefile().read(),
            urllib2, sendall, 1-byte round trips, connections, then section http
  http      lab-shaped exchanges: GET /small/BODY (--http-body, 256) --http-reqs times on one keep-alive
            httplib connection (``httplib``), and --http-conns urllib2.urlopen calls, a connection
            each (``urllib_conns``); bench.c makes the same requests (``http_keepalive``, ``http_conns``)
  convprof  one round trip and one connection call by call: every firmware call, notification and
            events.process, the Python time between them (``conv`` lines; docs/performance.md)
  micro     single operations of the round trip's path, timed in BITS (``conv micro`` lines)
  floor     httplib's and urllib2's own Python per request over a fake socket (no network)
  profile   bitsnet's receive path counted (recv_into download): Polls, Receives, Python calls
            per frame and where the time goes (TSC)
  batch     A/B of stack.POLL_BATCH over --batches (alternating, --reps times): recv_into, recv
  convab    A/B of the conversational figures (trips, conns, httplib, urllib_conns) over --variants
            "NAME:module.ATTR=value;.../NAME2:...", alternating unit by unit (``convab`` lines)
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
        "reps": 5, "batches": "16,32", "http_reqs": 100, "http_conns": 20, "http_body": 256, "ab": "",
        "variants": "base:/same:"}


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


def run_c(opts, size=0, send_size=0, trips=0, conns=0, keepalive=0, perconn=0):
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
    line = "%d %d %d %d %d 1 8 %d %d %d %d" % (opts["port"], size, send_size, trips, conns, opts.get("http", 0),
                                               keepalive, perconn, opts["http_body"])
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
    elif kind == "http_keepalive":
        run_c(opts, keepalive=opts["http_reqs"])
    elif kind == "http_conns":
        run_c(opts, perconn=opts["http_conns"])
    else:
        run_c(opts, conns=opts["conns"])


def section_c(opts):
    try:  # bitsnet restarts the stopped timer (DHCP needs it) and brings the address up first
        from bitsnet import ipconfig
        ipconfig.ensure_configured()
    except ImportError:
        pass  # BITS's own socket: tools/bitsrun.py restarted the timer; the C app waits for DHCP
    status = run_c(opts, opts["size"], opts["send_size"], opts["trips"], opts["conns"], opts["http_reqs"],
                   opts["http_conns"])
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


def raw_conns(raw, count):
    """Connections as bench.c's ``connections`` makes them, from Python: CreateChild, the protocol
    (bitsnet's open_protocol: OpenProtocol with the EFI_GUID built once), Configure with one
    prepared configuration (bench.c's ControlOption), Connect, Transmit "Cx", Receive, graceful
    Close -- then, as bench.c's ``reap`` after every connection, each closing child whose Close
    completed is destroyed and every other one Polled once. Timed up to the last Close posted;
    the rest finish untimed (the last TIME_WAIT alone is 2 s). Per second."""
    from bitsnet import child
    efi, d, bs = raw.efi, raw.d, raw.bs
    check, byref, sb = bs.CheckEvent, ctypes.byref, raw.sb
    this_sb = byref(sb)
    option = d.EFI_TCP4_OPTION()
    option.ReceiveBufferSize = option.SendBufferSize = 256 * 1024
    option.MaxSynBackLog, option.ConnectionTimeout, option.DataRetries = 10, 75, 12
    option.FinTimeout = option.TimeWaitTimeout = 2
    option.KeepAliveProbes, option.KeepAliveTime, option.KeepAliveInterval = 8, 7200, 60
    option.EnableTimeStamp = option.EnableWindowScaling = True
    cfg = d.EFI_TCP4_CONFIG_DATA()
    cfg.TimeToLive = 64
    ap = cfg.AccessPoint
    ap.UseDefaultAddress = True
    ap.RemoteAddress = d.ipv4(raw.host)
    ap.RemotePort = raw.port
    ap.ActiveFlag = True
    cfg.ControlOption = ctypes.pointer(option)
    this_cfg = byref(cfg)
    connect = d.EFI_TCP4_CONNECTION_TOKEN()
    connect.CompletionToken.Event = raw.event()
    this_connect = byref(connect)
    tx, rx = raw.io(16, tx=True), raw.io(16)
    closing = []

    def reap():
        for entry in list(closing):
            handle, proto, close = entry
            if check(close.CompletionToken.Event) == 0:
                bs.CloseEvent(close.CompletionToken.Event)
                sb.DestroyChild(this_sb, handle)
                closing.remove(entry)
            else:
                proto.Poll(byref(proto))

    start = time.time()
    for _ in range(count):
        handle = efi.EFI_HANDLE()
        efi.check_status(sb.CreateChild(this_sb, byref(handle)))
        proto = child.open_protocol(d.EFI_TCP4_PROTOCOL, handle.value)
        this = byref(proto)
        ap.StationPort = 0  # EDK2's TcpBind writes the port it chose into the caller's ConfigData
        efi.check_status(proto.Configure(this, this_cfg))
        check(connect.CompletionToken.Event)  # a signal left from the last child (bench.c does so too)
        efi.check_status(proto.Connect(this, this_connect))
        efi.check_status(raw.wait(proto, connect.CompletionToken))
        check(tx.CompletionToken.Event)
        raw.send(proto, tx, b"Cx")
        check(rx.CompletionToken.Event)
        if raw.receive(proto, rx, 16) != 1:
            raise AssertionError("raw one-shot")
        close = d.EFI_TCP4_CLOSE_TOKEN()
        event = efi.EFI_EVENT()
        efi.check_status(bs.CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(event)))
        close.CompletionToken.Event = event.value
        efi.check_status(proto.Close(this, byref(close)))
        closing.append((handle.value, proto, close))
        reap()
    rate = count / elapsed(start)
    deadline = time.time() + 60
    while closing and time.time() < deadline:
        reap()
    for handle, proto, close in closing:  # DestroyChild aborts what is left, then the event may go
        sb.DestroyChild(this_sb, handle)
        bs.CloseEvent(close.CompletionToken.Event)
    if closing:
        say("info raw_conns %d closes unfinished after 60 s" % len(closing))
    return rate


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
        pair(opts, "conns")
        fig("raw_conns", raw_conns(raw, opts["conns"]))
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


def api_http_keepalive(opts):
    """GET /small/BODY again and again on one keep-alive httplib connection (requests/s; the first
    request, which connects, is not timed -- nor is it in bench.c)."""
    import httplib
    conn = httplib.HTTPConnection(opts["host"], opts["http"], timeout=30)
    path = "/small/%d" % opts["http_body"]

    def one():
        conn.request("GET", path)
        response = conn.getresponse()
        if len(response.read()) != opts["http_body"]:
            raise AssertionError("http body")
    one()
    start = time.time()
    for _ in range(opts["http_reqs"]):
        one()
    rate = opts["http_reqs"] / elapsed(start)
    conn.close()
    return rate


def api_http_conns(opts):
    """urllib2.urlopen of GET /small/BODY, a new connection per request (requests/s, timed up to
    the last close(), as the connections figure)."""
    import urllib2
    url = "http://%s:%d/small/%d" % (opts["host"], opts["http"], opts["http_body"])
    start = time.time()
    for _ in range(opts["http_conns"]):
        response = urllib2.urlopen(url, timeout=30)
        if len(response.read()) != opts["http_body"]:
            raise AssertionError("http body")
        response.close()
    rate = opts["http_conns"] / elapsed(start)
    _settle()
    return rate


def _settle():
    try:
        from bitsnet import events, stack, tcp
        events.wait_until(lambda: not tcp._closing, time.time() + 30, poll=stack.pump)
    except ImportError:
        pass


def section_http(opts):
    """The lab-shaped figures alone: keep-alive httplib requests, a urllib2 connection per request."""
    pair(opts, "http_keepalive")
    fig("httplib", api_http_keepalive(opts))
    pair(opts, "http_conns")
    fig("urllib_conns", api_http_conns(opts))


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
    section_http(opts)


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


# ---------------------------------------------------------------- the conversational profile
class _Tracer(object):
    """Every firmware call bitsnet makes (each TCP child's protocol functions, CreateChild and
    DestroyChild, the boot services events.py calls), each notification and each events.process,
    as (name, begin, end) in TSC ticks (docs/performance.md section 7)."""

    FUNCTIONS = ("Poll", "Receive", "Transmit", "Connect", "Configure", "Close", "GetModeData", "Routes",
                 "Accept", "Cancel")

    def __init__(self):
        import bits
        self.rdtsc = bits.rdtsc
        self.trace = []
        self.on = False
        self.undo = []

    def wrap(self, name, function):
        trace, rdtsc, tracer = self.trace, self.rdtsc, self

        def wrapper(*args):
            if not tracer.on:
                return function(*args)
            begin = rdtsc()
            try:
                return function(*args)
            finally:
                trace.append((name, begin, rdtsc()))
        return wrapper

    def patch(self, owner, name, value):
        self.undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def install(self):
        from bitsnet import child, events, nic
        tracer = self
        original_set_proto, original_pollable = child.EfiChild._set_proto, child.EfiChild._pollable

        def set_proto(ep, proto):
            original_set_proto(ep, proto)
            if proto is not None:
                for name in tracer.FUNCTIONS:
                    ep._calls[name] = (proto, tracer.wrap(name, getattr(proto, name)), ctypes.byref(proto))

        def pollable(ep, on):
            original_pollable(ep, on)
            if ep.poll_target is not None:
                ep.poll_target = (tracer.wrap("Poll", ep.poll_target[0]), ep.poll_target[1])
        self.patch(child.EfiChild, "_set_proto", set_proto)
        self.patch(child.EfiChild, "_pollable", pollable)
        for name in ("create_child", "destroy_child"):
            method = getattr(nic.Nic, name)
            self.patch(nic.Nic, name, self.wrap_method("CreateChild" if name == "create_child" else "DestroyChild",
                                                       method))
        real_bs = events.boot_services()

        class BootServices(object):
            def __getattr__(self, name):
                return tracer.wrap(name, getattr(real_bs, name))
        proxy = BootServices()
        self.patch(events, "boot_services", lambda: proxy)
        self.patch(events, "process", self.wrap("process", events.process))
        if events.mode() == "efi-hook":
            import _efi
            hook = self.wrap("notify", events._notified_event)
            _efi._set_event_callback(hook)
            self.undo.append((None, "hook", events._notified_event))

    def wrap_method(self, name, method):
        wrapped = self.wrap(name, lambda *args: method(*args))

        def function(*args):
            return wrapped(*args)
        return function

    def uninstall(self):
        for owner, name, value in reversed(self.undo):
            if owner is None:
                import _efi
                _efi._set_event_callback(value)
            else:
                setattr(owner, name, value)
        self.undo = []


def _summarize(label, trace, spans, tsc_per_us):
    """Per exchange: count and microseconds of each firmware call, the Python time around them."""
    counts, cycles = {}, {}
    inside = 0
    for name, begin, end in trace:
        counts[name] = counts.get(name, 0) + 1
        if name not in ("process",):  # process is Python (it contains notify and CheckEvent calls)
            cycles[name] = cycles.get(name, 0) + end - begin
            if name != "notify":
                inside += end - begin
    n = float(len(spans))
    total = sum(end - begin for begin, end in spans)
    say("conv %s: %d exchanges, %.1f us each (%.0f /s under the tracer)" % (
        label, len(spans), total / tsc_per_us / n, n / (total / tsc_per_us / 1e6)))
    for name in sorted(counts, key=lambda k: -cycles.get(k, 0)):
        say("conv %s   %-13s calls=%6.2f us=%8.1f us/call=%7.1f" % (
            label, name, counts[name] / n, cycles.get(name, 0) / tsc_per_us / n,
            cycles.get(name, 0) / tsc_per_us / counts[name]))
    say("conv %s   firmware total us=%.1f; Python (everything else) us=%.1f" % (
        label, inside / tsc_per_us / n, (total - inside) / tsc_per_us / n))


def _sequence(label, trace, begin, end, tsc_per_us):
    """One exchange call by call: the Python gap before each call, then the call."""
    last = begin
    line = []
    for name, b, e in trace:
        if b < begin or e > end or name == "process":
            continue
        if name == "notify":  # runs inside the call that signalled the event (listed after it)
            line.append("(notify %d)" % ((e - b) / tsc_per_us))
            continue
        line.append("+%d %s %d" % ((b - last) / tsc_per_us, name, (e - b) / tsc_per_us))
        last = e
    line.append("+%d end" % ((end - last) / tsc_per_us))
    text = " | ".join(line)
    while text:
        say("conv %s seq: %s" % (label, text[:150]))
        text = text[150:]


def _timed_profile(label, socket, opts, rdtsc, tsc_per_us):
    """Exclusive TSC time and calls per function during a few exchanges of ``label``."""
    spent, calls, stack = {}, {}, []

    def profiler(frame, event, arg):
        now = rdtsc()
        if event in ("call", "c_call"):
            if event == "call":
                key = "%s:%d" % (frame.f_code.co_name, frame.f_code.co_firstlineno)
            else:
                key = "c:" + (getattr(arg, "__name__", None) or type(arg).__name__)
            calls[key] = calls.get(key, 0) + 1
            if stack:
                top = stack[-1]
                spent[top[0]] = spent.get(top[0], 0) + now - top[1]
            stack.append([key, rdtsc()])
        elif event in ("return", "c_return", "c_exception") and stack:
            key, since = stack.pop()
            spent[key] = spent.get(key, 0) + now - since
            if stack:
                stack[-1][1] = rdtsc()
    if label == "trip":
        sock = connect(socket, opts)
        sock.sendall(b"E")
        sock.sendall(b"x")
        sock.recv(1)
        n = 20
        sys.setprofile(profiler)
        for _ in range(n):
            sock.sendall(b"x")
            sock.recv(1)
        sys.setprofile(None)
        sock.close()
    else:
        n = 5
        sys.setprofile(profiler)
        for _ in range(n):
            sock = connect(socket, opts)
            sock.sendall(b"Cx")
            sock.recv(1)
            sock.close()
        sys.setprofile(None)
        _settle()
    total = sum(spent.values())
    say("conv %s profiled: %.0f us per exchange, %.1f calls" % (label, total / tsc_per_us / n,
                                                                sum(calls.values()) / float(n)))
    for key in sorted(spent, key=lambda k: -spent[k])[:30 if label == "trip" else 60]:
        say("conv %s   %-34s calls=%6.1f us=%8.1f" % (label, key[:34], calls.get(key, 0) / float(n),
                                                     spent[key] / tsc_per_us / n))


def section_floor(opts):
    """httplib's and urllib2's own Python per request, with no network: a fake socket whose
    makefile() is a cStringIO of the response (``conv floor`` lines). No socket layer can make
    a request faster than this."""
    import httplib
    import urllib2
    from cStringIO import StringIO
    body = b"y" * opts["http_body"]
    keep = ("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
            % len(body)) + body
    close = keep.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)

    class FakeSock(object):
        def __init__(self, response):
            self.response = response

        def sendall(self, data):
            pass

        def makefile(self, mode="rb", bufsize=-1):
            return StringIO(self.response)

        def close(self):
            pass
    conn = httplib.HTTPConnection(opts["host"], opts["http"])
    conn.sock = FakeSock(keep)
    n = 50
    start = time.time()
    for _ in range(n):
        conn.request("GET", "/small/%d" % opts["http_body"])
        if len(conn.getresponse().read()) != len(body):
            raise AssertionError("floor body")
    say("conv floor httplib keep-alive request, Python only: %.0f /s (%.0f us each)" % (
        n / elapsed(start), elapsed(start) / n * 1e6))
    original = httplib.HTTPConnection.connect

    def fake_connect(self):
        self.sock = FakeSock(close)
    httplib.HTTPConnection.connect = fake_connect
    try:
        url = "http://%s:%d/small/%d" % (opts["host"], opts["http"], opts["http_body"])
        n = 20
        start = time.time()
        for _ in range(n):
            response = urllib2.urlopen(url, timeout=30)
            if len(response.read()) != len(body):
                raise AssertionError("floor body")
            response.close()
        say("conv floor urllib2.urlopen request, Python only: %.0f /s (%.0f us each)" % (
            n / elapsed(start), elapsed(start) / n * 1e6))
    finally:
        httplib.HTTPConnection.connect = original


def section_convprof(opts):
    """One round trip and one connection, call by call (docs/performance.md section 7)."""
    import socket
    import bits
    from bitsnet import events
    start, t0 = time.time(), bits.rdtsc()
    while time.time() - start < 0.5:
        pass
    tsc_per_us = (bits.rdtsc() - t0) / (elapsed(start) * 1e6)
    say("conv event-mode %s tsc/us %.1f" % (events.mode(), tsc_per_us))
    tracer = _Tracer()
    tracer.install()
    rdtsc = bits.rdtsc
    try:
        # round trips: 1 byte each way, sendall + recv(1), as section api
        sock = connect(socket, opts)
        sock.sendall(b"E")
        for _ in range(30):
            sock.sendall(b"x")
            sock.recv(1)
        stats0 = dict(events.stats)
        tracer.on = True
        spans = []
        for _ in range(100):
            b = rdtsc()
            sock.sendall(b"x")
            if sock.recv(1) != b"x":
                raise AssertionError("echo")
            spans.append((b, rdtsc()))
        tracer.on = False
        trips = list(tracer.trace)
        del tracer.trace[:]
        say("conv trip stats %s" % " ".join("%s=%d" % (k, events.stats[k] - stats0[k]) for k in sorted(stats0)))
        sock.close()
        _summarize("trip", trips, spans, tsc_per_us)
        ordered = sorted(spans, key=lambda s: s[1] - s[0])
        _sequence("trip(median)", trips, *(ordered[len(ordered) // 2] + (tsc_per_us,)))
        _sequence("trip(fastest)", trips, *(ordered[0] + (tsc_per_us,)))
        # connections: connect, one byte each way, close (as section api)
        for _ in range(5):
            sock = connect(socket, opts)
            sock.sendall(b"Cx")
            sock.recv(1)
            sock.close()
        _settle()
        stats0 = dict(events.stats)
        tracer.on = True
        spans = []
        for _ in range(20):
            b = rdtsc()
            sock = connect(socket, opts)
            sock.sendall(b"Cx")
            if sock.recv(1) != b"x":
                raise AssertionError("one-shot")
            sock.close()
            spans.append((b, rdtsc()))
        tracer.on = False
        conns = list(tracer.trace)
        del tracer.trace[:]
        say("conv conn stats %s" % " ".join("%s=%d" % (k, events.stats[k] - stats0[k]) for k in sorted(stats0)))
        _summarize("conn", conns, spans, tsc_per_us)
        ordered = sorted(spans, key=lambda s: s[1] - s[0])
        _sequence("conn(median)", conns, *(ordered[len(ordered) // 2] + (tsc_per_us,)))
        _settle()
        # Where the Python time goes: sys.setprofile with the TSC, exclusive time per function
        # (C functions and ctypes calls included; the profiler's own cost inflates every entry)
        for label in ("trip", "conn"):
            _timed_profile(label, socket, opts, rdtsc, tsc_per_us)
    finally:
        tracer.on = False
        tracer.uninstall()


def _apply(assignments):
    """``module.NAME=value;...`` (bitsnet modules; value an int, float or a guest function's name)
    set now; returns what undoes it."""
    undo = []
    for item in [a for a in assignments.split(";") if a]:
        target, value = item.split("=", 1)
        path = target.split(".")
        __import__("bitsnet." + path[0])
        owner = sys.modules["bitsnet." + path[0]]
        for name in path[1:-1]:  # a class in the module: tcp.TcpEndpoint._post_transmit
            owner = getattr(owner, name)
        attr = path[-1]
        if value in globals():
            new = globals()[value]
        else:
            new = float(value) if "." in value else int(value)
        # a class's own attribute (None: inherited, deleted again to restore)
        undo.append((owner, attr, owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)))
        setattr(owner, attr, new)
    return undo


def _restore(undo):
    for module, attr, value in reversed(undo):
        if value is None and isinstance(module, type):
            delattr(module, attr)
        else:
            setattr(module, attr, value)


def section_convab(opts):
    """A/B of the conversational figures in one boot: --variants "NAME:mod.X=v;mod.Y=w/NAME2:...".
    The variants alternate unit by unit (20 round trips, five connections, 5 keep-alive httplib
    requests, one urllib2 request), --reps x 10 units each, so that the host's load, which moves
    within seconds, hits them alike; per figure and variant: the median unit rate, and the median
    of the per-round ratios to the first variant (``convab`` lines)."""
    import socket
    import httplib
    import urllib2
    from bitsnet import inet, ipconfig
    _bind_bitsnet()
    variants = [v.split(":", 1) for v in opts["variants"].split("/") if v]
    rounds = opts["reps"] * 10  # units per variant (round trips: three times as many)
    path = "/small/%d" % opts["http_body"]
    url = "http://%s:%d%s" % (opts["host"], opts["http"], path)

    def with_variant(assignments, function, *args):
        undo = _apply(assignments)
        ipconfig._forget()
        inet._parsed.clear()
        try:
            start = time.time()
            count = function(*args)
            return count / elapsed(start)
        finally:
            _restore(undo)

    def trips(sock):
        for _ in range(20):
            sock.sendall(b"x")
            if sock.recv(1) != b"x":
                raise AssertionError("echo")
        return 20

    def one_conn():  # five: one connection (~8 ms) is too short for BITS's 1 ms clock
        for _ in range(5):
            sock = connect(socket, opts)
            sock.sendall(b"Cx")
            if sock.recv(1) != b"x":
                raise AssertionError("one-shot")
            sock.close()
        return 5

    def requests(conn):
        for _ in range(5):
            conn.request("GET", path)
            if len(conn.getresponse().read()) != opts["http_body"]:
                raise AssertionError("http body")
        return 5

    def one_urlopen():
        response = urllib2.urlopen(url, timeout=30)
        if len(response.read()) != opts["http_body"]:
            raise AssertionError("http body")
        response.close()
        return 1

    echo = {}
    keep = {}
    for name, assignments in variants:
        undo = _apply(assignments)
        try:
            echo[name] = connect(socket, opts)
            echo[name].sendall(b"E")
            keep[name] = httplib.HTTPConnection(opts["host"], opts["http"], timeout=30)
            keep[name].request("GET", path)
            keep[name].getresponse().read()
        finally:
            _restore(undo)
    units = (("trips", lambda name: (trips, echo[name])), ("conns", lambda name: (one_conn,)),
             ("httplib", lambda name: (requests, keep[name])), ("urllib_conns", lambda name: (one_urlopen,)))
    for figure, unit in units:
        rates = dict((name, []) for name, _ in variants)
        ratios = dict((name, []) for name, _ in variants)
        for number in range(rounds * (3 if figure == "trips" else 1)):
            order = variants if number % 2 == 0 else variants[::-1]
            this = {}
            for name, assignments in order:
                this[name] = with_variant(assignments, *unit(name))
                rates[name].append(this[name])
            for name, _ in variants:
                ratios[name].append(this[name] / this[variants[0][0]])
        _settle()
        for name, _ in variants:
            r, q = sorted(rates[name]), sorted(ratios[name])
            say("convab %-13s %-12s median=%.2f /s (min %.2f max %.2f, %d units) ratio to %s: median %.3f"
                " quartiles %.3f-%.3f" % (figure, name, r[len(r) // 2], r[0], r[-1], len(r), variants[0][0],
                                          q[len(q) // 2], q[len(q) // 4], q[3 * len(q) // 4]))
    for name, _ in variants:
        echo[name].close()
        keep[name].close()
    _settle()


# ---------------------------------------------------------------- prototypes for convab (not bitsnet's code)
def _bytes_offset():
    probe = b"probe"
    return ctypes.cast(probe, ctypes.c_void_p).value - id(probe)


BYTES_OFFSET = _bytes_offset()


# bitsnet's modules as globals of this script, bound by section_convab before it runs the
# prototypes: an import statement inside a function costs far more in BITS than the code timed.
_bn_efi = _bn_events = _bn_tcp = _bn_stack = _bn_child = None


_ORIGINAL = {}  # type: dict


def _bind_bitsnet():
    global _bn_efi, _bn_events, _bn_tcp, _bn_stack, _bn_child
    import efi as _bn_efi
    from bitsnet import _socket, netdb
    from bitsnet import child as _bn_child, events as _bn_events, stack as _bn_stack, tcp as _bn_tcp
    if not _ORIGINAL:
        _ORIGINAL.update(host_text=netdb.host_text, new_endpoint=_socket._new_endpoint)
    _bind_conn4()
    _bind_trip4()


def legacy_host_text(host, who="address"):
    """netdb.host_text before the import moved into its IDNA branches: it ran on every call."""
    from bitsnet import dns  # noqa: F401
    return _ORIGINAL["host_text"](host, who)


def legacy_new_endpoint(family, type, proto):
    """_socket._new_endpoint before the module cache: an import statement per socket."""
    from bitsnet import tcp  # noqa: F401
    return _ORIGINAL["new_endpoint"](family, type, proto)


def legacy_post_transmit(self, data, urgent=False):
    """tcp.TcpEndpoint._post_transmit before e43dde5 (the A/B of docs/performance.md section 7): a new Operation per
    Transmit, the address by ctypes.cast, the completion recorded for the next update()."""
    sender = self.sender
    if sender.free and not urgent:
        token, txdata, fragment, completion = sender.free.pop()[:4]
    else:
        token, txdata, fragment, completion = self._transmit_token(urgent)
    txdata.DataLength = fragment.FragmentLength = len(data)
    fragment.FragmentBuffer = ctypes.cast(data, ctypes.c_void_p).value
    op = self._submit("txu" if urgent else "tx", token, completion, keep=(txdata, data, fragment, completion))
    sender.ops.append(op)
    sender.inflight += len(data)
    status = self._call("Transmit", ctypes.byref(token))
    if status != _bn_efi.EFI_SUCCESS:
        _bn_events.unsubmit(op)
        sender.ops.remove(op)
        sender.inflight -= len(data)
        if not urgent:
            sender.free.append((token, txdata, fragment, completion, op))
            sender.queue.unread(data)
        if status != _bn_efi.EFI_OUT_OF_RESOURCES:
            self._refused(status, "send")
        elif not urgent:
            self._transmit_refused()
        return False
    if sender.refused_since is not None and not urgent:
        sender.refused_since = None
        _bn_tcp._tx_retry.discard(self)
    _bn_events.check(op)
    return True


def legacy_post_receive(self):
    """tcp.TcpEndpoint._post_receive before e43dde5: a new Operation per Receive."""
    token, completion, keep = self.receiver.prepare(self._fam)
    op = self._submit("rx", token, completion, keep=keep)
    status = self._call("Receive", ctypes.byref(token))
    if status != _bn_efi.EFI_SUCCESS:
        _bn_events.unsubmit(op)
        if status == _bn_efi.EFI_CONNECTION_FIN:
            self._event("fin")
        else:
            self._refused(status, "recv")
        return False
    self.receiver.op = op
    return _bn_events.check(op)


def legacy_completed(self, op):
    """tcp.Receiver.completed before ba31a7a: the bytes by ctypes.string_at."""
    self.op = None
    self.spent = op
    if op.status != _bn_efi.EFI_SUCCESS:
        self.streaming = self.later = False
        return None
    length = op.keep[0].DataLength
    self.streaming = length >= _bn_stack.STREAM_SEGMENT
    self.later = True
    return ctypes.string_at(op.keep[1], length)


def legacy_read(self, n=None):
    """buffers.ByteQueue.read before ba31a7a."""
    return self._gather(n, consume=True)


def legacy_wait_until(predicate, deadline, poll=None, checked=False):
    """events.wait_until before ba31a7a: events.process() on every round, after the pump's own."""
    clock, process = _bn_events.clock, _bn_events.process
    idle = 0
    while True:
        if checked:
            checked = False
        else:
            if process():
                idle = 0
            if predicate():
                return True
        if deadline is not None and clock() >= deadline:
            return False
        if poll is not None:
            poll()
        idle += 1
        if idle > _bn_events.IDLE_SPINS:
            _bn_events.boot_services().Stall(_bn_events.IDLE_STALL_US)


def legacy_control_option(self, backlog):
    """tcp.TcpEndpoint._control_option before the cache: a new TCP_OPTION per Configure."""
    option = self._new_control_option(backlog)
    return option, ctypes.pointer(option)


def legacy_add_routes(self, info, strict, remote=None):
    """The GetModeData every _configure made before it was skipped for a known port."""
    _bn_child.EfiChild._add_routes(self, info, strict, remote)
    mode = self._fam.TCP_CONFIG_DATA()
    if self._call("GetModeData", None, ctypes.byref(mode), None, None, None) == 0:
        return mode.AccessPoint.StationPort
    return None


def legacy_resubmit(op):
    """events.resubmit writing the token's Event every time."""
    slot = _bn_events._idle.pop() if _bn_events._idle else _bn_events._take_slot()
    completion = op.completion
    completion.Event = _bn_events._events[slot]
    completion.Status = _bn_events.SENTINEL
    _bn_events._state["seq"] += 1
    op.slot, op.seq, op.done, op.status, op.event = slot, _bn_events._state["seq"], False, _bn_events.SENTINEL, None
    _bn_events._pending[slot] = op
    return op


def legacy_open_protocol(protocol, handle):
    """child.open_protocol before it kept the EFI_GUIDs: BITS's from_handle."""
    return protocol.from_handle(handle)


# the second round's A/B (docs/performance.md section 7): --variants "none:...;.../one:.../both:" naming these


# conn4
# The fourth round's A/B, connections (docs/performance.md section 7): the connect path before it, as
# --variants "new:/old:netdb.getaddrinfo=legacy_getaddrinfo;_socket.socket._connect=legacy_connect;
# tcp.TcpEndpoint._configure=legacy_configure;tcp.TcpEndpoint.reap_step=legacy_reap_step;
# nic.Nic.create_child=legacy_create_child;nic.Nic.destroy_child=legacy_destroy_child"
_bn_netdb = _bn_socket = _bn_nic = _bn_errors = _bn_efidefs = _bn_clock = None


def _bind_conn4():
    global _bn_netdb, _bn_socket, _bn_nic, _bn_errors, _bn_efidefs, _bn_clock
    from bitsnet import _socket as _bn_socket, clock as _bn_clock, efidefs as _bn_efidefs
    from bitsnet import errors as _bn_errors, netdb as _bn_netdb, nic as _bn_nic


def legacy_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    """netdb.getaddrinfo without its table of literal answers: every check and parse each time."""
    return _bn_netdb._getaddrinfo(host, port, family, type, proto, flags)


def legacy_connect(self, address):
    """_socket.socket._connect asking connecting/listening/connected (each an update) of a fresh socket."""
    s = _bn_socket
    endpoint = self._endpoint()
    deadline = self._deadline()
    remote = s._sockaddr(self._family, address, "connect")
    if self._type == s.SOCK_DGRAM:
        try:
            endpoint.connect(remote, deadline=deadline)
        except s.error as exc:
            if isinstance(exc, s.timeout) and not exc.errno and self._timeout == 0.0:
                return s._error(s._errno.EAGAIN)
            if isinstance(exc, s.timeout) and not exc.errno:
                raise
            return exc
        return None
    if s._inet.is_multicast(remote[0]):
        return s._error(s._errno.ENETUNREACH)
    descriptor = self._descriptor
    reported, descriptor.connect_pending = descriptor.connect_pending, False
    if endpoint.connecting and self._timeout == 0.0:
        s._progress(endpoint)
    if endpoint.listening:
        return s._error(s._errno.EISCONN)
    if endpoint.connected:
        return None if reported else s._error(s._errno.EISCONN)
    if endpoint.connecting:
        if self._timeout == 0.0:
            descriptor.connect_pending = True
            return s._error(s._errno.EALREADY)
    elif reported and endpoint.failed:
        return self._connect_failed(endpoint)
    else:
        try:
            endpoint.connect_start(remote, deadline=deadline)
        except s.timeout as exc:
            if self._timeout != 0.0 or exc.errno:
                raise
            endpoint.connect_later(remote)
            descriptor.connect_pending = True
            return s._error(s._errno.EINPROGRESS)
        except s.error as exc:
            return exc
        if self._timeout == 0.0:
            descriptor.connect_pending = True
            return s._error(s._errno.EINPROGRESS)
    if endpoint.connecting:
        if self._timeout == 0.0:
            return s._error(s._errno.EINPROGRESS)
        self._wait(endpoint, lambda: not endpoint.connecting, deadline)
    if endpoint.connected:
        return None
    if self._timeout is None:
        return self._connect_failed(endpoint)
    return s._error(endpoint.take_error() or s._errno.ECONNABORTED)


def legacy_configure(self, active, station, port, remote=None, backlog=0, deadline=None, info=None):
    """tcp.TcpEndpoint._configure before the fourth round: the IP info asked again, the options as a
    sorted tuple, a new config structure with new address structures, a new pointer to the option."""
    t = _bn_tcp
    self._ensure_child()
    info = self._ip_info(deadline)
    wanted = (active, station, port, remote, backlog, tuple(sorted(self._options.items())))
    if self._configured == wanted:
        return info
    if self._configured is not None:
        self._call("Configure", None)
        nagle_was_off = dict(self._configured[5])["nodelay"]
        self._configured = None
        if nagle_was_off and not self._options["nodelay"]:
            self._renew_child()
    fam = self._fam
    config = fam.TCP_CONFIG_DATA()
    if fam.version == 4:
        config.TimeToLive = self._options["ttl"]
        config.TypeOfService = self._options["tos"]
    else:
        config.HopLimit = self._options["ttl"]
        config.TrafficClass = self._options["tos"]
    tries = t.PORT_TRIES if port == 0 else 0
    peer = remote if active else None
    ap = config.AccessPoint
    if fam.version == 4:
        ap.UseDefaultAddress = False
        ap.SubnetMask = _bn_efidefs.ipv4(info.netmask)
    ap.StationAddress = fam.efi_address(station)
    ap.StationPort = t.random_port(peer) if tries else port
    if remote is not None:
        ap.RemoteAddress = fam.efi_address(remote[0])
        ap.RemotePort = remote[1]
    ap.ActiveFlag = active
    option = self._control_option(backlog)[0]
    config.ControlOption = ctypes.pointer(option)
    until = _bn_clock.monotonic() + t.NO_MAPPING_WAIT
    retried = False
    while True:
        status = self._configure_child(config, until, deadline)
        if status == _bn_efi.EFI_SUCCESS:
            break
        if status == _bn_efi.EFI_INVALID_PARAMETER and tries:
            tries -= 1
            config.AccessPoint.StationPort = t.random_port(peer) if tries else 0
            continue
        if status == _bn_efi.EFI_INVALID_PARAMETER and port:
            if self._options["reuseaddr"] and not retried and t._abort_closing(station or fam.wildcard, port):
                retried = True
                continue
            _bn_errors.raise_for_status(status, "bind", "port %d on %s, Configure" % (port, station or fam.wildcard))
        _bn_errors.raise_for_status(status, "Configure")
    self._configured = wanted
    self._add_routes(info, strict=True, remote=remote and remote[0])
    port = config.AccessPoint.StationPort or port
    if not port or (station is None and active):
        mode = fam.TCP_CONFIG_DATA()
        if self._call("GetModeData", None, ctypes.byref(mode), None, None, None) == _bn_efi.EFI_SUCCESS:
            port = mode.AccessPoint.StationPort
            if station is None and active:
                chosen = fam.efi_text(mode.AccessPoint.StationAddress)
                station = chosen if chosen != fam.wildcard else (info.address or fam.wildcard)
    self._local = (station or fam.wildcard, port)
    return info


def legacy_reap_step(self):
    """tcp.TcpEndpoint.reap_step with a full update() every step."""
    self.update()
    if self._handle is None:
        return True
    if self._close_op is not None and self._close_op.done or self._state == _bn_tcp.RESET:
        self._destroy()
        return True
    if _bn_clock.monotonic() >= self._close_deadline:
        self._abort()
        self._destroy()
        return True
    return False


def legacy_create_child(self, sb_guid):
    """nic.Nic.create_child reading the binding's CreateChild field (a new callable) each time."""
    binding = self.service_binding(sb_guid)
    child = _bn_efi.EFI_HANDLE()
    status = binding.CreateChild(ctypes.byref(binding), ctypes.byref(child))
    _bn_errors.raise_for_status(status, "CreateChild")
    handle = child.value
    if not handle:
        raise _bn_errors.socket_error(5, "CreateChild returned a NULL handle")
    self._children.add((sb_guid, handle))
    return handle


def legacy_destroy_child(self, sb_guid, handle):
    """nic.Nic.destroy_child reading the binding's DestroyChild field each time."""
    self._children.discard((sb_guid, handle))
    binding = self.service_binding(sb_guid)
    return binding.DestroyChild(ctypes.byref(binding), handle)
# trip4
# The fourth round's A/B (docs/performance.md section 7): the socket layer's recv and sendall
# before their fast paths, as bitsnet had them; _bind_trip4 puts them behind the error boundary
# as _socket does, under the names --variants gives: _socket.socket.recv=legacy_recv etc.
_bn_socket = _bn_errors = None


def _bind_trip4():
    global _bn_socket, _bn_errors, legacy_recv, legacy_sendall
    from bitsnet import _socket as _bn_socket, errors as _bn_errors
    legacy_recv = _bn_errors.efi_boundary(_legacy_recv)
    legacy_sendall = _bn_errors.efi_boundary(_legacy_sendall)
    if "tcp_send" not in _ORIGINAL:
        _ORIGINAL["tcp_send"] = _bn_tcp.TcpEndpoint.send


legacy_recv = legacy_sendall = None


def _legacy_recv(self, bufsize, flags=0):
    """_socket.socket.recv before its fast path: the generic way (_recv_stream, _sock_call,
    _wait: events.wait_until over the pump, the deadline read first)."""
    m = _bn_socket
    if type(bufsize) is not int or not 0 <= bufsize <= m._MAX_RECV:
        bufsize = m._size_arg(bufsize)
    if type(flags) is not int or flags:
        flags = m._int(flags)
    if bufsize < 0:
        raise ValueError("negative buffersize in recv")
    if bufsize > m._MAX_RECV:
        raise OverflowError("byte string is too large")
    if bufsize == 0 and sys.version_info[0] >= 3:
        self._endpoint()
        return b""
    if bufsize <= m._UNCOPIED_RECV_MAX:
        if self._type == m.SOCK_DGRAM:
            return self._recvfrom_into(None, bufsize, flags)[0]
        if not flags & m.MSG_WAITALL:
            return self._recv_stream(None, bufsize, flags)
    self._endpoint()
    buffer = bytearray(bufsize)
    n = self._recv_into(buffer, bufsize, flags)
    return bytes(buffer) if n == bufsize else memoryview(buffer)[:n].tobytes()


def _legacy_sendall(self, data, flags=0):
    """_socket.socket.sendall before its fast path: the deadline, _send, _sock_call."""
    m = _bn_socket
    if type(data) is bytes:
        view = memoryview(data)
    else:
        data, view = m._send_buffer(data)
    if type(flags) is not int or flags:
        flags = m._int(flags)
    deadline = self._deadline()
    sent = self._send(data, view, flags, deadline)
    while sent < len(view):
        rest = view[sent:]
        sent += self._send(rest, rest, flags, deadline)


def legacy_recv_blocking(self, nbytes, timeout):
    """tcp.TcpEndpoint.recv_blocking as first made (the fourth round's change 1): the deferred
    Receive posted through recv(), stack.settle() on every idle round."""
    tcp, events, stack = _bn_tcp, _bn_events, _bn_stack
    if self._rd_shut:
        return b""
    data = self.recv(nbytes)
    if data is not None:
        return data
    deadline = None if timeout is None else events.clock() + timeout
    receiver = self.receiver
    idle = 0
    while True:
        op = receiver.op
        poll = self.poll_target
        state = self._state
        if op is None or poll is None or tcp._rx_deferred or op.done:
            found = stack.pump(self)
        else:
            poll[0](poll[1])
            if op.completion.Status != tcp._SENTINEL and not op.done:
                events.take(op)
                data = self._take_received(op, nbytes)
                if data is not None:
                    return data
            found = stack.settle()
        if self._rx.size or receiver.op is not op or self._done or self._error or self._state != state:
            data = self.recv(nbytes)
            if data is not None:
                return data
        if deadline is not None and events.clock() >= deadline:
            raise _bn_errors.timeout("timed out")
        idle = 0 if found else idle + 1
        if idle > events.IDLE_SPINS:
            events.boot_services().Stall(events.IDLE_STALL_US)


def legacy_tcp_send(self, data):
    """tcp.TcpEndpoint.send before _check_open/_refresh/room were written out."""
    tcp = _bn_tcp
    self._check_open()
    self._refresh()
    if self._state not in tcp.MAY_SEND or self._error:
        return self._cannot_send()
    size = len(data)
    if not size:
        return 0
    sender = self.sender
    space = sender.room()
    if space <= 0:
        return None
    if size <= space and size <= tcp.TRANSMIT_CHUNK and not sender.queue.size and len(sender.ops) < tcp.MAX_TRANSMITS:
        self._post_transmit(data if isinstance(data, bytes) else memoryview(data).tobytes())
        return size
    return _ORIGINAL["tcp_send"](self, data)


def section_micro(opts):
    """Costs of single operations on the round trip's path, in BITS (``conv micro`` lines)."""
    from bitsnet import events
    n = 2000
    data = b"x"

    def timed(label, function):
        start = time.time()
        for _ in range(n):
            function()
        say("conv micro %-40s %.2f us" % (label, elapsed(start) / n * 1e6))
    c_void_p, cast = ctypes.c_void_p, ctypes.cast
    timed("empty Python call", lambda: None)
    timed("ctypes.cast(bytes, c_void_p).value", lambda: cast(data, c_void_p).value)
    timed("id(bytes) + offset", lambda: id(data) + BYTES_OFFSET)
    timed("events.clock()", events.clock)
    timed("events.process() (nothing to do)", events.process)
    op = events.Operation
    timed("events.Operation(...)", lambda: op(None, None, None, None, (), 0, 0, "tx"))
    timed("from bitsnet import dns (in a function)", _import_dns)
    timed("import ctypes (in a function)", _import_ctypes)
    buf = ctypes.create_string_buffer(64)
    timed("ctypes.string_at(buffer, 1)", lambda: ctypes.string_at(buf, 1))
    timed("c_char array [:1]", lambda: buf[:1])
    from bitsnet import efidefs
    completion = efidefs.EFI_TCP4_IO_TOKEN().CompletionToken
    timed("completion.Status = value (ctypes field store)", lambda: setattr(completion, "Status", 1))


def _import_dns():
    from bitsnet import dns  # noqa: F401


def _import_ctypes():
    import ctypes  # noqa: F401



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
            "batch": section_batch, "sendab": section_sendab, "copies": section_copies, "fileab": section_fileab,
            "http": section_http, "convprof": section_convprof, "convab": section_convab,
            "floor": section_floor, "micro": section_micro}


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
        elif arg in ("--batches", "--ab", "--variants"):
            opts[arg[2:]] = argv[i + 1]
            i += 2
        elif arg.startswith("--") and arg[2:].replace("-", "_") in ("http", "size", "send_size", "trips", "conns",
                                                                     "repeat", "reps", "http_reqs", "http_conns",
                                                                     "http_body"):
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
