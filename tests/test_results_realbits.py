"""BITS's own tests recorded and delivered, in real BITS: BITS 2079 on Debian's OVMF under QEMU
(tools/bitsrun.py), bitsnet installed.

One boot runs tests/scripts/real_bits_results.py: the console mirrored as RFC 5424 syslog to a
real rsyslogd, BITS's "ACPI Tests" and "EFI Tests" submenus and two top-menu tests run through
``bitsnet.results``, the JUnit XML and BITS's log PUT to Debian's nginx (WebDAV), under the
machine's SMBIOS UUID (QEMU's ``-uuid``, tools/qemu_vm.py) -- both servers started in the
run's network namespace (10.0.2.2 to the guest) with generated configurations. The host checks
that the XML is valid against Jenkins's schema, that junitparser reads it, that its numbers are
the console's ``Overall summary`` and each test's ``Summary:`` line, that the log arrived whole
and holds that summary, and that rsyslogd got the console under the machine's UUID.

Marker ``realbits``; skipped, with the reason, where QEMU, OVMF, namespaces or the BITS image
are missing.
"""

from __future__ import print_function

import hashlib
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bitsrun  # noqa: E402
import junitcheck  # noqa: E402
import labservers  # noqa: E402
import qemu_vm  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "scripts", "real_bits_results.py")
SELECTION = ["ACPI Tests", "EFI Tests", "SMRR configuration", "MP Table"]
UPLOAD_PORT = 8090  # in the run's own namespace: nothing else listens there
SYSLOG_PORT = 5514
BOOT_TIMEOUT = 400
SUMMARY = re.compile(r"^Summary: (\d+) passed, (\d+) failed$")
OVERALL = re.compile(r"^==== Overall summary: (\d+) passed, (\d+) failed ====$")
HEADING = re.compile(r"^(?:----|====) (.*) (?:----|====)$")

REASON = bitsrun.unavailable(install=os.environ.get("FWTEST_INSTALL") == "1")
pytestmark = [pytest.mark.realbits, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def _servers_in_namespace(directory):
    """setup(): nginx and rsyslogd in the run's namespace; their pids go to files, for the test
    to stop them after the boot (setup runs in the namespace's process, which then exits)."""
    def setup():
        labservers.start_in_namespace(directory, UPLOAD_PORT, SYSLOG_PORT)
        return {"upload": "http://%s:%d/lab/{uuid}/{run}/{name}" % (qemu_vm.GUEST_HOST, UPLOAD_PORT),
                "syslog": "%s:%d" % (qemu_vm.GUEST_HOST, SYSLOG_PORT)}
    return setup


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("realbits-lab"))
    for sub in ("nginx", "rsyslog"):
        os.makedirs(os.path.join(directory, sub))
    assert qemu_vm.ensure_packages(["nginx", "rsyslog"], install=os.geteuid() == 0, tool="test")
    try:
        result = bitsrun.run(script=SCRIPT, args=["{upload}", "{syslog}"] + SELECTION,
                             setup=_servers_in_namespace(directory), timeout=BOOT_TIMEOUT)
    finally:
        labservers.stop_started(directory)  # the servers setup() started
    print("\n".join(result.output))
    return result, directory


def test_bits_results_reach_the_lab(lab_run):
    result, directory = lab_run
    assert result.status == 0, result.text()
    lines = result.output
    ident = dict(x[len("@@identity "):].split("=", 1) for x in lines if x.startswith("@@identity "))
    assert ident["uuid"] == ident["machine"] == qemu_vm.MACHINE_UUID
    assert ident["serial"] == qemu_vm.MACHINE_SERIAL and ident["product"].startswith("Standard PC")
    report = [x for x in lines if x.startswith("@@report ")]
    numbers = dict(kv.split("=") for kv in report[0].split()[1:])
    overall = [OVERALL.match(x).groups() for x in lines if OVERALL.match(x)]
    assert overall == [(numbers["passed"], numbers["failed"])]  # the Report is the console's summary
    summaries = []
    heading = None
    for line in lines:
        if HEADING.match(line) and not OVERALL.match(line):
            heading = HEADING.match(line).group(1)
        elif SUMMARY.match(line):
            summaries.append((heading, int(SUMMARY.match(line).group(1)), int(SUMMARY.match(line).group(2))))
    folder = os.path.join(directory, "nginx", "www", "lab", ident["uuid"], ident["run"])
    shas = dict((x.split()[1], x.split()[2:]) for x in lines if x.startswith("@@sha "))
    for name in ("junit.xml", "bits-log.txt"):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        assert [hashlib.sha256(data).hexdigest(), str(len(data))] == shas[name], name  # arrived whole
    checked = junitcheck.check(os.path.join(folder, "junit.xml"))[0]
    suites = checked["suites"]
    assert [s["name"] for s in suites] == ["ACPI Tests", "EFI Tests", "BITS"]
    cases = [(c["name"], c) for s in suites for c in s["cases"]]
    assert [name for name, _ in cases] == [h for h, _, _ in summaries]
    assert int(numbers["tests"]) == checked["tests"] == len(summaries)
    assert (sum(int(s["properties"]["bits.passed"]) for s in suites),
            sum(int(s["properties"]["bits.failed"]) for s in suites)) == tuple(int(n) for n in overall[0])
    for (name, case), (_, passed, failed) in zip(cases, summaries):
        kinds = [r["kind"] for r in case["results"]]
        assert kinds == ([] if not failed else ["Failure"] if "Error" not in kinds else ["Error"]), name
        if kinds == ["Failure"]:
            assert case["results"][0]["message"] == "%d of %d asserts failed" % (failed, passed + failed)
    assert all(s["hostname"] == qemu_vm.MACHINE_UUID for s in suites)
    with open(os.path.join(folder, "bits-log.txt"), "rb") as f:
        log = f.read().decode("utf-8", "replace")
    assert log.startswith("BIOS Implementation Test Suite (BITS)")
    assert "==== Overall summary: %s passed, %s failed ====" % overall[0] in log


def test_the_console_reached_rsyslogd_under_the_machines_uuid(lab_run):
    result, directory = lab_run
    sent = [x for x in result.output if x.startswith("@@syslog ")]
    assert sent and sent[0].endswith(" dropped=0"), sent
    path = os.path.join(directory, "rsyslog", "messages.log")
    with open(path, "rb") as f:
        rows = [x.split("\t", 6) for x in f.read().decode("utf-8", "replace").splitlines()]
    mine = [r for r in rows if len(r) == 7 and r[1] == "bits"]
    assert mine and set(r[0] for r in mine) == {qemu_vm.MACHINE_UUID}
    texts = [r[6] for r in mine]
    overall = [x for x in result.output if OVERALL.match(x)]
    assert overall[0] in texts
    numbers = [int(re.match(r'^\[meta sequenceId="(\d+)"\]$', r[5]).group(1)) for r in mine]
    assert numbers == list(range(1, len(numbers) + 1))  # none lost between BITS and rsyslogd
