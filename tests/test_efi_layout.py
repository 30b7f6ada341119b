"""bitsnet.efidefs against the x64 sizes and offsets of docs/edk2.md (computed there by
compiling the real MdePkg headers). A wrong alignment here would make every firmware call
read garbage, so each number is pinned."""

from __future__ import print_function

import ctypes

import pytest

from bitsnet import efidefs as d

if ctypes.sizeof(ctypes.c_void_p) != 8:  # pragma: no cover - the facts table is for x64
    pytest.skip("layout table is for x64 hosts", allow_module_level=True)

# (structure, size, {field: offset})
LAYOUT = [
    (d.EFI_IPv4_ADDRESS, 4, {}),
    (d.EFI_IPv6_ADDRESS, 16, {}),
    (d.EFI_IP_ADDRESS, 16, {}),
    (d.EFI_MAC_ADDRESS, 32, {}),
    (d.EFI_SERVICE_BINDING_PROTOCOL, 16, {"CreateChild": 0, "DestroyChild": 8}),
    (d.EFI_TCP4_ACCESS_POINT, 20, {"UseDefaultAddress": 0, "StationAddress": 1, "SubnetMask": 5,
                                   "StationPort": 10, "RemoteAddress": 12, "RemotePort": 16, "ActiveFlag": 18}),
    (d.EFI_TCP4_OPTION, 48, {"ReceiveBufferSize": 0, "SendBufferSize": 4, "MaxSynBackLog": 8,
                             "ConnectionTimeout": 12, "DataRetries": 16, "FinTimeout": 20, "TimeWaitTimeout": 24,
                             "KeepAliveProbes": 28, "KeepAliveTime": 32, "KeepAliveInterval": 36,
                             "EnableNagle": 40, "EnableTimeStamp": 41, "EnableWindowScaling": 42,
                             "EnableSelectiveAck": 43, "EnablePathMtuDiscovery": 44}),
    (d.EFI_TCP4_CONFIG_DATA, 32, {"TypeOfService": 0, "TimeToLive": 1, "AccessPoint": 2, "ControlOption": 24}),
    (d.EFI_TCP4_COMPLETION_TOKEN, 16, {"Event": 0, "Status": 8}),
    (d.EFI_TCP4_CONNECTION_TOKEN, 16, {"CompletionToken": 0}),
    (d.EFI_TCP4_LISTEN_TOKEN, 24, {"CompletionToken": 0, "NewChildHandle": 16}),
    (d.EFI_TCP4_FRAGMENT_DATA, 16, {"FragmentLength": 0, "FragmentBuffer": 8}),
    (d.EFI_TCP4_RECEIVE_DATA, 32, {"UrgentFlag": 0, "DataLength": 4, "FragmentCount": 8, "FragmentTable": 16}),
    (d.EFI_TCP4_TRANSMIT_DATA, 32, {"Push": 0, "Urgent": 1, "DataLength": 4, "FragmentCount": 8,
                                    "FragmentTable": 16}),
    (d.EFI_TCP4_IO_TOKEN, 24, {"CompletionToken": 0, "Packet": 16}),
    (d.EFI_TCP4_CLOSE_TOKEN, 24, {"CompletionToken": 0, "AbortOnClose": 16}),
    (d.EFI_TCP4_PROTOCOL, 80, {"GetModeData": 0, "Configure": 8, "Routes": 16, "Connect": 24, "Accept": 32,
                               "Transmit": 40, "Receive": 48, "Close": 56, "Cancel": 64, "Poll": 72}),
    (d.EFI_IP4_CONFIG_DATA, 28, {"DefaultProtocol": 0, "AcceptAnyProtocol": 1, "AcceptIcmpErrors": 2,
                                 "AcceptBroadcast": 3, "AcceptPromiscuous": 4, "UseDefaultAddress": 5,
                                 "StationAddress": 6, "SubnetMask": 10, "TypeOfService": 14, "TimeToLive": 15,
                                 "DoNotFragment": 16, "RawData": 17, "ReceiveTimeout": 20, "TransmitTimeout": 24}),
    (d.EFI_IP4_MODE_DATA, 88, {"IsStarted": 0, "MaxPacketSize": 4, "ConfigData": 8, "IsConfigured": 36,
                               "GroupCount": 40, "GroupTable": 48, "RouteCount": 56, "RouteTable": 64,
                               "IcmpTypeCount": 72, "IcmpTypeList": 80}),
    (d.EFI_IP4_ROUTE_TABLE, 12, {"SubnetAddress": 0, "SubnetMask": 4, "GatewayAddress": 8}),
    (d.EFI_MANAGED_NETWORK_CONFIG_DATA, 20, {}),
    (d.EFI_SIMPLE_NETWORK_MODE, 656, {}),
    (d.EFI_IP4_CONFIG2_INTERFACE_INFO, 128, {"Name": 0, "IfType": 64, "HwAddressSize": 68, "HwAddress": 72,
                                            "StationAddress": 104, "SubnetMask": 108, "RouteTableSize": 112,
                                            "RouteTable": 120}),
    (d.EFI_IP4_CONFIG2_MANUAL_ADDRESS, 8, {"Address": 0, "SubnetMask": 4}),
    (d.EFI_IP4_CONFIG2_PROTOCOL, 32, {"SetData": 0, "GetData": 8, "RegisterDataNotify": 16,
                                      "UnregisterDataNotify": 24}),
]


@pytest.mark.parametrize("cls,size,offsets", LAYOUT, ids=[row[0].__name__ for row in LAYOUT])
def test_size_and_offsets_match_edk2_x64(cls, size, offsets):
    assert ctypes.sizeof(cls) == size
    for field, offset in offsets.items():
        assert getattr(cls, field).offset == offset, field


def test_addresses_have_alignment_one():
    # What puts EFI_TCP4_ACCESS_POINT.StationAddress at offset 1 (docs/edk2.md section 1.2).
    assert ctypes.alignment(d.EFI_IPv4_ADDRESS) == 1
    assert ctypes.alignment(d.EFI_IPv6_ADDRESS) == 1


@pytest.mark.parametrize("count", [1, 2, 7])
def test_fragment_table_variants_keep_the_spec_prefix(count):
    for base, make in ((d.EFI_TCP4_RECEIVE_DATA, d.tcp4_receive_data), (d.EFI_TCP4_TRANSMIT_DATA,
                                                                          d.tcp4_transmit_data)):
        variant = make(count)
        assert make(count) is variant  # cached
        assert ctypes.sizeof(variant) == 16 + 16 * count
        for name, _ in base._fields_:
            assert getattr(variant, name).offset == getattr(base, name).offset


def test_fragment_table_reads_the_callers_entries():
    rx = d.tcp4_receive_data(3)()
    rx.FragmentCount = 3
    for i in range(3):
        rx.FragmentTable[i].FragmentLength = 100 + i
    table = d.fragment_table(ctypes.addressof(rx) + d.EFI_TCP4_RECEIVE_DATA.FragmentTable.offset, 3)
    assert [f.FragmentLength for f in table] == [100, 101, 102]


def test_ipv4_round_trip_and_validation():
    assert d.ipv4_text(d.ipv4("10.0.2.15")) == "10.0.2.15"
    assert list(d.ipv4("10.0.2.15").Addr) == [10, 0, 2, 15]  # network byte order
    assert d.ipv4_text(d.ipv4(None)) == "0.0.0.0"
    for bad in ("1.2.3", "1.2.3.256", "a.b.c.d"):
        with pytest.raises(ValueError):
            d.ipv4(bad)


def test_every_guid_is_named_and_protocols_carry_theirs():
    assert len(set(d.GUID_NAMES)) == len(d.GUID_NAMES)
    for guid, name in d.GUID_NAMES.items():
        assert getattr(d, name) == guid
    assert d.EFI_TCP4_PROTOCOL.guid == d.EFI_TCP4_PROTOCOL_GUID
    assert d.EFI_TCP4_SERVICE_BINDING_PROTOCOL.guid == d.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID
    assert d.EFI_IP4_CONFIG2_PROTOCOL.guid == d.EFI_IP4_CONFIG2_PROTOCOL_GUID
    # docs/edk2.md section 2.5 spells the byte form out for the TCP4 service binding
    assert d.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID.bytes_le[8:] == bytearray(
        [0xBA, 0xF7, 0xD3, 0xC3, 0x3A, 0x1C, 0x7C, 0xC9])


UDP_DNS_LAYOUT = [
    (d.EFI_UDP4_CONFIG_DATA, 36, {"AcceptBroadcast": 0, "AcceptPromiscuous": 1, "AcceptAnyPort": 2,
                                  "AllowDuplicatePort": 3, "TypeOfService": 4, "TimeToLive": 5, "DoNotFragment": 6,
                                  "ReceiveTimeout": 8, "TransmitTimeout": 12, "UseDefaultAddress": 16,
                                  "StationAddress": 17, "SubnetMask": 21, "StationPort": 26, "RemoteAddress": 28,
                                  "RemotePort": 32}),
    (d.EFI_UDP4_SESSION_DATA, 12, {"SourceAddress": 0, "SourcePort": 4, "DestinationAddress": 6,
                                   "DestinationPort": 10}),
    (d.EFI_UDP4_FRAGMENT_DATA, 16, {"FragmentLength": 0, "FragmentBuffer": 8}),
    (d.EFI_UDP4_TRANSMIT_DATA, 40, {"UdpSessionData": 0, "GatewayAddress": 8, "DataLength": 16,
                                    "FragmentCount": 20, "FragmentTable": 24}),
    (d.EFI_TIME, 16, {"Year": 0, "Month": 2, "Day": 3, "Hour": 4, "Minute": 5, "Second": 6, "Pad1": 7,
                      "Nanosecond": 8, "TimeZone": 12, "Daylight": 14, "Pad2": 15}),
    (d.EFI_UDP4_RECEIVE_DATA, 64, {"TimeStamp": 0, "RecycleSignal": 16, "UdpSession": 24, "DataLength": 36,
                                   "FragmentCount": 40, "FragmentTable": 48}),
    (d.EFI_UDP4_COMPLETION_TOKEN, 24, {"Event": 0, "Status": 8, "Packet": 16}),
    (d.EFI_UDP4_PROTOCOL, 64, {"GetModeData": 0, "Configure": 8, "Groups": 16, "Routes": 24, "Transmit": 32,
                               "Receive": 40, "Cancel": 48, "Poll": 56}),
    (d.EFI_DNS4_CONFIG_DATA, 40, {"DnsServerListCount": 0, "DnsServerList": 8, "UseDefaultSetting": 16,
                                  "EnableDnsCache": 17, "Protocol": 18, "StationIp": 19, "SubnetMask": 23,
                                  "LocalPort": 28, "RetryCount": 32, "RetryInterval": 36}),
    (d.EFI_DNS4_CACHE_ENTRY, 24, {"HostName": 0, "IpAddress": 8, "Timeout": 16}),
    (d.EFI_DNS4_MODE_DATA, 72, {"DnsConfigData": 0, "DnsServerCount": 40, "DnsServerList": 48,
                                "DnsCacheCount": 56, "DnsCacheList": 64}),
    (d.DNS_HOST_TO_ADDR_DATA, 16, {"IpCount": 0, "IpList": 8}),
    (d.EFI_DNS4_COMPLETION_TOKEN, 32, {"Event": 0, "Status": 8, "RetryCount": 16, "RetryInterval": 20,
                                       "RspData": 24}),
    (d.EFI_DNS4_PROTOCOL, 64, {"GetModeData": 0, "Configure": 8, "HostNameToIp": 16, "IpToHostName": 24,
                               "GeneralLookUp": 32, "UpdateDnsCache": 40, "Poll": 48, "Cancel": 56}),
]


@pytest.mark.parametrize("cls,size,offsets", UDP_DNS_LAYOUT, ids=[row[0].__name__ for row in UDP_DNS_LAYOUT])
def test_udp4_and_dns4_match_edk2_x64(cls, size, offsets):
    assert ctypes.sizeof(cls) == size
    for field, offset in offsets.items():
        assert getattr(cls, field).offset == offset, field


def test_udp4_fragment_variants_use_udp_fragments():
    variant = d.udp4_receive_data(4)
    assert variant.FragmentTable.offset == 48 and ctypes.sizeof(variant) == 48 + 16 * 4
    assert d.udp4_transmit_data(2).FragmentTable.offset == 24


IPV6_LAYOUT = [
    # docs/edk2.md section 3.1: no UseDefaultAddress/SubnetMask in the TCP6 access point
    (d.EFI_TCP6_ACCESS_POINT, 38, {"StationAddress": 0, "StationPort": 16, "RemoteAddress": 18, "RemotePort": 34,
                                   "ActiveFlag": 36}),
    (d.EFI_TCP6_OPTION, 48, {"ReceiveBufferSize": 0, "KeepAliveInterval": 36, "EnableNagle": 40,
                             "EnablePathMtuDiscovery": 44}),
    (d.EFI_TCP6_CONFIG_DATA, 48, {"TrafficClass": 0, "HopLimit": 1, "AccessPoint": 2, "ControlOption": 40}),
    (d.EFI_TCP6_COMPLETION_TOKEN, 16, {"Event": 0, "Status": 8}),
    (d.EFI_TCP6_CONNECTION_TOKEN, 16, {"CompletionToken": 0}),
    (d.EFI_TCP6_LISTEN_TOKEN, 24, {"CompletionToken": 0, "NewChildHandle": 16}),
    (d.EFI_TCP6_FRAGMENT_DATA, 16, {"FragmentLength": 0, "FragmentBuffer": 8}),
    (d.EFI_TCP6_RECEIVE_DATA, 32, {"UrgentFlag": 0, "DataLength": 4, "FragmentCount": 8, "FragmentTable": 16}),
    (d.EFI_TCP6_TRANSMIT_DATA, 32, {"Push": 0, "Urgent": 1, "DataLength": 4, "FragmentCount": 8,
                                    "FragmentTable": 16}),
    (d.EFI_TCP6_IO_TOKEN, 24, {"CompletionToken": 0, "Packet": 16}),
    (d.EFI_TCP6_CLOSE_TOKEN, 24, {"CompletionToken": 0, "AbortOnClose": 16}),
    # docs/edk2.md section 3.2: no Routes slot, so Connect..Poll sit one slot earlier than in TCP4
    (d.EFI_TCP6_PROTOCOL, 72, {"GetModeData": 0, "Configure": 8, "Connect": 16, "Accept": 24, "Transmit": 32,
                               "Receive": 40, "Close": 48, "Cancel": 56, "Poll": 64}),
    (d.EFI_UDP6_CONFIG_DATA, 52, {"AcceptPromiscuous": 0, "AcceptAnyPort": 1, "AllowDuplicatePort": 2,
                                  "TrafficClass": 3, "HopLimit": 4, "ReceiveTimeout": 8, "TransmitTimeout": 12,
                                  "StationAddress": 16, "StationPort": 32, "RemoteAddress": 34, "RemotePort": 50}),
    (d.EFI_UDP6_SESSION_DATA, 36, {"SourceAddress": 0, "SourcePort": 16, "DestinationAddress": 18,
                                   "DestinationPort": 34}),
    (d.EFI_UDP6_FRAGMENT_DATA, 16, {"FragmentLength": 0, "FragmentBuffer": 8}),
    (d.EFI_UDP6_TRANSMIT_DATA, 32, {"UdpSessionData": 0, "DataLength": 8, "FragmentCount": 12,
                                    "FragmentTable": 16}),
    (d.EFI_UDP6_RECEIVE_DATA, 88, {"TimeStamp": 0, "RecycleSignal": 16, "UdpSession": 24, "DataLength": 60,
                                   "FragmentCount": 64, "FragmentTable": 72}),
    (d.EFI_UDP6_COMPLETION_TOKEN, 24, {"Event": 0, "Status": 8, "Packet": 16}),
    # docs/edk2.md section 4.1: GetModeData, Configure, Groups, Transmit, Receive, Cancel, Poll (no Routes)
    (d.EFI_UDP6_PROTOCOL, 56, {"GetModeData": 0, "Configure": 8, "Groups": 16, "Transmit": 24, "Receive": 32,
                               "Cancel": 40, "Poll": 48}),
    # docs/edk2.md section 5.3
    (d.EFI_IP6_CONFIG_INTERFACE_INFO, 136, {"Name": 0, "IfType": 64, "HwAddressSize": 68, "HwAddress": 72,
                                            "AddressInfoCount": 104, "AddressInfo": 112, "RouteCount": 120,
                                            "RouteTable": 128}),
    (d.EFI_IP6_ADDRESS_INFO, 17, {"Address": 0, "PrefixLength": 16}),
    (d.EFI_IP6_CONFIG_MANUAL_ADDRESS, 18, {"Address": 0, "IsAnycast": 16, "PrefixLength": 17}),
    (d.EFI_IP6_CONFIG_INTERFACE_ID, 8, {"Id": 0}),
    (d.EFI_IP6_CONFIG_DUP_ADDR_DETECT_TRANSMITS, 4, {"DupAddrDetectTransmits": 0}),
    (d.EFI_IP6_CONFIG_PROTOCOL, 32, {"SetData": 0, "GetData": 8, "RegisterDataNotify": 16,
                                     "UnregisterDataNotify": 24}),
    # docs/edk2.md section 6.1: DNS6 counts servers in a UINT32 after the station address
    (d.EFI_DNS6_CONFIG_DATA, 40, {"EnableDnsCache": 0, "Protocol": 1, "StationIp": 2, "LocalPort": 18,
                                  "DnsServerCount": 20, "DnsServerList": 24, "RetryCount": 32, "RetryInterval": 36}),
    (d.DNS6_HOST_TO_ADDR_DATA, 16, {"IpCount": 0, "IpList": 8}),
    (d.EFI_DNS6_COMPLETION_TOKEN, 32, {"Event": 0, "Status": 8, "RetryCount": 16, "RetryInterval": 20,
                                       "RspData": 24}),
    (d.EFI_DNS6_PROTOCOL, 64, {"GetModeData": 0, "Configure": 8, "HostNameToIp": 16, "IpToHostName": 24,
                               "GeneralLookUp": 32, "UpdateDnsCache": 40, "Poll": 48, "Cancel": 56}),
]


@pytest.mark.parametrize("cls,size,offsets", IPV6_LAYOUT, ids=[row[0].__name__ for row in IPV6_LAYOUT])
def test_ipv6_structures_match_edk2_x64(cls, size, offsets):
    assert ctypes.sizeof(cls) == size
    for field, offset in offsets.items():
        assert getattr(cls, field).offset == offset, field


def test_ipv6_protocols_carry_their_guids_and_the_state_names_match_tcp4():
    assert d.EFI_TCP6_PROTOCOL.guid == d.EFI_TCP6_PROTOCOL_GUID
    assert d.EFI_UDP6_PROTOCOL.guid == d.EFI_UDP6_PROTOCOL_GUID
    assert d.EFI_IP6_CONFIG_PROTOCOL.guid == d.EFI_IP6_CONFIG_PROTOCOL_GUID
    assert d.EFI_DNS6_PROTOCOL.guid == d.EFI_DNS6_PROTOCOL_GUID
    assert d.EFI_TCP6_SERVICE_BINDING_PROTOCOL.guid == d.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID
    assert d.EFI_UDP6_SERVICE_BINDING_PROTOCOL.guid == d.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID
    assert d.EFI_DNS6_SERVICE_BINDING_PROTOCOL.guid == d.EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID
    assert d.TCP6_STATE_NAMES[d.Tcp6StateTimeWait] == "Tcp6StateTimeWait"
    assert len(d.TCP6_STATE_NAMES) == 11 and d.Tcp6StateLastAck == 10


def test_ipv6_round_trip_and_validation():
    packed = bytes(bytearray([0xfe, 0x80] + [0] * 13 + [1]))
    assert list(d.ipv6(packed).Addr) == list(bytearray(packed))  # network byte order
    assert d.ipv6_bytes(d.ipv6(packed)) == packed
    assert d.ipv6_bytes(d.ipv6(None)) == b"\0" * 16
    with pytest.raises(ValueError):
        d.ipv6(b"\1" * 4)


def test_ipv6_fragment_variants():
    assert d.tcp6_receive_data(3).FragmentTable.offset == 16 and ctypes.sizeof(d.tcp6_receive_data(3)) == 64
    assert d.tcp6_transmit_data(2).FragmentTable.offset == 16
    assert d.udp6_receive_data(4).FragmentTable.offset == 72 and ctypes.sizeof(d.udp6_receive_data(4)) == 72 + 64
    assert d.udp6_transmit_data(2).FragmentTable.offset == 16


# --- efidefs is one name over three files (efidefs_common, efidefs_ip4, efidefs_ip6) -------------
_PARTS = ("efidefs_common", "efidefs_ip4", "efidefs_ip6")


def _defined_names(module):
    """The public names ``module`` defines itself: not modules, not what it takes from ctypes, efi
    or efidefs_common."""
    import efi
    from bitsnet import efidefs_common
    borrowed = [ctypes, efi] + ([efidefs_common] if module is not efidefs_common else [])
    return set(name for name, value in vars(module).items()
               if not name.startswith("_") and not isinstance(value, type(ctypes))
               and not any(getattr(other, name, None) is value for other in borrowed))


# Taken from ctypes and efi by the parts, and importable from efidefs as before (code reads d.UINT16)
_BASE_NAMES = ("POINTER", "Structure", "Union", "c_void_p", "BOOLEAN", "UINT8", "UINT16", "UINT32", "UINTN",
               "EFI_EVENT", "EFI_HANDLE", "EFI_STATUS")


def test_efidefs_reexports_every_name_of_its_parts_and_each_is_defined_once():
    import importlib
    parts = [importlib.import_module("bitsnet." + name) for name in _PARTS]
    seen = {}
    for part in parts:
        for name in sorted(_defined_names(part)):
            assert name not in seen, "%s defined in both %s and %s" % (name, seen[name], part.__name__)
            seen[name] = part.__name__
            assert getattr(d, name, None) is getattr(part, name), "efidefs.%s is not %s.%s" % (
                name, part.__name__, name)
    assert len(seen) > 170  # guard against the filter above hiding everything
    # The names the module had before the split that come from elsewhere stay importable too.
    for name in _BASE_NAMES + ("ctypes", "uuid", "efi"):
        assert hasattr(d, name), name
    # The parts hold protocol knowledge by family: no IPv6 name in the IPv4 file and back.
    ip4, ip6 = parts[1], parts[2]
    assert not [n for n in _defined_names(ip4) if "6" in n], "IPv6 names in efidefs_ip4"
    assert not [n for n in _defined_names(ip6) if "4" in n], "IPv4 names in efidefs_ip6"


def test_each_family_table_names_its_own_versions_structures():
    """family.INET / INET6 write their EFI names out; each is the spec name with the version
    digit taken out (``TCP_IO_TOKEN`` is EFI_TCP4_IO_TOKEN / EFI_TCP6_IO_TOKEN), and every name
    the Family class declares is supplied by both."""
    from bitsnet import family
    declared = [name for name in vars(family.Family) if name[:4] in ("TCP_", "UDP_", "DNS_")]
    assert len(declared) == 36
    for fam in (family.INET, family.INET6):
        for name in declared:
            spec = "EFI_%s%d_%s" % (name[:3], fam.version, name[4:])
            assert getattr(fam, name) is getattr(d, spec), (fam, name, spec)
        assert fam.tcp_sb == getattr(d, "EFI_TCP%d_SERVICE_BINDING_PROTOCOL_GUID" % fam.version)
        assert fam.udp_sb == getattr(d, "EFI_UDP%d_SERVICE_BINDING_PROTOCOL_GUID" % fam.version)
        assert fam.udp_receive_data(3) is getattr(d, "udp%d_receive_data" % fam.version)(3)
    assert family.INET.has_routes and not family.INET6.has_routes
