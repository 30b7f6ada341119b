"""bitsnet.syslog and ``bitsnet.netconsole --syslog``: the console as RFC 5424 messages.

At the boot prompt (tools/efirun.py, bitsnet installed, BITS's smbios played by
tests/fixtures/bits_fake) a program runs under ``python -m bitsnet.netconsole --syslog --seq``
and a real rsyslogd on loopback (started by the test with a generated configuration: imudp on
a test port, a template writing HOSTNAME, APP-NAME, PROCID, MSGID, severity, STRUCTURED-DATA
and MSG to a file) collects the console: one message per line, the SMBIOS UUID as HOSTNAME,
``bits`` as APP-NAME, the run id as PROCID, stdout and stderr told apart, sequence numbers
without a gap, non-ASCII text intact, a long line in pieces. In this process: the message
format, the calendar arithmetic BITS's time module lacks, the header fields' limits.
"""

from __future__ import print_function

import datetime
import os
import re
import time

import pytest

import labservers
import processes
from bitsnet import syslog
from conftest import STATION_ARGS, port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAKE = os.path.join(HERE, "fixtures", "bits_fake")
RUN_TIMEOUT = 60.0
UUID = "4c4c4544-0042-3510-8052-b4c04f4e3232"
LONG = 2500  # characters in the long line: three datagrams

PROGRAM = u'''
from __future__ import print_function
import sys
print("first line")
sys.stderr.write("an error line\\n")
print("")
text = u"caf\\u00e9 \\u20ac \\u4e2d\\u6587"
print(text if sys.version_info[0] > 2 else text.encode("utf-8"))
print("tab\\there <b>&amp;</b> [brackets] \\\\ backslash")
print("x" * %d)
sys.stdout.write("last line, no newline")
'''


def expected_lines():
    return [("stdout", u"first line"), ("stderr", u"an error line"), ("stdout", u""),
            ("stdout", u"caf\u00e9 \u20ac \u4e2d\u6587"), ("stdout", u"tab\there <b>&amp;</b> [brackets] \\ backslash"),
            ("stdout", u"x" * LONG), ("stdout", u"last line, no newline")]


@pytest.fixture
def rsyslog(tmpdir):
    server = labservers.Rsyslog(str(tmpdir.mkdir("rsyslog")), port(5))
    yield server
    server.stop()


def test_rsyslogd_collects_the_console(tmpdir, rsyslog):
    tmpdir.join("syslog_program.py").write_text(PROGRAM % LONG, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, str(tmpdir)]), PYTHONIOENCODING="utf-8",
               BITSFAKE_UUID=UUID)
    command = ["--ledger"] + STATION_ARGS + ["-m", "bitsnet.netconsole", "--syslog", "--seq",
                                             "127.0.0.1:%d" % rsyslog.port, "--", "syslog_program"]
    status, out, err = processes.run_efirun(command, RUN_TIMEOUT, cwd=ROOT, env=env)
    assert status == 0, out.decode("utf-8", "replace") + err
    assert not any(processes.ledger(err).values()), err
    assert "datagrams sent" not in err  # nothing dropped
    messages = wait_for(rsyslog, "bits", count=11)
    assert set(m["hostname"] for m in messages) == {UUID}  # the machine, by its SMBIOS UUID
    assert len(set(m["procid"] for m in messages)) == 1
    assert re.match(r"^\d{8}T\d{6}Z-[0-9a-f]{4}$", messages[0]["procid"])  # the run id
    numbers = [int(re.match(r'^\[meta sequenceId="(\d+)"\]$', m["sd"]).group(1)) for m in messages]
    assert numbers == list(range(1, len(messages) + 1))  # none lost, in order
    assert [(m["msgid"], m["severity"]) for m in messages if m["msgid"] == "stderr"] == [("stderr", "3")]
    assert set(m["severity"] for m in messages if m["msgid"] == "stdout") == {"6"}
    got = [(m["msgid"], m["msg"]) for m in messages]
    # bitsnet's own DHCP line and the netconsole's banner come first (they are console lines too)
    assert got[0][1].startswith("bitsnet: DHCP on eth0") and got[1][1].startswith("netconsole: mirroring")
    got = got[2:]
    pieces = [g for g in got if g[1].startswith("x")]
    assert len(pieces) == 3 and u"".join(p[1] for p in pieces) == u"x" * LONG  # cut, nothing lost
    joined = [g for g in got if not g[1].startswith("x")]
    joined.insert(5, ("stdout", u"x" * LONG))
    assert joined == expected_lines()


def wait_for(server, app_name, count, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        messages = server.messages(app_name, wait=0.1)
        if len(messages) >= count or time.time() > deadline:
            return messages


# --------------------------------------------------------------------------- in this process
def test_message_format():
    form = syslog.SyslogFormat(u"rack 3/slot\u00e97", "bits", "20261206T011724Z-3f9a",
                               timestamp=lambda: b"2026-12-06T01:17:24.123Z")
    assert form.message(b"hello\n", "stdout", 0) == (
        b'<14>1 2026-12-06T01:17:24.123Z rack_3/slot__7 bits 20261206T011724Z-3f9a stdout '
        b'[meta sequenceId="1"] hello')
    assert form.message(b"oops\r\n", "stderr") == (
        b"<11>1 2026-12-06T01:17:24.123Z rack_3/slot__7 bits 20261206T011724Z-3f9a stderr - oops")
    assert form.message(b"\n").endswith(b" stdout -")  # an empty line: no MSG
    assert form.message(u"caf\u00e9".encode("utf-8")).endswith(b" - caf\xc3\xa9")  # no BOM (bitsnet/syslog.py)
    assert form.message(b"\xff\xfe raw").endswith(b" - \xff\xfe raw")  # not UTF-8: as it is too
    assert form.message(b"x", number=syslog.SEQUENCE_WRAP).endswith(b'[meta sequenceId="1"] x')
    longest = syslog.SyslogFormat("h" * 300, "a" * 60, "p" * 200, facility=23)
    header = longest.message(b"\n", "stderr", syslog.SEQUENCE_WRAP - 1)
    assert header.split(b" ")[2:5] == [b"h" * 255, b"a" * 48, b"p" * 128]  # RFC 5424 section 6.2 limits
    assert len(header) + 1 <= longest.room()
    nil = syslog.SyslogFormat(None, "", None, timestamp=None)
    nil.timestamp = None
    assert nil.message(b"m") == b"<14>1 - - - - stdout - m"


def test_timestamps_are_utc_with_milliseconds():
    stamp = syslog.utc_clock()().decode("ascii")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", stamp)
    now = datetime.datetime.utcnow()
    then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    assert abs((now - then).total_seconds()) < 2


@pytest.mark.parametrize("days", [0, 1, 58, 59, 60, 365, 10956, 11016, 20000, 20428, 47482, -1, -719162])
def test_calendar_arithmetic(days):
    date = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    assert syslog._civil_from_days(days) == (date.year, date.month, date.day)
    assert syslog._days_from_civil(date.year, date.month, date.day) == days


def test_every_day_of_four_centuries_round_trips():
    start = syslog._days_from_civil(1900, 1, 1)
    for days in range(start, start + 146097, 7):
        assert syslog._days_from_civil(*syslog._civil_from_days(days)) == days
