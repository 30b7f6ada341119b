"""Simulated TcpDxe, active side: Connect, Transmit, Receive against real peers on loopback.

Raw EFI only (efi + efidefs through tests/efiraw.py), as a BITS script would call it; the
statuses asserted are the call-time and completion-time ones of docs/edk2.md section 3.3.
"""

from __future__ import print_function

import errno
import socket
import time

import efi
import pytest

import efiraw
import peers
from bitsnet import efidefs

pytestmark = pytest.mark.machine(static=True)
S = efi


@pytest.fixture(params=["edk2", "edk2-2015"])
def profile(request):
    """Both firmware profiles: a machine booted with ``firmware`` = the parameter."""
    request.applymarker(pytest.mark.machine(static=True, firmware=request.param))
    return request.getfixturevalue("machine")


def test_active_open_http_get(profile, tmpdir):
    body = peers.pattern(100000)
    with peers.HttpPeer(tmpdir, {"blob": body}) as peer:
        child = efiraw.connected_child(peer.port)
        assert child.state() == efidefs.Tcp4StateEstablished
        child.send_all(b"GET /blob HTTP/1.0\r\nHost: x\r\n\r\n")
        reply = child.recv_all()
        assert reply.startswith(b"HTTP/1.0 200")
        assert reply.endswith(body)
        assert child.state() == efidefs.Tcp4StateCloseWait  # the server closed first
        status, tok = child.close()
        assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_SUCCESS
        assert child.state() == efidefs.Tcp4StateClosed
        assert child.destroy() == S.EFI_SUCCESS


def test_connect_to_closed_port_completes_with_connection_reset(machine):
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Connect / 3.6): RST to our SYN is EFI_CONNECTION_RESET.
    child = efiraw.Tcp4()
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=peers.closed_port())) == S.EFI_SUCCESS
    status, tok = child.connect()
    assert status == S.EFI_SUCCESS  # never synchronous
    assert tok.wait(child) == S.EFI_CONNECTION_RESET
    assert child.state() == efidefs.Tcp4StateClosed
    status, rx = child.receive(10)
    assert status == S.EFI_ACCESS_DENIED  # docs/edk2.md section 3.5: after RST, I/O is refused at call time
    assert child.destroy() == S.EFI_SUCCESS


def test_connect_can_be_retried_on_the_same_child(machine):
    child = efiraw.Tcp4()
    port = peers.closed_port()
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=port)) == S.EFI_SUCCESS
    status, tok = child.connect()
    assert tok.wait(child) == S.EFI_CONNECTION_RESET
    status, tok = child.connect()  # docs/edk2.md section 3.3: Closed and still configured active -> allowed again
    assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_CONNECTION_RESET
    assert child.destroy() == S.EFI_SUCCESS


def test_connect_checks(machine):
    child = efiraw.Tcp4()
    status, tok = child.connect()
    assert status == S.EFI_NOT_STARTED
    passive, _ = efiraw.listening_child()
    status, tok = passive.connect()
    assert status == S.EFI_ACCESS_DENIED  # not (closed && active)
    with peers.EchoPeer() as peer:
        assert child.configure(efiraw.config_data(remote=peers.HOST, rport=peer.port)) == S.EFI_SUCCESS
        status, tok = child.connect()
        assert status == S.EFI_SUCCESS
        status, again = child.connect()
        assert status == S.EFI_ACCESS_DENIED  # already SynSent/Established
        assert tok.wait(child) == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS
    assert passive.destroy() == S.EFI_SUCCESS


def test_echo_with_fragments_and_transmit_queued_while_connecting(machine):
    data = peers.pattern(50000, seed=3)
    with peers.EchoPeer() as peer:
        child = efiraw.Tcp4()
        assert child.configure(efiraw.config_data(remote=peers.HOST, rport=peer.port)) == S.EFI_SUCCESS
        status, ctok = child.connect()
        assert status == S.EFI_SUCCESS
        # Facts 3.3 Transmit: allowed while connecting; queued and sent once established.
        status, ttok = child.transmit(data, fragments=3)
        assert status == S.EFI_SUCCESS
        assert ctok.wait(child) == S.EFI_SUCCESS
        assert ttok.wait(child) == S.EFI_SUCCESS
        echoed = b""
        while len(echoed) < len(data):
            status, rtok = child.receive(8192, fragments=2)
            assert status == S.EFI_SUCCESS
            assert rtok.wait(child) == S.EFI_SUCCESS
            echoed += efiraw.received(rtok)
        assert echoed == data
        assert child.destroy() == S.EFI_SUCCESS


def _recv_or_reset(conn):
    try:
        return conn.recv(100)
    except socket.error as exc:
        return exc.errno


def test_receive_partial_synchronous_and_lengths_rewritten(machine):
    data = peers.pattern(1000, seed=5)
    peer = peers.OneShotPeer(lambda conn: (conn.sendall(data), _recv_or_reset(conn))[1])
    child = efiraw.connected_child(peer.port)
    tcp4 = machine.drivers["tcp4"]
    deadline = time.time() + 5
    while time.time() < deadline and sum(len(c.rx) for c in tcp4.children.values()) < len(data):
        child.poll()  # frames enter the receive buffer even with no Receive posted
    # Buffered data: the token is completed, partially, before Receive returns (docs/edk2.md section 3.3).
    status, tok = child.receive(100)
    assert status == S.EFI_SUCCESS
    assert tok.check() and tok.status == S.EFI_SUCCESS
    assert tok.packet.DataLength == 100 and efiraw.received(tok) == data[:100]
    status, tok = child.receive(1200, fragments=2)  # two fragments of 600
    assert status == S.EFI_SUCCESS and tok.check()
    assert tok.packet.DataLength == 900
    assert tok.packet.FragmentTable[0].FragmentLength == 600
    assert tok.packet.FragmentTable[1].FragmentLength == 300  # rewritten: the bytes written into it
    assert efiraw.received(tok) == data[100:]
    status, tok = child.receive(100)
    assert status == S.EFI_SUCCESS and not tok.check()  # nothing buffered: queued
    abort_status, ctok = child.close(abort=True)
    assert abort_status == S.EFI_SUCCESS and ctok.check()  # abort completes synchronously
    assert tok.wait(child) == S.EFI_ABORTED
    assert child.destroy() == S.EFI_SUCCESS
    assert peer.join() == errno.ECONNRESET  # the abort sent RST


def test_peer_fin_token_status_then_function_result(machine):
    peer = peers.OneShotPeer(lambda conn: (conn.sendall(b"bye"), conn.shutdown(socket.SHUT_WR), conn.recv(100))[2])
    child = efiraw.connected_child(peer.port)
    status, first = child.receive(3)
    status, second = child.receive(3)  # pending when the FIN arrives
    assert first.wait(child) == S.EFI_SUCCESS and efiraw.received(first) == b"bye"
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Receive): pending tokens complete with EFI_CONNECTION_FIN...
    assert second.wait(child) == S.EFI_CONNECTION_FIN
    assert child.state() == efidefs.Tcp4StateCloseWait
    # ...and afterwards Receive() *returns* EFI_CONNECTION_FIN itself, signalling nothing.
    status, third = child.receive(3)
    assert status == S.EFI_CONNECTION_FIN
    assert not third.check()
    child.send_all(b"half-open still sends")  # CloseWait: Transmit allowed
    assert peer.join() == b"half-open still sends"
    assert child.destroy() == S.EFI_SUCCESS


def _reset(conn):
    conn.recv(1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def test_peer_rst_completes_pending_tokens_with_connection_reset(machine):
    peer = peers.OneShotPeer(_reset)
    child = efiraw.connected_child(peer.port)
    status, rtok = child.receive(100)
    assert status == S.EFI_SUCCESS
    child.send_all(b"x")
    peer.join()
    assert rtok.wait(child) == S.EFI_CONNECTION_RESET
    assert child.state() == efidefs.Tcp4StateClosed
    status, _ = child.transmit(b"more")
    assert status == S.EFI_ACCESS_DENIED
    assert child.destroy() == S.EFI_SUCCESS


def test_io_parameter_and_state_checks(machine):
    child = efiraw.Tcp4()
    status, tok = child.receive(10)
    assert status == S.EFI_NOT_STARTED
    status, tok = child.transmit(b"abc")
    assert status == S.EFI_NOT_STARTED
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=80)) == S.EFI_SUCCESS
    status, tok = child.receive(10)
    assert status == S.EFI_ACCESS_DENIED  # configured, not connected
    status, tok = child.transmit(b"abc")
    assert status == S.EFI_ACCESS_DENIED
    # Parameter checks come before the state checks.
    tok = efiraw.io_token(data=b"abc", rx=False)
    child.tokens.append(tok)
    tok.packet.DataLength = 4  # != sum of FragmentLength
    assert child.proto.Transmit(efiraw.byref(child.proto), tok.ref()) == S.EFI_INVALID_PARAMETER
    tok.packet.DataLength = 0
    assert child.proto.Transmit(efiraw.byref(child.proto), tok.ref()) == S.EFI_INVALID_PARAMETER
    tok = efiraw.io_token(size=10)
    child.tokens.append(tok)
    tok.packet.FragmentCount = 0
    assert child.proto.Receive(efiraw.byref(child.proto), tok.ref()) == S.EFI_INVALID_PARAMETER
    assert child.proto.Receive(efiraw.byref(child.proto), None) == S.EFI_INVALID_PARAMETER
    assert child.destroy() == S.EFI_SUCCESS


def test_same_event_on_two_pending_tokens_is_access_denied(machine):
    with peers.EchoPeer() as peer:
        child = efiraw.connected_child(peer.port)
        status, first = child.receive(10)
        assert status == S.EFI_SUCCESS
        status, second = child.receive(10, event=first.event)
        assert status == S.EFI_ACCESS_DENIED
        status, tok = child.close(abort=True)
        assert first.wait(child) == S.EFI_ABORTED
        assert child.destroy() == S.EFI_SUCCESS


def test_get_mode_data(machine):
    child = efiraw.Tcp4()
    assert child.state() == efidefs.Tcp4StateClosed  # State alone: any time
    status, cfg = child.mode()
    assert status == S.EFI_NOT_STARTED  # ConfigData of an unconfigured child
    option = efidefs.EFI_TCP4_OPTION()
    cfgin = efiraw.config_data(remote=peers.HOST, rport=8080,
                               option=efiraw.default_option(ReceiveBufferSize=1, MaxSynBackLog=7))
    assert child.configure(cfgin) == S.EFI_SUCCESS
    status, cfg = child.mode(option)
    assert status == S.EFI_SUCCESS
    ap = cfg.AccessPoint
    assert efidefs.ipv4_text(ap.StationAddress) == efiraw.STATION and efidefs.ipv4_text(ap.SubnetMask) == "255.0.0.0"
    assert 1025 <= ap.StationPort <= 2048  # docs/edk2.md section 3.8: ephemeral counter starts in 1024..2047
    assert efidefs.ipv4_text(ap.RemoteAddress) == peers.HOST and ap.RemotePort == 8080 and ap.ActiveFlag
    assert cfg.TimeToLive == 64
    assert option.ReceiveBufferSize == 2 * 1024 * 1024  # out of range -> default (docs/edk2.md section 3.9)
    assert option.MaxSynBackLog == 7 and option.ConnectionTimeout == 75
    assert not option.EnableSelectiveAck and not option.EnablePathMtuDiscovery
    ip4 = efidefs.EFI_IP4_MODE_DATA()
    snp = efidefs.EFI_SIMPLE_NETWORK_MODE()
    mnp = efidefs.EFI_MANAGED_NETWORK_CONFIG_DATA()
    assert child.proto.GetModeData(efiraw.byref(child.proto), None, None, efiraw.byref(ip4), efiraw.byref(mnp),
                                   efiraw.byref(snp)) == S.EFI_SUCCESS
    assert ip4.IsStarted and ip4.IsConfigured and ip4.RouteCount >= 1
    assert efidefs.ipv4_text(ip4.ConfigData.StationAddress) == efiraw.STATION
    assert bytes(bytearray(snp.CurrentAddress.Addr[:6])) == machine.nic.mac and snp.MediaPresent
    assert mnp.ProtocolTypeFilter == 0x0800
    assert child.destroy() == S.EFI_SUCCESS


def test_ephemeral_ports_are_sequential(machine):
    first, second = efiraw.Tcp4(), efiraw.Tcp4()
    ports = []
    for child in (first, second):
        assert child.configure(efiraw.config_data(remote=peers.HOST, rport=80)) == S.EFI_SUCCESS
        ports.append(child.mode()[1].AccessPoint.StationPort)
    assert ports[1] == ports[0] + 1  # a driver-global counter, pre-incremented (docs/edk2.md section 3.8)
    assert first.configure(None) == S.EFI_SUCCESS
    assert first.configure(efiraw.config_data(remote=peers.HOST, rport=80)) == S.EFI_SUCCESS
    assert first.mode()[1].AccessPoint.StationPort == ports[1] + 1  # not reused: the counter moves on
    assert first.destroy() == S.EFI_SUCCESS and second.destroy() == S.EFI_SUCCESS


def test_transmit_reads_the_buffer_when_segmenting_not_at_call_time(machine):
    # Facts 3.3 Transmit: zero-copy. Data queued while connecting is read when it is sent, so a
    # change made after Transmit returned (which the spec forbids) is what goes on the wire.
    peer = peers.OneShotPeer(lambda conn: conn.recv(100))
    child = efiraw.Tcp4()
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=peer.port)) == S.EFI_SUCCESS
    status, ctok = child.connect()
    status, ttok = child.transmit(b"before")
    assert status == S.EFI_SUCCESS
    efiraw.ctypes.memmove(ttok.buffers[0], b"AFTER!", 6)
    assert ctok.wait(child) == S.EFI_SUCCESS and ttok.wait(child) == S.EFI_SUCCESS
    assert peer.join() == b"AFTER!"
    assert child.destroy() == S.EFI_SUCCESS
