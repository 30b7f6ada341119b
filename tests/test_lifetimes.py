"""Lifetime discipline (docs/testing.md section 3.3): a socket dropped in the middle of any operation never
leaves the firmware holding memory Python has freed, and its child is released.

The proof is direct: at every checkpoint, every token address the simulated TcpDxe still holds
(outstanding on a child, or a completion held back by the ``delay`` fault) is the address of a
token in bitsnet's one registry (``events._pending``), whose ``keep`` holds the buffers the
token points at. The checkpoints are after the drop and ``gc.collect()``, after churning the
heap so freed blocks get reused, and after the firmware completed everything late; then a
witness connection's data must still be intact, no firmware crash may have been recorded, and
every child must be gone.
"""

from __future__ import print_function

import ctypes
import errno
import gc
import hashlib
import sys

import pytest

import peers
from bitsnet import _socket as bs
from bitsnet import events
from bitsnet import select as bs_select

import test_socket_api
from test_socket_api import HostListener, connected_pair, recv_exactly

net = test_socket_api.net

MODES = ["trampoline", "check-event", "efi-hook"]
# The torture subset (CI: ``-m torture`` under PYTHONMALLOC=debug BITSNET_GC_TORTURE=N).
pytestmark = pytest.mark.torture
WITNESS_BYTES = 256 * 1024


def firmware_tokens(machine):
    """Every token address the simulated TcpDxe may still write through."""
    driver = machine.drivers["tcp4"]
    with machine.firmware.lock:
        held = set()
        for child in driver.children.values():
            held.update(child.tokens)
        for entry in getattr(driver._delayed, "_held", ()):
            held.add(entry[4])
    return held


def registry_tokens():
    return set(ctypes.addressof(op.token) for op in events._pending.values())


def assert_firmware_holds_only_live_memory(machine, where):
    unknown = firmware_tokens(machine) - registry_tokens()
    assert not unknown, "%s: firmware holds tokens bitsnet released: %s" % (
        where, ", ".join("0x%x" % a for a in sorted(unknown)))
    for op in events._pending.values():
        assert op.keep is not None and op.token is not None


def churn_heap():
    """Allocate and free enough that freed blocks are handed out again (PYTHONMALLOC=debug
    also fills them with 0xDD first)."""
    junk = [bytearray(b"\x55" * size) for size in (16, 64, 200, 1000, 4096, 65536) for _ in range(32)]
    junk.extend(ctypes.create_string_buffer(b"\x66" * 100) for _ in range(256))
    del junk
    gc.collect()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.machine(faults="delay=0.3")
def test_sockets_dropped_mid_operation_leave_the_firmware_nothing_freed(net, mode):
    events.reset(mode)
    witness_data = peers.pattern(WITNESS_BYTES, seed=11)
    with HostListener() as listener:
        witness, witness_peer = connected_pair(listener)
        receiving, receiving_peer = connected_pair(listener)
        sending, sending_peer = connected_pair(listener)
        closing, closing_peer = connected_pair(listener)
        server = bs.socket()
        server.bind(("0.0.0.0", 0))
        server.listen(5)
        connecting = bs.socket()
        connecting.setblocking(False)

        # Every kind of operation, left pending (each completion is held back 0.3 s).
        assert connecting.connect_ex(listener.address) == errno.EINPROGRESS
        bs_select.select([receiving, server], [], [], 0)  # posts a Receive and an Accept
        sending.setblocking(False)
        assert sending.send(b"t" * 65536) > 0  # a Transmit in flight
        closing.close()  # a graceful Close token in flight
        kinds = set(kind for ep in _endpoints(receiving, sending, server, connecting)
                    for kind in _pending_kinds(ep))
        assert events.outstanding() >= 4, events._pending
        assert_firmware_holds_only_live_memory(net, "before the drop")

        # Drop them all, mid-operation.
        del receiving, sending, server, connecting
        gc.collect()
        assert_firmware_holds_only_live_memory(net, "after the drop and gc.collect()")
        churn_heap()
        assert_firmware_holds_only_live_memory(net, "after churning the heap")

        # The firmware now completes everything late, into whatever bitsnet still holds.
        receiving_peer.sendall(b"late data for a dropped socket")
        for peer in (receiving_peer, sending_peer, closing_peer):
            peer.close()
        listener.sock.accept()[0].close()  # the dropped connect's host side
        witness_peer.sendall(witness_data)
        got = recv_exactly(witness, WITNESS_BYTES)
        assert hashlib.sha256(got).digest() == hashlib.sha256(witness_data).digest()
        witness.sendall(witness_data)
        assert hashlib.sha256(recv_exactly(witness_peer, WITNESS_BYTES)).digest() == \
            hashlib.sha256(witness_data).digest()
        churn_heap()
        assert_firmware_holds_only_live_memory(net, "after the late completions")
        witness.close()
        witness_peer.close()

    # Every child is released: the dropped ones close in the background; wait for that.
    from bitsnet import stack, tcp
    events.wait_until(lambda: _only_time_wait(tcp), events.clock() + 10.0, poll=stack.pump)
    assert _only_time_wait(tcp), "children still busy: %r" % (list(tcp._live) + list(tcp._closing),)
    assert not net.firmware.crashes, net.firmware.crashes
    assert kinds >= set(["rx", "accept", "connect", "tx"]), kinds


def _endpoints(*socks):
    return [s._descriptor.endpoint for s in socks if s._descriptor is not None]


def _pending_kinds(endpoint):
    names = {"_connect_op": "connect", "_close_op": "close"}
    kinds = set(kind for attr, kind in names.items() if getattr(endpoint, attr, None) is not None)
    receiver, sender = getattr(endpoint, "receiver", None), getattr(endpoint, "sender", None)
    if receiver is not None and receiver.op is not None:
        kinds.add("rx")
    if sender is not None and sender.ops or getattr(endpoint, "_tx_ops", None):
        kinds.add("tx")
    if getattr(endpoint, "_accept_ops", None):
        kinds.add("accept")
    return kinds


def _only_time_wait(tcp):
    """No endpoint is open, and every background close has exchanged FINs."""
    from bitsnet import efidefs
    if tcp._live:
        return False
    for ep in tcp._closing:
        if ep._proto is not None and ep._tcp_state() not in (efidefs.Tcp4StateTimeWait, efidefs.Tcp4StateClosed):
            return False
    return True


@pytest.mark.skipif(sys.version_info[0] < 3, reason="ctypes buffers are what matter; checked once on 3")
@pytest.mark.machine(faults="delay=0.2")
def test_receive_buffers_stay_registered_until_the_firmware_lets_go(net):
    """The buffer a pending Receive writes into is referenced from the registry, not only
    from the endpoint: drop the socket, collect, and the buffer is still there, unchanged in
    address, until the completion (or DestroyChild) releases it."""
    events.reset("trampoline")
    with HostListener() as listener:
        sock, peer = connected_pair(listener)
        bs_select.select([sock], [], [], 0)
        ops = [op for op in events._pending.values() if op.owner is sock._descriptor.endpoint]
        assert ops, "no Receive posted"
        addresses = dict((id(op), [ctypes.addressof(k) for k in op.keep if isinstance(k, ctypes._SimpleCData) or
                                   hasattr(k, "_b_base_")]) for op in ops)
        del sock
        gc.collect()
        churn_heap()
        for op in ops:
            still = events._pending.get(op.slot) is op
            assert still, "op %r left the registry while the firmware still had it" % (op,)
            assert [ctypes.addressof(k) for k in op.keep if isinstance(k, ctypes._SimpleCData) or
                    hasattr(k, "_b_base_")] == addresses[id(op)]
        peer.sendall(b"x" * 1000)
        peer.close()
    from bitsnet import stack, tcp
    events.wait_until(lambda: _only_time_wait(tcp), events.clock() + 10.0, poll=stack.pump)
    # Whatever the firmware still holds (a Receive stays posted until the Close completes,
    # after TIME_WAIT) is still registered; the rest was released.
    assert_firmware_holds_only_live_memory(net, "at the end")
    held = firmware_tokens(net)
    for op in ops:
        assert (events._pending.get(op.slot) is op) == (ctypes.addressof(op.token) in held), op
    assert not net.firmware.crashes


def test_tokens_stay_registered_while_destroy_child_fails(net, monkeypatch):
    """DestroyChild refused: the child may live on, and the firmware may still write into its
    tokens' buffers, so the registry keeps them (owned by events.ORPHANED) until the firmware
    provably lets go -- here when the child is at last destroyed for real."""
    import efi
    from bitsnet import nic as bs_nic
    events.reset("trampoline")
    real = bs_nic.Nic.destroy_child
    refused = []

    def failing(self, sb_guid, handle):
        refused.append((self, sb_guid, handle))
        return efi.EFI_DEVICE_ERROR

    with HostListener() as listener:
        sock, peer = connected_pair(listener)
        bs_select.select([sock], [], [], 0)  # one Receive outstanding
        ep = sock._descriptor.endpoint
        ops = [op for op in events._pending.values() if op.owner is ep]
        assert ops, "no Receive posted"
        monkeypatch.setattr(bs_nic.Nic, "destroy_child", failing)
        ep._destroy()
        monkeypatch.undo()
        assert refused and ep._handle is None
        for op in ops:
            assert events._pending.get(op.slot) is op and op.owner == events.ORPHANED, op
        gc.collect()
        churn_heap()
        assert_firmware_holds_only_live_memory(net, "after the refused DestroyChild")
        the_nic, sb_guid, handle = refused[0]
        assert real(the_nic, sb_guid, handle) == efi.EFI_SUCCESS  # the firmware flushes the tokens
        events.wait_until(lambda: not any(events._pending.get(op.slot) is op for op in ops),
                          events.clock() + 5.0, poll=events.process)
        assert all(op.done for op in ops) and events.outstanding() == 0
        sock.close()
        peer.close()
    assert not net.firmware.crashes
