"""bitsnet.upload and bitsnet.machineid: results delivered to the lab from the boot prompt.

"At the boot prompt" (tools/efirun.py, bitsnet installed, BITS's testsuite/redirect/smbios
played by tests/fixtures/bits_fake): BITS's tests recorded, then the JUnit XML, a large body
(with its progress on the console) and BITS's log PUT to a real nginx with WebDAV on loopback,
under a URL naming the machine by its SMBIOS identity; the host checks every file arrived
whole, the XML against Jenkins's schema and the console's summary. Then a lab having a bad
day (tests/labservers.py FlakyLab): down, then 503, then accepting -- delivered after retries
that back off; always 503, a 403, nothing listening -- one ``UploadError`` line each, saying
what was not delivered, after the expected number of attempts. In this process: URL templates
and the identity's fallbacks.
"""

from __future__ import print_function

import hashlib
import os
import re
import subprocess
import sys
import threading

import pytest

import junitcheck
import labservers
import processes
from conftest import STATION_ARGS, port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAKE = os.path.join(HERE, "fixtures", "bits_fake")
RUN_TIMEOUT = 90.0  # s one efirun run may take
LAB_DOWN = 0.25  # s the flaky lab stays down once the program starts delivering
BIG = 1536 * 1024  # bytes: large enough for progress lines (bitsnet.upload.PROGRESS_MIN)
PRODUCT = "Fake Machine (Q35 + ICH9, 2009)"
UUID = "4c4c4544-0042-3510-8052-b4c04f4e3232"

LAB_PROGRAM = r'''
import hashlib, sys
import fake_tests, redirect
redirect.redirect()  # what BITS's start-up does: the console kept in memory
fake_tests.register()
from bitsnet import results, upload
template, size = sys.argv[1], int(sys.argv[2])
report = results.run_tests()
ident = upload.identity()
xml = report.junit_xml(hostname=ident["machine"], properties=sorted(ident.items()))
big = bytes(bytearray(i % 251 for i in range(size)))
for name in ("junit.xml", "big.bin", "bits-log.txt"):
    data = {"junit.xml": xml, "big.bin": big}.get(name) or results.log_text()  # the log as it is by now
    upload.deliver(upload.expand(template, ident, name=name), data, content_type="application/octet-stream")
    print("@@sha %s %s" % (name, hashlib.sha256(data).hexdigest()))
upload.deliver_file(template, sys.argv[0])  # a file a script names, under its own name
for key, value in sorted(ident.items()):
    print("@@identity %s=%s" % (key, value))
'''

FLAKY_PROGRAM = r'''
import sys
from bitsnet import upload
recovers, always_503, forbidden, nobody = sys.argv[1:5]
data = b"result " * 1000
from bitsnet import ipconfig
ipconfig.ensure_configured(10)  # DHCP first: the lab's down time is counted from the first try
print("@@ready")  # the host's lab comes up a little later
sys.stdout.flush()
print("@@status %d" % upload.deliver(recovers, data, method="POST", retries=6, backoff=0.1))
try:
    upload.deliver_file(always_503.rsplit("/", 1)[0] + "/{name}", "/no/such/file.log", progress=None)
except upload.UploadError as exc:
    print("@@error attempts=%d status=%s %s" % (exc.attempts, exc.status, exc))
for url, retries in ((always_503, 3), (forbidden, 3), (nobody, 2)):
    try:
        upload.deliver(url, data, retries=retries, backoff=0.05, timeout=5)
    except upload.UploadError as exc:
        print("@@error attempts=%d status=%s %s" % (exc.attempts, exc.status, exc))
    else:
        print("@@delivered?! %s" % url)
'''


def efirun(tmpdir, program, args, env=None, on_line=None):
    """(stdout lines, stderr) of ``program`` at the simulated boot prompt; fails on a non-zero
    exit, a traceback or a firmware leak. ``on_line(line)`` sees each line as it comes."""
    path = str(tmpdir.join("program.py"))
    with open(path, "w") as f:
        f.write(program)
    environment = dict(os.environ, PYTHONPATH=FAKE, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", **(env or {}))
    command = [sys.executable, processes.EFIRUN, "--ledger"] + STATION_ARGS + [path] + [str(a) for a in args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=environment)
    timer = threading.Timer(RUN_TIMEOUT, process.kill)
    timer.start()
    errors = []
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()))
    reader.start()
    lines = []
    try:
        for raw in iter(process.stdout.readline, b""):
            lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
            if on_line is not None:
                on_line(lines[-1])
        process.wait()
        reader.join()
    finally:
        timer.cancel()
    err = errors[0].decode("utf-8", "replace")
    assert process.returncode == 0, "\n".join(lines) + err
    ledger = processes.ledger(err)
    assert not any(ledger.values()), err
    return lines, err


@pytest.fixture
def nginx(tmpdir):
    server = labservers.Nginx(str(tmpdir.mkdir("nginx")), port(0))
    yield server
    server.stop()


def test_results_log_and_a_large_body_reach_nginx_under_the_machines_name(tmpdir, nginx):
    template = nginx.url + "/results/{product}/{uuid}/{run}/{name}"
    lines, err = efirun(tmpdir, LAB_PROGRAM, [template, BIG], env={"BITSFAKE_PRODUCT": PRODUCT, "BITSFAKE_UUID": UUID})
    shas = dict(line.split()[1:] for line in lines if line.startswith("@@sha "))
    ident = dict(line[len("@@identity "):].split("=", 1) for line in lines if line.startswith("@@identity "))
    assert ident["uuid"] == ident["machine"] == UUID and ident["product"].startswith("Fake")
    assert re.match(r"^\d{8}T\d{6}Z-[0-9a-f]{4}$", ident["run"]), ident
    stored = nginx.files()
    folder = "results/%s/%s/%s/" % (PRODUCT, UUID, ident["run"])  # percent-encoded in the URL, plain on disk
    assert sorted(stored) == sorted(folder + name for name in ("junit.xml", "big.bin", "bits-log.txt", "program.py"))
    assert stored[folder + "program.py"] == LAB_PROGRAM.encode("ascii")
    for name, sha in shas.items():
        assert hashlib.sha256(stored[folder + name]).hexdigest() == sha, name  # arrived whole
    assert stored[folder + "big.bin"] == bytes(bytearray(i % 251 for i in range(BIG)))
    assert " 201 " in nginx.log()  # PUT created, by nginx's WebDAV module
    # the console: BITS's summary, then progress for the large body only, one line a tenth
    overall = [x for x in lines if x.startswith("==== Overall summary:")]
    assert overall == ["==== Overall summary: 5 passed, 3 failed ===="]
    progress = [x for x in lines if x.startswith("upload: PUT ")]
    url = (nginx.url + "/results/Fake%20Machine%20%28Q35%20%2B%20ICH9%2C%202009%29/" + UUID + "/" +
           ident["run"] + "/big.bin")
    assert progress[:-1] == ["upload: PUT %s: %d of %d bytes (%d%%)" % (url, sent, BIG, sent * 100 // BIG)
                             for sent in progress_points(BIG)]
    assert re.match(r"^upload: PUT %s: 201 Created, %d bytes in \d+\.\d s$" % (re.escape(url), BIG), progress[-1])
    checked = junitcheck.check(write(tmpdir, stored[folder + "junit.xml"]))[0]
    suites = checked["suites"]
    assert (sum(int(s["properties"]["bits.passed"]) for s in suites),
            sum(int(s["properties"]["bits.failed"]) for s in suites)) == (5, 3)
    assert all(s["hostname"] == UUID and s["properties"]["serial"] == "SN-0001" for s in suites)
    log = stored[folder + "bits-log.txt"].decode("utf-8")
    assert log.startswith("BIOS Implementation Test Suite (BITS)")
    assert "==== Overall summary: 5 passed, 3 failed ====" in log and progress[0] in log


def progress_points(size):
    """Where deliver reports: each tenth of the way, at the 64 KiB piece that passes it."""
    from bitsnet import upload
    step, sent, due, out = size // 10, 0, size // 10, []
    while sent < size:
        sent = min(size, sent + upload.CHUNK)
        if sent >= due or sent == size:
            out.append(sent)
            due = (sent // step + 1) * step
    return out


def write(tmpdir, data):
    path = str(tmpdir.join("check.xml"))
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_a_lab_having_a_bad_day(tmpdir):
    recovers = labservers.FlakyLab(port(1), [503, 201], down=True)
    always_503 = labservers.FlakyLab(port(2), [503])
    forbidden = labservers.FlakyLab(port(3), [403])
    nobody = port(4)  # nothing listens there
    urls = ["http://127.0.0.1:%d/results/%s" % (p, name) for p, name in
            ((port(1), "a.xml"), (port(2), "b.xml"), (port(3), "c.xml"), (nobody, "d.xml"))]
    try:
        lines, err = efirun(tmpdir, FLAKY_PROGRAM, urls,
                            on_line=lambda line: line == "@@ready" and recovers.start_after(LAB_DOWN))
    finally:
        for lab in (recovers, always_503, forbidden):
            lab.stop()
    data = b"result " * 1000
    # refused while the lab is down, then a 503, then accepted: nothing lost, no duplicate
    assert "@@status 201" in lines
    assert [(m, p) for m, p, _ in recovers.received] == [("POST", "/results/a.xml")] * 2
    assert recovers.stored == {"/results/a.xml": data}
    retries = [x for x in lines if x.startswith("upload: POST %s failed" % urls[0])]
    assert len(retries) >= 2 and "Connection refused" in retries[0] and "HTTP 503" in retries[-1]
    delays = [float(re.search(r"in (\d+\.\d+) s$", x).group(1)) for x in retries]
    assert delays == [0.1 * 2 ** i for i in range(len(delays))]  # backing off
    errors = [x for x in lines if x.startswith("@@error ")]
    assert errors[0].startswith("@@error attempts=0 status=None upload: file.log not delivered: cannot read "
                                "/no/such/file.log: ")  # nothing sent, and said so
    errors = errors[1:]
    size = len(data)
    assert errors == [
        "@@error attempts=4 status=503 upload: b.xml (%d bytes) not delivered: PUT %s: HTTP 503 Service Unavailable "
        "(4 attempts)" % (size, urls[1]),
        "@@error attempts=1 status=403 upload: c.xml (%d bytes) not delivered: PUT %s: HTTP 403 Forbidden "
        "(1 attempt)" % (size, urls[2]),
        "@@error attempts=3 status=None upload: d.xml (%d bytes) not delivered: PUT %s: ConnectionRefusedError: "
        "Connection refused (3 attempts)" % (size, urls[3]) if sys.version_info[0] > 2 else errors[2]]
    assert re.match(r"^@@error attempts=3 status=None upload: d.xml .* Connection refused \(3 attempts\)$", errors[2])
    assert len(always_503.received) == 4 and len(forbidden.received) == 1  # a 403 is not retried


# --------------------------------------------------------------------------- in this process
def test_url_templates():
    from bitsnet import upload
    ident = {"uuid": UUID, "serial": "SN 1/2", "product": PRODUCT, "run": "R1", "machine": UUID}
    assert upload.expand("http://lab:8080/r/{product}/{serial}/{run}/{name}", ident, name=u"caf\u00e9.xml") == (
        "http://lab:8080/r/Fake%20Machine%20%28Q35%20%2B%20ICH9%2C%202009%29/SN%201%2F2/R1/caf%C3%A9.xml")
    assert upload.expand("http://lab/{machine}/{uuid}", ident) == "http://lab/%s/%s" % (UUID, UUID)
    with pytest.raises(ValueError) as error:
        upload.expand("http://lab/{hostname}", ident)
    assert "{hostname}" in str(error.value)
    with pytest.raises(ValueError):
        upload.expand("http://lab/{name}", ident)  # no name given
    with pytest.raises(ValueError):
        upload.deliver("ftp://lab/x", b"", progress=None)  # not retried: the caller's mistake
    with pytest.raises(upload.UploadError) as failed:  # httplib refuses the path: one line, one attempt
        upload.deliver("http://127.0.0.1:%d/a b\nc" % port(6), b"x", progress=None)
    assert failed.value.attempts == 1 and "\n" not in str(failed.value) and "a b" in str(failed.value)


@pytest.mark.parametrize("env, expected", [
    ({}, (UUID, "SN-0001", "Fake Machine 9000", UUID)),
    ({"BITSFAKE_UUID": "00000000-0000-0000-0000-000000000000"}, ("unknown", "SN-0001", "Fake Machine 9000", "SN-0001")),
    ({"BITSFAKE_UUID": "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "BITSFAKE_SERIAL": ""},
     ("unknown", "unknown", "Fake Machine 9000", "Fake Machine 9000")),
    ({"BITSFAKE_NO_SMBIOS": "1"}, ("unknown", "unknown", "unknown", "unknown")),
], ids=["smbios", "uuid-zero", "uuid-ones-no-serial", "no-smbios"])
def test_identity_and_its_fallbacks(monkeypatch, env, expected):
    from bitsnet import machineid
    monkeypatch.syspath_prepend(FAKE)
    sys.modules.pop("smbios", None)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    try:
        ident = machineid.identity(refresh=True)
    finally:
        sys.modules.pop("smbios", None)
    assert (ident["uuid"], ident["serial"], ident["product"], ident["machine"]) == expected
    assert ident["run"] == machineid.identity()["run"]  # one run id per boot


def test_identity_without_smbios_module():
    from bitsnet import machineid
    sys.modules.pop("smbios", None)
    ident = machineid.identity(refresh=True)
    assert (ident["uuid"], ident["machine"]) == ("unknown", "unknown")
