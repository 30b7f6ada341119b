"""Check JUnit XML files as a CI system would: validate each against Jenkins's JUnit schema
(tests/fixtures/junit/junit-10.xsd, with lxml's XML Schema validator) and read it with
junitparser; print one JSON object with what junitparser read.

    python3 tests/junitcheck.py FILE...

Runs on Python 3 (the pinned junitparser and lxml are in requirements-dev-py3.txt); the tests
call it from either interpreter (``check()``). Exit status 1 with the validator's messages on
stderr when a file is not valid.
"""

from __future__ import print_function

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
XSD = os.path.join(HERE, "fixtures", "junit", "junit-10.xsd")
PY3 = os.path.join(os.path.dirname(HERE), ".venv", "py3", "bin", "python")


def _read(path):
    import junitparser
    from lxml import etree
    schema = etree.XMLSchema(etree.parse(XSD))
    document = etree.parse(path)
    if not schema.validate(document):
        raise SystemExit("%s: not valid against %s:\n%s" % (path, XSD, schema.error_log))
    xml = junitparser.JUnitXml.fromfile(path)
    suites = []
    for suite in xml:
        cases = []
        for case in suite:
            results = [{"kind": type(r).__name__, "type": r.type, "message": r.message, "text": r.text}
                       for r in case.result]
            cases.append({"name": case.name, "classname": case.classname, "time": case.time,
                          "results": results, "system_out": case.system_out})
        suites.append({"name": suite.name, "tests": suite.tests, "failures": suite.failures,
                       "errors": suite.errors, "skipped": suite.skipped, "hostname": suite.hostname,
                       "timestamp": suite.timestamp,
                       "properties": dict((p.name, p.value) for p in suite.properties()), "cases": cases})
    root = document.getroot()
    return {"tests": int(root.get("tests")), "failures": int(root.get("failures")),
            "errors": int(root.get("errors")), "suites": suites}


def check(*paths):
    """What junitparser read from each file (a list of dicts); AssertionError with the reason
    when a file is invalid. Runs this script under Python 3 from either interpreter."""
    python = sys.executable if sys.version_info[0] >= 3 else PY3
    process = subprocess.Popen([python, os.path.abspath(__file__)] + list(paths),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate()
    assert process.returncode == 0, err.decode("utf-8", "replace")
    return json.loads(out.decode("utf-8"))


if __name__ == "__main__":
    print(json.dumps([_read(path) for path in sys.argv[1:]]))
