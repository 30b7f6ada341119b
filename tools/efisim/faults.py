"""Seeded fault plans for the simulated network drivers (smoltcp's phy/fault_injector.rs).

One ``Faults`` object per machine (``machine.faults``). Drivers consult it at the points where a
real network or firmware misbehaves; a *plan* switches faults on. The same plan string is taken by
``tools/efirun.py --faults PLAN --seed N``, ``MachineConfig(faults=PLAN, seed=N)`` and
``Faults(seed).configure(PLAN)``.

Plan grammar::

    PLAN  := ITEM ("," ITEM)*          items apply left to right; a later one overrides
    ITEM  := NAME                      a plan name ("mixed") or a boolean fault ("no_dhcp")
           | NAME "=" VALUE            a fault with its value ("delay=0.05", "rx_piece=1")

    "mixed"                  every fault a correct program survives (below); run any script under it
    "delay=0.05,rx_piece=1"  completions 50 ms late, received data one byte per frame
    "burst=200"              completions held until 200 are waiting, then signalled in one tick
    "mixed,burst=300"        mixed, with bigger bursts

Completions (TCP4 and UDP4, through ``HeldCompletions``):
``delay=<s>``            every token completion is signalled that much later
``reorder=<s>``          each completion is held a further random 0..s: completions of different
                         children overtake one another (one child's stay FIFO, as EDK2 signals them)
``burst=<n>``            completions are held until n are waiting, then all are signalled in one
                         timer tick at TPL_CALLBACK -- hundreds of notifications at once overflow
                         the interpreter's pending-call queue (32 entries)
``burst_wait=<s>``       ... or until the oldest has waited s seconds (default 0.5), so a program
                         with fewer tokens outstanding still makes progress
Calls failing:
``tx_fail=<n>``          the next n Transmit calls return EFI_OUT_OF_RESOURCES (TCP4, UDP4)
``tx_fail_rate=<p>``     each Transmit returns EFI_OUT_OF_RESOURCES with probability p (TCP4, UDP4)
``create_fail=<n>``      the next n TCP4 or UDP4 CreateChild calls return EFI_OUT_OF_RESOURCES
``event_fail=<n>``       the next n CreateEvent calls return EFI_OUT_OF_RESOURCES (EDK2's
                         CoreCreateEventInternal when its AllocateZeroPool fails); the boot
                         services consult ``take_event_fail`` (firmware.py)
``poll_fail=<p>``        TCP4 Poll pulls nothing and returns EFI_NOT_READY, EFI_TIMEOUT or
                         EFI_DEVICE_ERROR with probability p. Hostile, NOT EDK2: TcpDxe's Poll
                         always returns EFI_SUCCESS (docs/edk2.md section 3.3), so it is not part of ``mixed``
Data and connections (TCP4):
``rx_piece=<bytes>``     received data enters the stack in frames of at most this many bytes
``rx_coalesce=<bytes>``  frames carry up to this many bytes (segments merged, as with receive
                         coalescing); with ``rx_piece`` too, each frame's size is drawn at random
                         between the two
``reset_after=<bytes>``  a connection is reset by the peer once it has received that many bytes
``accept_reset=<n>``     the next n incoming connections are reset by the peer while they wait to
                         be accepted; EDK2 destroys such a child silently (docs/edk2.md section 3.3 Accept)
``connect_timeout=<s>``  the connect timer fires after s seconds instead of the configured
                         60..75 s, so EFI_TIMEOUT is observable in a test (simulator only)
DHCP (IP4 Config2):
``no_dhcp``              the DHCP server never answers (same as MachineConfig(dhcp=False))
``dhcp_late=<s>``        the DHCP answer comes s seconds later than ``dhcp_delay`` (ip4config2.py
                         asks ``dhcp_delay()`` when it starts DHCP)

Not modelled, on purpose: a TCP Transmit that "completes short". EDK2 signals a TCP4 Transmit
token only once every byte of it was segmented (docs/edk2.md section 3.3 Transmit); there is no partial
completion to model. (A caller that *offers* little at a time is the caller's business.)

Named plans (``PLANS``; ``PLAN_NAMES`` is the list tests run over): ``late``, ``reordered``,
``bursts``, ``split`` (frames of 1..536 bytes), ``coalesced``, ``tx_failing``, the hostile
``poll_failing`` and ``mixed``; e.g. ``--faults split --seed 3``.

``mixed`` is ``reorder=0.02,burst=200,burst_wait=0.05,rx_piece=1,rx_coalesce=16384,
tx_fail_rate=0.05``: late, reordered and bunched completions, received data both split and
coalesced, and Transmits that fail now and then (bitsnet retries them). A correct program gives
the same results under it as without faults.

Each fault kind draws from its own ``random.Random`` stream, seeded from the machine's seed and
the kind: the n-th Transmit fails or not, the n-th frame gets its size, the n-th completion its
extra delay, whatever else happened. (Which frame is the n-th can depend on when the timer thread
pulled frames from several connections; for one connection the sequence is exact.)
``injected`` counts each fault as it happens (for reports and for tests that a plan did bite).
"""

from __future__ import print_function

import random

from efisim import uefi
from efisim.firmware import FIRMWARE, _now

# name -> converter; a name converted by ``bool`` needs no "=value"
_KINDS = {
    "delay": float,
    "reorder": float,
    "burst": int,
    "burst_wait": float,
    "tx_fail": int,
    "tx_fail_rate": float,
    "create_fail": int,
    "poll_fail": float,
    "rx_piece": int,
    "rx_coalesce": int,
    "reset_after": int,
    "accept_reset": int,
    "connect_timeout": float,
    "no_dhcp": bool,
    "dhcp_late": float,
    "event_fail": int,
}
_PROBABILITIES = ("tx_fail_rate", "poll_fail")
# Each kind's stream salt: new kinds go at the end, so that a seed keeps giving the same faults.
_SALTS = ("accept_reset", "burst", "burst_wait", "connect_timeout", "create_fail", "delay", "dhcp_late",
          "no_dhcp", "poll_fail", "reorder", "reset_after", "rx_coalesce", "rx_piece", "tx_fail",
          "tx_fail_rate", "event_fail")

# Named plans. Every one but ``poll_failing`` is a fault a correct program survives with no
# error reaching its user (module docstring); ``mixed`` combines them all.
PLANS = {
    "mixed": "reorder=0.02,burst=200,burst_wait=0.05,rx_piece=1,rx_coalesce=16384,tx_fail_rate=0.05",
    "late": "delay=0.03",
    "reordered": "reorder=0.05",
    "bursts": "burst=100,burst_wait=0.05",
    "split": "rx_piece=1,rx_coalesce=536",
    "coalesced": "rx_coalesce=65536",
    "tx_failing": "tx_fail_rate=0.2",
    "poll_failing": "poll_fail=0.3",
}
# The plans under which data must arrive intact and every timeout must hold (docs/testing.md sections 3.4, 3.5):
# all of them, the hostile ``poll_failing`` included (bitsnet must not trust Poll's status).
PLAN_NAMES = ("late", "reordered", "bursts", "split", "coalesced", "tx_failing", "poll_failing", "mixed")

# What a failing Poll returns: the statuses the spec lists for Poll besides EFI_SUCCESS.
POLL_ERRORS = (uefi.EFI_NOT_READY, uefi.EFI_TIMEOUT, uefi.EFI_DEVICE_ERROR)

DEFAULT_BURST_WAIT = 0.5  # seconds: long enough that bursts of hundreds form in a busy program


class Faults(object):
    """The faults in force on one machine; all off by default."""

    def __init__(self, seed=0):
        self.seed = int(seed)
        self.random = random.Random(seed)  # for callers; the faults below draw from their own streams
        self._streams = {}  # type: dict
        self.delay = 0.0  # seconds added before each token completion is signalled
        self.reorder = 0.0  # up to this many seconds more, drawn per completion
        self.burst = 0  # 0: completions are not bunched
        self.burst_wait = DEFAULT_BURST_WAIT
        self.tx_fail = 0  # Transmit calls still to fail
        self.tx_fail_rate = 0.0
        self.create_fail = 0  # CreateChild calls still to fail
        self.poll_fail = 0.0
        self.rx_piece = 0  # 0: frames are one MSS
        self.rx_coalesce = 0  # 0: frames are one MSS
        self.reset_after = 0  # 0: never
        self.accept_reset = 0  # incoming connections still to reset before they are accepted
        self.connect_timeout = 0.0  # 0: the configured ConnectionTimeout
        self.no_dhcp = False
        self.dhcp_late = 0.0
        self.event_fail = 0  # CreateEvent calls still to fail
        self.injected = {}  # type: dict   # fault name -> times it happened

    def configure(self, plan):
        """Switch faults on from a plan string (grammar in the module docstring); ValueError on a bad one."""
        for item in (plan or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            if name in PLANS and not sep:
                self.configure(PLANS[name])
                continue
            kind = _KINDS.get(name)
            if kind is None:
                raise ValueError("unknown fault %r (known: %s; plans: %s)"
                                 % (name, ", ".join(sorted(_KINDS)), ", ".join(sorted(PLANS))))
            if kind is bool:
                setattr(self, name, not sep or value.strip().lower() in ("1", "true", "yes", "on"))
                continue
            if not sep:
                raise ValueError("fault %r needs a value: %s=<%s>" % (name, name, kind.__name__))
            converted = kind(value)
            if converted < 0:
                raise ValueError("fault %r must not be negative" % name)
            if name in _PROBABILITIES and converted > 1:
                raise ValueError("fault %r is a probability: 0..1" % name)
            setattr(self, name, converted)
        return self

    # ------------------------------------------------------------------ questions drivers ask
    def _count(self, name):
        self.injected[name] = self.injected.get(name, 0) + 1

    def stream(self, name):
        """The random stream of one fault kind, seeded from the machine's seed and the kind alone:
        e.g. whether the 7th Transmit fails does not depend on how many frames were split before."""
        rng = self._streams.get(name)
        if rng is None:
            salt = _SALTS.index(name) + 1
            rng = self._streams[name] = random.Random(self.seed * 1000003 + salt)
        return rng

    def _chance(self, name, probability):
        return bool(probability) and self.stream(name).random() < probability

    def take_tx_fail(self):
        # type: () -> bool
        """True if this Transmit must fail with EFI_OUT_OF_RESOURCES (and count it)."""
        if self.tx_fail > 0:
            self.tx_fail -= 1
        elif not self._chance("tx_fail_rate", self.tx_fail_rate):
            return False
        self._count("tx_fail")
        return True

    def take_create_fail(self):
        # type: () -> bool
        """True if this CreateChild must fail with EFI_OUT_OF_RESOURCES."""
        if self.create_fail <= 0:
            return False
        self.create_fail -= 1
        self._count("create_fail")
        return True

    def take_event_fail(self):
        # type: () -> bool
        """True if this CreateEvent must fail with EFI_OUT_OF_RESOURCES (CoreAllocatePool failed)."""
        if self.event_fail <= 0:
            return False
        self.event_fail -= 1
        self._count("event_fail")
        return True

    def take_poll_fail(self):
        """The error status this Poll returns instead of working, or None."""
        if not self._chance("poll_fail", self.poll_fail):
            return None
        self._count("poll_fail")
        return POLL_ERRORS[int(self.stream("poll_fail").random() * len(POLL_ERRORS))]

    def take_accept_reset(self):
        # type: () -> bool
        """True if this incoming connection is to be reset before it is accepted."""
        if self.accept_reset <= 0:
            return False
        self.accept_reset -= 1
        self._count("accept_reset")
        return True

    def frame_limit(self, mss):
        # type: (int) -> int
        """How many bytes the next received frame may carry (one MSS without faults)."""
        piece, coalesce = self.rx_piece, self.rx_coalesce
        if piece and coalesce:
            low, high = min(piece, coalesce), max(piece, coalesce)
            limit = low + int(self.stream("rx_piece").random() * (high - low + 1))
        elif coalesce:
            limit = max(mss, coalesce)
        elif piece:
            limit = min(mss, piece)
        else:
            return mss
        if limit != mss:
            self._count("rx_split" if limit < mss else "rx_coalesce")
        return limit

    def holds_completions(self):
        # type: () -> bool
        return bool(self.delay or self.reorder or self.burst)

    def dhcp_delay(self, configured):
        # type: (float) -> float
        """Seconds from DHCP start to the answer: the machine's ``dhcp_delay`` plus ``dhcp_late``."""
        if self.dhcp_late:
            self._count("dhcp_late")
        return configured + self.dhcp_late

    def active(self):
        """The faults currently switched on, as a dict (for messages and reports)."""
        return dict((name, getattr(self, name)) for name in sorted(_KINDS)
                    if getattr(self, name) and not (name == "burst_wait" and not self.burst))

    def __repr__(self):
        return "Faults(%s)" % ",".join("%s=%s" % item for item in sorted(self.active().items()))


class HeldCompletions(object):
    """Completions a driver holds back under ``delay``, ``reorder`` and ``burst``.

    The driver calls ``hold`` instead of signalling, and ``release`` from a periodic timer at
    TPL_CALLBACK, signalling what it returns -- a whole burst in one tick. One owner's (child's)
    completions are released in the order they were held: EDK2 signals a socket's tokens FIFO.
    """

    def __init__(self):
        self._held = []  # type: list   # [(due, sequence, held_at, owner, token, status)]
        self._sequence = 0

    def __len__(self):
        return len(self._held)

    def hold(self, faults, owner, token, status, now):
        due = now + faults.delay
        if faults.reorder:
            due += faults.stream("reorder").random() * faults.reorder
            faults._count("reorder")
        elif faults.delay:
            faults._count("delay")
        for entry in self._held:
            if entry[3] is owner and entry[0] > due:
                due = entry[0]  # never overtake an earlier completion of the same owner
        self._sequence += 1
        self._held.append((due, self._sequence, now, owner, token, status))

    def release(self, faults, now, owner=None):
        """[(token, status)] to signal now, in order: ``owner``'s all (it is being torn down),
        or those due -- under ``burst`` only once enough are due or the oldest waited long enough."""
        burst = faults.burst if faults is not None else 0
        if owner is not None:
            ready = [e for e in self._held if e[3] is owner]
        else:
            ready = [e for e in self._held if e[0] <= now]
            if burst and ready and len(ready) < burst and min(e[2] for e in self._held) + faults.burst_wait > now:
                return []
        if not ready:
            return []
        if owner is None and burst and len(ready) > 1:
            faults._count("burst")
        taken = set(e[1] for e in ready)
        self._held = [e for e in self._held if e[1] not in taken]
        ready.sort(key=lambda e: (e[0], e[1]))
        return [(e[4], e[5]) for e in ready]

    def clear(self):
        self._held = []


class CompletingDriver(object):
    """How a protocol driver completes its tokens: write Status, signal Event -- or, under the
    completion faults (``delay``, ``reorder``, ``burst``), hold them in ``_delayed`` (a
    HeldCompletions) until ``deliver_delayed`` finds them due.

    For drivers whose tokens begin with EFI_..._COMPLETION_TOKEN (Event, Status): TCP4/6 and
    UDP4/6. The driver sets ``COMPLETION_TOKEN``, ``machine`` and ``_delayed``; ``child.tokens``
    lists each child's outstanding tokens.
    """

    @property
    def faults(self):
        return getattr(self.machine, "faults", None)

    def complete(self, child, token, status):
        """Write Status and signal the token's event (later, under the completion faults)."""
        if token in child.tokens:
            child.tokens.remove(token)
        faults = self.faults
        if faults is not None and faults.holds_completions():
            self._delayed.hold(faults, child, token, status, _now())
            return
        self._signal(token, status)

    @classmethod
    def _signal(cls, token, status):
        completion = cls.COMPLETION_TOKEN.from_address(token)
        completion.Status = status
        FIRMWARE.signal(completion.Event)

    def deliver_delayed(self, child=None):
        """Signal held completions that are due (all of ``child``'s, when it is torn down)."""
        if not self._delayed:
            return
        for token, status in self._delayed.release(self.faults, _now(), owner=child):
            self._signal(token, status)
