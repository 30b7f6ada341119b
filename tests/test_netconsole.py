"""bitsnet.netconsole: the console mirrored to a UDP receiver on the host.

First in this process over the host's own sockets (the stream wrapper: console unchanged, one
datagram per line, partial and long lines, re-entrancy, errors never raised, stop/start), then
"at the boot prompt" (tools/efirun.py, bitsnet installed as ``socket``) against a host receiver:
across subnets through the gateway, through a relay that drops a seeded share of datagrams, with
DHCP that never answers and with DHCP slower than the netconsole waits. The efirun runs use this
test's interpreter, so running the file under 2.7 and 3 covers both.
"""

from __future__ import print_function

import errno
import os
import random
import re
import socket
import sys
import threading
import time

import pytest

import processes
from bitsnet import netconsole

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
HOST = "127.0.0.1"
STATION = "127.0.1.2"  # the simulated machine, on another /24 than the receiver ...
GATEWAY = "127.0.1.1"  # ... so its datagrams take the default route through this router
RUN_TIMEOUT = 60.0  # s one efirun run may take before the test fails (and kills it)
NORMAL_RUN = 15.0  # s a run of LINES prints must stay under, even on a loaded two-core machine
LINES = 300
DROP_SHARE = 0.3
DROP_SEED = 1234
DRAIN = 0.1  # s the receiver waits for stragglers (loopback: datagrams sent are already queued)
RELAY_DRAIN = 0.3  # s the relay keeps forwarding after the run


# --------------------------------------------------------------------------- host-side helpers
class Receiver(object):
    """A host UDP socket that keeps every datagram with its source."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.port = self.sock.getsockname()[1]

    def collect(self, wait=DRAIN):
        out = []
        self.sock.settimeout(wait)
        while True:
            try:
                out.append(self.sock.recvfrom(65536))
            except socket.timeout:
                return out

    def payloads(self, wait=DRAIN):
        return [data for data, _ in self.collect(wait)]

    def close(self):
        self.sock.close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


class Relay(object):
    """Forwards datagrams to ``target``, dropping a seeded share of them (a lossy network)."""

    def __init__(self, target, share, seed):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.target, self.share, self.rng = target, share, random.Random(seed)
        self.forwarded, self.dropped = 0, 0
        self.lost = []  # type: list   # the datagrams dropped
        self.running = True
        self.thread = threading.Thread(target=self._run)
        self.thread.daemon = True
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                data, _ = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            if self.rng.random() < self.share:
                self.dropped += 1
                self.lost.append(data)
            else:
                self.sock.sendto(data, self.target)
                self.forwarded += 1

    def stop(self):
        time.sleep(RELAY_DRAIN)
        self.running = False
        self.thread.join(5)
        self.sock.close()


class Console(object):
    """What BITS's console object offers: ``write`` and nothing else (not even ``flush``)."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    @property
    def text(self):
        return "".join(p if isinstance(p, type(u"")) else p.decode("utf-8") for p in self.parts)


@pytest.fixture
def consoles(monkeypatch):
    """Call it to replace sys.stdout/sys.stderr by bare consoles (in the test itself: pytest's
    capture sets its own streams between setup and call); any netconsole is stopped at the end."""
    def install():
        out, err = Console(), Console()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        return out, err
    yield install
    netconsole.stop()


def _utf8(text):
    return text.encode("utf-8")


# --------------------------------------------------------------------------- the stream wrapper
def test_console_unchanged_and_one_datagram_per_line(consoles, receiver):
    out, err = consoles()
    console = netconsole.start(HOST, receiver.port)
    assert sys.stdout is not out and sys.stderr is not err
    print("first line")
    sys.stderr.write("an error\n")
    sys.stdout.write("two\nlines\n")
    assert sys.stdout.write("x\n") is None  # the replaced stream's return value
    stats = netconsole.stop()
    assert sys.stdout is out and sys.stderr is err
    assert out.parts == ["first line", "\n", "two\nlines\n", "x\n"]  # each write exactly as made
    assert err.parts == ["an error\n"]
    assert receiver.payloads() == [b"first line\n", b"an error\n", b"two\n", b"lines\n", b"x\n"]
    assert stats["sent"] == 5 and stats["dropped"] == 0
    assert console.stats()["connected"] is False  # closed by stop()


def test_partial_lines_wait_for_their_newline_per_stream(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    sys.stdout.write("progress: ")
    sys.stderr.write("warning\n")  # stderr does not cut into stdout's line
    sys.stdout.write("50%...")
    assert receiver.payloads(0.1) == [b"warning\n"]
    sys.stdout.write("100%\nnext")
    assert receiver.payloads(0.1) == [b"progress: 50%...100%\n"]
    netconsole.stop()
    assert receiver.payloads() == [b"next\n"]  # flushed by stop(), newline added for the receiver
    assert out.text == "progress: 50%...100%\nnext"


def test_long_lines_are_cut_on_character_boundaries(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    line = u"\u00e9\u4e2d" * 1100 + u"\n"  # 5501 bytes of UTF-8, 2- and 3-byte characters
    sys.stdout.write(line)
    got = receiver.payloads()
    assert len(got) == 6 and all(len(d) <= netconsole.PAYLOAD for d in got)
    assert [d.decode("utf-8") for d in got] and b"".join(got) == _utf8(line)
    assert got[-1].endswith(b"\n") and not any(d.endswith(b"\n") for d in got[:-1])


def test_a_partial_line_goes_out_once_it_fills_a_datagram(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    for _ in range(25):
        sys.stdout.write("x" * 100)  # 2500 bytes, no newline
    got = receiver.payloads(0.2)
    assert got == [b"x" * netconsole.PAYLOAD] * 2
    netconsole.stop()
    assert receiver.payloads() == [b"x" * 500 + b"\n"]


def test_str_and_unicode_writes(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    sys.stdout.write(b"bytes line\n")  # 2.7's str
    sys.stdout.write(u"unicode \u00e9\n")
    sys.stdout.write(u"\u4e2d")  # a character split over two writes of the same line
    sys.stdout.write(b"\xe6\x96\x87\n")
    assert receiver.payloads() == [b"bytes line\n", _utf8(u"unicode \u00e9\n"), _utf8(u"\u4e2d\u6587\n")]


@pytest.mark.skipif(sys.version_info[0] != 2, reason="the print statement and its softspace are 2.7's")
def test_print_statement_of_python2(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    source = 'print "a", 1, u"\\xe9"\nprint "b",\nprint "c"\nprint >>sys.stderr, "d"\n'
    exec(compile(source, "<py2>", "exec", 0, True))  # dont_inherit: without this file's print_function
    assert out.parts == ["a", " ", "1", " ", u"\xe9", "\n", "b", " ", "c", "\n"]
    assert receiver.payloads() == [b"a 1 \xc3\xa9\n", b"b c\n", b"d\n"]


def test_sequence_numbers_count_every_datagram(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port, seq=True)
    for i in range(3):
        print("line %d" % i)
    sys.stdout.write("y" * 2000 + "\n")
    got = receiver.payloads()
    assert got[:3] == [b"0 line 0\n", b"1 line 1\n", b"2 line 2\n"]
    assert [d.split(b" ", 1)[0] for d in got[3:]] == [b"3", b"4", b"5"]
    assert all(len(d) <= netconsole.PAYLOAD for d in got)
    assert b"".join(d.split(b" ", 1)[1] for d in got[3:]) == b"y" * 2000 + b"\n"


class _ChattySocket(object):
    """A socket whose sendto prints, as bitsnet's DHCP progress does from inside the send path."""

    def __init__(self, real, every_time):
        self.real, self.every_time, self.prints = real, every_time, 0

    def sendto(self, data, address):
        if self.every_time or not self.prints:
            self.prints += 1
            print("progress %d" % self.prints)
        return self.real.sendto(data, address)

    def settimeout(self, value):
        self.real.settimeout(value)

    def close(self):
        self.real.close()


def test_print_from_inside_the_send_path_is_mirrored_after_not_recursed(consoles, receiver):
    out, err = consoles()
    console = netconsole.start(HOST, receiver.port)
    console.sender.sock = _ChattySocket(console.sender.sock, every_time=False)
    print("hello")
    assert out.text == "hello\nprogress 1\n"
    assert receiver.payloads() == [b"hello\n", b"progress 1\n"]


def test_a_send_path_that_always_prints_stays_bounded(consoles, receiver):
    out, err = consoles()
    console = netconsole.start(HOST, receiver.port)
    chatty = console.sender.sock = _ChattySocket(console.sender.sock, every_time=True)
    print("hello")  # every send prints a line, whose send prints a line, ...
    assert chatty.prints <= netconsole.DEFERRED_ROUNDS + 1
    assert out.text.startswith("hello\nprogress 1\n")
    print("still working")  # mirrors what the first call left over, again bounded
    assert chatty.prints <= 1 + 4 * netconsole.DEFERRED_ROUNDS  # three writes, each bounded
    assert "still working" in out.text


class _FailingSocket(object):
    def __init__(self, err):
        self.err, self.calls = err, 0

    def sendto(self, data, address):
        self.calls += 1
        raise socket.error(self.err, os.strerror(self.err))

    def settimeout(self, value):
        pass

    def close(self):
        pass


def test_send_errors_are_counted_never_raised(consoles):
    out, err = consoles()
    console = netconsole.start(HOST, 9)
    console.sender.sock = _FailingSocket(errno.ENETUNREACH)
    print("one")
    print("two")
    stats = console.stats()
    assert stats["dropped"] == 2 and stats["errors"] == 2 and "unreachable" in stats["last_error"]
    assert out.text == "one\ntwo\n"


def test_would_block_keeps_the_datagram_for_the_next_write(consoles, receiver):
    out, err = consoles()
    console = netconsole.start(HOST, receiver.port)
    real = console.sender.sock
    console.sender.sock = _FailingSocket(errno.EAGAIN)
    print("kept")
    assert console.stats()["queued"] == 1 and console.stats()["dropped"] == 0
    console.sender.sock = real
    print("then")
    assert receiver.payloads() == [b"kept\n", b"then\n"]


def test_while_the_network_is_down_the_newest_lines_are_kept(consoles, receiver):
    out, err = consoles()
    console = netconsole.start(HOST, receiver.port, seq=True)
    sender = console.sender
    sock, sender.sock = sender.sock, None  # down: no socket, and no retry for a while
    sender._retry_at = netconsole._clock() + 3600
    for i in range(netconsole.QUEUE_LIMIT + 50):
        print("line %d" % i)
    assert console.stats()["queued"] == netconsole.QUEUE_LIMIT and console.stats()["dropped"] == 50
    sender.sock = sock  # up again
    print("back")  # queued behind the backlog (pushing out one more), then all sent in order
    got = receiver.payloads()
    assert len(got) == netconsole.QUEUE_LIMIT and console.stats()["dropped"] == 51
    assert got[0] == b"51 line 51\n" and got[-1] == b"%d back\n" % (netconsole.QUEUE_LIMIT + 50)


def test_stop_restores_exactly_what_it_replaced_and_is_idempotent(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    wrapper = sys.stdout
    assert netconsole.stop()["sent"] == 0
    assert sys.stdout is out and sys.stderr is err
    assert netconsole.stop() is None and netconsole.active() is None
    wrapper.write("late\n")  # someone kept the wrapper: it still writes to the console
    assert out.text == "late\n" and receiver.payloads(0.1) == []


def test_stop_leaves_a_stream_someone_else_installed_later(consoles, receiver):
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    mine = sys.stdout
    theirs = Console()
    sys.stdout = theirs
    netconsole.stop()
    assert sys.stdout is theirs  # not clobbered with ours or with the one we replaced
    mine.write("via the old wrapper\n")
    assert out.text == "via the old wrapper\n" and receiver.payloads(0.1) == []


def test_start_twice_replaces_the_target(consoles):
    out, err = consoles()
    first, second = Receiver(), Receiver()
    try:
        netconsole.start(HOST, first.port)
        sys.stdout.write("to the first\npartial")
        netconsole.start(HOST, second.port)
        assert sys.stdout._original is out  # wraps the console, not the old wrapper
        print("to the second")
        netconsole.stop()
        assert sys.stdout is out
        assert first.payloads() == [b"to the first\n", b"partial\n"]
        assert second.payloads() == [b"to the second\n"]
        assert out.text == "to the first\npartialto the second\n"
    finally:
        first.close()
        second.close()


def test_the_wrapper_has_only_what_the_console_has(consoles):
    out, err = consoles()
    netconsole.start(HOST, 9)
    sys.stdout.flush()  # the console has no flush: nothing to call, no error
    with pytest.raises(AttributeError):
        sys.stdout.fileno
    out.encoding = "utf-8"
    assert sys.stdout.encoding == "utf-8"


def test_console_errors_propagate_and_are_not_mirrored(consoles, receiver):
    out, err = consoles()
    class Refusing(object):
        def write(self, text):
            raise IOError(errno.EIO, "console gone")

    sys.stdout = Refusing()
    netconsole.start(HOST, receiver.port)
    with pytest.raises(IOError):
        sys.stdout.write("lost\n")
    assert receiver.payloads(0.1) == []


def test_parse_args():
    plain = {"seq": False, "dhcp_wait": 3.0, "syslog": False, "hostname": None, "app_name": None}
    assert netconsole.parse_args(["10.0.2.2", "--", "mod", "-x"]) == ("10.0.2.2", None, plain, "mod", ["-x"])
    assert netconsole.parse_args(["--seq", "--dhcp-wait", "1", "h:7", "mod"]) == (
        "h", 7, dict(plain, seq=True, dhcp_wait=1.0), "mod", [])
    assert netconsole.parse_args(["--syslog", "--hostname=rack3-slot7", "--app-name", "lab", "h", "m"]) == (
        "h", None, dict(plain, syslog=True, hostname="rack3-slot7", app_name="lab"), "m", [])
    for bad in ([], ["h"], ["--bogus", "h", "m"], ["h:port", "m"]):
        with pytest.raises(SystemExit):
            netconsole.parse_args(bad)


# --------------------------------------------------------------------------- at the boot prompt
PROGRAM = u'''
from __future__ import print_function
import sys, time
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
for i in range(int(sys.argv[1])):
    print("line %%d %%s" %% (i, "." * (i %% 40)))
    if i %% 50 == 0:
        sys.stderr.write("stderr %%d\\n" %% i)
    time.sleep(pause)
print(u"caf\\u00e9 " + "z" * %d)
sys.stdout.write("no newline at the end")
'''


def program_lines(count):
    lines = []
    for i in range(count):
        lines.append("line %d %s\n" % (i, "." * (i % 40)))
        if i % 50 == 0:
            lines.append("stderr %d\n" % i)
    return lines


@pytest.fixture
def program(tmpdir):
    tmpdir.join("nc_program.py").write_text(PROGRAM % (2 * netconsole.PAYLOAD), encoding="utf-8")
    return str(tmpdir)


def efirun(program_dir, machine, netconsole_args, program_args):
    """Run nc_program under netconsole in a simulated machine: (rc, stdout, stderr, seconds)."""
    command = [sys.executable, EFIRUN, "--ledger"] + machine + ["-m", "bitsnet.netconsole"] + \
        netconsole_args + ["--", "nc_program"] + [str(a) for a in program_args]
    env = dict(os.environ, PYTHONPATH=program_dir, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    start = time.time()
    status, out, err = processes.run(command, RUN_TIMEOUT, cwd=ROOT, env=env)
    elapsed = time.time() - start
    out, err = out.decode("utf-8"), err.decode("utf-8")
    assert elapsed < RUN_TIMEOUT, "efirun killed after %g s; stderr:\n%s" % (RUN_TIMEOUT, err)
    assert "Traceback" not in err and "firmware faults" not in err, err
    ledger = [line for line in err.splitlines() if line.startswith("efirun ledger:")]
    assert ledger and all(part.endswith("=0") for part in ledger[0].split(":")[1].split()), err
    return status, out, err, elapsed


def console_is_complete(out, err, count):
    """Everything the program printed is on the console, in order (stdout and stderr)."""
    printed = [line for line in (out + "\n" + err).splitlines(True) if line.startswith(("line ", "stderr "))]
    assert sorted(printed) == sorted(program_lines(count))
    assert [x for x in out.splitlines(True) if x.startswith("line ")] == \
        [x for x in program_lines(count) if x.startswith("line ")]
    assert out.endswith(u"caf\u00e9 " + "z" * 2 * netconsole.PAYLOAD + "\nno newline at the end")


def mirrored_text(payloads):
    """What a receiver that concatenates datagrams (nc) shows."""
    return b"".join(payloads).decode("utf-8")


@pytest.mark.parametrize("firmware", [[], ["--firmware", "edk2-2015", "--no-trampoline"]],
                         ids=["edk2", "edk2-2015-efi-hook"])
def test_across_subnets_through_the_gateway(program, receiver, firmware):
    # edk2-2015: UDP children ignore the IP4 routes until bitsnet adds them (docs/bits-efi.md section 3)
    machine = ["--address", STATION + "/24", "--gateway", GATEWAY] + firmware
    rc, out, err, _ = efirun(program, machine, ["%s:%d" % (HOST, receiver.port)], [60])
    assert rc == 0, err
    console_is_complete(out, err, 60)
    got = receiver.collect()
    assert set(source[0] for _, source in got) == {STATION}  # sent by the simulated NIC
    text = mirrored_text([data for data, _ in got])
    assert text.startswith("bitsnet: DHCP on eth0 ... %s/24" % STATION)  # its own progress too
    assert "".join(program_lines(60)) in text
    assert text.endswith(u"caf\u00e9 " + "z" * 2 * netconsole.PAYLOAD + "\nno newline at the end\n")
    assert all(len(data) <= netconsole.PAYLOAD for data, _ in got)


def test_without_a_route_nothing_is_sent_and_nothing_breaks(program, receiver):
    # The control for the test above: the same subnets with no router, so EDK2 finds no route
    # (EFI_NOT_FOUND, docs/edk2.md section 4.2): every datagram is counted as dropped, the console is whole.
    machine = ["--address", STATION + "/24", "--gateway", ""]
    rc, out, err, _ = efirun(program, machine, ["%s:%d" % (HOST, receiver.port)], [60])
    assert rc == 0, err
    console_is_complete(out, err, 60)
    assert receiver.payloads() == []
    assert "0 datagrams sent" in err and "Network is unreachable" in err


def test_a_network_that_drops_datagrams(program, receiver):
    relay = Relay((HOST, receiver.port), DROP_SHARE, DROP_SEED)
    try:
        machine = ["--address", STATION + "/24", "--gateway", GATEWAY]
        rc, out, err, elapsed = efirun(program, machine, ["--seq", "%s:%d" % (HOST, relay.port)], [LINES])
    finally:
        relay.stop()
    assert rc == 0, err
    assert elapsed < NORMAL_RUN, "a lossy network slowed the program down: %.1f s" % elapsed
    console_is_complete(out, err, LINES)
    got = receiver.payloads()
    assert relay.dropped > 0.2 * (relay.dropped + relay.forwarded) and relay.forwarded == len(got)
    numbers = [int(p.split(b" ", 1)[0]) for p in got]
    assert numbers == sorted(numbers)  # in order
    lost = [int(p.split(b" ", 1)[0]) for p in relay.lost]
    # Every datagram made reached the network (nothing dropped in the firmware): the gaps the
    # receiver sees in the numbers are exactly the relay's drops.
    assert sorted(numbers + lost) == list(range(len(numbers) + len(lost)))
    assert "dropped" not in err
    expected = set(program_lines(LINES))
    lines = [p.split(b" ", 1)[1].decode("utf-8") for p in got]
    program_lines_arrived = [line for line in lines if line.startswith(("line ", "stderr "))]
    assert set(program_lines_arrived) <= expected and len(program_lines_arrived) > LINES // 2  # intact


def test_dhcp_never_answers(program, receiver):
    wait = 0.5
    rc, out, err, elapsed = efirun(program, ["--no-dhcp"], ["--dhcp-wait", str(wait),
                                                            "%s:%d" % (HOST, receiver.port)], [60])
    assert rc == 0, err
    console_is_complete(out, err, 60)
    assert "netconsole: network not up yet" in out and "no answer" in out
    assert elapsed < NORMAL_RUN
    assert receiver.payloads() == []


def test_a_nic_the_firmware_left_unconnected(program, receiver):
    # Only SNP until ConnectController (docs/edk2.md section 2.4): bitsnet connects the NIC itself. This used
    # to recurse for ever: the simulator's drivers, imported at ConnectController time, took
    # bitsnet's `socket` for the host's (fixed by binding the OS socket module at boot).
    rc, out, err, _ = efirun(program, ["--nic-disconnected"], ["%s:%d" % (HOST, receiver.port)], [20])
    assert rc == 0, err
    console_is_complete(out, err, 20)
    assert "".join(program_lines(20)) in mirrored_text(receiver.payloads())


def test_dhcp_slower_than_the_wait_the_backlog_follows(program, receiver):
    # start() stops waiting after 0.3 s; EDK2 goes on with DHCP and leases at 1 s; the lines
    # printed before that (over 1.5 s) were kept and go out first, in order.
    machine = ["--dhcp-delay", "1.0"]
    rc, out, err, _ = efirun(program, machine, ["--dhcp-wait", "0.3", "%s:%d" % (HOST, receiver.port)],
                             [30, 0.05])
    assert rc == 0, err
    console_is_complete(out, err, 30)
    text = mirrored_text(receiver.payloads())
    assert text.startswith("bitsnet: DHCP on eth0 ... no answer\nnetconsole: network not up yet")
    assert "".join(program_lines(30)) in text


def test_the_programs_traceback_is_mirrored(tmpdir, receiver):
    tmpdir.join("nc_program.py").write_text(u"print('before')\nraise ValueError('boom')\n", encoding="utf-8")
    command = [sys.executable, EFIRUN, "-m", "bitsnet.netconsole", "%s:%d" % (HOST, receiver.port),
               "--", "nc_program"]
    status, out, err = processes.run(command, RUN_TIMEOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(tmpdir)))
    assert status == 1
    text = mirrored_text(receiver.payloads())
    assert "before\n" in text and "ValueError: boom\n" in text and 'nc_program.py", line 2' in text
    assert "runpy" not in text and "Traceback (most recent call last):" in err.decode("utf-8")


def test_the_selftest_under_netconsole_passes(receiver):
    # python -m bitsnet.netconsole HOST -- bitsnet.selftest: the selftest's last check must not
    # count the netconsole's own socket (open on purpose) as a leak.
    command = [sys.executable, EFIRUN, "--lab",
        "-m", "bitsnet.netconsole", "%s:%d" % (HOST, receiver.port), "--", "bitsnet.selftest"]
    status, out, err = processes.run(command, RUN_TIMEOUT, cwd=ROOT)
    report = out.decode("utf-8") + err.decode("utf-8")
    assert status == 0, report
    assert re.search(r"^\d+ passed, 0 failed$", out.decode("utf-8"), re.M), report
    assert "the netconsole's socket stays open" in report, report
    text = mirrored_text(receiver.payloads())
    assert "socket layer released everything" in text and re.search(r"\d+ passed, 0 failed\n", text), text


# -------------------------------------------------------- secrets (docs/testing.md section 3.9)
def test_secrets_never_go_over_the_network(consoles, receiver, monkeypatch):
    # The web REPL registers its access token; the mirror is clear text on the network.
    monkeypatch.setattr(netconsole, "_secrets", [])
    secret = "3f9a" * 8
    netconsole.add_secret(secret)
    out, err = consoles()
    netconsole.start(HOST, receiver.port)
    print("webrepl: open http://10.0.2.15:8080/?token=%s" % secret)
    sys.stdout.write("cut " + secret[:7])  # the secret cut across writes ...
    sys.stdout.write(secret[7:] + " here\n")
    sys.stdout.write("y" * (netconsole.PAYLOAD - 10) + secret + "z" * 3000)  # ... and across datagrams
    sys.stderr.write(secret + "\n")
    netconsole.stop()
    got = b"".join(receiver.payloads())
    assert secret.encode("ascii") not in got and secret[:16].encode("ascii") not in got
    assert got.count(netconsole.MASK) == 4
    assert b"webrepl: open http://10.0.2.15:8080/?token=" + netconsole.MASK + b"\n" in got
    assert out.text.count(secret) == 3 and err.text == secret + "\n"  # the local console shows it
