"""Unattended runs (bitsnet.lab, bitsnet.watchdog) on the simulator, against a lab on loopback: a
plan fetched over the simulated firmware, BITS's (stand-in) test suite and programs from the lab
run under time limits, the JUnit XML and BITS's log PUT back, the console mirrored over UDP; the
lab going down mid-run, a plan that cannot be fetched, the boot hook. BITS's modules are the
stand-ins of tests/fixtures/bits_fake. Plan parsing is checked on the host."""

from __future__ import print_function

import os
import re
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ElementTree

import pytest

import conftest
import peers
from bitsnet import lab, launch

ROOT = conftest.ROOT
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
BITS_FAKE = os.path.join(ROOT, "tests", "fixtures", "bits_fake")
FAKE_UUID = "4c4c4544-0042-3510-8052-b4c04f4e3232"  # bits_fake/smbios.py's default

DRIVER = """\
import sys, time
import redirect
redirect.redirect()
import fake_tests, testsuite
fake_tests.register()
testsuite.add_test("Sleeps too long", lambda: time.sleep(60), submenu="Fake Hang")
testsuite.add_test("After the hang", lambda: testsuite.test("still run", True), submenu="Fake Hang")
from bitsnet import lab, remote
lab.PLAN_RETRY = 0.1
remote.FETCH_TIMEOUT = lab.UPLOAD_TIMEOUT = 3.0  # a lab that went down may leave connections hanging
if sys.argv[1] == "boot":
    lab.boot()
    print("@@after boot")
else:
    status, end = lab.run(sys.argv[1])
    print("@@status %d %s" % (status, end))
    lab.end(end)
"""

PLAN = """\
# the simulator's lab plan
timeout 30
console 127.0.0.1:{udp}
tests "Fake ACPI Tests" "Odd output"
run scripts/ok.py one "two words"
run scripts/missing.py
timeout 2
run scripts/hang.py
timeout 30
test-timeout 2
tests "Fake Hang"
rn typo
tests "No such menu"
upload junit results/{{machine}}/{{run}}/junit.xml
upload log results/{{machine}}/{{run}}/{{name}}
end halt
"""
SCRIPTS = {"scripts/ok.py": b"import sys\nprint('ok.py says %r' % (sys.argv[1:],))\n",
           "scripts/hang.py": b"while True:\n    pass\n"}


class LabPeer(peers.ServerPeer):
    """The lab: GET serves ``files`` ({path: bytes}), PUT stores into ``uploads`` (and, with
    ``store``, into that directory as well: a peer in another process, bitsrun's namespace,
    hands its uploads back that way); with ``down_after`` the server closes for good once that
    path has been requested (a lab that goes down mid-run: later connections are refused)."""

    def __init__(self, files, down_after=None, port=0, store=None):
        lab_peer = self
        self.files, self.uploads, self.down_after, self.store = dict(files), {}, down_after, store

        class Handler(peers.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):
                path = self.path.lstrip("/")
                if path not in lab_peer.files:
                    return self._answer(404, b"no such file\n")
                if path == lab_peer.down_after:
                    lab_peer.stop_now()  # before the answer: no later connection can still get in
                self._answer(200, lab_peer.files[path])

            def do_PUT(self):
                path = self.path.lstrip("/")
                lab_peer.uploads[path] = data = self.rfile.read(int(self.headers["Content-Length"]))
                if lab_peer.store is not None:
                    target = os.path.join(lab_peer.store, path)
                    if not os.path.isdir(os.path.dirname(target)):
                        os.makedirs(os.path.dirname(target))
                    with open(target, "wb") as handle:
                        handle.write(data)
                self._answer(201, b"")

            def _answer(self, code, body):
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        peers.ServerPeer.__init__(self, peers.QuietHTTPServer((peers.HOST, port), Handler))
        self.stopped = False

    def stop_now(self):
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            raw = getattr(self.server.socket, "_sock", None)  # 2.7: close() only drops a reference
            self.server.server_close()
            if raw is not None:
                raw.close()  # the listening socket itself: later connections are refused

    def __exit__(self, *exc):
        if not self.stopped:
            peers.ServerPeer.__exit__(self, *exc)

    def url(self, path=""):
        return "http://%s:%d/%s" % (peers.HOST, self.port, path)


def run_sim(argument, env=None, timeout=120):
    """DRIVER in tools/efirun.py (BITS's Python, bits_fake on the path); (status, output)."""
    command = [sys.executable, EFIRUN, "--ledger"] + conftest.STATION_ARGS + ["-c", DRIVER, argument]
    environment = dict(os.environ, PYTHONPATH=BITS_FAKE, **(env or {}))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT,
                            universal_newlines=True, env=environment)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        out = proc.communicate()[0]
    finally:
        timer.cancel()
    assert proc.returncode is not None and proc.returncode >= 0, "efirun killed:\n" + out
    ledger = [line for line in out.splitlines() if line.startswith("efirun ledger:")]
    assert ledger and not [i for i in ledger[-1].split()[2:] if not i.endswith("=0")], out
    return proc.returncode, out


def lab_lines(out):
    return [line for line in out.splitlines() if line.startswith("lab: ")]


def cases(suite):
    return dict((case.get("name"), case) for case in suite.findall("testcase"))


def test_a_plan_runs_every_step_and_delivers_junit_and_log():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind((peers.HOST, 0))
    receiver.settimeout(0.2)
    files = dict(SCRIPTS, **{"plan.txt": PLAN.format(udp=receiver.getsockname()[1]).encode("ascii")})
    with LabPeer(files) as peer:
        status, out = run_sim(peer.url("plan.txt"))
    mirrored = []
    try:
        while True:
            mirrored.append(receiver.recv(2000).decode("utf-8", "replace"))
    except socket.timeout:
        receiver.close()
    lines = lab_lines(out)
    assert status == 0 and "@@status 1 halt" in out, out
    assert "lab: plan %s: line 12: unknown directive 'rn' (known: timeout, test-timeout, console, tests, run, " \
           "upload, retries, end)" % peer.url("plan.txt") in lines, out
    steps = [line for line in lines if re.match(r"lab: step \d/6: ", line)]
    assert [line.split(" in ")[0] for line in steps] == [
        "lab: step 1/6: FAILED", "lab: step 2/6: done", "lab: step 3/6: FAILED", "lab: step 4/6: FAILED",
        "lab: step 5/6: FAILED", "lab: step 6/6: FAILED"], out
    assert steps[2].endswith(": FetchError: %s: HTTP 404 Not Found" % peer.url("scripts/missing.py")), out
    assert "TimeLimit: step 4 (line 8) ran past its time limit of 2 s" in steps[3], out
    assert steps[4].endswith(": 1 of 2 tests failed"), out  # the test cut short; the one after it ran
    assert "LookupError: no BITS test or submenu named 'No such menu'" in steps[5], out
    seconds = [float(re.search(r" in ([0-9.]+) s", line).group(1)) for line in steps[3:5]]
    assert all(2.0 <= s < 6.0 for s in seconds), steps  # the limit, plus at most a few ticks
    assert lines[-2:] == ["lab: end: halt", "lab: halt failed (AttributeError: 'NoneType' object has no attribute "
                          "'contents'); staying at the prompt"], out  # the simulator has no runtime services

    # What reached the lab: under the SMBIOS UUID and this boot's run id.
    assert sorted(peer.uploads) and all(path.startswith("results/%s/" % FAKE_UUID) for path in peer.uploads)
    junit_path = [p for p in peer.uploads if p.endswith("/junit.xml")][0]
    log = peer.uploads.get(junit_path.replace("junit.xml", "bits-log.txt"), b"").decode("utf-8")
    root = ElementTree.fromstring(peer.uploads[junit_path])
    suites = dict((suite.get("name"), suite) for suite in root.findall("testsuite"))
    assert sorted(suites) == ["BITS", "Fake ACPI Tests", "Fake Hang", "plan"]
    # BITS's own numbers: the properties add up to the Overall summary lines on the console.
    overall = [tuple(map(int, m)) for m in re.findall(r"==== Overall summary: (\d+) passed, (\d+) failed ====", out)]
    properties = [dict((p.get("name"), p.get("value")) for p in s.iter("property")) for s in suites.values()]
    assert sum(int(p["bits.passed"]) for p in properties) == sum(n for n, _ in overall) == 5
    assert sum(int(p["bits.failed"]) for p in properties) == sum(m for _, m in overall) == 2
    assert properties[0]["machine.uuid"] == FAKE_UUID and properties[0]["plan"] == peer.url("plan.txt")
    plan_cases = cases(suites["plan"])
    assert plan_cases['run scripts/ok.py one "two words"'].find("error") is None
    assert "ok.py says ['one', 'two words']" in plan_cases['run scripts/ok.py one "two words"'].find("system-out").text
    assert plan_cases["run scripts/missing.py"].find("error").get("type").endswith("FetchError")
    assert plan_cases["run scripts/hang.py"].find("error").get("type").endswith("TimeLimit")
    assert plan_cases['tests "No such menu"'].find("error").get("type") == "LookupError"
    assert "line 12: unknown directive" in plan_cases["plan syntax"].find("error").text
    assert cases(suites["Fake Hang"])["Sleeps too long"].find("error").get("type").endswith("TestTimeLimit")
    assert cases(suites["Fake Hang"])["After the hang"].find("error") is None
    assert int(root.get("tests")) == sum(len(s.findall("testcase")) for s in suites.values()) == 10
    # The log: BITS's from its start (the stand-in's banner), the tests' text, the runner's lines.
    assert log.startswith("BIOS Implementation Test Suite (BITS)\n"), out
    assert "==== Overall summary: 4 passed, 2 failed ====" in log and "lab: delivered junit: " in log
    # The mirror: the runner's lines and BITS's test output reached the UDP receiver.
    assert "lab: step 1/6 (line 4): tests \"Fake ACPI Tests\" \"Odd output\" (limit 30 s)\n" in mirrored, mirrored[:20]
    assert "[assert] FADT revision >= 5 FAIL\n" in mirrored


def test_lab_down_mid_run_every_result_is_reported_in_one_line():
    plan = b"retries 1\nconsole off\nrun scripts/ok.py\nupload junit r/junit.xml\nupload log r/log.txt\nend prompt\n"
    with LabPeer(dict(SCRIPTS, **{"plan.txt": plan}), down_after="plan.txt") as peer:
        status, out = run_sim(peer.url("plan.txt"))
    lines = lab_lines(out)
    assert "@@status 1 prompt" in out, out
    assert [line for line in lines if line.startswith("lab: step 1/1: FAILED")], out
    lost = [line for line in lines if line.startswith("lab: NOT DELIVERED: ")]
    assert len(lost) == 2, out
    assert lost[0].startswith("lab: NOT DELIVERED: upload: junit.xml (")
    assert "PUT %s" % peer.url("r/junit.xml") in lost[0], out
    assert lost[1].startswith("lab: NOT DELIVERED: upload: bits-log.txt (") and "(2 attempts)" in lost[1], out
    assert "refused" in lost[1].lower() or "timed out" in lost[1], out
    assert "lab: plan done: 1 steps, 3 problems, 0 of 2 uploads delivered; end: prompt" in lines, out
    assert "lab: end:" not in out and "Traceback" not in out, out


def test_a_plan_that_cannot_be_fetched_is_one_line_and_the_boot_goes_on():
    url = "http://127.0.0.1:%d/plan.txt" % peers.closed_port()
    status, out = run_sim("boot", env={"BITSNET_LAB": url})
    lines = lab_lines(out)
    assert status == 0 and "@@after boot" in out, out
    assert len([line for line in lines if line.startswith("lab: plan not fetched (")]) == lab.PLAN_ATTEMPTS - 1
    assert lines[-1].startswith("lab: plan not fetched: %s: " % url), out
    assert lines[-1].endswith("; nothing run, nothing uploaded") and "Traceback" not in out, out


def test_the_boot_hook_takes_host_and_port_and_ends_as_the_plan_says():
    plan = (b"console off\ntests \"Fake ACPI Tests\"\nrun -m no_such_module_lab\n"
            b"upload junit {machine}.xml\nend reboot\n")
    with LabPeer({"plan.txt": plan}) as peer:
        status, out = run_sim("boot", env={"BITSNET_LAB": "127.0.0.1:%d" % peer.port})
    lines = lab_lines(out)
    assert lines[0].startswith("lab: machine %s, run " % FAKE_UUID) and lines[0].endswith(
        "plan %s" % peer.url("plan.txt")), out
    assert list(peer.uploads) == ["%s.xml" % FAKE_UUID], out
    assert "python: No module named no_such_module_lab" in out, out
    assert [line for line in lines if line.startswith("lab: step 2/2: FAILED") and line.endswith(": exit status 1")]
    assert "lab: end: reboot" in lines and "@@after boot" in out, out


# ----------------------------------------------------------------------------- on the host
def test_plan_parsing_reports_every_wrong_line_by_number_and_keeps_the_rest():
    plan = lab.parse(b"# comment only\n\ntimeout 10\ntests 'ACPI Tests' SMBIOS   # two names\n"
                     b"run http://lab/x.py --flag 'a b'\ntimeout nope\nupload junit\nupload pdf x\n"
                     b"run\nend sleep\nend halt\nend reboot\ntests \"unclosed\nconsole syslog lab:99999\n"
                     b"timeout 0\nrun -m bitsnet.selftest --peer lab\nretries 2\nfrobnicate\ntest-timeout 5\ntests\n")
    assert [(s.kind, s.args, s.timeout, s.line) for s in plan.steps] == [
        ("tests", ["ACPI Tests", "SMBIOS"], 10.0, 4), ("run", ["http://lab/x.py", "--flag", "a b"], 10.0, 5),
        ("run", ["-m", "bitsnet.selftest", "--peer", "lab"], 0.0, 16), ("tests", [], 0.0, 20)]
    assert [s.test_timeout for s in plan.steps] == [0.0, 0.0, 0.0, 5.0]
    assert plan.end == "halt" and plan.retries == 2 and plan.console == "default" and plan.uploads == []
    assert [str(e) for e in plan.errors] == [
        "line 6: timeout needs one number of seconds (0: no limit)",
        "line 7: upload needs what (junit or log) and one URL",
        "line 8: upload needs what (junit or log) and one URL",
        "line 9: run needs a program URL (or -m MODULE) and its arguments",
        "line 10: end needs one of halt, reboot, prompt",
        "line 12: a second end line (the first is line 11)",
        "line 13: no closing quotation",
        "line 14: console: 'lab:99999' is not HOST[:PORT]",
        "line 18: unknown directive 'frobnicate' (known: timeout, test-timeout, console, tests, run, upload, "
        "retries, end)"]
    assert lab.parse("console syslog 10.0.0.1\n").console == ("syslog", "10.0.0.1", 514)
    assert lab.parse("console off\nupload log x/{name}\n").console is None
    assert [str(e) for e in lab.parse("upload junit r/{uuid}/{host}.xml\n").errors] == [
        "line 1: upload: unknown placeholder {host} (known: {uuid}, {serial}, {product}, {machine}, {run}, {name})"]


def test_plan_url_from_bitsnet_lab():
    ident = {"uuid": "u-1", "serial": "S 2", "product": "P", "machine": "u-1", "run": "r"}
    assert lab.plan_url("10.0.2.2") == "http://10.0.2.2:8080/plan.txt"
    assert lab.plan_url("lab.example:81") == "http://lab.example:81/plan.txt"
    assert lab.plan_url("http://lab:9/") == "http://lab:9/plan.txt"
    assert lab.plan_url("https://lab/plans/{serial}.txt", ident) == "https://lab/plans/S%202.txt"
    for bad in ("", "lab/x", "lab:http"):
        with pytest.raises(ValueError):
            lab.plan_url(bad)


def test_register_grub_commands_runs_the_plan_only_with_bitsnet_lab(monkeypatch):
    import types
    fake_bits = types.ModuleType("bits")
    fake_bits.register_grub_command = lambda *args: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bits", fake_bits)
    runs = []
    monkeypatch.setattr(lab, "boot", lambda: runs.append(os.environ.get("BITSNET_LAB")))
    monkeypatch.delenv("BITSNET_LAB", raising=False)
    monkeypatch.setitem(launch._state, "registered", False)
    launch.register_grub_commands()
    assert runs == []
    monkeypatch.setenv("BITSNET_LAB", "10.0.2.2:8080")
    monkeypatch.setitem(launch._state, "registered", False)
    launch.register_grub_commands()
    launch.register_grub_commands()
    assert runs == ["10.0.2.2:8080"]


def test_a_page_that_is_no_plan_lists_twenty_errors_and_counts_the_rest(capsys):
    plan = lab.parse("\n".join("<p>line %d</p>" % i for i in range(30)))
    runner = lab.Runner(plan, "http://lab/plan.txt")
    runner.record_plan_errors()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 21 and lines[0].startswith("lab: plan http://lab/plan.txt: line 1: unknown directive")
    assert lines[-1] == "lab: plan http://lab/plan.txt: 10 more wrong lines (all of them in the JUnit XML)"
    assert runner.failures == 1 and runner.report.tests[0].exception.count("PlanError: line") == 30
