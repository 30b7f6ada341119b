"""The stand-in ``efi`` module offers exactly what docs/bits-efi.md section 9 lists, with BITS's
meaning: if bitsnet used anything else, it would run here and fail in BITS."""

from __future__ import print_function

import ctypes
import numbers
import re
import time
import uuid

import efi
import pytest

# Every public name docs/bits-efi.md section 9 lists, written out (the doc's table, row by row).
DOCUMENTED = set("""
    BOOLEAN CHAR8 UINT8 UINT16 UINT32 UINT64 INT8 INT16 INT32 INT64 UINTN EFI_STATUS EFI_HANDLE EFI_EVENT EFI_TPL
    EFI_GUID
    EFIFUNCTYPE FUNC
    EFI_EVENT_NOTIFY
    system_table
    Protocol
    locate_handles
    get_protocol
    EFI_ERROR
    efi_status_decode
    EFIException
    check_status
    TPL_APPLICATION TPL_CALLBACK TPL_NOTIFY TPL_HIGH_LEVEL
    EVT_TIMER EVT_NOTIFY_WAIT EVT_NOTIFY_SIGNAL
    EFI_OPEN_PROTOCOL_BY_HANDLE_PROTOCOL EFI_OPEN_PROTOCOL_GET_PROTOCOL EFI_OPEN_PROTOCOL_TEST_PROTOCOL
    EFI_OPEN_PROTOCOL_BY_CHILD_CONTROLLER EFI_OPEN_PROTOCOL_BY_DRIVER EFI_OPEN_PROTOCOL_EXCLUSIVE
    create_event close_event
""".split())

# Status codes the doc names explicitly ("..." allows the rest of section 1.3 by pattern).
DOCUMENTED_STATUS = set("""
    EFI_SUCCESS EFI_NOT_READY EFI_BUFFER_TOO_SMALL EFI_NOT_FOUND EFI_ACCESS_DENIED EFI_NO_MAPPING EFI_TIMEOUT
    EFI_NOT_STARTED EFI_ALREADY_STARTED EFI_ABORTED EFI_ICMP_ERROR EFI_INVALID_PARAMETER EFI_UNSUPPORTED
    EFI_OUT_OF_RESOURCES EFI_DEVICE_ERROR EFI_NETWORK_UNREACHABLE EFI_HOST_UNREACHABLE EFI_PROTOCOL_UNREACHABLE
    EFI_PORT_UNREACHABLE EFI_CONNECTION_FIN EFI_CONNECTION_RESET EFI_CONNECTION_REFUSED
""".split())

GUID_NAME = re.compile(r"^EFI_[A-Z0-9_]+_GUID$")
STATUS_NAME = re.compile(r"^EFI_(WARN_)?[A-Z0-9_]+$")
ABSENT_GUID = uuid.UUID("0badf00d-0000-4000-8000-000000000002")


def _is_status_global(name):
    value = getattr(efi, name)
    return (bool(STATUS_NAME.match(name)) and isinstance(value, numbers.Integral)
            and efi.efi_status_decode.get(value) == name)


def test_dir_efi_is_exactly_the_documented_names():
    public = set(n for n in dir(efi) if not n.startswith("_"))
    extra = set(n for n in public - DOCUMENTED
                if not _is_status_global(n)
                and not (GUID_NAME.match(n) and isinstance(getattr(efi, n), uuid.UUID)))
    assert extra == set(), "efi offers names docs/bits-efi.md section 9 does not list"
    assert DOCUMENTED - public == set()
    assert DOCUMENTED_STATUS - public == set()


def test_status_codes_are_error_bit_or_n():
    width = ctypes.sizeof(ctypes.c_void_p) * 8
    assert efi.EFI_ERROR == 1 << (width - 1)
    assert efi.EFI_SUCCESS == 0
    assert efi.EFI_INVALID_PARAMETER == efi.EFI_ERROR | 2
    assert efi.EFI_NOT_FOUND == efi.EFI_ERROR | 14
    assert efi.EFI_CONNECTION_FIN == efi.EFI_ERROR | 104
    assert efi.EFI_CONNECTION_REFUSED == efi.EFI_ERROR | 106
    assert efi.efi_status_decode[efi.EFI_NO_MAPPING] == "EFI_NO_MAPPING"


def test_base_types():
    assert ctypes.sizeof(efi.UINTN) == ctypes.sizeof(ctypes.c_void_p)
    assert efi.UINTN is ctypes.c_ulong and efi.EFI_STATUS is ctypes.c_ulong
    assert efi.EFI_HANDLE is ctypes.c_void_p and efi.EFI_EVENT is ctypes.c_void_p
    assert efi.BOOLEAN is ctypes.c_bool
    assert [ctypes.sizeof(t) for t in (efi.UINT8, efi.UINT16, efi.UINT32, efi.UINT64)] == [1, 2, 4, 8]
    assert (efi.TPL_APPLICATION, efi.TPL_CALLBACK, efi.TPL_NOTIFY, efi.TPL_HIGH_LEVEL) == (4, 8, 16, 31)
    assert (efi.EVT_TIMER, efi.EVT_NOTIFY_WAIT, efi.EVT_NOTIFY_SIGNAL) == (0x80000000, 0x100, 0x200)
    assert efi.EFI_OPEN_PROTOCOL_GET_PROTOCOL == 2


def test_func_is_plain_cfunctype_on_the_host():
    proto = efi.FUNC(efi.UINTN, ctypes.c_void_p)
    reference = ctypes.CFUNCTYPE(efi.EFI_STATUS, efi.UINTN, ctypes.c_void_p)
    assert issubclass(proto, ctypes._CFuncPtr)
    assert proto._flags_ == reference._flags_
    assert proto._restype_ is efi.EFI_STATUS
    assert proto._argtypes_ == (efi.UINTN, ctypes.c_void_p)
    assert efi.FUNC(ret=None)._restype_ is None
    assert efi.EFIFUNCTYPE(efi.UINT32, efi.UINT8)._flags_ == reference._flags_
    assert efi.EFI_EVENT_NOTIFY._argtypes_ == (efi.EFI_EVENT, ctypes.c_void_p)
    assert efi.EFI_EVENT_NOTIFY._restype_ is None
    with pytest.raises(TypeError):
        efi.FUNC(efi.UINTN, bogus=1)


def test_efi_guid_round_trip():
    value = uuid.UUID("5b446ed1-e30b-4faa-871a-3654eca36080")
    guid = efi.EFI_GUID(value)
    assert ctypes.sizeof(guid) == 16
    assert guid.uuid == value and efi.EFI_GUID(str(value)).uuid == value
    assert ctypes.string_at(ctypes.addressof(guid), 16) == value.bytes_le
    assert guid.Data1 == 0x5b446ed1


def test_check_status():
    assert efi.check_status(efi.EFI_SUCCESS) is None
    for status in (efi.EFI_NOT_FOUND, 4):  # warnings raise too, as in BITS
        with pytest.raises(efi.EFIException) as caught:
            efi.check_status(status)
        assert caught.value.args[0] == status


def test_system_table_points_at_the_firmware(machine):
    boot_services = efi.system_table.BootServices.contents
    assert boot_services.Hdr.Signature == 0x56524553544F4F42  # "BOOTSERV"
    assert ctypes.addressof(efi.system_table) == ctypes.addressof(machine.firmware.system_table)


def test_locate_handles_absent_guid_raises_not_found(machine):
    with pytest.raises(efi.EFIException) as caught:
        efi.locate_handles(ABSENT_GUID)
    assert caught.value.args[0] == efi.EFI_NOT_FOUND


def test_locate_handles_and_get_protocol(machine):
    handles = efi.locate_handles(efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)
    assert list(handles) == [machine.nic.handle]
    assert machine.nic.handle in list(efi.locate_handles())  # no guid: every handle
    address = efi.get_protocol(handles[0], efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)
    assert isinstance(address, numbers.Integral) and address
    with pytest.raises(efi.EFIException) as caught:
        efi.get_protocol(handles[0], ABSENT_GUID)
    assert caught.value.args[0] == efi.EFI_UNSUPPORTED


def test_protocol_from_handle(machine):
    class Config2(efi.Protocol):
        guid = efi.EFI_IP4_CONFIG2_PROTOCOL_GUID
        _fields_ = [("SetData", ctypes.c_void_p), ("GetData", ctypes.c_void_p),
                    ("RegisterDataNotify", ctypes.c_void_p), ("UnregisterDataNotify", ctypes.c_void_p)]

    p = Config2.from_handle(machine.nic.handle)
    assert ctypes.addressof(p) == efi.get_protocol(machine.nic.handle, Config2.guid)
    assert p.SetData and p.GetData


def test_create_event_handler_runs_at_a_safe_point(machine):
    # bits-2070+: the handler runs through _efi's hook (Py_AddPendingCall), on the main thread.
    calls = []
    event = efi.create_event(lambda: calls.append(1))
    try:
        assert efi.system_table.BootServices.contents.SignalEvent(event) == efi.EFI_SUCCESS
        deadline = time.time() + 5
        while not calls and time.time() < deadline:
            time.sleep(0.001)
        assert calls == [1]
    finally:
        efi.close_event(event)
