"""Station ports of ordinary sockets (bitsnet.child.random_port): UDP sends and binds to port 0
take a random port from the dynamic range, outgoing TCP connections a random first port per peer
and the next ones up from there -- not EDK2's next sequential one (docs/edk2.md sections 3.8,
4.2: a blind attacker on the LAN who saw one port knew the next), and a clash draws again.
Through the simulated firmware (whose TCP4/UDP4 keep EDK2's sequential counter), against real
peers on loopback: the ports are the ones the peers see on the wire."""

from __future__ import print_function

import socket as host

import pytest

import peers
from bitsnet import _socket as bs
from bitsnet import child, tcp, udp
from helpers import net  # noqa: F401   # the fixture

COUNT = 30  # connections / datagrams per test
LOW, HIGH = child.EPHEMERAL_PORTS


def assert_random_ports(ports):
    """In the dynamic range, (nearly) distinct and not a run: EDK2's counter gave n, n+1, n+2, ...
    (Uniform draws repeat a port now and then: 30 of 16,384 do so 2.6% of the time.)"""
    assert len(set(ports)) >= len(ports) - 2, ports
    assert all(LOW <= p <= HIGH for p in ports), ports
    steps = [b - a for a, b in zip(ports, ports[1:])]
    assert sum(1 for s in steps if 0 < s <= 2) <= 2, ports  # a sequential allocator: all of them


@pytest.fixture
def listener():
    sock = host.socket(host.AF_INET, host.SOCK_STREAM)
    sock.bind((peers.HOST, 0))
    sock.listen(COUNT)
    sock.settimeout(10)
    yield sock
    sock.close()


def _connect_many(listener, count):
    """The source ports on the wire of ``count`` connections to ``listener``, checked against
    what getsockname says."""
    clients, seen, local = [], [], []
    try:
        for _ in range(count):
            client = bs.socket()
            client.settimeout(10)
            client.connect(listener.getsockname())
            clients.append(client)
            conn, address = listener.accept()
            seen.append(address[1])  # the source port on the wire
            local.append(client.getsockname()[1])
            conn.close()
    finally:
        for client in clients:
            client.close()
    assert seen == local
    return seen


def test_outgoing_tcp_connections_count_up_from_a_random_port_per_peer(net, listener):  # noqa: F811
    """RFC 6056 algorithm 3: each peer's first connection takes a random port, the later ones
    count up from it (round the range), so a burst to one peer never meets a port of its own
    recent past; another peer's ports start elsewhere, at random."""
    other = host.socket(host.AF_INET, host.SOCK_STREAM)
    other.bind((peers.HOST, 0))
    other.listen(COUNT)
    other.settimeout(10)
    try:
        first = _connect_many(listener, COUNT)
        second = _connect_many(other, COUNT)
        again = _connect_many(listener, 3)
    finally:
        other.close()
    for ports in (first, second):
        assert all(LOW <= p <= HIGH for p in ports), ports
        assert ports == [LOW + (ports[0] - LOW + i) % (HIGH - LOW + 1) for i in range(len(ports))], ports
    assert again[0] == LOW + (first[-1] + 1 - LOW) % (HIGH - LOW + 1), (first, again)
    assert second[0] not in first + [first[-1] + 1], (first, second)  # 1 in ~16,000 to fail by chance
    # The first ports of peers are random: not EDK2's counter (1024-2047, one step apart) and not a run.
    starts = [first[0], second[0]] + [_connect_many(one_listener, 1)[0] for one_listener in _listeners(6)]
    assert_random_ports(starts)


def _listeners(count):
    """``count`` more listening host sockets, closed when the generator ends."""
    for _ in range(count):
        sock = host.socket(host.AF_INET, host.SOCK_STREAM)
        sock.bind((peers.HOST, 0))
        sock.listen(1)
        sock.settimeout(10)
        try:
            yield sock
        finally:
            sock.close()


def test_udp_sends_and_binds_to_port_0_use_random_station_ports(net):  # noqa: F811
    receiver = host.socket(host.AF_INET, host.SOCK_DGRAM)
    receiver.bind((peers.HOST, 0))
    receiver.settimeout(10)
    seen, local = [], []
    try:
        for _ in range(COUNT):
            sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
            try:
                sock.sendto(b"x", receiver.getsockname())  # the implicit bind of the first send
                local.append(sock.getsockname()[1])
                seen.append(receiver.recvfrom(10)[1][1])
            finally:
                sock.close()
    finally:
        receiver.close()
    assert seen == local
    assert_random_ports(seen)
    bound = []
    for kind in (bs.SOCK_STREAM, bs.SOCK_DGRAM) * 5:  # bind(("", 0)), as Linux: a random port
        sock = bs.socket(bs.AF_INET, kind)
        sock.bind(("", 0))
        bound.append(sock.getsockname()[1])
        sock.close()
    assert all(LOW <= p <= HIGH for p in bound) and len(set(bound)) >= 8, bound


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_a_clashing_random_port_is_drawn_again_then_left_to_the_firmware(net, listener, monkeypatch, kind):  # noqa: F811
    holder = bs.socket(bs.AF_INET, bs.SOCK_STREAM if kind == "tcp" else bs.SOCK_DGRAM)
    holder.bind(("", 0))
    taken = holder.getsockname()[1]
    receiver = host.socket(host.AF_INET, host.SOCK_DGRAM)
    receiver.bind((peers.HOST, 0))
    receiver.settimeout(10)

    def use(sock):
        if kind == "tcp":
            sock.settimeout(10)
            sock.connect(listener.getsockname())
            listener.accept()[0].close()
        else:
            sock.sendto(b"x", receiver.getsockname())
            receiver.recvfrom(10)
        return sock.getsockname()[1]
    try:
        module = tcp if kind == "tcp" else udp  # where the endpoint draws its ports
        draws = iter([taken, taken, taken + 1 if taken < HIGH else taken - 1])
        monkeypatch.setattr(module, "random_port", lambda remote=None: next(draws))
        sock = bs.socket(bs.AF_INET, bs.SOCK_STREAM if kind == "tcp" else bs.SOCK_DGRAM)
        assert use(sock) in (taken + 1, taken - 1)  # two clashes, then the third draw
        sock.close()
        monkeypatch.setattr(module, "random_port", lambda remote=None: taken)  # every draw clashes
        sock = bs.socket(bs.AF_INET, bs.SOCK_STREAM if kind == "tcp" else bs.SOCK_DGRAM)
        port = use(sock)  # the firmware's own choice after PORT_TRIES draws: it still works
        assert port != taken and not LOW <= port <= HIGH, port
        sock.close()
    finally:
        holder.close()
        receiver.close()
