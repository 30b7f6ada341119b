"""bitsnet.tcp.TcpEndpoint through the simulator, against real peers on the host's loopback.

Grouped by state: connecting (refused, timeout), established (data both ways, peer FIN, peer
RST, shutdown, close), listening (accept with backlog, SO_REUSEADDR restart), and lifetime
(many endpoints, zero ledger). Core paths run on both firmware profiles; one round trip runs
in every event mode.
"""

from __future__ import print_function

import ctypes
import errno
import hashlib
import socket
import struct
import threading

import pytest

import conftest
import efi
from bitsnet import errors, events, tcp
from helpers import (DEADLINE, HOST, MODES, PROFILES, connect, established_pair, recv_exactly,
                     recv_some, recv_until_eof, send_all, wait)
from peers import EchoPeer, HttpPeer, closed_port, pattern

pytest_plugins = ["helpers"]  # the ``net`` fixture

LEASE = conftest.STATION
BIG = 5 * 1024 * 1024


# --- connecting ---------------------------------------------------------------------------------
@pytest.mark.parametrize("net", MODES, indirect=True)
def test_echo_round_trip_in_every_event_mode(net):
    with EchoPeer() as peer:
        ep = connect((HOST, peer.port))
        assert ep.local_address[0] == LEASE and ep.local_address[1] > 0
        assert ep.remote_address == (HOST, peer.port)
        send_all(ep, b"ping")
        assert recv_exactly(ep, 4) == b"ping"
        ep.close()


@pytest.mark.parametrize("net", MODES, indirect=True)
def test_recv_blocking_in_every_event_mode(net):
    # TcpEndpoint.recv_blocking, the socket layer's recv fast path: it takes its own completed
    # Receive after each Poll (events.take) instead of through process(). Round trips, a chunk
    # read in pieces, another endpoint's data arriving meanwhile (served by stack.settle), the
    # timeout, then the peer's FIN; the registry holds only the Receive and ends empty (``net``).
    ep, conn, listener = established_pair()
    other, conn2, listener2 = established_pair()
    completions = events.stats["completions"]
    conn2.sendall(b"meanwhile")
    for n in range(40):
        send_all(ep, b"%02d" % n)
        got = conn.recv(2)
        got += conn.recv(2 - len(got)) if len(got) < 2 else b""
        assert got == b"%02d" % n
        conn.sendall(got)
        assert ep.recv_blocking(1, 5.0) + ep.recv_blocking(1, 5.0) == b"%02d" % n
    assert events.stats["completions"] - completions >= 80  # every Receive and Transmit consumed
    assert events.outstanding(ep) == 0  # nothing left behind: the next Receive waits for the next pump (8.2)
    assert other.can_recv() and recv_exactly(other, 9) == b"meanwhile"  # served while ep waited
    with pytest.raises(errors.timeout):
        ep.recv_blocking(1, 0.2)
    # A stream: its Receives are deferred behind batches of Polls (stack.pump) and may complete
    # inside the pump with more than one recv takes; recv_blocking must see those bytes too.
    stream = pattern(2 * 1024 * 1024)
    sender = threading.Thread(target=conn.sendall, args=(stream,))
    sender.daemon = True
    sender.start()
    got = bytearray()
    while len(got) < len(stream):
        got += ep.recv_blocking(65536, 5.0)
    sender.join(DEADLINE)
    assert bytes(got) == stream
    conn.sendall(b"last")
    conn.close()
    assert ep.recv_blocking(100, 5.0) == b"last"
    assert ep.recv_blocking(100, 5.0) == b""
    for each in (ep, other, conn2, listener, listener2):
        each.close()


def test_recv_blocking_sees_what_another_thread_consumed(net):
    # A host harness's events.wait_hook lets other threads use bitsnet while one waits; their
    # pumps update every endpoint, so this one's Receive may complete there -- here with the
    # peer's FIN. recv_blocking must answer EOF then, not wait for a change it did not see.
    ep, conn, listener = established_pair()
    calls = []

    def other_thread():
        calls.append(1)
        if len(calls) == 1:
            conn.close()
            assert wait(ep.can_recv)  # stack.pump(): the FIN is consumed here
    events.wait_hook = other_thread
    try:
        start = events.clock()
        assert ep.recv_blocking(10, 5.0) == b""
        assert events.clock() - start < 2.0
    finally:
        events.wait_hook = None
    ep.close()
    listener.close()


@pytest.mark.parametrize("profile", PROFILES)
def test_http_get_until_the_server_closes(net, tmpdir, profile):
    body = pattern(100000)
    with HttpPeer(tmpdir, {"f.bin": body}) as peer:
        ep = connect((HOST, peer.port))
        send_all(ep, b"GET /f.bin HTTP/1.0\r\nHost: x\r\n\r\n")
        response = recv_until_eof(ep)
        head, _, got = response.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200") and got == body
        assert recv_some(ep) == b""  # EOF stays EOF
        ep.close()


@pytest.mark.parametrize("profile", PROFILES)
def test_connect_to_a_closed_port_is_refused(net, profile):
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Connect): RST to the SYN completes the token with
    # EFI_CONNECTION_RESET; bitsnet reports ECONNREFUSED.
    ep = tcp.TcpEndpoint()
    ep.connect_start((HOST, closed_port()))
    assert wait(lambda: not ep.connecting, ep)
    assert not ep.connected and ep.can_recv() and ep.can_send()
    assert ep.take_error() == errno.ECONNREFUSED and ep.take_error() == 0
    with pytest.raises(errors.error) as caught:
        ep.recv_into(bytearray(10))
    assert caught.value.errno == errno.ENOTCONN
    ep.close()


def test_connect_timeout_is_ours_not_edk2s(net):
    # Nothing answers outside 127/8 (the simulator's wire); EDK2's timer is >= 60 s (docs/edk2.md section 3.9).
    ep = tcp.TcpEndpoint()
    start = events.clock()
    ep.connect_start(("10.255.255.1", 80), timeout=0.5)
    assert wait(lambda: not ep.connecting, ep)
    assert 0.4 < events.clock() - start < 5
    assert ep.take_error() == errno.ETIMEDOUT
    ep.close()


def test_connect_argument_errors(net):
    ep = tcp.TcpEndpoint()  # (addresses are checked once, by the socket layer: test_hostile)
    with EchoPeer() as peer:
        ep.connect_start((HOST, peer.port))
        with pytest.raises(errors.error) as caught:
            ep.connect_start((HOST, peer.port))
        assert caught.value.errno == errno.EINVAL  # EALREADY/EISCONN: the socket layer's (test_socket_api)
        ep.close()
    with pytest.raises(errors.error) as caught:
        ep.send(b"x")
    assert caught.value.errno == errno.EBADF


# --- established -----------------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_peer_close_gives_buffered_data_then_eof(net, profile):
    ep, conn, listener = established_pair()
    conn.sendall(b"last words")
    conn.close()
    assert recv_until_eof(ep) == b"last words"
    assert ep.can_recv() and ep.recv_into(bytearray(4)) == 0
    send_all(ep, b"still allowed in CloseWait")  # docs/edk2.md section 3.5: Transmit OK after the peer's FIN
    ep.close()
    listener.close()


@pytest.mark.parametrize("profile", PROFILES)
def test_peer_reset_gives_econnreset(net, profile):
    ep, conn, listener = established_pair()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()  # RST
    assert wait(ep.can_recv, ep)
    with pytest.raises(errors.error) as caught:
        ep.recv_into(bytearray(10))
    assert caught.value.errno == errno.ECONNRESET
    assert ep.recv_into(bytearray(10)) == 0  # reported once, then EOF (as Linux)
    with pytest.raises(errors.error) as caught:
        ep.send(b"x")
    assert caught.value.errno == errno.EPIPE
    ep.close()
    listener.close()


@pytest.mark.parametrize("profile", PROFILES)
def test_close_sends_fin_not_reset(net, profile):
    ep, conn, listener = established_pair()
    send_all(ep, b"bye")
    ep.close()  # returns at once; the FIN goes out in the background
    assert conn.recv(10) == b"bye"
    assert conn.recv(10) == b""  # EOF, not ECONNRESET
    conn.close()
    assert wait(lambda: tcp.live_endpoints() == 0, None, 10)
    listener.close()


def test_a_connection_past_the_fin_holds_no_receive_buffer(net):
    # Receiver.release: a graceful close lasts through TIME_WAIT (2 s), and BITS's heap is 23-28
    # MiB (docs/bits-environment.md section 1): the 64 KiB Receive buffer goes at the FIN.
    ep, conn, listener = established_pair()
    send_all(ep, b"bye")
    ep.close()  # our FIN first, so TIME_WAIT follows the peer's
    assert conn.recv(10) == b"bye"
    conn.close()
    assert wait(lambda: ep.receiver.buffer is None or ep not in tcp._closing, None, 10)
    assert ep.receiver.buffer is None and ep.receiver.spent is None
    assert ep in tcp._closing  # released while TIME_WAIT still holds the child
    listener.close()
    ep, conn, listener = established_pair()
    conn.sendall(b"last")
    conn.close()
    assert recv_until_eof(ep) == b"last"
    assert ep.receiver.buffer is None  # the peer's FIN, the connection still open
    ep.close()
    listener.close()


def test_close_with_unread_data_still_sends_fin(net):
    # docs/edk2.md section 3.3 Close: unread data in EDK2's buffer turns Close(graceful) into a RST; bitsnet
    # drains it first.
    ep, conn, listener = established_pair()
    conn.sendall(b"x" * 200000)
    assert wait(ep.can_recv, ep)
    ep.close()
    conn.shutdown(socket.SHUT_WR)
    assert conn.recv(10) == b""
    conn.close()
    listener.close()


def test_linger_zero_close_resets(net):
    ep, conn, listener = established_pair()
    ep.set_option("linger", (1, 0))
    ep.close()
    with pytest.raises(socket.error) as caught:
        conn.recv(10)
        conn.recv(10)
    assert caught.value.errno == errno.ECONNRESET
    conn.close()
    listener.close()


def test_shutdown_wr_sends_fin_and_recv_sees_buffered_data_then_eof(net):
    ep, conn, listener = established_pair()
    conn.sendall(b"before")
    assert recv_exactly(ep, 6) == b"before"
    conn.sendall(b"buffered")
    assert wait(lambda: ep.can_recv(), ep)
    ep.shutdown(tcp.SHUT_WR)
    assert conn.recv(10) == b""  # our FIN
    with pytest.raises(errors.error) as caught:
        ep.send(b"x")
    assert caught.value.errno == errno.EPIPE
    assert recv_until_eof(ep) == b"buffered"  # no half-close in EDK2: then EOF
    conn.close()
    ep.close()
    listener.close()


def test_shutdown_rd_returns_what_comes_and_never_waits(net):
    # Linux: data queued before SHUT_RD is still returned, then recv answers b"" at once; what
    # the peer sends later is still received -- within SO_RCVBUF: with the Python buffer full no
    # Receive is posted, as on an open connection -- and the write side stays open.
    rcvbuf = 16 * 1024
    ep, conn, listener = established_pair(rcvbuf=rcvbuf)
    conn.sendall(b"before")
    assert wait(lambda: len(ep._rx) >= 6, ep)
    ep.shutdown(tcp.SHUT_RD)
    assert ep.can_recv() and ep.recv(100) == b"before"
    assert ep.can_recv() and ep.recv(100) == b"" and ep.recv_into(bytearray(10)) == 0
    assert ep.recv_blocking(10, None) == b""  # the socket layer's fast path: no wait either
    data = pattern(256 * 1024, seed=5)
    sender = threading.Thread(target=conn.sendall, args=(data,))
    sender.daemon = True
    sender.start()
    assert wait(lambda: len(ep._rx) >= rcvbuf and ep.receiver.op is None, ep)
    for _ in range(50):
        ep.progress()
    assert len(ep._rx) < rcvbuf + tcp.RECEIVE_CHUNK and ep.receiver.op is None  # bounded
    got = bytearray()
    while len(got) < len(data):
        assert wait(lambda: len(ep._rx) > 0, ep)
        got += ep.recv(65536)
    sender.join(DEADLINE)
    assert bytes(got) == data and ep.recv(10) == b""
    send_all(ep, b"write side open")
    assert recv_exactly_host(conn, 15) == b"write side open"
    # close() with the buffer full after SHUT_RD still drains EDK2 (docs/edk2.md section 3.3
    # Close: unread data would turn the Close into a RST): the peer sees our FIN.
    conn.sendall(pattern(200000, seed=6))
    assert wait(lambda: len(ep._rx) >= rcvbuf and ep.receiver.op is None, ep)
    ep.close()
    conn.shutdown(socket.SHUT_WR)
    assert conn.recv(10) == b""
    conn.close()
    listener.close()


def recv_exactly_host(conn, size):
    out = b""
    while len(out) < size:
        chunk = conn.recv(size - len(out))
        assert chunk
        out += chunk
    return out


def test_peek_does_not_consume(net):
    ep, conn, listener = established_pair()
    conn.sendall(b"abcdef")
    assert wait(lambda: ep.can_recv(), ep)
    buf = bytearray(3)
    assert ep.recv_into(buf, 3, peek=True) == 3 and buf == bytearray(b"abc")
    assert recv_exactly(ep, 6) == b"abcdef"
    conn.close()
    ep.close()
    listener.close()


@pytest.mark.parametrize("profile", PROFILES)
def test_large_transfer_both_directions_with_checksum(net, profile):
    data = pattern(BIG, seed=3)
    with EchoPeer() as peer:
        ep = connect((HOST, peer.port))
        view = memoryview(data)
        got = hashlib.sha256()
        received = 0
        buf = bytearray(65536)
        deadline = events.clock() + 60
        while received < BIG:
            assert events.clock() < deadline, "transfer stalled at %d/%d" % (received, BIG)
            sending = bool(len(view))
            events.wait_until(lambda s=sending: ep.can_recv() or (s and ep.can_send()), deadline, poll=ep.progress)
            if len(view) and ep.can_send():
                n = ep.send(view[:256 * 1024])
                view = view[n or 0:]
            n = ep.recv_into(buf)
            if n:
                got.update(bytes(buf[:n]))
                received += n
            assert n != 0, "EOF too early"
        assert got.hexdigest() == hashlib.sha256(data).hexdigest()
        ep.close()


def test_send_buffer_is_bounded_in_python(net):
    ep, conn, listener = established_pair(sndbuf=16 * 1024)
    assert ep.get_option("sndbuf") == 16 * 1024
    accepted = 0
    while accepted < 10 * 1024 * 1024:  # the host stops reading: the window closes eventually
        n = ep.send(b"z" * 65536)
        if n is None:
            break
        assert n <= 16 * 1024
        accepted += n
        ep.progress()
    assert not ep.can_send()
    conn.close()
    ep.close(abort=True)
    listener.close()


# --- listening ---------------------------------------------------------------------------------
def _host_clients(port, count, payload):
    replies = {}

    def client(i):
        s = socket.create_connection((LEASE, port), timeout=DEADLINE)
        s.sendall(payload + str(i).encode("ascii"))
        s.shutdown(socket.SHUT_WR)
        replies[i] = recv_all_host(s)
        s.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    for t in threads:
        t.daemon = True
        t.start()
    return threads, replies


def recv_all_host(s):
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


@pytest.mark.parametrize("profile", PROFILES)
def test_listen_accept_host_clients_with_backlog(net, profile):
    server = tcp.TcpEndpoint()
    server.bind(("", 0))
    port = server.local_address[1]
    assert server.local_address == (LEASE, port) and port > 0  # the real port right after bind
    server.listen(3)
    threads, replies = _host_clients(port, 8, b"hello ")
    served = 0
    while served < 8:
        assert wait(server.acceptable, server), "only %d accepted" % served
        child = server.accept()
        assert child is not None and child.remote_address[0] == HOST
        assert child.local_address == (LEASE, port)
        data = recv_until_eof(child)
        assert data.startswith(b"hello ")
        send_all(child, data.upper())
        child.close()
        served += 1
    for t in threads:
        t.join(DEADLINE)
    assert sorted(replies.values()) == sorted(("HELLO %d" % i).encode("ascii") for i in range(8))
    server.close()


def test_backlog_keeps_connections_accepted_ahead(net):
    server = tcp.TcpEndpoint()
    server.bind(("", 0))
    server.listen(2)
    port = server.local_address[1]
    clients = [socket.create_connection((LEASE, port), timeout=DEADLINE) for _ in range(2)]
    assert wait(lambda: len(server._accepted) == 2, server)
    assert server.acceptable() and len(server._accept_ops) == 0  # no more Accepts outstanding
    children = [server.accept(), server.accept()]
    assert all(children) and server.accept() is None
    assert wait(lambda: len(server._accept_ops) == 2, server)
    for c in clients:
        c.close()
    for child in children:
        child.close()
    server.close()


def test_bind_clash_and_reuseaddr_restart(net):
    first = tcp.TcpEndpoint()
    first.bind(("", 0))
    port = first.local_address[1]
    first.listen(5)
    client = socket.create_connection((LEASE, port), timeout=DEADLINE)
    assert wait(first.acceptable, first)
    child = first.accept()
    child.close()  # active close: the child holds the port in FIN_WAIT/TIME_WAIT (docs/edk2.md section 3.8)
    first.close()
    assert client.recv(10) == b""
    client.close()
    again = tcp.TcpEndpoint()
    with pytest.raises(errors.error) as caught:
        again.bind((LEASE, port))
    assert caught.value.errno == errno.EADDRINUSE
    again.close()
    restarted = tcp.TcpEndpoint()
    restarted.set_option("reuseaddr", True)
    restarted.bind(("0.0.0.0", port))
    restarted.listen(5)
    client = socket.create_connection((LEASE, port), timeout=DEADLINE)
    assert wait(restarted.acceptable, restarted)
    restarted.accept().close()
    client.close()
    restarted.close()


def test_bind_to_a_foreign_address_is_refused(net):
    ep = tcp.TcpEndpoint()
    with pytest.raises(errors.error) as caught:
        ep.bind(("127.0.0.99", 0))
    assert caught.value.errno == errno.EADDRNOTAVAIL
    ep.close()


def _nagle_in_force(ep):
    """EnableNagle as EDK2 reports it for the endpoint's child (GetModeData with a ControlOption)."""
    config = ep._fam.TCP_CONFIG_DATA()
    option = ep._fam.TCP_OPTION()
    config.ControlOption = ctypes.pointer(option)
    assert ep._call("GetModeData", None, ctypes.byref(config), None, None, None) == efi.EFI_SUCCESS
    return bool(option.EnableNagle)


@pytest.mark.parametrize("then", ["connect", "listen"])
@pytest.mark.parametrize("at_bind,later", [(True, False), (False, True)])
def test_tcp_nodelay_changed_after_bind_is_in_force(net, then, at_bind, later):
    # EDK2 quirk (TcpConfigurePcb, tests/firmware/scenarios/23_tcp_options.scn on OVMF): Nagle
    # off is sticky for the life of a child, so nodelay True at bind() then False needs a new
    # child at connect()/listen(); the bound port stays the same.
    with EchoPeer() as peer:
        ep = tcp.TcpEndpoint()
        ep.set_option("nodelay", at_bind)
        ep.bind(("", 0))
        port = ep.local_address[1]
        assert _nagle_in_force(ep) == (not at_bind)
        ep.set_option("nodelay", later)
        if then == "connect":
            ep.connect_start((HOST, peer.port))
            assert wait(lambda: not ep.connecting, ep) and ep.connected
            send_all(ep, b"ping")
            assert recv_exactly(ep, 4) == b"ping"
            served = ep
        else:
            ep.listen(1)
            client = socket.create_connection((LEASE, port), timeout=DEADLINE)
            assert wait(ep.acceptable, ep)
            served = ep.accept()  # EDK2 clones the listener's TCB, flags included
            client.close()
        assert ep.local_address == (LEASE, port)
        assert _nagle_in_force(ep) == (not later)
        assert _nagle_in_force(served) == (not later)
        if served is not ep:
            served.close()
        ep.close()


# --- lifetime --------------------------------------------------------------------------------
def test_two_hundred_endpoints_leave_nothing_behind(net):
    with EchoPeer() as peer:
        for i in range(200):
            ep = connect((HOST, peer.port))
            send_all(ep, str(i).encode("ascii"))
            assert recv_some(ep)
            ep.close()
        assert tcp.close_all(timeout=15) == 0
    assert tcp.live_endpoints() == 0
    assert net.firmware.ledger()["tcp4_children"] == 0 and events.outstanding() == 0


# --- quirks and faults ---------------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_off_subnet_peer_through_the_gateway(net, profile):
    # docs/bits-efi.md section 3: the old TcpDxe children do not use the IP4 routes; bitsnet adds
    # them with Routes() after Configure, so the default route reaches 127.0.0.1 from 127.0.1.7/24.
    from bitsnet import ipconfig
    ipconfig.configure("127.0.1.7", 24, gateway="127.0.1.1")
    with EchoPeer() as peer:
        ep = connect((HOST, peer.port))
        send_all(ep, b"routed")
        assert recv_exactly(ep, 6) == b"routed"
        ep.close()


@pytest.mark.machine(faults="delay=0.05,rx_piece=700")
def test_delayed_completions_and_small_pieces(net):
    data = pattern(300000, seed=5)
    with EchoPeer() as peer:
        ep = connect((HOST, peer.port))
        thread_result = []
        send_all(ep, data)
        thread_result.append(recv_exactly(ep, len(data)))
        assert thread_result[0] == data
        ep.close()


@pytest.mark.machine(faults="tx_fail=3")
def test_transmit_out_of_resources_is_retried(net):
    with EchoPeer() as peer:
        ep = connect((HOST, peer.port))
        send_all(ep, b"retry me")
        assert recv_exactly(ep, 8) == b"retry me"
        ep.close()


def test_closing_a_listener_resets_connections_not_yet_accepted(net):
    server = tcp.TcpEndpoint()
    server.bind(("", 0))
    server.listen(5)
    client = socket.create_connection((LEASE, server.local_address[1]), timeout=DEADLINE)
    assert wait(server.acceptable, server)
    server.close()  # the child accepted ahead in Python is aborted, as Linux does
    with pytest.raises(socket.error) as caught:
        client.sendall(b"x")
        client.recv(10)
    assert caught.value.errno == errno.ECONNRESET
    client.close()
    assert tcp.live_endpoints() == 0


def test_reset_while_no_receive_is_outstanding_is_econnreset(net):
    # docs/edk2.md section 3.5: with the Python buffer full no Receive is posted, so the RST shows only as
    # ACCESS_DENIED + state Closed on the next Receive; bitsnet reports ECONNRESET after the data.
    ep, conn, listener = established_pair(rcvbuf=16 * 1024)
    data = pattern(64 * 1024, seed=9)
    conn.sendall(data)
    assert wait(lambda: len(ep._rx) >= 16 * 1024 and ep.receiver.op is None, ep)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()
    got = bytearray()
    buf = bytearray(4096)
    with pytest.raises(errors.error) as caught:
        while True:
            assert wait(ep.can_recv, ep)
            n = ep.recv_into(buf)
            assert n, "EOF instead of ECONNRESET"
            got += buf[:n]
    assert caught.value.errno == errno.ECONNRESET
    assert bytes(got) == data[:len(got)] and len(got) >= 16 * 1024
    ep.close()
    listener.close()


@pytest.mark.parametrize("net", ["check-event", "efi-hook"], indirect=True)
def test_listen_and_accept_in_the_fallback_event_modes(net):
    server = tcp.TcpEndpoint()
    server.bind(("", 0))
    server.listen(1)
    client = socket.create_connection((LEASE, server.local_address[1]), timeout=DEADLINE)
    assert wait(server.acceptable, server)
    child = server.accept()
    client.sendall(b"hi")
    assert recv_exactly(child, 2) == b"hi"
    child.close()
    assert client.recv(10) == b""
    client.close()
    server.close()
