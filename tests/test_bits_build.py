"""BITS built from source with bitsnet and ``_bitsnet_trampoline`` compiled in (tools/bits_build.py).

The image comes from ``bits_build.build`` on the BITS 2079 sources (found as docs/testing.md section 4 says; beside the
repository, or $BITSNET_BITS_SOURCE: a tree or tarball): the cached image for this checkout's
bitsnet when there is one, else a build, where that is allowed (about 4 minutes from scratch on two
cores, seconds when only bitsnet's Python changed since the last build): with BITSNET_BITS_BUILD=1
(tools/check sets it) or when a finished work directory for these sources exists. Each test boots
it with tools/bitsrun.py (``as_is``: the image as built, nothing installed on top, the timer left
to bitsnet):

* the trampoline is a built-in module of BITS's Python and bitsnet's event layer chose it;
* ``python -m bitsnet.selftest --peer`` against tools/lab.py passes, naming the trampoline as its
  event path;
* a burst of completions larger than CPython's pending-call queue (31 free entries) arrives while
  Python runs no bytecode: the queue overflows (events.stats["overflowed"] > 0) and every datagram
  still reaches its socket intact.

Marker ``realbits`` (tools/check runs this file in its own step). Skips, with the reason, where the
sources, the build tools, QEMU/OVMF or user namespaces are missing; with FWTEST_INSTALL=1
(tools/check sets it) and root, the build tools' Debian packages (bits_build.DEBIAN_PACKAGES,
those that are missing) are installed first.
"""

from __future__ import print_function

import os
import re
import socket
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bits_build  # noqa: E402
import bitsrun  # noqa: E402

SOURCE = os.environ.get("BITSNET_BITS_SOURCE") or os.path.join(
    os.path.dirname(ROOT), "shared", "bits", "bits-2079-src.tar.xz")
BOOT_TIMEOUT = 300
BURST = 48  # datagrams in the burst: more than the 31 pending calls CPython's queue holds
BURST_BYTES = 200  # per datagram; each one's payload is its own (socket number repeated)

pytestmark = pytest.mark.realbits


def _image_or_reason():
    """(path of the built image, None) or (None, why there is none)."""
    if not os.path.exists(SOURCE):
        return None, "no BITS sources at %s (set BITSNET_BITS_SOURCE)" % SOURCE
    problem = bitsrun.unavailable(install=os.environ.get("FWTEST_INSTALL") == "1")
    if problem:
        return None, problem
    cached = bits_build.cached_image(SOURCE)
    if cached:
        return cached, None
    if os.environ.get("BITSNET_BITS_BUILD") != "1" and not bits_build.work_ready(SOURCE):
        return None, ("no BITS image built for this bitsnet: run `python3 tools/bits_build.py %s --out "
                      "build/bits.img` or set BITSNET_BITS_BUILD=1 (about 4 minutes)" % SOURCE)
    try:  # CI on a fresh machine (FWTEST_INSTALL=1, as root): apt-get the build's packages first
        bits_build.ensure_dependencies(install=os.environ.get("FWTEST_INSTALL") == "1")
    except bits_build.MissingDependency as exc:
        return None, str(exc)
    return bits_build.build(SOURCE, jobs=2), None


@pytest.fixture(scope="module")
def image():
    path, reason = _image_or_reason()
    if path is None:
        pytest.skip(reason)
    return path


def _boot(image, **kwargs):
    result = bitsrun.run(image=image, as_is=True, timeout=BOOT_TIMEOUT, **kwargs)
    assert not result.timed_out, "BITS did not finish in %d s:\n%s" % (BOOT_TIMEOUT, "\n".join(result.console[-40:]))
    return result


def test_the_trampoline_is_built_in_and_bitsnet_uses_it(image):
    code = ("import sys\nfrom bitsnet import events\n"
            "print('builtin %s' % ('_bitsnet_trampoline' in sys.builtin_module_names))\n"
            "print('mode %s' % events.mode())\n")
    result = _boot(image, code=code)
    assert result.status == 0, "\n".join(result.console[-40:])
    assert "builtin True" in result.output
    assert "mode trampoline" in result.output


def test_the_selftest_passes(image):
    result = _boot(image, module="bitsnet.selftest", args=["--peer", "{lab}"], lab=True)
    report = "\n".join(result.output)
    assert result.status == 0, report
    assert re.search(r"^\d+ passed, 0 failed", report, re.M), report
    mode = re.search(r"events: ([\w-]+)", report)  # its first line names the event path
    assert mode and mode.group(1) == "trampoline", report


# The burst, in BITS: BURST connected UDP sockets each send one datagram to the batch echo, which
# answers only once it has them all, all at once. Meanwhile BITS sits in BootServices.Stall: no
# bytecode runs, so every Receive completion's notify queues a pending call until the queue is
# full; bitsnet must notice the overflow and find the rest by rescanning.
BURST_SCRIPT = r'''
from __future__ import print_function
import socket, sys
from bitsnet import events
host, port = sys.argv[1].split(":")
port, count, size = int(port), int(sys.argv[2]), int(sys.argv[3])
warm = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
warm.settimeout(30)
warm.sendto(b"warm", (host, port))  # ARP, DHCP and the peer's first answer out of the way
assert warm.recv(100) == b"warm"
warm.close()
socks = []
for i in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, port))
    socks.append(s)
before = dict(events.stats)
for i, s in enumerate(socks):
    s.send((b"%04d" % i) * (size // 4))
events.boot_services().Stall(6000000)  # the answers arrive in here
intact = 0
for i, s in enumerate(socks):
    s.settimeout(10)
    data = s.recv(65536)
    if data == (b"%04d" % i) * (size // 4):
        intact += 1
    else:
        print("socket %d got %d bytes: %r" % (i, len(data), data[:16]))
    s.close()
print("mode %s" % events.mode())
print("intact %d of %d" % (intact, count))
for name in sorted(events.stats):
    print("stat %s %d" % (name, events.stats[name] - before.get(name, 0)))
'''


def _batch_echo(count):
    """A UDP peer on the namespace's loopback that answers ``count`` datagrams at once, when it has
    them all (or 20 s after the first); ``warm`` is answered at once. Runs in the namespace."""
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))

    def serve():
        held = []
        deadline = None
        while True:
            peer.settimeout(1.0 if deadline is None else max(0.01, deadline - time.time()))
            try:
                data, address = peer.recvfrom(65536)
            except socket.timeout:
                data = None
            if data == b"warm":
                peer.sendto(data, address)
                continue
            if data is not None:
                held.append((data, address))
                deadline = deadline or time.time() + 20
            if held and (len(held) >= count or time.time() >= deadline):
                for data, address in held:
                    peer.sendto(data, address)
                held, deadline = [], None

    thread = threading.Thread(target=serve)
    thread.daemon = True
    thread.start()
    return {"burst": "%s:%d" % (bitsrun.qemu_vm.GUEST_HOST, peer.getsockname()[1])}


def test_a_burst_that_overflows_the_pending_call_queue_loses_nothing(image, tmpdir):
    script = tmpdir.join("burst.py")
    script.write(BURST_SCRIPT)
    result = _boot(image, script=str(script), args=["{burst}", str(BURST), str(BURST_BYTES)],
                   setup=lambda: _batch_echo(BURST))
    report = "\n".join(result.output)
    assert result.status == 0, "\n".join(result.console[-40:])
    assert "mode trampoline" in result.output, report
    assert "intact %d of %d" % (BURST, BURST) in result.output, report
    stats = dict((name, int(value)) for name, value in re.findall(r"^stat (\w+) (\d+)$", report, re.M))
    assert stats["overflowed"] > 0, report
    assert stats["recovered"] > 0, report
    print(report)
