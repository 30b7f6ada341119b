"""Stand-in for BITS's ``efi`` module, backed by the host firmware simulator.

It offers exactly the names that docs/bits-efi.md section 9 lists (a test diffs ``dir()``
against that list), with BITS's meaning, so code that runs here runs in BITS. The private
``_event_callback`` and ``_event_handlers`` mirror bits-2079's dispatcher for events made by
``create_event``; BITS registers it with ``_efi._set_event_callback`` at import, and so do we.
"""

import ctypes as _ctypes
from ctypes import Structure as _Structure
from ctypes import byref as _byref
from ctypes import c_void_p as _c_void_p
from ctypes import cast as _cast

import _efi
from efisim import uefi as _uefi

BOOLEAN = _uefi.BOOLEAN
CHAR8 = _uefi.CHAR8
UINT8 = _uefi.UINT8
UINT16 = _uefi.UINT16
UINT32 = _uefi.UINT32
UINT64 = _uefi.UINT64
INT8 = _uefi.INT8
INT16 = _uefi.INT16
INT32 = _uefi.INT32
INT64 = _uefi.INT64
UINTN = _uefi.UINTN
EFI_STATUS = _uefi.EFI_STATUS
EFI_HANDLE = _uefi.EFI_HANDLE
EFI_EVENT = _uefi.EFI_EVENT
EFI_TPL = _uefi.EFI_TPL
EFI_GUID = _uefi.EFI_GUID
EFIFUNCTYPE = _uefi.EFIFUNCTYPE
FUNC = _uefi.FUNC
EFI_EVENT_NOTIFY = _uefi.EFI_EVENT_NOTIFY
EFI_ERROR = _uefi.EFI_ERROR
EFIException = _uefi.EFIException
check_status = _uefi.check_status
efi_status_decode = _uefi.efi_status_decode

TPL_APPLICATION = _uefi.TPL_APPLICATION
TPL_CALLBACK = _uefi.TPL_CALLBACK
TPL_NOTIFY = _uefi.TPL_NOTIFY
TPL_HIGH_LEVEL = _uefi.TPL_HIGH_LEVEL
EVT_TIMER = _uefi.EVT_TIMER
EVT_NOTIFY_WAIT = _uefi.EVT_NOTIFY_WAIT
EVT_NOTIFY_SIGNAL = _uefi.EVT_NOTIFY_SIGNAL
EFI_OPEN_PROTOCOL_BY_HANDLE_PROTOCOL = _uefi.EFI_OPEN_PROTOCOL_BY_HANDLE_PROTOCOL
EFI_OPEN_PROTOCOL_GET_PROTOCOL = _uefi.EFI_OPEN_PROTOCOL_GET_PROTOCOL
EFI_OPEN_PROTOCOL_TEST_PROTOCOL = _uefi.EFI_OPEN_PROTOCOL_TEST_PROTOCOL
EFI_OPEN_PROTOCOL_BY_CHILD_CONTROLLER = _uefi.EFI_OPEN_PROTOCOL_BY_CHILD_CONTROLLER
EFI_OPEN_PROTOCOL_BY_DRIVER = _uefi.EFI_OPEN_PROTOCOL_BY_DRIVER
EFI_OPEN_PROTOCOL_EXCLUSIVE = _uefi.EFI_OPEN_PROTOCOL_EXCLUSIVE

# Every status code (BITS defines them all as module-level ints).
EFI_SUCCESS = _uefi.EFI_SUCCESS
EFI_WARN_UNKNOWN_GLYPH = _uefi.EFI_WARN_UNKNOWN_GLYPH
EFI_WARN_DELETE_FAILURE = _uefi.EFI_WARN_DELETE_FAILURE
EFI_WARN_WRITE_FAILURE = _uefi.EFI_WARN_WRITE_FAILURE
EFI_WARN_BUFFER_TOO_SMALL = _uefi.EFI_WARN_BUFFER_TOO_SMALL
EFI_WARN_STALE_DATA = _uefi.EFI_WARN_STALE_DATA
EFI_WARN_FILE_SYSTEM = _uefi.EFI_WARN_FILE_SYSTEM
EFI_WARN_RESET_REQUIRED = _uefi.EFI_WARN_RESET_REQUIRED
EFI_LOAD_ERROR = _uefi.EFI_LOAD_ERROR
EFI_INVALID_PARAMETER = _uefi.EFI_INVALID_PARAMETER
EFI_UNSUPPORTED = _uefi.EFI_UNSUPPORTED
EFI_BAD_BUFFER_SIZE = _uefi.EFI_BAD_BUFFER_SIZE
EFI_BUFFER_TOO_SMALL = _uefi.EFI_BUFFER_TOO_SMALL
EFI_NOT_READY = _uefi.EFI_NOT_READY
EFI_DEVICE_ERROR = _uefi.EFI_DEVICE_ERROR
EFI_WRITE_PROTECTED = _uefi.EFI_WRITE_PROTECTED
EFI_OUT_OF_RESOURCES = _uefi.EFI_OUT_OF_RESOURCES
EFI_VOLUME_CORRUPTED = _uefi.EFI_VOLUME_CORRUPTED
EFI_VOLUME_FULL = _uefi.EFI_VOLUME_FULL
EFI_NO_MEDIA = _uefi.EFI_NO_MEDIA
EFI_MEDIA_CHANGED = _uefi.EFI_MEDIA_CHANGED
EFI_NOT_FOUND = _uefi.EFI_NOT_FOUND
EFI_ACCESS_DENIED = _uefi.EFI_ACCESS_DENIED
EFI_NO_RESPONSE = _uefi.EFI_NO_RESPONSE
EFI_NO_MAPPING = _uefi.EFI_NO_MAPPING
EFI_TIMEOUT = _uefi.EFI_TIMEOUT
EFI_NOT_STARTED = _uefi.EFI_NOT_STARTED
EFI_ALREADY_STARTED = _uefi.EFI_ALREADY_STARTED
EFI_ABORTED = _uefi.EFI_ABORTED
EFI_ICMP_ERROR = _uefi.EFI_ICMP_ERROR
EFI_TFTP_ERROR = _uefi.EFI_TFTP_ERROR
EFI_PROTOCOL_ERROR = _uefi.EFI_PROTOCOL_ERROR
EFI_INCOMPATIBLE_VERSION = _uefi.EFI_INCOMPATIBLE_VERSION
EFI_SECURITY_VIOLATION = _uefi.EFI_SECURITY_VIOLATION
EFI_CRC_ERROR = _uefi.EFI_CRC_ERROR
EFI_END_OF_MEDIA = _uefi.EFI_END_OF_MEDIA
EFI_END_OF_FILE = _uefi.EFI_END_OF_FILE
EFI_INVALID_LANGUAGE = _uefi.EFI_INVALID_LANGUAGE
EFI_COMPROMISED_DATA = _uefi.EFI_COMPROMISED_DATA
EFI_IP_ADDRESS_CONFLICT = _uefi.EFI_IP_ADDRESS_CONFLICT
EFI_HTTP_ERROR = _uefi.EFI_HTTP_ERROR
EFI_NETWORK_UNREACHABLE = _uefi.EFI_NETWORK_UNREACHABLE
EFI_HOST_UNREACHABLE = _uefi.EFI_HOST_UNREACHABLE
EFI_PROTOCOL_UNREACHABLE = _uefi.EFI_PROTOCOL_UNREACHABLE
EFI_PORT_UNREACHABLE = _uefi.EFI_PORT_UNREACHABLE
EFI_CONNECTION_FIN = _uefi.EFI_CONNECTION_FIN
EFI_CONNECTION_RESET = _uefi.EFI_CONNECTION_RESET
EFI_CONNECTION_REFUSED = _uefi.EFI_CONNECTION_REFUSED

# Network GUIDs as uuid.UUID objects (bits-2079 has these; bitsnet defines its own too).
EFI_DHCP4_PROTOCOL_GUID = _uefi.EFI_DHCP4_PROTOCOL_GUID
EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID
EFI_DNS4_PROTOCOL_GUID = _uefi.EFI_DNS4_PROTOCOL_GUID
EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID
EFI_DNS6_PROTOCOL_GUID = _uefi.EFI_DNS6_PROTOCOL_GUID
EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID
EFI_IP4_CONFIG2_PROTOCOL_GUID = _uefi.EFI_IP4_CONFIG2_PROTOCOL_GUID
EFI_IP4_PROTOCOL_GUID = _uefi.EFI_IP4_PROTOCOL_GUID
EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID
EFI_IP6_CONFIG_PROTOCOL_GUID = _uefi.EFI_IP6_CONFIG_PROTOCOL_GUID
EFI_IP6_PROTOCOL_GUID = _uefi.EFI_IP6_PROTOCOL_GUID
EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID
EFI_MANAGED_NETWORK_PROTOCOL_GUID = _uefi.EFI_MANAGED_NETWORK_PROTOCOL_GUID
EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID
EFI_SIMPLE_NETWORK_PROTOCOL_GUID = _uefi.EFI_SIMPLE_NETWORK_PROTOCOL_GUID
EFI_TCP4_PROTOCOL_GUID = _uefi.EFI_TCP4_PROTOCOL_GUID
EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID
EFI_TCP6_PROTOCOL_GUID = _uefi.EFI_TCP6_PROTOCOL_GUID
EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID
EFI_UDP4_PROTOCOL_GUID = _uefi.EFI_UDP4_PROTOCOL_GUID
EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID
EFI_UDP6_PROTOCOL_GUID = _uefi.EFI_UDP6_PROTOCOL_GUID
EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID = _uefi.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID

system_table = _uefi.EFI_SYSTEM_TABLE.from_address(_efi._system_table)


class Protocol(_Structure):
    """Base class for protocol interfaces; subclasses set ``guid`` and ``_fields_``."""

    @classmethod
    def from_handle(cls, handle):
        """The interface of this protocol on ``handle`` (OpenProtocol GET_PROTOCOL)."""
        p = cls.from_address(get_protocol(handle, cls.guid))
        p._handle = handle
        return p


def locate_handles(guid=None):
    """Handles supporting ``guid`` (LocateHandle ByProtocol), or all handles."""
    if guid is None:
        search, guid_ref = _uefi.AllHandles, None
    else:
        search, guid_ref = _uefi.ByProtocol, _byref(EFI_GUID(guid))
    bs = system_table.BootServices.contents
    size = UINTN(0)
    status = bs.LocateHandle(search, guid_ref, None, _byref(size), None)
    if status != _uefi.EFI_BUFFER_TOO_SMALL:
        check_status(status)
    handles = (EFI_HANDLE * (size.value // _ctypes.sizeof(EFI_HANDLE)))()
    check_status(bs.LocateHandle(search, guid_ref, None, _byref(size), handles))
    return handles


def get_protocol(handle, guid):
    """Interface address of ``guid`` on ``handle``, opened with BITS's image handle."""
    interface = _c_void_p()
    check_status(system_table.BootServices.contents.OpenProtocol(
        handle, _byref(EFI_GUID(guid)), _byref(interface), _efi._image_handle, None,
        EFI_OPEN_PROTOCOL_GET_PROTOCOL))
    return interface.value


# --- bits-2070+ event helpers on the _efi hook (docs/bits-efi.md section 10)
_event_handlers = {}  # type: dict


def _event_callback(event_value):
    # As in BITS: a notification for an event closed in between raises KeyError here.
    _event_handlers[event_value][0]()


if hasattr(_efi, "_set_event_callback"):
    _efi._set_event_callback(_event_callback)


def create_event(handler, timer=False, tpl=TPL_CALLBACK, abort=None):
    """An EVT_NOTIFY_SIGNAL event whose notification calls ``handler()`` at a safe point."""
    event_type = EVT_NOTIFY_SIGNAL | (EVT_TIMER if timer else 0)
    event = EFI_EVENT()
    notify = _cast(_c_void_p(_efi._c_event_callback), EFI_EVENT_NOTIFY)
    check_status(system_table.BootServices.contents.CreateEvent(
        event_type, tpl, notify, None, _byref(event)))
    _event_handlers[event.value] = handler, abort
    return event


def close_event(event):
    """Close an event made by ``create_event``."""
    _event_handlers[event.value]
    check_status(system_table.BootServices.contents.CloseEvent(event))
    del _event_handlers[event.value]
