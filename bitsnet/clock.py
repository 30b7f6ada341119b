"""The one clock of bitsnet: monotonic seconds, for every deadline, timeout and duration.

``monotonic()`` is ``time.monotonic`` where Python has it (3.3+), else ``time.time``. In BITS
that is GRUB's TSC millisecond counter plus an arbitrary offset: not the epoch, but monotonic
within a boot with 1 ms resolution, which is all a deadline needs (docs/bits-environment.md section 5). On a host's
Python 2.7 it is the wall clock, which a clock step can move; the tests run there over seconds, where that does not
happen.

It is the function itself rather than a wrapper: a request/response round trip reads it
several times.

``rtc_utc()`` is the other clock, the calendar one: the firmware's RTC, read only to check
certificate validity periods (docs/tls.md section 2.7).
"""

import time

monotonic = getattr(time, "monotonic", time.time)


def rtc_utc():
    """The firmware's real-time clock (RuntimeServices.GetTime) as 'YYYYMMDDhhmmss', for checking
    certificate validity periods (bitsnet.x509verify); None where there is none or it reads as
    nonsense (the simulator has no RuntimeServices). The RTC is taken as UTC, as OVMF under QEMU
    keeps it (TimeZone EFI_UNSPECIFIED_TIMEZONE): a firmware keeping local time is off by its
    zone."""
    try:
        import ctypes

        import efi
        now = efi.EFI_TIME()
        if efi.system_table.RuntimeServices.contents.GetTime(ctypes.byref(now), None) != 0:
            return None
    except Exception:
        return None
    fields = (now.Year, now.Month, now.Day, now.Hour, now.Minute, now.Second)
    if not (1998 <= fields[0] <= 9999 and 1 <= fields[1] <= 12 and 1 <= fields[2] <= 31 and fields[3] < 24
            and fields[4] < 60 and fields[5] < 60):
        return None
    return "%04d%02d%02d%02d%02d%02d" % fields
