"""Simulated TcpDxe, closing: graceful Close and its timers, abort, RST on unread data,
Configure(NULL) and DestroyChild flushing tokens (docs/edk2.md section 3.3 Close/Configure, section 3.6)."""

from __future__ import print_function

import errno
import socket
import threading
import time

import efi
import pytest

import efiraw
import peers
from bitsnet import efidefs

pytestmark = pytest.mark.machine(static=True)
S = efi


class _Peer(object):
    """A host listener accepting one connection; the test drives the accepted socket itself."""

    def __init__(self):
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((peers.HOST, 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.conn = None

    def accept(self):
        self.server.settimeout(5)
        self.conn, _ = self.server.accept()
        self.conn.settimeout(5)
        return self.conn

    def close(self):
        for sock in (self.conn, self.server):
            if sock is not None:
                sock.close()


@pytest.fixture
def pair(machine):
    """(established child, the host peer's socket)."""
    peer = _Peer()
    child = efiraw.connected_child(peer.port)
    conn = peer.accept()
    yield child, conn
    peer.close()


def _states_until(child, tok, timeout):
    """Poll until ``tok`` completes; (status, seconds taken, set of states seen)."""
    start = time.time()
    seen = set()
    while not tok.check() and time.time() - start < timeout:
        seen.add(child.state())
        child.poll()
        time.sleep(0.005)
    return (tok.status if tok.signalled else None), time.time() - start, seen


def test_graceful_close_first_waits_in_time_wait(pair):
    child, conn = pair
    status, tok = child.close()
    assert status == S.EFI_SUCCESS and not tok.check()
    assert conn.recv(10) == b""  # our FIN
    conn.close()  # the peer's FIN: FinWait2 -> TimeWait
    status, took, seen = _states_until(child, tok, 5)
    assert status == S.EFI_SUCCESS
    assert efidefs.Tcp4StateTimeWait in seen
    assert 1.6 <= took <= 4.0  # TIME_WAIT 2 s, in 200 ms ticks (docs/edk2.md section 3.3); loose upper bound
    assert child.state() == efidefs.Tcp4StateClosed
    status, rtok = child.receive(10)
    assert status == S.EFI_ACCESS_DENIED
    assert child.mode()[0] == S.EFI_SUCCESS  # still configured, still holding its port
    assert child.destroy() == S.EFI_SUCCESS


def test_close_after_peer_fin_goes_through_last_ack_quickly(pair):
    child, conn = pair
    conn.shutdown(socket.SHUT_WR)
    assert child.recv_all() == b""
    assert child.state() == efidefs.Tcp4StateCloseWait
    status, tok = child.close()
    assert status == S.EFI_SUCCESS
    status, took, seen = _states_until(child, tok, 5)
    assert status == S.EFI_SUCCESS and took < 1.0
    assert conn.recv(10) == b""
    assert child.destroy() == S.EFI_SUCCESS


def test_fin_wait_2_times_out_when_the_peer_never_closes(pair):
    child, conn = pair
    status, tok = child.close()
    assert conn.recv(10) == b""
    status, took, seen = _states_until(child, tok, 5)
    assert status == S.EFI_SUCCESS and efidefs.Tcp4StateFinWait2 in seen
    assert 1.6 <= took <= 4.0  # FinTimeout 2 s
    conn.sendall(b"late")  # no TCB any more: answered with RST (docs/edk2.md section 3.6)
    with pytest.raises(socket.error) as info:
        for _ in range(50):
            conn.sendall(b"x")  # fails once the RST is in
            time.sleep(0.02)
    assert info.value.errno in (errno.ECONNRESET, errno.EPIPE)
    assert child.destroy() == S.EFI_SUCCESS


def test_close_with_unread_data_resets(pair):
    child, conn = pair
    conn.sendall(b"unread")
    deadline = time.time() + 5
    while time.time() < deadline and not any(c.rx for c in _driver(child).children.values()):
        child.poll()
    status, tok = child.close()
    # EDK2 quirk (TcpDxe, docs/edk2.md section 3.3 Close): unread data turns the graceful close into an RST,
    # and the close completes at once.
    assert status == S.EFI_SUCCESS and tok.check() and tok.status == S.EFI_SUCCESS
    with pytest.raises(socket.error) as info:
        conn.recv(10)
    assert info.value.errno == errno.ECONNRESET
    assert child.destroy() == S.EFI_SUCCESS


def _driver(child):
    from efisim import machine
    return machine.current().drivers["tcp4"]


def test_abort_resets_and_completes_synchronously(pair):
    child, conn = pair
    status, rtok = child.receive(10)
    status, tok = child.close(abort=True)
    assert status == S.EFI_SUCCESS and tok.check() and tok.status == S.EFI_SUCCESS
    assert rtok.check() and rtok.status == S.EFI_ABORTED  # the other tokens: socket error or ABORTED
    assert child.state() == efidefs.Tcp4StateClosed
    with pytest.raises(socket.error) as info:
        conn.recv(10)
    assert info.value.errno == errno.ECONNRESET
    assert child.destroy() == S.EFI_SUCCESS


def test_second_close_while_closing_is_access_denied(pair):
    child, conn = pair
    status, tok = child.close()
    status, again = child.close()
    assert status == S.EFI_ACCESS_DENIED
    status, rtok = child.receive(10)
    assert status == S.EFI_ACCESS_DENIED  # no half-close after Close() (docs/edk2.md section 3.3)
    status, ttok = child.transmit(b"x")
    assert status == S.EFI_ACCESS_DENIED
    assert child.configure(None) == S.EFI_SUCCESS
    assert tok.wait(None) == S.EFI_ABORTED  # only Configure(NULL)/DestroyChild abort a close token
    assert child.destroy() == S.EFI_SUCCESS


def test_configure_null_flushes_every_token_with_aborted_and_forgets_silently(pair):
    child, conn = pair
    status, rtok = child.receive(10)
    status, rtok2 = child.receive(10)
    assert child.configure(None) == S.EFI_SUCCESS
    assert rtok.check() and rtok.status == S.EFI_ABORTED
    assert rtok2.check() and rtok2.status == S.EFI_ABORTED
    assert child.state() == efidefs.Tcp4StateClosed
    assert child.mode()[0] == S.EFI_NOT_STARTED
    assert child.configure(None) == S.EFI_ACCESS_DENIED  # unconfigured now
    # No FIN, no RST: the peer hears nothing...
    conn.settimeout(0.3)
    with pytest.raises(socket.timeout):
        conn.recv(10)
    # ...until it sends: a segment for no TCB is answered with RST (docs/edk2.md section 3.6).
    conn.settimeout(5)
    conn.sendall(b"anyone?")
    with pytest.raises(socket.error) as info:
        for _ in range(100):
            child.poll()
            conn.sendall(b"?")
            time.sleep(0.01)
    assert info.value.errno in (errno.ECONNRESET, errno.EPIPE)
    assert child.destroy() == S.EFI_SUCCESS


def test_destroy_child_flushes_tokens_and_frees_the_child(pair, machine):
    child, conn = pair
    status, rtok = child.receive(10)
    assert machine.firmware.ledger()["tcp4_tokens"] == 1
    assert child.sb.DestroyChild(efiraw.byref(child.sb), child.handle) == S.EFI_SUCCESS
    assert rtok.check() and rtok.status == S.EFI_ABORTED
    assert child.sb.DestroyChild(efiraw.byref(child.sb), child.handle) == S.EFI_UNSUPPORTED
    assert machine.firmware.ledger()["tcp4_children"] == 0
    assert machine.firmware.ledger()["tcp4_tokens"] == 0
    assert child.proto.Poll(efiraw.byref(child.proto)) == S.EFI_INVALID_PARAMETER  # not a child any more
    child.destroy()  # closes the test's events (DestroyChild itself now says UNSUPPORTED)


def test_graceful_close_sends_queued_data_before_the_fin(pair):
    child, conn = pair
    data = peers.pattern(300000, seed=9)
    status, ttok = child.transmit(data)
    status, ctok = child.close()
    assert status == S.EFI_SUCCESS
    got = []

    def read():
        buf = b""
        while True:
            more = conn.recv(65536)
            if not more:
                break
            buf += more
        got.append(buf)
    reader = threading.Thread(target=read)
    reader.daemon = True
    reader.start()
    assert ttok.wait(child) == S.EFI_SUCCESS
    reader.join(10)
    assert got == [data]
    conn.close()
    assert ctok.wait(child) == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS
