"""UEFI network definitions that BITS's ``efi`` module lacks: structures, enums and GUIDs.

Everything here is named exactly as in the UEFI specification (and MdePkg/Include/Protocol/*.h
of tianocore/edk2), so a reader holding the spec can find every structure and field. It is
pure data, built on the base types of ``efi``; the only behaviour is a few constructors.

Contents
  addresses        EFI_IPv4_ADDRESS, EFI_IPv6_ADDRESS, EFI_MAC_ADDRESS; ipv4(), ipv4_text()
  service binding  EFI_SERVICE_BINDING_PROTOCOL and one subclass per network service
  IP4, MNP, SNP    EFI_IP4_CONFIG_DATA, EFI_IP4_MODE_DATA, EFI_IP4_ROUTE_TABLE, ... (GetModeData)
  TCP4             EFI_TCP4_CONFIG_DATA ... EFI_TCP4_PROTOCOL; Tcp4State* values
  IP4 Config2      EFI_IP4_CONFIG2_INTERFACE_INFO ... EFI_IP4_CONFIG2_PROTOCOL; data types, policies
  UDP4, DNS4       EFI_UDP4_CONFIG_DATA ... EFI_UDP4_PROTOCOL; EFI_DNS4_CONFIG_DATA ... EFI_DNS4_PROTOCOL
  fragment tables  tcp4_receive_data(n), tcp4_transmit_data(n), udp4_*_data(n), fragment_table(address, n)
  IPv6             ipv6(16 bytes), ipv6_bytes(); EFI_IP6_MODE_DATA ...; EFI_TCP6_*, Tcp6State*; EFI_UDP6_*;
                   EFI_IP6_CONFIG_* (Ip6ConfigDataType*, Ip6ConfigPolicy*); EFI_DNS6_*; tcp6_*_data(n), udp6_*_data(n)

Layout rules that matter (efi-network-facts.md section 1.2): IPv4/IPv6 addresses are byte
arrays with alignment 1 -- that is what puts EFI_TCP4_ACCESS_POINT.StationPort at offset 10 --
and port numbers in configuration and session structures are host byte order. UINTN and
pointers take the native size, so the same classes describe x64 and IA32 firmware.
tests/test_efi_layout.py pins every size and offset against the facts sheet.

The spec declares fragment tables as one-element arrays followed by more elements in the same
allocation; ``tcp4_receive_data(n)`` and ``tcp4_transmit_data(n)`` build the n-element variant
with an identical prefix, to be passed where the spec type is expected (via ``ctypes.cast``).
"""

import ctypes
import uuid
from ctypes import POINTER, Structure, Union, c_void_p

import efi
from efi import BOOLEAN, UINT8, UINT16, UINT32, UINTN, EFI_EVENT, EFI_HANDLE, EFI_STATUS

# --- GUIDs (efi-network-facts.md section 2.5) ----------------------------------------------
EFI_SIMPLE_NETWORK_PROTOCOL_GUID = uuid.UUID("a19832b9-ac25-11d3-9a2d-0090273fc14d")
EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("f36ff770-a7e1-42cf-9ed2-56f0f271f44c")
EFI_MANAGED_NETWORK_PROTOCOL_GUID = uuid.UUID("7ab33a91-ace5-4326-b572-e7ee33d39f16")
EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("c51711e7-b4bf-404a-bfb8-0a048ef1ffe4")
EFI_IP4_PROTOCOL_GUID = uuid.UUID("41d94cd2-35b6-455a-8258-d4e51334aadd")
EFI_IP4_CONFIG2_PROTOCOL_GUID = uuid.UUID("5b446ed1-e30b-4faa-871a-3654eca36080")
EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("00720665-67eb-4a99-baf7-d3c33a1c7cc9")
EFI_TCP4_PROTOCOL_GUID = uuid.UUID("65530bc7-a359-410f-b010-5aadc7ec2b62")
EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("83f01464-99bd-45e5-b383-af6305d8e9e6")
EFI_UDP4_PROTOCOL_GUID = uuid.UUID("3ad9df29-4501-478d-b1f8-7f7fe70e50f3")
EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("b625b186-e063-44f7-8905-6a74dc6f52b4")
EFI_DNS4_PROTOCOL_GUID = uuid.UUID("ae3d28cc-e05b-4fa1-a011-7eb55a3f1401")
EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("9d9a39d8-bd42-4a73-a4d5-8ee94be11380")
EFI_DHCP4_PROTOCOL_GUID = uuid.UUID("8a219718-4ef5-4761-91c8-c0f04bda9e56")
EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("ec835dd3-fe0f-617b-a621-b350c3e13388")
EFI_IP6_PROTOCOL_GUID = uuid.UUID("2c8759d5-5c2d-66ef-925f-b66c101957e2")
EFI_IP6_CONFIG_PROTOCOL_GUID = uuid.UUID("937fe521-95ae-4d1a-8929-48bcd90ad31a")
EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("ec20eb79-6c1a-4664-9a0d-d2e4cc16d664")
EFI_TCP6_PROTOCOL_GUID = uuid.UUID("46e44855-bd60-4ab7-ab0d-a679b9447d77")
EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("66ed4721-3c98-4d3e-81e3-d03dd39a7254")
EFI_UDP6_PROTOCOL_GUID = uuid.UUID("4f948815-b4b9-43cb-8a33-90e060b34955")
EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("7f1647c8-b76e-44b2-a565-f70ff19cd19e")
EFI_DNS6_PROTOCOL_GUID = uuid.UUID("ca37bc1f-a327-4ae9-828a-8c40d8506a17")

GUID_NAMES = {
    EFI_SIMPLE_NETWORK_PROTOCOL_GUID: "EFI_SIMPLE_NETWORK_PROTOCOL_GUID",
    EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID: "EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_MANAGED_NETWORK_PROTOCOL_GUID: "EFI_MANAGED_NETWORK_PROTOCOL_GUID",
    EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID: "EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_IP4_PROTOCOL_GUID: "EFI_IP4_PROTOCOL_GUID",
    EFI_IP4_CONFIG2_PROTOCOL_GUID: "EFI_IP4_CONFIG2_PROTOCOL_GUID",
    EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID: "EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_TCP4_PROTOCOL_GUID: "EFI_TCP4_PROTOCOL_GUID",
    EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID: "EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_UDP4_PROTOCOL_GUID: "EFI_UDP4_PROTOCOL_GUID",
    EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID: "EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_DNS4_PROTOCOL_GUID: "EFI_DNS4_PROTOCOL_GUID",
    EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID: "EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_DHCP4_PROTOCOL_GUID: "EFI_DHCP4_PROTOCOL_GUID",
    EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID: "EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_IP6_PROTOCOL_GUID: "EFI_IP6_PROTOCOL_GUID",
    EFI_IP6_CONFIG_PROTOCOL_GUID: "EFI_IP6_CONFIG_PROTOCOL_GUID",
    EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID: "EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_TCP6_PROTOCOL_GUID: "EFI_TCP6_PROTOCOL_GUID",
    EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID: "EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_UDP6_PROTOCOL_GUID: "EFI_UDP6_PROTOCOL_GUID",
    EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID: "EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_DNS6_PROTOCOL_GUID: "EFI_DNS6_PROTOCOL_GUID",
}


# --- Addresses (UefiBaseType.h): byte arrays, alignment 1, network byte order ---------------
class EFI_IPv4_ADDRESS(Structure):
    _fields_ = [("Addr", UINT8 * 4)]


class EFI_IPv6_ADDRESS(Structure):
    _fields_ = [("Addr", UINT8 * 16)]


class EFI_IP_ADDRESS(Union):
    _fields_ = [("Addr", UINT32 * 4), ("v4", EFI_IPv4_ADDRESS), ("v6", EFI_IPv6_ADDRESS)]


class EFI_MAC_ADDRESS(Structure):
    _fields_ = [("Addr", UINT8 * 32)]


def ipv4(text=None):
    """EFI_IPv4_ADDRESS from dotted-quad text; None or "" gives 0.0.0.0."""
    address = EFI_IPv4_ADDRESS()
    if text:
        parts = [int(p) for p in text.split(".")]
        if len(parts) != 4 or not all(0 <= p <= 255 for p in parts):
            raise ValueError("not an IPv4 address: %r" % (text,))
        address.Addr[:] = parts
    return address


def ipv4_text(address):
    # type: (EFI_IPv4_ADDRESS) -> str
    """Dotted-quad text of an EFI_IPv4_ADDRESS."""
    return "%d.%d.%d.%d" % tuple(address.Addr)


# --- EFI_SERVICE_BINDING_PROTOCOL (UEFI spec 11.6) -----------------------------------------
class EFI_SERVICE_BINDING_PROTOCOL(efi.Protocol):
    """One per network service per NIC, on the NIC's controller handle (facts section 2.4)."""


EFI_SERVICE_BINDING_PROTOCOL._fields_ = [
    # CreateChild(This, ChildHandle): *ChildHandle NULL -> a new handle with the service's protocol
    ("CreateChild", efi.FUNC(POINTER(EFI_SERVICE_BINDING_PROTOCOL), POINTER(EFI_HANDLE))),
    # DestroyChild(This, ChildHandle): removes the protocol; the child's tokens are flushed
    ("DestroyChild", efi.FUNC(POINTER(EFI_SERVICE_BINDING_PROTOCOL), EFI_HANDLE)),
]


class EFI_TCP4_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID


class EFI_UDP4_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID


class EFI_DNS4_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID


class EFI_TCP6_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID


class EFI_UDP6_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID


# --- What GetModeData reports about the layers below (Ip4.h, ManagedNetwork.h, SimpleNetwork.h)
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


class EFI_MANAGED_NETWORK_CONFIG_DATA(Structure):
    _fields_ = [
        ("ReceivedQueueTimeoutValue", UINT32),
        ("TransmitQueueTimeoutValue", UINT32),
        ("ProtocolTypeFilter", UINT16),
        ("EnableUnicastReceive", BOOLEAN),
        ("EnableMulticastReceive", BOOLEAN),
        ("EnableBroadcastReceive", BOOLEAN),
        ("EnablePromiscuousReceive", BOOLEAN),
        ("FlushQueuesOnReset", BOOLEAN),
        ("EnableReceiveTimestamps", BOOLEAN),
        ("DisableBackgroundPolling", BOOLEAN),
    ]


MAX_MCAST_FILTER_CNT = 16


class EFI_SIMPLE_NETWORK_MODE(Structure):
    _fields_ = [
        ("State", UINT32),
        ("HwAddressSize", UINT32),
        ("MediaHeaderSize", UINT32),
        ("MaxPacketSize", UINT32),
        ("NvRamSize", UINT32),
        ("NvRamAccessSize", UINT32),
        ("ReceiveFilterMask", UINT32),
        ("ReceiveFilterSetting", UINT32),
        ("MaxMCastFilterCount", UINT32),
        ("MCastFilterCount", UINT32),
        ("MCastFilter", EFI_MAC_ADDRESS * MAX_MCAST_FILTER_CNT),
        ("CurrentAddress", EFI_MAC_ADDRESS),
        ("BroadcastAddress", EFI_MAC_ADDRESS),
        ("PermanentAddress", EFI_MAC_ADDRESS),
        ("IfType", UINT8),
        ("MacAddressChangeable", BOOLEAN),
        ("MultipleTxSupported", BOOLEAN),
        ("MediaPresentSupported", BOOLEAN),
        ("MediaPresent", BOOLEAN),
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
    # by the default instead of clamping it (facts section 3.9).
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
        # Points just past this structure, into the caller's buffer (facts section 5.2)
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


class EFI_TIME(Structure):
    _fields_ = [
        ("Year", UINT16),
        ("Month", UINT8),
        ("Day", UINT8),
        ("Hour", UINT8),
        ("Minute", UINT8),
        ("Second", UINT8),
        ("Pad1", UINT8),
        ("Nanosecond", UINT32),
        ("TimeZone", ctypes.c_int16),
        ("Daylight", UINT8),
        ("Pad2", UINT8),
    ]


class EFI_UDP4_RECEIVE_DATA(Structure):
    # Owned by the driver: copy the payload out, then SignalEvent(RecycleSignal) (facts 4.2).
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
        ("DnsServerList", POINTER(EFI_IPv4_ADDRESS)),  # EDK2 uses only the first (facts 6.2)
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
    # Allocated by the driver: the caller FreePools IpList and then this structure (facts 6.2).
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


# --- Fragment tables of any length -----------------------------------------------------------
_variants = {}  # type: dict


def _with_fragments(base, count):
    key = (base, count)
    cls = _variants.get(key)
    if cls is None:
        fields = [f for f in base._fields_ if f[0] != "FragmentTable"]
        fragment = dict(base._fields_)["FragmentTable"]._type_  # the spec's one-element array
        fields.append(("FragmentTable", fragment * count))
        cls = type("%s_%d" % (base.__name__, count), (Structure,), {"_fields_": fields})
        _variants[key] = cls
    return cls


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


# --- IPv6 (UEFI spec 28.2 TCP6, 28.4 UDP6, 28.6 IP6 Config, 29.3 DNS6) -----------------------
# Same shapes as the IPv4 families with EFI_IPv6_ADDRESS fields; the differences that bite are
# the missing UseDefaultAddress/SubnetMask (an all-zero StationAddress lets IP6 choose, facts 3.7)
# and the missing Routes slot in the TCP6 and UDP6 function tables (facts 3.2, 4.1).
def ipv6(packed=None):
    """EFI_IPv6_ADDRESS from 16 bytes in network order; None or b"" gives ::."""
    address = EFI_IPv6_ADDRESS()
    if packed:
        data = bytearray(packed)
        if len(data) != 16:
            raise ValueError("not a packed IPv6 address: %r" % (packed,))
        address.Addr[:] = list(data)
    return address


def ipv6_bytes(address):
    # type: (EFI_IPv6_ADDRESS) -> bytes
    """The 16 network-order bytes of an EFI_IPv6_ADDRESS."""
    return bytes(bytearray(address.Addr))


class EFI_DNS6_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID


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
        ("StationAddress", EFI_IPv6_ADDRESS),  # all zero: IP6 chooses the source (facts 3.7)
        ("StationPort", UINT16),  # host byte order
        ("RemoteAddress", EFI_IPv6_ADDRESS),
        ("RemotePort", UINT16),  # host byte order
        ("ActiveFlag", BOOLEAN),
    ]


class EFI_TCP6_OPTION(Structure):
    _fields_ = list(EFI_TCP4_OPTION._fields_)  # identical layout (facts 3.1)


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

TCP6_STATE_NAMES = dict((value, name.replace("Tcp4", "Tcp6")) for value, name in TCP4_STATE_NAMES.items())


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
    # No Routes slot: everything below sits one slot earlier than in EFI_TCP4_PROTOCOL (facts 3.2)
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
    # Owned by the driver: copy the payload out, then SignalEvent(RecycleSignal) (facts 4.2).
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
    # No Routes slot (facts 4.1)
    ("Transmit", efi.FUNC(_UDP6, POINTER(EFI_UDP6_COMPLETION_TOKEN))),
    ("Receive", efi.FUNC(_UDP6, POINTER(EFI_UDP6_COMPLETION_TOKEN))),
    ("Cancel", efi.FUNC(_UDP6, POINTER(EFI_UDP6_COMPLETION_TOKEN))),
    ("Poll", efi.FUNC(_UDP6)),
]


# --- EFI_IP6_CONFIG_PROTOCOL (Protocol/Ip6Config.h; facts 5.3) --------------------------------
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
        ("DnsServerCount", UINT32),  # UINT32 here, UINTN in DNS4 (facts 6.1)
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
    # Allocated by the driver: the caller FreePools IpList and then this structure (facts 6.2).
    _fields_ = [("IpCount", UINT32), ("IpList", POINTER(EFI_IPv6_ADDRESS))]


class DNS6_ADDR_TO_HOST_DATA(Structure):
    _fields_ = [("HostName", POINTER(UINT16))]


class DNS6_RESOURCE_RECORD(Structure):
    _fields_ = list(DNS_RESOURCE_RECORD._fields_)


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
