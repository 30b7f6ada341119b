"""Socket semantics as CPython's on an OS (issue 20): non-blocking calls make progress on their
own, no byte is lost on a timeout path, small behaviours as Linux's. bitsnet._socket used
directly, through the simulated firmware, against real peers on loopback; where it helps, the
same calls are made on the host's own sockets and the answers compared.
"""

from __future__ import print_function

import errno
import socket as host
import sys
import threading
import time

import pytest

import peers
from bitsnet import _socket as bs
from helpers import MODES, net  # noqa: F401   # the fixture

PY2 = sys.version_info[0] == 2
SLEEP = 0.01  # seconds a polling program sleeps between non-blocking calls
PATIENCE = 3.0  # seconds such a loop may take before the test fails


@pytest.fixture
def sock_net(net):  # noqa: F811
    """``net``, and at the end every bitsnet socket the test made must have been closed."""
    yield net
    leftover = sorted(bs._fds)
    for fd in leftover:
        bs.close(fd)
    assert not leftover, "sockets left open: %r" % leftover


def poll_until(call, accept=(errno.EAGAIN, errno.EWOULDBLOCK)):
    """``call()`` again and again, sleeping between (the stack is not driven meanwhile), until it
    returns or raises something other than ``accept``; returns (result, tries)."""
    deadline = time.time() + PATIENCE
    tries = 0
    while True:
        tries += 1
        try:
            return call(), tries
        except bs.error as exc:
            if exc.errno not in accept or time.time() > deadline:
                raise
        time.sleep(SLEEP)


def poll_connect_ex(sock, address):
    """connect_ex until it says something other than EINPROGRESS/EALREADY; (errno, tries)."""
    deadline = time.time() + PATIENCE
    tries = 0
    while True:
        tries += 1
        err = sock.connect_ex(address)
        if err not in (errno.EINPROGRESS, errno.EALREADY) or time.time() > deadline:
            return err, tries
        time.sleep(SLEEP)


class Listener(object):
    def __init__(self):
        self.sock = host.socket()
        self.sock.bind((peers.HOST, 0))
        self.sock.listen(5)
        self.sock.settimeout(10)
        self.address = self.sock.getsockname()

    def accept(self):
        conn = self.sock.accept()[0]
        conn.settimeout(10)
        return conn

    def close(self):
        self.sock.close()


def bitsnet_pair(listener):
    client = bs.socket()
    client.settimeout(10)
    client.connect(listener.address)
    return client, listener.accept()


# --- item 1: non-blocking calls drive the stack -------------------------------------------------
@pytest.mark.parametrize("net", MODES, indirect=True)
def test_non_blocking_recv_and_recv_into_see_data_without_select(sock_net):
    listener = Listener()
    client, server = bitsnet_pair(listener)
    client.setblocking(False)
    server.sendall(b"hello")
    data, tries = poll_until(lambda: client.recv(100))
    assert data == b"hello" and tries < 50
    server.sendall(b"world")
    buf = bytearray(10)
    n, tries = poll_until(lambda: client.recv_into(buf))
    assert bytes(buf[:n]) == b"world" and tries < 50
    server.close()
    assert poll_until(lambda: client.recv(100))[0] == b""
    client.close()
    listener.close()


@pytest.mark.parametrize("net", MODES, indirect=True)
def test_non_blocking_connect_ex_finishes_by_itself(sock_net):
    listener = Listener()
    good = bs.socket()
    good.setblocking(False)
    assert good.connect_ex(listener.address) == errno.EINPROGRESS
    err, tries = poll_connect_ex(good, listener.address)
    assert err == 0, errno.errorcode.get(err, err)  # Linux: 0 once, then EISCONN
    assert good.connect_ex(listener.address) == errno.EISCONN
    assert good.getpeername() == listener.address
    listener.accept().close()
    good.close()
    listener.close()

    refused = bs.socket()
    refused.setblocking(False)
    address = (peers.HOST, peers.closed_port())
    assert refused.connect_ex(address) == errno.EINPROGRESS
    err, tries = poll_connect_ex(refused, address)
    assert err == errno.ECONNREFUSED
    # Linux: the next connect starts a new attempt
    assert refused.connect_ex(address) in (errno.EINPROGRESS, errno.ECONNREFUSED)
    refused.close()


@pytest.mark.parametrize("net", MODES, indirect=True)
def test_so_error_and_getpeername_follow_a_non_blocking_connect(sock_net):
    refused = bs.socket()
    refused.setblocking(False)
    assert refused.connect_ex((peers.HOST, peers.closed_port())) == errno.EINPROGRESS
    deadline = time.time() + PATIENCE
    while True:
        err = refused.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR)
        if err or time.time() > deadline:
            break
        time.sleep(SLEEP)
    assert err == errno.ECONNREFUSED
    refused.close()

    listener = Listener()
    good = bs.socket()
    good.setblocking(False)
    good.connect_ex(listener.address)
    peer, _ = poll_until(good.getpeername, accept=(errno.ENOTCONN,))
    assert peer == listener.address
    assert good.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR) == 0
    listener.accept().close()
    good.close()
    listener.close()


@pytest.mark.parametrize("net", MODES, indirect=True)
def test_non_blocking_accept_sees_a_connection_without_select(sock_net):
    server = bs.socket()
    server.bind(("", 0))
    server.listen(5)
    server.setblocking(False)
    address = (sock_net.config.address.split("/")[0], server.getsockname()[1])
    with pytest.raises(bs.error) as info:
        server.accept()
    assert info.value.errno == errno.EAGAIN
    client = host.create_connection(address, timeout=10)
    (conn, _), tries = poll_until(server.accept)
    conn.settimeout(10)
    client.sendall(b"ping")
    assert conn.recv(10) == b"ping"
    conn.close()
    client.close()
    server.close()


@pytest.mark.parametrize("net", MODES, indirect=True)
def test_non_blocking_udp_recvfrom_sees_a_datagram_without_select(sock_net):
    sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    sock.bind(("", 0))
    sock.setblocking(False)
    address = (sock_net.config.address.split("/")[0], sock.getsockname()[1])
    sender = host.socket(host.AF_INET, host.SOCK_DGRAM)
    sender.bind((peers.HOST, 0))
    sender.sendto(b"datagram", address)
    (data, source), tries = poll_until(lambda: sock.recvfrom(100))
    assert data == b"datagram" and source == sender.getsockname()
    sender.close()
    sock.close()


def test_a_non_blocking_recv_loop_does_not_spin_in_eagain(sock_net):
    """The loop from issue 20: data already in the firmware, EAGAIN for ever."""
    listener = Listener()
    client, server = bitsnet_pair(listener)
    client.setblocking(False)
    server.sendall(b"x" * 1000)
    time.sleep(0.2)  # the data reaches the firmware meanwhile
    got, tries = poll_until(lambda: client.recv(2000))
    assert got and tries <= 3
    client.close()
    server.close()
    listener.close()


# --- item 2: no byte dropped on a timeout path --------------------------------------------------
def test_recv_waitall_with_a_timeout_returns_what_it_gathered(sock_net):
    listener = Listener()
    client, server = bitsnet_pair(listener)
    client.settimeout(0.3)
    server.sendall(b"partial")
    assert client.recv(100, bs.MSG_WAITALL) == b"partial"  # as CPython: the bytes, no timeout
    buf = bytearray(100)
    server.sendall(b"more")
    assert client.recv_into(buf, 100, bs.MSG_WAITALL) == 4 and bytes(buf[:4]) == b"more"
    with pytest.raises(bs.timeout):
        client.recv(100, bs.MSG_WAITALL)  # nothing at all: the timeout
    client.settimeout(None)
    server.sendall(b"abc")
    server.close()
    assert client.recv(100, bs.MSG_WAITALL) == b"abc"  # EOF ends it with what came
    client.close()
    listener.close()


def test_host_recv_waitall_with_a_timeout_returns_partial_data():
    """What the test above mirrors, on the host's CPython."""
    listener = Listener()
    client = host.create_connection(listener.address, timeout=0.3)
    server = listener.accept()
    server.sendall(b"partial")
    time.sleep(0.05)
    assert client.recv(100, host.MSG_WAITALL) == b"partial"
    client.close()
    server.close()
    listener.close()


# --- item 3: a refused Transmit is retried by whatever drives the stack -------------------------
@pytest.mark.machine(static=True, faults="tx_fail=3")
def test_a_refused_transmit_leaves_while_the_program_waits_on_another_socket(sock_net):
    first, second = Listener(), Listener()
    a, a_peer = bitsnet_pair(first)
    b, b_peer = bitsnet_pair(second)

    def relay():
        if a_peer.recv(10) == b"request":  # only once a's bytes left the firmware
            b_peer.sendall(b"go")
    thread = threading.Thread(target=relay)
    thread.daemon = True
    thread.start()
    assert a.send(b"request") == 7  # accepted; the firmware refuses its Transmit 3 times
    b.settimeout(5)
    assert b.recv(10) == b"go"  # waiting on b drives a's retries
    thread.join(5)
    for s in (a, a_peer, b, b_peer, first, second):
        s.close()


@pytest.mark.machine(static=True, faults="tx_fail=100000")
def test_transmits_refused_for_too_long_fail_the_connection_loudly(sock_net, monkeypatch):
    from bitsnet import tcp
    monkeypatch.setattr(tcp, "TX_REFUSED_LIMIT", 0.3)
    listener = Listener()
    a, peer = bitsnet_pair(listener)
    assert a.send(b"lost") == 4
    a.settimeout(5)
    start = time.time()
    with pytest.raises(bs.error) as info:
        a.recv(10)
    assert info.value.errno == errno.ENOBUFS and time.time() - start < 3
    a.close()
    peer.close()
    listener.close()
