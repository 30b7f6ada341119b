"""trampoline.c (``_bitsnet_trampoline``): its build, its notify function called across a real C
boundary, the order and content of what reaches the dispatcher, the pending-call queue
overflowing for real, and an EVT_NOTIFY_SIGNAL event signalled by the simulated firmware's
timer thread."""

from __future__ import print_function

import ctypes
import os
import shutil
import sys
import threading
import time

import efi
import pytest

from efisim import trampoline_build

pytestmark = pytest.mark.smoke

ISSUED = 300  # notifications in the overflow burst: far more than the queue's 31 free slots
QUEUE_CAPACITY = 31  # CPython's ring of NPENDINGCALLS = 32 entries keeps one slot empty (2.7 and 3.x)
WORKER_HEAD_START = 0.05  # seconds the main thread gets to block before the burst starts
DEADLINE = 5.0  # seconds any wait in this file may take


@pytest.fixture
def trampoline():
    """The module with a fresh overflow count; the previous dispatcher is put back afterwards."""
    module = trampoline_build.ensure_trampoline()
    previous = module.set_dispatcher(lambda context: None)
    drain()
    module.overflow()
    yield module
    drain()
    module.overflow()
    module.set_dispatcher(previous if previous is not None else (lambda context: None))


def drain():
    """Let the main thread run queued pending calls (they run between bytecodes)."""
    for _ in range(1000):
        pass


def wait_for(predicate, seconds=DEADLINE):
    deadline = time.time() + seconds
    while not predicate():
        if time.time() > deadline:
            return False
        time.sleep(0.001)
    return True


def notify_function(module):
    """The notify function as bitsnet calls it: an EFI_EVENT_NOTIFY made from the address."""
    return efi.EFI_EVENT_NOTIFY(module.notify_function)


def test_builds_without_warnings(tmpdir):
    target = str(tmpdir.join("_bitsnet_trampoline" + trampoline_build.extension_suffix()))
    warnings = trampoline_build.compile_module(target, ("-Werror",))
    assert warnings.strip() == "" and os.path.exists(target)
    assert [name for name in os.listdir(str(tmpdir)) if name.endswith(".tmp")] == []


def test_build_is_cached_and_redone_when_the_source_is_newer(tmpdir, monkeypatch):
    source = str(tmpdir.join("trampoline.c"))
    shutil.copy(trampoline_build.SOURCE, source)
    monkeypatch.setattr(trampoline_build, "SOURCE", source)
    monkeypatch.setattr(trampoline_build, "ROOT", str(tmpdir))
    target = trampoline_build.build()
    assert target.startswith(str(tmpdir.join("build", "trampoline", trampoline_build.abi_tag())))
    os.utime(target, (1000000000, 1000000000))
    os.utime(source, (999999999, 999999999))
    assert trampoline_build.build() == target and os.path.getmtime(target) == 1000000000  # cached
    os.utime(source, (1000000001, 1000000001))
    trampoline_build.build()
    assert os.path.getmtime(target) > 1000000001  # rebuilt


def test_parallel_builds_do_not_clash(tmpdir):
    target = str(tmpdir.join("_bitsnet_trampoline" + trampoline_build.extension_suffix()))
    failures = []

    def build():
        try:
            trampoline_build.compile_module(target)
        except Exception as exc:  # reported below, in the main thread
            failures.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == [] and os.listdir(str(tmpdir)) == [os.path.basename(target)]


def test_missing_headers_are_a_clear_error(monkeypatch):
    monkeypatch.setattr(trampoline_build.sysconfig, "get_config_var", lambda name: "/nonexistent")
    monkeypatch.setattr(trampoline_build.sysconfig, "get_paths", lambda: {"include": "/nonexistent"})
    with pytest.raises(RuntimeError) as raised:
        trampoline_build.include_dir()
    assert "Python.h" in str(raised.value)


def test_module_surface(trampoline):
    assert isinstance(trampoline.notify_function, int if sys.version_info[0] >= 3 else (int, long))  # noqa: F821
    assert trampoline.notify_function != 0
    assert trampoline.overflow() == 0
    first = lambda context: None  # noqa: E731
    trampoline.set_dispatcher(first)
    assert trampoline.set_dispatcher(lambda context: None) is first


@pytest.mark.parametrize("bad", [None, 42, "dispatcher"])
def test_set_dispatcher_rejects_what_is_not_callable(trampoline, bad):
    seen = []
    trampoline.set_dispatcher(seen.append)
    with pytest.raises(TypeError):
        trampoline.set_dispatcher(bad)
    notify_function(trampoline)(None, ctypes.c_void_p(7))
    drain()
    assert seen == [7]  # the previous dispatcher stayed in place


def test_dispatcher_receives_each_context_in_order(trampoline):
    seen = []
    trampoline.set_dispatcher(seen.append)
    notify = notify_function(trampoline)
    contexts = [1, 2, 3, 0, 2 ** 40, 5]  # 0 is a NULL Context; 2**40 needs the full pointer width
    for context in contexts:
        notify(None, ctypes.c_void_p(context))
    assert wait_for(lambda: len(seen) == len(contexts))
    assert seen == contexts
    assert trampoline.overflow() == 0


def test_a_raising_dispatcher_is_reported_not_raised_into_the_interrupted_code(trampoline, monkeypatch, capsys):
    reported = []
    if hasattr(sys, "unraisablehook"):  # 3.8+: PyErr_WriteUnraisable goes through the hook
        monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: reported.append(unraisable.exc_type))
    calls = []

    def dispatcher(context):
        calls.append(context)
        if context == 1:
            raise ZeroDivisionError("dispatcher bug")

    trampoline.set_dispatcher(dispatcher)
    notify = notify_function(trampoline)
    notify(None, ctypes.c_void_p(1))
    notify(None, ctypes.c_void_p(2))
    assert wait_for(lambda: calls == [1, 2])  # no exception surfaced here, the next one arrived
    if hasattr(sys, "unraisablehook"):
        assert reported == [ZeroDivisionError]
    else:
        assert "ZeroDivisionError" in capsys.readouterr().err


def test_overflow_counts_exactly_what_the_full_queue_dropped(trampoline):
    """A burst from another thread while the main thread, the only one that runs pending
    calls, is blocked in C: the queue fills, and every notification is delivered or counted."""
    seen = []
    trampoline.set_dispatcher(seen.append)
    notify = notify_function(trampoline)
    start = threading.Event()

    def burst():
        start.wait(DEADLINE)
        time.sleep(WORKER_HEAD_START)  # by now the main thread waits in join() below
        for context in range(1, ISSUED + 1):
            notify(None, ctypes.c_void_p(context))

    worker = threading.Thread(target=burst)
    worker.start()
    start.set()
    worker.join(DEADLINE)
    assert not worker.is_alive()
    drain()
    delivered = len(seen)
    dropped = trampoline.overflow()
    # Blocked for the whole burst, the main thread takes exactly QUEUE_CAPACITY; a main thread
    # descheduled past the head start may take a few more, but the books always balance.
    assert dropped > 0 and delivered + dropped == ISSUED
    assert seen[:QUEUE_CAPACITY] == list(range(1, QUEUE_CAPACITY + 1))  # the first ones fit
    assert seen == sorted(set(seen))  # in order, none twice
    assert trampoline.overflow() == 0  # overflow() reset the count
    notify(None, ctypes.c_void_p(ISSUED + 1))
    assert wait_for(lambda: seen[-1] == ISSUED + 1)  # the queue works again after draining


def test_signal_from_the_timer_thread_reaches_the_dispatcher(machine, trampoline):
    firmware = machine.firmware  # conftest checks its ledger (events, pool) at teardown
    seen = []
    trampoline.set_dispatcher(seen.append)
    bs = efi.system_table.BootServices.contents
    event = efi.EFI_EVENT()
    context = 0x5A17
    status = bs.CreateEvent(efi.EVT_NOTIFY_SIGNAL, efi.TPL_CALLBACK, notify_function(trampoline),
                            ctypes.c_void_p(context), ctypes.byref(event))
    assert status == efi.EFI_SUCCESS
    signalled = []

    def interrupt():  # periodic work: runs on the firmware's timer thread, as an interrupt would
        if not signalled:
            signalled.append(threading.current_thread().name)
            firmware.signal(event.value)

    firmware.add_periodic(0.001, efi.TPL_NOTIFY, interrupt, "test-signal")
    try:
        assert wait_for(lambda: seen)
    finally:
        firmware.remove_periodic(interrupt)
        assert bs.CloseEvent(event) == efi.EFI_SUCCESS
    assert seen == [context]
    assert signalled == ["efisim-timer"]
    assert trampoline.overflow() == 0
