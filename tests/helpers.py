"""Fixtures and helpers for tests of bitsnet's runtime layers through the simulator.

``net``               a booted machine with bitsnet's module state reset for it (events in the
                      requested mode, the trampoline built first, the NIC cache cleared);
                      teardown closes every endpoint (``tcp.close_all``) and the event pool
                      (``events.shutdown``) before conftest's ledger check. Parametrize it
                      indirectly with an event mode: ``@pytest.mark.parametrize("net", MODES,
                      indirect=True)``; firmware profiles come from ``PROFILES`` params.
                      UDP endpoints (``udp.close_all``) and the resolver's state too.
``wait(pred, ep)``    events.wait_until with a test deadline, polling through ``ep``.
``connect(addr)``     a connected TcpEndpoint (or the raised error).
``established_pair()``  (bitsnet endpoint, host socket) connected through a host listener.
``recv_exactly``, ``send_all``  blocking loops over the non-blocking primitives.
"""

from __future__ import print_function

import socket
import threading

import pytest

import conftest

from bitsnet import events, ipconfig, nic, stack, tcp, udp

MODES = ["trampoline", "check-event", "efi-hook"]
PROFILES = [pytest.param("edk2", marks=pytest.mark.machine(firmware="edk2")),
            pytest.param("edk2-2015", marks=pytest.mark.machine(firmware="edk2-2015"))]
DEADLINE = 20.0  # seconds any single wait in a test may take before it is a failure
HOST = "127.0.0.1"
# Seconds from DHCP start to the lease in ``net`` tests. MachineConfig's 0.3 s paces the EFI-level
# DHCP tests; a socket-level test only needs an address, and waited 0.3 s for it about a hundred
# times a run. A test that is about DHCP's pace names dhcp_delay in its machine marker.
NET_DHCP_DELAY = 0.05


@pytest.fixture
def net(request, machine):
    """The booted ``machine`` with bitsnet reset for it (see the module docstring)."""
    marker = request.node.get_closest_marker("machine")
    if not (marker and "dhcp_delay" in marker.kwargs):
        machine.config.dhcp_delay = NET_DHCP_DELAY  # read when DHCP starts, i.e. after this
    wanted = getattr(request, "param", "trampoline")
    if wanted == "trampoline":
        from efisim.trampoline_build import ensure_trampoline
        ensure_trampoline()
    events.reset(wanted)
    nic.reset()
    saved = ipconfig.DHCP_TIMEOUT
    yield machine
    ipconfig.DHCP_TIMEOUT = saved
    conftest.close_live(tcp)
    conftest.settle_closes(tcp, 10.0)  # FINs exchanged; TIME_WAIT is not waited out
    tcp.close_all(timeout=10.0)
    udp.close_all()
    _reset_resolver()
    leftover = events.shutdown()
    nic.reset()
    assert tcp.live_endpoints() == 0 and udp.live_endpoints() == 0
    assert leftover == 0, "tokens still outstanding: %r" % leftover


def _reset_resolver():
    try:
        from bitsnet import dns
    except ImportError:
        return
    dns.reset()


def wait(predicate, ep=None, timeout=DEADLINE):
    """Wait for ``predicate`` driving the firmware through ``ep``; False on timeout."""
    poll = ep.progress if ep is not None else _progress_any
    return events.wait_until(predicate, events.clock() + timeout, poll=poll)


def _progress_any():
    stack.pump()


def connect(address, timeout=DEADLINE, **options):
    ep = tcp.TcpEndpoint()
    for name, value in options.items():
        ep.set_option(name, value)
    ep.connect_start(address)
    assert wait(lambda: not ep.connecting, ep, timeout)
    err = ep.take_error()
    if err:
        ep.close()
        raise socket.error(err, "connect failed")
    assert ep.connected
    return ep


def send_all(ep, data, timeout=DEADLINE):
    view = memoryview(data)
    deadline = events.clock() + timeout
    while len(view):
        assert events.wait_until(ep.can_send, deadline, poll=ep.progress), "send timed out"
        n = ep.send(view)
        if n:
            view = view[n:]


def recv_some(ep, size=65536, timeout=DEADLINE):
    """One recv: bytes (b"" at EOF); raises the endpoint's error."""
    buf = bytearray(size)
    assert wait(ep.can_recv, ep, timeout), "recv timed out"
    n = ep.recv_into(buf, size)
    assert n is not None
    return bytes(buf[:n])


def recv_exactly(ep, size, timeout=DEADLINE):
    out = bytearray()
    deadline = events.clock() + timeout
    while len(out) < size:
        chunk = recv_some(ep, min(65536, size - len(out)), max(0.1, deadline - events.clock()))
        assert chunk, "EOF after %d of %d bytes" % (len(out), size)
        out += chunk
    return bytes(out)


def recv_until_eof(ep, timeout=DEADLINE):
    out = bytearray()
    deadline = events.clock() + timeout
    while True:
        chunk = recv_some(ep, 65536, max(0.1, deadline - events.clock()))
        if not chunk:
            return bytes(out)
        out += chunk


class HostListener(object):
    """A host listening socket; ``accepted()`` returns the next accepted host socket."""

    def __init__(self, backlog=5):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(backlog)
        self.sock.settimeout(DEADLINE)
        self.port = self.sock.getsockname()[1]
        self.address = (HOST, self.port)

    def accepted(self):
        conn, _ = self.sock.accept()
        conn.settimeout(DEADLINE)
        return conn

    def close(self):
        self.sock.close()


def established_pair(**options):
    """(TcpEndpoint, host socket, HostListener): a bitsnet client connected to a host server."""
    listener = HostListener()
    result = {}

    def host_side():
        result["conn"] = listener.accepted()

    thread = threading.Thread(target=host_side)
    thread.daemon = True
    thread.start()
    ep = connect(listener.address, **options)
    thread.join(DEADLINE)
    return ep, result["conn"], listener
