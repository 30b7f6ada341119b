"""bitsnet.junit: a ``bitsnet.results.Report`` as JUnit XML, written by hand.

BITS has no ``xml`` package and no ``pyexpat`` (docs/bits-environment.md section 2.2), so the
document is built as text: every value goes through ``xml_text``, which escapes markup and
replaces the characters XML 1.0 forbids (console output carries escape sequences and, now and
then, a NUL). The shape is what Jenkins's JUnit schema (tests/fixtures/junit/junit-10.xsd)
accepts and what Jenkins, GitLab and Azure Pipelines read; docs/lab.md section 2 says how a
BITS test maps onto it:

    <testsuites name="BITS" tests= failures= errors= time=>
      <testsuite name=SUBMENU tests= failures= errors= skipped="0" time= timestamp= hostname=>
        <properties> given pairs, then bits.passed / bits.failed: the suite's assert counts
        <testcase name=TEST classname=SUBMENU time=>
          <failure type="assert" message="M of N asserts failed">[assert] ... FAIL lines
          <error type=EXCEPTION message=its last line>the failed asserts, the traceback
          <system-out>what the test printed

Contents: ``build``, ``xml_text``.
"""

from __future__ import absolute_import

import re

from bitsnet.results import as_text

PASSED_PROPERTY = "bits.passed"
FAILED_PROPERTY = "bits.failed"

# XML 1.0 allows tab, LF, CR and code points from U+0020 except surrogates, U+FFFE, U+FFFF;
# surrogates are matched only when unpaired (a narrow build like BITS's stores a character
# beyond U+FFFF as a pair).
_XML_FORBIDDEN = re.compile(
    u"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]"
    u"|[\ud800-\udbff](?![\udc00-\udfff])"
    u"|(?<![\ud800-\udbff])[\udc00-\udfff]")


def _replacement(match):
    code = ord(match.group(0))
    return u"\\x%02x" % code if code < 0x100 else u"\\u%04x" % code


def xml_text(value, attribute=False):
    """``value`` (text or UTF-8 bytes) as XML character data: & < > escaped (and " and the
    white-space characters in an attribute, which a parser would otherwise normalize), and
    each character XML 1.0 forbids written as a visible \\xNN / \\uNNNN escape."""
    text = _XML_FORBIDDEN.sub(_replacement, as_text(value))
    text = text.replace(u"&", u"&amp;").replace(u"<", u"&lt;").replace(u">", u"&gt;")
    if attribute:
        text = text.replace(u'"', u"&quot;").replace(u"\n", u"&#10;").replace(u"\r", u"&#13;")
        text = text.replace(u"\t", u"&#9;")
    else:
        text = text.replace(u"\r", u"&#13;")  # a parser would turn CR LF into LF
    return text


def _seconds(value):
    return "%.3f" % max(0.0, value)  # BITS quirk: fixed notation only (docs/bits-environment.md section 10)


def _tag(name, attributes):
    """``<name a="v" ...`` (not closed): attributes whose value is None are left out."""
    text = [u"<", name]
    for key, value in attributes:
        if value is not None:
            text.extend([u" ", key, u'="', xml_text(value, True), u'"'])
    return u"".join(text)


def _open(out, indent, name, attributes):
    out.append(u" " * indent + _tag(name, attributes) + u">\n")


def _element(out, indent, name, attributes, body=None):
    """Append ``<name a="v"...>body</name>`` (``<name .../>`` without a body) to ``out``."""
    if body is None:
        out.append(u" " * indent + _tag(name, attributes) + u"/>\n")
    else:
        out.append(u"%s%s>%s</%s>\n" % (u" " * indent, _tag(name, attributes), xml_text(body), name))


def _failed_lines(record):
    return [u"[assert] %s FAIL" % as_text(d) for d in record.assert_failures]


def _exception_line(record):
    """(type, message) from a traceback text: its last line, "Type: message"."""
    lines = [line for line in as_text(record.exception).split(u"\n") if line.strip()]
    last = lines[-1] if lines else u"exception"
    name = last.split(u":", 1)[0].strip()
    return (name if name and u" " not in name else u"exception"), last


def _testcase(out, record):
    _open(out, 4, u"testcase", [(u"name", record.name), (u"classname", record.suite),
                                (u"time", _seconds(record.seconds))])
    status = record.status
    failed = _failed_lines(record)
    if status == u"failure":
        message = u"%d of %d asserts failed" % (record.failed, record.passed + record.failed)
        _element(out, 6, u"failure", [(u"type", u"assert"), (u"message", message)], u"\n".join(failed))
    elif status == u"error":
        if record.exception is not None:
            kind, message = _exception_line(record)
            body = u"\n".join(failed + [as_text(record.exception).rstrip(u"\n")])
        else:
            kind, message = u"interrupted", u"the test did not finish (the run was interrupted)"
            body = u"\n".join(failed)
        _element(out, 6, u"error", [(u"type", kind), (u"message", message)], body)
    output = record.output
    if output or record.dropped:
        if record.dropped:
            output = output + [u"[%d more bytes of output not kept]" % record.dropped]
        _element(out, 6, u"system-out", [], u"\n".join(output) + u"\n")
    out.append(u"    </testcase>\n")


def _counts(records):
    statuses = [r.status for r in records]
    return len(records), statuses.count("failure"), statuses.count("error")


def build(report, hostname=None, properties=()):
    """The JUnit XML document of ``report`` (bytes, UTF-8); see the module docstring."""
    out = [u'<?xml version="1.0" encoding="UTF-8"?>\n']
    tests, failures, errors = _counts(report.tests)
    _open(out, 0, u"testsuites", [(u"name", u"BITS"), (u"tests", str(tests)), (u"failures", str(failures)),
                                  (u"errors", str(errors)), (u"time", _seconds(report.seconds))])
    for name, records in report.suites():
        tests, failures, errors = _counts(records)
        _open(out, 2, u"testsuite", [
            (u"name", name), (u"tests", str(tests)), (u"failures", str(failures)), (u"errors", str(errors)),
            (u"skipped", u"0"), (u"time", _seconds(sum(r.seconds for r in records))),
            (u"timestamp", report.started), (u"hostname", hostname)])
        out.append(u"    <properties>\n")
        pairs = list(properties) + [(PASSED_PROPERTY, sum(r.passed for r in records)),
                                    (FAILED_PROPERTY, sum(r.failed for r in records))]
        for key, value in pairs:
            _element(out, 6, u"property", [(u"name", as_text(key)), (u"value", as_text(value))])
        out.append(u"    </properties>\n")
        for record in records:
            _testcase(out, record)
        out.append(u"  </testsuite>\n")
    out.append(u"</testsuites>\n")
    return u"".join(out).encode("utf-8")
