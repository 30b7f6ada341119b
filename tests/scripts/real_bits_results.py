"""BITS's own tests recorded and delivered to the lab, in real BITS (run by
tests/test_results_realbits.py via tools/bitsrun.py).

    real_bits_results.py UPLOAD_TEMPLATE SYSLOG_HOST:PORT NAME...

Mirrors the console to SYSLOG_HOST:PORT as RFC 5424 syslog, runs BITS's tests NAME... (submenus
or tests) through bitsnet.results, PUTs the JUnit XML and BITS's log to UPLOAD_TEMPLATE, and
prints, one per line:
  @@identity KEY=VALUE                 (bitsnet.machineid, each key)
  @@report tests=T passed=P failed=F   (the Report's numbers)
  @@sha NAME SHA256 BYTES              (each body delivered)
"""

from __future__ import print_function

import hashlib
import sys

import bitsnet

bitsnet.install()
from bitsnet import netconsole, results, upload  # noqa: E402


def main(argv):
    template, syslog_target = argv[0], argv[1]
    host, _, port = syslog_target.rpartition(":")
    netconsole.start(host, int(port), seq=True, syslog=True)
    try:
        ident = upload.identity()
        for key in sorted(ident):
            print("@@identity %s=%s" % (key, ident[key]))
        report = results.run_tests(argv[2:])
        print("@@report tests=%d passed=%d failed=%d"
              % (len(report.tests), report.passed, report.failed))
        xml = report.junit_xml(hostname=ident["machine"],
                               properties=sorted(ident.items()))
        for name, ctype in (("junit.xml", "application/xml"),
                            ("bits-log.txt", "text/plain")):
            data = xml if name == "junit.xml" else results.log_text()
            url = upload.expand(template, ident, name=name)
            upload.deliver(url, data, content_type=ctype)
            print("@@sha %s %s %d"
                  % (name, hashlib.sha256(data).hexdigest(), len(data)))
    finally:
        stats = netconsole.stop()
    print("@@syslog sent=%d dropped=%d" % (stats["sent"], stats["dropped"]))


main(sys.argv[1:])
