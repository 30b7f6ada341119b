"""Data integrity under every fault plan (docs/testing.md section 3.4): no byte lost, duplicated or reordered,
no datagram corrupted.

Bitsnet sockets run in this interpreter (the simulated firmware's), the peers are host sockets
on loopback in their own threads. For each plan in ``faults.PLAN_NAMES``:

* TCP: ``STREAMS`` connections at once, select driven and non-blocking on bitsnet's side; each
  sends its own pattern while the host peer sends another one back at the same time. Each side
  compares every byte it receives against the pattern at that offset, so a byte lost,
  duplicated or reordered is caught at its offset, and the lengths must match exactly.
* UDP: datagrams of many sizes to a host echo, a window of them in flight; each one echoed must
  be byte-identical to the one sent with its sequence number, and each must come back once.

The CI size is 1 MiB of TCP per plan (both directions together) and 300 datagrams;
``BITSNET_INTEGRITY_MIB=N`` moves N MiB per plan instead. Each test prints its figures
(``-s`` shows them): bytes, seconds, faults injected by kind.
"""

from __future__ import print_function

import errno
import os
import socket as host
import struct
import threading
import time

import pytest

import peers
from bitsnet import _socket as bs
from bitsnet import events, stack
from bitsnet import select as bs_select
from efisim import faults

import test_socket_api

net = test_socket_api.net

MIB = float(os.environ.get("BITSNET_INTEGRITY_MIB", "1"))
STREAMS = 8  # connections at once
PER_DIRECTION = int(MIB * 1024 * 1024) // (2 * STREAMS)  # bytes each side of each connection sends
DATAGRAMS = 300 if MIB <= 1 else int(300 * MIB)
# Under the plans that hold completions back, each datagram waits for its Receive completion:
# bitsnet keeps one Receive posted per UDP socket and Udp4Dxe's held completions go out on its
# 50 ms timer, so about 20 datagrams a second get through -- fewer of them in CI.
DATAGRAMS_HELD = 60 if MIB <= 1 else DATAGRAMS
WINDOW = 8  # datagrams in flight
DEADLINE = 60.0 + 30.0 * MIB  # seconds a whole transfer may take before the test fails
CHUNK = 24 * 1024  # bytes offered per send() call


# BITSNET_FAULT_SEEDS=N runs every plan with N seeds (default 1: seed = the plan's index + 1),
# e.g. 20 to look for rare stalls (docs/architecture.md section 6.3).
FAULT_SEEDS = max(1, int(os.environ.get("BITSNET_FAULT_SEEDS", "1")))


def plan_params():
    # Under ``mixed`` the transfers are also part of the torture subset (``-m torture``).
    return [pytest.param(name, marks=[pytest.mark.machine(static=True, faults=name, seed=index + 1 + 100 * extra)]
                         + ([pytest.mark.torture] if name == "mixed" else []),
                         id=name if not extra else "%s-seed%d" % (name, index + 1 + 100 * extra))
            for extra in range(FAULT_SEEDS) for index, name in enumerate(faults.PLAN_NAMES)]


def stream_pattern(index, direction):
    return peers.pattern(PER_DIRECTION, seed=1000 * index + direction)


def first_difference(got, expected):
    for offset in range(min(len(got), len(expected))):
        if got[offset:offset + 1] != expected[offset:offset + 1]:
            return offset
    return min(len(got), len(expected))


class StreamPeer(object):
    """Host side: per connection, receive the client's pattern and send its own at once.

    The client says which connection it is in its first 4 bytes (not part of the pattern)."""

    def __init__(self, count):
        self.sock = host.socket(host.AF_INET, host.SOCK_STREAM)
        self.sock.bind((peers.HOST, 0))
        self.sock.listen(count)
        self.sock.settimeout(DEADLINE)
        self.port = self.sock.getsockname()[1]
        self.count = count
        self.results = {}  # index -> (bytes received, first bad offset or None)
        self.threads = []
        self.acceptor = threading.Thread(target=self._accept_all)
        self.acceptor.daemon = True

    def __enter__(self):
        self.acceptor.start()
        return self

    def __exit__(self, *exc):
        self.sock.close()
        for thread in self.threads:
            thread.join(5)

    def _accept_all(self):
        try:
            for _ in range(self.count):
                conn, _ = self.sock.accept()
                conn.settimeout(DEADLINE)
                thread = threading.Thread(target=self._serve, args=(conn,))
                thread.daemon = True
                thread.start()
                self.threads.append(thread)
        except (host.error, OSError):
            return

    def _serve(self, conn):
        try:
            head = b""
            while len(head) < 4:
                more = conn.recv(4 - len(head))
                if not more:
                    return
                head += more
            index = struct.unpack("!I", head)[0]
            outgoing = stream_pattern(index, 2)
            sender = threading.Thread(target=self._send, args=(conn, outgoing))
            sender.daemon = True
            sender.start()
            expected = stream_pattern(index, 1)
            got = bytearray()
            bad = None
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                if bad is None and bytes(data) != expected[len(got):len(got) + len(data)]:
                    bad = len(got) + first_difference(data, expected[len(got):])
                got += data
            sender.join(DEADLINE)
            self.results[index] = (len(got), bad)
        except (host.error, OSError) as exc:
            self.results.setdefault(index, (-1, "host socket error %r" % (exc,)))
        finally:
            conn.close()

    @staticmethod
    def _send(conn, data):
        try:
            conn.sendall(data)
        except (host.error, OSError):
            pass


def _injected(machine):
    return dict(machine.faults.injected)


@pytest.mark.parametrize("plan", plan_params())
def test_tcp_streams_both_ways_arrive_intact(net, plan):
    start = time.time()
    with StreamPeer(STREAMS) as peer:
        state = {}
        for index in range(STREAMS):
            s = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
            s.settimeout(10)
            s.connect((peers.HOST, peer.port))
            s.sendall(struct.pack("!I", index))
            s.setblocking(False)
            state[s] = {"index": index, "out": stream_pattern(index, 1), "sent": 0,
                        "expected": stream_pattern(index, 2), "got": bytearray(), "bad": None, "eof": False}
        deadline = time.time() + DEADLINE
        while any(not st["eof"] for st in state.values()):
            assert time.time() < deadline, "transfers unfinished after %.0f s: %r" % (
                DEADLINE, [(st["index"], st["sent"], len(st["got"])) for st in state.values()])
            readers = [s for s, st in state.items() if not st["eof"]]
            writers = [s for s, st in state.items() if st["sent"] < len(st["out"])]
            readable, writable, _ = bs_select.select(readers, writers, [], 5.0)
            for s in writable:
                st = state[s]
                try:
                    st["sent"] += s.send(st["out"][st["sent"]:st["sent"] + CHUNK])
                except bs.error as exc:
                    assert exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK), exc
            for s in readable:
                st = state[s]
                try:
                    data = s.recv(65536)
                except bs.error as exc:
                    assert exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK), exc
                    continue
                if not data:
                    st["eof"] = True
                    continue
                offset = len(st["got"])
                if st["bad"] is None and data != st["expected"][offset:offset + len(data)]:
                    st["bad"] = offset + first_difference(data, st["expected"][offset:])
                st["got"] += data
            for st in state.values():
                if len(st["got"]) >= len(st["expected"]) and st["sent"] == len(st["out"]):
                    st["eof"] = True  # all in and all out: this side is done
        for s, st in state.items():
            s.close()  # the peer now sees EOF after the whole pattern
            assert st["bad"] is None, "stream %d: first wrong byte at offset %d" % (st["index"], st["bad"])
            assert len(st["got"]) == len(st["expected"]), "stream %d: %d of %d bytes" % (
                st["index"], len(st["got"]), len(st["expected"]))
        # close() returns at once; the FINs go out as bitsnet drives the firmware (README), so
        # drive it while the peers finish.
        events.wait_until(lambda: len(peer.results) == STREAMS, events.clock() + max(1.0, deadline - time.time()),
                          poll=stack.pump)
        for index in range(STREAMS):
            received, bad = peer.results.get(index, (None, "peer never finished"))
            assert bad is None, "stream %d towards the peer: first wrong byte at %r" % (index, bad)
            assert received == PER_DIRECTION, "stream %d towards the peer: %r of %d bytes" % (
                index, received, PER_DIRECTION)
    moved = 2 * STREAMS * PER_DIRECTION
    print("integrity tcp plan=%s: %d bytes in %d streams, %.2f s, injected %r" % (
        plan, moved, STREAMS, time.time() - start, sorted(_injected(net).items())))


class DatagramEcho(object):
    """A host UDP socket echoing every datagram to its sender, in a thread."""

    def __init__(self):
        self.sock = host.socket(host.AF_INET, host.SOCK_DGRAM)
        self.sock.bind((peers.HOST, 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        self.echoed = 0
        self.thread = threading.Thread(target=self._serve)
        self.thread.daemon = True

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join(5)
        self.sock.close()

    def _serve(self):
        while not self.stop:
            try:
                data, source = self.sock.recvfrom(65536)
            except host.timeout:
                continue
            except (host.error, OSError):
                return
            self.sock.sendto(data, source)
            self.echoed += 1


def datagram(seq):
    size = 1 + (seq * 389) % 1465  # 1 .. 1465 bytes of payload, every size class
    return struct.pack("!I", seq) + peers.pattern(size, seed=70000 + seq)


@pytest.mark.parametrize("plan", plan_params())
def test_udp_datagrams_come_back_uncorrupted_once_each(net, plan):
    start = time.time()
    count = DATAGRAMS_HELD if net.faults.holds_completions() else DATAGRAMS
    with DatagramEcho() as echo:
        s = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
        s.setblocking(False)
        s.connect((peers.HOST, echo.port))
        sent, seen, corrupt = 0, set(), []
        in_flight = {}  # seq -> time sent
        resent = 0
        deadline = time.time() + DEADLINE
        while len(seen) < count:
            assert time.time() < deadline, "%d of %d datagrams back after %.0f s" % (len(seen), count, DEADLINE)
            want_write = sent < count and len(in_flight) < WINDOW
            readable, writable, _ = bs_select.select([s], [s] if want_write else [], [], 1.0)
            if writable:
                try:
                    s.send(datagram(sent))
                    in_flight[sent] = time.time()
                    sent += 1
                except bs.error as exc:
                    assert exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS), exc
            if readable:
                try:
                    data = s.recv(65536)
                except bs.error as exc:
                    assert exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK), exc
                    continue
                seq = struct.unpack("!I", data[:4])[0] if len(data) >= 4 else -1
                if not 0 <= seq < sent or data != datagram(seq):
                    corrupt.append((seq, len(data)))
                    continue
                assert seq not in seen, "datagram %d came back twice" % seq
                seen.add(seq)
                in_flight.pop(seq, None)
            # Loopback loses nothing, but a datagram is not a stream: if one never came back
            # in 5 s it was lost somewhere -- counted, and the test then fails below.
            for seq, when in list(in_flight.items()):
                if time.time() - when > 5.0:
                    del in_flight[seq]
                    resent += 1
            if resent and sent == count and not in_flight:
                break
        s.close()
    assert not corrupt, "corrupted datagrams (seq, length): %r" % corrupt[:10]
    assert len(seen) == count and not resent, "%d lost of %d" % (count - len(seen), count)
    print("integrity udp plan=%s: %d datagrams (%d bytes) each way, %.2f s, injected %r" % (
        plan, count, sum(len(datagram(i)) for i in range(count)), time.time() - start,
        sorted(_injected(net).items())))
