"""Seeded fault injection for the simulated network drivers (smoltcp's phy/fault_injector.rs).

One ``Faults`` object per machine (``machine.faults``). Drivers consult it at the points where a
real network or firmware misbehaves; tests switch faults on with a spec string, the same one
``tools/efirun.py --faults`` and ``MachineConfig(faults=...)`` take:

    "delay=0.5,tx_fail=2,rx_piece=100,reset_after=5000,no_dhcp"

``delay=<seconds>``       every token completion is signalled that much later (TCP4)
``tx_fail=<n>``           the next n Transmit calls return EFI_OUT_OF_RESOURCES (TCP4)
``rx_piece=<bytes>``      received data enters the stack in frames of at most this many bytes (TCP4)
``reset_after=<bytes>``   a connection is reset by the peer once it has received that many bytes (TCP4)
``no_dhcp``               the DHCP server never answers (same as MachineConfig(dhcp=False))
``connect_timeout=<s>``   the TCP connect timer fires after this many seconds instead of the
                          configured 60..75 s, so EFI_TIMEOUT is observable in a test (simulator only)

Everything random in a fault (none of the faults above is, yet) draws from ``random``, seeded
from the machine's seed, so a failing run can be replayed.
"""

from __future__ import print_function

import random

# name -> converter; a name without "=value" sets a boolean fault
_KINDS = {
    "delay": float,
    "tx_fail": int,
    "rx_piece": int,
    "reset_after": int,
    "no_dhcp": bool,
    "connect_timeout": float,
}


class Faults(object):
    """The faults in force on one machine; all off by default."""

    def __init__(self, seed=0):
        self.random = random.Random(seed)
        self.delay = 0.0  # seconds added before each token completion is signalled
        self.tx_fail = 0  # Transmit calls still to fail
        self.rx_piece = 0  # 0: frames are one MSS
        self.reset_after = 0  # 0: never
        self.no_dhcp = False
        self.connect_timeout = 0.0  # 0: the configured ConnectionTimeout

    def configure(self, spec):
        """Switch faults on from a "name=value,name" spec string; ValueError on a bad spec."""
        for item in (spec or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            kind = _KINDS.get(name)
            if kind is None:
                raise ValueError("unknown fault %r (known: %s)" % (name, ", ".join(sorted(_KINDS))))
            if kind is bool:
                if sep and value.strip().lower() not in ("1", "true", "yes", "on"):
                    setattr(self, name, False)
                else:
                    setattr(self, name, True)
                continue
            if not sep:
                raise ValueError("fault %r needs a value: %s=<%s>" % (name, name, kind.__name__))
            converted = kind(value)
            if converted < 0:
                raise ValueError("fault %r must not be negative" % name)
            setattr(self, name, converted)
        return self

    def take_tx_fail(self):
        # type: () -> bool
        """True if this Transmit is one of the ``tx_fail`` that must fail (and count it)."""
        if self.tx_fail > 0:
            self.tx_fail -= 1
            return True
        return False

    def active(self):
        """The faults currently switched on, as a dict (for messages and reports)."""
        return dict((name, getattr(self, name)) for name in sorted(_KINDS) if getattr(self, name))

    def __repr__(self):
        return "Faults(%s)" % ",".join("%s=%s" % item for item in sorted(self.active().items()))
