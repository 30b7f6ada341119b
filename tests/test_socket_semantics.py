"""Socket semantics as CPython's on an OS (docs/testing.md section 3.8): non-blocking calls make progress on their
own, no byte is lost on a timeout path, small behaviours as Linux's. bitsnet._socket used
directly, through the simulated firmware, against real peers on loopback; where it helps, the
same calls are made on the host's own sockets and the answers compared.
"""

from __future__ import print_function

import errno
import socket as host
import struct
import sys
import threading
import time

import pytest

import conftest
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
    """The loop of docs/architecture.md section 6.1: data already in the firmware, EAGAIN for ever."""
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


# --- item 5: what send and recv_into take ---------------------------------------------------------
def send_objects():
    import array
    objects = [b"str", bytearray(b"ba"), memoryview(b"mv"), array.array("b", [65, 66])]
    if PY2:
        objects += [u"uni", buffer(b"buf")]  # noqa: F821
    return objects


def test_send_and_sendall_take_what_cpython_takes(sock_net):
    listener = Listener()
    client, server = bitsnet_pair(listener)
    local, local_peer = host.create_connection(listener.address, timeout=10), listener.accept()
    for obj in send_objects():
        assert client.send(obj) == local.send(obj), repr(obj)
        client.sendall(obj)
        local.sendall(obj)
    expected = b"".join(2 * as_bytes(obj) for obj in send_objects())
    assert peers_recv(server, len(expected)) == peers_recv(local_peer, len(expected)) == expected
    if PY2:
        with pytest.raises(UnicodeEncodeError):
            client.send(u"\xe9")
    for bad in (1, None) + ((u"text",) if not PY2 else ()):
        with pytest.raises(TypeError):
            client.send(bad)
        with pytest.raises(TypeError):
            local.send(bad)
    for s in (client, server, local, local_peer):
        s.close()
    listener.close()


def as_bytes(obj):
    import array
    if isinstance(obj, array.array):
        return obj.tostring() if PY2 else obj.tobytes()
    if PY2 and isinstance(obj, (unicode, buffer)):  # noqa: F821
        return str(obj)
    return memoryview(obj).tobytes()


def peers_recv(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk
        data += chunk
    return data


def test_recv_into_and_recvfrom_into_fill_an_array(sock_net):
    import array
    listener = Listener()
    client, server = bitsnet_pair(listener)
    target = array.array("b", [0] * 8)
    server.sendall(b"abc")
    assert client.recv_into(target) == 3 and target.tolist()[:3] == [97, 98, 99]
    server.sendall(b"de")
    n, source = client.recvfrom_into(target, 2)
    assert n == 2 and target.tolist()[:2] == [100, 101] and source is None
    with pytest.raises(TypeError):
        client.recv_into(b"read-only" if not PY2 else "read-only")
    client.close()
    server.close()
    listener.close()


# --- item 6: smaller behaviours as Linux's ------------------------------------------------------
def test_udp_listen_and_accept_are_eopnotsupp(sock_net):
    sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    for call in (sock.listen, sock.accept):
        with pytest.raises(bs.error) as info:
            call()
        assert info.value.errno == errno.EOPNOTSUPP
    sock.close()


def test_udp_recv_zero_leaves_the_datagram_on_3x_and_drops_it_on_27(sock_net):
    sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    sock.bind(("", 0))
    address = (sock_net.config.address.split("/")[0], sock.getsockname()[1])
    sender = host.socket(host.AF_INET, host.SOCK_DGRAM)
    sender.sendto(b"datagram", address)
    sock.settimeout(5)
    if not PY2:
        assert sock.recv(0) == b""  # CPython 3 does not ask the OS at all
        assert sock.recv(100) == b"datagram"
    else:
        assert sock.recv(0) == b""  # 2.7 asks the OS, which drops the datagram
        sock.setblocking(False)
        with pytest.raises(bs.error) as info:
            sock.recv(100)
        assert info.value.errno == errno.EAGAIN
    sender.close()
    sock.close()


def test_send_on_an_unconnected_tcp_socket_is_epipe(sock_net):
    for sock in (bs.socket(), host.socket()):
        with pytest.raises(host.error if sock.__class__ is host.socket else bs.error) as info:
            sock.send(b"x")
        assert info.value.errno == errno.EPIPE
        sock.close()


def test_connect_to_multicast_or_broadcast_is_enetunreach(sock_net):
    sock = bs.socket()
    sock.settimeout(5)
    for address in (("224.0.0.1", 80), ("239.1.2.3", 80), ("255.255.255.255", 80)):
        start = time.time()
        assert sock.connect_ex(address) == errno.ENETUNREACH
        assert time.time() - start < 1
    sock.close()


def test_getaddrinfo_refuses_an_empty_host_and_unknown_flags_as_cpython():
    for args in (("", 80), (b"", 80), ("localhost", 80, 0, 0, 0, -1), ("localhost", 80, 0, 0, 0, 0x800),
                 (None, 80, 0, 0, 0, host.AI_CANONNAME)):
        with pytest.raises(host.gaierror) as expected:
            host.getaddrinfo(*args)
        with pytest.raises(bs.gaierror) as got:
            bs.getaddrinfo(*args)
        assert got.value.args[0] == expected.value.args[0], args


def test_getnameinfo_checks_flowinfo_as_cpython():
    for sockaddr in (("::1", 80, 0x100000, 0), ("::1", 80, 2 ** 32 - 1, 0)):
        with pytest.raises(OverflowError) as expected:
            host.getnameinfo(sockaddr, host.NI_NUMERICHOST)
        with pytest.raises(OverflowError) as got:
            bs.getnameinfo(sockaddr, bs.NI_NUMERICHOST)
        assert str(got.value) == str(expected.value)


def test_select_refuses_unknown_descriptors_beyond_fd_setsize(sock_net):
    from bitsnet import select as bselect
    import select as hselect
    with pytest.raises(ValueError) as expected:
        hselect.select([5000], [], [], 0)
    with pytest.raises(ValueError) as got:
        bselect.select([5000], [], [], 0)
    assert str(got.value) == str(expected.value)
    with pytest.raises(bselect.error) as info:
        bselect.select([999], [], [], 0)  # below FD_SETSIZE and not a socket: EBADF
    assert info.value.args[0] == errno.EBADF
    socks = [bs.socket() for _ in range(30)]  # our own fds pass FD_SETSIZE and still work
    assert socks[-1].fileno() >= bs.FD_SETSIZE
    assert bselect.select([], [socks[-1]], [], 0)[1] == [socks[-1]]
    for s in socks:
        s.close()


def test_constants_and_fromfd(sock_net):
    names = ["SO_ACCEPTCONN", "TCP_MAXSEG", "IP_TTL", "IP_TOS", "IP_ADD_MEMBERSHIP", "SOCK_RAW", "SOCK_RDM",
             "SOCK_SEQPACKET"] + ([] if PY2 else ["SOCK_NONBLOCK", "SOCK_CLOEXEC"])
    for name in names:
        assert getattr(bs, name) == getattr(host, name), name
    assert hasattr(bs, "SOCK_NONBLOCK") == hasattr(host, "SOCK_NONBLOCK")
    server = bs.socket()
    assert server.getsockopt(bs.SOL_SOCKET, bs.SO_ACCEPTCONN) == 0
    server.bind(("", 0))
    server.listen(1)
    assert server.getsockopt(bs.SOL_SOCKET, bs.SO_ACCEPTCONN) == 1
    assert server.getsockopt(bs.IPPROTO_IP, bs.IP_TTL) == 64
    assert server.getsockopt(bs.IPPROTO_IP, bs.IP_TOS) == 0
    twin = bs.fromfd(server.fileno(), bs.AF_INET, bs.SOCK_STREAM)
    assert twin.fileno() != server.fileno() and twin.getsockname() == server.getsockname()
    twin.close()
    server.close()
    if not PY2:
        quick = bs.socket(bs.AF_INET, bs.SOCK_STREAM | bs.SOCK_NONBLOCK)
        assert quick.type == bs.SOCK_STREAM and quick.gettimeout() == 0.0
        quick.close()


@pytest.mark.parametrize("args", [(2, 3, 0), (2, 4, 0), (2, 5, 0), (2, 11, 0), (2, 1, 300), (2, 1, 17),
                                  (2, 2, 6), (99, 1, 0), (2, 1 | 4096, 0), (2, 0, 0), (-1, -1, -1)])
def test_socket_arguments_fail_as_on_linux(sock_net, args):
    try:
        expected = host.socket(*args)
    except host.error as exc:
        expected = exc
    else:
        expected.close()
    try:
        got = bs.socket(*args)
    except bs.error as exc:
        assert isinstance(expected, host.error) and exc.errno == expected.errno, (args, exc, expected)
    else:
        assert not isinstance(expected, host.error), (args, expected)
        assert (got.family, got.type) == (expected.family, expected.type)
        got.close()


def test_fresh_tcp_socket_polls_pollout_pollhup_as_linux(sock_net):
    from bitsnet import select as bselect
    import select as hselect
    ours, theirs = bs.socket(), host.socket()
    p, q = bselect.poll(), hselect.poll()
    p.register(ours)
    q.register(theirs)
    assert [mask for _, mask in p.poll(0)] == [mask for _, mask in q.poll(0)]
    ours.close()
    theirs.close()


def test_closing_a_socket_whose_fd_was_closed_elsewhere(sock_net):
    sock = bs.socket()
    bs.close(sock.fileno())
    if PY2:
        sock.close()  # 2.7 ignores close(2)'s error
    else:
        with pytest.raises(bs.error) as info:
            sock.close()
        assert info.value.errno == errno.EBADF
    sock.close()  # then it is closed: harmless


def test_setblocking_takes_a_c_long(sock_net):
    sock = bs.socket()
    sock.setblocking(2 ** 40)
    assert sock.gettimeout() is None
    with pytest.raises(OverflowError):
        sock.setblocking(2 ** 70)
    sock.close()


def test_socket_object_identity_as_each_python(sock_net):
    import weakref
    import warnings
    sock = bs.socket()
    if PY2:
        assert weakref.ref(sock)() is sock  # 2.7's _socket.socket takes weak references
        assert "protocol=0" in repr(sock)
        sock.close()
        return
    assert "proto=0" in repr(sock)
    sock.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dropped = bs.socket()
        del dropped
        import gc
        gc.collect()
    ours = [w for w in caught if "unclosed <socket object" in str(w.message)]
    assert len(ours) == 1 and ours[0].category is ResourceWarning, [str(w.message) for w in caught]


# --- concurrent entry from a second thread ----------------------------------------------------
def test_a_second_thread_entering_while_one_is_inside_is_refused(sock_net):
    listener = Listener()
    client, server = bitsnet_pair(listener)
    other = bs.socket()
    seen = {}

    def second():
        time.sleep(0.3)  # the main thread is inside client.recv by now
        try:
            other.getsockname()
        except RuntimeError as exc:
            seen["error"] = str(exc)
        server.sendall(b"done")

    thread = threading.Thread(target=second)
    thread.daemon = True
    thread.start()
    assert client.recv(10) == b"done"
    thread.join(5)
    assert "not thread-safe" in seen.get("error", ""), seen
    # one thread after the other is fine
    result = {}
    thread = threading.Thread(target=lambda: result.update(name=other.getsockname()))
    thread.start()
    thread.join(5)
    assert result["name"] == other.getsockname()
    for s in (client, server, other, listener):
        s.close()


def test_a_socket_finalized_on_another_thread_is_closed_by_the_next_caller(sock_net):
    """The garbage collector may finalize a socket on any thread (a peer's, the simulator's):
    its __del__ queues the fd and touches no firmware there; the next socket call on bitsnet's
    own thread closes the connection, and the peer sees the FIN."""
    listener = Listener()
    client, server = bitsnet_pair(listener)
    holder = [client]
    del client
    fd = holder[0].fileno()
    tokens_before = bs._events._state["seq"]
    thread = threading.Thread(target=holder.pop)  # the last reference dies on this thread
    thread.start()
    thread.join(5)
    assert not holder and bs._events._state["seq"] == tokens_before  # nothing reached the firmware there
    assert list(bs._deferred_closes) == [fd] and bs.lookup(fd) is not None
    probe = bs.socket()
    probe.setsockopt(bs.SOL_SOCKET, bs.SO_REUSEADDR, 1)  # the next call on bitsnet's own thread
    assert bs.lookup(fd) is None and not bs._deferred_closes
    server.settimeout(10)
    assert server.recv(10) == b""  # the close was a real one: the peer sees the FIN
    for s in (probe, server):
        s.close()


# --- item 4: the caller's deadline reaches address bring-up (DHCP) ----------------------------
DHCP_DELAY = 1.5  # seconds the simulated DHCP server takes to answer


@pytest.mark.machine(static=False, dhcp_delay=DHCP_DELAY)
def test_connect_with_a_timeout_during_dhcp_ends_on_time(sock_net):
    listener = Listener()
    sock = bs.socket()
    sock.settimeout(0.5)
    start = time.time()
    with pytest.raises(bs.timeout):
        sock.connect(listener.address)
    assert 0.5 <= time.time() - start < 0.6
    sock.settimeout(10)  # DHCP went on meanwhile; a later connect completes it
    sock.connect(listener.address)
    listener.accept().close()
    sock.close()
    listener.close()


@pytest.mark.machine(static=False, dhcp_delay=DHCP_DELAY)
def test_non_blocking_connect_during_dhcp_answers_at_once_and_completes_later(sock_net):
    from bitsnet import select as bselect
    listener = Listener()
    sock = bs.socket()
    sock.setblocking(False)
    start = time.time()
    assert sock.connect_ex(listener.address) == errno.EINPROGRESS
    assert sock.connect_ex(listener.address) == errno.EALREADY
    assert time.time() - start < 0.1
    _, writable, _ = bselect.select([], [sock], [], 10)  # through DHCP, then the handshake
    assert writable == [sock] and time.time() - start < DHCP_DELAY + 1.0
    assert sock.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR) == 0
    assert sock.getpeername() == listener.address
    listener.accept().close()
    sock.close()
    listener.close()


@pytest.mark.machine(static=False, dhcp_delay=DHCP_DELAY)
def test_udp_sendto_during_dhcp_honours_the_timeout(sock_net):
    receiver = host.socket(host.AF_INET, host.SOCK_DGRAM)
    receiver.bind((peers.HOST, 0))
    receiver.settimeout(10)
    sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    sock.setblocking(False)
    start = time.time()
    with pytest.raises(bs.error) as info:
        sock.sendto(b"early", receiver.getsockname())
    assert info.value.errno == errno.EAGAIN and time.time() - start < 0.1
    sock.settimeout(0.3)
    start = time.time()
    with pytest.raises(bs.timeout):
        sock.sendto(b"early", receiver.getsockname())
    assert 0.3 <= time.time() - start < 0.4
    sock.settimeout(10)
    sock.sendto(b"later", receiver.getsockname())
    assert receiver.recv(10) == b"later"
    sock.close()
    receiver.close()


@pytest.mark.machine(static=False, faults="no_dhcp")
def test_non_blocking_connect_when_dhcp_never_answers_fails_with_etimedout(sock_net, monkeypatch):
    from bitsnet import ipconfig
    monkeypatch.setattr(ipconfig, "DHCP_TIMEOUT", 1.0)
    sock = bs.socket()
    sock.setblocking(False)
    assert sock.connect_ex((peers.HOST, 9)) == errno.EINPROGRESS
    err, tries = poll_connect_ex(sock, (peers.HOST, 9))
    assert err == errno.ETIMEDOUT
    sock.close()


def test_getsockname_of_a_wildcard_bound_socket_is_the_wildcard(sock_net):
    for kind in (bs.SOCK_STREAM, bs.SOCK_DGRAM):
        for wildcard in ("", "0.0.0.0"):
            sock = bs.socket(bs.AF_INET, kind)
            sock.bind((wildcard, 0))
            name = sock.getsockname()
            assert name[0] == "0.0.0.0" and name[1] > 0, (kind, name)
            if kind == bs.SOCK_STREAM:
                sock.listen(1)
                assert sock.getsockname() == name
            sock.close()
    station = sock_net.config.address.split("/")[0]
    sock = bs.socket()
    sock.bind((station, 0))
    assert sock.getsockname()[0] == station
    sock.close()


@pytest.mark.skipif(PY2, reason="CPython 2.7 has no sendmsg/recvmsg")
def test_sendmsg_recvmsg_and_recvmsg_into_without_ancillary_data(sock_net):
    listener = Listener()
    client, server = bitsnet_pair(listener)
    assert client.sendmsg([b"one ", bytearray(b"two "), memoryview(b"three")]) == 13
    assert peers_recv(server, 13) == b"one two three"
    server.sendall(b"reply")
    data, ancdata, msg_flags, address = client.recvmsg(100, 64)
    assert (data, ancdata, msg_flags, address) == (b"reply", [], 0, None)
    server.sendall(b"scattered")
    first, second = bytearray(4), bytearray(10)
    n, ancdata, _, _ = client.recvmsg_into([first, second])
    assert n == 9 and bytes(first) == b"scat" and bytes(second[:5]) == b"tered" and ancdata == []
    with pytest.raises(bs.error) as info:
        client.sendmsg([b"x"], [(bs.SOL_SOCKET, 1, b"\0" * 4)])
    assert info.value.errno == errno.EOPNOTSUPP
    client.close()
    server.close()
    listener.close()
    receiver = host.socket(host.AF_INET, host.SOCK_DGRAM)
    receiver.bind((peers.HOST, 0))
    receiver.settimeout(5)
    sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    sock.bind(("", 0))
    assert sock.sendmsg([b"data", b"gram"], [], 0, receiver.getsockname()) == 8
    data, source = receiver.recvfrom(100)
    assert data == b"datagram"
    receiver.sendto(b"back", (sock_net.config.address.split("/")[0], sock.getsockname()[1]))
    sock.settimeout(5)
    data, ancdata, _, origin = sock.recvmsg(100)
    assert data == b"back" and ancdata == [] and origin == receiver.getsockname()
    receiver.sendto(b"too long", (sock_net.config.address.split("/")[0], sock.getsockname()[1]))
    data, _, msg_flags, _ = sock.recvmsg(3)
    assert data == b"too" and msg_flags == bs.MSG_TRUNC == host.MSG_TRUNC  # the rest is dropped, as on Linux
    receiver.close()
    sock.close()


def test_msg_oob_goes_out_as_tcp_urgent_data(sock_net):
    listener = Listener()
    client, server = bitsnet_pair(listener)
    client.sendall(b"normal ")
    assert client.send(b"!", bs.MSG_OOB) == 1
    client.sendall(b"after")
    deadline = time.time() + 5
    urgent = None
    while urgent is None and time.time() < deadline:
        try:
            urgent = server.recv(1, host.MSG_OOB)  # the peer reads it out of band, as from Linux
        except host.error as exc:
            assert exc.errno in (errno.EINVAL, errno.EAGAIN, errno.EWOULDBLOCK)
            time.sleep(0.02)
    assert urgent == b"!"
    assert peers_recv(server, 12) == b"normal after"
    with pytest.raises(bs.error) as info:
        client.recv(1, bs.MSG_OOB)  # EDK2 delivers urgent data inline: nothing out of band
    assert info.value.errno == errno.EINVAL
    udp = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    with pytest.raises(bs.error) as info:
        udp.sendto(b"x", bs.MSG_OOB, (peers.HOST, 9))
    assert info.value.errno == errno.EOPNOTSUPP
    for s in (udp, client, server, listener):
        s.close()


def test_argument_details_seen_in_cpythons_test_socket(sock_net):
    sock = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    with pytest.raises(TypeError) as info:
        sock.sendto(b"foo", 0, None)  # three arguments: None is the address
    assert "NoneType" in str(info.value)
    with pytest.raises(TypeError) as info:
        sock.sendto(b"foo")
    assert "takes 2 or 3 arguments (1 given)" in str(info.value)
    if not PY2:
        with pytest.raises(TypeError) as info:
            sock.sendto(complex(1, 2), (peers.HOST, 9))
        assert str(info.value) == "a bytes-like object is required, not 'complex'"
        with pytest.raises(UnicodeEncodeError):
            bs.getaddrinfo("localhost", u"\uD800")
        twin = bs.socket(family=99, type=98, fileno=bs.dup(sock.fileno()))
        assert (twin.family, twin.type) == (99, 98)
        twin.close()
    adopted = bs.socket(fileno=bs.dup(sock.fileno()))
    bs.close(adopted.fileno())
    with pytest.raises(bs.error) as info:
        adopted.setblocking(False)
    assert info.value.errno == errno.EBADF
    adopted.detach()
    sock.close()


# --- a reset after the peer's FIN (Linux tcp_reset: CLOSE_WAIT -> EPIPE) ------------------------
def _after_peer_closed(make, listener):
    """What a client sees writing to a peer that closed: recv, send, send after the RST has had
    time to come, recv again. Each step's result or errno name."""
    client = make()
    client.settimeout(10)
    client.connect(listener.address)
    listener.accept().close()  # the peer's FIN; its next answer to data is a RST
    steps = []

    def step(call, *args):
        try:
            result = call(*args)
            steps.append(result if isinstance(result, bytes) else "ok")
        except (bs.error, host.error) as exc:
            steps.append(errno.errorcode.get(exc.errno, exc.errno))

    time.sleep(0.3)
    step(client.recv, 10)
    step(client.send, b"x")
    deadline = time.time() + 3
    while steps[-1] == "ok" and time.time() < deadline:
        time.sleep(0.2)
        step(client.send, b"y")
    step(client.recv, 10)
    step(client.send, b"z")
    client.close()
    return steps[:2] + [s for s in steps[2:-2] if s != "ok"] + steps[-2:]


def _recv_after_the_reset(make, listener):
    """The same, but the first call after the RST came is a recv: EOF, the error left to send
    (Linux's tcp_recvmsg returns 0 once the FIN is in, before it looks at the error)."""
    client = make()
    client.settimeout(10)
    client.connect(listener.address)
    listener.accept().close()
    time.sleep(0.3)
    steps = [client.recv(10), client.send(b"x")]
    time.sleep(0.5)  # the RST is in (bitsnet: noticed by the next call, which drives the stack)
    steps.append(client.recv(10))
    deadline = time.time() + 3
    while time.time() < deadline:  # bitsnet may queue one more send before it has seen the RST
        try:
            client.send(b"y")
        except (bs.error, host.error) as exc:
            steps.append(errno.errorcode.get(exc.errno, exc.errno))
            break
        time.sleep(0.2)
    client.close()
    return steps


def _as_the_host_does(scenario):
    """``scenario`` run with the host's socket, then with bitsnet's, against the same kind of
    peer: (the host's steps, bitsnet's steps)."""
    listener = Listener()
    try:
        return scenario(host.socket, listener), scenario(bs.socket, listener)
    finally:
        listener.close()


def test_a_reset_after_the_peers_fin_is_epipe_as_on_linux(sock_net):
    reference, ours = _as_the_host_does(_after_peer_closed)
    assert reference == [b"", "ok", "EPIPE", b"", "EPIPE"], reference
    assert ours == reference
    reference, ours = _as_the_host_does(_recv_after_the_reset)
    assert reference == [b"", 1, b"", "EPIPE"], reference
    assert ours == reference


# --- shutdown(SHUT_RD): recv stops waiting, data still comes (Linux tcp_recvmsg, unix_stream) ---
def _outcome(call, *args):
    """``call(*args)``'s result (bytes; "ok" for anything else) or its errno's name."""
    try:
        result = call(*args)
    except (bs.error, host.error) as exc:
        return errno.errorcode.get(exc.errno, exc.errno)
    return result if isinstance(result, bytes) else "ok"


def _recv_after_shut_rd(make, listener):
    """A client shuts its read side with data queued: recv returns the data, then b"" at once;
    the peer sends more: recv returns it, then b""; send still works; the peer resets: the
    error once, then b"". Each step's result."""
    client = make()
    client.settimeout(10)
    client.connect(listener.address)
    server = listener.accept()
    server.sendall(b"before")
    time.sleep(0.2)  # it has come (bitsnet: to the machine; the next call takes it in)
    client.shutdown(host.SHUT_RD)
    steps = [_outcome(client.recv, 100), _outcome(client.recv, 100)]
    server.sendall(b"after")
    time.sleep(0.2)
    steps += [_outcome(client.recv, 100), _outcome(client.recv, 100)]
    steps += [_outcome(client.sendall, b"write"), server.recv(100)]
    server.setsockopt(host.SOL_SOCKET, host.SO_LINGER, struct.pack("ii", 1, 0))
    server.close()
    time.sleep(0.2)
    steps += [_outcome(client.recv, 100), _outcome(client.recv, 100)]
    client.close()
    return steps


def test_recv_after_shut_rd_as_on_linux(sock_net):
    reference, ours = _as_the_host_does(_recv_after_shut_rd)
    assert reference == [b"before", b"", b"after", b"", "ok", b"write", "ECONNRESET", b""], reference
    assert ours == reference


def _pair_after_shut_rd(module, select_module):
    """socketpair(): one end shuts its read side with data queued; what it reads, what its twin's
    send says, readiness, and its own write side."""
    a, b = module.socketpair()
    b.sendall(b"queued")
    a.shutdown(module.SHUT_RD)
    steps = [_outcome(a.recv, 10), _outcome(a.recv, 10), _outcome(b.send, b"more"), _outcome(a.recv, 10)]
    a.setblocking(False)
    steps += [_outcome(a.recv, 10), select_module.select([a], [b], [], 0) == ([a], [b], [])]
    steps += [_outcome(a.sendall, b"w"), b.recv(10)]
    a.close()
    b.close()
    return steps


def test_socketpair_after_shut_rd_as_on_linux(sock_net):
    from bitsnet import select as bselect
    import select as host_select
    reference = _pair_after_shut_rd(host, host_select)
    assert reference == [b"queued", b"", "EPIPE", b"", b"", True, "ok", b"w"], reference
    assert _pair_after_shut_rd(bs, bselect) == reference


# --- getsockname() after a failed connect (Linux tcp_disconnect) --------------------------------
def _names_around_a_failed_connect(make, listener, how):
    """A socket (bound as ``how`` says, or not) connects to a closed port, then to a listener:
    each step's result, a name as (the wildcard or an address, which port: 0 or the first,
    second... seen). Linux: a connect that reports its own failure disconnects the socket; the
    name keeps the port and the bound address (else the wildcard); a port bound by number stays
    bound, any other is given back (the next connect takes a new one)."""
    sock = make()
    ports = [0]

    def name():
        address, port = sock.getsockname()[:2]
        if port not in ports:
            ports.append(port)
        return ("any" if address == "0.0.0.0" else "address", ports.index(port))

    if how == "address":
        sock.bind((peers.HOST if make is host.socket else conftest.STATION, 0))
    elif how == "port":
        sock.bind(("", peers.closed_port()))
    elif how == "any":
        sock.bind(("", 0))
    steps = [name()]
    if how == "non-blocking":
        sock.setblocking(False)
        steps.append(errno.errorcode[sock.connect_ex((peers.HOST, peers.closed_port()))])
        poll_until(lambda: sock.getsockopt(host.SOL_SOCKET, host.SO_ERROR) or _would_block())
        steps.append(name())  # SO_ERROR read (and cleared): not disconnected
        steps.append(errno.errorcode[sock.connect_ex((peers.HOST, peers.closed_port()))])
        sock.setblocking(True)
    else:
        steps.append(_outcome(sock.connect, (peers.HOST, peers.closed_port())))
    steps.append(name())
    steps.append(_outcome(sock.connect, listener.address))
    listener.accept().close()
    steps.append(name())
    sock.close()
    return steps


def _would_block():
    raise bs.error(errno.EAGAIN, "not yet")


FAILED_CONNECT_NAMES = {  # Linux's, checked on the host each time (see below)
    None: [("any", 0), "ECONNREFUSED", ("any", 1), "ok", ("address", 2)],
    "any": [("any", 1), "ECONNREFUSED", ("any", 1), "ok", ("address", 2)],
    "address": [("address", 1), "ECONNREFUSED", ("address", 1), "ok", ("address", 2)],
    "port": [("any", 1), "ECONNREFUSED", ("any", 1), "ok", ("address", 1)],
    "non-blocking": [("any", 0), "EINPROGRESS", ("address", 1), "ECONNABORTED", ("any", 1), "ok", ("address", 2)],
}


@pytest.mark.parametrize("how", sorted(FAILED_CONNECT_NAMES, key=str))
def test_getsockname_after_a_failed_connect_as_on_linux(sock_net, how):
    reference, ours = _as_the_host_does(lambda make, listener: _names_around_a_failed_connect(make, listener, how))
    assert reference == FAILED_CONNECT_NAMES[how], reference
    assert ours == reference
