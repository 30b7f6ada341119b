"""UEFI IPv6 network definitions: IP6 mode data, TCP6, UDP6, IP6 Config and DNS6.

Named exactly as in the UEFI specification (and MdePkg/Include/Protocol/*.h of tianocore/edk2);
pure data on ``efidefs_common`` (GUIDs, addresses, service binding, MNP/SNP). ``efidefs``
gathers this module with the others.

Contents
  IP6              EFI_IP6_CONFIG_DATA, EFI_IP6_MODE_DATA, EFI_IP6_ADDRESS_INFO, ... (GetModeData)
  TCP6             EFI_TCP6_CONFIG_DATA ... EFI_TCP6_PROTOCOL; Tcp6State* values
  UDP6             EFI_UDP6_CONFIG_DATA ... EFI_UDP6_PROTOCOL
  IP6 Config       EFI_IP6_CONFIG_INTERFACE_INFO ... EFI_IP6_CONFIG_PROTOCOL; Ip6ConfigDataType*, Ip6ConfigPolicy*
  DNS6             EFI_DNS6_CONFIG_DATA ... EFI_DNS6_PROTOCOL
  fragment tables  tcp6_receive_data(n), tcp6_transmit_data(n), udp6_*_data(n)

The layout rules (byte-array addresses with alignment 1, host-order ports, native UINTN) and
the fragment-table convention are described once, in ``efidefs``.
"""

import ctypes
from ctypes import POINTER, Structure, Union, c_void_p

import efi
from efi import BOOLEAN, UINT8, UINT16, UINT32, UINTN, EFI_EVENT, EFI_HANDLE, EFI_STATUS

from bitsnet.efidefs_common import (
    EFI_DNS6_PROTOCOL_GUID, EFI_IP6_CONFIG_PROTOCOL_GUID, EFI_TCP6_PROTOCOL_GUID, EFI_UDP6_PROTOCOL_GUID,
    EFI_IPv6_ADDRESS, EFI_MAC_ADDRESS, EFI_MANAGED_NETWORK_CONFIG_DATA, EFI_SIMPLE_NETWORK_MODE, EFI_TIME,
    _with_fragments)


# --- IPv6 (UEFI spec 28.2 TCP6, 28.4 UDP6, 28.6 IP6 Config, 29.3 DNS6) -----------------------
# Same shapes as the IPv4 families with EFI_IPv6_ADDRESS fields; the differences that bite are
# the missing UseDefaultAddress/SubnetMask (an all-zero StationAddress lets IP6 choose, docs/edk2.md section 3.7)
# and the missing Routes slot in the TCP6 and UDP6 function tables (docs/edk2.md sections 3.2, 4.1).


# What TCP6/UDP6 GetModeData report about IP6 (Protocol/Ip6.h)
class EFI_IP6_CONFIG_DATA(Structure):
    _fields_ = [
        ("DefaultProtocol", UINT8),
        ("AcceptAnyProtocol", BOOLEAN),
        ("AcceptIcmpErrors", BOOLEAN),
        ("AcceptPromiscuous", BOOLEAN),
        ("DestinationAddress", EFI_IPv6_ADDRESS),
        ("StationAddress", EFI_IPv6_ADDRESS),
        ("TrafficClass", UINT8),
        ("HopLimit", UINT8),
        ("FlowLabel", UINT32),
        ("ReceiveTimeout", UINT32),
        ("TransmitTimeout", UINT32),
    ]


class EFI_IP6_ADDRESS_INFO(Structure):
    _fields_ = [("Address", EFI_IPv6_ADDRESS), ("PrefixLength", UINT8)]


class EFI_IP6_ROUTE_TABLE(Structure):
    _fields_ = [("Gateway", EFI_IPv6_ADDRESS), ("Destination", EFI_IPv6_ADDRESS), ("PrefixLength", UINT8)]


class EFI_IP6_NEIGHBOR_CACHE(Structure):
    _fields_ = [("Neighbor", EFI_IPv6_ADDRESS), ("LinkAddress", EFI_MAC_ADDRESS), ("State", ctypes.c_int)]


class EFI_IP6_ICMP_TYPE(Structure):
    _fields_ = [("Type", UINT8), ("Code", UINT8)]


class EFI_IP6_MODE_DATA(Structure):
    # Unlike IP4, every list here is allocated by the driver and freed by the caller (Ip6.h).
    _fields_ = [
        ("IsStarted", BOOLEAN),
        ("MaxPacketSize", UINT32),
        ("ConfigData", EFI_IP6_CONFIG_DATA),
        ("IsConfigured", BOOLEAN),
        ("AddressCount", UINT32),
        ("AddressList", POINTER(EFI_IP6_ADDRESS_INFO)),
        ("GroupCount", UINT32),
        ("GroupTable", POINTER(EFI_IPv6_ADDRESS)),
        ("RouteCount", UINT32),
        ("RouteTable", POINTER(EFI_IP6_ROUTE_TABLE)),
        ("NeighborCount", UINT32),
        ("NeighborCache", POINTER(EFI_IP6_NEIGHBOR_CACHE)),
        ("PrefixCount", UINT32),
        ("PrefixTable", POINTER(EFI_IP6_ADDRESS_INFO)),
        ("IcmpTypeCount", UINT32),
        ("IcmpTypeList", POINTER(EFI_IP6_ICMP_TYPE)),
    ]


# --- EFI_TCP6_PROTOCOL (Protocol/Tcp6.h) ------------------------------------------------------
class EFI_TCP6_ACCESS_POINT(Structure):
    _fields_ = [
        ("StationAddress", EFI_IPv6_ADDRESS),  # all zero: IP6 chooses the source (docs/edk2.md section 3.7)
        ("StationPort", UINT16),  # host byte order
        ("RemoteAddress", EFI_IPv6_ADDRESS),
        ("RemotePort", UINT16),  # host byte order
        ("ActiveFlag", BOOLEAN),
    ]


class EFI_TCP6_OPTION(Structure):
    # Identical layout to EFI_TCP4_OPTION (docs/edk2.md section 3.1), and the same rule: times in seconds; EDK2
    # replaces any value outside its accepted range -- 0 included -- by the default.
    _fields_ = [
        ("ReceiveBufferSize", UINT32),
        ("SendBufferSize", UINT32),
        ("MaxSynBackLog", UINT32),
        ("ConnectionTimeout", UINT32),
        ("DataRetries", UINT32),
        ("FinTimeout", UINT32),
        ("TimeWaitTimeout", UINT32),
        ("KeepAliveProbes", UINT32),
        ("KeepAliveTime", UINT32),
        ("KeepAliveInterval", UINT32),
        ("EnableNagle", BOOLEAN),
        ("EnableTimeStamp", BOOLEAN),
        ("EnableWindowScaling", BOOLEAN),
        ("EnableSelectiveAck", BOOLEAN),
        ("EnablePathMtuDiscovery", BOOLEAN),
    ]


class EFI_TCP6_CONFIG_DATA(Structure):
    _fields_ = [
        ("TrafficClass", UINT8),
        ("HopLimit", UINT8),
        ("AccessPoint", EFI_TCP6_ACCESS_POINT),
        ("ControlOption", POINTER(EFI_TCP6_OPTION)),  # NULL: every option at its default
    ]


# EFI_TCP6_CONNECTION_STATE (same values as EFI_TCP4_CONNECTION_STATE)
Tcp6StateClosed = 0
Tcp6StateListen = 1
Tcp6StateSynSent = 2
Tcp6StateSynReceived = 3
Tcp6StateEstablished = 4
Tcp6StateFinWait1 = 5
Tcp6StateFinWait2 = 6
Tcp6StateClosing = 7
Tcp6StateTimeWait = 8
Tcp6StateCloseWait = 9
Tcp6StateLastAck = 10

TCP6_STATE_NAMES = {
    Tcp6StateClosed: "Tcp6StateClosed",
    Tcp6StateListen: "Tcp6StateListen",
    Tcp6StateSynSent: "Tcp6StateSynSent",
    Tcp6StateSynReceived: "Tcp6StateSynReceived",
    Tcp6StateEstablished: "Tcp6StateEstablished",
    Tcp6StateFinWait1: "Tcp6StateFinWait1",
    Tcp6StateFinWait2: "Tcp6StateFinWait2",
    Tcp6StateClosing: "Tcp6StateClosing",
    Tcp6StateTimeWait: "Tcp6StateTimeWait",
    Tcp6StateCloseWait: "Tcp6StateCloseWait",
    Tcp6StateLastAck: "Tcp6StateLastAck",
}


class EFI_TCP6_COMPLETION_TOKEN(Structure):
    _fields_ = [("Event", EFI_EVENT), ("Status", EFI_STATUS)]


class EFI_TCP6_CONNECTION_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP6_COMPLETION_TOKEN)]


class EFI_TCP6_LISTEN_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP6_COMPLETION_TOKEN), ("NewChildHandle", EFI_HANDLE)]


class EFI_TCP6_FRAGMENT_DATA(Structure):
    _fields_ = [("FragmentLength", UINT32), ("FragmentBuffer", c_void_p)]


class EFI_TCP6_RECEIVE_DATA(Structure):
    _fields_ = [
        ("UrgentFlag", BOOLEAN),
        ("DataLength", UINT32),
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_TCP6_FRAGMENT_DATA * 1),
    ]


class EFI_TCP6_TRANSMIT_DATA(Structure):
    _fields_ = [
        ("Push", BOOLEAN),
        ("Urgent", BOOLEAN),
        ("DataLength", UINT32),
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_TCP6_FRAGMENT_DATA * 1),
    ]


class EFI_TCP6_PACKET(Union):
    _fields_ = [("RxData", POINTER(EFI_TCP6_RECEIVE_DATA)), ("TxData", POINTER(EFI_TCP6_TRANSMIT_DATA))]


class EFI_TCP6_IO_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP6_COMPLETION_TOKEN), ("Packet", EFI_TCP6_PACKET)]


class EFI_TCP6_CLOSE_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP6_COMPLETION_TOKEN), ("AbortOnClose", BOOLEAN)]


class EFI_TCP6_PROTOCOL(efi.Protocol):
    guid = EFI_TCP6_PROTOCOL_GUID


_TCP6 = POINTER(EFI_TCP6_PROTOCOL)
EFI_TCP6_PROTOCOL._fields_ = [
    ("GetModeData", efi.FUNC(_TCP6, POINTER(ctypes.c_int), POINTER(EFI_TCP6_CONFIG_DATA), POINTER(EFI_IP6_MODE_DATA),
                             POINTER(EFI_MANAGED_NETWORK_CONFIG_DATA), POINTER(EFI_SIMPLE_NETWORK_MODE))),
    ("Configure", efi.FUNC(_TCP6, POINTER(EFI_TCP6_CONFIG_DATA))),
    # No Routes slot: everything below sits one slot earlier than in EFI_TCP4_PROTOCOL (docs/edk2.md section 3.2)
    ("Connect", efi.FUNC(_TCP6, POINTER(EFI_TCP6_CONNECTION_TOKEN))),
    ("Accept", efi.FUNC(_TCP6, POINTER(EFI_TCP6_LISTEN_TOKEN))),
    ("Transmit", efi.FUNC(_TCP6, POINTER(EFI_TCP6_IO_TOKEN))),
    ("Receive", efi.FUNC(_TCP6, POINTER(EFI_TCP6_IO_TOKEN))),
    ("Close", efi.FUNC(_TCP6, POINTER(EFI_TCP6_CLOSE_TOKEN))),
    ("Cancel", efi.FUNC(_TCP6, POINTER(EFI_TCP6_COMPLETION_TOKEN))),
    ("Poll", efi.FUNC(_TCP6)),
]


# --- EFI_UDP6_PROTOCOL (Protocol/Udp6.h) ------------------------------------------------------
class EFI_UDP6_CONFIG_DATA(Structure):
    _fields_ = [
        ("AcceptPromiscuous", BOOLEAN),
        ("AcceptAnyPort", BOOLEAN),
        ("AllowDuplicatePort", BOOLEAN),
        ("TrafficClass", UINT8),
        ("HopLimit", UINT8),
        ("ReceiveTimeout", UINT32),  # microseconds a queued datagram is kept; 0 = forever
        ("TransmitTimeout", UINT32),
        ("StationAddress", EFI_IPv6_ADDRESS),  # all zero: IP6 chooses
        ("StationPort", UINT16),  # host byte order
        ("RemoteAddress", EFI_IPv6_ADDRESS),
        ("RemotePort", UINT16),
    ]


class EFI_UDP6_SESSION_DATA(Structure):
    _fields_ = [
        ("SourceAddress", EFI_IPv6_ADDRESS),
        ("SourcePort", UINT16),
        ("DestinationAddress", EFI_IPv6_ADDRESS),
        ("DestinationPort", UINT16),
    ]


class EFI_UDP6_FRAGMENT_DATA(Structure):
    _fields_ = [("FragmentLength", UINT32), ("FragmentBuffer", c_void_p)]


class EFI_UDP6_TRANSMIT_DATA(Structure):
    _fields_ = [
        ("UdpSessionData", POINTER(EFI_UDP6_SESSION_DATA)),  # NULL: the configured remote
        ("DataLength", UINT32),  # no GatewayAddress in UDP6
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_UDP6_FRAGMENT_DATA * 1),
    ]


class EFI_UDP6_RECEIVE_DATA(Structure):
    # Owned by the driver: copy the payload out, then SignalEvent(RecycleSignal) (docs/edk2.md section 4.2).
    _fields_ = [
        ("TimeStamp", EFI_TIME),
        ("RecycleSignal", EFI_EVENT),
        ("UdpSession", EFI_UDP6_SESSION_DATA),
        ("DataLength", UINT32),
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_UDP6_FRAGMENT_DATA * 1),
    ]


class EFI_UDP6_PACKET(Union):
    _fields_ = [("RxData", POINTER(EFI_UDP6_RECEIVE_DATA)), ("TxData", POINTER(EFI_UDP6_TRANSMIT_DATA))]


class EFI_UDP6_COMPLETION_TOKEN(Structure):
    _fields_ = [("Event", EFI_EVENT), ("Status", EFI_STATUS), ("Packet", EFI_UDP6_PACKET)]


class EFI_UDP6_PROTOCOL(efi.Protocol):
    guid = EFI_UDP6_PROTOCOL_GUID


_UDP6 = POINTER(EFI_UDP6_PROTOCOL)
EFI_UDP6_PROTOCOL._fields_ = [
    ("GetModeData", efi.FUNC(_UDP6, POINTER(EFI_UDP6_CONFIG_DATA), POINTER(EFI_IP6_MODE_DATA),
                             POINTER(EFI_MANAGED_NETWORK_CONFIG_DATA), POINTER(EFI_SIMPLE_NETWORK_MODE))),
    ("Configure", efi.FUNC(_UDP6, POINTER(EFI_UDP6_CONFIG_DATA))),
    ("Groups", efi.FUNC(_UDP6, BOOLEAN, POINTER(EFI_IPv6_ADDRESS))),
    # No Routes slot (docs/edk2.md section 4.1)
    ("Transmit", efi.FUNC(_UDP6, POINTER(EFI_UDP6_COMPLETION_TOKEN))),
    ("Receive", efi.FUNC(_UDP6, POINTER(EFI_UDP6_COMPLETION_TOKEN))),
    ("Cancel", efi.FUNC(_UDP6, POINTER(EFI_UDP6_COMPLETION_TOKEN))),
    ("Poll", efi.FUNC(_UDP6)),
]


# --- EFI_IP6_CONFIG_PROTOCOL (Protocol/Ip6Config.h; docs/edk2.md section 5.3) ------------------
# EFI_IP6_CONFIG_DATA_TYPE
Ip6ConfigDataTypeInterfaceInfo = 0
Ip6ConfigDataTypeAltInterfaceId = 1
Ip6ConfigDataTypePolicy = 2
Ip6ConfigDataTypeDupAddrDetectTransmits = 3
Ip6ConfigDataTypeManualAddress = 4
Ip6ConfigDataTypeGateway = 5
Ip6ConfigDataTypeDnsServer = 6
Ip6ConfigDataTypeMaximum = 7

# EFI_IP6_CONFIG_POLICY (a C enum: 4 bytes); EDK2's default is Manual
Ip6ConfigPolicyManual = 0
Ip6ConfigPolicyAutomatic = 1
EFI_IP6_CONFIG_POLICY = ctypes.c_int


class EFI_IP6_CONFIG_INTERFACE_INFO(Structure):
    _fields_ = [
        ("Name", UINT16 * 32),  # CHAR16
        ("IfType", UINT8),
        ("HwAddressSize", UINT32),
        ("HwAddress", EFI_MAC_ADDRESS),
        ("AddressInfoCount", UINT32),
        ("AddressInfo", POINTER(EFI_IP6_ADDRESS_INFO)),  # into the caller's buffer, after this structure
        ("RouteCount", UINT32),
        ("RouteTable", POINTER(EFI_IP6_ROUTE_TABLE)),
    ]


class EFI_IP6_CONFIG_INTERFACE_ID(Structure):
    _fields_ = [("Id", UINT8 * 8)]


class EFI_IP6_CONFIG_DUP_ADDR_DETECT_TRANSMITS(Structure):
    _fields_ = [("DupAddrDetectTransmits", UINT32)]


class EFI_IP6_CONFIG_MANUAL_ADDRESS(Structure):
    _fields_ = [("Address", EFI_IPv6_ADDRESS), ("IsAnycast", BOOLEAN), ("PrefixLength", UINT8)]


class EFI_IP6_CONFIG_PROTOCOL(efi.Protocol):
    guid = EFI_IP6_CONFIG_PROTOCOL_GUID


_IP6CONFIG = POINTER(EFI_IP6_CONFIG_PROTOCOL)
EFI_IP6_CONFIG_PROTOCOL._fields_ = [
    # SetData(This, DataType, DataSize, Data): EFI_NOT_READY while DAD runs on a manual address
    ("SetData", efi.FUNC(_IP6CONFIG, ctypes.c_int, UINTN, c_void_p)),
    # GetData(This, DataType, DataSize, Data): EFI_BUFFER_TOO_SMALL sets *DataSize to what is needed
    ("GetData", efi.FUNC(_IP6CONFIG, ctypes.c_int, POINTER(UINTN), c_void_p)),
    ("RegisterDataNotify", efi.FUNC(_IP6CONFIG, ctypes.c_int, EFI_EVENT)),
    ("UnregisterDataNotify", efi.FUNC(_IP6CONFIG, ctypes.c_int, EFI_EVENT)),
]


# --- EFI_DNS6_PROTOCOL (Protocol/Dns6.h) ------------------------------------------------------
class EFI_DNS6_CONFIG_DATA(Structure):
    _fields_ = [
        ("EnableDnsCache", BOOLEAN),
        ("Protocol", UINT8),  # must be 17 (UDP)
        ("StationIp", EFI_IPv6_ADDRESS),
        ("LocalPort", UINT16),
        ("DnsServerCount", UINT32),  # UINT32 here, UINTN in DNS4 (docs/edk2.md section 6.1)
        ("DnsServerList", POINTER(EFI_IPv6_ADDRESS)),
        ("RetryCount", UINT32),
        ("RetryInterval", UINT32),  # seconds
    ]


class EFI_DNS6_CACHE_ENTRY(Structure):
    _fields_ = [("HostName", POINTER(UINT16)), ("IpAddress", POINTER(EFI_IPv6_ADDRESS)), ("Timeout", UINT32)]


class EFI_DNS6_MODE_DATA(Structure):
    _fields_ = [
        ("DnsConfigData", EFI_DNS6_CONFIG_DATA),
        ("DnsServerCount", UINT32),
        ("DnsServerList", POINTER(EFI_IPv6_ADDRESS)),
        ("DnsCacheCount", UINT32),
        ("DnsCacheList", POINTER(EFI_DNS6_CACHE_ENTRY)),
    ]


class DNS6_HOST_TO_ADDR_DATA(Structure):
    # Allocated by the driver: the caller FreePools IpList and then this structure (docs/edk2.md section 6.2).
    _fields_ = [("IpCount", UINT32), ("IpList", POINTER(EFI_IPv6_ADDRESS))]


class DNS6_ADDR_TO_HOST_DATA(Structure):
    _fields_ = [("HostName", POINTER(UINT16))]


class DNS6_RESOURCE_RECORD(Structure):
    _fields_ = [
        ("QName", ctypes.c_char_p),
        ("QType", UINT16),
        ("QClass", UINT16),
        ("TTL", UINT32),
        ("DataLength", UINT16),
        ("RData", ctypes.c_char_p),
    ]


class DNS6_GENERAL_LOOKUP_DATA(Structure):
    _fields_ = [("RRCount", UINTN), ("RRList", POINTER(DNS6_RESOURCE_RECORD))]


class EFI_DNS6_RSP_DATA(Union):
    _fields_ = [
        ("H2AData", POINTER(DNS6_HOST_TO_ADDR_DATA)),
        ("A2HData", POINTER(DNS6_ADDR_TO_HOST_DATA)),
        ("GLookupData", POINTER(DNS6_GENERAL_LOOKUP_DATA)),
    ]


class EFI_DNS6_COMPLETION_TOKEN(Structure):
    _fields_ = [
        ("Event", EFI_EVENT),
        ("Status", EFI_STATUS),
        ("RetryCount", UINT32),
        ("RetryInterval", UINT32),
        ("RspData", EFI_DNS6_RSP_DATA),
    ]


class EFI_DNS6_PROTOCOL(efi.Protocol):
    guid = EFI_DNS6_PROTOCOL_GUID


_DNS6 = POINTER(EFI_DNS6_PROTOCOL)
EFI_DNS6_PROTOCOL._fields_ = [
    ("GetModeData", efi.FUNC(_DNS6, POINTER(EFI_DNS6_MODE_DATA))),
    ("Configure", efi.FUNC(_DNS6, POINTER(EFI_DNS6_CONFIG_DATA))),
    ("HostNameToIp", efi.FUNC(_DNS6, POINTER(UINT16), POINTER(EFI_DNS6_COMPLETION_TOKEN))),
    # IpToHostName(This, IpAddress (16 bytes by value), Token)
    ("IpToHostName", efi.FUNC(_DNS6, EFI_IPv6_ADDRESS, POINTER(EFI_DNS6_COMPLETION_TOKEN))),
    ("GeneralLookUp", efi.FUNC(_DNS6, ctypes.c_char_p, UINT16, UINT16, POINTER(EFI_DNS6_COMPLETION_TOKEN))),
    ("UpdateDnsCache", efi.FUNC(_DNS6, BOOLEAN, BOOLEAN, EFI_DNS6_CACHE_ENTRY)),
    ("Poll", efi.FUNC(_DNS6)),
    ("Cancel", efi.FUNC(_DNS6, POINTER(EFI_DNS6_COMPLETION_TOKEN))),
]


# --- Fragment tables of any length (efidefs_common._with_fragments) ----------------------------
def tcp6_receive_data(count):
    """EFI_TCP6_RECEIVE_DATA with a FragmentTable of ``count`` entries."""
    return _with_fragments(EFI_TCP6_RECEIVE_DATA, count)


def tcp6_transmit_data(count):
    """EFI_TCP6_TRANSMIT_DATA with a FragmentTable of ``count`` entries."""
    return _with_fragments(EFI_TCP6_TRANSMIT_DATA, count)


def udp6_transmit_data(count):
    """EFI_UDP6_TRANSMIT_DATA with a FragmentTable of ``count`` entries."""
    return _with_fragments(EFI_UDP6_TRANSMIT_DATA, count)


def udp6_receive_data(count):
    """EFI_UDP6_RECEIVE_DATA with a FragmentTable of ``count`` entries (to read the driver's)."""
    return _with_fragments(EFI_UDP6_RECEIVE_DATA, count)
