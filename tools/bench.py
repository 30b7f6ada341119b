#!/usr/bin/env python
"""Side-by-side performance figures: bitsnet, raw EFI TCP4/UDP4, and the host kernel.

    python tools/bench.py [--quick] [--json] [--only NAME[,NAME...]]

Every measurement runs in this one process, on one simulated machine (``efisim``, booted as
``tools/efirun.py`` boots it, timer at EDK2's realistic 10 ms) with the trampoline loaded and
``bitsnet.install()`` in effect. Three columns per figure:

ceiling A  the host kernel over loopback, plain host sockets (the physical limit here);
ceiling B  raw EFI TCP4/UDP4 calls through the simulator with the leanest loop a Python layer
           could have: one buffer and one token reused, Poll-driven; measured twice, with a
           Type-0 event + CheckEvent and with the trampoline (EVT_NOTIFY_SIGNAL, pending call),
           and the better of the two is the ceiling (the limit for any Python layer on this
           simulator); for bulk receive also with Polls batched between Receives
           (``raw_bulk_recv``), which is what makes EDK2's one-frame-per-Poll pace go fast;
bitsnet    the socket API as users call it (``recv_into``, ``recv(65536)``, ``sendall``,
           ``makefile().read()``, urllib download), over ``bitsnet.install()``.

The peers (bulk source and sink, echo, UDP echo, HTTP: tools/bench_peer.py) run in a
subprocess started before anything else (``--serve-peer``): they must use the host's sockets
(``install()`` replaces the ``socket`` module of this process) and must not compete with the
measured loop for this process's GIL. The host-socket module objects this file imported before ``install()`` stay the
host's, which is what ceiling A uses.

``ratio`` is bitsnet / ceiling B. For throughputs higher is better; for costs (select/poll
microseconds, memory) lower is better, so there a ratio above 1 is the overhead factor. Memory
figures use tracemalloc (Python 3) counting allocations made in bitsnet's own files (ceiling B:
this file's raw loop; ceiling A: host socket objects); Python 2.7 has no tracemalloc, so there
they are sizes of all gc-tracked objects of the process (simulator included) and say so.
"""

from __future__ import print_function

import argparse
import ctypes
import gc
import json
import os
import select as host_select
import socket as host_socket
import sys
import time

from bench_peer import PATTERN, PEER, Peer, header, serve_peer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BOOT_PYTHON = os.path.join(HERE, "efisim", "boot_python")
STATION, MASK = "127.0.0.2", "255.0.0.0"
CHUNK = 64 * 1024  # bytes per recv/send call and per raw Receive/Transmit: what bitsnet uses
UDP_PAYLOAD = 64  # bytes per UDP datagram in the datagram figure
RAW_POLL_BATCHES = (0, 16)  # ceiling B bulk receive: Polls between Receives (raw_bulk_recv); best taken
WAIT = 30.0  # seconds one operation may take before the bench gives up on it
RAW_CONTEXT_BASE = 1 << 24  # trampoline contexts of ceiling B's events: never one of bitsnet's slots
_clock = getattr(time, "monotonic", time.time)
PY2 = sys.version_info[0] == 2


# ==================================================================== measurement helpers
class Figure(object):
    def __init__(self, name, unit, better="higher", note=""):
        self.name, self.unit, self.better, self.note = name, unit, better, note
        self.bitsnet = self.ceiling_a = self.ceiling_b = None

    @property
    def ratio(self):
        if self.bitsnet is None or not self.ceiling_b:
            return None
        return self.bitsnet / self.ceiling_b

    def as_dict(self):
        return dict(name=self.name, unit=self.unit, bitsnet=self.bitsnet, ceiling_a=self.ceiling_a,
                    ceiling_b=self.ceiling_b, ratio=self.ratio, better=self.better, note=self.note)


def timed(function, *args):
    start = _clock()
    result = function(*args)
    return _clock() - start, result


def mbps(nbytes, seconds):
    return nbytes / seconds / 1e6


def rate(count, seconds):
    return count / seconds


class Tracer(object):
    """Memory attributed to some source files (tracemalloc, Python 3) or the RSS (Python 2)."""

    def __init__(self, pattern):
        self.pattern = pattern
        try:
            import tracemalloc
        except ImportError:
            tracemalloc = None
        self.tracemalloc = tracemalloc

    @property
    def kind(self):
        return "tracemalloc" if self.tracemalloc else "gc heap, whole process"

    def start(self):
        gc.collect()
        if self.tracemalloc:
            self.tracemalloc.start(4)

    def stop(self):
        if self.tracemalloc:
            self.tracemalloc.stop()

    def now(self):
        """Bytes right now."""
        gc.collect()
        if not self.tracemalloc:
            # Python 2.7: the size of every object the collector tracks (ctypes buffers
            # included), whole process -- the simulator's objects count too.
            return sum(sys.getsizeof(obj) for obj in gc.get_objects())
        # Attribute each block to the innermost frame outside ctypes (a create_string_buffer
        # made by bitsnet counts as bitsnet's), then keep the files matching ``pattern``.
        import fnmatch
        total = 0
        for trace in self.tracemalloc.take_snapshot().traces:
            frames = list(trace.traceback)
            if sys.version_info >= (3, 7):
                frames.reverse()  # most recent first
            for frame in frames:
                if os.sep + "ctypes" + os.sep not in frame.filename:
                    if fnmatch.fnmatch(frame.filename, self.pattern):
                        total += trace.size
                    break
        return total


# ==================================================================== ceiling A: host kernel
# Where a figure's loop is plain socket API, ceiling A runs bitsnet's loop (below) with the
# host's socket module: the same code on both sides of the ratio.
def host_connect(port):
    return bits_connect(host_socket, port)


def host_bulk_recv(peer, size):
    sock = host_connect(peer.tcp)
    buf = bytearray(CHUNK)
    start = _clock()
    sock.sendall(header(b"S", size))
    got = 0
    while got < size:
        n = sock.recv_into(buf)
        if not n:
            break
        got += n
    seconds = _clock() - start
    sock.close()
    assert got == size, got
    return mbps(size, seconds)


def host_bulk_send(peer, size):
    return bits_bulk_send(host_socket, peer, size)


def host_round_trips(peer, count):
    return bits_round_trips(host_socket, peer, count)


def host_connections(peer, count):
    start = _clock()
    for _ in range(count):
        sock = host_connect(peer.tcp)
        sock.sendall(b"Cx")
        if sock.recv(1) != b"x":
            raise AssertionError("one-shot")
        sock.close()
    return rate(count, _clock() - start)


def host_udp(peer, count):
    return bits_udp(host_socket, peer, count)


def host_select_cost(peer, counts, calls, use_poll=False):
    """Microseconds per select (or poll) call with n idle sockets plus one ready, per n."""
    ready = host_connect(peer.tcp)
    ready.sendall(b"Ex")
    waiter = host_select.poll()
    waiter.register(ready, host_select.POLLIN)
    waiter.poll(WAIT * 1000)
    idle = []
    result = {}
    try:
        for n in counts:
            while len(idle) < n:
                sock = host_connect(peer.tcp)
                sock.sendall(b"E")
                idle.append(sock)
            socks = idle[:n] + [ready]
            if use_poll:
                poller = host_select.poll()
                for sock in socks:
                    poller.register(sock, host_select.POLLIN)
                call = lambda: poller.poll(0)  # noqa: E731
            else:
                call = lambda: host_select.select(socks, [], [], 0)  # noqa: E731
            try:
                assert len(call()[0] if not use_poll else call()) == 1
            except ValueError:  # select(): a descriptor above FD_SETSIZE (1024)
                continue
            try:
                seconds, _ = timed(_repeat, call, calls)
            except ValueError:  # select(): a descriptor above FD_SETSIZE (1024)
                continue
            result[n] = seconds / calls * 1e6
    finally:
        for sock in idle + [ready]:
            sock.close()
    return result


def _repeat(call, count):
    for _ in range(count):
        call()


def host_memory(peer, count):
    """Bytes per idle connection (Python objects of host sockets) and growth after ``count``
    connections opened and closed."""
    tracer = Tracer(__file__)
    tracer.pattern = "*socket.py"
    tracer.start()
    try:
        before = tracer.now()
        socks = []
        for _ in range(100):
            sock = host_connect(peer.tcp)
            sock.sendall(b"E")
            socks.append(sock)
        per_idle = (tracer.now() - before) / 100.0
        for sock in socks:
            sock.close()
        del socks[:]
        start = tracer.now()
        host_connections(peer, count)
        growth = tracer.now() - start
    finally:
        tracer.stop()
    return per_idle, growth


# ==================================================================== ceiling B: raw EFI
class Raw(object):
    """The leanest raw EFI loops; ``mode`` "check-event" (Type-0 + CheckEvent) or "trampoline"."""

    def __init__(self, mode):
        import efi
        from bitsnet import efidefs
        self.efi, self.d, self.mode = efi, efidefs, mode
        self.bs = efi.system_table.BootServices.contents
        self.fired = set()
        self.events = []
        self.previous = None
        if mode == "trampoline":
            import _bitsnet_trampoline
            self.trampoline = _bitsnet_trampoline
            self.previous = _bitsnet_trampoline.set_dispatcher(self.fired.add)
            self.notify = efi.EFI_EVENT_NOTIFY(_bitsnet_trampoline.notify_function)
        handles = efi.locate_handles(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
        self.sb = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL.from_handle(handles[0])

    def event(self):
        """A new event; its number (trampoline context) is RAW_CONTEXT_BASE + its index + 1.

        Distinct from bitsnet's slot numbers: a bitsnet socket closing in the background (TIME_WAIT)
        can complete a token while the raw loop's dispatcher is installed; ``finish`` hands such
        numbers back to bitsnet, and the raw loop must not take them for its own."""
        event = self.efi.EFI_EVENT()
        number = RAW_CONTEXT_BASE + len(self.events) + 1
        if self.mode == "trampoline":
            status = self.bs.CreateEvent(self.efi.EVT_NOTIFY_SIGNAL, self.efi.TPL_CALLBACK, self.notify,
                                         ctypes.c_void_p(number), ctypes.byref(event))
        else:
            status = self.bs.CreateEvent(0, 0, self.efi.EFI_EVENT_NOTIFY(), None, ctypes.byref(event))
        self.efi.check_status(status)
        self.events.append(event.value)
        return event.value, number

    def signalled(self, event, number):
        """Has ``event`` fired? (clears it). Trampoline: pending calls ran between bytecodes."""
        if self.mode == "trampoline":
            if number in self.fired:
                self.fired.discard(number)
                return True
            return False
        return self.bs.CheckEvent(event) == 0

    # --- one child ----------------------------------------------------------------------
    def child(self):
        handle = self.efi.EFI_HANDLE()
        self.efi.check_status(self.sb.CreateChild(ctypes.byref(self.sb), ctypes.byref(handle)))
        proto = self.d.EFI_TCP4_PROTOCOL.from_handle(handle.value)
        return handle.value, proto

    def destroy(self, handle):
        self.efi.check_status(self.sb.DestroyChild(ctypes.byref(self.sb), handle))

    def config(self, port, active=True):
        cfg = self.d.EFI_TCP4_CONFIG_DATA()
        cfg.TimeToLive = 64
        ap = cfg.AccessPoint
        ap.StationAddress = self.d.ipv4(STATION)
        ap.SubnetMask = self.d.ipv4(MASK)
        ap.RemoteAddress = self.d.ipv4(PEER)
        ap.RemotePort = port
        ap.ActiveFlag = active
        return cfg

    def wait(self, proto, token, event, number):
        """Poll until ``event`` fires; the token's Status."""
        deadline = _clock() + WAIT
        poll = proto.Poll
        while not self.signalled(event, number):
            poll(ctypes.byref(proto))
            if _clock() > deadline:
                raise RuntimeError("raw EFI wait timed out")
        return token.Status

    def connect(self, port, cfg=None, ctoken=None):
        handle, proto = self.child()
        self.efi.check_status(proto.Configure(ctypes.byref(proto), ctypes.byref(cfg or self.config(port))))
        if ctoken is None:
            ctoken = self.d.EFI_TCP4_CONNECTION_TOKEN()
            ctoken.CompletionToken.Event, ctoken.number = self.event()
        self.efi.check_status(proto.Connect(ctypes.byref(proto), ctypes.byref(ctoken)))
        self.efi.check_status(self.wait(proto, ctoken.CompletionToken, ctoken.CompletionToken.Event, ctoken.number))
        return handle, proto

    def io(self, size, tx=False, data=None):
        """One IO token with its packet and buffer, all reused for every call."""
        token = self.d.EFI_TCP4_IO_TOKEN()
        token.CompletionToken.Event, token.number = self.event()
        packet = (self.d.EFI_TCP4_TRANSMIT_DATA if tx else self.d.EFI_TCP4_RECEIVE_DATA)()
        buf = ctypes.create_string_buffer(data, size) if data is not None else ctypes.create_string_buffer(size)
        packet.DataLength = size
        packet.FragmentCount = 1
        packet.FragmentTable[0].FragmentLength = size
        packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
        if tx:
            packet.Push = True
            token.Packet.TxData = ctypes.pointer(packet)
        else:
            token.Packet.RxData = ctypes.pointer(packet)
        token.packet, token.buf = packet, buf
        return token

    def send(self, proto, token, data):
        ctypes.memmove(token.buf, data, len(data))
        token.packet.DataLength = token.packet.FragmentTable[0].FragmentLength = len(data)
        token.CompletionToken.Status = self.efi.EFI_NOT_READY
        self.efi.check_status(proto.Transmit(ctypes.byref(proto), ctypes.byref(token)))
        self.efi.check_status(self.wait(proto, token.CompletionToken, token.CompletionToken.Event, token.number))

    def receive(self, proto, token, size):
        """One Receive (re-initialised, docs/edk2.md section 3.3); bytes delivered, 0 at FIN."""
        packet = token.packet
        packet.DataLength = packet.FragmentTable[0].FragmentLength = size
        token.CompletionToken.Status = self.efi.EFI_NOT_READY
        status = proto.Receive(ctypes.byref(proto), ctypes.byref(token))
        if status == self.efi.EFI_CONNECTION_FIN:
            return 0
        self.efi.check_status(status)
        status = self.wait(proto, token.CompletionToken, token.CompletionToken.Event, token.number)
        if status == self.efi.EFI_CONNECTION_FIN:
            return 0
        self.efi.check_status(status)
        return packet.DataLength

    def finish(self):
        for event in self.events:
            self.bs.CloseEvent(event)
        del self.events[:]
        if self.mode == "trampoline" and self.previous is not None:
            self.trampoline.set_dispatcher(self.previous)
            # Notifications of bitsnet's own events that arrived meanwhile: bitsnet only records
            # them (docs/architecture.md section 13 rule 5), so handing them over now is just a late delivery.
            for number in sorted(n for n in self.fired if n < RAW_CONTEXT_BASE):
                self.previous(number)


def raw_bulk_recv(raw, peer, size, batch=0):
    """``batch``: Polls after each completion before the Receive is posted again. EDK2 takes
    one frame per Poll and completes an outstanding Receive with that one frame (docs/edk2.md section 3.3
    Receive, 3.4); with no Receive outstanding the frames wait in its buffer and the next
    Receive takes them all at once, synchronously -- fewer, fuller completions."""
    handle, proto = raw.connect(peer.tcp)
    tx = raw.io(16, tx=True)
    rx = raw.io(CHUNK)
    this = ctypes.byref(proto)
    start = _clock()
    raw.send(proto, tx, header(b"S", size))
    got = 0
    while got < size:
        n = raw.receive(proto, rx, CHUNK)
        if not n:
            break
        got += n
        for _ in range(batch):
            proto.Poll(this)
    seconds = _clock() - start
    raw.destroy(handle)
    assert got == size, got
    return mbps(size, seconds)


def raw_bulk_send(raw, peer, size):
    handle, proto = raw.connect(peer.tcp)
    tx = raw.io(CHUNK, tx=True)
    rx = raw.io(16)
    data = PATTERN[:CHUNK]
    start = _clock()
    raw.send(proto, tx, header(b"K", size))
    left = size
    while left:
        n = min(left, CHUNK)
        raw.send(proto, tx, data[:n])
        left -= n
    assert raw.receive(proto, rx, 16) == 1
    seconds = _clock() - start
    raw.destroy(handle)
    return mbps(size, seconds)


def raw_round_trips(raw, peer, count):
    handle, proto = raw.connect(peer.tcp)
    tx = raw.io(16, tx=True)
    rx = raw.io(16)
    raw.send(proto, tx, b"E")
    start = _clock()
    for _ in range(count):
        raw.send(proto, tx, b"x")
        if raw.receive(proto, rx, 16) != 1:
            raise AssertionError("echo")
    seconds = _clock() - start
    raw.destroy(handle)
    return rate(count, seconds)


def raw_connections(raw, peer, count):
    """Connect, exchange one byte, graceful Close; children are destroyed when their Close
    completes (as bitsnet's reaper does), polled between connections."""
    tx = raw.io(16, tx=True)
    rx = raw.io(16)
    ctoken = raw.d.EFI_TCP4_CONNECTION_TOKEN()
    ctoken.CompletionToken.Event, ctoken.number = raw.event()
    closing = []
    start = _clock()
    for _ in range(count):
        handle, proto = raw.connect(peer.tcp, ctoken=ctoken)
        raw.send(proto, tx, b"Cx")
        if raw.receive(proto, rx, 16) != 1:
            raise AssertionError("one-shot")
        closing.append((handle, proto, _close_token(raw, proto)))
        closing = _reap_raw(raw, closing)
    while closing:
        closing = _reap_raw(raw, closing)
        if closing:
            closing[0][1].Poll(ctypes.byref(closing[0][1]))
    seconds = _clock() - start
    return rate(count, seconds)


def _close_token(raw, proto):
    token = raw.d.EFI_TCP4_CLOSE_TOKEN()
    token.CompletionToken.Status = raw.efi.EFI_NOT_READY
    token.CompletionToken.Event = raw.close_event
    raw.efi.check_status(proto.Close(ctypes.byref(proto), ctypes.byref(token)))
    return token


def _reap_raw(raw, closing):
    """Destroy the children whose Close completed (Status no longer EFI_NOT_READY)."""
    left = []
    for handle, proto, token in closing:
        if token.CompletionToken.Status != raw.efi.EFI_NOT_READY:
            raw.destroy(handle)
        else:
            left.append((handle, proto, token))
    return left


def raw_select_cost(raw, peer, counts, calls):
    """One select over raw children: one Poll (any child polls the NIC, docs/edk2.md section 3.3 Poll) plus a
    look at each child's outstanding Receive (CheckEvent, or the trampoline's fired set)."""
    children = []
    result = {}

    def add(command):
        handle, proto = raw.connect(peer.tcp)
        tx = raw.io(16, tx=True)
        raw.send(proto, tx, command)
        rx = raw.io(CHUNK)
        rx.packet.DataLength = rx.packet.FragmentTable[0].FragmentLength = CHUNK
        rx.CompletionToken.Status = raw.efi.EFI_NOT_READY
        raw.efi.check_status(proto.Receive(ctypes.byref(proto), ctypes.byref(rx)))
        children.append((handle, proto, rx))

    try:
        add(b"Ex")  # the ready one: its echo completes the Receive
        ready_proto, ready_rx = children[0][1], children[0][2]
        raw.wait(ready_proto, ready_rx.CompletionToken, ready_rx.CompletionToken.Event, ready_rx.number)
        raw.fired.add(ready_rx.number)
        for n in counts:
            while len(children) < n + 1:
                add(b"E")
            tokens = [(c[2].CompletionToken.Event, c[2].number) for c in children[:n + 1]]
            signalled = raw.signalled
            fired = raw.fired

            def one_select():
                ready_proto.Poll(ctypes.byref(ready_proto))
                found = [(event, number) for event, number in tokens if signalled(event, number)]
                for event, number in found:  # a select reports readiness, it does not consume it
                    if raw.mode == "trampoline":
                        fired.add(number)
                    else:
                        raw.bs.SignalEvent(event)
                return found
            if raw.mode != "trampoline":
                raw.bs.SignalEvent(ready_rx.CompletionToken.Event)
            assert len(one_select()) == 1
            seconds, _ = timed(_repeat, one_select, calls)
            result[n] = seconds / calls * 1e6
    finally:
        for handle, _, _ in children:
            raw.destroy(handle)
    return result


def raw_memory(raw, peer, count):
    """Bytes per idle raw connection (this file's allocations: tokens, packet, 64 KiB buffer)."""
    tracer = Tracer(__file__)
    tracer.start()
    children = []
    try:
        before = tracer.now()
        for _ in range(100):
            handle, proto = raw.connect(peer.tcp)
            rx = raw.io(CHUNK)
            raw.efi.check_status(proto.Receive(ctypes.byref(proto), ctypes.byref(rx)))
            children.append((handle, proto, rx))
        per_idle = (tracer.now() - before) / 100.0
        for handle, _, _ in children:
            raw.destroy(handle)
        del children[:]
        start = tracer.now()
        raw_connections(raw, peer, count)
        growth = tracer.now() - start
    finally:
        tracer.stop()
    return per_idle, growth


# --- raw UDP4 -------------------------------------------------------------------------------
def raw_udp(raw, peer, count):
    d, efi = raw.d, raw.efi
    handles = efi.locate_handles(d.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID)
    sb = d.EFI_UDP4_SERVICE_BINDING_PROTOCOL.from_handle(handles[0])
    handle = efi.EFI_HANDLE()
    efi.check_status(sb.CreateChild(ctypes.byref(sb), ctypes.byref(handle)))
    proto = d.EFI_UDP4_PROTOCOL.from_handle(handle.value)
    try:
        cfg = d.EFI_UDP4_CONFIG_DATA()
        cfg.TimeToLive = 64
        cfg.StationAddress = d.ipv4(STATION)
        cfg.SubnetMask = d.ipv4(MASK)
        cfg.RemoteAddress = d.ipv4(PEER)
        cfg.RemotePort = peer.udp
        efi.check_status(proto.Configure(ctypes.byref(proto), ctypes.byref(cfg)))
        tx = d.EFI_UDP4_COMPLETION_TOKEN()
        tx.Event, tx_number = raw.event()
        packet = d.EFI_UDP4_TRANSMIT_DATA()
        buf = ctypes.create_string_buffer(b"u" * UDP_PAYLOAD, UDP_PAYLOAD)
        packet.DataLength = packet.FragmentTable[0].FragmentLength = UDP_PAYLOAD
        packet.FragmentCount = 1
        packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
        tx.Packet.TxData = ctypes.pointer(packet)
        rx = d.EFI_UDP4_COMPLETION_TOKEN()
        rx.Event, rx_number = raw.event()
        poll = proto.Poll
        this = ctypes.byref(proto)
        start = _clock()
        for _ in range(count):
            rx.Status = efi.EFI_NOT_READY
            efi.check_status(proto.Receive(this, ctypes.byref(rx)))
            tx.Status = efi.EFI_NOT_READY
            efi.check_status(proto.Transmit(this, ctypes.byref(tx)))
            deadline = _clock() + WAIT
            while not raw.signalled(tx.Event, tx_number):
                poll(this)
                if _clock() > deadline:
                    raise RuntimeError("UDP transmit lost")
            while not raw.signalled(rx.Event, rx_number):
                poll(this)
                if _clock() > deadline:
                    raise RuntimeError("UDP echo lost")
            efi.check_status(rx.Status)
            data = rx.Packet.RxData.contents
            ctypes.string_at(data.FragmentTable[0].FragmentBuffer, data.FragmentTable[0].FragmentLength)
            raw.bs.SignalEvent(data.RecycleSignal)
        seconds = _clock() - start
        proto.Configure(this, None)
    finally:
        sb.DestroyChild(ctypes.byref(sb), handle.value)
    return rate(count, seconds)


# ==================================================================== bitsnet (socket API)
def bits_connect(socket_module, port):
    sock = socket_module.create_connection((PEER, port), WAIT)
    sock.setsockopt(socket_module.IPPROTO_TCP, socket_module.TCP_NODELAY, 1)
    return sock


def bits_bulk_recv(sm, peer, size, how):
    if how == "urllib":
        try:
            from urllib.request import urlopen
        except ImportError:  # Python 2.7
            from urllib2 import urlopen  # type: ignore
        start = _clock()
        response = urlopen("http://%s:%d/bytes/%d" % (PEER, peer.http, size), timeout=WAIT)
        got = 0
        while True:
            data = response.read(CHUNK)
            if not data:
                break
            got += len(data)
        response.close()
        seconds = _clock() - start
        assert got == size, got
        return mbps(size, seconds)
    sock = bits_connect(sm, peer.tcp)
    start = _clock()
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
    else:  # makefile().read(): the whole stream in one call, until the peer's FIN
        stream = sock.makefile("rb")
        got = len(stream.read())
        stream.close()
    seconds = _clock() - start
    sock.close()
    assert got == size, (how, got)
    return mbps(size, seconds)


def bits_bulk_send(sm, peer, size):
    sock = bits_connect(sm, peer.tcp)
    view = memoryview(PATTERN)[:CHUNK * 16]
    start = _clock()
    sock.sendall(header(b"K", size))
    left = size
    while left:
        n = min(left, len(view))
        sock.sendall(view[:n])
        left -= n
    assert sock.recv(1) == b"k"
    seconds = _clock() - start
    sock.close()
    return mbps(size, seconds)


def bits_round_trips(sm, peer, count):
    sock = bits_connect(sm, peer.tcp)
    sock.sendall(b"E")
    start = _clock()
    for _ in range(count):
        sock.sendall(b"x")
        if sock.recv(1) != b"x":
            raise AssertionError("echo")
    seconds = _clock() - start
    sock.close()
    return rate(count, seconds)


def bits_connections(sm, peer, count):
    from bitsnet import tcp
    start = _clock()
    for _ in range(count):
        sock = bits_connect(sm, peer.tcp)
        sock.sendall(b"Cx")
        if sock.recv(1) != b"x":
            raise AssertionError("one-shot")
        sock.close()
    # the background graceful closes are part of the cost: wait until the reaper is done
    settle_bitsnet(tcp)
    return rate(count, _clock() - start)


def settle_bitsnet(tcp):
    from bitsnet import events, stack
    events.wait_until(lambda: not tcp._closing, _clock() + WAIT, poll=stack.pump)


def bits_udp(sm, peer, count):
    sock = sm.socket(sm.AF_INET, sm.SOCK_DGRAM)
    sock.connect((PEER, peer.udp))
    sock.settimeout(1.0)
    payload = b"u" * UDP_PAYLOAD
    start = _clock()
    for _ in range(count):
        sock.send(payload)
        sock.recv(65536)
    seconds = _clock() - start
    sock.close()
    return rate(count, seconds)


def bits_select_cost(sm, sel, peer, counts, calls, use_poll=False):
    ready = bits_connect(sm, peer.tcp)
    ready.sendall(b"Ex")
    sel.select([ready], [], [], WAIT)
    idle = []
    result = {}
    try:
        for n in counts:
            while len(idle) < n:
                sock = bits_connect(sm, peer.tcp)
                sock.sendall(b"E")
                idle.append(sock)
            socks = idle[:n] + [ready]
            if use_poll:
                poller = sel.poll()
                for sock in socks:
                    poller.register(sock, sel.POLLIN)
                call = lambda: poller.poll(0)  # noqa: E731
                assert len(call()) == 1
            else:
                call = lambda: sel.select(socks, [], [], 0)  # noqa: E731
                assert len(call()[0]) == 1
            seconds, _ = timed(_repeat, call, calls)
            result[n] = seconds / calls * 1e6
    finally:
        for sock in idle + [ready]:
            sock.close()
    return result


def bits_memory(sm, peer, count):
    from bitsnet import tcp
    tracer = Tracer("*%sbitsnet%s*" % (os.sep, os.sep))
    if not tracer.tracemalloc:
        tracer.pattern = None
    tracer.start()
    try:
        settle_bitsnet(tcp)
        before = tracer.now()
        socks = []
        for _ in range(100):
            sock = bits_connect(sm, peer.tcp)
            sock.sendall(b"E")
            socks.append(sock)
        per_idle = (tracer.now() - before) / 100.0
        for sock in socks:
            sock.close()
        del socks[:]
        settle_bitsnet(tcp)
        bits_connections(sm, peer, 10)  # warm: first-use caches (event pool, classes) are not growth
        start = tracer.now()
        bits_connections(sm, peer, count)
        growth = tracer.now() - start
    finally:
        tracer.stop()
    return per_idle, growth, tracer.kind


# ==================================================================== the run
def boot():
    for path in (HERE, ROOT, BOOT_PYTHON):
        if path not in sys.path:
            sys.path.insert(0, path)
    from efisim import machine, trampoline_build
    booted = machine.boot(machine.MachineConfig(static=True))
    try:
        trampoline_build.ensure_trampoline()
        modes = ["check-event", "trampoline"]
    except RuntimeError as exc:
        print("bench: no trampoline (%s): ceiling B uses CheckEvent only" % exc, file=sys.stderr)
        modes = ["check-event"]
    return booted, modes


def best_raw(modes, function, *args, **kwargs):
    """Ceiling B: the better of the two event modes (``lower``: for costs)."""
    lower = kwargs.pop("lower", False)
    results = []
    for mode in modes:
        raw = Raw(mode)
        raw.close_event = raw.event()[0]
        try:
            results.append(function(raw, *args))
        finally:
            raw.finish()
    if isinstance(results[0], dict):
        return dict((k, min(r[k] for r in results) if lower else max(r[k] for r in results)) for k in results[0])
    return min(results) if lower else max(results)


def slope(costs):
    """Microseconds per idle socket: least squares over the sizes measured."""
    xs = sorted(costs)
    if len(xs) < 2:
        return None
    mean_x = sum(xs) / float(len(xs))
    mean_y = sum(costs[x] for x in xs) / float(len(xs))
    num = sum((x - mean_x) * (costs[x] - mean_y) for x in xs)
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


def run(opts, peer, modes):
    size = (4 if opts.quick else 64) * 1024 * 1024
    trips = 500 if opts.quick else 5000
    conns = 100 if opts.quick else 1000
    memory_conns = 500 if opts.quick else 10000
    datagrams = 500 if opts.quick else 5000
    counts = [1, 10, 100, 1000]
    calls = 5 if opts.quick else 100
    repeats = 1 if opts.quick else 3  # best of: see measure()
    only = set(opts.only.split(",")) if opts.only else None

    import bitsnet
    bitsnet.install()
    import socket as sm  # bitsnet's now
    import select as sel
    from bitsnet import tcp
    figures = []

    def want(name):
        return only is None or name in only or name.split("_")[0] in only

    def add(figure):
        figures.append(figure)
        if not opts.json:
            print(row(figure))
            sys.stdout.flush()
        return figure

    def measure(figure, host, raw_variants, bits):
        """Best of ``repeats`` rounds. Each round measures A, then every ceiling-B variant (event
        mode x loop shape) each followed by bitsnet: on a shared machine the load changes from
        second to second, so the figures are taken interleaved, and bitsnet is measured as often
        as ceiling B -- a best-of with more tries than the other side would favour that side."""
        for _ in range(repeats):
            a = host()
            figure.ceiling_a = a if figure.ceiling_a is None else max(a, figure.ceiling_a)
            for raw in raw_variants:
                b, c = raw(), bits()
                figure.ceiling_b = b if figure.ceiling_b is None else max(b, figure.ceiling_b)
                figure.bitsnet = c if figure.bitsnet is None else max(c, figure.bitsnet)
        return add(figure)

    def variants(function, *args):
        """Ceiling B in each event mode: one measurement each (see best_raw)."""
        return [lambda mode=mode: best_raw([mode], function, *args) for mode in modes]

    if not opts.json:
        print(heading())
    if want("bulk_recv"):
        for how, name in (("recv_into", "bulk_recv"), ("recv", "bulk_recv_recv"),
                          ("makefile", "bulk_recv_makefile"), ("urllib", "bulk_recv_urllib")):
            measure(Figure(name, "MB/s", note="%s, %d MiB" % (how, size >> 20)),
                    lambda: host_bulk_recv(peer, size),
                    [v for batch in RAW_POLL_BATCHES for v in variants(raw_bulk_recv, peer, size, batch)],
                    lambda: bits_bulk_recv(sm, peer, size, how))
    if want("bulk_send"):
        measure(Figure("bulk_send", "MB/s", note="sendall, %d MiB" % (size >> 20)),
                lambda: host_bulk_send(peer, size), variants(raw_bulk_send, peer, size),
                lambda: bits_bulk_send(sm, peer, size))
    if want("round_trips"):
        measure(Figure("round_trips", "1/s", note="1-byte request/response"),
                lambda: host_round_trips(peer, trips), variants(raw_round_trips, peer, trips),
                lambda: bits_round_trips(sm, peer, trips))
    if want("connections"):
        measure(Figure("connections", "1/s", note="connect, 1-byte exchange, graceful close"),
                lambda: host_connections(peer, conns), variants(raw_connections, peer, conns),
                lambda: bits_connections(sm, peer, conns))
    if want("udp_datagrams"):
        measure(Figure("udp_datagrams", "1/s", note="%d-byte datagram echo" % UDP_PAYLOAD),
                lambda: host_udp(peer, datagrams), variants(raw_udp, peer, datagrams),
                lambda: bits_udp(sm, peer, datagrams))
    if want("select"):
        for kind, use_poll in (("select", False), ("poll", True)):
            a = host_select_cost(peer, counts, calls, use_poll)
            b = best_raw(modes, raw_select_cost, peer, counts, calls, lower=True)
            c = bits_select_cost(sm, sel, peer, counts, calls, use_poll)
            settle_bitsnet(tcp)
            for n in counts:
                f = Figure("%s_us_%d" % (kind, n), "us", better="lower", note="%d idle + 1 ready" % n)
                f.ceiling_a, f.ceiling_b, f.bitsnet = a.get(n), b.get(n), c.get(n)
                add(f)
            f = Figure("%s_us_per_idle_socket" % kind, "us", better="lower", note="slope over 1..1000")
            f.ceiling_a, f.ceiling_b, f.bitsnet = slope(a), slope(b), slope(c)
            add(f)
    if want("memory"):
        a_idle, a_growth = host_memory(peer, memory_conns)
        b_idle, b_growth = best_raw(modes[-1:], raw_memory, peer, memory_conns, lower=True)  # mode-blind
        c_idle, c_growth, kind = bits_memory(sm, peer, memory_conns)
        f = Figure("memory_kib_per_idle_connection", "KiB", better="lower", note=kind)
        f.ceiling_a, f.ceiling_b, f.bitsnet = a_idle / 1024.0, b_idle / 1024.0, c_idle / 1024.0
        add(f)
        f = Figure("memory_growth_kib_after_%s" % ("10k" if memory_conns == 10000 else memory_conns), "KiB",
                   better="lower", note="%s, %d connections" % (kind, memory_conns))
        if memory_conns != 10000:
            f.name = "memory_growth_kib_after_10k"
            f.note += " (--quick)"
        f.ceiling_a, f.ceiling_b, f.bitsnet = a_growth / 1024.0, b_growth / 1024.0, c_growth / 1024.0
        add(f)
    tcp.close_all(10.0)
    return figures


def heading():
    return "%-32s %6s %11s %11s %11s %7s  %s\n%s" % (
        "figure", "unit", "bitsnet", "ceiling A", "ceiling B", "ratio", "note", "-" * 100)


def fmt(value):
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return "%.0f" % value
    return "%.2f" % value


def row(f):
    ratio = "n/a" if f.ratio is None else "%.2f" % f.ratio
    return "%-32s %6s %11s %11s %11s %7s  %s" % (f.name, f.unit, fmt(f.bitsnet), fmt(f.ceiling_a),
                                                 fmt(f.ceiling_b), ratio, f.note)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 MiB transfers, 500 connections (CI)")
    parser.add_argument("--json", action="store_true", help="one JSON object with a `figures` list")
    parser.add_argument("--only", default="", help="comma-separated figure names or prefixes")
    parser.add_argument("--serve-peer", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.serve_peer:
        serve_peer()
        return 0
    peer = Peer()
    booted = None
    try:
        booted, modes = boot()
        started = _clock()
        figures = run(opts, peer, modes)
        info = dict(python=sys.version.split()[0], quick=opts.quick, seconds=round(_clock() - started, 1),
                    ceiling_b_modes=modes, crashes=list(booted.firmware.crashes))
        if opts.json:
            info["figures"] = [f.as_dict() for f in figures]
            print(json.dumps(info, indent=1, sort_keys=True))
        else:
            print("python %(python)s, %(seconds)s s, ceiling B modes: %(ceiling_b_modes)s" % info)
            if info["crashes"]:
                print("firmware faults:\n" + "\n".join(info["crashes"]))
    finally:
        try:
            from bitsnet import events
            events.shutdown()
        except Exception:
            pass
        if booted is not None:
            booted.shutdown()
        peer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
