"""bitsnet._socket used directly (not install(): the host's socket must stay the host's here),
through the simulated firmware, against real peers on the host's loopback.

Organised by what the socket is doing: module-level functions (no firmware), client
connections, servers, data transfer, close and errors, options and timeouts.
"""

from __future__ import print_function

import errno
import gc
import io
import socket as host
import struct
import sys
import threading
import time

import pytest

import conftest
import peers
from bitsnet import _socket as bs
from bitsnet import events

STATION = conftest.STATION  # the simulated machine's address
SHORT = 0.25  # seconds: a timeout that must expire
PY2 = sys.version_info[0] == 2


@pytest.fixture
def net(machine):
    """A booted machine with bitsnet's runtime state fresh; at the end every socket the test
    made must have been closed, and every endpoint must finish (the ledger is then checked)."""
    from efisim.trampoline_build import ensure_trampoline
    from bitsnet import nic
    ensure_trampoline()
    events.reset()
    nic.reset()
    yield machine
    gc.collect()
    lost = conftest.lost_completions(events)  # before any close could finish them by Status
    assert not lost, "completions written by the firmware but never processed: %r" % (lost,)
    leftover = sorted(bs._fds)
    for fd in leftover:
        bs.close(fd)
    # conftest's `machine` teardown then closes what is left (without waiting out TIME_WAIT)
    # and checks every invariant.
    assert not leftover, "sockets left open: %r" % leftover


class HostListener(object):
    """A listening host socket on 127.0.0.1 whose connections are accepted on demand."""

    def __init__(self):
        self.sock = host.socket()
        self.sock.bind((peers.HOST, 0))
        self.sock.listen(5)
        self.sock.settimeout(10)
        self.port = self.sock.getsockname()[1]
        self.address = (peers.HOST, self.port)

    def accept(self):
        conn, _ = self.sock.accept()
        conn.settimeout(10)
        return conn

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()


def connected_pair(listener):
    """(bitsnet client socket, host server-side socket)."""
    client = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
    client.settimeout(10)
    client.connect(listener.address)
    return client, listener.accept()


def recv_exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "EOF after %d of %d bytes" % (len(data), size)
        data += chunk
    return data


def in_thread(function, *args):
    result = {}

    def run():
        try:
            result["value"] = function(*args)
        except Exception as exc:
            result["error"] = exc
    thread = threading.Thread(target=run)
    thread.daemon = True
    thread.start()
    return thread, result


# --- module-level functions (no firmware) ------------------------------------------------------
def test_exception_classes_have_each_versions_inheritance():
    assert issubclass(bs.timeout, bs.error) and issubclass(bs.gaierror, bs.error)
    assert issubclass(bs.herror, bs.error)
    if PY2:
        assert issubclass(bs.error, IOError)
    else:
        assert bs.error is OSError
        assert bs.timeout is TimeoutError or sys.version_info < (3, 10)


def test_inet_conversions_match_the_host():
    for text in ("127.0.0.1", "1.2.3.4", "255.255.255.255", "0.0.0.0"):
        assert bs.inet_aton(text) == host.inet_aton(text) == bs.inet_pton(bs.AF_INET, text)
        assert bs.inet_ntoa(host.inet_aton(text)) == text
    for text in ("127.1", "10.1.2", "0x7f.1", "017.0.0.1"):
        assert bs.inet_aton(text) == host.inet_aton(text)
    for bad in ("1.2.3.4.5", "256.1.1.1", "abc", "", "1..2.3"):
        with pytest.raises(bs.error):
            bs.inet_aton(bad)
    with pytest.raises(bs.error):
        bs.inet_pton(bs.AF_INET, "127.1")
    for text in ("::", "::1", "2001:db8::1", "fe80::1:2:3:4", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8",
                 "2001:db8:0:0:1:0:0:1", "::1.2.3.4", "1::"):
        packed = host.inet_pton(host.AF_INET6, text)
        assert bs.inet_pton(bs.AF_INET6, text) == packed
        assert bs.inet_ntop(bs.AF_INET6, packed) == host.inet_ntop(host.AF_INET6, packed)
    for bad in (":::", "1:2:3:4:5:6:7:8:9", "12345::", "::g", "1::2::3"):
        with pytest.raises(bs.error):
            bs.inet_pton(bs.AF_INET6, bad)
    with pytest.raises(bs.error):
        bs.inet_ntoa(b"abc")
    with pytest.raises(ValueError):
        bs.inet_ntop(bs.AF_INET6, b"abc")


def test_byte_order_functions_match_the_host():
    for value in (0, 1, 0x1234, 0xffff):
        assert bs.htons(value) == host.htons(value) and bs.ntohs(value) == host.ntohs(value)
    for value in (0, 1, 0x12345678, 0xffffffff):
        assert bs.htonl(value) == host.htonl(value) and bs.ntohl(value) == host.ntohl(value)
    with pytest.raises(OverflowError):
        bs.htons(0x10000)
    with pytest.raises(OverflowError):
        bs.htonl(-1)


def test_getaddrinfo_literals_localhost_wildcards_and_services():
    stream = (bs.AF_INET, bs.SOCK_STREAM, bs.IPPROTO_TCP, "", ("10.1.2.3", 80))
    assert bs.getaddrinfo("10.1.2.3", 80, 0, bs.SOCK_STREAM) == [stream]
    assert bs.getaddrinfo("10.1.2.3", "http", 0, bs.SOCK_STREAM) == [stream]
    assert bs.getaddrinfo("10.1.2.3", "80", bs.AF_INET, bs.SOCK_STREAM) == [stream]
    assert bs.getaddrinfo("localhost", "https", 0, bs.SOCK_STREAM)[0][4] == ("127.0.0.1", 443)
    assert bs.getaddrinfo(None, 8080, 0, bs.SOCK_STREAM, 0, bs.AI_PASSIVE)[0][4] == ("0.0.0.0", 8080)
    assert bs.getaddrinfo(None, 8080, 0, bs.SOCK_STREAM)[0][4] == ("127.0.0.1", 8080)
    assert bs.getaddrinfo(None, 0, 0, bs.SOCK_STREAM, 0, bs.AI_PASSIVE)[0][4] == ("0.0.0.0", 0)
    assert sorted(r[1] for r in bs.getaddrinfo("1.2.3.4", 53)) == [bs.SOCK_STREAM, bs.SOCK_DGRAM]
    with pytest.raises(bs.gaierror) as info:
        bs.getaddrinfo("www.example.com", 80, 0, 0, 0, bs.AI_NUMERICHOST)  # a name: no DNS asked
    assert info.value.args[0] == bs.EAI_NONAME == host.EAI_NONAME
    with pytest.raises(bs.gaierror) as info:
        bs.getaddrinfo("1.2.3.4", "no-such-service", 0, bs.SOCK_STREAM)
    assert info.value.args[0] == bs.EAI_SERVICE
    with pytest.raises(bs.gaierror):
        bs.getaddrinfo("1.2.3.4", 80, bs.AF_INET6)


def test_host_name_functions():
    assert bs.gethostbyname("localhost") == "127.0.0.1"
    assert bs.gethostbyname("10.0.0.1") == "10.0.0.1"
    assert bs.gethostbyname_ex(bs.gethostname())[2] == ["127.0.0.1"]
    assert bs.gethostbyaddr("127.0.0.1")[0] == "localhost"
    with pytest.raises(bs.herror):
        bs.gethostbyaddr("10.9.9.9")
    assert bs.getservbyname("http", "tcp") == 80 and bs.getservbyport(443) == "https"
    assert bs.getnameinfo(("127.0.0.1", 80), bs.NI_NUMERICHOST) == ("127.0.0.1", "http")


def test_default_timeout_is_validated_and_inherited(net):
    assert bs.getdefaulttimeout() is None
    with pytest.raises(ValueError):
        bs.setdefaulttimeout(-1)
    bs.setdefaulttimeout(2.5)
    try:
        with bs.socket() as s:
            assert s.gettimeout() == 2.5
    finally:
        bs.setdefaulttimeout(None)
    with bs.socket() as s:
        assert s.gettimeout() is None and s.getblocking()
        s.settimeout(0)
        assert not s.getblocking()
        s.setblocking(True)
        assert s.gettimeout() is None
        with pytest.raises(ValueError):
            s.settimeout(-0.5)


@pytest.mark.machine(ipv6=False)  # firmware without TCP6: AF_INET6 is EAFNOSUPPORT
def test_unsupported_kinds_raise_cpythons_errors(net):
    with pytest.raises(bs.error) as info:
        bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    assert info.value.errno == errno.EAFNOSUPPORT
    with pytest.raises(bs.error) as info:
        bs.socket(bs.AF_INET, bs.SOCK_STREAM, 17)
    assert info.value.errno == errno.EPROTONOSUPPORT
    try:
        from bitsnet import udp  # noqa: F401
    except ImportError:
        with pytest.raises(bs.error) as info:
            bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
        assert info.value.errno == errno.EPROTONOSUPPORT


# --- identity and lifetime ------------------------------------------------------------------------
def test_filenos_are_unique_and_closed_sockets_raise_ebadf(net):
    sockets = [bs.socket() for _ in range(5)]
    numbers = [s.fileno() for s in sockets]
    assert len(set(numbers)) == 5 and min(numbers) >= bs.FIRST_FD
    for s in sockets:
        s.close()
        s.close()  # harmless
        assert s.fileno() == -1
    with pytest.raises(bs.error) as info:
        sockets[0].recv(1)
    assert info.value.errno == errno.EBADF
    with bs.socket() as s:
        assert s.fileno() not in numbers


def test_detach_dup_and_fileno_adoption(net):
    s = bs.socket()
    fd = s.detach()
    assert s.fileno() == -1
    adopted = bs.socket(fileno=fd)
    assert adopted.fileno() == fd and adopted.family == bs.AF_INET and adopted.type == bs.SOCK_STREAM
    twin = adopted.dup()
    assert twin.fileno() != fd
    adopted.close()
    assert twin.getsockname() == ("0.0.0.0", 0)  # the endpoint lives while one fd names it
    twin.close()
    with pytest.raises(bs.error):
        bs.socket(fileno=fd)


# --- clients ----------------------------------------------------------------------------------------
def test_blocking_connect_exchange_and_names(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        assert client.getpeername() == listener.address
        local = client.getsockname()
        assert local[0] == STATION and server.getpeername() == local
        client.sendall(b"ping")
        assert recv_exactly(server, 4) == b"ping"
        server.sendall(b"pong!")
        assert recv_exactly(client, 5) == b"pong!"
        start = time.time()
        client.close()
        assert time.time() - start < 0.1  # graceful close finishes in the background
        assert server.recv(10) == b""  # FIN: the peer reads EOF, not a reset
        server.close()


def test_connect_refused_raises_econnrefused(net):
    s = bs.socket()
    s.settimeout(10)
    with pytest.raises(bs.error) as info:
        s.connect((peers.HOST, peers.closed_port()))
    assert info.value.errno == errno.ECONNREFUSED
    if not PY2:
        assert isinstance(info.value, ConnectionRefusedError)
    assert s.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR) == 0
    assert s.connect_ex((peers.HOST, peers.closed_port())) in (errno.ECONNREFUSED, errno.EISCONN, errno.EINVAL,
                                                                errno.ECONNABORTED)
    s.close()


def test_non_blocking_connect_then_writable_and_so_error(net):
    from bitsnet import select as bselect
    with HostListener() as listener:
        s = bs.socket()
        s.setblocking(False)
        with pytest.raises(bs.error) as info:
            s.connect(listener.address)
        assert info.value.errno == errno.EINPROGRESS
        if not PY2:
            assert isinstance(info.value, BlockingIOError)
        _, writable, _ = bselect.select([], [s], [], 10)
        assert writable == [s]
        assert s.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR) == 0
        assert s.connect_ex(listener.address) == 0  # Linux: 0 once after EINPROGRESS, then EISCONN
        assert s.connect_ex(listener.address) == errno.EISCONN
        listener.accept().close()
        s.close()
    refused = bs.socket()
    refused.setblocking(False)
    assert refused.connect_ex((peers.HOST, peers.closed_port())) == errno.EINPROGRESS
    _, writable, _ = bselect.select([], [refused], [], 10)
    assert writable == [refused]
    assert refused.getsockopt(bs.SOL_SOCKET, bs.SO_ERROR) == errno.ECONNREFUSED
    refused.close()


@pytest.mark.machine(faults="delay=1.0")
def test_connect_timeout_is_ours(net):
    s = bs.socket()
    s.settimeout(SHORT)
    with HostListener() as listener:
        start = time.time()
        with pytest.raises(bs.timeout):
            s.connect(listener.address)
        assert SHORT <= time.time() - start < SHORT + 0.5
    s.close()


# --- servers ----------------------------------------------------------------------------------------
def test_listen_accept_ephemeral_port_and_exchange(net):
    server = bs.socket()
    server.bind(("0.0.0.0", 0))
    port = server.getsockname()[1]
    assert port > 0
    server.listen(2)
    server.settimeout(10)
    thread, result = in_thread(host.create_connection, (STATION, port), 10)
    conn, address = server.accept()
    thread.join(10)
    peer = result["value"]
    assert address == peer.getsockname() and conn.getsockname() == (STATION, port)
    peer.sendall(b"to firmware")
    assert recv_exactly(conn, 11) == b"to firmware"
    conn.sendall(b"to host")
    assert recv_exactly(peer, 7) == b"to host"
    fd, address2 = None, None
    thread, result = in_thread(host.create_connection, (STATION, port), 10)
    fd, address2 = server._accept()  # the Python 3 socket.py path: (fd, address)
    thread.join(10)
    assert isinstance(fd, int) and address2 == result["value"].getsockname()
    bs.socket(fileno=fd).close()
    for s in (conn, server, peer, result["value"]):
        s.close()


def test_accept_timeout_and_non_blocking_accept(net):
    server = bs.socket()
    server.bind(("", 0))
    server.listen(1)
    server.settimeout(SHORT)
    start = time.time()
    with pytest.raises(bs.timeout):
        server.accept()
    assert SHORT <= time.time() - start < SHORT + 0.5
    server.setblocking(False)
    with pytest.raises(bs.error) as info:
        server.accept()
    assert info.value.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
    server.close()


def test_so_reuseaddr_lets_a_server_restart_on_the_same_port_at_once(net):
    server = bs.socket()
    server.setsockopt(bs.SOL_SOCKET, bs.SO_REUSEADDR, 1)
    assert server.getsockopt(bs.SOL_SOCKET, bs.SO_REUSEADDR) == 1
    server.bind(("", 0))
    port = server.getsockname()[1]
    server.listen(1)
    server.settimeout(10)
    peer = host.create_connection((STATION, port), 10)
    conn, _ = server.accept()
    conn.sendall(b"bye")
    conn.close()
    server.close()
    assert recv_exactly(peer, 3) == b"bye"
    peer.close()
    again = bs.socket()
    again.setsockopt(bs.SOL_SOCKET, bs.SO_REUSEADDR, 1)
    again.bind(("", port))
    again.listen(1)
    again.close()


def test_bind_clash_is_eaddrinuse(net):
    first = bs.socket()
    first.bind(("", 0))
    first.listen(1)
    second = bs.socket()
    with pytest.raises(bs.error) as info:
        second.bind(("", first.getsockname()[1]))
        second.listen(1)
    assert info.value.errno == errno.EADDRINUSE
    first.close()
    second.close()


# --- data -------------------------------------------------------------------------------------------
def test_recv_variants_and_msg_peek(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        server.sendall(b"abcdefghijkl")
        assert client.recv(3, bs.MSG_PEEK) == b"abc"
        assert recv_exactly(client, 3) == b"abc"
        buffer = bytearray(4)
        assert client.recv_into(buffer) == 4 and bytes(buffer) == b"defg"
        data, address = client.recvfrom(2)
        assert data == b"hi" and address is None
        buffer = bytearray(10)
        n, address = client.recvfrom_into(buffer, 3)
        assert (n, bytes(buffer[:n])) == (3, b"jkl")
        assert client.send(b"") == 0
        assert client.sendto(b"xy", listener.address) == 2
        assert recv_exactly(server, 2) == b"xy"
        client.close()
        server.close()


def test_large_payload_both_ways_with_checksum(net):
    payload = peers.pattern(3 * 1024 * 1024, seed=1)
    with peers.EchoPeer() as echo:
        s = bs.socket()
        s.settimeout(20)
        s.connect((peers.HOST, echo.port))
        got = bytearray()
        sent = 0
        s.setblocking(False)
        from bitsnet import select as bselect
        deadline = time.time() + 30
        while len(got) < len(payload) and time.time() < deadline:
            want_write = [s] if sent < len(payload) else []
            readable, writable, _ = bselect.select([s], want_write, [], 5)
            if writable:
                try:
                    sent += s.send(payload[sent:sent + 256 * 1024])
                except bs.error as exc:
                    assert exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
            if readable:
                got += s.recv(1 << 20)
        assert bytes(got) == payload
        s.close()


def test_non_blocking_send_buffer_is_bounded(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        client.setblocking(False)
        chunk = b"z" * 65536
        total = 0
        with pytest.raises(bs.error) as info:
            while total < 256 * 1024 * 1024:
                total += client.send(chunk)
        assert info.value.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
        client.settimeout(SHORT)
        start = time.time()
        with pytest.raises(bs.timeout):
            client.sendall(chunk * 64)
        assert time.time() - start < SHORT + 1
        client.close()
        server.close()


def test_recv_timeout_then_data_still_arrives(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        client.settimeout(SHORT)
        start = time.time()
        with pytest.raises(bs.timeout):
            client.recv(10)
        assert SHORT <= time.time() - start < SHORT + 0.5
        server.sendall(b"late")
        client.settimeout(5)
        assert recv_exactly(client, 4) == b"late"
        client.setblocking(False)
        with pytest.raises(bs.error) as info:
            client.recv(10)
        assert info.value.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
        client.close()
        server.close()


# --- close and errors -------------------------------------------------------------------------------
def test_peer_close_makes_recv_return_empty(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        server.sendall(b"last words")
        server.close()
        assert recv_exactly(client, 10) == b"last words"
        assert client.recv(10) == b""
        assert client.recv(10) == b""
        client.close()


def test_peer_reset_raises_econnreset(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        server.setsockopt(host.SOL_SOCKET, host.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()
        with pytest.raises(bs.error) as info:
            client.recv(10)
        assert info.value.errno == errno.ECONNRESET
        client.close()


def test_so_linger_zero_close_resets_the_peer(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        client.setsockopt(bs.SOL_SOCKET, bs.SO_LINGER, struct.pack("ii", 1, 0))
        assert client.getsockopt(bs.SOL_SOCKET, bs.SO_LINGER, 8) == struct.pack("ii", 1, 0)
        client.close()
        with pytest.raises(host.error) as info:
            server.recv(10)
        assert info.value.errno == errno.ECONNRESET
        server.close()


def test_so_linger_is_the_endpoints_on_every_kind_as_on_the_host(net):
    # The endpoint keeps SO_LINGER (its close honours it): a UDP socket records it as Linux does
    # (it raised KeyError before), and an accepted connection inherits the listener's.
    def lingers(module, listener_address):
        udp = module.socket(module.AF_INET, module.SOCK_DGRAM)
        udp.setsockopt(module.SOL_SOCKET, module.SO_LINGER, struct.pack("ii", 1, 3))
        seen = [udp.getsockopt(module.SOL_SOCKET, module.SO_LINGER, 8), udp.getsockopt(module.SOL_SOCKET,
                                                                                       module.SO_LINGER)]
        udp.close()
        server = module.socket()
        server.setsockopt(module.SOL_SOCKET, module.SO_LINGER, struct.pack("ii", 1, 0))
        server.bind((listener_address, 0))
        server.listen(1)
        client = host.create_connection((STATION if module is bs else peers.HOST, server.getsockname()[1]), 10)
        server.settimeout(10)
        accepted, _ = server.accept()
        seen.append(accepted.getsockopt(module.SOL_SOCKET, module.SO_LINGER, 8))
        accepted.close()  # (1, 0) inherited: a reset
        with pytest.raises(host.error) as info:
            client.recv(10)
        seen.append(info.value.errno)
        client.close()
        server.close()
        return seen

    assert lingers(bs, "") == lingers(host, peers.HOST) == [struct.pack("ii", 1, 3), 1, struct.pack("ii", 1, 0),
                                                            errno.ECONNRESET]


def test_dropping_the_last_reference_closes_gracefully(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        del client
        gc.collect()
        assert server.recv(10) == b""
        server.close()


def test_shutdown_wr_sends_fin_and_buffered_data_stays_readable(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        server.sendall(b"before")
        from bitsnet import select as bselect
        assert bselect.select([client], [], [], 5)[0] == [client]
        client.shutdown(bs.SHUT_WR)
        assert server.recv(10) == b""
        assert recv_exactly(client, 6) == b"before"
        assert client.recv(10) == b""
        client.close()
        server.close()


def makefile_rb(sock):
    """A makefile("rb") reader over a bitsnet socket, as each Python's socket.py builds one."""
    if PY2:
        return host._fileobject(sock, "rb")

    class RawReader(host.SocketIO):
        def close(self):  # socket.SocketIO's tells its socket.socket, which bitsnet's is not
            io.RawIOBase.close(self)
    return io.BufferedReader(RawReader(sock, "rb"))


def test_shutdown_rd_still_delivers_and_stays_readable(net):
    # Linux: after SHUT_RD select/poll say readable, recv returns what is queued (a makefile
    # reader gets it, then EOF) and b"" at once when nothing is -- a non-blocking one too, not
    # EAGAIN; what the peer sends later still comes; the write side is untouched.
    from bitsnet import select as bselect
    with HostListener() as listener:
        client, server = connected_pair(listener)
        server.sendall(b"line one\nline")
        assert bselect.select([client], [], [], 5) == ([client], [], [])
        client.shutdown(bs.SHUT_RD)
        poller = bselect.poll()
        poller.register(client, bselect.POLLIN | bselect.POLLOUT)
        assert poller.poll(0) == [(client.fileno(), bselect.POLLIN | bselect.POLLOUT)]
        reader = makefile_rb(client)
        assert reader.readline() == b"line one\n" and reader.read() == b"line"
        reader.close()
        client.setblocking(False)
        assert client.recv(10) == b"" and client.recv_into(bytearray(10)) == 0
        assert bselect.select([client], [], [], 0)[0] == [client]
        server.sendall(b"more")
        got, deadline = b"", time.time() + 5
        while not got and time.time() < deadline:
            got = client.recv(10)  # b"" until it has come: recv after SHUT_RD never waits
        assert got == b"more" and client.recv(10) == b""
        client.setblocking(True)
        client.sendall(b"still sending")
        assert recv_exactly(server, 13) == b"still sending"
        with pytest.raises(bs.error) as info:
            bs.socket().shutdown(bs.SHUT_WR)
        assert info.value.errno == errno.ENOTCONN
        client.close()
        server.close()
    gc.collect()


# --- options ----------------------------------------------------------------------------------------
def test_socket_options(net):
    with HostListener() as listener:
        client = bs.socket()
        for level, name in ((bs.SOL_SOCKET, bs.SO_KEEPALIVE), (bs.IPPROTO_TCP, bs.TCP_NODELAY)):
            assert client.getsockopt(level, name) == 0
            client.setsockopt(level, name, 1)
            assert client.getsockopt(level, name) == 1
        client.setsockopt(bs.SOL_SOCKET, bs.SO_RCVBUF, 65536)
        assert client.getsockopt(bs.SOL_SOCKET, bs.SO_RCVBUF) > 0
        assert client.getsockopt(bs.SOL_SOCKET, bs.SO_TYPE) == bs.SOCK_STREAM
        assert client.getsockopt(bs.SOL_SOCKET, bs.SO_KEEPALIVE, 4) == struct.pack("i", 1)
        with pytest.raises(bs.error) as info:
            client.setsockopt(bs.SOL_SOCKET, 9999, 1)
        assert info.value.errno == errno.ENOPROTOOPT
        with pytest.raises(bs.error) as info:
            client.getsockopt(bs.IPPROTO_TCP, 9999)
        assert info.value.errno == errno.ENOPROTOOPT
        client.settimeout(10)
        client.connect(listener.address)
        client.setsockopt(bs.IPPROTO_TCP, bs.TCP_NODELAY, 1)  # http.client does this after connect
        listener.accept().close()
        client.close()


def test_two_hundred_sockets_leave_no_children(net):
    with peers.EchoPeer() as echo:
        for i in range(200):
            s = bs.socket()
            if i % 10 == 0:
                s.settimeout(10)
                s.connect((peers.HOST, echo.port))
                s.sendall(b"x")
                assert s.recv(1) == b"x"
            s.close()
    from bitsnet import nic, tcp
    tcp.close_all(5.0)
    assert tcp.live_endpoints() == 0
    assert nic.default_nic().children() == 0


def test_socketpair_is_an_in_memory_stream(net):
    from bitsnet import select as bselect
    a, b = bs.socketpair()
    assert bselect.select([b], [a, b], [], 0) == ([], [a, b], [])
    a.sendall(b"x" * 100000)
    assert bselect.select([b], [], [], 0)[0] == [b]
    assert recv_exactly(b, 100000) == b"x" * 100000
    a.setblocking(False)
    with pytest.raises(bs.error) as info:
        while True:
            a.send(b"y" * 65536)
    assert info.value.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
    a.close()
    assert len(b.recv(1 << 20)) > 0
    while b.recv(1 << 20):
        pass
    assert b.recv(10) == b""
    b.close()
