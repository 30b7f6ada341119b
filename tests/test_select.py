"""bitsnet.select (select() and poll()) over bitsnet sockets, through the simulated firmware,
with host peers on loopback; and selectors' SelectSelector/PollSelector driven by it."""

from __future__ import print_function

import errno
import sys
import threading
import time

import pytest

from bitsnet import _socket as bs
from bitsnet import select as bselect
import test_socket_api
from test_socket_api import STATION, HostListener, connected_pair

net = test_socket_api.net  # the same fixture: a booted machine, bitsnet state fresh, leaks checked

PY2 = sys.version_info[0] == 2
WAIT = 0.2


def later(delay, function, *args):
    timer = threading.Timer(delay, function, args)
    timer.daemon = True
    timer.start()
    return timer


# --- arguments (no firmware) ------------------------------------------------------------------
def test_negative_timeout_is_each_versions_error():
    if PY2:
        with pytest.raises(bselect.error) as info:
            bselect.select([], [], [], -1)
        assert info.value.args[0] == errno.EINVAL
    else:
        with pytest.raises(ValueError):
            bselect.select([], [], [], -1)
    with pytest.raises(TypeError):
        bselect.select([], [], [], "soon")


def test_bad_descriptors():
    with pytest.raises(ValueError):
        bselect.select([-1], [], [], 0)
    with pytest.raises(TypeError):
        bselect.select([object()], [], [], 0)
    with pytest.raises(bselect.error) as info:
        bselect.select([bs.FIRST_FD - 1], [], [], 0)
    assert info.value.args[0] == errno.EBADF
    assert bselect.error is OSError or PY2


def test_select_works_as_a_class_attribute_and_waits_its_timeout():
    class Holder(object):
        _select = bselect.select
    start = time.time()
    assert Holder()._select([], [], [], WAIT) == ([], [], [])
    assert WAIT <= time.time() - start < WAIT + 0.3
    assert bselect.select([], [], [], 0) == ([], [], [])


# --- readiness ----------------------------------------------------------------------------------
def test_listening_socket_readable_when_a_client_waits(net):
    import socket as host
    server = bs.socket()
    server.bind(("", 0))
    server.listen(1)
    port = server.getsockname()[1]
    assert bselect.select([server], [], [], 0) == ([], [], [])
    clients = []
    later(WAIT, lambda: clients.append(host.create_connection((STATION, port), 10)))
    start = time.time()
    readable, _, _ = bselect.select([server.fileno()], [], [], 10)
    assert readable == [server.fileno()] and time.time() - start >= WAIT - 0.05
    conn, _ = server.accept()
    conn.close()
    server.close()
    for client in clients:
        client.close()


def test_connected_socket_readable_on_data_and_on_eof(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        assert bselect.select([client], [client], [client], 0) == ([], [client], [])
        later(WAIT, server.sendall, b"x")
        assert bselect.select([client], [], [], None)[0] == [client]
        assert client.recv(1) == b"x"
        assert bselect.select([client], [], [], 0)[0] == []
        server.close()
        assert bselect.select([client], [], [], 10)[0] == [client]
        assert client.recv(1) == b""
        client.close()
        with pytest.raises(ValueError):
            bselect.select([client], [], [], 0)  # fileno() is -1 once closed


# --- poll -------------------------------------------------------------------------------------------
def test_poll_register_modify_unregister_and_events(net):
    with HostListener() as listener:
        client, server = connected_pair(listener)
        poller = bselect.poll()
        poller.register(client, bselect.POLLIN)
        start = time.time()
        assert poller.poll(WAIT * 1000) == []
        assert time.time() - start >= WAIT - 0.02
        poller.modify(client.fileno(), bselect.POLLIN | bselect.POLLOUT)
        assert poller.poll(0) == [(client.fileno(), bselect.POLLOUT)]
        poller.modify(client, bselect.POLLIN)
        server.sendall(b"data")
        assert poller.poll(10000) == [(client.fileno(), bselect.POLLIN)]
        assert client.recv(4) == b"data"
        fd = client.fileno()
        client.close()
        assert poller.poll(0) == [(fd, bselect.POLLNVAL)]
        poller.unregister(fd)
        with pytest.raises(KeyError):
            poller.unregister(fd)
        with pytest.raises(bselect.error) as info:
            poller.modify(fd, bselect.POLLIN)
        assert info.value.args[0] == errno.ENOENT
        assert poller.poll(0) == []
        server.close()


def test_poll_reports_hangup_after_reset(net):
    import socket as host
    import struct
    with HostListener() as listener:
        client, server = connected_pair(listener)
        server.setsockopt(host.SOL_SOCKET, host.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()
        poller = bselect.poll()
        poller.register(client, bselect.POLLIN)
        events = dict(poller.poll(10000))
        assert events[client.fileno()] & bselect.POLLIN
        with pytest.raises(bs.error) as info:
            client.recv(1)
        assert info.value.errno == errno.ECONNRESET
        client.close()


# --- poll masks of sockets with a pending error, against the host kernel ------------------------
def _pending_error_masks(socket_module, select_module, case, peer):
    """Run ``case`` with one socket module and its select module; the poll masks seen (with
    poll's default event mask) while the error is pending, and again after SO_ERROR read it."""
    import socket as host
    import struct
    poller = select_module.poll()
    if case == "udp refused":
        sock = socket_module.socket(socket_module.AF_INET, socket_module.SOCK_DGRAM)
        sock.connect(("127.0.0.1", peer))
        sock.send(b"anyone?")  # ICMP port unreachable: ECONNREFUSED pending (docs/edk2.md section 4.2)
    elif case == "tcp refused":
        sock = socket_module.socket(socket_module.AF_INET, socket_module.SOCK_STREAM)
        sock.setblocking(False)
        assert sock.connect_ex(("127.0.0.1", peer)) in (errno.EINPROGRESS, errno.EWOULDBLOCK)
    else:  # "tcp reset": the peer aborts an established connection
        sock = socket_module.socket(socket_module.AF_INET, socket_module.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(peer.address)
        server = peer.accept()
        server.setsockopt(host.SOL_SOCKET, host.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()
    try:
        poller.register(sock, 0)  # only what poll(2) always reports: wait for POLLERR/POLLHUP
        assert poller.poll(10000), case
        time.sleep(0.1)  # anything still on its way arrives: both sides then show the same moment
        poller.modify(sock, select_module.POLLIN | select_module.POLLPRI | select_module.POLLOUT)
        masks = [poller.poll(0), poller.poll(0)]  # looking twice does not clear the error
        errno_seen = sock.getsockopt(socket_module.SOL_SOCKET, socket_module.SO_ERROR)
        masks.append(poller.poll(0))
        selected = [len(ready) for ready in select_module.select([sock], [sock], [sock], 0)]
    finally:
        sock.close()
    return [mask for ((_, mask),) in masks], errno_seen, selected


@pytest.mark.parametrize("case", ["tcp refused", "tcp reset", "udp refused"])
def test_pending_error_is_pollerr_as_on_the_host(net, case):
    # poll(2) on Linux: POLLERR while SO_ERROR is pending (tcp_poll / datagram_poll check
    # sk_err), gone once SO_ERROR was read; a dead TCP connection is also POLLIN|POLLHUP.
    import select as host_select
    import socket as host
    from peers import closed_port
    expected = {"tcp refused": errno.ECONNREFUSED, "tcp reset": errno.ECONNRESET, "udp refused": errno.ECONNREFUSED}
    results = []
    for socket_module, select_module in ((host, host_select), (bs, bselect)):
        if case == "tcp reset":
            with HostListener() as listener:
                results.append(_pending_error_masks(socket_module, select_module, case, listener))
        else:
            results.append(_pending_error_masks(socket_module, select_module, case, closed_port()))
    on_host, on_bitsnet = results
    assert on_host[1] == on_bitsnet[1] == expected[case]
    assert on_host[0][0] & bselect.POLLERR and not on_host[0][2] & bselect.POLLERR  # the host as described
    assert on_bitsnet == on_host


# --- selectors over bitsnet's select (Python 3) ---------------------------------------------------
@pytest.mark.skipif(PY2, reason="selectors is Python 3 only")
@pytest.mark.parametrize("kind", ["select", "poll"])
def test_selectors_on_bitsnet(net, kind):
    import selectors

    class BitsnetSelectSelector(selectors.SelectSelector):
        _select = bselect.select

    class BitsnetPollSelector(selectors.PollSelector):
        _selector_cls = bselect.poll
        _EVENT_READ = bselect.POLLIN
        _EVENT_WRITE = bselect.POLLOUT

    selector = BitsnetSelectSelector() if kind == "select" else BitsnetPollSelector()
    with HostListener() as listener:
        client, server = connected_pair(listener)
        client.setblocking(False)
        selector.register(client, selectors.EVENT_READ | selectors.EVENT_WRITE, "c")
        ready = selector.select(0)
        assert [(key.data, mask) for key, mask in ready] == [("c", selectors.EVENT_WRITE)]
        selector.modify(client, selectors.EVENT_READ, "c")
        assert selector.select(WAIT) == []
        server.sendall(b"hello")
        ready = selector.select(10)
        assert [(key.data, mask) for key, mask in ready] == [("c", selectors.EVENT_READ)]
        assert client.recv(5) == b"hello"
        selector.unregister(client)
        selector.close()
        client.close()
        server.close()


# --- POLLHUP: failed connects and listeners as Linux reports them --------------------------------
def _refusing(monkeypatch, call, status):
    """EDK2's TCP refusing ``call`` (Connect, Accept) with ``status`` at the call itself."""
    import efi
    from bitsnet import tcp
    real = tcp.TcpEndpoint._call

    def refuse(self, name, *args):
        return getattr(efi, status) if name == call else real(self, name, *args)
    monkeypatch.setattr(tcp.TcpEndpoint, "_call", refuse)


def _poll_now(select_module, sock):
    poller = select_module.poll()
    poller.register(sock, select_module.POLLIN | select_module.POLLOUT)
    return [mask for _, mask in poller.poll(0)]


@pytest.mark.parametrize("timeout", [None, 5.0, 0.0])
def test_a_connect_refused_at_the_call_is_pollout_pollhup_as_on_the_host(net, monkeypatch, timeout):
    # Linux: a connect() that fails at once (ENETUNREACH, to a multicast address) leaves the socket
    # in TCP_CLOSE with nothing shut down: POLLOUT|POLLHUP -- no POLLIN (before: bitsnet's Failed
    # state said POLLIN too), no POLLERR (the error was connect()'s) -- recv ENOTCONN, and a new
    # connect starts afresh. bitsnet's case: EDK2's Connect() refusing the call itself.
    import select as host_select
    import socket as host

    def outcome(module, select_module, target):
        with HostListener() as listener:
            warm = module.socket()
            warm.bind(("", 0))  # blocking: the address is there (else a non-blocking connect waits for it)
            warm.close()
            sock = module.socket()
            sock.settimeout(timeout)
            seen = [sock.connect_ex(target), _poll_now(select_module, sock),
                    sock.getsockopt(module.SOL_SOCKET, module.SO_ERROR)]
            try:
                sock.recv(1)
            except module.error as exc:
                seen.append(exc.errno)
            monkeypatch.undo()
            sock.settimeout(10)
            seen.append(sock.connect_ex(listener.address))
            listener.accept().close()
            sock.close()
        return seen

    on_host = outcome(host, host_select, ("224.0.0.1", 80))
    _refusing(monkeypatch, "Connect", "EFI_NETWORK_UNREACHABLE")
    assert outcome(bs, bselect, (STATION, 9)) == on_host == [errno.ENETUNREACH, [bselect.POLLOUT | bselect.POLLHUP],
                                                             0, errno.ENOTCONN, 0]


def test_a_listener_whose_accept_is_refused_never_polls_pollhup(net, monkeypatch):
    # Linux never reports POLLHUP on a listener (unless shut down). bitsnet reports EDK2's
    # refused Accept through accept() (the listener polls POLLIN until accept() raised it),
    # never as POLLHUP or POLLERR.
    _refusing(monkeypatch, "Accept", "EFI_OUT_OF_RESOURCES")
    server = bs.socket()
    server.bind(("", 0))
    server.listen(1)
    assert _poll_now(bselect, server) == [bselect.POLLIN]
    assert bselect.select([server], [server], [server], 0) == ([server], [], [])
    server.setblocking(False)
    with pytest.raises(bs.error) as info:
        server.accept()
    assert info.value.errno == errno.ENOBUFS
    assert _poll_now(bselect, server) == []
    server.close()


@pytest.mark.parametrize("how", ["blocking", "timeout", "non-blocking, then connect"])
def test_a_refused_connect_polls_as_on_the_host(net, how):
    # Linux: when connect() itself reports the failure (a blocking connect; the connect after a
    # non-blocking one) it disconnects the socket (tcp_disconnect): POLLOUT|POLLHUP; under a
    # timeout CPython's connect reads SO_ERROR instead, and the RST's POLLIN stays.
    import select as host_select
    import socket as host
    from peers import closed_port

    def outcome(module, select_module):
        sock = module.socket()
        target = ("127.0.0.1", closed_port())
        if how == "non-blocking, then connect":
            sock.setblocking(False)
            seen = [sock.connect_ex(target), select_module.select([], [sock], [], 10)[1] == [sock]]
        else:
            sock.settimeout(None if how == "blocking" else 10.0)
            seen = []
        seen += [sock.connect_ex(target), _poll_now(select_module, sock)]
        sock.close()
        return seen

    on_host = outcome(host, host_select)
    assert outcome(bs, bselect) == on_host
    assert on_host[-1] == [bselect.POLLOUT | bselect.POLLHUP | (bselect.POLLIN if how == "timeout" else 0)]
