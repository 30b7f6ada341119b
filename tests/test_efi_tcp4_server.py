"""Simulated TcpDxe, passive side: listeners, Accept, backlog, ports (docs/edk2.md sections 3.3, 3.8)."""

from __future__ import print_function

import socket
import threading
import time

import efi
import pytest

import conftest
import efiraw
import peers
from bitsnet import efidefs

pytestmark = pytest.mark.machine(static=True)
S = efi
STATION = efiraw.STATION


def _client(port, send=b"", expect=0):
    """A host client thread: connect, send, read ``expect`` bytes; .join() -> the bytes."""
    box = {}

    def run():
        try:
            conn = socket.create_connection((STATION, port), timeout=10)
            conn.sendall(send)
            data = b""
            while len(data) < expect:
                more = conn.recv(65536)
                if not more:
                    break
                data += more
            box["data"] = data
            conn.close()
        except Exception as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.daemon = True
    thread.start()

    def join():
        thread.join(15)
        if "error" in box:
            raise box["error"]
        return box.get("data")
    return join


def _pending(machine, listener):
    tcp4 = machine.drivers["tcp4"]
    return tcp4.children.get(listener.handle).pending


def _poll_until(child, predicate, timeout=5.0):
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            return False
        child.poll()
    return True


def test_passive_open_accepts_a_host_client(machine):
    listener, port = efiraw.listening_child()
    assert listener.state() == efidefs.Tcp4StateListen
    status, ltok = listener.accept()
    assert status == S.EFI_SUCCESS and not ltok.check()
    join = _client(port, send=b"ping", expect=4)
    assert ltok.wait(listener) == S.EFI_SUCCESS
    child = efiraw.Tcp4(handle=ltok.token.NewChildHandle)
    assert child.state() == efidefs.Tcp4StateEstablished
    status, cfg = child.mode()
    assert status == S.EFI_SUCCESS
    assert cfg.AccessPoint.StationPort == port  # shares the listener's port
    assert cfg.AccessPoint.ActiveFlag  # reported as state != Listen
    assert efidefs.ipv4_text(cfg.AccessPoint.RemoteAddress) == "127.0.0.1"
    status, rtok = child.receive(4)
    assert rtok.wait(child) == S.EFI_SUCCESS and efiraw.received(rtok) == b"ping"
    child.send_all(b"pong")
    assert join() == b"pong"
    assert machine.firmware.ledger()["tcp4_children"] == 2  # the accepted child is the application's
    assert child.destroy() == S.EFI_SUCCESS
    assert listener.destroy() == S.EFI_SUCCESS


def test_accept_completes_synchronously_with_a_parked_child(machine):
    listener, port = efiraw.listening_child()
    join = _client(port, send=b"hello", expect=0)
    assert _poll_until(listener, lambda: len(_pending(machine, listener)) == 1)
    status, ltok = listener.accept()
    assert status == S.EFI_SUCCESS
    assert ltok.check() and ltok.status == S.EFI_SUCCESS  # signalled before Accept returned
    child = efiraw.Tcp4(handle=ltok.token.NewChildHandle)
    assert child.recv_all() == b"hello"  # data that arrived before the Accept was kept
    join()
    assert child.destroy() == S.EFI_SUCCESS and listener.destroy() == S.EFI_SUCCESS


def test_accept_tokens_are_fifo_one_connection_each(machine):
    listener, port = efiraw.listening_child()
    tokens = [listener.accept()[1] for _ in range(3)]
    joins = [_client(port, send=b"x") for _ in range(2)]
    assert tokens[0].wait(listener) == S.EFI_SUCCESS
    assert tokens[1].wait(listener) == S.EFI_SUCCESS
    assert tokens[2].wait(listener, timeout=0.3) is None  # no third connection
    handles = [t.token.NewChildHandle for t in tokens[:2]]
    assert handles[0] != handles[1]
    for join in joins:
        join()
    for handle in handles:
        assert efiraw.Tcp4(handle=handle).destroy() == S.EFI_SUCCESS
    assert listener.configure(None) == S.EFI_SUCCESS
    assert tokens[2].wait(listener) == S.EFI_ABORTED
    assert listener.destroy() == S.EFI_SUCCESS


def test_backlog_full_drops_the_syn(machine):
    backlog = 5  # MaxSynBackLog's lowest accepted value
    listener, port = efiraw.listening_child(option=efiraw.default_option(MaxSynBackLog=backlog))
    conns = []
    for _ in range(backlog + 2):
        conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        conn.setblocking(False)
        conn.connect_ex((STATION, port))  # the host's own backlog may hold some SYNs back
        conns.append(conn)
    try:
        for _ in range(200):
            listener.poll()
        # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Accept): with `backlog` unaccepted children the SYN is
        # silently dropped -- the further connections never reach the EFI side.
        assert len(_pending(machine, listener)) == backlog
        status, ltok = listener.accept()
        assert ltok.check() and ltok.status == S.EFI_SUCCESS
        assert _poll_until(listener, lambda: len(_pending(machine, listener)) == backlog)
        assert efiraw.Tcp4(handle=ltok.token.NewChildHandle).destroy() == S.EFI_SUCCESS
    finally:
        for conn in conns:
            conn.close()
    assert listener.configure(None) == S.EFI_SUCCESS  # destroys the pending children
    assert not _pending(machine, listener)
    assert machine.firmware.ledger()["tcp4_children"] == 1
    assert listener.destroy() == S.EFI_SUCCESS
    assert not machine.drivers["tcp4"].children


def test_accept_checks(machine):
    child = efiraw.Tcp4()
    status, tok = child.accept()
    assert status == S.EFI_NOT_STARTED
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=80)) == S.EFI_SUCCESS
    status, tok = child.accept()
    assert status == S.EFI_ACCESS_DENIED  # not listening
    listener, _ = efiraw.listening_child()
    status, first = listener.accept()
    status, second = listener.accept(efiraw.Token(efidefs.EFI_TCP4_LISTEN_TOKEN, event=first.event))
    assert status == S.EFI_ACCESS_DENIED  # duplicate event
    assert listener.configure(None) == S.EFI_SUCCESS
    assert first.wait(None) == S.EFI_ABORTED  # Configure(NULL) flushed it
    assert child.destroy() == S.EFI_SUCCESS and listener.destroy() == S.EFI_SUCCESS


def test_explicit_port_clash_is_invalid_parameter(machine):
    listener, port = efiraw.listening_child()
    other = efiraw.Tcp4()
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.8): a clash is EFI_INVALID_PARAMETER, not EFI_ACCESS_DENIED.
    assert other.configure(efiraw.config_data(port=port, active=False)) == S.EFI_INVALID_PARAMETER
    assert other.configure(efiraw.config_data(port=port, remote=peers.HOST, rport=80)) == S.EFI_INVALID_PARAMETER
    # Matching is by exact address: another station address on the same port is fine.
    assert other.configure(efiraw.config_data(station="127.0.0.3", port=port, active=False)) == S.EFI_SUCCESS
    assert other.configure(None) == S.EFI_SUCCESS
    # An accepted child holds the port after its listener is gone.
    status, ltok = listener.accept()
    join = _client(port)
    assert ltok.wait(listener) == S.EFI_SUCCESS
    accepted = efiraw.Tcp4(handle=ltok.token.NewChildHandle)
    join()
    assert listener.configure(None) == S.EFI_SUCCESS
    assert other.configure(efiraw.config_data(port=port, active=False)) == S.EFI_INVALID_PARAMETER
    assert accepted.destroy() == S.EFI_SUCCESS
    assert other.configure(efiraw.config_data(port=port, active=False)) == S.EFI_SUCCESS
    assert other.destroy() == S.EFI_SUCCESS and listener.destroy() == S.EFI_SUCCESS


def test_closed_but_configured_child_keeps_its_port(machine):
    child, port = efiraw.Tcp4(), conftest.port(2)
    assert child.configure(efiraw.config_data(port=port, remote=peers.HOST, rport=peers.closed_port())) \
        == S.EFI_SUCCESS
    status, tok = child.connect()
    assert tok.wait(child) == S.EFI_CONNECTION_RESET
    other = efiraw.Tcp4()
    assert other.configure(efiraw.config_data(port=port, active=False)) == S.EFI_INVALID_PARAMETER
    assert child.destroy() == S.EFI_SUCCESS
    assert other.configure(efiraw.config_data(port=port, active=False)) == S.EFI_SUCCESS
    assert other.destroy() == S.EFI_SUCCESS


def test_pending_child_reset_before_accept_disappears(machine):
    listener, port = efiraw.listening_child()
    conn = socket.create_connection((STATION, port), timeout=5)
    assert _poll_until(listener, lambda: len(_pending(machine, listener)) == 1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    conn.close()  # RST
    # Facts 3.3 Accept: children that die before being accepted are destroyed automatically.
    assert _poll_until(listener, lambda: not _pending(machine, listener))
    assert len(machine.drivers["tcp4"].children) == 1
    assert listener.destroy() == S.EFI_SUCCESS
