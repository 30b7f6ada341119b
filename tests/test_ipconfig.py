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
    # docs/bits-efi.md section 1: Policy is already Dhcp (the failed run above is still going), so
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
    # docs/edk2.md section 2.4 / docs/architecture.md section 11: only SNP is there until ConnectController starts the
    # network drivers.
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
    assert ipconfig.check_timer() == "ticks"


@pytest.mark.machine(timer=False)
def test_stopped_timer_is_diagnosed_before_dhcp_with_cause_and_remedy(net, capsys):
    # docs/architecture.md section 11: BITS's SMP start-up stops the LAPIC timer OVMF ticks from; DHCP would spin.
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


# --- bitsnet.interfaces() starts DHCP; configure(dns=...) alone (docs/architecture.md section 10) ---
@pytest.mark.machine(dhcp_delay=1.0)
def test_interfaces_starts_dhcp_without_waiting_and_a_poller_sees_the_address(net, capsys):
    import bitsnet
    start = events.clock()
    first = bitsnet.interfaces()
    assert events.clock() - start < 0.5  # did not wait for the lease (1 s)
    assert first[0]["address"] is None and net.drivers["ip4config2"].dhcp_runs == 1
    polls = 1
    while bitsnet.interfaces()[0]["address"] is None:
        polls += 1
        assert events.clock() - start < 5
        events.boot_services().Stall(20000)
    assert bitsnet.interfaces()[0]["address"] == LEASE
    assert polls > 1 and net.drivers["ip4config2"].dhcp_runs == 1  # polling did not restart it
    assert capsys.readouterr().out == ""  # quiet: the program polling prints what it wants


def test_a_socket_after_interfaces_waits_for_the_same_dhcp_run(net, capsys):
    import bitsnet
    bitsnet.interfaces()
    assert ipconfig.ensure_configured(timeout=5).address == LEASE
    assert net.drivers["ip4config2"].dhcp_runs == 1
    assert capsys.readouterr().out.startswith("bitsnet: DHCP on eth0 ... %s/8 in " % LEASE)


def test_interfaces_leaves_an_address_alone(net):
    import bitsnet
    ipconfig.ensure_configured(timeout=5)
    assert bitsnet.interfaces()[0]["address"] == LEASE
    assert net.drivers["ip4config2"].dhcp_runs == 1


@pytest.mark.machine(timer=False)
def test_interfaces_says_when_dhcp_cannot_finish(net):
    import bitsnet
    with pytest.raises(errors.error) as caught:
        bitsnet.interfaces()
    assert caught.value.errno == errno.EIO and "firmware timer is stopped" in str(caught.value)
    assert net.drivers["ip4config2"].dhcp_runs == 0


@pytest.mark.machine(dns_servers=["127.0.0.1:5353"])
def test_configure_dns_alone_keeps_the_dhcp_address(net):
    import bitsnet
    from bitsnet import dns
    ipconfig.ensure_configured(timeout=5)
    info = bitsnet.configure(dns=["127.0.0.53", "127.0.0.54"])
    assert info.address == LEASE and info.dns_servers == ["127.0.0.53", "127.0.0.54"]
    assert ipconfig.current().dns_servers == ["127.0.0.53", "127.0.0.54"]
    assert bitsnet.interfaces()[0]["dns"] == ["127.0.0.53", "127.0.0.54"]
    assert dns.servers() == ["127.0.0.53", "127.0.0.54"]
    assert net.drivers["ip4config2"].dhcp_runs == 1  # the lease is DHCP's still


def test_configure_dns_before_the_lease_does_not_wait(net):
    import bitsnet
    assert bitsnet.configure(dns=["127.0.0.53"]) is None  # no address yet; nothing started
    assert ipconfig.ensure_configured(timeout=5).dns_servers == ["127.0.0.53"]


@pytest.mark.machine(static=True, address="127.0.0.9/8", dns_servers=["127.0.0.1:5353"])
def test_configure_dns_alone_under_static_goes_to_the_firmware(net):
    import bitsnet
    info = bitsnet.configure(dns=["127.0.0.53"])
    assert info.address == "127.0.0.9" and info.dns_servers == ["127.0.0.53"]
    assert ipconfig._get_addresses(nic.default_nic().config2(), efidefs.Ip4Config2DataTypeDnsServer) \
        == ["127.0.0.53"]


def test_configure_needs_an_address_and_netmask_or_dns_alone(net):
    import bitsnet
    for args, kwargs in (((), {}), (("127.0.0.7",), {}), ((None, None, "127.0.0.1"), {"dns": ["127.0.0.53"]}),
                         ((), {"dns": ["300.1.1.1"]})):
        with pytest.raises(errors.error) as caught:
            bitsnet.configure(*args, **kwargs)
        assert caught.value.errno == errno.EINVAL


# --- the stopped timer restarted through the local APIC (docs/architecture.md section 11) ----------
class SimulatedApic(object):
    """An xAPIC whose timer drives the simulated firmware's tick: programming an initial count
    starts it, as restoring the LAPIC timer does on OVMF in BITS."""

    BASE = 0xFEE00000

    def __init__(self, firmware, running=False):
        from bitsnet import lapic
        self.lapic = lapic
        self.firmware = firmware
        self.writes = []
        self.mmio = {self.BASE + lapic.LVT_TIMER: 0x20020 if running else 0x10000,
                     self.BASE + lapic.DIVIDE_CONFIGURATION: 0xB if running else 0,
                     self.BASE + lapic.INITIAL_COUNT: 10000000 if running else 0,
                     self.BASE + lapic.CURRENT_COUNT: 5000 if running else 0}

    def rdmsr(self, msr):
        assert msr == self.lapic.IA32_APIC_BASE
        return self.BASE | self.lapic.APIC_BASE_ENABLE

    def readl(self, address):
        return self.mmio[address]

    def writel(self, address, value):
        self.writes.append((address - self.BASE, value))
        self.mmio[address] = value
        if address == self.BASE + self.lapic.INITIAL_COUNT and value:
            self.firmware.start_timer()


@pytest.mark.machine(timer=False)
def test_stopped_lapic_timer_is_restarted_once_and_dhcp_goes_on(net, capsys, monkeypatch):
    from bitsnet import lapic
    apic = SimulatedApic(net.firmware)
    monkeypatch.setattr(ipconfig, "_lapic_access", lambda: apic)
    monkeypatch.setitem(ipconfig._state, "timer_restored", False)
    assert ipconfig.ensure_configured(timeout=5).address == LEASE
    assert apic.writes == [(lapic.DIVIDE_CONFIGURATION, 0xB), (lapic.LVT_TIMER, 0x20020),
                           (lapic.INITIAL_COUNT, 10000000)]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("bitsnet: the firmware timer was stopped (local APIC timer masked); restarted it as OVMF"
                      " programs it")
    assert out[1].startswith("bitsnet: DHCP on eth0 ... %s/8 in " % LEASE) and len(out) == 2
    assert ipconfig.check_timer() == "ticks"
    assert len(apic.writes) == 3  # ticking now: nothing more written


@pytest.mark.machine(timer=False)
def test_a_restart_that_does_not_help_says_so(net, capsys, monkeypatch):
    apic = SimulatedApic(net.firmware)
    apic.firmware = type("Inert", (), {"start_timer": lambda self: None})()  # the tick is not the LAPIC's
    monkeypatch.setattr(ipconfig, "_lapic_access", lambda: apic)
    monkeypatch.setitem(ipconfig._state, "timer_restored", False)
    with pytest.raises(errors.error) as caught:
        ipconfig.ensure_configured(timeout=5)
    assert caught.value.errno == errno.EIO and "did not help" in str(caught.value)
    assert len(apic.writes) == 3 and net.drivers["ip4config2"].dhcp_runs == 0
    assert capsys.readouterr().out.count("\n") == 1  # the one line saying it restarted the timer


@pytest.mark.machine(timer=False)
def test_a_running_lapic_timer_is_left_alone(net, monkeypatch):
    apic = SimulatedApic(net.firmware, running=True)
    monkeypatch.setattr(ipconfig, "_lapic_access", lambda: apic)
    monkeypatch.setitem(ipconfig._state, "timer_restored", False)
    with pytest.raises(errors.error) as caught:
        ipconfig.check_timer()
    assert "the local APIC timer runs" in str(caught.value) and apic.writes == []


def test_no_lapic_outside_bits():
    assert ipconfig._lapic_access() is None  # no BITS ``bits`` module on a host


@pytest.mark.machine(timer=False)
def test_check_timer_says_it_restarted_the_timer(net, capsys, monkeypatch):
    apic = SimulatedApic(net.firmware)
    monkeypatch.setattr(ipconfig, "_lapic_access", lambda: apic)
    monkeypatch.setitem(ipconfig._state, "timer_restored", False)
    assert ipconfig.check_timer() == "restarted"
    assert "restarted it as OVMF programs it" in capsys.readouterr().out
    assert ipconfig.check_timer() == "ticks"


@pytest.mark.machine(timer=False)
def test_stopped_timer_is_diagnosed_before_waiting_for_ipv6(net):
    start = events.clock()
    with pytest.raises(errors.error) as caught:
        ipconfig.ensure_configured6(timeout=10)
    assert events.clock() - start < 3 and caught.value.errno == errno.EIO
    assert "firmware timer is stopped" in str(caught.value)


def test_interfaces_of_a_firmware_without_a_nic(net, monkeypatch):
    import bitsnet
    monkeypatch.setattr(nic, "find_all", lambda: [])
    assert bitsnet.interfaces() == [] and net.drivers["ip4config2"].dhcp_runs == 0
