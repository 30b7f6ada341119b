"""bitsnet.syslog: console lines as RFC 5424 syslog messages (for ``bitsnet.netconsole --syslog``).

One message per line, over UDP (RFC 5426), so rsyslog, journald-remote or Graylog collect a
whole lab's consoles, each machine under its own name::

    <14>1 2026-12-06T01:17:24.123Z 4c4c4544-0042-3510-8052-b4c04f4e3232 bits 20261206T011700Z-3f9a stdout - text
    PRI   TIMESTAMP                HOSTNAME (the machine)               APP-NAME PROCID (the run)  MSGID SD MSG

Contents: ``SyslogFormat`` (``message``, ``room``), ``utc_clock``.

The fields (RFC 5424 section 6):
  PRI        facility * 8 + severity: facility ``user`` (1) by default; severity 6 (info) for
             stdout, 3 (err) for stderr.
  VERSION    1.
  TIMESTAMP  UTC with milliseconds: the real-time clock read once at start (BITS's
             ``time.gmtime()``, whole seconds) plus bitsnet's monotonic clock since then; "-"
             (NILVALUE) where the clock cannot be read.
  HOSTNAME   the machine (``bitsnet.machineid``: SMBIOS UUID, else serial number, else
             product), APP-NAME ``bits``, PROCID this boot's run id, MSGID the stream name:
             printable ASCII only (anything else becomes "_"), cut to the RFC's lengths
             (255, 48, 128, 32); an empty one is "-".
  SD         "-", or ``[meta sequenceId="N"]`` (RFC 5424 section 7.3.1) counting messages from 1
             when sequence numbers are asked for: gaps show losses.
  MSG        the line without its newline, its bytes as they are (RFC 5424's MSG-ANY: UTF-8
             text stays UTF-8). No byte order mark, although section 6.4 asks for one before
             UTF-8 text (MSG-UTF8): rsyslog keeps the BOM as part of the message and writes it
             into its files (tests/test_syslog.py saw it), which is why CPython's
             ``logging.handlers.SysLogHandler`` stopped sending it too.
"""

from __future__ import absolute_import

from bitsnet import clock

FACILITY_USER = 1
SEVERITY_ERR = 3
SEVERITY_INFO = 6
APP_NAME = "bits"
NILVALUE = b"-"
LIMITS = {"hostname": 255, "app_name": 48, "procid": 128, "msgid": 32}  # RFC 5424 section 6.2
SEQUENCE_WRAP = 2147483647  # RFC 5424 section 7.3.1: sequenceId counts 1 .. 2**31-1, then 1 again
_SEVERITY = {"stdout": SEVERITY_INFO, "stderr": SEVERITY_ERR}


def _days_from_civil(year, month, day):
    """Days since 1970-01-01 of a proleptic Gregorian date (BITS's time has no mktime,
    docs/bits-environment.md section 5)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(days):
    """(year, month, day) of a day count since 1970-01-01 (the inverse of the above)."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


def utc_clock():
    """A function giving the UTC time as RFC 5424 TIMESTAMP bytes, or None if there is no
    real-time clock: the clock is read once, then advanced by the monotonic clock."""
    try:
        import time
        now = time.gmtime()
        base = _days_from_civil(now[0], now[1], now[2]) * 86400 + now[3] * 3600 + now[4] * 60 + now[5]
    except Exception:
        return None
    started = clock.monotonic()

    def timestamp():
        millis = int(round((base + clock.monotonic() - started) * 1000))
        seconds, millis = divmod(millis, 1000)
        days, seconds = divmod(seconds, 86400)
        year, month, day = _civil_from_days(days)
        text = "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (year, month, day, seconds // 3600,
                                                      seconds // 60 % 60, seconds % 60, millis)
        return text.encode("ascii")
    return timestamp


def _field(value, limit):
    """A header field: printable US-ASCII (33-126) only, at most ``limit`` long, or "-"."""
    if value is None:
        return NILVALUE
    if not isinstance(value, bytes):
        value = value.encode("utf-8", "replace")
    value = bytes(bytearray(c if 33 <= c <= 126 else 95 for c in bytearray(value)))[:limit]
    return value or NILVALUE


class SyslogFormat(object):
    """Makes the datagrams: ``message(line, stream, number)`` (module docstring)."""

    def __init__(self, hostname=None, app_name=APP_NAME, procid=None, facility=FACILITY_USER, timestamp=None):
        self.hostname = _field(hostname, LIMITS["hostname"])
        self.app_name = _field(app_name, LIMITS["app_name"])
        self.procid = _field(procid, LIMITS["procid"])
        self.facility = int(facility)
        self.timestamp = timestamp if timestamp is not None else utc_clock()

    def room(self):
        """Bytes a message's header takes at most: the rest of a datagram is the line's."""
        # PRI VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID SP SD SP, fields empty
        longest = b"<191>1 2026-12-06T01:17:24.123Z    stderr [meta sequenceId=\"2147483647\"] "
        return len(longest) + len(self.hostname) + len(self.app_name) + len(self.procid)

    def message(self, line, stream="stdout", number=None):
        """The datagram for one console line (bytes, its newline included or not)."""
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        pri = self.facility * 8 + _SEVERITY.get(stream, SEVERITY_INFO)
        stamp = self.timestamp() if self.timestamp is not None else NILVALUE
        sd = NILVALUE
        if number is not None:
            sd = ('[meta sequenceId="%d"]' % (number % SEQUENCE_WRAP + 1)).encode("ascii")
        header = b" ".join([("<%d>1" % pri).encode("ascii"), stamp, self.hostname, self.app_name, self.procid,
                            _field(stream, LIMITS["msgid"]), sd])
        if not line:
            return header
        return header + b" " + line
