"""The background closer: endpoints the user closed whose EFI child is still finishing.

``close()`` never blocks (docs/architecture.md section 9), so what a close still has to do -- a TCP graceful
close through FIN and TIME_WAIT, UDP Transmits still in flight -- finishes here, driven by
``stack.pump()`` on every round of every wait; the endpoint is then destroyed (DestroyChild)
and dropped. One ``Closer`` per protocol (``stack.tcp_closer``, ``stack.udp_closer``) also
counts the endpoints that hold a child (``live``), for leak checks and interpreter exit.

What a closing endpoint provides (``tcp.TcpEndpoint``, ``udp.UdpEndpoint``):

``reap_step()``  advance one step; True once it is gone (destroyed, or never had a child)
``close_now()``  give up waiting: abort and destroy it now; True if it had to be aborted
``close_handed_over()``  True once what is left of the close is the firmware's alone (TCP: the
                 queued bytes and the FIN given to it, ``Close`` posted; UDP: no Transmit in flight)
"""

from bitsnet import clock, events


class Closer(object):
    """The endpoints of one protocol: those holding a child and those closing in the background."""

    def __init__(self, sweep):
        # type: (float) -> None
        self.live = set()  # type: set       # endpoints holding a child, not closed by the user
        self.closing = []  # type: list      # endpoints still finishing their close
        self.wanted = set()  # type: set     # closing endpoints with a completion since they were reaped
        self.sweep = sweep  # seconds between sweeps of every closing endpoint (see reap_due)
        self.next_sweep = 0.0

    def start(self, ep):
        """Hand a closed endpoint over; it may finish at once (e.g. the peer had closed already)."""
        self.closing.append(ep)
        if ep.reap_step() and ep in self.closing:
            self.closing.remove(ep)

    def reap(self):
        """Finish whatever background closes can be finished now."""
        self.next_sweep = clock.monotonic() + self.sweep
        self._reap(list(self.closing))

    def _reap(self, endpoints):
        self.wanted.difference_update(endpoints)
        for ep in endpoints:
            if ep.reap_step() and ep in self.closing:
                self.closing.remove(ep)

    def reap_due(self):
        """Reap what may have moved, from every pump and before each new child.

        Only the closing endpoints that had a completion (``wanted``), and all of them every
        ``sweep`` seconds for what no completion announces (the close deadline): a full reap() is
        O(closing endpoints), and the pump runs on every round of every wait -- with a thousand
        connections in TIME_WAIT (2 s, docs/edk2.md section 3.9), reaping all of them each time made the
        connection rate fall with the number of connections closed in the last two seconds.
        (A sweep of 0 reaps all of them every time: UDP, whose closes are short.)
        """
        if not self.closing:
            self.wanted.clear()
        elif clock.monotonic() >= self.next_sweep:
            self.reap()
        elif self.wanted:
            self._reap(list(self.wanted))

    def handed_over(self):
        """Whether every background close has nothing left that needs Python (``close_handed_over``)."""
        return all(ep.close_handed_over() for ep in self.closing)

    def close_all(self, timeout, poll):
        """Close every live endpoint, wait up to ``timeout`` (driving ``poll``) for the closes
        to finish, then abort the rest. Returns how many had to be aborted."""
        for ep in list(self.live):
            ep.close()
        events.wait_until(lambda: not self.closing, clock.monotonic() + timeout, poll=poll)
        aborted = 0
        for ep in list(self.closing):
            if ep.close_now():
                aborted += 1
        del self.closing[:]
        return aborted

    def count(self):
        # type: () -> int
        """Endpoints still holding an EFI child (open, or closing in the background)."""
        return len(self.live) + len(self.closing)
