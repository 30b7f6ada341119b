"""UEFI network definitions shared by every protocol: GUIDs, addresses, service binding, the
layers below IP, and fragment tables of any length.

Named exactly as in the UEFI specification (and MdePkg/Include of tianocore/edk2); pure data on
the base types of BITS's ``efi`` module. ``efidefs_ip4`` and ``efidefs_ip6`` build the IPv4 and
IPv6 protocols on these; ``efidefs`` gathers all three under one name.

Contents
  GUIDs            every network protocol's and service binding's GUID, and the RNG and Hash2 ones
                   EDK2's network drivers need; GUID_NAMES
  addresses        EFI_IPv4_ADDRESS, EFI_IPv6_ADDRESS, EFI_MAC_ADDRESS; ipv4(), ipv4_text(), ipv6(), ipv6_bytes()
  service binding  EFI_SERVICE_BINDING_PROTOCOL and one subclass per network service
  MNP, SNP         EFI_MANAGED_NETWORK_CONFIG_DATA, EFI_SIMPLE_NETWORK_MODE (what GetModeData reports)
  EFI_TIME         the time stamp of a received datagram
  fragment tables  _with_fragments(base, n): a *_DATA structure with an n-entry FragmentTable
"""

import ctypes
import uuid
from ctypes import POINTER, Structure, Union

import efi
from efi import BOOLEAN, UINT8, UINT16, UINT32, EFI_HANDLE

from bitsnet import inet


# --- GUIDs (docs/edk2.md section 2.5) ----------------------------------------------
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
# Not network protocols, but EDK2's network drivers depend on them since 2024 (docs/edk2.md section 10).
EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("da836f8d-217f-4ca0-99c2-1ca4e16077ea")
EFI_RNG_PROTOCOL_GUID = uuid.UUID("3152bca5-eade-433d-862e-c01cdc291f44")

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
    EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID: "EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID",
    EFI_RNG_PROTOCOL_GUID: "EFI_RNG_PROTOCOL_GUID",
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
        packed = inet.parse_ipv4(text, strict=True)  # inet_pton's a.b.c.d: "010" is refused
        if packed is None:
            raise ValueError("not an IPv4 address: %r" % (text,))
        address.Addr[:] = list(bytearray(packed))
    return address


def ipv4_text(address):
    # type: (EFI_IPv4_ADDRESS) -> str
    """Dotted-quad text of an EFI_IPv4_ADDRESS."""
    return "%d.%d.%d.%d" % tuple(address.Addr)


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


# --- EFI_SERVICE_BINDING_PROTOCOL (UEFI spec 11.6) -----------------------------------------
class EFI_SERVICE_BINDING_PROTOCOL(efi.Protocol):
    """One per network service per NIC, on the NIC's controller handle (docs/edk2.md section 2.4)."""


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


class EFI_DNS6_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    guid = EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID


# --- The layers below IP, as GetModeData reports them (ManagedNetwork.h, SimpleNetwork.h) ---
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


# --- EFI_TIME (UefiSpec.h): the TimeStamp of EFI_UDP4/UDP6_RECEIVE_DATA ------------------------
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
