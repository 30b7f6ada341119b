"""SOCK_DGRAM through bitsnet._socket against a real host UDP peer on loopback: sendto/recvfrom,
connect/send/recv, truncation, MSG_PEEK, timeouts, SO_BROADCAST, errors CPython would give."""

from __future__ import print_function

import errno
import struct
import socket as host

import pytest

import conftest
from bitsnet import _socket as bs
from test_socket_api import net  # noqa: F401  (the fixture)

STATION = conftest.STATION


@pytest.fixture
def peer():
    sock = host.socket(host.AF_INET, host.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    yield sock
    sock.close()


def test_sendto_and_recvfrom_keep_datagram_boundaries(net, peer):  # noqa: F811
    s = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    s.settimeout(5)
    try:
        s.sendto(b"first", peer.getsockname())
        s.sendto(b"second", peer.getsockname())
        got = [peer.recvfrom(100), peer.recvfrom(100)]
        assert [data for data, _ in got] == [b"first", b"second"]
        source = got[0][1]
        assert source == (STATION, s.getsockname()[1])
        peer.sendto(b"reply one", source)
        peer.sendto(b"reply two", source)
        assert s.recvfrom(100) == (b"reply one", peer.getsockname())
        assert s.recvfrom(100) == (b"reply two", peer.getsockname())
    finally:
        s.close()


def test_connected_send_recv_truncation_and_peek(net, peer):  # noqa: F811
    s = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    s.settimeout(5)
    try:
        s.connect(peer.getsockname())
        assert s.getpeername() == peer.getsockname()
        assert s.send(b"ping") == 4
        data, source = peer.recvfrom(100)
        assert data == b"ping"
        peer.sendto(b"0123456789", source)
        assert s.recv(4, bs.MSG_PEEK) == b"0123"  # peek leaves the datagram queued
        assert s.recv(4) == b"0123"  # the rest of the datagram is dropped, as on any OS
        peer.sendto(b"next", source)
        buf = bytearray(10)
        assert s.recv_into(buf) == 4 and bytes(buf[:4]) == b"next"
    finally:
        s.close()


def test_recv_timeout_and_nonblocking(net, peer):  # noqa: F811
    s = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    try:
        s.bind(("", 0))
        s.settimeout(0.2)
        with pytest.raises(bs.timeout):
            s.recvfrom(100)
        s.setblocking(False)
        with pytest.raises(bs.error) as info:
            s.recvfrom(100)
        assert info.value.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
    finally:
        s.close()


def test_broadcast_needs_so_broadcast_and_send_needs_a_peer(net):  # noqa: F811
    s = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    try:
        with pytest.raises(bs.error) as info:
            s.sendto(b"x", ("255.255.255.255", 9))
        assert info.value.errno == errno.EACCES
        s.setsockopt(bs.SOL_SOCKET, bs.SO_BROADCAST, 1)
        assert s.getsockopt(bs.SOL_SOCKET, bs.SO_BROADCAST) == 1
        assert s.sendto(b"x", ("255.255.255.255", 9)) == 1
        with pytest.raises(bs.error) as info:
            s.send(b"no peer")
        assert info.value.errno == errno.EDESTADDRREQ
    finally:
        s.close()


def _icmp_story(m, port):
    """What a connected and an unconnected UDP socket of module ``m`` see after sending to a
    closed port: the outcome of each call, in order."""
    import time

    def outcome(call):
        try:
            call()
            return "ok"
        except m.timeout:
            return "timeout"
        except m.error as exc:
            return errno.errorcode.get(exc.args[0], exc.args[0])
    story = []
    s = m.socket(m.AF_INET, m.SOCK_DGRAM)
    u = m.socket(m.AF_INET, m.SOCK_DGRAM)
    try:
        s.settimeout(0.5)
        s.connect(("127.0.0.1", port))
        for _ in range(3):
            story.append(outcome(lambda: s.send(b"x")))
            time.sleep(0.2)  # the ICMP port unreachable comes back meanwhile
        story.append(outcome(lambda: s.recv(10)))
        story.append(outcome(lambda: s.getsockopt(m.SOL_SOCKET, m.SO_ERROR)))
        for _ in range(2):
            story.append(outcome(lambda: u.sendto(b"x", ("127.0.0.1", port))))
            time.sleep(0.2)
    finally:
        s.close()
        u.close()
    return story


def test_icmp_port_unreachable_as_linux_gives_it(net):  # noqa: F811
    # docs/edk2.md section 4.2: EDK2 reports the ICMP error as the next Receive token's status;
    # bitsnet makes it Linux's ECONNREFUSED on the next send/recv of a connected socket, and
    # ignores it on an unconnected one (Linux without IP_RECVERR).
    closed = host.socket(host.AF_INET, host.SOCK_DGRAM)
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    ours, linux = _icmp_story(bs, port), _icmp_story(host, port)
    assert ours == linux, "bitsnet %r, Linux %r" % (ours, linux)
    assert linux[:2] == ["ok", "ECONNREFUSED"], linux


TTL_TOS_VALUES = [1, 0, 255, 256, -1, -2, 0x1ff, 3, 0xb8, 0xbb, 64]


def _ip_option_story(m, family, kind):
    """setsockopt of each value then getsockopt, for the hop limit and the traffic class."""
    if family == m.AF_INET:
        options = [(m.IPPROTO_IP, m.IP_TTL), (m.IPPROTO_IP, m.IP_TOS)]
    else:
        options = [(m.IPPROTO_IPV6, m.IPV6_UNICAST_HOPS), (m.IPPROTO_IPV6, m.IPV6_TCLASS)]
    story = []
    for level, name in options:
        s = m.socket(family, kind)
        try:
            story.append(("default", name, s.getsockopt(level, name)))
            for value in TTL_TOS_VALUES:
                try:
                    s.setsockopt(level, name, value)
                    result = "ok"
                except m.error as exc:
                    result = errno.errorcode.get(exc.args[0], exc.args[0])
                story.append((value, name, result, s.getsockopt(level, name)))
        finally:
            s.close()
    return story


@pytest.mark.parametrize("kind", ["tcp", "udp"])
@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_ttl_and_tos_options_as_linux_takes_them(net, family, kind):  # noqa: F811
    # IP_TTL/IP_TOS and IPV6_UNICAST_HOPS/IPV6_TCLASS: Linux's ranges (EINVAL for a TTL of 0 or
    # 256, -1 the default 64), IP_TOS cut to a byte, the ECN bits kept out on TCP.
    ours = _ip_option_story(bs, getattr(bs, "AF_INET" if family == "ipv4" else "AF_INET6"),
                            bs.SOCK_STREAM if kind == "tcp" else bs.SOCK_DGRAM)
    linux = _ip_option_story(host, getattr(host, "AF_INET" if family == "ipv4" else "AF_INET6"),
                             host.SOCK_STREAM if kind == "tcp" else host.SOCK_DGRAM)
    assert ours == linux


@pytest.mark.skipif(not hasattr(host.socket, "recvmsg"), reason="the peer reads the header with recvmsg (3.3+)")
def test_ttl_and_tos_reach_the_wire(net, peer):  # noqa: F811
    # EFI_UDP4_CONFIG_DATA TimeToLive/TypeOfService (docs/edk2.md section 4.2): set before the
    # first send configures the child; the peer reads them from the IP header (IP_RECVTTL/TOS).
    peer.setsockopt(host.IPPROTO_IP, getattr(host, "IP_RECVTTL", 12), 1)  # Linux's numbers
    peer.setsockopt(host.IPPROTO_IP, getattr(host, "IP_RECVTOS", 13), 1)

    def header_of_next():
        data, ancillary, _, _ = peer.recvmsg(100, 256)
        fields = {}
        for level, kind, raw in ancillary:
            fields[kind] = raw[0] if kind == host.IP_TOS else struct.unpack("i", raw[:4])[0]
        return data, fields.get(host.IP_TTL), fields.get(host.IP_TOS)
    for ttl, tos in ((None, None), (7, 0x20)):
        s = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
        try:
            if ttl is not None:
                s.setsockopt(bs.IPPROTO_IP, bs.IP_TTL, ttl)
                s.setsockopt(bs.IPPROTO_IP, bs.IP_TOS, tos)
            s.sendto(b"marked", peer.getsockname())
            assert header_of_next() == (b"marked", ttl or 64, tos or 0)
            # Changed on a configured child: Configure again with only these (EDK2 allows it).
            s.setsockopt(bs.IPPROTO_IP, bs.IP_TTL, 9)
            s.setsockopt(bs.IPPROTO_IP, bs.IP_TOS, 0x40)
            s.sendto(b"again", peer.getsockname())
            assert header_of_next() == (b"again", 9, 0x40)
        finally:
            s.close()


def test_shutdown_rd_is_the_endpoints_and_polls_as_on_the_host(net, peer):  # noqa: F811
    # Linux: shutdown of an unconnected UDP socket is ENOTCONN; after SHUT_RD a connected one
    # polls readable (and writable) though recv still waits for a datagram.
    from bitsnet import select as bselect
    import select as host_select

    def outcome(module, select_module):
        sock = module.socket(module.AF_INET, module.SOCK_DGRAM)
        try:
            sock.shutdown(module.SHUT_RD)
        except module.error as exc:
            seen = [exc.errno]
        sock.connect(("127.0.0.1", peer.getsockname()[1]))
        sock.shutdown(module.SHUT_RD)
        poller = select_module.poll()
        poller.register(sock, select_module.POLLIN | select_module.POLLOUT)
        seen.append([mask for _, mask in poller.poll(0)])
        sock.settimeout(0.1)
        with pytest.raises(module.timeout):
            sock.recv(10)
        sock.close()
        return seen

    assert outcome(bs, bselect) == outcome(host, host_select) == [errno.ENOTCONN,
                                                                  [bselect.POLLIN | bselect.POLLOUT]]
