"""One test per EDK2 TcpDxe quirk the simulator reproduces, named after it (docs/edk2.md section 3,
docs/bits-efi.md sections 2-5). Each quirk is written the same way in tools/efisim/tcp4.py or tcp4_tcb.py."""

from __future__ import print_function

import socket
import time

import efi
import pytest

import conftest
import efiraw
import peers
from bitsnet import efidefs

S = efi
BOTH = pytest.mark.parametrize("firmware", ["edk2", "edk2-2015"])


@pytest.fixture
def booted(request, firmware):
    request.applymarker(pytest.mark.machine(static=True, firmware=firmware))
    return request.getfixturevalue("machine")


def _listener(host):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, 0))
    server.listen(5)
    return server


@pytest.mark.machine(static=True)
def test_configure_null_on_unconfigured_child_is_access_denied(machine):
    child = efiraw.Tcp4()
    assert child.configure(None) == S.EFI_ACCESS_DENIED
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_reconfigure_without_reset_is_access_denied(machine):
    child = efiraw.Tcp4()
    cfg = efiraw.config_data(remote=peers.HOST, rport=80)
    assert child.configure(cfg) == S.EFI_SUCCESS
    assert child.configure(cfg) == S.EFI_ACCESS_DENIED
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_configure_parameter_checks(machine):
    child = efiraw.Tcp4()
    bad = [
        efiraw.config_data(remote="255.255.255.255", rport=80),
        efiraw.config_data(remote=peers.HOST, rport=0),  # active needs a port...
        efiraw.config_data(remote="0.0.0.0", rport=80),  # ...and an address
        efiraw.config_data(mask="255.0.255.0", remote=peers.HOST, rport=80),  # not contiguous
        efiraw.config_data(station="127.255.255.255", remote=peers.HOST, rport=80),  # broadcast
    ]
    for cfg in bad:
        assert child.configure(cfg) == S.EFI_INVALID_PARAMETER
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
@pytest.mark.parametrize("field", ["EnableSelectiveAck", "EnablePathMtuDiscovery"])
def test_sack_and_pmtu_options_are_unsupported(machine, field):
    child = efiraw.Tcp4()
    cfg = efiraw.config_data(remote=peers.HOST, rport=80, option=efiraw.default_option(**{field: True}))
    assert child.configure(cfg) == S.EFI_UNSUPPORTED
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_out_of_range_options_become_defaults_not_clamped(machine):
    child = efiraw.Tcp4()
    option = efidefs.EFI_TCP4_OPTION()  # all zero
    option.ConnectionTimeout = 10  # below 60: not clamped to 60 but replaced by 75
    option.FinTimeout = 100
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=80, option=option)) == S.EFI_SUCCESS
    out = efidefs.EFI_TCP4_OPTION()
    status, cfg = child.mode(out)
    assert status == S.EFI_SUCCESS
    assert out.ConnectionTimeout == 75 and out.FinTimeout == 2
    assert out.ReceiveBufferSize == 2 * 1024 * 1024 and out.MaxSynBackLog == 10
    assert out.TimeWaitTimeout == 0  # 0 is accepted: "off"
    assert out.KeepAliveProbes == 8  # 0 turns keep-alive off, but reads back as MaxKeepAlive (OVMF, 23_tcp_options)
    assert not out.EnableNagle and not out.EnableTimeStamp  # zero BOOLEANs are taken literally
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_poll_always_returns_success(machine):
    child = efiraw.Tcp4()
    assert child.poll() == S.EFI_SUCCESS  # unconfigured, nothing to process: still SUCCESS
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_port_clash_is_invalid_parameter(machine):
    first, second, port = efiraw.Tcp4(), efiraw.Tcp4(), conftest.port(0)
    assert first.configure(efiraw.config_data(port=port, remote=peers.HOST, rport=80)) == S.EFI_SUCCESS
    assert second.configure(efiraw.config_data(port=port, remote=peers.HOST, rport=81)) == S.EFI_INVALID_PARAMETER
    assert first.destroy() == S.EFI_SUCCESS and second.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_rst_to_syn_is_connection_reset_not_refused(machine):
    child = efiraw.Tcp4()
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=peers.closed_port())) == S.EFI_SUCCESS
    status, tok = child.connect()
    assert tok.wait(child) == S.EFI_CONNECTION_RESET
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(dhcp_delay=0.6)
def test_use_default_address_before_dhcp_is_no_mapping_until_reconfigured(machine):
    child = efiraw.Tcp4()
    cfg = efiraw.config_data(station="0.0.0.0", mask="0.0.0.0", use_default=True, remote=peers.HOST, rport=80)
    assert machine.drivers["ip4config2"].policy == efidefs.Ip4Config2PolicyStatic
    assert child.configure(cfg) == S.EFI_NO_MAPPING
    # Side effect (docs/edk2.md section 3.7): policy Static without an address switches to Dhcp.
    assert machine.drivers["ip4config2"].policy == efidefs.Ip4Config2PolicyDhcp
    status, tok = child.connect()
    assert status == S.EFI_NO_MAPPING
    status, rtok = child.receive(10)
    assert status == S.EFI_NO_MAPPING
    assert child.routes(False, "0.0.0.0", "0.0.0.0", "127.0.0.1") == S.EFI_NO_MAPPING
    assert child.configure(None) == S.EFI_ACCESS_DENIED
    assert child.mode()[0] == S.EFI_NOT_STARTED
    ip4 = efidefs.EFI_IP4_MODE_DATA()
    assert child.proto.GetModeData(efiraw.byref(child.proto), None, None, efiraw.byref(ip4), None, None) \
        == S.EFI_SUCCESS
    assert ip4.IsStarted and not ip4.IsConfigured
    deadline = time.time() + 5
    status = S.EFI_NO_MAPPING
    while status == S.EFI_NO_MAPPING and time.time() < deadline:
        time.sleep(0.05)
        status = child.configure(cfg)  # the recovery: Configure(same config) again
    assert status == S.EFI_SUCCESS
    status, mode = child.mode()
    assert efidefs.ipv4_text(mode.AccessPoint.StationAddress) == efiraw.STATION  # the actual address
    assert mode.AccessPoint.UseDefaultAddress
    assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True, firmware="edk2-2015")
def test_old_stack_use_default_address_is_already_started(machine):
    child = efiraw.Tcp4()
    cfg = efiraw.config_data(station="0.0.0.0", mask="0.0.0.0", use_default=True, remote=peers.HOST, rport=80)
    assert child.configure(cfg) == S.EFI_ALREADY_STARTED  # docs/bits-efi.md section 2
    assert child.configure(efiraw.config_data(remote=peers.HOST, rport=80)) == S.EFI_SUCCESS  # explicit works
    assert child.destroy() == S.EFI_SUCCESS


@BOTH
def test_cancel(booted, firmware):
    with peers.EchoPeer() as peer:
        child = efiraw.connected_child(peer.port)
        status, first = child.receive(10)
        status, second = child.receive(10)
        stranger = efiraw.Token(efidefs.EFI_TCP4_IO_TOKEN)
        child.tokens.append(stranger)
        if firmware == "edk2-2015":
            # EDK2 quirk (MdeModulePkg Tcp4Dxe, docs/bits-efi.md section 5): Cancel is not implemented.
            assert child.cancel(first) == S.EFI_UNSUPPORTED
            assert child.cancel(None) == S.EFI_UNSUPPORTED
            assert not first.check()
        else:
            assert child.cancel(stranger) == S.EFI_NOT_FOUND
            assert child.cancel(first) == S.EFI_SUCCESS
            assert first.check() and first.status == S.EFI_ABORTED and not second.check()
            assert child.cancel(None) == S.EFI_SUCCESS
            assert second.check() and second.status == S.EFI_ABORTED
            status, ctok = child.close()
            assert child.cancel(ctok) == S.EFI_NOT_FOUND  # close tokens are never found
        assert child.configure(None) == S.EFI_SUCCESS
        assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_cancel_on_unconfigured_child_is_not_started(machine):
    child = efiraw.Tcp4()
    assert child.cancel(None) == S.EFI_NOT_STARTED
    assert child.destroy() == S.EFI_SUCCESS


@BOTH
def test_children_and_ip4_routes(booted, firmware):
    # The child's subnet is 127.0.N.0/24 (N: the test slot, 0 alone), so a peer on 127.0.N+1.1 is
    # off-link: it needs a route.
    # EDK2 quirk (edk2-2015 Tcp4Dxe, docs/bits-efi.md section 3): TCP4 children ignore the IP4
    # routes of the interface; only a Routes() call on the child makes the peer reachable.
    subnet = efiraw.STATION.rsplit(".", 1)[0]
    off_link = "127.0.%d.1" % (int(subnet.split(".")[2]) + 1)
    booted.faults.configure("connect_timeout=0.6")
    server = _listener(off_link)
    try:
        port = server.getsockname()[1]
        cfg = efiraw.config_data(mask="255.255.255.0", remote=off_link, rport=port)
        child = efiraw.Tcp4()
        assert child.configure(cfg) == S.EFI_SUCCESS
        status, tok = child.connect()
        expected = S.EFI_TIMEOUT if firmware == "edk2-2015" else S.EFI_SUCCESS
        assert tok.wait(child) == expected
        assert child.destroy() == S.EFI_SUCCESS
        routed = efiraw.Tcp4()
        assert routed.configure(cfg) == S.EFI_SUCCESS
        # The workaround BITS uses: add the routes from InterfaceInfo, ignoring ACCESS_DENIED.
        assert routed.routes(False, subnet + ".0", "255.255.255.0", "0.0.0.0") == S.EFI_ACCESS_DENIED  # already there
        assert routed.routes(False, "0.0.0.0", "0.0.0.0", subnet + ".1") == S.EFI_SUCCESS
        status, tok = routed.connect()
        assert tok.wait(routed) == S.EFI_SUCCESS
        assert routed.destroy() == S.EFI_SUCCESS
    finally:
        server.close()


@pytest.mark.machine(static=True)
def test_calls_from_a_notify_function_are_access_denied(machine):
    # EfiAcquireLockOrFail on the socket lock (docs/edk2.md section 2.3): a call made at TPL_CALLBACK, e.g. from a
    # notify function, gets EFI_ACCESS_DENIED; Poll and GetModeData take no lock.
    seen = []
    with peers.EchoPeer() as peer:
        child = efiraw.connected_child(peer.port)
        spare = efiraw.io_token(size=10)
        child.tokens.append(spare)

        def notify(event, context):
            seen.append(child.proto.Receive(efiraw.byref(child.proto), spare.ref()))
            seen.append(child.poll())
        callback = efi.EFI_EVENT_NOTIFY(notify)
        status, tok = child.receive(10, notify=callback)
        assert status == S.EFI_SUCCESS
        child.send_all(b"wake")
        deadline = time.time() + 5
        while not seen and time.time() < deadline:
            child.poll()
        assert seen == [S.EFI_ACCESS_DENIED, S.EFI_SUCCESS]
        assert tok.status == S.EFI_SUCCESS
        assert child.destroy() == S.EFI_SUCCESS


@pytest.mark.machine(static=True)
def test_passive_on_station_zero_never_sees_a_connection(machine):
    # docs/bits-efi.md section 4: a listener on 0.0.0.0/0 is accepted but not served.
    child = efiraw.Tcp4()
    assert child.configure(efiraw.config_data(station="0.0.0.0", mask="0.0.0.0", port=conftest.port(1), active=False)) \
        == S.EFI_SUCCESS
    status, tok = child.accept()
    assert status == S.EFI_SUCCESS
    assert tok.wait(child, timeout=0.3) is None
    assert child.configure(None) == S.EFI_SUCCESS
    assert tok.wait(child) == S.EFI_ABORTED
    assert child.destroy() == S.EFI_SUCCESS
