"""The simulated firmware core: boot services, events and TPL, handles, pool, timer "interrupts".

Models MdeModulePkg/Core/Dxe (Event/, Hand/, Mem/) closely enough that code written for real
UEFI behaves the same here:

* Every boot service is a ctypes callback in the slot order of EFI_BOOT_SERVICES
  (``uefi.BOOT_SERVICES_SLOTS``), so callers cross a real C boundary with real layouts.
* Events follow the DXE core: Type 0 / EVT_TIMER / EVT_NOTIFY_WAIT events are polled with
  CheckEvent, which clears the signal; EVT_NOTIFY_SIGNAL events queue their notify function
  once per signal and run it, through its C function pointer, as soon as the current TPL drops
  below the event's TPL; an event closed before its notify ran is not notified (docs/edk2.md section 2.3).
* One lock stands for "the CPU": the main thread holds it while inside firmware code, and the
  timer thread holds it while it plays the timer interrupt. Notify functions run with it held,
  as they would run with the interrupted code suspended.
* The timer thread ticks every ``TICK`` seconds (EDK2's 10 ms timer period), fires EVT_TIMER
  events and runs the drivers' periodic work (``add_periodic``) at the work's TPL, deferring it
  while the interrupted code has raised the TPL that high.
* Every pool allocation, event and service-binding child is counted in the ledger so tests can
  assert that nothing leaked; a firmware-side fault (a driver bug, a signal of a closed event)
  is recorded in ``crashes`` instead of silently passing.

``FIRMWARE`` is the one instance for the process: ``efi.system_table`` points at its table
for the whole run, and ``FIRMWARE.reset()`` gives tests a fresh machine behind it.
"""

from __future__ import print_function

import ctypes
import functools
import threading
import time
import traceback
import uuid
from ctypes import POINTER, c_void_p

from efisim import uefi

LOADED_IMAGE_PROTOCOL_GUID = uuid.UUID("5b1b31a1-9562-11d2-8e3f-00a0c969723b")
TICK = 0.010  # EDK2/OVMF timer period: 10 ms (docs/edk2.md section 3.4)
POOL_FILL = 0xAF  # fresh and freed pool is filled with this, so reliance on zeroed memory shows


def _now():
    # type: () -> float
    return getattr(time, "monotonic", time.time)()


class _Event(object):
    """One EFI_EVENT. ``handle`` is the address the caller sees."""

    def __init__(self, handle, event_type, tpl, notify, context):
        self.handle = handle
        self.type = event_type
        self.tpl = tpl
        self.notify = notify  # ctypes function pointer, or None
        self.context = context
        self.signalled = False
        self.queued = False  # notify queued, not yet run
        self.trigger = None  # type: float or None   # next EVT_TIMER expiry (monotonic)
        self.period = 0.0

    def is_notify_signal(self):
        return bool(self.type & uefi.EVT_NOTIFY_SIGNAL)


class _Periodic(object):
    def __init__(self, period, tpl, work, name):
        self.period = period
        self.tpl = tpl
        self.work = work
        self.name = name
        self.next = _now() + period


def pointer_address(pointer):
    """The address a pointer argument of an entry point points to (a ctypes pointer, or the
    int a c_void_p argument arrives as); 0 for NULL."""
    if pointer is None:
        return 0
    if isinstance(pointer, int) or type(pointer).__name__ == "long":
        return int(pointer)
    return ctypes.cast(pointer, c_void_p).value or 0


def efiapi(status_on_crash=uefi.EFI_DEVICE_ERROR):
    """Wrap a firmware function so a Python exception becomes a recorded crash, not a return of 0.

    ctypes would print the traceback and return 0 (EFI_SUCCESS) -- the worst possible lie.
    """
    def wrap(func):
        @functools.wraps(func)
        def guarded(*args):
            try:
                return func(*args)
            except Exception:
                FIRMWARE.record_crash("%s raised:\n%s" % (func.__name__, traceback.format_exc()))
                return status_on_crash
        return guarded
    return wrap


class Firmware(object):
    """The firmware of one simulated machine (see the module docstring)."""

    def __init__(self):
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)
        self._thread = None  # type: threading.Thread or None
        self._stop = False
        self._cells = []  # keeps C callbacks and tables alive for the process
        self._build_tables()
        image = ctypes.c_uint64()
        loaded_image = ctypes.c_uint64()
        self._cells.extend([image, loaded_image])
        self.image_handle = ctypes.addressof(image)
        self._loaded_image = ctypes.addressof(loaded_image)
        self.reset()

    # ----------------------------------------------------------------- machine state
    def reset(self, timer_running=True):
        """Forget every event, handle, allocation and driver: a freshly booted machine."""
        self.stop_timer()
        with self.lock:
            self.tpl = uefi.TPL_APPLICATION
            self.events = {}  # type: dict
            self._queued = []  # type: list   # events whose notify is queued (EDK2 gEventQueue)
            self.handles = {}  # type: dict   # handle -> {uuid.UUID: interface address}
            self._handle_cells = {}  # type: dict
            self.pool = {}  # type: dict   # address -> ctypes buffer
            self._freed = []  # type: list  # recently freed pool, kept mapped and poisoned
            self._periodic = []  # type: list
            self.connect_hooks = {}  # type: dict   # handle -> callable(recursive)
            self.ledger_sources = []  # type: list  # callables returning {name: count}
            self.crashes = []  # type: list
            self.stats = {"notifies": 0, "ticks": 0, "deferred_ticks": 0}
            self.faults = None  # the booted machine's faults.Faults: CreateEvent consults it
            # The application's own image handle carries EFI_LOADED_IMAGE_PROTOCOL.
            self.handles[self.image_handle] = {LOADED_IMAGE_PROTOCOL_GUID: self._loaded_image}
        self.timer_running = timer_running
        if timer_running:
            self.start_timer()

    def record_crash(self, text):
        self.crashes.append(text)

    def _cell(self, ctype):
        """A small piece of firmware memory whose address serves as a handle or table."""
        cell = ctype()
        self._handle_cells[ctypes.addressof(cell)] = cell
        return cell

    def live_cells(self):
        """How many pieces of firmware memory (handles, events, driver tables) are allocated
        now, for leak tests: what CloseEvent or a child's destruction frees leaves this count."""
        with self.lock:
            return len(self._handle_cells)

    def allocate_static(self, size):
        """Firmware-owned memory (protocol interfaces, driver data) that lives until reset."""
        cell = (ctypes.c_uint8 * max(size, 1))()
        self._handle_cells[ctypes.addressof(cell)] = cell
        return ctypes.addressof(cell)

    # ----------------------------------------------------------------- handles and protocols
    def free_handle(self, handle):
        """Forget the memory behind ``handle`` (one that no longer exists: its last protocol
        was uninstalled) and return it, or None if it is not ours; the caller may keep it a
        while longer, as a quarantine against a use after free."""
        return self._handle_cells.pop(handle, None)

    def new_handle(self):
        handle = ctypes.addressof(self._cell(ctypes.c_uint64))
        self.handles[handle] = {}
        return handle

    def install_protocol(self, handle, guid, interface):
        with self.lock:
            self.handles.setdefault(handle, {})[guid] = interface

    def uninstall_protocol(self, handle, guid):
        with self.lock:
            protocols = self.handles.get(handle, {})
            protocols.pop(guid, None)
            if not protocols and handle in self.handles:
                del self.handles[handle]  # a handle with no protocols ceases to exist

    def handles_by_protocol(self, guid):
        return [h for h, protocols in sorted(self.handles.items()) if guid in protocols]

    # ----------------------------------------------------------------- pool
    def allocate(self, size):
        """AllocatePool on behalf of a driver (e.g. DNS4 results the caller must free)."""
        with self.lock:
            buf = ctypes.create_string_buffer(b"\xaf" * max(size, 1), max(size, 1))
            address = ctypes.addressof(buf)
            self.pool[address] = buf
            return address

    def free(self, address):
        with self.lock:
            buf = self.pool.pop(address, None)
            if buf is None:
                return False
            ctypes.memset(address, POOL_FILL, len(buf))
            self._quarantine(buf)
            return True

    def _quarantine(self, memory):
        """Keep just-freed memory mapped while 256 newer frees follow, so that a use after free
        reads poison (or an unknown handle) instead of crashing the host process."""
        self._freed.append(memory)
        del self._freed[:-256]

    # ----------------------------------------------------------------- events and TPL
    def signal(self, handle):
        """SignalEvent semantics, for the boot service and for drivers completing tokens."""
        with self.lock:
            event = self.events.get(handle)
            if event is None:
                self.record_crash("firmware signalled event 0x%x, which is not open (use after CloseEvent)"
                                  % (handle or 0))
                return False
            if event.is_notify_signal():
                if not event.queued:
                    event.queued = True
                    self._queued.append(event)
                    self._dispatch()
            else:
                event.signalled = True
            self._wake.notify_all()
            return True

    def raise_tpl(self, new_tpl):
        with self.lock:
            old = self.tpl
            self.tpl = max(old, new_tpl)
            return old

    def restore_tpl(self, old_tpl):
        with self.lock:
            self.tpl = old_tpl
            self._dispatch()

    def at_tpl(self, tpl):
        """Context manager for driver code: run at ``tpl``, dispatch notifies on the way out."""
        return _AtTpl(self, tpl)

    def _dispatch(self):
        """Run queued notify functions whose TPL is above the current TPL, highest first."""
        while True:
            # Only the queued events are looked at: every EFI call ends in RestoreTPL, and a
            # scan of all open events made each call O(events) (bitsnet keeps one per socket).
            ready = [e for e in self._queued if e.tpl > self.tpl]
            if not ready:
                return
            event = max(ready, key=lambda e: e.tpl)
            event.queued = False
            self._queued.remove(event)
            saved = self.tpl
            self.tpl = event.tpl
            try:
                self.stats["notifies"] += 1
                event.notify(event.handle, event.context)
            except Exception:
                self.record_crash("notify function raised:\n" + traceback.format_exc())
            finally:
                self.tpl = saved

    # ----------------------------------------------------------------- timer "interrupt"
    def add_periodic(self, period, tpl, work, name):
        """Run ``work()`` every ``period`` seconds at ``tpl`` from the timer interrupt."""
        with self.lock:
            self._periodic.append(_Periodic(period, tpl, work, name))

    def remove_periodic(self, work):
        with self.lock:
            self._periodic = [p for p in self._periodic if p.work is not work]

    def start_timer(self):
        if self._thread is not None:
            return
        self._stop = False
        self._thread = threading.Thread(target=self._timer_loop, name="efisim-timer")
        self._thread.daemon = True
        self._thread.start()

    def stop_timer(self):
        thread = self._thread
        if thread is None:
            return
        with self.lock:
            self._stop = True
            self._wake.notify_all()
        if thread is not threading.current_thread():
            thread.join(5)
        self._thread = None

    def _timer_loop(self):
        while True:
            time.sleep(TICK)
            with self.lock:
                if self._stop:
                    return
                self.tick()

    def tick(self, now=None):
        """One timer interrupt: expire EVT_TIMER events, run due periodic work, dispatch."""
        now = _now() if now is None else now
        interrupted = self.tpl
        self.stats["ticks"] += 1
        for event in list(self.events.values()):
            if event.trigger is not None and now >= event.trigger:
                event.trigger = now + event.period if event.period else None
                self.signal(event.handle)
        for work in list(self._periodic):
            if now < work.next:
                continue
            if interrupted >= work.tpl:
                self.stats["deferred_ticks"] += 1
                continue  # runs on a later tick, once the TPL is low enough again
            work.next = now + work.period
            self.tpl = work.tpl
            try:
                work.work()
            except Exception:
                self.record_crash("periodic %s raised:\n%s" % (work.name, traceback.format_exc()))
            finally:
                self.tpl = interrupted
        self._dispatch()

    def sleep(self, seconds):
        """Let time pass inside firmware (Stall, WaitForEvent): the timer keeps interrupting."""
        deadline = _now() + seconds
        with self.lock:
            while True:
                left = deadline - _now()
                if left <= 0:
                    return
                self._wake.wait(min(left, TICK))

    # ----------------------------------------------------------------- ledger
    def ledger(self):
        """What the firmware still holds for the application: tests assert it is all zero."""
        with self.lock:
            counts = {"events": len(self.events), "pool": len(self.pool)}
            for source in self.ledger_sources:
                for name, value in source().items():
                    counts[name] = counts.get(name, 0) + value
            return counts

    # ----------------------------------------------------------------- the tables
    def _build_tables(self):
        bs = uefi.EFI_BOOT_SERVICES()
        bs.Hdr.Signature = uefi.EFI_BOOT_SERVICES_SIGNATURE
        bs.Hdr.HeaderSize = ctypes.sizeof(bs)
        for name, ftype in uefi.BOOT_SERVICES_SLOTS:
            impl = getattr(self, "_bs_" + name, None)
            if impl is not None:
                setattr(bs, name, ftype(impl))
        st = uefi.EFI_SYSTEM_TABLE()
        st.Hdr.Signature = uefi.EFI_SYSTEM_TABLE_SIGNATURE
        st.Hdr.Revision = uefi.EFI_2_70_SYSTEM_TABLE_REVISION
        st.Hdr.HeaderSize = ctypes.sizeof(st)
        st.FirmwareRevision = uefi.FIRMWARE_REVISION  # every OVMF's (docs/edk2.md section 10.5)
        st.BootServices = ctypes.pointer(bs)
        self._cells.extend([bs, st])
        self._vendors = {}  # type: dict   # text -> its CHAR16 string, alive for the process
        self.boot_services = bs
        self.system_table = st
        self.set_vendor(uefi.FIRMWARE_VENDOR)

    def set_vendor(self, text):
        """The system table's FirmwareVendor (a CHAR16 string) becomes ``text``."""
        if text not in self._vendors:
            self._vendors[text] = (ctypes.c_uint16 * (len(text) + 1))(*[ord(c) for c in text])
        self.system_table.FirmwareVendor = ctypes.addressof(self._vendors[text])

    # Boot services, in EFI_BOOT_SERVICES order. Each runs holding the CPU lock.
    def _bs_RaiseTPL(self, new_tpl):
        return self.raise_tpl(new_tpl)

    def _bs_RestoreTPL(self, old_tpl):
        self.restore_tpl(old_tpl)

    @efiapi()
    def _bs_AllocatePool(self, pool_type, size, buffer):
        if not buffer:
            return uefi.EFI_INVALID_PARAMETER
        buffer[0] = self.allocate(size)
        return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_FreePool(self, address):
        return uefi.EFI_SUCCESS if self.free(address) else uefi.EFI_INVALID_PARAMETER

    @efiapi()
    def _bs_CreateEvent(self, event_type, tpl, notify, context, event_out):
        return self._create_event(event_type, tpl, notify, context, event_out)

    @efiapi()
    def _bs_CreateEventEx(self, event_type, tpl, notify, context, group, event_out):
        return self._create_event(event_type, tpl, notify, context, event_out)

    _VALID_EVENT_TYPES = (0x80000200, 0x80000000, 0x100, 0x200, 0x201, 0x60000202, 0, 0x80000100)

    def _create_event(self, event_type, tpl, notify, context, event_out):
        # EDK2 CoreCreateEventInternal: exact type list, notify types need a function and a TPL
        # strictly between APPLICATION and HIGH_LEVEL; Type 0 / EVT_TIMER ignore them (docs/edk2.md section 2.3).
        if not event_out or event_type not in self._VALID_EVENT_TYPES:
            return uefi.EFI_INVALID_PARAMETER
        wants_notify = event_type & (uefi.EVT_NOTIFY_SIGNAL | uefi.EVT_NOTIFY_WAIT)
        function = None
        if wants_notify:
            if not notify or not (uefi.TPL_APPLICATION < tpl < uefi.TPL_HIGH_LEVEL):
                return uefi.EFI_INVALID_PARAMETER
            function = uefi.EFI_EVENT_NOTIFY(ctypes.cast(notify, c_void_p).value)
        if self.faults is not None and self.faults.take_event_fail():
            return uefi.EFI_OUT_OF_RESOURCES  # fault `event_fail`: EDK2's pool is exhausted
        with self.lock:
            handle = ctypes.addressof(self._cell(ctypes.c_uint64))
            self.events[handle] = _Event(handle, event_type, tpl, function, context or 0)
            event_out[0] = handle
        return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_SetTimer(self, handle, kind, trigger_100ns):
        with self.lock:
            event = self.events.get(handle)
            if event is None or not event.type & uefi.EVT_TIMER:
                return uefi.EFI_INVALID_PARAMETER
            seconds = trigger_100ns / 1e7
            if kind == uefi.TimerCancel:
                event.trigger = None
            elif kind == uefi.TimerPeriodic:
                event.period = max(seconds, TICK)
                event.trigger = _now() + event.period
            elif kind == uefi.TimerRelative:
                event.period = 0.0
                event.trigger = _now() + seconds  # 0 means "on the next tick"
            else:
                return uefi.EFI_INVALID_PARAMETER
            return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_WaitForEvent(self, count, events, index):
        if not count or not events or not index:
            return uefi.EFI_INVALID_PARAMETER
        with self.lock:
            if self.tpl != uefi.TPL_APPLICATION:
                return uefi.EFI_UNSUPPORTED
            while True:
                for i in range(count):
                    status = self._check_event(events[i])
                    if status != uefi.EFI_NOT_READY:
                        index[0] = i
                        return status
                self._wake.wait(TICK)

    @efiapi()
    def _bs_SignalEvent(self, handle):
        with self.lock:
            if handle not in self.events:
                return uefi.EFI_INVALID_PARAMETER
            self.signal(handle)
            return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_CloseEvent(self, handle):
        with self.lock:
            event = self.events.pop(handle, None)
            if event is None:
                return uefi.EFI_INVALID_PARAMETER
            if event.queued:
                event.queued = False
                self._queued.remove(event)  # EDK2 CoreCloseEvent: RemoveEntryList(NotifyLink)
            # CoreCloseEvent also frees the IEVENT: its memory goes back to the pool.
            self._quarantine(self._handle_cells.pop(handle))
            return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_CheckEvent(self, handle):
        with self.lock:
            return self._check_event(handle)

    def _check_event(self, handle):
        event = self.events.get(handle)
        if event is None or event.is_notify_signal():
            return uefi.EFI_INVALID_PARAMETER
        if not event.signalled and event.type & uefi.EVT_NOTIFY_WAIT and event.notify:
            # EDK2 CoreCheckEvent queues the notify; it runs at the event's TPL, not the caller's.
            if not event.queued:
                event.queued = True
                self._queued.append(event)
            self._dispatch()
        if event.signalled:
            event.signalled = False
            return uefi.EFI_SUCCESS
        return uefi.EFI_NOT_READY

    @efiapi()
    def _bs_HandleProtocol(self, handle, guid, interface):
        return self._open(handle, guid, interface, uefi.EFI_OPEN_PROTOCOL_BY_HANDLE_PROTOCOL)

    @efiapi()
    def _bs_OpenProtocol(self, handle, guid, interface, agent, controller, attributes):
        return self._open(handle, guid, interface, attributes)

    def _open(self, handle, guid, interface, attributes):
        if not guid or (not interface and attributes != uefi.EFI_OPEN_PROTOCOL_TEST_PROTOCOL):
            return uefi.EFI_INVALID_PARAMETER
        with self.lock:
            protocols = self.handles.get(handle)
            if protocols is None:
                return uefi.EFI_INVALID_PARAMETER
            address = protocols.get(guid.contents.uuid)
            if interface:
                interface[0] = address
            return uefi.EFI_UNSUPPORTED if address is None else uefi.EFI_SUCCESS

    @efiapi()
    def _bs_CloseProtocol(self, handle, guid, agent, controller):
        # GET_PROTOCOL opens are not tracked by the DXE core, so there is nothing to close.
        with self.lock:
            if not guid or handle not in self.handles:
                return uefi.EFI_INVALID_PARAMETER
            return uefi.EFI_NOT_FOUND

    def _search(self, search_type, guid):
        if search_type == uefi.AllHandles:
            return sorted(self.handles)
        if search_type == uefi.ByProtocol and guid:
            return self.handles_by_protocol(guid.contents.uuid)
        return None

    @efiapi()
    def _bs_LocateHandle(self, search_type, guid, key, size, buffer):
        if not size or (size[0] > 0 and not buffer):  # EDK2 Locate.c: a size without a buffer
            return uefi.EFI_INVALID_PARAMETER
        with self.lock:
            found = self._search(search_type, guid)
            if found is None:
                return uefi.EFI_INVALID_PARAMETER
            if not found:
                return uefi.EFI_NOT_FOUND
            needed = len(found) * uefi.PTR_SIZE
            if size[0] < needed or not buffer:
                size[0] = needed
                return uefi.EFI_BUFFER_TOO_SMALL
            size[0] = needed
            for i, handle in enumerate(found):
                buffer[i] = handle
            return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_LocateHandleBuffer(self, search_type, guid, key, count, buffer):
        if not count or not buffer:
            return uefi.EFI_INVALID_PARAMETER
        with self.lock:
            found = self._search(search_type, guid)
            if found is None:
                return uefi.EFI_INVALID_PARAMETER
            if not found:
                count[0] = 0
                return uefi.EFI_NOT_FOUND
            address = self.allocate(len(found) * uefi.PTR_SIZE)  # the caller must FreePool it
            array = (c_void_p * len(found)).from_address(address)
            for i, handle in enumerate(found):
                array[i] = handle
            count[0] = len(found)
            buffer[0] = ctypes.cast(address, POINTER(uefi.EFI_HANDLE))
            return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_LocateProtocol(self, guid, registration, interface):
        if not guid or not interface:
            return uefi.EFI_INVALID_PARAMETER
        with self.lock:
            found = self.handles_by_protocol(guid.contents.uuid)
            if not found:
                interface[0] = None
                return uefi.EFI_NOT_FOUND
            interface[0] = self.handles[found[0]][guid.contents.uuid]
            return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_Stall(self, microseconds):
        self.sleep(microseconds / 1e6)
        return uefi.EFI_SUCCESS

    @efiapi()
    def _bs_ConnectController(self, handle, driver_images, remaining_path, recursive):
        with self.lock:
            if handle not in self.handles:
                return uefi.EFI_INVALID_PARAMETER
            hook = self.connect_hooks.get(handle)
            if hook is None:
                return uefi.EFI_NOT_FOUND  # no driver started on this controller
            return hook(bool(recursive))


class _AtTpl(object):
    def __init__(self, firmware, tpl):
        self.firmware = firmware
        self.tpl = tpl

    def __enter__(self):
        self.firmware.lock.acquire()
        self.old = self.firmware.raise_tpl(self.tpl)
        return self

    def __exit__(self, *exc):
        try:
            self.firmware.restore_tpl(self.old)
        finally:
            self.firmware.lock.release()


FIRMWARE = Firmware()
