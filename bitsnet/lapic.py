"""BITS only: restart the local APIC timer that OVMF's UEFI tick comes from (docs/architecture.md section 11).

OVMF drives the UEFI timer tick -- and with it every EVT_TIMER event, MNP's 10 ms NIC poll and
DHCP -- from the local APIC timer of the boot processor, programmed periodic (docs/edk2.md section 9):

  LVT timer register (xAPIC 0x320, x2APIC MSR 0x832)      0x20020: periodic, vector 0x20
  divide configuration (xAPIC 0x3E0, x2APIC MSR 0x83E)    0xB: divide by 1
  initial count (xAPIC 0x380, x2APIC MSR 0x838)           10000000

BITS's SMP start-up reprograms that timer to time its INIT/SIPI delays and leaves it stopped
(divide configuration 0, initial count 0). From then on no timer event fires: ``bitsnet``'s
``ipconfig.check_timer()`` detects it and restarts the timer with this module.

``timer_state(access)``          the timer registers read now, decoded (a dict)
``is_stopped(state)``            the decision: masked, initial count 0, or a one-shot that ran out
``restore_timer(access=None, force=False)``  write OVMF's values if (and only if) the timer is
                                 stopped; returns (state before, state after)

``ipconfig.check_timer()`` runs it once, by itself, only when both hold: no EFI timer event
fires (measured first) and the LAPIC timer is found stopped; it then prints one line and checks
again. A running LAPIC timer is never touched: on firmware whose tick comes from the HPET or the
PIT, vector 0x20 may not be a timer handler. Register access goes through an ``access`` object with
``rdmsr(msr)``, ``wrmsr(msr, value)``, ``readl(address)``, ``writel(address, value)``: in BITS
``BitsAccess`` (BITS's own ``bits.rdmsr``/``bits.wrmsr``/``bits.readl``/``bits.writel`` on the
boot processor); in tests a fake register file.
"""

from __future__ import print_function

IA32_APIC_BASE = 0x1B  # MSR: APIC base address and mode bits (Intel SDM vol. 3, 10.4.4)
APIC_BASE_ENABLE = 1 << 11  # xAPIC global enable
APIC_BASE_X2APIC = 1 << 10  # x2APIC mode (EXTD)
APIC_BASE_MASK = 0x000FFFFFFFFFF000  # bits 12..51: the MMIO base

# xAPIC MMIO offsets; x2APIC MSR = 0x800 + offset / 16 (SDM 10.12.1.2).
LVT_TIMER = 0x320
INITIAL_COUNT = 0x380
CURRENT_COUNT = 0x390
DIVIDE_CONFIGURATION = 0x3E0

LVT_MASKED = 1 << 16
LVT_TIMER_MODE_SHIFT = 17  # 2 bits: 0 one-shot, 1 periodic, 2 TSC-deadline
LVT_VECTOR_MASK = 0xFF
TIMER_MODES = {0: "one-shot", 1: "periodic", 2: "TSC-deadline", 3: "reserved"}

# What OVMF programs (OvmfPkg LocalApicTimerDxe / 8254 replacement; measured on EDK II 2022.11,
# docs/edk2.md section 9 and docs/architecture.md section 11): periodic, vector 0x20, divide by 1, 10,000,000 counts per
# tick.
OVMF_LVT_TIMER = 0x20020
OVMF_DIVIDE_CONFIGURATION = 0xB
OVMF_INITIAL_COUNT = 10000000


def x2apic_msr(offset):
    # type: (int) -> int
    """The x2APIC MSR of an xAPIC register offset (0x320 -> 0x832)."""
    return 0x800 + (offset >> 4)


class BitsAccess(object):
    """Register access through BITS's own ``bits`` module, on the boot processor."""

    def __init__(self, bits_module=None):
        if bits_module is None:
            try:
                import bits as bits_module  # BITS's C-backed module; absent on a host
            except ImportError:
                bits_module = None
        if not hasattr(bits_module, "rdmsr") or not hasattr(bits_module, "writel"):
            raise RuntimeError("bitsnet.lapic needs BITS (its bits module): it programs the local APIC")
        self.bits = bits_module
        self.cpu = bits_module.bsp_apicid()

    def rdmsr(self, msr):
        value = self.bits.rdmsr(self.cpu, msr)
        if value is None:  # BITS returns None when the access faulted (#GP)
            raise RuntimeError("rdmsr(0x%x) faulted" % msr)
        return value

    def wrmsr(self, msr, value):
        if self.bits.wrmsr(self.cpu, msr, value) is None:
            raise RuntimeError("wrmsr(0x%x, 0x%x) faulted" % (msr, value))

    def readl(self, address):
        return self.bits.readl(address)

    def writel(self, address, value):
        self.bits.writel(address, value)


class _Registers(object):
    """The timer registers in whichever mode the APIC is in."""

    def __init__(self, access):
        self.access = access
        base = access.rdmsr(IA32_APIC_BASE)
        if not base & APIC_BASE_ENABLE:
            raise RuntimeError("the local APIC is disabled (IA32_APIC_BASE = 0x%x)" % base)
        self.x2apic = bool(base & APIC_BASE_X2APIC)
        self.base = base & APIC_BASE_MASK

    def read(self, offset):
        if self.x2apic:
            return self.access.rdmsr(x2apic_msr(offset)) & 0xFFFFFFFF
        return self.access.readl(self.base + offset)

    def write(self, offset, value):
        if self.x2apic:
            self.access.wrmsr(x2apic_msr(offset), value)
        else:
            self.access.writel(self.base + offset, value)


def timer_state(access):
    """The LAPIC timer as read now: a dict of the raw registers and their meaning."""
    regs = _Registers(access)
    lvt = regs.read(LVT_TIMER)
    return {
        "mode": "x2APIC" if regs.x2apic else "xAPIC at 0x%x" % regs.base,
        "lvt_timer": lvt,
        "divide_configuration": regs.read(DIVIDE_CONFIGURATION),
        "initial_count": regs.read(INITIAL_COUNT),
        "current_count": regs.read(CURRENT_COUNT),
        "masked": bool(lvt & LVT_MASKED),
        "timer_mode": TIMER_MODES[(lvt >> LVT_TIMER_MODE_SHIFT) & 3],
        "vector": lvt & LVT_VECTOR_MASK,
    }


def is_stopped(state):
    # type: (dict) -> bool
    """No interrupt will come: masked, no initial count, or a one-shot that has run out."""
    if state["masked"] or state["initial_count"] == 0:
        return True
    return state["timer_mode"] == "one-shot" and state["current_count"] == 0


def describe(state):
    # type: (dict) -> str
    return ("%s: LVT timer 0x%x (%s%s, vector 0x%x), divide 0x%x, initial count %d, current count %d"
            % (state["mode"], state["lvt_timer"], state["timer_mode"], ", masked" if state["masked"] else "",
               state["vector"], state["divide_configuration"], state["initial_count"], state["current_count"]))


def restore_timer(access=None, force=False, verbose=True):
    """Program the timer as OVMF does, if it is stopped (or ``force``). Returns (before, after).

    The divide configuration and the LVT entry are written before the initial count, because
    writing the initial count is what starts the count-down (SDM 10.5.4).
    """
    if access is None:
        access = BitsAccess()
    before = timer_state(access)
    if not (force or is_stopped(before)):
        if verbose:
            print("bitsnet.lapic: the timer is running, nothing changed -- %s" % describe(before))
        return before, before
    regs = _Registers(access)
    regs.write(DIVIDE_CONFIGURATION, OVMF_DIVIDE_CONFIGURATION)
    regs.write(LVT_TIMER, OVMF_LVT_TIMER)
    regs.write(INITIAL_COUNT, OVMF_INITIAL_COUNT)
    after = timer_state(access)
    if verbose:
        print("bitsnet.lapic: timer restored -- was %s; now %s" % (describe(before), describe(after)))
    return before, after
