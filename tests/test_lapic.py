"""bitsnet.lapic's decisions against a fake register file (the writes cannot run on a host):
which registers in which APIC mode, only when the timer is stopped, initial count last."""

from __future__ import print_function

import pytest

from bitsnet import lapic

XAPIC_BASE = 0xFEE00000
BITS_STOPPED = {lapic.LVT_TIMER: 0x10020, lapic.DIVIDE_CONFIGURATION: 0, lapic.INITIAL_COUNT: 0,
                lapic.CURRENT_COUNT: 0}  # what BITS's SMP start-up leaves (docs/architecture.md section 11)
OVMF_RUNNING = {lapic.LVT_TIMER: 0x20020, lapic.DIVIDE_CONFIGURATION: 0xB, lapic.INITIAL_COUNT: 10000000,
                lapic.CURRENT_COUNT: 1234567}


class FakeApic(object):
    """MSRs and MMIO of one local APIC; records every write in order."""

    def __init__(self, timer, x2apic=False, enabled=True):
        self.x2apic = x2apic
        self.msrs = {lapic.IA32_APIC_BASE: XAPIC_BASE | (lapic.APIC_BASE_ENABLE if enabled else 0)
                     | (lapic.APIC_BASE_X2APIC if x2apic else 0) | 0x100}  # 0x100: BSP flag
        self.mmio = {}
        for offset, value in timer.items():
            if x2apic:
                self.msrs[0x800 + (offset >> 4)] = value
            else:
                self.mmio[XAPIC_BASE + offset] = value
        self.writes = []

    def rdmsr(self, msr):
        if msr not in self.msrs:
            raise AssertionError("rdmsr of an unexpected MSR 0x%x" % msr)
        return self.msrs[msr]

    def wrmsr(self, msr, value):
        assert self.x2apic, "MSR write in xAPIC mode"
        self.writes.append(("msr", msr, value))
        self.msrs[msr] = value

    def readl(self, address):
        assert not self.x2apic, "MMIO read in x2APIC mode"
        return self.mmio[address]

    def writel(self, address, value):
        assert not self.x2apic, "MMIO write in x2APIC mode"
        self.writes.append(("mmio", address, value))
        self.mmio[address] = value


def test_bits_leftover_is_stopped_and_ovmf_timer_is_running():
    assert lapic.is_stopped(lapic.timer_state(FakeApic(BITS_STOPPED)))
    state = lapic.timer_state(FakeApic(OVMF_RUNNING))
    assert not lapic.is_stopped(state)
    assert (state["timer_mode"], state["vector"], state["masked"]) == ("periodic", 0x20, False)


def test_masked_or_expired_one_shot_counts_as_stopped():
    masked = dict(OVMF_RUNNING)
    masked[lapic.LVT_TIMER] = 0x30020
    assert lapic.is_stopped(lapic.timer_state(FakeApic(masked)))
    one_shot = dict(OVMF_RUNNING)
    one_shot[lapic.LVT_TIMER] = 0x00020
    one_shot[lapic.CURRENT_COUNT] = 0
    assert lapic.is_stopped(lapic.timer_state(FakeApic(one_shot)))
    one_shot[lapic.CURRENT_COUNT] = 5
    assert not lapic.is_stopped(lapic.timer_state(FakeApic(one_shot)))


def test_restore_in_xapic_mode_writes_ovmf_values_through_mmio_initial_count_last(capsys):
    apic = FakeApic(BITS_STOPPED)
    before, after = lapic.restore_timer(apic)
    assert lapic.is_stopped(before) and not lapic.is_stopped(after)
    assert apic.writes == [("mmio", XAPIC_BASE + 0x3E0, 0xB), ("mmio", XAPIC_BASE + 0x320, 0x20020),
                           ("mmio", XAPIC_BASE + 0x380, 10000000)]
    assert "timer restored" in capsys.readouterr().out


def test_restore_in_x2apic_mode_uses_the_msrs():
    apic = FakeApic(BITS_STOPPED, x2apic=True)
    lapic.restore_timer(apic, verbose=False)
    assert apic.writes == [("msr", 0x83E, 0xB), ("msr", 0x832, 0x20020), ("msr", 0x838, 10000000)]


def test_a_running_timer_is_left_alone_unless_forced(capsys):
    apic = FakeApic(OVMF_RUNNING)
    before, after = lapic.restore_timer(apic)
    assert apic.writes == [] and before == after
    assert "nothing changed" in capsys.readouterr().out
    lapic.restore_timer(apic, force=True, verbose=False)
    assert len(apic.writes) == 3


def test_disabled_apic_is_refused():
    with pytest.raises(RuntimeError) as caught:
        lapic.restore_timer(FakeApic(BITS_STOPPED, enabled=False), verbose=False)
    assert "disabled" in str(caught.value)


def test_bits_access_reads_the_boot_processor_and_reports_faults():
    class FakeBits(object):
        calls = []

        def bsp_apicid(self):
            return 7

        def rdmsr(self, cpu, msr):
            self.calls.append((cpu, msr))
            return None if msr == 0x999 else 42

        def wrmsr(self, cpu, msr, value):
            return None

        def readl(self, address):
            return 0

        def writel(self, address, value):
            pass

    access = lapic.BitsAccess(FakeBits())
    assert access.rdmsr(0x1B) == 42 and FakeBits.calls == [(7, 0x1B)]
    with pytest.raises(RuntimeError):
        access.rdmsr(0x999)
    with pytest.raises(RuntimeError):
        access.wrmsr(0x832, 1)


def test_without_bits_there_is_a_clear_error():
    with pytest.raises(RuntimeError) as caught:
        lapic.BitsAccess()
    assert "needs BITS" in str(caught.value)
