"""time as BITS has it: time, sleep, localtime, gmtime, struct_time and nothing else.

docs/bits-environment.md section 5. ``time()`` counts milliseconds from an arbitrary origin about
1.1e7 seconds back (GRUB's TSC clock): it is monotonic but it is not the epoch. ``sleep`` polls
that clock in Python, so EFI notifications run while it waits. ``localtime`` and ``gmtime`` are
the same plain Python function (a class attribute holding one becomes a method, as in BITS).
"""

import time as _host_time
from collections import namedtuple as _namedtuple

_host_clock = getattr(_host_time, "monotonic", _host_time.time)
_ORIGIN_MS = 11000000000 + int(_host_time.time() * 1000) % 1000000000  # ms; differs per "boot"
_START = _host_clock()
_NAP = 0.0005  # seconds the host sleeps between polls: spares the host CPU, under BITS's 1 ms tick


def time():
    """Seconds, with millisecond resolution, on a clock whose zero is not the epoch."""
    return (_ORIGIN_MS + int((_host_clock() - _START) * 1000)) / 1000.0


def sleep(seconds):
    """Wait by polling time(), running Python between polls (BITS's busy loop)."""
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    end = time() + seconds
    while True:
        left = end - time()
        if left <= 0:
            return
        _host_time.sleep(min(_NAP, left))


struct_time = _namedtuple("struct_time", "tm_year tm_mon tm_mday tm_hour tm_min tm_sec tm_wday tm_yday tm_isdst")


def localtime(seconds=None):
    """The firmware's wall clock (UTC, no time zones) or the given epoch seconds, as struct_time."""
    t = _host_time.gmtime() if seconds is None else _host_time.gmtime(seconds)
    return struct_time(*(tuple(t)[:8] + (-1,)))


gmtime = localtime
