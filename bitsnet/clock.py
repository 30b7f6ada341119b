"""The one clock of bitsnet: monotonic seconds, for every deadline, timeout and duration.

``monotonic()`` is ``time.monotonic`` where Python has it (3.3+), else ``time.time``. In BITS
that is GRUB's TSC millisecond counter plus an arbitrary offset: not the epoch, but monotonic
within a boot with 1 ms resolution, which is all a deadline needs (docs/bits-environment.md section 5). On a host's
Python 2.7 it is the wall clock, which a clock step can move; the tests run there over seconds, where that does not
happen.

It is the function itself rather than a wrapper: a request/response round trip reads it
several times.
"""

import time

monotonic = getattr(time, "monotonic", time.time)
