"""Soak (issue 7 item 7): hundreds of connections churning through ONE select loop under the
``mixed`` fault plan, ending with every invariant intact.

Server and clients both run in the firmware's interpreter (this one), on bitsnet sockets: a
listening socket accepts and echoes, while up to ``CONCURRENT`` client connections at a time
connect (non-blocking, ``connect_ex``), send a payload of a seeded random size, read the echo
back, check it byte for byte and close; a new client starts as soon as one finishes, until
``CONNECTIONS`` were made (or, for the long version, until ``BITSNET_SOAK_SECONDS`` passed).
Every socket is in the same ``select.select`` call. Both ends of every connection are
therefore bitsnet endpoints (two EFI TCP4 children, talking through the host's loopback).

At the end conftest checks the invariants (no child, event, pool, token left; no lost
completion; no exception in a callback). The test prints its figures: connections, bytes,
seconds, faults injected per kind, and the event layer's counters (``overflowed``: notifications
CPython's pending-call queue dropped; ``recovered``: completions found by rescanning).
"""

from __future__ import print_function

import errno
import os
import random
import time

import pytest

import conftest
from bitsnet import _socket as bs
from bitsnet import events
from bitsnet import select as bs_select

import test_socket_api

net = test_socket_api.net

SOAK_SECONDS = float(os.environ.get("BITSNET_SOAK_SECONDS", "0"))  # 0: the CI version
# Connections the CI version makes; fewer under the gc torture (-m torture), where every call is slower.
CONNECTIONS = 40 if os.environ.get("BITSNET_GC_TORTURE") else 400
CONCURRENT = 40  # client connections open at once
MAX_PAYLOAD = 6000  # bytes a client sends (and gets back), drawn per connection
STALL = 20.0  # seconds with no progress at all before the test fails
BUDGET = 120.0 + SOAK_SECONDS  # seconds the whole soak may take
STATION = conftest.STATION  # the simulated machine's address
AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK)


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
    conns = {}  # socket -> Conn
    figures = {"started": 0, "finished": 0, "accepted": 0, "bytes": 0, "max_open": 0}
    last_progress = [time.time()]

    def progress():
        last_progress[0] = time.time()

    def keep_going():
        if SOAK_SECONDS:
            return time.time() - start < SOAK_SECONDS
        return figures["started"] < CONNECTIONS

    def start_client():
        s = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex(address)
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
            while clients < CONCURRENT and keep_going():
                start_client()
                clients += 1
            if not clients and not conns:
                break
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
    # Drive the background closes to their end before the invariants are checked.
    from bitsnet import tcp
    events.wait_until(lambda: not tcp._live, events.clock() + 10.0, poll=tcp._poll_any)
    elapsed = time.time() - start
    assert figures["finished"] == figures["started"] == figures["accepted"], figures
    assert figures["finished"] >= (CONNECTIONS if not SOAK_SECONDS else 1)
    injected = net.faults.injected
    assert injected.get("burst") and injected.get("reorder") and injected.get("tx_fail"), injected
    print("soak: %d connections (%d open at most), %d bytes, %.1f s; injected %s; events %s" % (
        figures["finished"], figures["max_open"], figures["bytes"], elapsed,
        " ".join("%s=%d" % item for item in sorted(injected.items())),
        " ".join("%s=%d" % (k, v - stats_before.get(k, 0)) for k, v in sorted(events.stats.items()))))
