"""bitsnet.nic and bitsnet.ipconfig through the simulator: NIC discovery, DHCP bring-up and its
timeout, reuse of an existing address, the Dhcp-again policy quirk, static configure()."""

from __future__ import print_function

import errno

import pytest

import conftest
from bitsnet import efidefs, errors, events, ipconfig, nic, tcp
from helpers import PROFILES, HostListener, wait

pytest_plugins = ["helpers"]  # the ``net`` fixture
LEASE = conftest.STATION
STATIC = LEASE.rsplit(".", 1)[0] + ".7"  # 127.0.0.7 (127.0.N.7 in test slot N)
LINK_LOCAL = ("fe80::5054:ff:fe12:3456", 64)  # EUI-64 from the simulated MAC 52:54:00:12:34:56


def test_dhcp_brings_up_the_lease_and_reports_progress(net, capsys):
    info = ipconfig.ensure_configured(timeout=10)
    assert info.address == LEASE and info.netmask == "255.0.0.0" and info.gateway == "127.0.0.1"
    assert ("0.0.0.0", "0.0.0.0", "127.0.0.1") in info.routes  # InterfaceInfo sized with its routes
    out = capsys.readouterr().out
    assert out.startswith("bitsnet: DHCP on eth0 ... %s/8 in " % LEASE) and out.endswith(" s\n")
    assert ipconfig.current() == info


def test_existing_address_is_reused_without_dhcp(net, capsys):
    ipconfig.ensure_configured(timeout=10)
    capsys.readouterr()
    runs = net.drivers["ip4config2"].dhcp_runs
    assert ipconfig.ensure_configured().address == LEASE
    assert capsys.readouterr().out == "" and net.drivers["ip4config2"].dhcp_runs == runs


@pytest.mark.machine(static=True, address="127.0.0.9/8", dns_servers=["127.0.0.1:5353"])
def test_static_machine_is_used_as_is_and_dns_servers_are_read(net, capsys):
    info = ipconfig.ensure_configured()
    assert info.address == "127.0.0.9" and info.dns_servers == ["127.0.0.1"]
    assert capsys.readouterr().out == ""
    assert net.drivers["ip4config2"].dhcp_runs == 0


@pytest.mark.machine(dhcp=False)
def test_dhcp_timeout_gives_the_clear_error_quickly(net, capsys):
    ipconfig.DHCP_TIMEOUT = 0.5
    start = events.clock()
    with pytest.raises(errors.error) as caught:
        ipconfig.ensure_configured()
    assert events.clock() - start < 3
    assert caught.value.errno == errno.ETIMEDOUT
    assert "DHCP on eth0: no answer within 0.5 s; use bitsnet.configure(...) for a static address" \
        in str(caught.value)
    assert capsys.readouterr().out == "bitsnet: DHCP on eth0 ... no answer\n"
    assert ipconfig.current() is None


@pytest.mark.machine(dhcp=False)
def test_dhcp_again_goes_through_static_to_restart(net):
    # bits-efi-api item 1: Policy is already Dhcp (the failed run above is still going), so
    # setting Dhcp again would not restart it; bitsnet sets Static first.
    with pytest.raises(errors.error):
        ipconfig.ensure_configured(timeout=0.3)
    net.config.dhcp = True  # the DHCP server comes back
    assert ipconfig.ensure_configured(timeout=5).address == LEASE
    assert net.drivers["ip4config2"].dhcp_runs == 2


@pytest.mark.parametrize("profile", PROFILES)
def test_static_configure_and_traffic_from_it(net, profile):
    info = ipconfig.configure(STATIC, 8, gateway="127.0.0.1", dns=["127.0.0.53"])
    assert (info.address, info.netmask, info.gateway, info.dns_servers) == (STATIC, "255.0.0.0", "127.0.0.1",
                                                                           ["127.0.0.53"])
    assert ipconfig.interfaces() == [{"name": "eth0", "mac": "52:54:00:12:34:56", "address": STATIC,
                                      "netmask": "255.0.0.0", "gateway": "127.0.0.1", "dns": ["127.0.0.53"],
                                      "ipv6": [LINK_LOCAL]}]
    listener = HostListener()
    ep = tcp.TcpEndpoint()
    ep.connect_start(listener.address)
    conn = listener.accepted()
    assert conn.getpeername()[0] == STATIC
    assert wait(lambda: ep.connected, ep)
    conn.close()
    listener.close()


def test_configure_rejects_a_bad_address(net):
    with pytest.raises(errors.error) as caught:
        ipconfig.configure("127.0.0.300", "255.0.0.0")
    assert caught.value.errno == errno.EINVAL


def test_interfaces_before_any_address(net):
    # IP6 Config has its link-local address at once (EDK2's default policy, Manual, adds no other)
    assert ipconfig.interfaces() == [{"name": "eth0", "mac": "52:54:00:12:34:56", "address": None,
                                      "netmask": None, "gateway": None, "dns": [], "ipv6": [LINK_LOCAL]}]


@pytest.mark.machine(ipv6=False)
def test_interfaces_of_a_firmware_without_ipv6(net):
    assert ipconfig.interfaces() == [{"name": "eth0", "mac": "52:54:00:12:34:56", "address": None,
                                      "netmask": None, "gateway": None, "dns": [], "ipv6": []}]


@pytest.mark.machine(nic_connected=False)
def test_unconnected_nic_is_connected_on_demand_and_the_console_says_so(net, capsys):
    # facts 2.4 / issue 11: only SNP is there until ConnectController starts the network drivers.
    assert not net.drivers
    the_nic = nic.default_nic()
    assert the_nic.handle == net.nic.handle and "tcp4" in net.drivers
    assert the_nic.has_service(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
    assert capsys.readouterr().out == ("bitsnet: the firmware has not started networking on any NIC; connecting"
                                       " 1 network controller (ConnectController) ... ok, 1 NIC ready\n")
    assert ipconfig.ensure_configured(timeout=5).address == LEASE
    listener = HostListener()
    ep = tcp.TcpEndpoint()
    ep.connect_start(listener.address)
    conn = listener.accepted()
    assert wait(lambda: ep.connected, ep)
    conn.close()
    listener.close()


def test_connected_nic_is_not_connected_again(net, capsys):
    nic.default_nic()
    assert capsys.readouterr().out == ""


def test_the_firmware_timer_ticks_on_a_normal_machine(net):
    start = events.clock()
    assert ipconfig.timer_ticks()
    assert events.clock() - start < 0.5
    ipconfig.check_timer()


@pytest.mark.machine(timer=False)
def test_stopped_timer_is_diagnosed_before_dhcp_with_cause_and_remedy(net, capsys):
    # Issue 11: BITS's SMP start-up stops the LAPIC timer OVMF ticks from; DHCP would spin.
    start = events.clock()
    with pytest.raises(errors.error) as caught:
        ipconfig.ensure_configured(timeout=30)
    assert events.clock() - start < 3
    assert caught.value.errno == errno.EIO
    message = str(caught.value)
    assert "firmware timer is stopped" in message and "local APIC" in message
    assert "bitsnet.lapic.restore_timer()" in message
    assert net.drivers["ip4config2"].dhcp_runs == 0  # DHCP was not even started
    assert "DHCP" not in capsys.readouterr().out
    assert net.firmware.ledger()["events"] == 0  # the check's timer event is closed


@pytest.mark.machine(timer=False)
def test_stopped_timer_fails_the_first_socket_use(net):
    listener = HostListener()
    ep = tcp.TcpEndpoint()
    start = events.clock()
    with pytest.raises(errors.error) as caught:
        ep.connect_start(listener.address)
    assert events.clock() - start < 3 and caught.value.errno == errno.EIO
    ep.close()
    listener.close()


def test_children_are_counted_until_destroyed(net):
    the_nic = nic.default_nic()
    handle = the_nic.create_child(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
    assert the_nic.children() == 1 and net.firmware.ledger()["tcp4_children"] == 1
    assert the_nic.destroy_child(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID, handle) == 0
    assert the_nic.children() == 0
