"""Soak (docs/testing.md section 3.7): hundreds of connections churning through ONE select loop under the
``mixed`` fault plan, ending with every invariant intact.

The firmware's side is one ``select.select`` loop over bitsnet sockets, playing both roles: a
listening socket accepts and echoes the connections of host clients, while up to
``CONCURRENT / 2`` bitsnet client connections at a time connect (non-blocking, ``connect_ex``)
to a host echo peer, send a payload of a seeded random size, read the echo back, check it byte
for byte and close; a new client starts as soon as one finishes. The host clients
(``CONCURRENT / 2`` threads) do the same against the bitsnet listener. Half of ``CONNECTIONS``
go each way (or, for the long version, both go on until ``BITSNET_SOAK_SECONDS`` passed). The
peers of the firmware's connections are on the host: EDK2 has no loopback, so two bitsnet
endpoints of one machine cannot talk to each other (the simulator refuses it as EDK2 does).

At the end conftest checks the invariants (no child, event, pool, token left; no lost
completion; no exception in a callback). The test prints its figures: connections, bytes,
seconds, faults injected per kind, and the event layer's counters (``overflowed``: notifications
CPython's pending-call queue dropped; ``recovered``: completions found by rescanning).
"""

from __future__ import print_function

import errno
import os
import random
import threading
import time

import pytest

import conftest
import peers
from bitsnet import _socket as bs
from bitsnet import events
from bitsnet import select as bs_select

import test_socket_api

net = test_socket_api.net

SOAK_SECONDS = float(os.environ.get("BITSNET_SOAK_SECONDS", "0"))  # 0: the CI version
# Connections the CI version makes; fewer under the gc torture (-m torture), where every call is slower.
CONNECTIONS = 40 if os.environ.get("BITSNET_GC_TORTURE") else 400
CONCURRENT = 40  # client connections open at once: half from the firmware, half from the host
MAX_PAYLOAD = 6000  # bytes a client sends (and gets back), drawn per connection
STALL = 20.0  # seconds with no progress at all before the test fails
BUDGET = 120.0 + SOAK_SECONDS  # seconds the whole soak may take
STATION = conftest.STATION  # the simulated machine's address
AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)


class HostClients(object):
    """``workers`` host threads, each connecting to the firmware's listener one connection after
    another: send a seeded random payload, read the echo back, check it, close."""

    def __init__(self, address, workers, keep_going, seed):
        self.address = address
        self.keep_going = keep_going  # called with the number of connections started so far
        self.lock = threading.Lock()
        self.started = self.finished = 0
        self.errors = []  # type: list
        self.threads = [threading.Thread(target=self._work, args=(seed + i,)) for i in range(workers)]
        for thread in self.threads:
            thread.daemon = True
            thread.start()

    def done(self):
        return not any(thread.is_alive() for thread in self.threads)

    def _work(self, seed):
        rng = random.Random(seed)
        while True:
            with self.lock:
                if self.errors or not self.keep_going(self.started):
                    return
                self.started += 1
            payload = bytes(bytearray(rng.getrandbits(8) for _ in range(rng.randint(1, MAX_PAYLOAD))))
            try:
                conn = peers.socket.create_connection(self.address, timeout=STALL)
                try:
                    conn.sendall(payload)
                    got = bytearray()
                    while len(got) < len(payload):
                        data = conn.recv(65536)
                        assert data, "the firmware closed a host client early (%d of %d)" % (len(got), len(payload))
                        got += data
                    assert bytes(got) == payload, "echo differs"
                finally:
                    conn.close()
            except Exception as exc:  # reported by the test
                with self.lock:
                    self.errors.append(repr(exc))
                return
            with self.lock:
                self.finished += 1


class Conn(object):
    """One socket in the loop: what it still has to send, what it got."""

    def __init__(self, sock, role, payload=b""):
        self.sock = sock
        self.role = role  # "client-connecting", "client", "server"
        self.payload = payload
        self.out = bytearray(payload)
        self.got = bytearray()


@pytest.mark.torture
@pytest.mark.machine(static=True, faults="mixed", seed=17)
def test_soak_connections_churn_through_one_select_loop_under_mixed(net):
    rng = random.Random(17)
    start = time.time()
    stats_before = dict(events.stats)
    listener = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
    listener.setsockopt(bs.SOL_SOCKET, bs.SO_REUSEADDR, 1)
    listener.bind((STATION, 0))
    listener.listen(64)
    listener.setblocking(False)
    address = listener.getsockname()
    echo = peers.EchoPeer().__enter__()
    conns = {}  # socket -> Conn
    figures = {"started": 0, "finished": 0, "accepted": 0, "bytes": 0, "max_open": 0}
    last_progress = [time.time()]

    def progress():
        last_progress[0] = time.time()

    def keep_going(started):
        if SOAK_SECONDS:
            return time.time() - start < SOAK_SECONDS
        return started < CONNECTIONS // 2

    host_clients = HostClients(address, CONCURRENT // 2, keep_going, 17)

    def start_client():
        s = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((peers.HOST, echo.port))
        assert err in (0, errno.EINPROGRESS, errno.EWOULDBLOCK), err
        size = rng.randint(1, MAX_PAYLOAD)
        payload = bytes(bytearray(rng.getrandbits(8) for _ in range(size)))
        conns[s] = Conn(s, "client-connecting", payload)
        figures["started"] += 1

    def finish(conn):
        del conns[conn.sock]
        conn.sock.close()

    try:
        while True:
            clients = sum(1 for c in conns.values() if c.role != "server")
            while clients < CONCURRENT // 2 and keep_going(figures["started"]):
                start_client()
                clients += 1
            if not clients and not conns and host_clients.done():
                break
            assert not host_clients.errors, host_clients.errors
            figures["max_open"] = max(figures["max_open"], len(conns) + 1)
            assert time.time() - last_progress[0] < STALL, "no progress for %.0f s: %r" % (
                STALL, sorted((c.role, len(c.out), len(c.got), len(c.payload)) for c in conns.values()))
            assert time.time() - start < BUDGET, "soak over budget: %r" % figures
            readers = [listener] + [s for s, c in conns.items() if c.role != "client-connecting"]
            writers = [s for s, c in conns.items() if c.out or c.role == "client-connecting"]
            readable, writable, _ = bs_select.select(readers, writers, [], 5.0)
            for s in writable:
                conn = conns.get(s)
                if conn is None:
                    continue
                if conn.role == "client-connecting":
                    assert s.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR) == 0
                    conn.role = "client"
                    progress()
                if conn.out:
                    try:
                        n = s.send(bytes(conn.out[:16384]))
                    except bs.error as exc:
                        assert exc.errno in AGAIN, exc
                        continue
                    del conn.out[:n]
                    figures["bytes"] += n
                    progress()
            for s in readable:
                if s is listener:
                    try:
                        accepted, _ = listener.accept()
                    except bs.error as exc:
                        assert exc.errno in AGAIN, exc
                        continue
                    accepted.setblocking(False)
                    conns[accepted] = Conn(accepted, "server")
                    figures["accepted"] += 1
                    progress()
                    continue
                conn = conns.get(s)
                if conn is None:
                    continue
                try:
                    data = s.recv(65536)
                except bs.error as exc:
                    assert exc.errno in AGAIN, exc
                    continue
                progress()
                if conn.role == "server":
                    if not data:
                        assert not conn.out, "client closed before its echo was sent"
                        finish(conn)
                    else:
                        conn.out += data  # echo
                    continue
                assert data, "server closed a client connection early (%d of %d)" % (
                    len(conn.got), len(conn.payload))
                conn.got += data
                figures["bytes"] += len(data)
                if len(conn.got) >= len(conn.payload):
                    assert bytes(conn.got) == conn.payload, "echo differs"
                    finish(conn)
                    figures["finished"] += 1
    finally:
        listener.close()
        for conn in list(conns.values()):
            conn.sock.close()
        echo.__exit__(None, None, None)
    # Drive the background closes to their end before the invariants are checked.
    from bitsnet import stack, tcp
    events.wait_until(lambda: not tcp._live, events.clock() + 10.0, poll=stack.pump)
    elapsed = time.time() - start
    assert not host_clients.errors, host_clients.errors
    assert figures["finished"] == figures["started"], figures
    assert host_clients.finished == host_clients.started == figures["accepted"], (host_clients.started, figures)
    assert figures["finished"] + host_clients.finished >= (CONNECTIONS if not SOAK_SECONDS else 2)
    injected = net.faults.injected
    assert injected.get("burst") and injected.get("reorder") and injected.get("tx_fail"), injected
    print("soak: %d connections (%d from the host; %d open at most), %d bytes, %.1f s; injected %s; events %s" % (
        figures["finished"] + host_clients.finished, host_clients.finished, figures["max_open"], figures["bytes"],
        elapsed,
        " ".join("%s=%d" % item for item in sorted(injected.items())),
        " ".join("%s=%d" % (k, v - stats_before.get(k, 0)) for k, v in sorted(events.stats.items()))))
