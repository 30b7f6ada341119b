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
