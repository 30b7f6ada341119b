"""Boot-service conformance of the simulated firmware (docs/edk2.md section 2.3, EDK2
MdeModulePkg/Core/Dxe/Event and Hand): events and TPL, CheckEvent/WaitForEvent rules, notify
functions, LocateHandle sizing, and the pool ledger -- all called through the system table."""

from __future__ import print_function

import ctypes
import threading
import time
import uuid
from ctypes import byref

import efi
import pytest

ABSENT_GUID = uuid.UUID("0badf00d-0000-4000-8000-000000000001")
TCP4_SB_GUID = uuid.UUID("00720665-67eb-4a99-baf7-d3c33a1c7cc9")
EFI_BOOT_SERVICES_DATA = 4
TIMER_RELATIVE = 2
TIMER_PERIODIC = 1
BY_PROTOCOL = 2
HUNDRED_NS = 10 ** 7  # SetTimer units per second
VALID_TYPES = (0x80000200, 0x80000000, 0x100, 0x200, 0x201, 0x60000202, 0, 0x80000100)


def bs():
    return efi.system_table.BootServices.contents


class Events(object):
    """Creates events for a test and closes whatever is left at the end."""

    def __init__(self):
        self.open = []
        self.functions = []  # notify functions: must outlive their events

    def create(self, event_type=0, tpl=0, notify=None, context=None):
        ev = efi.EFI_EVENT()
        function = efi.EFI_EVENT_NOTIFY(notify) if notify is not None else efi.EFI_EVENT_NOTIFY()
        self.functions.append(function)
        status = bs().CreateEvent(event_type, tpl, function, context, byref(ev))
        if status == efi.EFI_SUCCESS:
            self.open.append(ev.value)
        return status, ev.value

    def new(self, *args, **kw):
        status, event = self.create(*args, **kw)
        assert status == efi.EFI_SUCCESS
        return event

    def close(self, event):
        status = bs().CloseEvent(event)
        if status == efi.EFI_SUCCESS:
            self.open.remove(event)
        return status

    def close_all(self):
        for event in list(self.open):
            assert self.close(event) == efi.EFI_SUCCESS


@pytest.fixture
def events(machine):
    e = Events()
    yield e
    e.close_all()


class Recorder(object):
    """A notify function that records (event, context, TPL it ran at)."""

    def __init__(self):
        self.calls = []

    def __call__(self, event, context):
        self.calls.append((event, context, current_tpl()))


def current_tpl():
    old = bs().RaiseTPL(efi.TPL_HIGH_LEVEL)
    bs().RestoreTPL(old)
    return old


# ----------------------------------------------------------------------------- CreateEvent
def test_create_event_accepts_exactly_edk2_types(events):
    rec = Recorder()
    for event_type in VALID_TYPES:
        assert events.create(event_type, efi.TPL_CALLBACK, rec)[0] == efi.EFI_SUCCESS
    for event_type in (1, 0x300, 0x40000000, 0x80000300, 0x202):
        assert events.create(event_type, efi.TPL_CALLBACK, rec)[0] == efi.EFI_INVALID_PARAMETER


def test_create_event_notify_types_need_function_and_tpl(events):
    rec = Recorder()
    for event_type in (efi.EVT_NOTIFY_SIGNAL, efi.EVT_NOTIFY_WAIT):
        assert events.create(event_type, efi.TPL_CALLBACK, None)[0] == efi.EFI_INVALID_PARAMETER
        for tpl in (efi.TPL_APPLICATION, efi.TPL_HIGH_LEVEL, 0):
            assert events.create(event_type, tpl, rec)[0] == efi.EFI_INVALID_PARAMETER
        assert events.create(event_type, efi.TPL_NOTIFY, rec)[0] == efi.EFI_SUCCESS
    # Type 0 and EVT_TIMER ignore TPL and function.
    assert events.create(0, 0, None)[0] == efi.EFI_SUCCESS
    assert events.create(efi.EVT_TIMER, 99, None)[0] == efi.EFI_SUCCESS


def test_create_event_needs_an_out_pointer(machine):
    status = bs().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, None)
    assert status == efi.EFI_INVALID_PARAMETER
    assert machine.firmware.ledger()["events"] == 0


def test_events_are_counted_in_the_ledger(machine, events):
    first, second = events.new(), events.new()
    assert machine.firmware.ledger()["events"] == 2
    assert events.close(first) == efi.EFI_SUCCESS
    assert events.close(first) == efi.EFI_INVALID_PARAMETER
    assert machine.firmware.ledger()["events"] == 1
    assert events.close(second) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["events"] == 0


def test_close_event_frees_the_event(machine, events):
    # EDK2 CoreCloseEvent frees the IEVENT: events created and closed by the thousand (an
    # application's pool churning) leave the firmware's memory where it was.
    before = machine.firmware.live_cells()
    for _ in range(1000):
        assert events.close(events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, Recorder())) == efi.EFI_SUCCESS
    assert machine.firmware.live_cells() == before


# ----------------------------------------------------------------------------- CheckEvent
def test_check_event_consumes_the_signal(events):
    event = events.new()
    assert bs().CheckEvent(event) == efi.EFI_NOT_READY
    assert bs().SignalEvent(event) == efi.EFI_SUCCESS
    assert bs().SignalEvent(event) == efi.EFI_SUCCESS  # signals do not count up
    assert bs().CheckEvent(event) == efi.EFI_SUCCESS
    assert bs().CheckEvent(event) == efi.EFI_NOT_READY


def test_check_event_on_notify_signal_is_invalid(events):
    rec = Recorder()
    event = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec)
    assert bs().CheckEvent(event) == efi.EFI_INVALID_PARAMETER
    assert bs().SignalEvent(event) == efi.EFI_SUCCESS
    assert bs().CheckEvent(event) == efi.EFI_INVALID_PARAMETER  # never SUCCESS, signalled or not
    assert len(rec.calls) == 1


def test_check_event_on_notify_wait_runs_the_notify_function(events):
    # CoreCheckEvent queues a NOTIFY_WAIT event's notify function when it is not signalled;
    # a notify function that signals the event makes that same CheckEvent succeed.
    calls = []

    def notify(event, context):
        calls.append(event)
        if len(calls) == 2:
            bs().SignalEvent(event)

    event = events.new(efi.EVT_NOTIFY_WAIT, efi.TPL_CALLBACK, notify)
    assert bs().CheckEvent(event) == efi.EFI_NOT_READY
    assert bs().CheckEvent(event) == efi.EFI_SUCCESS
    assert calls == [event, event]
    assert bs().SignalEvent(event) == efi.EFI_SUCCESS
    assert bs().CheckEvent(event) == efi.EFI_SUCCESS and len(calls) == 2  # signalled: no notify


# ----------------------------------------------------------------------------- WaitForEvent
def test_wait_for_event_returns_the_index_and_clears(events):
    a, b = events.new(), events.new()
    assert bs().SignalEvent(b) == efi.EFI_SUCCESS
    array = (efi.EFI_EVENT * 2)(a, b)
    index = efi.UINTN(99)
    assert bs().WaitForEvent(2, array, byref(index)) == efi.EFI_SUCCESS
    assert index.value == 1
    assert bs().CheckEvent(b) == efi.EFI_NOT_READY


def test_wait_for_event_on_notify_signal_is_invalid_with_index(events):
    rec = Recorder()
    plain = events.new()
    signal = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec)
    array = (efi.EFI_EVENT * 2)(plain, signal)
    index = efi.UINTN(99)
    assert bs().WaitForEvent(2, array, byref(index)) == efi.EFI_INVALID_PARAMETER
    assert index.value == 1


def test_wait_for_event_needs_tpl_application(events):
    event = events.new()
    bs().SignalEvent(event)
    array = (efi.EFI_EVENT * 1)(event)
    index = efi.UINTN()
    old = bs().RaiseTPL(efi.TPL_CALLBACK)
    try:
        status = bs().WaitForEvent(1, array, byref(index))
    finally:
        bs().RestoreTPL(old)
    assert status == efi.EFI_UNSUPPORTED
    assert bs().CheckEvent(event) == efi.EFI_SUCCESS  # still signalled: nothing was checked


def test_wait_for_event_zero_events_is_invalid(events):
    array = (efi.EFI_EVENT * 1)(events.new())
    assert bs().WaitForEvent(0, array, byref(efi.UINTN())) == efi.EFI_INVALID_PARAMETER


def test_wait_for_event_wakes_on_a_timer(events):
    timer = events.new(efi.EVT_TIMER)
    assert bs().SetTimer(timer, TIMER_RELATIVE, HUNDRED_NS // 20) == efi.EFI_SUCCESS  # 50 ms
    array = (efi.EFI_EVENT * 1)(timer)
    start = time.time()
    assert bs().WaitForEvent(1, array, byref(efi.UINTN())) == efi.EFI_SUCCESS
    assert 0.03 < time.time() - start < 5.0


def test_wait_for_event_wakes_when_another_thread_signals(machine, events):
    # Stands for a driver completing a token from its timer: the firmware signals the event.
    event = events.new()
    thread = threading.Timer(0.05, machine.firmware.signal, (event,))
    thread.start()
    array = (efi.EFI_EVENT * 1)(event)
    assert bs().WaitForEvent(1, array, byref(efi.UINTN())) == efi.EFI_SUCCESS
    thread.join()


# ----------------------------------------------------------------------------- timers
def test_set_timer_rules(events):
    plain, timer = events.new(), events.new(efi.EVT_TIMER)
    assert bs().SetTimer(plain, TIMER_RELATIVE, 0) == efi.EFI_INVALID_PARAMETER
    assert bs().SetTimer(timer, 7, 0) == efi.EFI_INVALID_PARAMETER
    assert bs().SetTimer(timer, TIMER_PERIODIC, HUNDRED_NS // 50) == efi.EFI_SUCCESS  # 20 ms
    fired = 0
    deadline = time.time() + 5
    while fired < 3 and time.time() < deadline:
        if bs().CheckEvent(timer) == efi.EFI_SUCCESS:
            fired += 1
        time.sleep(0.005)
    assert fired == 3
    assert bs().SetTimer(timer, 0, 0) == efi.EFI_SUCCESS  # TimerCancel
    bs().CheckEvent(timer)
    time.sleep(0.1)
    assert bs().CheckEvent(timer) == efi.EFI_NOT_READY


def test_notify_signal_timer_notifies_from_the_timer_interrupt(events):
    rec = Recorder()
    timer = events.new(efi.EVT_TIMER | efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec, ctypes.c_void_p(5))
    assert bs().SetTimer(timer, TIMER_RELATIVE, HUNDRED_NS // 100) == efi.EFI_SUCCESS
    deadline = time.time() + 5
    while not rec.calls and time.time() < deadline:
        time.sleep(0.005)
    assert rec.calls == [(timer, 5, efi.TPL_CALLBACK)]


# ----------------------------------------------------------------------------- notify functions
def test_notify_runs_once_per_signal_at_its_tpl(events):
    rec = Recorder()
    event = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec, ctypes.c_void_p(42))
    assert bs().SignalEvent(event) == efi.EFI_SUCCESS
    assert rec.calls == [(event, 42, efi.TPL_CALLBACK)]  # ran before SignalEvent returned
    assert bs().SignalEvent(event) == efi.EFI_SUCCESS
    assert len(rec.calls) == 2
    assert current_tpl() == efi.TPL_APPLICATION


def test_raised_tpl_defers_notifies_and_merges_signals(events):
    rec = Recorder()
    event = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec)
    old = bs().RaiseTPL(efi.TPL_CALLBACK)  # equal TPL blocks too: it must be strictly higher
    bs().SignalEvent(event)
    bs().SignalEvent(event)
    assert rec.calls == []
    bs().RestoreTPL(old)
    assert rec.calls == [(event, None, efi.TPL_CALLBACK)]  # once, though signalled twice


def test_higher_tpl_notifies_run_first(events):
    order = []
    low = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, lambda e, c: order.append("callback"))
    high = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_NOTIFY, lambda e, c: order.append("notify"))
    old = bs().RaiseTPL(efi.TPL_HIGH_LEVEL)
    bs().SignalEvent(low)
    bs().SignalEvent(high)
    bs().RestoreTPL(old)
    assert order == ["notify", "callback"]


def test_restore_to_callback_runs_only_higher_notifies(events):
    order = []
    low = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, lambda e, c: order.append("callback"))
    high = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_NOTIFY, lambda e, c: order.append("notify"))
    old = bs().RaiseTPL(efi.TPL_HIGH_LEVEL)
    bs().SignalEvent(low)
    bs().SignalEvent(high)
    bs().RestoreTPL(efi.TPL_CALLBACK)
    assert order == ["notify"]
    bs().RestoreTPL(old)
    assert order == ["notify", "callback"]


def test_timer_interrupt_defers_notifies_while_tpl_is_raised(machine, events):
    # The timer "interrupt" signals the event, but its notify must wait until the interrupted
    # code lowers the TPL below the event's -- then it runs, on the way out of RestoreTPL.
    rec = Recorder()
    timer = events.new(efi.EVT_TIMER | efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec)
    old = bs().RaiseTPL(efi.TPL_CALLBACK)
    try:
        assert bs().SetTimer(timer, TIMER_RELATIVE, HUNDRED_NS // 100) == efi.EFI_SUCCESS  # 10 ms
        deadline = time.time() + 5
        while not machine.firmware.events[timer].queued and time.time() < deadline:
            time.sleep(0.005)  # until the timer has fired (looked up inside the simulator)
        assert machine.firmware.events[timer].queued
        time.sleep(0.05)
        assert rec.calls == []
    finally:
        bs().RestoreTPL(old)
    assert rec.calls == [(timer, None, efi.TPL_CALLBACK)]


def test_event_closed_before_its_notify_ran_is_not_notified(machine, events):
    rec = Recorder()
    event = events.new(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, rec)
    old = bs().RaiseTPL(efi.TPL_NOTIFY)
    bs().SignalEvent(event)
    assert events.close(event) == efi.EFI_SUCCESS
    bs().RestoreTPL(old)
    assert rec.calls == []
    assert machine.firmware.crashes == []


def test_signal_of_a_closed_event_is_invalid(events):
    event = events.new()
    assert events.close(event) == efi.EFI_SUCCESS
    assert bs().SignalEvent(event) == efi.EFI_INVALID_PARAMETER
    assert bs().CheckEvent(event) == efi.EFI_INVALID_PARAMETER


def test_raise_tpl_returns_the_old_level(machine):
    assert bs().RaiseTPL(efi.TPL_NOTIFY) == efi.TPL_APPLICATION
    assert bs().RaiseTPL(efi.TPL_NOTIFY) == efi.TPL_NOTIFY
    bs().RestoreTPL(efi.TPL_NOTIFY)
    bs().RestoreTPL(efi.TPL_APPLICATION)
    assert current_tpl() == efi.TPL_APPLICATION


# ----------------------------------------------------------------------------- handles
def test_locate_handle_sizing(machine):
    guid = efi.EFI_GUID(efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)
    size = efi.UINTN(0)
    status = bs().LocateHandle(BY_PROTOCOL, byref(guid), None, byref(size), None)
    assert status == efi.EFI_BUFFER_TOO_SMALL
    assert size.value == ctypes.sizeof(efi.EFI_HANDLE)
    handles = (efi.EFI_HANDLE * 1)()
    assert bs().LocateHandle(BY_PROTOCOL, byref(guid), None, byref(size), handles) == efi.EFI_SUCCESS
    assert handles[0] == machine.nic.handle
    big = efi.UINTN(64)
    many = (efi.EFI_HANDLE * 8)()
    assert bs().LocateHandle(BY_PROTOCOL, byref(guid), None, byref(big), many) == efi.EFI_SUCCESS
    assert big.value == ctypes.sizeof(efi.EFI_HANDLE)  # set to what was written


def test_locate_handle_not_found_and_bad_search(machine):
    absent = efi.EFI_GUID(ABSENT_GUID)
    size = efi.UINTN(0)
    assert bs().LocateHandle(BY_PROTOCOL, byref(absent), None, byref(size), None) == efi.EFI_NOT_FOUND
    assert bs().LocateHandle(BY_PROTOCOL, None, None, byref(size), None) == efi.EFI_INVALID_PARAMETER
    assert bs().LocateHandle(7, byref(absent), None, byref(size), None) == efi.EFI_INVALID_PARAMETER
    assert bs().LocateHandle(BY_PROTOCOL, byref(absent), None, None, None) == efi.EFI_INVALID_PARAMETER


def test_locate_handle_buffer_is_pool_the_caller_frees(machine):
    guid = efi.EFI_GUID(efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)
    count = efi.UINTN()
    buffer = ctypes.POINTER(efi.EFI_HANDLE)()
    assert bs().LocateHandleBuffer(BY_PROTOCOL, byref(guid), None, byref(count), byref(buffer)) == efi.EFI_SUCCESS
    assert count.value == 1 and buffer[0] == machine.nic.handle
    assert machine.firmware.ledger()["pool"] == 1  # a leak until FreePool
    assert bs().FreePool(buffer) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["pool"] == 0
    absent = efi.EFI_GUID(ABSENT_GUID)
    assert bs().LocateHandleBuffer(BY_PROTOCOL, byref(absent), None, byref(count), byref(buffer)) \
        == efi.EFI_NOT_FOUND
    assert machine.firmware.ledger()["pool"] == 0


def test_handle_protocol_and_open_protocol(machine):
    guid = efi.EFI_GUID(efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)
    interface = ctypes.c_void_p()
    assert bs().HandleProtocol(machine.nic.handle, byref(guid), byref(interface)) == efi.EFI_SUCCESS
    assert interface.value
    absent = efi.EFI_GUID(ABSENT_GUID)
    assert bs().HandleProtocol(machine.nic.handle, byref(absent), byref(interface)) == efi.EFI_UNSUPPORTED
    other = ctypes.c_void_p()
    assert bs().OpenProtocol(machine.nic.handle, byref(guid), byref(other), machine.firmware.image_handle,
                             None, efi.EFI_OPEN_PROTOCOL_GET_PROTOCOL) == efi.EFI_SUCCESS
    assert other.value == efi.get_protocol(machine.nic.handle, efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)


@pytest.mark.machine(nic_connected=False)
def test_disconnected_nic_has_only_snp_until_connect_controller(machine):
    # Facts 2.4: BDS fast-boot paths leave the NIC unconnected; ConnectController starts the stack.
    for guid in (efi.EFI_IP4_CONFIG2_PROTOCOL_GUID, TCP4_SB_GUID):
        with pytest.raises(efi.EFIException) as caught:
            efi.locate_handles(guid)
        assert caught.value.args[0] == efi.EFI_NOT_FOUND
    snp = efi.locate_handles(efi.EFI_SIMPLE_NETWORK_PROTOCOL_GUID)
    assert list(snp) == [machine.nic.handle]
    assert bs().ConnectController(snp[0], None, None, True) == efi.EFI_SUCCESS
    assert list(efi.locate_handles(efi.EFI_IP4_CONFIG2_PROTOCOL_GUID)) == [machine.nic.handle]
    assert bs().ConnectController(snp[0], None, None, True) == efi.EFI_SUCCESS  # again: harmless
    assert bs().ConnectController(machine.firmware.image_handle, None, None, True) == efi.EFI_NOT_FOUND


# ----------------------------------------------------------------------------- pool
def test_pool_ledger_and_double_free(machine):
    address = ctypes.c_void_p()
    assert bs().AllocatePool(EFI_BOOT_SERVICES_DATA, 100, byref(address)) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["pool"] == 1
    ctypes.memset(address.value, 0x11, 100)  # the memory is really there
    assert bs().FreePool(address) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["pool"] == 0
    assert bs().FreePool(address) == efi.EFI_INVALID_PARAMETER
    assert bs().AllocatePool(EFI_BOOT_SERVICES_DATA, 8, None) == efi.EFI_INVALID_PARAMETER


def test_fresh_pool_is_not_zeroed(machine):
    # Code that relies on zeroed pool memory fails here as it may on real firmware.
    address = ctypes.c_void_p()
    assert bs().AllocatePool(EFI_BOOT_SERVICES_DATA, 16, byref(address)) == efi.EFI_SUCCESS
    try:
        assert ctypes.string_at(address.value, 16) != b"\0" * 16
    finally:
        bs().FreePool(address)


def test_stall_lets_the_timer_run(events):
    timer = events.new(efi.EVT_TIMER)
    assert bs().SetTimer(timer, TIMER_RELATIVE, HUNDRED_NS // 100) == efi.EFI_SUCCESS
    assert bs().Stall(100000) == efi.EFI_SUCCESS  # 100 ms
    assert bs().CheckEvent(timer) == efi.EFI_SUCCESS
