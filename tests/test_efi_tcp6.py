"""Simulated TcpDxe, TCP6 side: Configure, Connect, Accept, Transmit, Receive, Close against real peers on [::1].

Raw EFI only (efi + efidefs through tests/efiraw6.py), as a BITS script would call it; the
statuses asserted are those of docs/edk2.md section 3.3 (TCP6 parameter checks), section 3.7 (StationAddress
:: and EFI_NO_MAPPING), 3.8 (ports) and 3.2 (no Routes slot).
"""

from __future__ import print_function

import ctypes
import errno
import socket
import struct
import threading
import time
from ctypes import byref

import efi
import pytest

import conftest
import efiraw
import efiraw6 as r6
import peers
from bitsnet import efidefs

pytestmark = pytest.mark.machine(static=True, ipv6_policy="static")
S = efi


def _name(status):
    return efi.efi_status_decode.get(status, status)


def _Peer(handler):
    """A host listener on [::1] that accepts one connection and runs ``handler(conn)``."""
    return peers.OneShotPeer(handler, host="::1", join_timeout=10)


def _echo_until_eof(conn):
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
        conn.sendall(chunk)


def _close(child):
    status, tok = child.close(abort=True)
    assert status == S.EFI_SUCCESS
    assert tok.wait(child) == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


def test_connect_transmit_receive_and_graceful_close_with_a_peer_on_v6_loopback(machine):
    peer = _Peer(_echo_until_eof)
    # TimeWaitTimeout 0 is accepted and skips TIME_WAIT (docs/edk2.md section 3.9): no 2 s wait for the close.
    child = r6.connected6(peer.port, option=efidefs.EFI_TCP6_OPTION(TimeWaitTimeout=0, EnableNagle=True))
    assert child.state() == efidefs.Tcp6StateEstablished
    status, cfg = child.mode()
    assert status == S.EFI_SUCCESS
    # Facts 3.7: StationAddress :: let IP6 choose; GetModeData reports the address it chose.
    assert r6.ip6_text(cfg.AccessPoint.StationAddress) == "::1"
    assert r6.ip6_text(cfg.AccessPoint.RemoteAddress) == "::1" and cfg.AccessPoint.RemotePort == peer.port
    assert cfg.AccessPoint.ActiveFlag and cfg.HopLimit == 64
    payload = bytes(bytearray(range(256))) * 40
    child.send_all(payload)
    got = b""
    while len(got) < len(payload):
        status, tok = child.receive(65536)
        assert status == S.EFI_SUCCESS
        assert tok.wait(child) == S.EFI_SUCCESS
        got += efiraw.received(tok)
    assert got == payload
    status, close_tok = child.close()
    assert status == S.EFI_SUCCESS
    assert peer.join() == payload  # our FIN reached the host peer after the data
    assert peer.peer[1] == cfg.AccessPoint.StationPort  # the host saw the port GetModeData reports
    assert close_tok.wait(child) == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


def test_accept_a_host_client_and_see_its_fin(machine):
    listener, port = r6.listening6()
    assert port and listener.state() == efidefs.Tcp6StateListen
    status, cfg = listener.mode()
    assert status == S.EFI_SUCCESS and not cfg.AccessPoint.ActiveFlag
    status, tok = listener.accept()
    assert status == S.EFI_SUCCESS
    client = socket.create_connection(("::1", port), timeout=5)
    assert tok.wait(listener) == S.EFI_SUCCESS
    child = r6.Tcp6(sb=listener.sb, handle=tok.token.NewChildHandle)
    status, cfg = child.mode()
    assert status == S.EFI_SUCCESS
    assert r6.ip6_text(cfg.AccessPoint.RemoteAddress) == "::1"
    assert cfg.AccessPoint.RemotePort == client.getsockname()[1]
    client.sendall(b"hello over six")
    client.shutdown(socket.SHUT_WR)
    assert child.recv_all() == b"hello over six"
    child.send_all(b"bye")
    assert client.recv(100) == b"bye"
    client.close()
    _close(child)
    _close(listener)


def test_connect_to_a_closed_port_is_reset_and_a_peer_rst_resets_the_connection(machine):
    probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    probe.bind(("::1", 0))
    closed = probe.getsockname()[1]
    probe.close()
    child = r6.Tcp6()
    assert child.configure(r6.tcp6_config(remote="::1", rport=closed)) == S.EFI_SUCCESS
    status, tok = child.connect()
    assert status == S.EFI_SUCCESS
    # EDK2 quirk (docs/edk2.md section 3.3 Connect): RST to the SYN is EFI_CONNECTION_RESET, not _REFUSED.
    assert tok.wait(child) == S.EFI_CONNECTION_RESET
    assert child.destroy() == S.EFI_SUCCESS

    established = threading.Event()

    def reset(conn):
        established.wait(10)  # not before our side saw the connection complete
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    peer = _Peer(reset)
    child = r6.connected6(peer.port)
    established.set()
    peer.join()
    status, tok = child.receive(100)
    assert status == S.EFI_SUCCESS
    assert tok.wait(child) == S.EFI_CONNECTION_RESET
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.parametrize("kwargs,expected", [
    (dict(remote="", rport=80), S.EFI_INVALID_PARAMETER),  # active without a remote address
    (dict(remote="::1", rport=0), S.EFI_INVALID_PARAMETER),  # active without a remote port
    (dict(remote="ff02::1", rport=80), S.EFI_INVALID_PARAMETER),  # multicast remote
    (dict(station="ff02::1", remote="::1", rport=80), S.EFI_INVALID_PARAMETER),  # multicast station
    (dict(station="2001:db8::5", remote="::1", rport=80), S.EFI_INVALID_PARAMETER),  # not one of ours
    (dict(remote="", rport=0, active=False), S.EFI_SUCCESS),  # a passive wildcard listener
])
def test_configure_checks_tcp6_access_points(machine, kwargs, expected):
    child = r6.Tcp6()
    assert _name(child.configure(r6.tcp6_config(**kwargs))) == _name(expected)
    if expected == S.EFI_SUCCESS:
        assert child.configure(r6.tcp6_config(**kwargs)) == S.EFI_ACCESS_DENIED  # configured: reset first
        assert child.configure(None) == S.EFI_SUCCESS
    # docs/edk2.md section 3.3: only a configured child may be reset
    assert child.configure(None) == S.EFI_ACCESS_DENIED
    assert child.destroy() == S.EFI_SUCCESS


def test_sack_and_pmtu_options_are_unsupported_and_garbage_free_options_apply(machine):
    child = r6.Tcp6()
    option = efidefs.EFI_TCP6_OPTION(EnableSelectiveAck=True)
    assert child.configure(r6.tcp6_config(active=False, option=option)) == S.EFI_UNSUPPORTED
    option = efidefs.EFI_TCP6_OPTION(MaxSynBackLog=5, EnableNagle=False)
    assert child.configure(r6.tcp6_config(active=False, option=option)) == S.EFI_SUCCESS
    out = efidefs.EFI_TCP6_OPTION()
    status, _ = child.mode(option=out)
    assert status == S.EFI_SUCCESS
    assert out.MaxSynBackLog == 5 and not out.EnableNagle
    assert out.ReceiveBufferSize == 2 * 1024 * 1024  # 0 is out of range: the default (docs/edk2.md section 3.9)
    assert child.destroy() == S.EFI_SUCCESS


def test_an_explicit_port_clash_is_invalid_parameter(machine):
    first, port = r6.listening6()
    second = r6.Tcp6()
    # Facts 3.8: TcpBind finds the same (address, port) -> EFI_INVALID_PARAMETER.
    assert second.configure(r6.tcp6_config(port=port, active=False)) == S.EFI_INVALID_PARAMETER
    assert first.configure(None) == S.EFI_SUCCESS
    assert second.configure(r6.tcp6_config(port=port, active=False)) == S.EFI_SUCCESS
    assert first.destroy() == S.EFI_SUCCESS
    assert second.destroy() == S.EFI_SUCCESS


def test_tcp4_and_tcp6_ephemeral_counters_start_at_the_same_port(machine):
    """Facts 3.8: mTcp6RandomPort = mTcp4RandomPort at driver load; each pre-increments its own."""
    four = efiraw.Tcp4()
    assert four.configure(efiraw.config_data(station=conftest.STATION, remote="127.0.0.1", rport=9)) == S.EFI_SUCCESS
    six = r6.Tcp6()
    assert six.configure(r6.tcp6_config(remote="::1", rport=9)) == S.EFI_SUCCESS
    status4, cfg4 = four.mode()
    status6, cfg6 = six.mode()
    assert status4 == status6 == S.EFI_SUCCESS
    # Equal -- unless a parallel test process holds that port on the one ::1 the lanes share,
    # in which case TCP6 skips ahead (a port in use is skipped, docs/edk2.md section 3.8).
    assert 0 <= cfg6.AccessPoint.StationPort - cfg4.AccessPoint.StationPort < 16
    assert 1024 < cfg4.AccessPoint.StationPort <= 2048
    assert four.destroy() == S.EFI_SUCCESS
    assert six.destroy() == S.EFI_SUCCESS


def test_ip6_mode_data_lists_the_addresses_in_pool_the_caller_frees(machine):
    child = r6.Tcp6()
    mode = efidefs.EFI_IP6_MODE_DATA()
    status, _ = child.mode(ip_mode=mode)
    assert status == S.EFI_NOT_STARTED  # ConfigData asked of an unconfigured child (docs/edk2.md section 3.3)
    assert child.configure(r6.tcp6_config(active=False)) == S.EFI_SUCCESS
    status, _ = child.mode(ip_mode=mode)
    assert status == S.EFI_SUCCESS
    assert mode.IsStarted and mode.IsConfigured and mode.ConfigData.DefaultProtocol == 6
    assert r6.ip6_text(mode.ConfigData.StationAddress) == "::1"
    addresses = [(r6.ip6_text(mode.AddressList[i].Address), mode.AddressList[i].PrefixLength)
                 for i in range(mode.AddressCount)]
    assert addresses == [("fe80::5054:ff:fe12:3456", 64), ("::1", 128)]
    # IPv6 mode data tables are the caller's to free (docs/edk2.md section 3.3); the ledger checks it is freed.
    pool = ctypes.cast(mode.AddressList, ctypes.c_void_p).value
    assert efiraw.boot_services().FreePool(pool) == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


def test_the_function_table_has_no_routes_slot(machine):
    """Facts 3.2: slot 2 is Connect. A script that reads the TCP6 interface with the TCP4 layout
    calls Accept (slot 3 for TCP6) when it means Connect (slot 3 for TCP4)."""
    assert efidefs.EFI_TCP6_PROTOCOL.Connect.offset == 16 == efidefs.EFI_TCP4_PROTOCOL.Routes.offset
    assert ctypes.sizeof(efidefs.EFI_TCP6_PROTOCOL) == 72
    child = r6.Tcp6()
    assert child.configure(r6.tcp6_config(remote="::1", rport=9)) == S.EFI_SUCCESS
    as_tcp4 = efidefs.EFI_TCP4_PROTOCOL.from_address(ctypes.addressof(child.proto))
    tok = efiraw.Token(efidefs.EFI_TCP4_CONNECTION_TOKEN)
    # Really TCP6 Accept on an active child: EFI_ACCESS_DENIED, and no SYN is sent.
    assert as_tcp4.Connect(byref(as_tcp4), byref(tok.token)) == S.EFI_ACCESS_DENIED
    assert child.state() == efidefs.Tcp6StateClosed
    tok.close()
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True, ipv6_policy="automatic", ipv6_delay=0.4)
def test_no_mapping_until_slaac_gives_an_address_then_configure_again(machine):
    child = r6.Tcp6()
    cfg = r6.tcp6_config(remote="::1", rport=9)
    # Facts 3.7: StationAddress :: and no usable address yet -> EFI_NO_MAPPING, and the child
    # is stuck "no-mapping": the other functions say so, Configure(NULL) is refused.
    assert child.configure(cfg) == S.EFI_NO_MAPPING
    status, tok = child.connect()
    assert status == S.EFI_NO_MAPPING
    assert child.configure(None) == S.EFI_ACCESS_DENIED
    status, _ = child.mode()
    assert status == S.EFI_NOT_STARTED
    assert r6.Ip6Config().wait_for("::1")
    assert child.configure(cfg) == S.EFI_SUCCESS  # the retry succeeds once the address exists
    status, mode = child.mode()
    assert status == S.EFI_SUCCESS and r6.ip6_text(mode.AccessPoint.StationAddress) == "::1"
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)  # EDK2's default: policy Manual, no manual address
def test_under_the_default_manual_policy_there_is_never_a_mapping(machine):
    child = r6.Tcp6()
    cfg = r6.tcp6_config(remote="::1", rport=9)
    assert child.configure(cfg) == S.EFI_NO_MAPPING
    time.sleep(0.5)  # longer than ipv6_delay: nothing is coming
    assert child.configure(cfg) == S.EFI_NO_MAPPING
    config = r6.Ip6Config()
    assert config.policy() == efidefs.Ip6ConfigPolicyManual  # unlike IP4 (docs/edk2.md section 3.7), IP6 starts nothing
    # The link-local address is there, and an explicit link-local station is accepted.
    link_local = config.addresses()[0][0]
    assert link_local.startswith("fe80::")
    local = r6.Tcp6()
    assert local.configure(r6.tcp6_config(station=link_local, active=False)) == S.EFI_SUCCESS
    status, mode = local.mode()
    assert status == S.EFI_SUCCESS and r6.ip6_text(mode.AccessPoint.StationAddress) == link_local
    assert local.destroy() == S.EFI_SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


def test_cancel_a_pending_receive_and_abort_with_rst(machine):
    seen = []
    release = threading.Event()

    def observe(conn):
        release.wait(10)
        try:
            seen.append(conn.recv(10))
        except socket.error as exc:  # ConnectionResetError on Python 3
            seen.append(exc.errno)

    peer = _Peer(observe)
    child = r6.connected6(peer.port)
    status, tok = child.receive(100)
    assert status == S.EFI_SUCCESS
    assert child.cancel(tok) == S.EFI_SUCCESS
    assert tok.wait(child) == S.EFI_ABORTED
    assert child.cancel(tok) == S.EFI_NOT_FOUND  # already gone
    status, close_tok = child.close(abort=True)
    assert status == S.EFI_SUCCESS
    assert close_tok.wait(child) == S.EFI_SUCCESS
    release.set()
    peer.join()
    assert seen == [errno.ECONNRESET]  # AbortOnClose sends RST (docs/edk2.md section 3.3 Close)
    assert child.destroy() == S.EFI_SUCCESS


def test_a_connect_to_a_listener_of_the_same_machine_is_never_answered(machine):
    """EDK2 has no loopback: a SYN to the machine itself goes unanswered (ND for its own address
    gets no answer), so the connect stays SynSent and the listener sees nothing. In the simulator
    ::1 is both the station and the host peers' address: a port of its own children tells."""
    listener, port = r6.listening6()
    status, accept = listener.accept()
    assert status == S.EFI_SUCCESS
    child = r6.Tcp6()
    assert child.configure(r6.tcp6_config(remote="::1", rport=port)) == S.EFI_SUCCESS
    status, tok = child.connect()
    assert status == S.EFI_SUCCESS
    assert tok.wait(child, timeout=1.0) is None and accept.wait(listener, timeout=0.2) is None
    assert child.state() == efidefs.Tcp6StateSynSent
    _close(child)  # Close(abort) and DestroyChild
    assert tok.status == S.EFI_ABORTED
    assert listener.destroy() == S.EFI_SUCCESS
    assert accept.status == S.EFI_ABORTED  # DestroyChild flushed it (its event is closed now)
