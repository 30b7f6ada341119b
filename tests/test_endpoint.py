"""bitsnet.endpoint: the declared interface, and that each endpoint kind provides it."""

import pytest

from bitsnet import endpoint, tcp, udp

# What a datagram endpoint has no use for: the socket layer never asks it of one.
STREAM_ONLY = ("listen", "accept", "connect_start", "recv", "recv_into")


def _members(cls):
    return sorted(name for name in vars(cls) if not name.startswith("_"))


def _owner(cls, name):
    """The class in ``cls``'s MRO that defines ``name`` (2.7's unbound methods defeat ``is``)."""
    return next(klass for klass in cls.__mro__ if name in vars(klass))


def test_the_interface_raises_not_implemented():
    class BareDatagram(endpoint.DatagramEndpoint):
        pass

    class BareStream(endpoint.StreamEndpoint):
        pass
    for cls, bare in ((endpoint.Endpoint, BareDatagram()), (endpoint.DatagramEndpoint, BareDatagram()),
                      (endpoint.StreamEndpoint, BareStream())):
        for name in _members(cls):
            member = vars(cls)[name]
            with pytest.raises(NotImplementedError):
                if isinstance(member, property):
                    getattr(bare, name)
                else:
                    member(bare, *[None] * (member.__code__.co_argcount - 1))


def test_tcp_endpoint_provides_every_member():
    assert issubclass(tcp.TcpEndpoint, endpoint.StreamEndpoint)
    missing = [name for name in _members(endpoint.Endpoint) + _members(endpoint.StreamEndpoint)
               if _owner(tcp.TcpEndpoint, name) in (endpoint.Endpoint, endpoint.StreamEndpoint)]
    assert missing == []


def test_the_socket_layer_asks_only_declared_members():
    """Every ``endpoint.NAME`` the socket layer and select() use is declared in endpoint.py."""
    import os
    import re
    declared = set(_members(endpoint.Endpoint) + _members(endpoint.StreamEndpoint) +
                   _members(endpoint.DatagramEndpoint))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bitsnet")
    used = set()
    for name in ("_socket.py", "select.py", "tls_socket.py"):
        with open(os.path.join(root, name)) as source:
            used.update(re.findall(r"\bendpoint\.([A-Za-z]\w*)", source.read()))
    assert sorted(used - declared) == []


def test_udp_endpoint_provides_every_datagram_member():
    assert issubclass(udp.UdpEndpoint, endpoint.DatagramEndpoint)
    wanted = [name for name in _members(endpoint.Endpoint) if name not in STREAM_ONLY]
    missing = [name for name in wanted + _members(endpoint.DatagramEndpoint)
               if _owner(udp.UdpEndpoint, name) in (endpoint.Endpoint, endpoint.DatagramEndpoint)]
    assert missing == []


def test_progress_is_the_stack_pump():
    """endpoint.progress() is stack.pump itself (no Python call more per round), for both kinds."""
    from bitsnet import child, stack
    assert vars(child.EfiChild)["progress"] is stack.pump
    assert _owner(tcp.TcpEndpoint, "progress") is child.EfiChild
    assert _owner(udp.UdpEndpoint, "progress") is child.EfiChild


def test_tcp_state_table():
    """Every state is in the readiness table and may be destroyed; every transition leads to a
    state; EDK2's names where EDK2 has the state; a missing entry is a bug, raised at lookup."""
    from bitsnet import efidefs, tcp_state
    assert sorted(tcp_state.READINESS) == sorted(tcp_state.STATES)
    for (state, event), target in tcp_state.TRANSITIONS.items():
        assert state in tcp_state.STATES and target in tcp_state.STATES, (state, event)
    for state in tcp_state.STATES:
        assert tcp_state.next_state(state, "destroy") == tcp_state.DESTROYED
    edk2 = set(name[len("Tcp4State"):] for name in efidefs.TCP4_STATE_NAMES.values())
    assert set(tcp_state.STATES) - edk2 == set(["Bound", "Reset", "Failed", "Destroyed"])  # bitsnet's own
    ep = tcp.TcpEndpoint()
    assert ep._state == tcp_state.CLOSED
    ep._event("bind")
    with pytest.raises(AssertionError):
        ep._event("accepted")  # only a fresh endpoint becomes an accepted connection
    assert ep._state == tcp_state.BOUND


def test_pair_endpoint_provides_every_member():
    from bitsnet import socketpair
    assert [name for name in _members(endpoint.Endpoint) + _members(endpoint.StreamEndpoint)
            if _owner(socketpair.PairEndpoint, name) in (endpoint.Endpoint, endpoint.StreamEndpoint)] == []


def test_tls_endpoint_provides_every_member():
    """While TLS runs the fd's endpoint is a TlsEndpoint: a StreamEndpoint whose members are the
    TCP endpoint's, except can_recv, which also counts what the TLS layer holds."""
    from bitsnet import tls_socket
    assert issubclass(tls_socket.TlsEndpoint, endpoint.StreamEndpoint)
    assert [name for name in _members(endpoint.Endpoint) + _members(endpoint.StreamEndpoint)
            if _owner(tls_socket.TlsEndpoint, name) in (endpoint.Endpoint, endpoint.StreamEndpoint)] == []

    class Session(object):
        plain, eof = b"", False

        def buffered_record(self):
            return False
    inner, session = tcp.TcpEndpoint(), Session()
    ep = tls_socket.TlsEndpoint(inner, session)
    assert (ep.listening, ep.connected, ep.local_address) == (inner.listening, inner.connected, None)
    assert ep.can_recv() == inner.can_recv()
    session.plain = b"decrypted"
    assert ep.can_recv() is True


def test_ssl_imports_no_circle():
    """ssl.py -> tls_socket.py -> ssl_common.py: the leaf imports neither of the other two."""
    import os
    import re
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bitsnet")
    for name, never in (("ssl_common.py", ("ssl", "tls_socket")), ("tls_socket.py", ("ssl",))):
        with open(os.path.join(root, name)) as source:
            imported = set(re.findall(r"^\s*(?:from bitsnet import|import bitsnet\.)\s*(\w+)", source.read(), re.M))
        assert imported.isdisjoint(never), (name, imported)
