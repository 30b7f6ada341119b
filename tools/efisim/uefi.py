"""UEFI base definitions shared by the simulated firmware and the stand-in ``efi`` module.

This is the firmware's own view of the UEFI basics (MdePkg/Include/Uefi/UefiBaseType.h,
UefiSpec.h): base types, status codes, the GUID structure, the calling convention, TPLs,
event types, and the EFI_SYSTEM_TABLE / EFI_BOOT_SERVICES layouts. The stand-in
``boot_python/efi.py`` re-exports exactly the subset that BITS's own ``efi`` module offers
(docs/bits-efi.md section 9); the simulator's drivers use the rest.

On a host, ``EFIAPI`` is the host C calling convention: ctypes cannot call the Microsoft
x64 ABI on Linux, so the simulated firmware is built from plain ``CFUNCTYPE`` callbacks
(docs/edk2.md section 1.1).
"""

from __future__ import print_function

import ctypes
import numbers
import uuid
from ctypes import POINTER, Structure, c_bool, c_char, c_int8, c_int16, c_int32, c_int64
from ctypes import c_uint8, c_uint16, c_uint32, c_uint64, c_ulong, c_void_p

# --- Base types (UefiBaseType.h). BITS uses c_ulong for UINTN: pointer-sized on LP64 and ILP32.
BOOLEAN = c_bool
CHAR8 = c_char
INT8 = c_int8
INT16 = c_int16
INT32 = c_int32
INT64 = c_int64
UINT8 = c_uint8
UINT16 = c_uint16
UINT32 = c_uint32
UINT64 = c_uint64
UINTN = c_ulong
EFI_STATUS = c_ulong
EFI_TPL = c_ulong
EFI_HANDLE = c_void_p
EFI_EVENT = c_void_p

PTR_SIZE = ctypes.sizeof(c_void_p)
EFI_ERROR = 1 << (PTR_SIZE * 8 - 1)


def EFIFUNCTYPE(restype, *argtypes):
    """Function prototype with the EFIAPI calling convention (the host's, in the simulator)."""
    return ctypes.CFUNCTYPE(restype, *argtypes)


def FUNC(*argtypes, **kw):
    """FUNC(*argtypes, ret=EFI_STATUS): an EFIAPI function prototype, as BITS's efi.FUNC."""
    ret = kw.pop("ret", EFI_STATUS)
    if kw:
        raise TypeError("FUNC() got unexpected keyword arguments %r" % sorted(kw))
    return EFIFUNCTYPE(ret, *argtypes)


EFI_EVENT_NOTIFY = FUNC(EFI_EVENT, c_void_p, ret=None)


class EFI_GUID(Structure):
    """EFI_GUID: { UINT32 Data1; UINT16 Data2; UINT16 Data3; UINT8 Data4[8]; }, fields little endian.

    Constructed from a ``uuid.UUID`` or its string form; ``.uuid`` gives it back.
    """

    _fields_ = [
        ("Data1", UINT32),
        ("Data2", UINT16),
        ("Data3", UINT16),
        ("Data4", UINT8 * 8),
    ]

    def __init__(self, value=None):
        Structure.__init__(self)
        if value is None:
            return
        if not isinstance(value, uuid.UUID):
            value = uuid.UUID(str(value))
        ctypes.memmove(ctypes.addressof(self), value.bytes_le, 16)

    @property
    def uuid(self):
        return uuid.UUID(bytes_le=ctypes.string_at(ctypes.addressof(self), 16))

    def __repr__(self):
        return "EFI_GUID(%r)" % str(self.uuid)


# --- Status codes (docs/edk2.md section 1.3). Errors carry the top bit of UINTN.
EFI_SUCCESS = 0
EFI_LOAD_ERROR = EFI_ERROR | 1
EFI_INVALID_PARAMETER = EFI_ERROR | 2
EFI_UNSUPPORTED = EFI_ERROR | 3
EFI_BAD_BUFFER_SIZE = EFI_ERROR | 4
EFI_BUFFER_TOO_SMALL = EFI_ERROR | 5
EFI_NOT_READY = EFI_ERROR | 6
EFI_DEVICE_ERROR = EFI_ERROR | 7
EFI_WRITE_PROTECTED = EFI_ERROR | 8
EFI_OUT_OF_RESOURCES = EFI_ERROR | 9
EFI_VOLUME_CORRUPTED = EFI_ERROR | 10
EFI_VOLUME_FULL = EFI_ERROR | 11
EFI_NO_MEDIA = EFI_ERROR | 12
EFI_MEDIA_CHANGED = EFI_ERROR | 13
EFI_NOT_FOUND = EFI_ERROR | 14
EFI_ACCESS_DENIED = EFI_ERROR | 15
EFI_NO_RESPONSE = EFI_ERROR | 16
EFI_NO_MAPPING = EFI_ERROR | 17
EFI_TIMEOUT = EFI_ERROR | 18
EFI_NOT_STARTED = EFI_ERROR | 19
EFI_ALREADY_STARTED = EFI_ERROR | 20
EFI_ABORTED = EFI_ERROR | 21
EFI_ICMP_ERROR = EFI_ERROR | 22
EFI_TFTP_ERROR = EFI_ERROR | 23
EFI_PROTOCOL_ERROR = EFI_ERROR | 24
EFI_INCOMPATIBLE_VERSION = EFI_ERROR | 25
EFI_SECURITY_VIOLATION = EFI_ERROR | 26
EFI_CRC_ERROR = EFI_ERROR | 27
EFI_END_OF_MEDIA = EFI_ERROR | 28
EFI_END_OF_FILE = EFI_ERROR | 31
EFI_INVALID_LANGUAGE = EFI_ERROR | 32
EFI_COMPROMISED_DATA = EFI_ERROR | 33
EFI_IP_ADDRESS_CONFLICT = EFI_ERROR | 34
EFI_HTTP_ERROR = EFI_ERROR | 35
EFI_NETWORK_UNREACHABLE = EFI_ERROR | 100
EFI_HOST_UNREACHABLE = EFI_ERROR | 101
EFI_PROTOCOL_UNREACHABLE = EFI_ERROR | 102
EFI_PORT_UNREACHABLE = EFI_ERROR | 103
EFI_CONNECTION_FIN = EFI_ERROR | 104
EFI_CONNECTION_RESET = EFI_ERROR | 105
EFI_CONNECTION_REFUSED = EFI_ERROR | 106
EFI_WARN_UNKNOWN_GLYPH = 1
EFI_WARN_DELETE_FAILURE = 2
EFI_WARN_WRITE_FAILURE = 3
EFI_WARN_BUFFER_TOO_SMALL = 4
EFI_WARN_STALE_DATA = 5
EFI_WARN_FILE_SYSTEM = 6
EFI_WARN_RESET_REQUIRED = 7

efi_status_decode = dict(  # type: dict
    (value, name)
    for name, value in list(globals().items())
    if name.startswith("EFI_") and isinstance(value, numbers.Integral) and not isinstance(value, bool)
    and name not in ("EFI_ERROR",)
)


class EFIException(Exception):
    """A failing EFI status; ``args[0]`` is the raw status."""

    def __str__(self):
        status = self.args[0]
        return "%s (0x%x)" % (efi_status_decode.get(status, "EFI status"), status)


def check_status(status):
    """Raise EFIException unless status is EFI_SUCCESS (warnings raise too, as in BITS)."""
    if status != EFI_SUCCESS:
        raise EFIException(status)


# --- Task priority levels and event types (UefiSpec.h; docs/edk2.md section 2.3)
TPL_APPLICATION = 4
TPL_CALLBACK = 8
TPL_NOTIFY = 16
TPL_HIGH_LEVEL = 31

EVT_TIMER = 0x80000000
EVT_RUNTIME = 0x40000000
EVT_NOTIFY_WAIT = 0x00000100
EVT_NOTIFY_SIGNAL = 0x00000200
EVT_SIGNAL_EXIT_BOOT_SERVICES = 0x00000201
EVT_SIGNAL_VIRTUAL_ADDRESS_CHANGE = 0x60000202

# EFI_TIMER_DELAY
TimerCancel = 0
TimerPeriodic = 1
TimerRelative = 2

# EFI_LOCATE_SEARCH_TYPE
AllHandles = 0
ByRegisterNotify = 1
ByProtocol = 2

# EFI_MEMORY_TYPE values that applications pass to AllocatePool
EfiLoaderData = 2
EfiBootServicesData = 4

EFI_OPEN_PROTOCOL_BY_HANDLE_PROTOCOL = 0x01
EFI_OPEN_PROTOCOL_GET_PROTOCOL = 0x02
EFI_OPEN_PROTOCOL_TEST_PROTOCOL = 0x04
EFI_OPEN_PROTOCOL_BY_CHILD_CONTROLLER = 0x08
EFI_OPEN_PROTOCOL_BY_DRIVER = 0x10
EFI_OPEN_PROTOCOL_EXCLUSIVE = 0x20

# --- Network protocol GUIDs (docs/edk2.md section 2.5), as bits-2079's efi.py offers them.
EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("00720665-67eb-4a99-baf7-d3c33a1c7cc9")
EFI_TCP4_PROTOCOL_GUID = uuid.UUID("65530bc7-a359-410f-b010-5aadc7ec2b62")
EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("ec20eb79-6c1a-4664-9a0d-d2e4cc16d664")
EFI_TCP6_PROTOCOL_GUID = uuid.UUID("46e44855-bd60-4ab7-ab0d-a679b9447d77")
EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("83f01464-99bd-45e5-b383-af6305d8e9e6")
EFI_UDP4_PROTOCOL_GUID = uuid.UUID("3ad9df29-4501-478d-b1f8-7f7fe70e50f3")
EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("66ed4721-3c98-4d3e-81e3-d03dd39a7254")
EFI_UDP6_PROTOCOL_GUID = uuid.UUID("4f948815-b4b9-43cb-8a33-90e060b34955")
EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("c51711e7-b4bf-404a-bfb8-0a048ef1ffe4")
EFI_IP4_PROTOCOL_GUID = uuid.UUID("41d94cd2-35b6-455a-8258-d4e51334aadd")
EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("ec835dd3-fe0f-617b-a621-b350c3e13388")
EFI_IP6_PROTOCOL_GUID = uuid.UUID("2c8759d5-5c2d-66ef-925f-b66c101957e2")
EFI_IP4_CONFIG2_PROTOCOL_GUID = uuid.UUID("5b446ed1-e30b-4faa-871a-3654eca36080")
EFI_IP6_CONFIG_PROTOCOL_GUID = uuid.UUID("937fe521-95ae-4d1a-8929-48bcd90ad31a")
EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("b625b186-e063-44f7-8905-6a74dc6f52b4")
EFI_DNS4_PROTOCOL_GUID = uuid.UUID("ae3d28cc-e05b-4fa1-a011-7eb55a3f1401")
EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("7f1647c8-b76e-44b2-a565-f70ff19cd19e")
EFI_DNS6_PROTOCOL_GUID = uuid.UUID("ca37bc1f-a327-4ae9-828a-8c40d8506a17")
EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("9d9a39d8-bd42-4a73-a4d5-8ee94be11380")
EFI_DHCP4_PROTOCOL_GUID = uuid.UUID("8a219718-4ef5-4761-91c8-c0f04bda9e56")
EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("f36ff770-a7e1-42cf-9ed2-56f0f271f44c")
EFI_MANAGED_NETWORK_PROTOCOL_GUID = uuid.UUID("7ab33a91-ace5-4326-b572-e7ee33d39f16")
EFI_SIMPLE_NETWORK_PROTOCOL_GUID = uuid.UUID("a19832b9-ac25-11d3-9a2d-0090273fc14d")
EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID = uuid.UUID("da836f8d-217f-4ca0-99c2-1ca4e16077ea")

NETWORK_GUIDS = dict(
    (value, name) for name, value in list(globals().items()) if name.endswith("_GUID") and isinstance(value, uuid.UUID)
)


# --- EFI_TABLE_HEADER, EFI_BOOT_SERVICES, EFI_SYSTEM_TABLE (docs/edk2.md section 2.1, section 2.2)
class EFI_TABLE_HEADER(Structure):
    _fields_ = [
        ("Signature", UINT64),
        ("Revision", UINT32),
        ("HeaderSize", UINT32),
        ("CRC32", UINT32),
        ("Reserved", UINT32),
    ]


_PTR = c_void_p
# One row per slot, in the order of the UEFI spec; slots the simulator does not
# implement are plain pointers left NULL (calling one is a firmware crash, as it would be).
BOOT_SERVICES_SLOTS = [
    ("RaiseTPL", FUNC(EFI_TPL, ret=EFI_TPL)),
    ("RestoreTPL", FUNC(EFI_TPL, ret=None)),
    ("AllocatePages", _PTR),
    ("FreePages", _PTR),
    ("GetMemoryMap", _PTR),
    ("AllocatePool", FUNC(UINT32, UINTN, POINTER(c_void_p))),
    ("FreePool", FUNC(c_void_p)),
    ("CreateEvent", FUNC(UINT32, EFI_TPL, EFI_EVENT_NOTIFY, c_void_p, POINTER(EFI_EVENT))),
    ("SetTimer", FUNC(EFI_EVENT, UINT32, UINT64)),
    ("WaitForEvent", FUNC(UINTN, POINTER(EFI_EVENT), POINTER(UINTN))),
    ("SignalEvent", FUNC(EFI_EVENT)),
    ("CloseEvent", FUNC(EFI_EVENT)),
    ("CheckEvent", FUNC(EFI_EVENT)),
    ("InstallProtocolInterface", _PTR),
    ("ReinstallProtocolInterface", _PTR),
    ("UninstallProtocolInterface", _PTR),
    ("HandleProtocol", FUNC(EFI_HANDLE, POINTER(EFI_GUID), POINTER(c_void_p))),
    ("Reserved", _PTR),
    ("RegisterProtocolNotify", _PTR),
    ("LocateHandle", FUNC(UINT32, POINTER(EFI_GUID), c_void_p, POINTER(UINTN), POINTER(EFI_HANDLE))),
    ("LocateDevicePath", _PTR),
    ("InstallConfigurationTable", _PTR),
    ("LoadImage", _PTR),
    ("StartImage", _PTR),
    ("Exit", _PTR),
    ("UnloadImage", _PTR),
    ("ExitBootServices", _PTR),
    ("GetNextMonotonicCount", _PTR),
    ("Stall", FUNC(UINTN)),
    ("SetWatchdogTimer", _PTR),
    ("ConnectController", FUNC(EFI_HANDLE, POINTER(EFI_HANDLE), c_void_p, BOOLEAN)),
    ("DisconnectController", _PTR),
    ("OpenProtocol", FUNC(EFI_HANDLE, POINTER(EFI_GUID), POINTER(c_void_p), EFI_HANDLE, EFI_HANDLE, UINT32)),
    ("CloseProtocol", FUNC(EFI_HANDLE, POINTER(EFI_GUID), EFI_HANDLE, EFI_HANDLE)),
    ("OpenProtocolInformation", _PTR),
    ("ProtocolsPerHandle", _PTR),
    ("LocateHandleBuffer", FUNC(UINT32, POINTER(EFI_GUID), c_void_p, POINTER(UINTN), POINTER(POINTER(EFI_HANDLE)))),
    ("LocateProtocol", FUNC(POINTER(EFI_GUID), c_void_p, POINTER(c_void_p))),
    ("InstallMultipleProtocolInterfaces", _PTR),
    ("UninstallMultipleProtocolInterfaces", _PTR),
    ("CalculateCrc32", _PTR),
    ("CopyMem", _PTR),
    ("SetMem", _PTR),
    ("CreateEventEx", FUNC(UINT32, EFI_TPL, EFI_EVENT_NOTIFY, c_void_p, POINTER(EFI_GUID), POINTER(EFI_EVENT))),
]


class EFI_BOOT_SERVICES(Structure):
    _fields_ = [("Hdr", EFI_TABLE_HEADER)] + BOOT_SERVICES_SLOTS


class EFI_SYSTEM_TABLE(Structure):
    _fields_ = [
        ("Hdr", EFI_TABLE_HEADER),
        ("FirmwareVendor", c_void_p),
        ("FirmwareRevision", UINT32),
        ("ConsoleInHandle", EFI_HANDLE),
        ("ConIn", c_void_p),
        ("ConsoleOutHandle", EFI_HANDLE),
        ("ConOut", c_void_p),
        ("StandardErrorHandle", EFI_HANDLE),
        ("StdErr", c_void_p),
        ("RuntimeServices", c_void_p),
        ("BootServices", POINTER(EFI_BOOT_SERVICES)),
        ("NumberOfTableEntries", UINTN),
        ("ConfigurationTable", c_void_p),
    ]


EFI_BOOT_SERVICES_SIGNATURE = 0x56524553544F4F42
EFI_SYSTEM_TABLE_SIGNATURE = 0x5453595320494249
EFI_2_70_SYSTEM_TABLE_REVISION = (2 << 16) | 70
FIRMWARE_VENDOR = "EDK II"
FIRMWARE_REVISION = 0x10000
