"""Simulated Udp6Dxe: Configure, Transmit, Receive, Groups against real peers on [::1].

Raw EFI only (efi + efidefs through tests/efiraw6.py); the statuses are those of
docs/edk2.md section 4.2 ("Udp6 is parallel" to Udp4), section 3.7 (EFI_NO_MAPPING) and section 4.1 (no Routes).
"""

from __future__ import print_function

import ctypes
import socket
from ctypes import byref

import efi
import pytest

import efiraw6 as r6
from bitsnet import efidefs

pytestmark = pytest.mark.machine(static=True, ipv6_policy="static")
S = efi


def _name(status):
    return efi.efi_status_decode.get(status, status)


@pytest.fixture
def peer():
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.bind(("::1", 0))
    sock.settimeout(5)
    yield sock
    sock.close()


def _closed_port():
    probe = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    probe.bind(("::1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_connected_instance_sends_and_receives_and_recycles(machine, peer):
    child = r6.Udp6()
    assert child.configure(r6.udp6_config(remote="::1", rport=peer.getsockname()[1])) == S.EFI_SUCCESS
    status, cfg = child.mode()
    assert status == S.EFI_SUCCESS
    assert r6.ip6_text(cfg.StationAddress) == "::1" and cfg.StationPort  # IP6 chose ::1, an ephemeral port
    status, tok = child.transmit(b"ping over six")
    assert status == S.EFI_SUCCESS
    assert tok.wait(child) == S.EFI_SUCCESS
    data, source = peer.recvfrom(100)
    assert data == b"ping over six" and source[1] == cfg.StationPort
    status, rx = child.receive()
    assert status == S.EFI_SUCCESS
    peer.sendto(b"pong" * 1000, source)  # 4000 bytes: several fragments of the reassembled datagram
    assert rx.wait(child) == S.EFI_SUCCESS
    payload, src, sport, dst, dport = r6.take_datagram(rx)
    assert payload == b"pong" * 1000
    assert (src, sport, dst, dport) == ("::1", peer.getsockname()[1], "::1", cfg.StationPort)
    assert machine.firmware.ledger()["udp6_unrecycled"] == 0  # take_datagram signalled RecycleSignal
    assert child.destroy() == S.EFI_SUCCESS


def test_unconnected_instance_sends_with_session_data_and_queues_until_a_token(machine, peer):
    child = r6.Udp6()
    assert child.configure(r6.udp6_config()) == S.EFI_SUCCESS
    status, tok = child.transmit(b"to whom it may concern", "::1", peer.getsockname()[1])
    assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_SUCCESS
    data, source = peer.recvfrom(100)
    assert data == b"to whom it may concern"
    peer.sendto(b"first", source)
    peer.sendto(b"second", source)
    got = []
    for _ in range(2):
        status, rx = child.receive()
        assert status == S.EFI_SUCCESS
        assert rx.wait(child) == S.EFI_SUCCESS
        got.append(r6.take_datagram(rx)[0])
    assert got == [b"first", b"second"]
    assert child.destroy() == S.EFI_SUCCESS


def test_icmp_port_unreachable_completes_the_next_receive(machine):
    child = r6.Udp6()
    assert child.configure(r6.udp6_config(remote="::1", rport=_closed_port())) == S.EFI_SUCCESS
    status, tok = child.transmit(b"anyone?")
    assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_SUCCESS
    status, rx = child.receive()
    assert status == S.EFI_SUCCESS
    # Facts 4.2: the ICMP error completes a receive token, RxData NULL.
    assert _name(rx.wait(child)) == "EFI_PORT_UNREACHABLE"
    assert not rx.token.Packet.RxData
    assert child.destroy() == S.EFI_SUCCESS


def test_transmit_checks(machine, peer):
    child = r6.Udp6()
    status, _ = child.transmit(b"x", "::1", 9)
    assert status == S.EFI_NOT_STARTED
    assert child.configure(r6.udp6_config()) == S.EFI_SUCCESS
    status, _ = child.transmit(b"x")  # neither session data nor a configured remote
    assert status == S.EFI_INVALID_PARAMETER
    status, _ = child.transmit(b"x", "::1", 0)  # no destination port anywhere
    assert status == S.EFI_INVALID_PARAMETER
    status, _ = child.transmit(b"", "::1", 9)  # docs/edk2.md section 4.2: a zero-length fragment is invalid
    assert status == S.EFI_INVALID_PARAMETER
    status, _ = child.transmit(b"x" * 65528, "::1", 9)
    assert status == S.EFI_BAD_BUFFER_SIZE
    assert child.destroy() == S.EFI_SUCCESS


def test_configure_checks_and_reconfiguration(machine):
    child = r6.Udp6()
    assert child.configure(r6.udp6_config(remote="ff02::1", rport=9)) == S.EFI_INVALID_PARAMETER
    assert child.configure(r6.udp6_config(station="2001:db8::7")) == S.EFI_INVALID_PARAMETER
    assert child.configure(None) == S.EFI_SUCCESS  # unconfigured: a no-op (docs/edk2.md section 4.2)
    cfg = r6.udp6_config(port=0)
    assert child.configure(cfg) == S.EFI_SUCCESS
    status, stored = child.mode()
    assert status == S.EFI_SUCCESS
    stored.HopLimit = 9
    assert child.configure(stored) == S.EFI_SUCCESS  # only IP-level parameters changed
    _, again = child.mode()
    assert again.HopLimit == 9
    stored.StationPort += 1
    assert child.configure(stored) == S.EFI_ALREADY_STARTED
    other = r6.Udp6()
    # Facts 4.2: the same (address, port) without AllowDuplicatePort -> EFI_ACCESS_DENIED.
    assert other.configure(r6.udp6_config(port=again.StationPort)) == S.EFI_ACCESS_DENIED
    assert other.configure(r6.udp6_config(port=again.StationPort, AllowDuplicatePort=True)) == S.EFI_SUCCESS
    assert other.destroy() == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


def test_groups_take_ipv6_multicast_only(machine):
    child = r6.Udp6()
    group = r6.ip6("ff02::1:3")
    assert child._call("Groups", True, byref(group)) == S.EFI_NOT_STARTED
    assert child.configure(r6.udp6_config()) == S.EFI_SUCCESS
    assert child._call("Groups", True, byref(r6.ip6("::1"))) == S.EFI_INVALID_PARAMETER
    assert child._call("Groups", True, byref(group)) == S.EFI_SUCCESS
    assert child._call("Groups", True, byref(group)) == S.EFI_ALREADY_STARTED
    assert child._call("Groups", False, None) == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


def test_the_function_table_has_no_routes_slot(machine, peer):
    """Facts 4.1: GetModeData, Configure, Groups, Transmit, Receive, Cancel, Poll -- Transmit is slot 3."""
    assert [name for name, _ in efidefs.EFI_UDP6_PROTOCOL._fields_] == [
        "GetModeData", "Configure", "Groups", "Transmit", "Receive", "Cancel", "Poll"]
    child = r6.Udp6()
    assert child.configure(r6.udp6_config(remote="::1", rport=peer.getsockname()[1])) == S.EFI_SUCCESS
    slot3 = ctypes.c_void_p.from_address(ctypes.addressof(child.proto) + 3 * ctypes.sizeof(ctypes.c_void_p))
    transmit = ctypes.cast(child.proto.Transmit, ctypes.c_void_p)
    assert slot3.value == transmit.value
    status, tok = child.transmit(b"slot three")
    assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_SUCCESS
    assert peer.recvfrom(100)[0] == b"slot three"
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True, ipv6_policy="automatic", ipv6_delay=0.3)
def test_no_mapping_until_the_address_is_usable(machine, peer):
    child = r6.Udp6()
    cfg = r6.udp6_config(remote="::1", rport=peer.getsockname()[1])
    assert child.configure(cfg) == S.EFI_NO_MAPPING
    status, _ = child.transmit(b"x")
    assert status == S.EFI_NO_MAPPING  # docs/edk2.md section 4.2: no-mapping before not-started
    status, _ = child.mode()
    assert status == S.EFI_NOT_STARTED
    assert r6.Ip6Config().wait_for("::1")
    assert child.configure(cfg) == S.EFI_SUCCESS
    status, tok = child.transmit(b"now")
    assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_SUCCESS
    assert peer.recvfrom(100)[0] == b"now"
    assert child.destroy() == S.EFI_SUCCESS


def test_a_datagram_to_the_machine_itself_is_not_delivered_and_fails_with_no_mapping(machine):
    """EDK2 has no loopback: a datagram to one of the machine's own ports waits for a neighbour
    advertisement that never comes and fails with NO_MAPPING (udp6.UNRESOLVED_DELAY, about 3 s);
    Cancel finds it while it waits. In the simulator ::1 is also every host peer's address: a port
    of its own children tells."""
    receiver, sender = r6.Udp6(), r6.Udp6()
    assert receiver.configure(r6.udp6_config()) == S.EFI_SUCCESS
    assert sender.configure(r6.udp6_config()) == S.EFI_SUCCESS
    port = receiver.mode()[1].StationPort
    status, rx = receiver.receive()
    assert status == S.EFI_SUCCESS
    status, tok = sender.transmit(b"to myself", "::1", port)
    assert status == S.EFI_SUCCESS
    assert tok.wait(sender, timeout=2.0) is None  # still "resolving"
    assert tok.wait(sender, timeout=3.0) == S.EFI_NO_MAPPING
    status, again = sender.transmit(b"again", "::1", port)
    assert status == S.EFI_SUCCESS
    assert sender.cancel(again) == S.EFI_SUCCESS and again.check() and again.status == S.EFI_ABORTED
    assert rx.wait(receiver, timeout=0.3) is None  # nothing ever arrived
    assert receiver.cancel(rx) == S.EFI_SUCCESS and rx.status == S.EFI_ABORTED
    assert sender.destroy() == S.EFI_SUCCESS and receiver.destroy() == S.EFI_SUCCESS
