"""bitsnet.events against the simulated firmware: the registry, the three ways of noticing a
completion, synchronous completion, stale notifications, overflow recovery, and the pool."""

from __future__ import print_function

import ctypes
import threading

import efi
import pytest

from bitsnet import events

MODES = ["check-event", "efi-hook", "trampoline"]


class COMPLETION_TOKEN(ctypes.Structure):
    # EFI_TCP4_COMPLETION_TOKEN's shape: { EFI_EVENT Event; EFI_STATUS Status; }
    _fields_ = [("Event", efi.EFI_EVENT), ("Status", efi.EFI_STATUS)]


def complete(machine, token, status):
    """What a driver does when it finishes a token: write Status, then signal the event."""
    with machine.firmware.at_tpl(efi.TPL_CALLBACK):
        token.Status = status
        machine.firmware.signal(token.Event)


@pytest.fixture(params=MODES)
def mode(request, machine):
    if request.param == "trampoline":
        from efisim.trampoline_build import ensure_trampoline
        ensure_trampoline()
    events.reset(request.param)
    yield request.param
    assert events.shutdown() == 0
    events.reset()


def test_completion_runs_on_done_once_with_status(machine, mode):
    token = COMPLETION_TOKEN()
    seen = []
    op = events.submit(token, token, seen.append, owner="t")
    assert token.Status == events.SENTINEL and token.Event
    assert events.outstanding("t") == 1 and events.process() == 0
    complete(machine, token, efi.EFI_CONNECTION_FIN)
    assert events.wait_until(lambda: seen, events.clock() + 2)
    assert seen == [op] and op.done and op.status == efi.EFI_CONNECTION_FIN
    assert events.outstanding() == 0 and events.process() == 0


def test_synchronous_completion_is_found_by_check(machine, mode):
    token = COMPLETION_TOKEN()
    seen = []
    op = events.submit(token, token, seen.append, owner=None)
    complete(machine, token, efi.EFI_SUCCESS)  # as if inside Receive(): signalled before return
    assert events.check(op) and seen == [op]
    events.process()  # the notification that follows is stale and ignored
    assert seen == [op]


def test_events_are_reused_and_stale_notifications_ignored(machine, mode):
    first = COMPLETION_TOKEN()
    op1 = events.submit(first, first, lambda op: None, owner=None)
    complete(machine, first, efi.EFI_SUCCESS)
    events.check(op1)
    second = COMPLETION_TOKEN()
    seen = []
    events.submit(second, second, seen.append, owner=None)
    assert second.Event == first.Event  # the pooled event was reused
    events.process()
    machine.firmware.signal(second.Event)  # a stray signal: Status still reads SENTINEL
    events.process()
    assert not seen and events.outstanding() == 1
    complete(machine, second, efi.EFI_SUCCESS)
    assert events.wait_until(lambda: seen, events.clock() + 2)


def test_the_pool_stays_as_large_as_the_most_events_open_at_once(machine, mode):
    # Beyond MAX_IDLE_EVENTS idle events the pool closes them; a later burst creates events
    # again and must reuse the closed slots' numbers, so that bursts after bursts (a select
    # server's clients coming and going) leave neither bitsnet's tables nor the firmware bigger.
    burst = events.MAX_IDLE_EVENTS + 50
    sizes = []
    for _ in range(4):
        tokens = [COMPLETION_TOKEN() for _ in range(burst)]
        seen = []
        for token in tokens:
            events.submit(token, token, seen.append, owner="burst")
        for token in tokens:
            complete(machine, token, efi.EFI_SUCCESS)
        assert events.wait_until(lambda: len(seen) == burst, events.clock() + 5)
        sizes.append((len(events._events), machine.firmware.ledger()["events"], machine.firmware.live_cells()))
    assert sizes[0][:2] == (burst, events.MAX_IDLE_EVENTS)
    assert sizes == [sizes[0]] * 4, sizes


def test_completions_from_the_timer_thread_while_python_is_busy(machine, mode):
    tokens = [COMPLETION_TOKEN() for _ in range(20)]
    seen = []
    for t in tokens:
        events.submit(t, t, seen.append, owner=None)

    def interrupt():
        for t in tokens:
            complete(machine, t, efi.EFI_SUCCESS)

    thread = threading.Thread(target=interrupt)
    thread.start()
    total = 0
    for i in range(200000):  # busy Python code while completions arrive
        total += i
    thread.join()
    assert events.wait_until(lambda: len(seen) == 20, events.clock() + 2)
    assert [op.seq for op in seen] == sorted(op.seq for op in seen)


def test_overflow_of_the_pending_call_queue_loses_nothing(machine, mode):
    """300 completions at once: far more than CPython's 32 pending calls."""
    tokens = [COMPLETION_TOKEN() for _ in range(300)]
    seen = []
    for t in tokens:
        events.submit(t, t, seen.append, owner=None)

    def burst():  # as an interrupt would: the main thread runs no bytecode meanwhile
        with machine.firmware.at_tpl(efi.TPL_NOTIFY):  # notifies all run at RestoreTPL
            for t in tokens:
                t.Status = efi.EFI_SUCCESS
                machine.firmware.signal(t.Event)

    thread = threading.Thread(target=burst)
    thread.start()
    thread.join()  # blocked in C: pending calls cannot run, so the queue overflows
    assert events.wait_until(lambda: len(seen) == 300, events.clock() + 5)
    assert len(set(id(op) for op in seen)) == 300
    if mode == "trampoline":
        assert events.stats["overflowed"] > 0 and events.stats["recovered"] > 0


def test_unsubmit_and_abandon_release_everything(machine, mode):
    a, b = COMPLETION_TOKEN(), COMPLETION_TOKEN()
    op = events.submit(a, a, lambda op: None, owner="x")
    events.unsubmit(op)
    events.submit(b, b, lambda op: None, owner="x")
    assert events.abandon("x") == 1 and events.outstanding() == 0


def test_late_notifications_of_closed_events_are_swallowed(machine, mode, monkeypatch):
    """A token found finished before its notification ran (a rescan, check()), whose event is
    then closed (beyond MAX_IDLE_EVENTS): the notification that arrives afterwards is stale in
    every mode -- with BITS's hook, its efi dispatcher would raise KeyError in unrelated code."""
    monkeypatch.setattr(events, "MAX_IDLE_EVENTS", 0)
    token = COMPLETION_TOKEN()
    seen = []
    op = events.submit(token, token, seen.append, owner=None)
    event, slot = token.Event, op.slot
    token.Status = efi.EFI_SUCCESS  # written; its notification has not run yet
    assert events.check(op) and seen == [op]
    assert event not in events._by_event  # closed
    stale = events.stats["stale"]
    if mode == "efi-hook":
        events._notified_event(event)  # what the hook's pending call does, late
    elif mode == "trampoline":
        events._notified_slot(slot)
    events.process()
    assert seen == [op]
    assert events.stats["stale"] == stale + (mode != "check-event")


def test_notifications_for_foreign_events_reach_efi_create_event(machine, mode):
    got = []
    event = efi.create_event(lambda: got.append(1))
    events.boot_services().SignalEvent(event)
    for _ in range(1000):
        pass
    events.process()
    assert got == [1]
    efi.close_event(event)
