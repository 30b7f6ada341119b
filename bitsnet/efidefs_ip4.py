"""UEFI IPv4 network definitions: IP4 mode data, TCP4, IP4 Config2, UDP4 and DNS4.

Named exactly as in the UEFI specification (and MdePkg/Include/Protocol/*.h of tianocore/edk2),
so a reader holding the spec can find every structure and field; pure data on ``efidefs_common``
(GUIDs, addresses, service binding, MNP/SNP). ``efidefs`` gathers this module with the others.

Contents
  IP4              EFI_IP4_CONFIG_DATA, EFI_IP4_MODE_DATA, EFI_IP4_ROUTE_TABLE, ... (GetModeData)
  TCP4             EFI_TCP4_CONFIG_DATA ... EFI_TCP4_PROTOCOL; Tcp4State* values
  IP4 Config2      EFI_IP4_CONFIG2_INTERFACE_INFO ... EFI_IP4_CONFIG2_PROTOCOL; data types, policies
  UDP4, DNS4       EFI_UDP4_CONFIG_DATA ... EFI_UDP4_PROTOCOL; EFI_DNS4_CONFIG_DATA ... EFI_DNS4_PROTOCOL
  fragment tables  tcp4_receive_data(n), tcp4_transmit_data(n), udp4_*_data(n), fragment_table(address, n)

The layout rules (byte-array addresses with alignment 1, host-order ports, native UINTN) and
the fragment-table convention are described once, in ``efidefs``.
"""

import ctypes
from ctypes import POINTER, Structure, Union, c_void_p

import efi
from efi import BOOLEAN, UINT8, UINT16, UINT32, UINTN, EFI_EVENT, EFI_HANDLE, EFI_STATUS

from bitsnet.efidefs_common import (
    EFI_DNS4_PROTOCOL_GUID, EFI_IP4_CONFIG2_PROTOCOL_GUID, EFI_TCP4_PROTOCOL_GUID, EFI_UDP4_PROTOCOL_GUID,
    EFI_IPv4_ADDRESS, EFI_MAC_ADDRESS, EFI_MANAGED_NETWORK_CONFIG_DATA, EFI_SIMPLE_NETWORK_MODE, EFI_TIME,
    _with_fragments)


# --- What GetModeData reports about IP4 (Ip4.h) ------------------------------------------------
class EFI_IP4_CONFIG_DATA(Structure):
    _fields_ = [
        ("DefaultProtocol", UINT8),
        ("AcceptAnyProtocol", BOOLEAN),
        ("AcceptIcmpErrors", BOOLEAN),
        ("AcceptBroadcast", BOOLEAN),
        ("AcceptPromiscuous", BOOLEAN),
        ("UseDefaultAddress", BOOLEAN),
        ("StationAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("TypeOfService", UINT8),
        ("TimeToLive", UINT8),
        ("DoNotFragment", BOOLEAN),
        ("RawData", BOOLEAN),
        ("ReceiveTimeout", UINT32),
        ("TransmitTimeout", UINT32),
    ]


class EFI_IP4_ROUTE_TABLE(Structure):
    _fields_ = [
        ("SubnetAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("GatewayAddress", EFI_IPv4_ADDRESS),
    ]


class EFI_IP4_ICMP_TYPE(Structure):
    _fields_ = [("Type", UINT8), ("Code", UINT8)]


class EFI_IP4_MODE_DATA(Structure):
    _fields_ = [
        ("IsStarted", BOOLEAN),
        ("MaxPacketSize", UINT32),
        ("ConfigData", EFI_IP4_CONFIG_DATA),
        ("IsConfigured", BOOLEAN),
        ("GroupCount", UINT32),
        ("GroupTable", POINTER(EFI_IPv4_ADDRESS)),  # driver memory: never freed by the caller
        ("RouteCount", UINT32),
        ("RouteTable", POINTER(EFI_IP4_ROUTE_TABLE)),
        ("IcmpTypeCount", UINT32),
        ("IcmpTypeList", POINTER(EFI_IP4_ICMP_TYPE)),
    ]



# --- EFI_TCP4_PROTOCOL (UEFI spec 28.1; Protocol/Tcp4.h) ------------------------------------
class EFI_TCP4_ACCESS_POINT(Structure):
    _fields_ = [
        ("UseDefaultAddress", BOOLEAN),
        ("StationAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("StationPort", UINT16),  # host byte order
        ("RemoteAddress", EFI_IPv4_ADDRESS),
        ("RemotePort", UINT16),  # host byte order
        ("ActiveFlag", BOOLEAN),
    ]


class EFI_TCP4_OPTION(Structure):
    # Times in seconds. EDK2 replaces any value outside its accepted range -- 0 included --
    # by the default instead of clamping it (docs/edk2.md section 3.9).
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


class EFI_TCP4_CONFIG_DATA(Structure):
    _fields_ = [
        ("TypeOfService", UINT8),
        ("TimeToLive", UINT8),
        ("AccessPoint", EFI_TCP4_ACCESS_POINT),
        ("ControlOption", POINTER(EFI_TCP4_OPTION)),  # NULL: every option at its default
    ]


# EFI_TCP4_CONNECTION_STATE
Tcp4StateClosed = 0
Tcp4StateListen = 1
Tcp4StateSynSent = 2
Tcp4StateSynReceived = 3
Tcp4StateEstablished = 4
Tcp4StateFinWait1 = 5
Tcp4StateFinWait2 = 6
Tcp4StateClosing = 7
Tcp4StateTimeWait = 8
Tcp4StateCloseWait = 9
Tcp4StateLastAck = 10

TCP4_STATE_NAMES = {
    Tcp4StateClosed: "Tcp4StateClosed",
    Tcp4StateListen: "Tcp4StateListen",
    Tcp4StateSynSent: "Tcp4StateSynSent",
    Tcp4StateSynReceived: "Tcp4StateSynReceived",
    Tcp4StateEstablished: "Tcp4StateEstablished",
    Tcp4StateFinWait1: "Tcp4StateFinWait1",
    Tcp4StateFinWait2: "Tcp4StateFinWait2",
    Tcp4StateClosing: "Tcp4StateClosing",
    Tcp4StateTimeWait: "Tcp4StateTimeWait",
    Tcp4StateCloseWait: "Tcp4StateCloseWait",
    Tcp4StateLastAck: "Tcp4StateLastAck",
}


class EFI_TCP4_COMPLETION_TOKEN(Structure):
    _fields_ = [("Event", EFI_EVENT), ("Status", EFI_STATUS)]


class EFI_TCP4_CONNECTION_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN)]


class EFI_TCP4_LISTEN_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN), ("NewChildHandle", EFI_HANDLE)]


class EFI_TCP4_FRAGMENT_DATA(Structure):
    _fields_ = [("FragmentLength", UINT32), ("FragmentBuffer", c_void_p)]


class EFI_TCP4_RECEIVE_DATA(Structure):
    _fields_ = [
        ("UrgentFlag", BOOLEAN),
        ("DataLength", UINT32),  # rewritten by the driver with the bytes delivered
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_TCP4_FRAGMENT_DATA * 1),  # FragmentCount entries in fact
    ]


class EFI_TCP4_TRANSMIT_DATA(Structure):
    _fields_ = [
        ("Push", BOOLEAN),
        ("Urgent", BOOLEAN),
        ("DataLength", UINT32),
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_TCP4_FRAGMENT_DATA * 1),  # FragmentCount entries in fact
    ]


class EFI_TCP4_PACKET(Union):
    _fields_ = [("RxData", POINTER(EFI_TCP4_RECEIVE_DATA)), ("TxData", POINTER(EFI_TCP4_TRANSMIT_DATA))]


class EFI_TCP4_IO_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN), ("Packet", EFI_TCP4_PACKET)]


class EFI_TCP4_CLOSE_TOKEN(Structure):
    _fields_ = [("CompletionToken", EFI_TCP4_COMPLETION_TOKEN), ("AbortOnClose", BOOLEAN)]


class EFI_TCP4_PROTOCOL(efi.Protocol):
    guid = EFI_TCP4_PROTOCOL_GUID


_TCP4 = POINTER(EFI_TCP4_PROTOCOL)
EFI_TCP4_PROTOCOL._fields_ = [
    # GetModeData(This, Tcp4State, Tcp4ConfigData, Ip4ModeData, MnpConfigData, SnpModeData): any may be NULL
    ("GetModeData", efi.FUNC(_TCP4, POINTER(ctypes.c_int), POINTER(EFI_TCP4_CONFIG_DATA), POINTER(EFI_IP4_MODE_DATA),
                             POINTER(EFI_MANAGED_NETWORK_CONFIG_DATA), POINTER(EFI_SIMPLE_NETWORK_MODE))),
    # Configure(This, TcpConfigData): NULL resets the instance and flushes every token with EFI_ABORTED
    ("Configure", efi.FUNC(_TCP4, POINTER(EFI_TCP4_CONFIG_DATA))),
    # Routes(This, DeleteRoute, SubnetAddress, SubnetMask, GatewayAddress)
    ("Routes", efi.FUNC(_TCP4, BOOLEAN, POINTER(EFI_IPv4_ADDRESS), POINTER(EFI_IPv4_ADDRESS),
                        POINTER(EFI_IPv4_ADDRESS))),
    # Connect(This, ConnectionToken): active open; completes when Established
    ("Connect", efi.FUNC(_TCP4, POINTER(EFI_TCP4_CONNECTION_TOKEN))),
    # Accept(This, ListenToken): one connection per token; NewChildHandle set on completion
    ("Accept", efi.FUNC(_TCP4, POINTER(EFI_TCP4_LISTEN_TOKEN))),
    # Transmit(This, Token): zero-copy; completes when the data was segmented, not when ACKed
    ("Transmit", efi.FUNC(_TCP4, POINTER(EFI_TCP4_IO_TOKEN))),
    # Receive(This, Token): completes with whatever is buffered, possibly inside the call
    ("Receive", efi.FUNC(_TCP4, POINTER(EFI_TCP4_IO_TOKEN))),
    # Close(This, CloseToken): graceful (FIN) or abort (RST); graceful completes after TIME_WAIT
    ("Close", efi.FUNC(_TCP4, POINTER(EFI_TCP4_CLOSE_TOKEN))),
    # Cancel(This, Token): NULL cancels every pending token
    ("Cancel", efi.FUNC(_TCP4, POINTER(EFI_TCP4_COMPLETION_TOKEN))),
    # Poll(This): moves one received frame up the stack
    ("Poll", efi.FUNC(_TCP4)),
]


# --- EFI_IP4_CONFIG2_PROTOCOL (UEFI spec 28.5; Protocol/Ip4Config2.h) -----------------------
# EFI_IP4_CONFIG2_DATA_TYPE
Ip4Config2DataTypeInterfaceInfo = 0
Ip4Config2DataTypePolicy = 1
Ip4Config2DataTypeManualAddress = 2
Ip4Config2DataTypeGateway = 3
Ip4Config2DataTypeDnsServer = 4
Ip4Config2DataTypeMaximum = 5

# EFI_IP4_CONFIG2_POLICY (a C enum: 4 bytes)
Ip4Config2PolicyStatic = 0
Ip4Config2PolicyDhcp = 1
Ip4Config2PolicyMax = 2
EFI_IP4_CONFIG2_POLICY = ctypes.c_int

EFI_IP4_CONFIG2_INTERFACE_ID_MAXLEN = 32


class EFI_IP4_CONFIG2_INTERFACE_INFO(Structure):
    _fields_ = [
        ("Name", UINT16 * EFI_IP4_CONFIG2_INTERFACE_ID_MAXLEN),  # CHAR16: c_wchar is 4 bytes on Linux
        ("IfType", UINT8),
        ("HwAddressSize", UINT32),
        ("HwAddress", EFI_MAC_ADDRESS),
        ("StationAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("RouteTableSize", UINT32),
        # Points just past this structure, into the caller's buffer (docs/edk2.md section 5.2)
        ("RouteTable", POINTER(EFI_IP4_ROUTE_TABLE)),
    ]


class EFI_IP4_CONFIG2_MANUAL_ADDRESS(Structure):
    _fields_ = [("Address", EFI_IPv4_ADDRESS), ("SubnetMask", EFI_IPv4_ADDRESS)]


class EFI_IP4_CONFIG2_PROTOCOL(efi.Protocol):
    guid = EFI_IP4_CONFIG2_PROTOCOL_GUID


_CONFIG2 = POINTER(EFI_IP4_CONFIG2_PROTOCOL)
EFI_IP4_CONFIG2_PROTOCOL._fields_ = [
    # SetData(This, DataType, DataSize, Data)
    ("SetData", efi.FUNC(_CONFIG2, ctypes.c_int, UINTN, c_void_p)),
    # GetData(This, DataType, DataSize, Data): EFI_BUFFER_TOO_SMALL sets *DataSize to what is needed
    ("GetData", efi.FUNC(_CONFIG2, ctypes.c_int, POINTER(UINTN), c_void_p)),
    # RegisterDataNotify(This, DataType, Event): signalled by SetData only, never by DHCP
    ("RegisterDataNotify", efi.FUNC(_CONFIG2, ctypes.c_int, EFI_EVENT)),
    # UnregisterDataNotify(This, DataType, Event)
    ("UnregisterDataNotify", efi.FUNC(_CONFIG2, ctypes.c_int, EFI_EVENT)),
]


# --- EFI_UDP4_PROTOCOL (UEFI spec 28.3; Protocol/Udp4.h) -------------------------------------
class EFI_UDP4_CONFIG_DATA(Structure):
    _fields_ = [
        ("AcceptBroadcast", BOOLEAN),
        ("AcceptPromiscuous", BOOLEAN),
        ("AcceptAnyPort", BOOLEAN),
        ("AllowDuplicatePort", BOOLEAN),
        ("TypeOfService", UINT8),
        ("TimeToLive", UINT8),
        ("DoNotFragment", BOOLEAN),
        ("ReceiveTimeout", UINT32),  # microseconds a queued datagram is kept; 0 = forever
        ("TransmitTimeout", UINT32),  # stored, not enforced by EDK2
        ("UseDefaultAddress", BOOLEAN),
        ("StationAddress", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("StationPort", UINT16),  # host byte order
        ("RemoteAddress", EFI_IPv4_ADDRESS),
        ("RemotePort", UINT16),
    ]


class EFI_UDP4_SESSION_DATA(Structure):
    _fields_ = [
        ("SourceAddress", EFI_IPv4_ADDRESS),
        ("SourcePort", UINT16),
        ("DestinationAddress", EFI_IPv4_ADDRESS),
        ("DestinationPort", UINT16),
    ]


class EFI_UDP4_FRAGMENT_DATA(Structure):
    _fields_ = [("FragmentLength", UINT32), ("FragmentBuffer", c_void_p)]


class EFI_UDP4_TRANSMIT_DATA(Structure):
    _fields_ = [
        ("UdpSessionData", POINTER(EFI_UDP4_SESSION_DATA)),  # NULL: the configured remote
        ("GatewayAddress", POINTER(EFI_IPv4_ADDRESS)),
        ("DataLength", UINT32),
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_UDP4_FRAGMENT_DATA * 1),
    ]


class EFI_UDP4_RECEIVE_DATA(Structure):
    # Owned by the driver: copy the payload out, then SignalEvent(RecycleSignal) (docs/edk2.md section 4.2).
    _fields_ = [
        ("TimeStamp", EFI_TIME),
        ("RecycleSignal", EFI_EVENT),
        ("UdpSession", EFI_UDP4_SESSION_DATA),
        ("DataLength", UINT32),
        ("FragmentCount", UINT32),
        ("FragmentTable", EFI_UDP4_FRAGMENT_DATA * 1),
    ]


class EFI_UDP4_PACKET(Union):
    _fields_ = [("RxData", POINTER(EFI_UDP4_RECEIVE_DATA)), ("TxData", POINTER(EFI_UDP4_TRANSMIT_DATA))]


class EFI_UDP4_COMPLETION_TOKEN(Structure):
    _fields_ = [("Event", EFI_EVENT), ("Status", EFI_STATUS), ("Packet", EFI_UDP4_PACKET)]


class EFI_UDP4_PROTOCOL(efi.Protocol):
    guid = EFI_UDP4_PROTOCOL_GUID


_UDP4 = POINTER(EFI_UDP4_PROTOCOL)
EFI_UDP4_PROTOCOL._fields_ = [
    # GetModeData(This, Udp4ConfigData, Ip4ModeData, MnpConfigData, SnpModeData)
    ("GetModeData", efi.FUNC(_UDP4, POINTER(EFI_UDP4_CONFIG_DATA), POINTER(EFI_IP4_MODE_DATA),
                             POINTER(EFI_MANAGED_NETWORK_CONFIG_DATA), POINTER(EFI_SIMPLE_NETWORK_MODE))),
    # Configure(This, UdpConfigData): NULL resets; reconfiguring the port or peer is EFI_ALREADY_STARTED
    ("Configure", efi.FUNC(_UDP4, POINTER(EFI_UDP4_CONFIG_DATA))),
    # Groups(This, JoinFlag, MulticastAddress)
    ("Groups", efi.FUNC(_UDP4, BOOLEAN, POINTER(EFI_IPv4_ADDRESS))),
    # Routes(This, DeleteRoute, SubnetAddress, SubnetMask, GatewayAddress)
    ("Routes", efi.FUNC(_UDP4, BOOLEAN, POINTER(EFI_IPv4_ADDRESS), POINTER(EFI_IPv4_ADDRESS),
                        POINTER(EFI_IPv4_ADDRESS))),
    # Transmit(This, Token): zero-copy; no route is EFI_NOT_FOUND at once
    ("Transmit", efi.FUNC(_UDP4, POINTER(EFI_UDP4_COMPLETION_TOKEN))),
    # Receive(This, Token): Packet.RxData is set by the driver on completion
    ("Receive", efi.FUNC(_UDP4, POINTER(EFI_UDP4_COMPLETION_TOKEN))),
    # Cancel(This, Token): NULL cancels every pending token
    ("Cancel", efi.FUNC(_UDP4, POINTER(EFI_UDP4_COMPLETION_TOKEN))),
    # Poll(This)
    ("Poll", efi.FUNC(_UDP4)),
]


# --- EFI_DNS4_PROTOCOL (UEFI spec 29.2; Protocol/Dns4.h) ------------------------------------
class EFI_DNS4_CONFIG_DATA(Structure):
    _fields_ = [
        ("DnsServerListCount", UINTN),
        ("DnsServerList", POINTER(EFI_IPv4_ADDRESS)),  # EDK2 uses only the first (docs/edk2.md section 6.2)
        ("UseDefaultSetting", BOOLEAN),
        ("EnableDnsCache", BOOLEAN),
        ("Protocol", UINT8),  # must be 17 (UDP)
        ("StationIp", EFI_IPv4_ADDRESS),
        ("SubnetMask", EFI_IPv4_ADDRESS),
        ("LocalPort", UINT16),
        ("RetryCount", UINT32),
        ("RetryInterval", UINT32),  # seconds
    ]


class EFI_DNS4_CACHE_ENTRY(Structure):
    _fields_ = [
        ("HostName", POINTER(UINT16)),  # CHAR16 string
        ("IpAddress", POINTER(EFI_IPv4_ADDRESS)),
        ("Timeout", UINT32),
    ]


class EFI_DNS4_MODE_DATA(Structure):
    _fields_ = [
        ("DnsConfigData", EFI_DNS4_CONFIG_DATA),
        ("DnsServerCount", UINT32),
        ("DnsServerList", POINTER(EFI_IPv4_ADDRESS)),
        ("DnsCacheCount", UINT32),
        ("DnsCacheList", POINTER(EFI_DNS4_CACHE_ENTRY)),
    ]


class DNS_HOST_TO_ADDR_DATA(Structure):
    # Allocated by the driver: the caller FreePools IpList and then this structure (docs/edk2.md section 6.2).
    _fields_ = [("IpCount", UINT32), ("IpList", POINTER(EFI_IPv4_ADDRESS))]


class DNS_ADDR_TO_HOST_DATA(Structure):
    _fields_ = [("HostName", POINTER(UINT16))]


class DNS_RESOURCE_RECORD(Structure):
    _fields_ = [
        ("QName", ctypes.c_char_p),
        ("QType", UINT16),
        ("QClass", UINT16),
        ("TTL", UINT32),
        ("DataLength", UINT16),
        ("RData", ctypes.c_char_p),
    ]


class DNS_GENERAL_LOOKUP_DATA(Structure):
    _fields_ = [("RRCount", UINTN), ("RRList", POINTER(DNS_RESOURCE_RECORD))]


class EFI_DNS4_RSP_DATA(Union):
    _fields_ = [
        ("H2AData", POINTER(DNS_HOST_TO_ADDR_DATA)),
        ("A2HData", POINTER(DNS_ADDR_TO_HOST_DATA)),
        ("GLookupData", POINTER(DNS_GENERAL_LOOKUP_DATA)),
    ]


class EFI_DNS4_COMPLETION_TOKEN(Structure):
    _fields_ = [
        ("Event", EFI_EVENT),
        ("Status", EFI_STATUS),
        ("RetryCount", UINT32),
        ("RetryInterval", UINT32),
        ("RspData", EFI_DNS4_RSP_DATA),
    ]


class EFI_DNS4_PROTOCOL(efi.Protocol):
    guid = EFI_DNS4_PROTOCOL_GUID


_DNS4 = POINTER(EFI_DNS4_PROTOCOL)
EFI_DNS4_PROTOCOL._fields_ = [
    # GetModeData(This, DnsModeData)
    ("GetModeData", efi.FUNC(_DNS4, POINTER(EFI_DNS4_MODE_DATA))),
    # Configure(This, DnsConfigData): NULL resets; an empty server list makes EDK2 run its own DHCP
    ("Configure", efi.FUNC(_DNS4, POINTER(EFI_DNS4_CONFIG_DATA))),
    # HostNameToIp(This, HostName (CHAR16 string), Token)
    ("HostNameToIp", efi.FUNC(_DNS4, POINTER(UINT16), POINTER(EFI_DNS4_COMPLETION_TOKEN))),
    # IpToHostName(This, IpAddress (by value: 4 bytes travel as one integer), Token)
    ("IpToHostName", efi.FUNC(_DNS4, EFI_IPv4_ADDRESS, POINTER(EFI_DNS4_COMPLETION_TOKEN))),
    # GeneralLookUp(This, QName, QType, QClass, Token)
    ("GeneralLookUp", efi.FUNC(_DNS4, ctypes.c_char_p, UINT16, UINT16, POINTER(EFI_DNS4_COMPLETION_TOKEN))),
    # UpdateDnsCache(This, DeleteFlag, Override, DnsCacheEntry (by value))
    ("UpdateDnsCache", efi.FUNC(_DNS4, BOOLEAN, BOOLEAN, EFI_DNS4_CACHE_ENTRY)),
    # Poll(This)
    ("Poll", efi.FUNC(_DNS4)),
    # Cancel(This, Token)
    ("Cancel", efi.FUNC(_DNS4, POINTER(EFI_DNS4_COMPLETION_TOKEN))),
]


# --- Fragment tables of any length (efidefs_common._with_fragments) ----------------------------
def tcp4_receive_data(count):
    """EFI_TCP4_RECEIVE_DATA with a FragmentTable of ``count`` entries."""
    return _with_fragments(EFI_TCP4_RECEIVE_DATA, count)


def tcp4_transmit_data(count):
    """EFI_TCP4_TRANSMIT_DATA with a FragmentTable of ``count`` entries."""
    return _with_fragments(EFI_TCP4_TRANSMIT_DATA, count)


def udp4_transmit_data(count):
    """EFI_UDP4_TRANSMIT_DATA with a FragmentTable of ``count`` entries."""
    return _with_fragments(EFI_UDP4_TRANSMIT_DATA, count)


def udp4_receive_data(count):
    """EFI_UDP4_RECEIVE_DATA with a FragmentTable of ``count`` entries (to read the driver's)."""
    return _with_fragments(EFI_UDP4_RECEIVE_DATA, count)


def fragment_table(address, count):
    """The FragmentCount-long table that starts at ``address`` (the FragmentTable field)."""
    return (EFI_TCP4_FRAGMENT_DATA * count).from_address(address)

