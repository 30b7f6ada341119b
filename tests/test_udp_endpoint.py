"""bitsnet.udp.UdpEndpoint through the simulator, against real UDP peers on the host's loopback.

Unbound/bound (ephemeral port, echo both ways, boundaries and truncation, sizes), connected
(peer filter, ICMP port unreachable -> ECONNREFUSED, disconnect), broadcast (SO_BROADCAST),
SO_REUSEADDR, the bounded receive queue, and lifetime (recycled buffers, zero ledger).
"""

from __future__ import print_function

import errno
import socket
import threading

import pytest

import conftest
from bitsnet import errors, udp
from helpers import HOST, MODES, PROFILES, wait
from peers import closed_port

pytest_plugins = ["helpers"]  # the ``net`` fixture

LEASE = conftest.STATION
WIRE_BROADCAST = "127.255.255.255"  # the loopback LAN's broadcast address (/8)


class UdpEcho(object):
    """A host UDP echo server in a thread; ``received`` lists what came in."""

    def __init__(self, bind_host=HOST):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.sock.bind((bind_host, 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.received = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve)
        self.thread.daemon = True
        self.thread.start()

    def _serve(self):
        while not self._stop:
            try:
                data, peer = self.sock.recvfrom(70000)
            except socket.timeout:
                continue
            except (OSError, IOError):
                return
            self.received.append((data, peer))
            try:
                self.sock.sendto(data, peer)
            except (OSError, IOError):
                pass

    def close(self):
        self._stop = True
        self.thread.join(5)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def host_socket(bind=(HOST, 0)):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(bind)
    sock.settimeout(10)
    return sock


def recv_datagram(ep, size=70000, timeout=10):
    assert wait(ep.can_recv, ep, timeout), "no datagram"
    return ep.recvfrom(size)


# --- bound, unconnected -------------------------------------------------------------------------
@pytest.mark.parametrize("net", MODES, indirect=True)
def test_echo_round_trip_in_every_event_mode(net):
    with UdpEcho() as peer:
        ep = udp.UdpEndpoint()
        ep.bind(("", 0))
        assert ep.local_address[0] == "0.0.0.0" and ep.local_address[1] >= 1024
        assert ep.sendto(b"ping", (HOST, peer.port)) == 4
        assert recv_datagram(ep) == (b"ping", (HOST, peer.port))
        assert peer.received[0][1] == (LEASE, ep.local_address[1])
        ep.close()
        assert ep.closed and udp.live_endpoints() == 0


@pytest.mark.parametrize("profile", PROFILES)
def test_sendto_binds_implicitly_and_keeps_datagram_boundaries(net, profile):
    host = host_socket()
    ep = udp.UdpEndpoint()
    assert ep.local_address is None
    ep.sendto(b"hello", host.getsockname())
    data, source = host.recvfrom(100)
    assert data == b"hello" and source[0] == LEASE and source == (LEASE, ep.local_address[1])
    for payload in (b"one", b"two-two", b"three-three-three"):
        host.sendto(payload, source)
    got = [recv_datagram(ep)[0] for _ in range(3)]
    assert got == [b"one", b"two-two", b"three-three-three"]
    assert not ep.can_recv() and ep.recvfrom(100) is None  # would block
    ep.close()
    host.close()


def test_truncation_peek_and_recvfrom_into(net):
    host = host_socket()
    ep = udp.UdpEndpoint()
    ep.bind((LEASE, 0))
    for payload in (b"0123456789", b"abcdef"):
        host.sendto(payload, ep.local_address)
    assert wait(lambda: ep.pending() == 2, ep)
    assert ep.recvfrom(4, peek=True) == (b"0123", host.getsockname())
    assert ep.recvfrom(4) == (b"0123", host.getsockname())  # the rest of the datagram is gone
    buf = bytearray(3)
    assert ep.recvfrom_into(buf) == (3, host.getsockname()) and bytes(buf) == b"abc"
    assert ep.recvfrom(100) is None
    ep.close()
    host.close()


def test_largest_datagram_round_trip_and_the_limits(net):
    with UdpEcho() as peer:
        ep = udp.UdpEndpoint()
        big = bytes(bytearray(i & 0xFF for i in range(udp.MAX_DATAGRAM)))
        assert ep.sendto(big, (HOST, peer.port)) == udp.MAX_DATAGRAM
        assert recv_datagram(ep) == (big, (HOST, peer.port))
        with pytest.raises(errors.error) as caught:
            ep.sendto(big + b"x", (HOST, peer.port))
        assert caught.value.errno == errno.EMSGSIZE
        # EDK2 quirk (Udp4Dxe, docs/edk2.md section 4.2): a zero-length datagram cannot be sent at all.
        with pytest.raises(errors.error) as caught:
            ep.sendto(b"", (HOST, peer.port))
        assert caught.value.errno == errno.EINVAL and "zero-length" in str(caught.value)
        ep.close()


def test_unconnected_send_needs_an_address_and_bad_addresses_fail(net):
    ep = udp.UdpEndpoint()
    with pytest.raises(errors.error) as caught:
        ep.send(b"x")
    assert caught.value.errno == errno.EDESTADDRREQ
    with pytest.raises(errors.error) as caught:
        ep.bind(("127.0.0.99", 0))
    assert caught.value.errno == errno.EADDRNOTAVAIL
    ep.close()
    with pytest.raises(errors.error) as caught:
        ep.sendto(b"x", (HOST, 9))
    assert caught.value.errno == errno.EBADF


def test_icmp_port_unreachable_is_ignored_when_unconnected(net):
    ep = udp.UdpEndpoint()
    ep.sendto(b"anyone?", (HOST, closed_port()))
    wait(lambda: False, ep, 0.3)
    assert ep.take_error() == 0 and not ep.can_recv()
    ep.close()


# --- connected ----------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_connected_endpoint_talks_to_its_peer_only(net, profile):
    peer, other = host_socket(), host_socket()
    ep = udp.UdpEndpoint()
    ep.bind(("", 0))
    port = ep.local_address[1]
    ep.connect(peer.getsockname())
    assert ep.remote_address == peer.getsockname() and ep.local_address[1] == port  # same port kept
    assert ep.send(b"to peer") == 7
    assert peer.recvfrom(100) == (b"to peer", (LEASE, port))
    other.sendto(b"from a stranger", (LEASE, port))
    peer.sendto(b"from the peer", (LEASE, port))
    assert recv_datagram(ep) == (b"from the peer", peer.getsockname())
    wait(lambda: False, ep, 0.2)
    assert not ep.can_recv()
    ep.disconnect()
    assert ep.remote_address is None and ep.local_address[1] == port
    other.sendto(b"now welcome", (LEASE, port))
    assert recv_datagram(ep) == (b"now welcome", other.getsockname())
    ep.close()
    peer.close()
    other.close()


def test_connected_to_a_closed_port_gets_econnrefused_once(net):
    # docs/edk2.md section 4.2: the ICMP error completes the Receive token with EFI_PORT_UNREACHABLE.
    ep = udp.UdpEndpoint()
    ep.connect((HOST, closed_port()))
    ep.send(b"hello?")
    assert wait(ep.can_recv, ep)
    with pytest.raises(errors.error) as caught:
        ep.recvfrom(100)
    assert caught.value.errno == errno.ECONNREFUSED
    assert ep.recvfrom(100) is None  # reported once
    ep.send(b"again")
    assert wait(ep.can_recv, ep)
    assert ep.take_error() == errno.ECONNREFUSED and ep.take_error() == 0
    ep.close()


# --- broadcast, SO_REUSEADDR, bounds ------------------------------------------------------------
def test_broadcast_needs_so_broadcast_then_reaches_the_wire(net):
    listener = host_socket(("", 0))  # a host peer on 0.0.0.0 hears the loopback LAN's broadcasts
    port = listener.getsockname()[1]
    ep = udp.UdpEndpoint()
    for address in ("255.255.255.255", WIRE_BROADCAST):
        with pytest.raises(errors.error) as caught:
            ep.sendto(b"hi all", (address, port))
        assert caught.value.errno == errno.EACCES
    ep.set_option("broadcast", True)
    assert ep.get_option("broadcast") is True
    ep.sendto(b"limited", ("255.255.255.255", port))
    ep.sendto(b"directed", (WIRE_BROADCAST, port))
    got = sorted([listener.recvfrom(100)[0], listener.recvfrom(100)[0]])
    assert got == [b"directed", b"limited"]
    ep.close()
    listener.close()


def test_datagrams_to_the_broadcast_address_are_received(net):
    ep = udp.UdpEndpoint()
    ep.bind(("", conftest.port(4)))  # this test process's own port: the wire's broadcasts reach every process
    sender = host_socket()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sender.sendto(b"everyone", (WIRE_BROADCAST, ep.local_address[1]))
    assert recv_datagram(ep) == (b"everyone", sender.getsockname())
    ep.close()
    sender.close()


def test_reuseaddr_shares_a_port_and_each_endpoint_gets_a_copy(net):
    first = udp.UdpEndpoint()
    first.bind((LEASE, 0))
    port = first.local_address[1]
    clash = udp.UdpEndpoint()
    with pytest.raises(errors.error) as caught:
        clash.bind((LEASE, port))
    assert caught.value.errno == errno.EADDRINUSE
    clash.close()
    first.close()
    a, b = udp.UdpEndpoint(), udp.UdpEndpoint()
    for ep in (a, b):
        ep.set_option("reuseaddr", True)
        ep.bind((LEASE, port))
    host = host_socket()
    host.sendto(b"copy", (LEASE, port))
    assert recv_datagram(a)[0] == b"copy" and recv_datagram(b)[0] == b"copy"
    a.close()
    b.close()
    host.close()


def test_receive_queue_is_bounded_and_drops_are_counted(net):
    ep = udp.UdpEndpoint()
    ep.bind((LEASE, 0))
    host = host_socket()
    total = udp.RX_MAX_DATAGRAMS + 50
    for i in range(total):
        host.sendto(b"%05d" % i, ep.local_address)
        if i % 50 == 49:  # in batches: the simulator's host socket buffer is finite too
            assert wait(lambda: ep.pending() + ep.dropped >= i + 1, ep)
    assert wait(lambda: ep.pending() + ep.dropped >= total, ep)
    assert ep.pending() == udp.RX_MAX_DATAGRAMS and ep.dropped == total - udp.RX_MAX_DATAGRAMS
    assert ep.recvfrom(10)[0] == b"00000"  # the oldest are kept
    ep.set_option("rcvbuf", 10)  # a byte bound too: the next datagram is dropped
    while ep.recvfrom(10) is not None:
        pass
    dropped = ep.dropped
    host.sendto(b"0123456789ab", ep.local_address)
    host.sendto(b"next", ep.local_address)
    # both seen: the first kept, "next" dropped (and its RxData recycled) -- on a loaded host
    # "next" can arrive well after the first is queued
    assert wait(lambda: ep.pending() == 1 and ep.dropped == dropped + 1, ep)
    assert ep.recvfrom(100)[0] == b"0123456789ab"
    assert net.firmware.ledger().get("udp4_unrecycled", 0) == 0  # every RxData was recycled
    ep.close()
    host.close()


def test_close_with_datagrams_waiting_leaves_nothing_behind(net):
    ep = udp.UdpEndpoint()
    ep.bind((LEASE, 0))
    host = host_socket()
    for _ in range(5):
        host.sendto(b"unread", ep.local_address)
    wait(lambda: ep.pending() >= 2, ep)
    ep.close()
    assert udp.live_endpoints() == 0
    host.close()
