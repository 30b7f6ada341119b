"""The simulator's EFI_IP4_CONFIG2_PROTOCOL against docs/edk2.md section 5.2 (EDK2
Ip4Config2Impl.c), called through ctypes exactly as an application calls it."""

from __future__ import print_function

import ctypes
import time
from ctypes import byref, c_uint32

import efi
import pytest

import conftest
from bitsnet import efidefs as d
from efisim import ip4config2

INFO_SIZE = ctypes.sizeof(d.EFI_IP4_CONFIG2_INTERFACE_INFO)
ROUTE_SIZE = ctypes.sizeof(d.EFI_IP4_ROUTE_TABLE)
DHCP_DEADLINE = 5.0  # seconds; the machine's DHCP answers after 0.3 s by default
ADDRESS = conftest.STATION
MASK = "255.0.0.0"
GATEWAY = "127.0.0.1"
DNS = "127.0.0.1"

INTERFACE_INFO = d.Ip4Config2DataTypeInterfaceInfo
POLICY = d.Ip4Config2DataTypePolicy
MANUAL_ADDRESS = d.Ip4Config2DataTypeManualAddress
GATEWAY_TYPE = d.Ip4Config2DataTypeGateway
DNS_SERVER = d.Ip4Config2DataTypeDnsServer


def bs():
    return efi.system_table.BootServices.contents


class Config2(object):
    """Raw calls on the NIC's Ip4Config2, plus the events a test made (closed by close())."""

    def __init__(self):
        handles = efi.locate_handles(d.EFI_IP4_CONFIG2_PROTOCOL_GUID)
        assert len(handles) == 1
        self.proto = d.EFI_IP4_CONFIG2_PROTOCOL.from_handle(handles[0])
        self.events = []
        self.registered = []

    def set(self, data_type, data=None, size=None):
        if size is None:
            size = ctypes.sizeof(data) if data is not None else 0
        return self.proto.SetData(byref(self.proto), data_type, size, byref(data) if data is not None else None)

    def set_policy(self, policy):
        return self.set(POLICY, ctypes.c_int(policy))

    def get_raw(self, data_type, size):
        """(status, DataSize after the call, buffer) for a buffer of ``size`` bytes (None: NULL)."""
        data_size = efi.UINTN(size or 0)
        buf = ctypes.create_string_buffer(size) if size else None
        status = self.proto.GetData(byref(self.proto), data_type, byref(data_size), buf)
        return status, data_size.value, buf

    def get(self, data_type):
        """Sized properly: ask for the size first, as docs/edk2.md section 5.2 says a caller must."""
        status, needed, _ = self.get_raw(data_type, 0)
        if status != efi.EFI_BUFFER_TOO_SMALL:
            return status, None
        status, _, buf = self.get_raw(data_type, needed)
        return status, buf

    def policy(self):
        status, buf = self.get(POLICY)
        assert status == efi.EFI_SUCCESS
        return c_uint32.from_buffer(buf).value

    def info(self):
        """(address, mask, [(subnet, mask, gateway)]) from InterfaceInfo."""
        status, buf = self.get(INTERFACE_INFO)
        assert status == efi.EFI_SUCCESS
        info = d.EFI_IP4_CONFIG2_INTERFACE_INFO.from_buffer(buf)
        routes = []
        if info.RouteTableSize:
            # The route table sits right after the structure, inside our buffer (docs/edk2.md section 5.2).
            assert ctypes.cast(info.RouteTable, ctypes.c_void_p).value == ctypes.addressof(buf) + INFO_SIZE
            for i in range(info.RouteTableSize):
                r = info.RouteTable[i]
                routes.append((d.ipv4_text(r.SubnetAddress), d.ipv4_text(r.SubnetMask),
                               d.ipv4_text(r.GatewayAddress)))
        return d.ipv4_text(info.StationAddress), d.ipv4_text(info.SubnetMask), routes

    def addresses(self, data_type):
        status, buf = self.get(data_type)
        if status != efi.EFI_SUCCESS:
            return status
        raw = bytearray(buf.raw)
        return ["%d.%d.%d.%d" % tuple(raw[i:i + 4]) for i in range(0, len(raw), 4)]

    def event(self):
        ev = efi.EFI_EVENT()
        assert bs().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(ev)) == efi.EFI_SUCCESS
        self.events.append(ev.value)
        return ev.value

    def register(self, data_type, event):
        status = self.proto.RegisterDataNotify(byref(self.proto), data_type, event)
        if status == efi.EFI_SUCCESS:
            self.registered.append((data_type, event))
        return status

    def unregister(self, data_type, event):
        status = self.proto.UnregisterDataNotify(byref(self.proto), data_type, event)
        if status == efi.EFI_SUCCESS:
            self.registered.remove((data_type, event))
        return status

    def close(self):
        for data_type, event in list(self.registered):
            assert self.unregister(data_type, event) == efi.EFI_SUCCESS
        for event in self.events:
            assert bs().CloseEvent(event) == efi.EFI_SUCCESS


@pytest.fixture
def config2(machine):
    c = Config2()
    yield c
    c.close()


def signalled(event):
    return bs().CheckEvent(event) == efi.EFI_SUCCESS


def wait_for_address(config2, deadline=DHCP_DEADLINE):
    end = time.time() + deadline
    while time.time() < end:
        address = config2.info()[0]
        if address != "0.0.0.0":
            return address
        time.sleep(0.02)
    return None


def manual(address, mask):
    m = d.EFI_IP4_CONFIG2_MANUAL_ADDRESS()
    m.Address = d.ipv4(address)
    m.SubnetMask = d.ipv4(mask)
    return m


def ipv4_array(*texts):
    return (d.EFI_IPv4_ADDRESS * len(texts))(*[d.ipv4(t) for t in texts])


# ----------------------------------------------------------------------------- default state
def test_default_policy_is_static_with_no_address(config2):
    assert config2.policy() == d.Ip4Config2PolicyStatic
    assert config2.info() == ("0.0.0.0", "0.0.0.0", [])
    for data_type in (MANUAL_ADDRESS, GATEWAY_TYPE, DNS_SERVER):
        assert config2.get_raw(data_type, 0)[0] == efi.EFI_NOT_FOUND


def test_interface_info_names_the_nic(machine, config2):
    status, buf = config2.get(INTERFACE_INFO)
    info = d.EFI_IP4_CONFIG2_INTERFACE_INFO.from_buffer(buf)
    name = u"".join(chr(c) for c in info.Name if c)
    assert name == "eth0" and info.IfType == 1 and info.HwAddressSize == 6
    assert bytes(bytearray(info.HwAddress.Addr[:6])) == machine.nic.mac


# ----------------------------------------------------------------------------- GetData checks
def test_get_data_parameter_checks(config2):
    p = config2.proto
    assert p.GetData(byref(p), POLICY, None, None) == efi.EFI_INVALID_PARAMETER
    size = efi.UINTN(4)
    assert p.GetData(byref(p), POLICY, byref(size), None) == efi.EFI_INVALID_PARAMETER
    assert p.GetData(None, POLICY, byref(efi.UINTN(0)), None) == efi.EFI_INVALID_PARAMETER
    assert config2.get_raw(d.Ip4Config2DataTypeMaximum, 0)[0] == efi.EFI_NOT_FOUND


def test_get_data_buffer_too_small_reports_the_size(config2):
    assert config2.get_raw(POLICY, 0)[:2] == (efi.EFI_BUFFER_TOO_SMALL, 4)
    assert config2.get_raw(POLICY, 2)[:2] == (efi.EFI_BUFFER_TOO_SMALL, 4)
    status, size, buf = config2.get_raw(POLICY, 16)
    assert (status, size) == (efi.EFI_SUCCESS, 4)
    assert config2.get_raw(INTERFACE_INFO, 0)[:2] == (efi.EFI_BUFFER_TOO_SMALL, INFO_SIZE)


@pytest.mark.machine(static=True, dns_servers=["127.0.0.1:5353"])
def test_interface_info_of_exact_struct_size_is_too_small_once_routes_exist(config2):
    # EDK2 quirk (docs/edk2.md section 5.2): required size = sizeof(INTERFACE_INFO) + RouteTableSize x 12.
    status, size, _ = config2.get_raw(INTERFACE_INFO, INFO_SIZE)
    assert (status, size) == (efi.EFI_BUFFER_TOO_SMALL, INFO_SIZE + 2 * ROUTE_SIZE)


# ----------------------------------------------------------------------------- SetData checks
def test_set_data_parameter_checks(config2):
    p = config2.proto
    policy = ctypes.c_int(d.Ip4Config2PolicyDhcp)
    assert p.SetData(byref(p), POLICY, 4, None) == efi.EFI_INVALID_PARAMETER
    assert p.SetData(byref(p), POLICY, 0, byref(policy)) == efi.EFI_INVALID_PARAMETER
    assert p.SetData(None, POLICY, 4, byref(policy)) == efi.EFI_INVALID_PARAMETER
    assert config2.set(d.Ip4Config2DataTypeMaximum, policy) == efi.EFI_UNSUPPORTED
    info = d.EFI_IP4_CONFIG2_INTERFACE_INFO()
    assert config2.set(INTERFACE_INFO, info) == efi.EFI_WRITE_PROTECTED
    assert config2.set(POLICY, ctypes.c_int64(1)) == efi.EFI_BAD_BUFFER_SIZE
    assert config2.set_policy(d.Ip4Config2PolicyMax) == efi.EFI_INVALID_PARAMETER
    assert config2.set_policy(-1) == efi.EFI_INVALID_PARAMETER  # an enum: compared unsigned
    assert config2.policy() == d.Ip4Config2PolicyStatic  # nothing changed


# ----------------------------------------------------------------------------- DHCP
@pytest.mark.parametrize("profile", [
    pytest.param(p, marks=pytest.mark.machine(firmware=p, dhcp_delay=0.2,
                                              dns_servers=["127.0.0.1:5353", "127.0.0.3:53"]))
    for p in ("edk2", "edk2-2015")])
def test_dhcp_returns_success_at_once_and_configures_later(machine, config2, profile):
    assert machine.config.firmware == profile
    # EDK2 quirk (docs/edk2.md section 5.2): SetData(Policy=Dhcp) returns EFI_SUCCESS, not EFI_NOT_READY.
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert config2.info()[0] == "0.0.0.0"
    assert wait_for_address(config2) == ADDRESS
    assert config2.info() == (ADDRESS, MASK, [("127.0.0.0", MASK, "0.0.0.0"), ("0.0.0.0", "0.0.0.0", GATEWAY)])
    assert config2.addresses(DNS_SERVER) == ["127.0.0.1", "127.0.0.3"]
    assert machine.nic.dns_ports == {"127.0.0.1": 5353, "127.0.0.3": 53}
    # Under Dhcp ManualAddress and Gateway are always NOT_FOUND (the router is only a route).
    assert config2.get_raw(MANUAL_ADDRESS, 0)[0] == efi.EFI_NOT_FOUND
    assert config2.get_raw(GATEWAY_TYPE, 0)[0] == efi.EFI_NOT_FOUND
    assert machine.nic.ip4.address == ADDRESS


def test_dhcp_completion_signals_no_event(config2):
    # EDK2 quirk (docs/edk2.md section 5.2): no notification on DHCP completion, not even for InterfaceInfo.
    info_event, dns_event, policy_event = config2.event(), config2.event(), config2.event()
    assert config2.register(INTERFACE_INFO, info_event) == efi.EFI_SUCCESS
    assert config2.register(POLICY, policy_event) == efi.EFI_SUCCESS
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert signalled(policy_event)
    assert config2.register(DNS_SERVER, dns_event) == efi.EFI_SUCCESS
    assert wait_for_address(config2) == ADDRESS
    assert not signalled(info_event) and not signalled(dns_event) and not signalled(policy_event)


@pytest.mark.machine(dhcp=False)
def test_no_dhcp_server_never_configures_and_is_not_retried(machine, config2, monkeypatch):
    monkeypatch.setattr(ip4config2, "DHCP_GIVE_UP", 0.5)
    driver = machine.drivers["ip4config2"]
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert wait_for_address(config2, 1.0) is None
    assert driver.dhcp is None and driver.dhcp_runs == 1  # gave up; no retry on its own
    # Dhcp that has not succeeded: setting Dhcp again restarts it (docs/edk2.md section 5.2).
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert driver.dhcp is not None and driver.dhcp_runs == 2


@pytest.mark.machine(faults="no_dhcp")
def test_no_dhcp_fault(machine, config2):
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert wait_for_address(config2, 0.8) is None
    assert machine.drivers["ip4config2"].dhcp is not None  # still retransmitting DISCOVERs


@pytest.mark.machine(timer=False)
def test_dhcp_needs_the_timer(machine, config2):
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert wait_for_address(config2, 0.6) is None  # dhcp_delay (0.3 s) has long passed
    with machine.firmware.lock:
        machine.firmware.tick()
    assert config2.info()[0] == ADDRESS  # the lease arrives on the first timer tick after it is due


@pytest.mark.machine(dhcp_delay=0.3)
def test_same_dhcp_policy_while_running_does_not_restart(machine, config2):
    driver = machine.drivers["ip4config2"]
    event = config2.event()
    assert config2.register(POLICY, event) == efi.EFI_SUCCESS
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert signalled(event)
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert signalled(event) and driver.dhcp_runs == 1
    assert wait_for_address(config2) == ADDRESS
    # Dhcp that already succeeded: EFI_SUCCESS, nothing happens, the event still fires.
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert signalled(event) and driver.dhcp_runs == 1 and config2.info()[0] == ADDRESS


def test_policy_change_tears_down_the_address_and_clears_items(machine, config2):
    changes = []
    machine.nic.address_listeners.append(lambda old, new: changes.append((old, new)))
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert wait_for_address(config2) == ADDRESS
    events = dict((t, config2.event()) for t in (MANUAL_ADDRESS, GATEWAY_TYPE, DNS_SERVER, POLICY))
    for data_type, event in events.items():
        assert config2.register(data_type, event) == efi.EFI_SUCCESS
    assert config2.set_policy(d.Ip4Config2PolicyStatic) == efi.EFI_SUCCESS
    assert all(signalled(e) for e in events.values())
    assert config2.info() == ("0.0.0.0", "0.0.0.0", [])
    assert changes == [(None, ADDRESS), (ADDRESS, None)]
    for data_type in (MANUAL_ADDRESS, GATEWAY_TYPE, DNS_SERVER):
        assert config2.get_raw(data_type, 0)[0] == efi.EFI_NOT_FOUND


def test_same_static_policy_succeeds_and_signals(config2):
    event = config2.event()
    assert config2.register(POLICY, event) == efi.EFI_SUCCESS
    assert config2.set_policy(d.Ip4Config2PolicyStatic) == efi.EFI_SUCCESS
    assert signalled(event) and config2.info()[0] == "0.0.0.0"


def test_use_default_address_side_effect_switches_to_dhcp(machine, config2):
    # Facts 3.7: a UseDefaultAddress child on an unconfigured Static NIC switches it to Dhcp.
    event = config2.event()
    assert config2.register(POLICY, event) == efi.EFI_SUCCESS
    assert ip4config2.request_dhcp(machine) is True
    assert signalled(event) and config2.policy() == d.Ip4Config2PolicyDhcp
    assert wait_for_address(config2) == ADDRESS
    assert ip4config2.request_dhcp(machine) is False


@pytest.mark.machine(static=True)
def test_use_default_address_leaves_a_static_address_alone(machine, config2):
    assert ip4config2.request_dhcp(machine) is False
    assert config2.policy() == d.Ip4Config2PolicyStatic


# ----------------------------------------------------------------------------- static items
@pytest.mark.machine(static=True, dns_servers=["127.0.0.1:5353"])
def test_static_machine_is_configured_at_boot(config2):
    assert config2.policy() == d.Ip4Config2PolicyStatic
    assert config2.info() == (ADDRESS, MASK, [("127.0.0.0", MASK, "0.0.0.0"), ("0.0.0.0", "0.0.0.0", GATEWAY)])
    status, buf = config2.get(MANUAL_ADDRESS)
    m = d.EFI_IP4_CONFIG2_MANUAL_ADDRESS.from_buffer(buf)
    assert (d.ipv4_text(m.Address), d.ipv4_text(m.SubnetMask)) == (ADDRESS, MASK)
    assert config2.addresses(GATEWAY_TYPE) == [GATEWAY]
    assert config2.addresses(DNS_SERVER) == [DNS]


def test_manual_address_rules(machine, config2):
    event = config2.event()
    assert config2.register(MANUAL_ADDRESS, event) == efi.EFI_SUCCESS
    assert config2.set(MANUAL_ADDRESS, manual("127.0.0.5", MASK), size=7) == efi.EFI_BAD_BUFFER_SIZE
    for address, mask in (("127.0.0.5", "255.0.255.0"),   # mask not contiguous
                          ("127.0.0.0", MASK),            # the subnet itself
                          ("127.255.255.255", MASK),      # its broadcast
                          ("224.0.0.1", "255.255.255.0"),  # class D
                          ("127.0.0.5", "0.0.0.0")):      # only 0.0.0.0/0 may have a 0 mask
        assert config2.set(MANUAL_ADDRESS, manual(address, mask)) == efi.EFI_INVALID_PARAMETER
    assert not signalled(event)
    # Applied synchronously: no DAD for IPv4 (docs/edk2.md section 5.2).
    assert config2.set(MANUAL_ADDRESS, manual("127.0.0.5", MASK)) == efi.EFI_SUCCESS
    assert signalled(event)
    assert config2.info() == ("127.0.0.5", MASK, [("127.0.0.0", MASK, "0.0.0.0")])
    assert machine.nic.ip4.address == "127.0.0.5"
    assert config2.set(MANUAL_ADDRESS, manual("127.0.0.5", MASK)) == efi.EFI_SUCCESS  # same: no change
    assert signalled(event)
    assert config2.get_raw(MANUAL_ADDRESS, 4)[:2] == (efi.EFI_BUFFER_TOO_SMALL, 8)
    # NULL/0 clears the address.
    assert config2.set(MANUAL_ADDRESS) == efi.EFI_SUCCESS
    assert config2.info()[0] == "0.0.0.0" and machine.nic.ip4.address is None
    assert config2.get_raw(MANUAL_ADDRESS, 0)[0] == efi.EFI_NOT_FOUND


def test_static_items_are_write_protected_under_dhcp(config2):
    assert config2.set_policy(d.Ip4Config2PolicyDhcp) == efi.EFI_SUCCESS
    assert config2.set(MANUAL_ADDRESS, manual("127.0.0.5", MASK)) == efi.EFI_WRITE_PROTECTED
    assert config2.set(GATEWAY_TYPE, ipv4_array(GATEWAY)) == efi.EFI_WRITE_PROTECTED
    assert config2.set(DNS_SERVER, ipv4_array(DNS)) == efi.EFI_WRITE_PROTECTED
    # The size check comes first, as in Ip4Config2SetManualAddress.
    assert config2.set(MANUAL_ADDRESS, manual("127.0.0.5", MASK), size=5) == efi.EFI_BAD_BUFFER_SIZE


def test_gateway_rules(config2):
    assert config2.set(MANUAL_ADDRESS, manual("127.0.0.5", MASK)) == efi.EFI_SUCCESS
    assert config2.set(GATEWAY_TYPE, ipv4_array(GATEWAY), size=6) == efi.EFI_BAD_BUFFER_SIZE
    assert config2.set(GATEWAY_TYPE, ipv4_array(GATEWAY, GATEWAY)) == efi.EFI_INVALID_PARAMETER
    assert config2.set(GATEWAY_TYPE, ipv4_array("127.255.255.255")) == efi.EFI_INVALID_PARAMETER
    assert config2.get_raw(GATEWAY_TYPE, 0)[0] == efi.EFI_NOT_FOUND
    assert config2.set(GATEWAY_TYPE, ipv4_array(GATEWAY, "127.0.0.9")) == efi.EFI_SUCCESS
    assert config2.addresses(GATEWAY_TYPE) == [GATEWAY, "127.0.0.9"]
    assert config2.info()[2] == [("127.0.0.0", MASK, "0.0.0.0"), ("0.0.0.0", "0.0.0.0", GATEWAY),
                                 ("0.0.0.0", "0.0.0.0", "127.0.0.9")]
    assert config2.set(GATEWAY_TYPE) == efi.EFI_SUCCESS
    assert config2.info()[2] == [("127.0.0.0", MASK, "0.0.0.0")]


def test_dns_server_rules(config2):
    event = config2.event()
    assert config2.register(DNS_SERVER, event) == efi.EFI_SUCCESS
    assert config2.set(DNS_SERVER, ipv4_array(DNS), size=3) == efi.EFI_BAD_BUFFER_SIZE
    assert config2.set(DNS_SERVER, ipv4_array("0.0.0.0")) == efi.EFI_INVALID_PARAMETER
    assert config2.set(DNS_SERVER, ipv4_array(DNS, "255.255.255.255")) == efi.EFI_INVALID_PARAMETER
    assert not signalled(event)
    assert config2.set(DNS_SERVER, ipv4_array(DNS, "127.0.0.4")) == efi.EFI_SUCCESS
    assert signalled(event)
    assert config2.get_raw(DNS_SERVER, 4)[:2] == (efi.EFI_BUFFER_TOO_SMALL, 8)
    assert config2.addresses(DNS_SERVER) == [DNS, "127.0.0.4"]
    assert config2.set(DNS_SERVER, ipv4_array(DNS, "127.0.0.4")) == efi.EFI_SUCCESS  # identical: no change
    assert signalled(event)
    assert config2.set(DNS_SERVER) == efi.EFI_SUCCESS
    assert config2.get_raw(DNS_SERVER, 0)[0] == efi.EFI_NOT_FOUND


# ----------------------------------------------------------------------------- notify registration
def test_register_and_unregister_rules(machine, config2):
    p = config2.proto
    event = config2.event()
    assert p.RegisterDataNotify(byref(p), POLICY, None) == efi.EFI_INVALID_PARAMETER
    assert p.RegisterDataNotify(None, POLICY, event) == efi.EFI_INVALID_PARAMETER
    assert config2.register(d.Ip4Config2DataTypeMaximum, event) == efi.EFI_UNSUPPORTED
    assert config2.unregister(d.Ip4Config2DataTypeMaximum, event) == efi.EFI_NOT_FOUND
    assert p.UnregisterDataNotify(byref(p), POLICY, None) == efi.EFI_INVALID_PARAMETER
    assert config2.unregister(POLICY, event) == efi.EFI_NOT_FOUND
    assert config2.register(POLICY, event) == efi.EFI_SUCCESS
    assert config2.register(POLICY, event) == efi.EFI_ACCESS_DENIED
    assert config2.register(DNS_SERVER, event) == efi.EFI_SUCCESS  # same event, other type: fine
    assert machine.firmware.ledger()["ip4config2_notify"] == 2
    assert config2.unregister(POLICY, event) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["ip4config2_notify"] == 1
    assert config2.unregister(DNS_SERVER, event) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["ip4config2_notify"] == 0


def test_notify_runs_after_set_data_returns_at_callback(machine, config2):
    # SetData runs at TPL_CALLBACK: a TPL_CALLBACK notify runs once, as SetData restores the TPL.
    seen = []
    current_tpl = []

    def notify(event, context):
        old = bs().RaiseTPL(efi.TPL_HIGH_LEVEL)
        bs().RestoreTPL(old)
        seen.append((event, context))
        current_tpl.append(old)

    function = efi.EFI_EVENT_NOTIFY(notify)
    ev = efi.EFI_EVENT()
    assert bs().CreateEvent(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, function, ctypes.c_void_p(77),
                            byref(ev)) == efi.EFI_SUCCESS
    config2.events.append(ev.value)
    assert config2.register(POLICY, ev.value) == efi.EFI_SUCCESS
    assert config2.set_policy(d.Ip4Config2PolicyStatic) == efi.EFI_SUCCESS
    assert seen == [(ev.value, 77)] and current_tpl == [efi.TPL_CALLBACK]


@pytest.mark.leaks_ok
def test_registered_event_counts_in_the_ledger_until_unregistered(machine):
    c = Config2()
    event = c.event()
    assert c.register(POLICY, event) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["ip4config2_notify"] == 1
    assert machine.firmware.ledger()["events"] == 1


# ----------------------------------------------------------------------------- machine config
def test_machine_config_refuses_non_loopback_addresses():
    from efisim.machine import MachineConfig
    for options in (dict(address="10.0.2.15/24"), dict(gateway="10.0.2.2"),
                    dict(dns_servers=["8.8.8.8:53"]), dict(address="127.0.0.2/40"),
                    dict(address="127.0.0/8"), dict(faults="no_such_fault")):
        with pytest.raises(ValueError):
            MachineConfig(**options)
    MachineConfig(address="127.1.2.3/16", gateway="127.1.0.1", dns_servers=["127.0.0.1:5353"])
