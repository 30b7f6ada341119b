"""Simulated EFI_IP6_CONFIG_PROTOCOL: policies, manual addresses with DAD, notify events, GetData sizes.

Raw EFI only (efi + efidefs through tests/efiraw6.py); the behaviour is that of
docs/edk2.md section 5.3 and the model's notes in tools/efisim/ip6config.py: link-local at once,
the usable address ::1 after SLAAC (policy Automatic) or after DAD on a manual address.
"""

from __future__ import print_function

import ctypes
import socket
import time

import efi
import pytest

import conftest
import efiraw
import efiraw6 as r6
from bitsnet import efidefs

pytestmark = pytest.mark.machine(static=True, ipv6_delay=0.2)
S = efi
LINK_LOCAL = "fe80::5054:ff:fe12:3456"  # from the NIC's MAC 52:54:00:12:34:56 (modified EUI-64)
T = efidefs  # data types and policies


def _name(status):
    return efi.efi_status_decode.get(status, status)


def _signalled(event, timeout=3.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if efiraw.boot_services().CheckEvent(event) == S.EFI_SUCCESS:
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def events():
    made = []

    def make():
        made.append(efiraw.create_event())
        return made[-1]
    yield make
    for event in made:
        efiraw.close_event(event)


def test_the_default_is_manual_with_only_a_link_local_address(machine):
    config = r6.Ip6Config()
    assert config.policy() == T.Ip6ConfigPolicyManual  # EDK2's default (docs/edk2.md section 5.3)
    assert config.addresses() == [(LINK_LOCAL, 64)]
    for data_type in (T.Ip6ConfigDataTypeManualAddress, T.Ip6ConfigDataTypeGateway, T.Ip6ConfigDataTypeDnsServer):
        assert config.get_raw(data_type)[0] == S.EFI_NOT_FOUND
    status, raw, _ = config.get_raw(T.Ip6ConfigDataTypeDupAddrDetectTransmits)
    assert status == S.EFI_SUCCESS and ctypes.c_uint32.from_buffer_copy(raw).value == 1
    status, raw, _ = config.get_raw(T.Ip6ConfigDataTypeAltInterfaceId)
    assert status == S.EFI_SUCCESS and bytearray(raw) == bytearray([0x50, 0x54, 0, 0xFF, 0xFE, 0x12, 0x34, 0x56])


def test_interface_info_needs_room_for_its_tables(machine):
    config = r6.Ip6Config()
    status, needed, _ = config.get_raw(T.Ip6ConfigDataTypeInterfaceInfo, size=0)
    assert status == S.EFI_BUFFER_TOO_SMALL
    # the structure, one EFI_IP6_ADDRESS_INFO (17) and one EFI_IP6_ROUTE_TABLE (33: fe80::/64)
    assert needed == 136 + 17 + 33
    status, _, _ = config.get_raw(T.Ip6ConfigDataTypeInterfaceInfo, size=needed - 1)
    assert status == S.EFI_BUFFER_TOO_SMALL
    status, _, buf = config.get_raw(T.Ip6ConfigDataTypeInterfaceInfo, size=needed)
    assert status == S.EFI_SUCCESS
    info = efidefs.EFI_IP6_CONFIG_INTERFACE_INFO.from_buffer(buf)
    assert u"".join(chr(c) for c in info.Name if c) == "eth0"
    assert info.HwAddressSize == 6 and list(info.HwAddress.Addr[:6]) == [0x52, 0x54, 0, 0x12, 0x34, 0x56]
    base = ctypes.addressof(buf)
    # AddressInfo and RouteTable point into the caller's buffer, right after the structure.
    assert ctypes.cast(info.AddressInfo, ctypes.c_void_p).value == base + 136
    assert ctypes.cast(info.RouteTable, ctypes.c_void_p).value == base + 136 + 17
    assert info.RouteCount == 1 and info.RouteTable[0].PrefixLength == 64
    assert r6.ip6_text(info.RouteTable[0].Destination) == "fe80::"


def test_policy_automatic_brings_the_address_after_slaac(machine, events):
    config = r6.Ip6Config()
    policy_event = events()
    assert config.register(T.Ip6ConfigDataTypePolicy, policy_event) == S.EFI_SUCCESS
    assert config.register(T.Ip6ConfigDataTypePolicy, policy_event) == S.EFI_ACCESS_DENIED
    started = time.time()
    assert config.set_policy(T.Ip6ConfigPolicyAutomatic) == S.EFI_SUCCESS
    assert _signalled(policy_event, timeout=0.1)  # signalled by SetData itself
    assert config.policy() == T.Ip6ConfigPolicyAutomatic
    assert config.addresses() == [(LINK_LOCAL, 64)]  # SLAAC takes ipv6_delay
    assert config.wait_for("::1")
    assert time.time() - started >= 0.15
    assert config.addresses() == [(LINK_LOCAL, 64), ("::1", 128)]
    # Under Automatic the manual items are not settable (docs/edk2.md section 5.3 / Ip6Config.h).
    entry = r6.manual_address("::1")
    assert config.set(T.Ip6ConfigDataTypeManualAddress, entry) == S.EFI_WRITE_PROTECTED
    assert config.set(T.Ip6ConfigDataTypeGateway, r6.ip6("fe80::1")) == S.EFI_WRITE_PROTECTED
    assert config.set(T.Ip6ConfigDataTypeDnsServer, r6.ip6("2001:db8::53")) == S.EFI_WRITE_PROTECTED
    # Back to Manual: what SLAAC configured goes away.
    assert config.set_policy(T.Ip6ConfigPolicyManual) == S.EFI_SUCCESS
    assert config.addresses() == [(LINK_LOCAL, 64)]
    assert config.unregister(T.Ip6ConfigDataTypePolicy, policy_event) == S.EFI_SUCCESS
    assert config.unregister(T.Ip6ConfigDataTypePolicy, policy_event) == S.EFI_NOT_FOUND


def test_a_manual_address_goes_through_dad_and_signals_its_notify(machine, events):
    config = r6.Ip6Config()
    done = events()
    assert config.register(T.Ip6ConfigDataTypeManualAddress, done) == S.EFI_SUCCESS
    entry = r6.manual_address("::1")
    # Facts 5.3: DAD runs first -> EFI_NOT_READY; meanwhile the item is not readable or settable.
    assert config.set(T.Ip6ConfigDataTypeManualAddress, entry) == S.EFI_NOT_READY
    assert config.get_raw(T.Ip6ConfigDataTypeManualAddress)[0] == S.EFI_NOT_READY
    assert config.set(T.Ip6ConfigDataTypeManualAddress, entry) == S.EFI_ACCESS_DENIED
    tcp = r6.Tcp6()
    assert tcp.configure(r6.tcp6_config(active=False)) == S.EFI_NO_MAPPING  # not usable during DAD
    assert _signalled(done)
    status, raw, _ = config.get_raw(T.Ip6ConfigDataTypeManualAddress)
    assert status == S.EFI_SUCCESS and len(raw) == 18
    stored = efidefs.EFI_IP6_CONFIG_MANUAL_ADDRESS.from_buffer_copy(raw)
    assert r6.ip6_text(stored.Address) == "::1" and stored.PrefixLength == 128
    assert ("::1", 128) in config.addresses()
    assert tcp.configure(r6.tcp6_config(active=False)) == S.EFI_SUCCESS
    assert tcp.destroy() == S.EFI_SUCCESS
    # Clearing the address (DataSize 0, Data NULL) takes it away again, at once.
    assert config.set(T.Ip6ConfigDataTypeManualAddress) == S.EFI_SUCCESS
    assert _signalled(done, timeout=0.1)
    assert config.addresses() == [(LINK_LOCAL, 64)]
    assert config.unregister(T.Ip6ConfigDataTypeManualAddress, done) == S.EFI_SUCCESS


def test_without_dad_transmits_a_manual_address_is_there_at_once(machine):
    config = r6.Ip6Config()
    assert config.set(T.Ip6ConfigDataTypeDupAddrDetectTransmits, ctypes.c_uint32(0)) == S.EFI_SUCCESS
    assert config.set(T.Ip6ConfigDataTypeManualAddress, r6.manual_address("::1")) == S.EFI_SUCCESS
    assert ("::1", 128) in config.addresses()
    # A policy change clears the manual configuration (and so removes the address).
    assert config.set_policy(T.Ip6ConfigPolicyAutomatic) == S.EFI_SUCCESS
    assert config.get_raw(T.Ip6ConfigDataTypeManualAddress)[0] == S.EFI_NOT_FOUND
    assert ("::1", 128) not in config.addresses()


def test_gateway_and_dns_servers_round_trip_under_manual(machine):
    config = r6.Ip6Config()
    servers = (efidefs.EFI_IPv6_ADDRESS * 2)(r6.ip6("2001:db8::53"), r6.ip6("2001:db8::54"))
    assert config.set(T.Ip6ConfigDataTypeDnsServer, servers) == S.EFI_SUCCESS
    status, raw, _ = config.get_raw(T.Ip6ConfigDataTypeDnsServer)
    assert status == S.EFI_SUCCESS and raw == bytes(bytearray(servers[0].Addr)) + bytes(bytearray(servers[1].Addr))
    status, needed, _ = config.get_raw(T.Ip6ConfigDataTypeDnsServer, size=16)
    assert status == S.EFI_BUFFER_TOO_SMALL and needed == 32
    assert config.set(T.Ip6ConfigDataTypeGateway, r6.ip6("fe80::1")) == S.EFI_SUCCESS
    status, needed, buf = config.get_raw(T.Ip6ConfigDataTypeInterfaceInfo)
    info = efidefs.EFI_IP6_CONFIG_INTERFACE_INFO.from_buffer(buf)
    routes = [(r6.ip6_text(info.RouteTable[i].Gateway), r6.ip6_text(info.RouteTable[i].Destination),
               info.RouteTable[i].PrefixLength) for i in range(info.RouteCount)]
    assert ("fe80::1", "::", 0) in routes  # the default route through the gateway


@pytest.mark.parametrize("data_type,data,size,expected", [
    (T.Ip6ConfigDataTypeInterfaceInfo, ctypes.c_uint32(0), None, S.EFI_WRITE_PROTECTED),
    (T.Ip6ConfigDataTypePolicy, ctypes.c_uint32(2), None, S.EFI_INVALID_PARAMETER),
    (T.Ip6ConfigDataTypePolicy, ctypes.c_uint16(1), None, S.EFI_BAD_BUFFER_SIZE),
    (T.Ip6ConfigDataTypeAltInterfaceId, ctypes.c_uint32(1), None, S.EFI_BAD_BUFFER_SIZE),
    (T.Ip6ConfigDataTypeManualAddress, r6.manual_address("::1"), 17, S.EFI_BAD_BUFFER_SIZE),
    (T.Ip6ConfigDataTypeManualAddress, r6.manual_address("ff02::1"), None, S.EFI_INVALID_PARAMETER),
    (T.Ip6ConfigDataTypeManualAddress, r6.manual_address("::"), None, S.EFI_INVALID_PARAMETER),
    (T.Ip6ConfigDataTypeGateway, r6.ip6("ff02::2"), None, S.EFI_INVALID_PARAMETER),
    (T.Ip6ConfigDataTypeDnsServer, r6.ip6("::1"), 15, S.EFI_BAD_BUFFER_SIZE),
    (T.Ip6ConfigDataTypeMaximum, ctypes.c_uint32(0), None, S.EFI_UNSUPPORTED),
])
def test_set_data_checks(machine, data_type, data, size, expected):
    assert _name(r6.Ip6Config().set(data_type, data, size)) == _name(expected)


@pytest.mark.machine(static=True, ipv6_policy="automatic", ipv6_delay=None)
def test_without_a_router_automatic_never_yields_an_address(machine):
    config = r6.Ip6Config()
    assert config.policy() == T.Ip6ConfigPolicyAutomatic
    assert not config.wait_for("::1", timeout=0.3)
    assert config.addresses() == [(LINK_LOCAL, 64)]


@pytest.mark.machine(static=True, ipv6=False)
def test_firmware_without_ipv6_has_none_of_its_protocols(machine):
    for guid in (efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID, efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID,
                 efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID):
        with pytest.raises(efi.EFIException):
            efi.locate_handles(guid)  # EFI_NOT_FOUND
    assert efi.locate_handles(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)  # IPv4 is still there


DNS_PORT = conftest.port(7)  # this process's slot: parallel CI lanes share the one ::1


@pytest.mark.machine(static=True, ipv6_policy="automatic", ipv6_delay=0.2, ipv6_dns_servers=["[::1]:%d" % DNS_PORT])
def test_the_router_advertises_dns_servers_and_port_53_reaches_them(machine):
    server = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    server.bind(("::1", DNS_PORT))
    server.settimeout(5)
    try:
        config = r6.Ip6Config()
        assert config.get_raw(T.Ip6ConfigDataTypeDnsServer)[0] == S.EFI_NOT_FOUND  # before SLAAC
        assert config.wait_for("::1")
        status, raw, _ = config.get_raw(T.Ip6ConfigDataTypeDnsServer)
        assert status == S.EFI_SUCCESS and raw == socket.inet_pton(socket.AF_INET6, "::1")
        child = r6.Udp6()
        assert child.configure(r6.udp6_config()) == S.EFI_SUCCESS
        status, tok = child.transmit(b"query", "::1", 53)
        assert status == S.EFI_SUCCESS and tok.wait(child) == S.EFI_SUCCESS
        data, client = server.recvfrom(100)  # port 53 on the wire is the simulated server's real port
        assert data == b"query"
        status, rx = child.receive()
        assert status == S.EFI_SUCCESS
        server.sendto(b"answer", client)
        assert rx.wait(child) == S.EFI_SUCCESS
        payload, source, sport, _, _ = r6.take_datagram(rx)
        assert (payload, source, sport) == (b"answer", "::1", 53)  # and it answers as port 53
        assert child.destroy() == S.EFI_SUCCESS
    finally:
        server.close()


def test_machine_config_checks_the_ipv6_options():
    from efisim import machine as efimachine
    with pytest.raises(ValueError):
        efimachine.MachineConfig(ipv6_policy="dhcp")
    with pytest.raises(ValueError):
        efimachine.MachineConfig(ipv6_dns_servers=["[2001:db8::53]:53"])  # the wire reaches only ::1
    with pytest.raises(ValueError):
        efimachine.MachineConfig(ipv6_dns_servers=["[::1]:0"])
    assert efimachine.ipv6_dns_host_port("[::1]:5353") == ("::1", 5353)
    assert efimachine.ipv6_dns_host_port("::1") == ("::1", 53)
