"""The lab workflow in real BITS 2079 on OVMF under QEMU (tools/bitsrun.py), two boots:

1. unattended: ``BITSNET_LAB`` set before BITS's init.cfg; the boot fetches the plan from the lab
   -- Debian's nginx in QEMU's namespace, serving the plan and scripts and taking WebDAV PUTs,
   configured as the README says (tests/labservers.py) -- runs three of BITS's own test menus
   that work under QEMU, a program from the lab, one the lab does not have and one that hangs
   past its limit, PUTs the JUnit XML and BITS's log under the SMBIOS UUID QEMU was given,
   mirrors the console as syslog to a real rsyslogd, and powers off (the plan's ``end halt``).
   The host checks that the XML's totals are BITS's console summaries, that the log arrived
   whole, and that the missing script and the hang cost nothing else.
2. ``python URL`` at the GRUB prompt: a program and a zip from the lab, a 404 and a refused
   connection (one line each, false status), and -- where the host can make a test CA (Python
   3, ``openssl``) -- a program over HTTPS, verified by the firmware's TLS against the CA put at
   ``/boot/bitsnet/ca.pem``.
"""

from __future__ import print_function

import os
import re
import sys
import xml.etree.ElementTree as ElementTree

import pytest

import conftest  # noqa: F401  (import paths)
import test_unattended
import test_remote

sys.path.insert(0, os.path.join(conftest.ROOT, "tools"))
import bitsrun  # noqa: E402
import labservers  # noqa: E402
import qemu_vm  # noqa: E402

pytestmark = pytest.mark.realbits
MISSING = bitsrun.unavailable()
LAB_PORT = 8090  # in QEMU's private namespace: nothing else listens there
SYSLOG_PORT = 5514

PLAN = ("""\
# bitsnet's real-BITS lab plan (tests/test_lab_realbits.py)
timeout 240
console syslog 10.0.2.2:%d
tests "EFI Tests" "SMRR configuration" "MP Table"
run scripts/ok.py one "two words"
run scripts/missing.py
timeout 5
run scripts/hang.py
upload junit results/{uuid}/{run}/junit.xml
upload log results/{uuid}/{run}/{name}
end halt
""" % SYSLOG_PORT).encode("ascii")

UNATTENDED_CFG = """\
set BITSNET_LAB='http://10.0.2.2:%d/plan.txt'
source /boot/cfg/init.cfg
echo "@@lab after init.cfg: the plan did not halt"
py 'execfile("/boot/bitsrun/main.py")'
halt
""" % LAB_PORT

HTTPS_PORT = 8443
PROMPT_CFG = """\
source /boot/cfg/init.cfg
echo "@@h2b begin"
python http://10.0.2.2:%(port)d/scripts/ok.py a "b c"
echo "@@h2b status $?"
python http://10.0.2.2:%(port)d/app.zip z
echo "@@h2b status $?"
python http://10.0.2.2:%(port)d/scripts/missing.py
echo "@@h2b status $?"
python http://10.0.2.2:1/refused.py
echo "@@h2b status $?"
%(https)secho "@@h2b end"
py 'execfile("/boot/bitsrun/main.py")'
halt
"""
HTTPS_LINES = """\
python https://10.0.2.2:%d/scripts/ok.py tls
echo "@@h2b status $?"
""" % HTTPS_PORT


def _pki(directory):
    """The test CA and a server certificate for 10.0.2.2 (test_ssl_realbits's), or None where
    they cannot be made here."""
    try:
        import test_ssl_realbits
    except ImportError:
        return None
    if test_ssl_realbits.REASON is not None:
        return None
    test_ssl_realbits._make_pki(directory)
    return directory


def _https_server(pki, files):
    """In the namespace: the files over HTTPS on HTTPS_PORT (the host's ssl; ciphers OVMF takes)."""
    import ssl as hostssl
    import peers
    server = peers.QuietHTTPServer(("127.0.0.1", HTTPS_PORT), peers.files_handler(files))
    context = hostssl.SSLContext(hostssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(pki, "server.pem"), os.path.join(pki, "server.key"))
    context.set_ciphers("ECDHE+AESGCM:AESGCM:AES:!aNULL:!eNULL:@SECLEVEL=1")  # docs/tls.md: RSA/DHE only
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    import test_ssl_realbits
    test_ssl_realbits._serve(server)


def _boot(monkeypatch, grub_cfg, files, store, servers=False, pki=None):
    """One boot with ``grub_cfg``; the bitsrun Result. The lab runs in bitsrun's namespace (a
    forked process): with ``servers``, nginx (``files`` in its root, uploads stored there) and
    rsyslogd, whose pids go to ``store``/pids for the test to stop them; else a LabPeer that
    stores its uploads in ``store``/www."""

    def setup():
        if not servers:
            test_unattended.LabPeer(files, port=LAB_PORT, store=os.path.join(store, "www")).__enter__()
            if pki is not None:
                _https_server(pki, files)
            return {}
        root = os.path.join(store, "nginx", "www")
        for path, data in files.items():
            if not os.path.isdir(os.path.dirname(os.path.join(root, path))):
                os.makedirs(os.path.dirname(os.path.join(root, path)))
            with open(os.path.join(root, path), "wb") as handle:
                handle.write(data)
        labservers.start_in_namespace(store, LAB_PORT, SYSLOG_PORT)
        return {}
    monkeypatch.setattr(bitsrun, "GRUB_CFG", grub_cfg)
    if pki is not None:  # the CA where bitsnet.ssl's default contexts load it
        prepare = bitsrun.prepare_tree

        def prepare_with_ca(tree, *args, **kwargs):
            prepare(tree, *args, **kwargs)
            os.makedirs(os.path.join(tree, "boot", "bitsnet"))
            with open(os.path.join(pki, "ca.pem"), "rb") as source:
                with open(os.path.join(tree, "boot", "bitsnet", "ca.pem"), "wb") as target:
                    target.write(source.read())
        monkeypatch.setattr(bitsrun, "prepare_tree", prepare_with_ca)
    try:
        return bitsrun.run(code="print('wrapper')", timeout=420, setup=setup)
    finally:
        labservers.stop_started(store)  # the servers setup() started


def _uploads(top):
    found = {}
    for directory, _, names in os.walk(top):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, top).replace(os.sep, "/")] = handle.read()
    return found


@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_an_unattended_boot_runs_the_plan_delivers_and_halts(monkeypatch, tmpdir):
    files = dict(test_unattended.SCRIPTS, **{"plan.txt": PLAN})
    for sub in ("nginx", "rsyslog"):
        tmpdir.mkdir(sub)
    assert qemu_vm.ensure_packages(["nginx", "rsyslog"], install=os.geteuid() == 0, tool="test")
    result = _boot(monkeypatch, UNATTENDED_CFG, files, str(tmpdir), servers=True)
    console = "\n".join(result.console)
    syslog = tmpdir.join("rsyslog", "messages.log").read_binary().decode("utf-8", "replace").splitlines()
    # It halted from inside init.cfg: QEMU ended (no time-out), before GRUB reached the next line.
    assert not result.timed_out and result.status is None, console[-3000:]
    assert "@@lab after init.cfg" not in console, console[-3000:]
    uploads = _uploads(str(tmpdir.join("nginx", "www")))
    junit = [p for p in uploads if p.endswith("/junit.xml")]
    assert len(junit) == 1 and junit[0].startswith("results/%s/" % qemu_vm.MACHINE_UUID), sorted(uploads)
    log = uploads[junit[0].replace("junit.xml", "bits-log.txt")].decode("utf-8", "replace")
    root = ElementTree.fromstring(uploads[junit[0]])

    # BITS's own numbers: the console's overall summary is the sum of the suites' properties.
    overall = re.findall(r"==== Overall summary: (\d+) passed, (\d+) failed ====", console)
    assert len(overall) == 1, console[-3000:]
    suites = dict((s.get("name"), s) for s in root.findall("testsuite"))
    assert set(suites) == {"EFI Tests", "BITS", "plan"}, sorted(suites)
    props = [dict((p.get("name"), p.get("value")) for p in s.iter("property")) for s in suites.values()]
    assert (sum(int(p["bits.passed"]) for p in props), sum(int(p["bits.failed"]) for p in props)) == \
        tuple(int(n) for n in overall[0])
    assert int(overall[0][0]) > 0
    summaries = re.findall(r"^Summary: (\d+) passed, (\d+) failed$", console, re.M)
    bits_cases = [c for name in ("EFI Tests", "BITS") for c in suites[name].findall("testcase")]
    assert len(bits_cases) == len(summaries) == 5  # three EFI CRC tests, SMRR, MP Table
    assert props[0]["machine.serial"] == qemu_vm.MACHINE_SERIAL and props[0]["machine.uuid"] == qemu_vm.MACHINE_UUID

    # The plan's steps: the missing script and the hang are failures, nothing else is lost.
    plan_cases = dict((c.get("name"), c) for c in suites["plan"].findall("testcase"))
    assert plan_cases['run scripts/ok.py one "two words"'].find("error") is None
    assert plan_cases["run scripts/missing.py"].find("error").get("message").endswith("HTTP 404 Not Found")
    assert plan_cases["run scripts/hang.py"].find("error").get("type") == "TimeLimit"
    seconds = float(plan_cases["run scripts/hang.py"].get("time"))
    assert 5.0 <= seconds < 10.0, seconds

    # The log arrived whole: from BITS's first line to the runner's last line before the upload,
    # every console line of the tests in it.
    assert log.startswith("BIOS Implementation Test Suite (BITS)\nbits-"), log[:300]
    assert "lab: delivered junit: %d bytes to " % len(uploads[junit[0]]) in log
    tests_part = console[console.index("==== EFI Tests ===="):console.index("==== Overall summary")]
    for line in tests_part.splitlines():
        assert line.strip() in log, line
    assert "lab: step 3/4: FAILED" in log and "HTTP 404 Not Found" in log
    assert "TimeLimit: step 4 (line 8) ran past its time limit of 5 s" in log
    # The console went to the lab's rsyslogd too, under the machine's UUID.
    steps = [line.split("\t") for line in syslog if "\tlab: step 1/4 (line 4): tests" in line]
    assert steps and steps[0][0] == qemu_vm.MACHINE_UUID, syslog[:10]
    assert "lab: end: halt" in console


@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_python_url_at_the_grub_prompt(monkeypatch, tmpdir):
    files = dict(test_unattended.SCRIPTS, **{"app.zip": test_remote.make_zip(test_remote.APP)})
    files["scripts/ok.py"] = test_remote.PROGRAM
    pki = _pki(str(tmpdir.mkdir("pki")))
    grub_cfg = PROMPT_CFG % {"port": LAB_PORT, "https": HTTPS_LINES if pki else ""}
    result = _boot(monkeypatch, grub_cfg, files, str(tmpdir), pki=pki)  # a LabPeer: GETs only
    lines = result.console
    text = "\n".join(lines)
    assert "@@h2b begin" in lines and "@@h2b end" in lines, text[-3000:]
    ours = lines[lines.index("@@h2b begin") + 1:lines.index("@@h2b end")]
    statuses = [line for line in ours if line.startswith("@@h2b status ")]
    assert statuses == ["@@h2b status 0", "@@h2b status 1", "@@h2b status 1", "@@h2b status 1"] + (
        ["@@h2b status 0"] if pki else []), text
    url = "http://10.0.2.2:%d/" % LAB_PORT
    assert "prog name=__main__ argv=%sscripts/ok.py|a|b c" % url in ours, text
    assert "zip main 4 sub %sapp.zip|z" % url in ours and "python: exit status 4" in ours, text
    assert "python: can't fetch %sscripts/missing.py: HTTP 404 Not Found" % url in ours, text
    refused = [line for line in ours if line.startswith("python: can't fetch http://10.0.2.2:1/refused.py: ")]
    assert len(refused) == 1 and "Traceback" not in text, text
    if pki:
        assert "prog name=__main__ argv=https://10.0.2.2:%d/scripts/ok.py|tls" % HTTPS_PORT in ours, text
