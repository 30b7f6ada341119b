"""UEFI TLS definitions that BITS's ``efi`` module lacks: EFI_TLS_PROTOCOL and its friends.

Named exactly as in the UEFI specification ("EFI TLS Protocols") and tianocore/edk2
MdePkg/Include/Protocol/Tls.h and TlsConfig.h. Pure data, as ``efidefs`` is; what the firmware
does with it is in docs/tls.md.

Contents
  GUIDs          EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID, EFI_TLS_PROTOCOL_GUID,
                 EFI_TLS_CONFIGURATION_PROTOCOL_GUID
  session data   EfiTls* (EFI_TLS_SESSION_DATA_TYPE), EFI_TLS_VERSION, EfiTlsClient/Server,
                 EFI_TLS_VERIFY_*, EFI_TLS_VERIFY_FLAG_*, EFI_TLS_VERIFY_HOST (packed),
                 EfiTlsSession* (EFI_TLS_SESSION_STATE), EFI_TLS_FRAGMENT_DATA, EfiTlsEncrypt/Decrypt
  protocols      EFI_TLS_SERVICE_BINDING_PROTOCOL, EFI_TLS_PROTOCOL, EFI_TLS_CONFIGURATION_PROTOCOL
                 and EfiTlsConfigDataType*
  records        TLS record layer constants (RFC 5246 6.2) the protocol's buffers are made of

Enumerations are C enums: 32-bit values, passed by value as UINT32 and stored in 4 bytes
(sizeof (EFI_TLS_CONNECTION_END) and sizeof (EFI_TLS_SESSION_STATE) are 4, which
SetSessionData checks, docs/tls.md section 2.1).
"""

import uuid
from ctypes import POINTER, Structure, c_char_p, c_void_p

import efi
from efi import UINT8, UINT32, UINTN

from bitsnet.efidefs_common import EFI_SERVICE_BINDING_PROTOCOL

EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("952cb795-ff36-48cf-a249-4df486d6ab8d")
EFI_TLS_PROTOCOL_GUID = uuid.UUID("00ca959f-6cfa-4db1-95bc-e46c47514390")
EFI_TLS_CONFIGURATION_PROTOCOL_GUID = uuid.UUID("1682fe44-bd7a-4407-b7c7-dca37ca3922d")

# --- EFI_TLS_SESSION_DATA_TYPE ---------------------------------------------------------------
EfiTlsVersion = 0
EfiTlsConnectionEnd = 1
EfiTlsCipherList = 2
EfiTlsCompressionMethod = 3
EfiTlsExtensionData = 4
EfiTlsVerifyMethod = 5
EfiTlsSessionID = 6
EfiTlsSessionState = 7
EfiTlsClientRandom = 8
EfiTlsServerRandom = 9
EfiTlsKeyMaterial = 10
EfiTlsVerifyHost = 11  # added to EDK2 in 2020 (CVE-2019-14553); older TlsDxe: EFI_UNSUPPORTED
EfiTlsSessionDataTypeMaximum = 12

SESSION_DATA_NAMES = ("EfiTlsVersion", "EfiTlsConnectionEnd", "EfiTlsCipherList", "EfiTlsCompressionMethod",
                      "EfiTlsExtensionData", "EfiTlsVerifyMethod", "EfiTlsSessionID", "EfiTlsSessionState",
                      "EfiTlsClientRandom", "EfiTlsServerRandom", "EfiTlsKeyMaterial", "EfiTlsVerifyHost")


class EFI_TLS_VERSION(Structure):
    _fields_ = [("Major", UINT8), ("Minor", UINT8)]


# EFI_TLS_CONNECTION_END
EfiTlsClient = 0
EfiTlsServer = 1

# EFI_TLS_VERIFY (UINT32 bit mask)
EFI_TLS_VERIFY_NONE = 0x0
EFI_TLS_VERIFY_PEER = 0x1
EFI_TLS_VERIFY_FAIL_IF_NO_PEER_CERT = 0x2
EFI_TLS_VERIFY_CLIENT_ONCE = 0x4

# EFI_TLS_VERIFY_HOST_FLAG (UINT32 bit mask)
EFI_TLS_VERIFY_FLAG_NONE = 0x00
EFI_TLS_VERIFY_FLAG_ALWAYS_CHECK_SUBJECT = 0x01
EFI_TLS_VERIFY_FLAG_NO_WILDCARDS = 0x02
EFI_TLS_VERIFY_FLAG_NO_PARTIAL_WILDCARDS = 0x04
EFI_TLS_VERIFY_FLAG_MULTI_LABEL_WILDCARDS = 0x08
EFI_TLS_VERIFY_FLAG_SINGLE_LABEL_SUBDOMAINS = 0x10
EFI_TLS_VERIFY_FLAG_NEVER_CHECK_SUBJECT = 0x20


class EFI_TLS_VERIFY_HOST(Structure):
    """#pragma pack (1) in Tls.h: HostName sits at offset 4, the structure is 12 bytes on x64."""
    _pack_ = 1
    _fields_ = [("Flags", UINT32), ("HostName", c_char_p)]


# EFI_TLS_SESSION_STATE
EfiTlsSessionNotStarted = 0
EfiTlsSessionHandShaking = 1
EfiTlsSessionDataTransferring = 2
EfiTlsSessionClosing = 3
EfiTlsSessionError = 4
EfiTlsSessionStateMaximum = 5

SESSION_STATE_NAMES = ("EfiTlsSessionNotStarted", "EfiTlsSessionHandShaking", "EfiTlsSessionDataTransferring",
                       "EfiTlsSessionClosing", "EfiTlsSessionError")


class EFI_TLS_FRAGMENT_DATA(Structure):
    _fields_ = [("FragmentLength", UINT32), ("FragmentBuffer", c_void_p)]


# EFI_TLS_CRYPT_MODE
EfiTlsEncrypt = 0
EfiTlsDecrypt = 1

# EFI_TLS_CONFIG_DATA_TYPE
EfiTlsConfigDataTypeHostPublicCert = 0
EfiTlsConfigDataTypeHostPrivateKey = 1
EfiTlsConfigDataTypeCACertificate = 2
EfiTlsConfigDataTypeCertRevocationList = 3
EfiTlsConfigDataTypeMaximum = 4


# --- The protocols ---------------------------------------------------------------------------
class EFI_TLS_SERVICE_BINDING_PROTOCOL(EFI_SERVICE_BINDING_PROTOCOL):
    """On TlsDxe's own handle, not on a NIC: TLS is not bound to a network device (docs/tls.md section 1.1)."""
    guid = EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID


class EFI_TLS_PROTOCOL(efi.Protocol):
    guid = EFI_TLS_PROTOCOL_GUID


_TLS = POINTER(EFI_TLS_PROTOCOL)
EFI_TLS_PROTOCOL._fields_ = [
    # SetSessionData(This, DataType, Data, DataSize)
    ("SetSessionData", efi.FUNC(_TLS, UINT32, c_void_p, UINTN)),
    # GetSessionData(This, DataType, Data, *DataSize)
    ("GetSessionData", efi.FUNC(_TLS, UINT32, c_void_p, POINTER(UINTN))),
    # BuildResponsePacket(This, RequestBuffer, RequestSize, Buffer, *BufferSize)
    ("BuildResponsePacket", efi.FUNC(_TLS, c_void_p, UINTN, c_void_p, POINTER(UINTN))),
    # ProcessPacket(This, **FragmentTable, *FragmentCount, CryptMode)
    ("ProcessPacket", efi.FUNC(_TLS, POINTER(POINTER(EFI_TLS_FRAGMENT_DATA)), POINTER(UINT32), UINT32)),
]


class EFI_TLS_CONFIGURATION_PROTOCOL(efi.Protocol):
    guid = EFI_TLS_CONFIGURATION_PROTOCOL_GUID


_TLS_CONFIG = POINTER(EFI_TLS_CONFIGURATION_PROTOCOL)
EFI_TLS_CONFIGURATION_PROTOCOL._fields_ = [
    # SetData(This, DataType, Data, DataSize)
    ("SetData", efi.FUNC(_TLS_CONFIG, UINT32, c_void_p, UINTN)),
    # GetData(This, DataType, Data, *DataSize)
    ("GetData", efi.FUNC(_TLS_CONFIG, UINT32, c_void_p, POINTER(UINTN))),
]

# --- The TLS record layer (RFC 5246 6.2.1): what every buffer above is made of ----------------
TLS_RECORD_HEADER_LENGTH = 5  # ContentType, ProtocolVersion (2), Length (2)
TLS_PLAINTEXT_RECORD_MAX_PAYLOAD_LENGTH = 16384
TLS_CIPHERTEXT_RECORD_MAX_PAYLOAD_LENGTH = 16384 + 2048
TlsContentTypeChangeCipherSpec = 20
TlsContentTypeAlert = 21
TlsContentTypeHandshake = 22
TlsContentTypeApplicationData = 23
