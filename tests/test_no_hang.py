"""No hang past a timeout (docs/testing.md section 3.5).

Under every fault plan (``faults.PLAN_NAMES``) each blocking call with a timeout -- connect,
accept, recv, send(all), recvfrom -- returns or raises ``socket.timeout`` within the timeout
plus ``MARGIN``. Without any timeout, the two waits that have no peer to give up for the caller
end with an error after their documented limits: DHCP after ``ipconfig.DHCP_TIMEOUT`` (README:
"no answer within 30 s"), a name lookup after ``dns.ATTEMPTS`` rounds of ``dns.TIMEOUT`` per
server (bitsnet's own client) or after DnsDxe's retries (DNS4), with ``gaierror(EAI_AGAIN)``.
The limits are shortened here (the constants are what the code reads), so CI waits seconds.
"""

from __future__ import print_function

import errno
import socket as host
import time

import pytest

import conftest
import dnspeer
import peers
from bitsnet import _socket as bs
from bitsnet import dns, errors, ipconfig
from efisim import faults

import test_socket_api

net = test_socket_api.net

TIMEOUT = 0.3  # seconds given to every call
MARGIN = 0.5  # seconds past the timeout a call may take under a plan (one burst_wait, a few ticks)
STATION = conftest.STATION


def plan_params(**options):
    return [pytest.param(name, marks=pytest.mark.machine(static=True, faults=name, seed=index + 1, **options),
                         id=name)
            for index, name in enumerate(faults.PLAN_NAMES)]


class Timed(object):
    """``with Timed(limit): call()`` -- the call must end (any way) within ``limit`` seconds."""

    def __init__(self, what, limit):
        self.what, self.limit = what, limit

    def __enter__(self):
        self.start = time.time()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.time() - self.start
        assert self.elapsed < self.limit, "%s took %.2f s (limit %.2f s)" % (self.what, self.elapsed, self.limit)
        return False


def full_backlog_listener():
    """A host listener whose accept queue is full: further SYNs are dropped, connects hang."""
    listener = host.socket(host.AF_INET, host.SOCK_STREAM)
    listener.bind((peers.HOST, 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        c = host.socket(host.AF_INET, host.SOCK_STREAM)
        c.setblocking(False)
        c.connect_ex(listener.getsockname())
        fillers.append(c)
    time.sleep(0.1)
    return listener, fillers


@pytest.mark.parametrize("plan", plan_params())
def test_every_blocking_call_ends_within_its_timeout(net, plan):
    limit = TIMEOUT + MARGIN
    timings = {}
    # connect: the SYN is never answered.
    listener, fillers = full_backlog_listener()
    try:
        s = bs.socket()
        s.settimeout(TIMEOUT)
        with Timed("connect", limit) as t:
            with pytest.raises(bs.timeout):
                s.connect(listener.getsockname())
        timings["connect"] = t.elapsed
        s.close()
    finally:
        for c in fillers:
            c.close()
        listener.close()
    # accept: nobody connects.
    server = bs.socket()
    server.bind((STATION, 0))
    server.listen(1)
    server.settimeout(TIMEOUT)
    with Timed("accept", limit) as t:
        with pytest.raises(bs.timeout):
            server.accept()
    timings["accept"] = t.elapsed
    server.close()
    # recv and send on an established connection whose peer neither sends nor reads.
    with test_socket_api.HostListener() as hl:
        client, peer = test_socket_api.connected_pair(hl)
        client.settimeout(TIMEOUT)
        with Timed("recv", limit) as t:
            with pytest.raises(bs.timeout):
                client.recv(10)
        timings["recv"] = t.elapsed
        chunk = b"n" * (1 << 20)
        # The buffers fill, then a sendall times out; each call (its timeout is for the whole
        # call, as on Python 3.5+) ends within the limit, the one that raises included.
        timings["sendall"] = 0.0
        with pytest.raises(bs.timeout):
            for _ in range(64):
                with Timed("sendall", limit) as t:
                    try:
                        client.sendall(chunk)
                    finally:
                        timings["sendall"] = max(timings["sendall"], time.time() - t.start)
        client.close()
        peer.close()
    # recvfrom: no datagram comes.
    u = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    u.bind((STATION, 0))
    u.settimeout(TIMEOUT)
    with Timed("recvfrom", limit) as t:
        with pytest.raises(bs.timeout):
            u.recvfrom(100)
    timings["recvfrom"] = t.elapsed
    u.close()
    print("no-hang plan=%s: %s" % (plan, " ".join("%s=%.2f" % item for item in sorted(timings.items()))))


# ---------------------------------------------------------------------- no timeout at all: DHCP
@pytest.mark.parametrize("plan", [name for name in faults.PLAN_NAMES if name in ("mixed", "poll_failing")])
def test_dhcp_without_a_timeout_gives_up_after_dhcp_timeout(request, plan):
    _boot(request, faults=plan + ",no_dhcp", seed=5, static=False)
    saved = ipconfig.DHCP_TIMEOUT
    ipconfig.DHCP_TIMEOUT = 1.0
    try:
        s = bs.socket()  # default timeout: None
        assert s.gettimeout() is None
        start = time.time()
        with pytest.raises(bs.error) as info:
            s.connect((peers.HOST, peers.closed_port()))
        elapsed = time.time() - start
        s.close()
    finally:
        ipconfig.DHCP_TIMEOUT = saved
    # (The message names DHCP on Python 3; on 2.7 connect() drops the detail: reported.)
    assert info.value.errno == errno.ETIMEDOUT, info.value
    assert 1.0 <= elapsed < 1.0 + 2.0, elapsed
    print("no-hang dhcp plan=%s: gave up after %.2f s: %s" % (plan, elapsed, info.value))


def _boot(request, **options):
    """The ``net`` fixture with options chosen inside the test."""
    request.node.add_marker(pytest.mark.machine(**options))
    return request.getfixturevalue("net")


# ---------------------------------------------------------------------- no timeout at all: DNS
@pytest.fixture
def silent_dns():
    with dnspeer.DnsPeer({}, silent=["quiet.example"]) as running:
        yield running


@pytest.fixture
def short_dns():
    saved = dns.TIMEOUT, dns.ATTEMPTS
    dns.TIMEOUT, dns.ATTEMPTS = 0.4, 2
    yield
    dns.TIMEOUT, dns.ATTEMPTS = saved


@pytest.mark.parametrize("dns4", [False, True], ids=["own-client", "dns4"])
def test_name_lookup_without_a_timeout_gives_up_with_eai_again(request, silent_dns, short_dns, dns4):
    _boot(request, faults="mixed", seed=6, static=True, dns4=dns4, dns_servers=[silent_dns.address])
    start = time.time()
    with pytest.raises(errors.gaierror) as info:
        bs.getaddrinfo("quiet.example", 80)
    elapsed = time.time() - start
    assert info.value.args[0] == dns.EAI_AGAIN, info.value
    if dns4:
        # DnsDxe: RetryInterval is forced to >= 2 s and RetryCount 0 means 3 tries (docs/edk2.md section 6.2);
        # after EFI_TIMEOUT bitsnet tries no other server (there is none).
        limit = 3 * 2.0 + dns.ATTEMPTS * dns.TIMEOUT + 2.0
    else:
        limit = dns.ATTEMPTS * dns.TIMEOUT + 1.5
    assert elapsed < limit, "gave up after %.2f s, limit %.2f s" % (elapsed, limit)
    assert silent_dns.queries, "the server was never asked"
    print("no-hang dns %s: EAI_AGAIN after %.2f s (%d queries)" % (
        "dns4" if dns4 else "own-client", elapsed, len(silent_dns.queries)))


# ---------------------------------------- DHCP still running (docs/architecture.md section 6.4)
@pytest.mark.parametrize("plan", [pytest.param(name, id=name, marks=pytest.mark.machine(
    static=False, dhcp_delay=30.0, faults=name, seed=index + 1)) for index, name in enumerate(faults.PLAN_NAMES)])
def test_calls_with_a_timeout_end_on_time_while_dhcp_is_still_running(net, plan):
    """DHCP answers only after 30 s: every call with a timeout ends within it, and every
    non-blocking one answers at once (EINPROGRESS, EAGAIN), whatever the plan."""
    limit = TIMEOUT + MARGIN
    target = (peers.HOST, peers.closed_port())
    s = bs.socket()
    s.settimeout(TIMEOUT)
    with Timed("connect during DHCP", limit):
        with pytest.raises(bs.timeout):
            s.connect(target)
    s.close()
    s = bs.socket()
    s.setblocking(False)
    with Timed("non-blocking connect during DHCP", 0.1):
        assert s.connect_ex(target) == errno.EINPROGRESS
    with Timed("second non-blocking connect during DHCP", 0.1):
        assert s.connect_ex(target) == errno.EALREADY
    s.close()
    u = bs.socket(bs.AF_INET, bs.SOCK_DGRAM)
    u.settimeout(TIMEOUT)
    with Timed("sendto during DHCP", limit):
        with pytest.raises(bs.timeout):
            u.sendto(b"x", target)
    u.setblocking(False)
    with Timed("non-blocking sendto during DHCP", 0.1):
        with pytest.raises(bs.error) as info:
            u.sendto(b"x", target)
        assert info.value.errno == errno.EAGAIN
    u.settimeout(TIMEOUT)
    with Timed("bind during DHCP", limit):
        with pytest.raises(bs.timeout):
            u.bind(("", 0))
    u.close()
