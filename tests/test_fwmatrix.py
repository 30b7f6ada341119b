"""bitsnet in real BITS on every OVMF generation and NIC driver (docs/testing.md section 6).

The full real-BITS set (tests/test_real_bits.py, test_ssl_realbits.py, test_webrepl_realbits.py)
boots the machine's own OVMF (Debian 12's 2022.11) with virtio-net.  Here each other cell of the
matrix -- EDK2 2020.11, 2022.11, 2025.02 and 2026.08 from tools/ovmf.py's catalogue, times the
virtio-net and e1000 NICs (and rtl8139 and OVMF's own VirtioNetDxe once), with virtio-rng-pci
where the generation needs an RNG -- gets one boot of tests/scripts/fwmatrix_scenarios.py, and
five tests read it:

* the selftest against tools/lab.py passes (DHCP, DNS, TCP and UDP echo, HTTP download, a
  listening socket reached from the host); on a generation without TCP6 exactly its two IPv6
  checks skip, saying so;
* bitsnet.netconsole mirrors five printed lines to a UDP receiver on the host, each intact;
* HTTPS through the firmware's TlsDxe: a download with its sha256 (the negotiated cipher is
  recorded: 2026.08's TLS offers ECDHE, the older ones do not);
* a BaseHTTPServer in the firmware answers ``curl`` on the host three times (then /done, so that
  the program does not end -- and the machine power off -- under its last answer);
* IPv6: a TCP echo to the namespace's ::1 (slirp's fec0::2), or, on a generation built without
  TCP6 (2020.11), ``socket(AF_INET6)`` failing with EAFNOSUPPORT -- the expected result there.

The boot without an RNG on 2025.02 (no network stack at all, docs/edk2.md section 10.1) is
tests/test_generations_realbits.py's.

Marker ``realbits`` and ``fwmatrix`` (tools/check runs these in their own step, pytest-fwmatrix).
The firmware is fetched from Debian's archive on first use (tools/ovmf.py), into ~/.cache/bitsnet.
Boot times and the negotiated ciphers go to build/bitsrun/fwmatrix.txt and the output (``-s``).
"""

from __future__ import print_function

import hashlib
import os
import re
import socket
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bitsrun  # noqa: E402
import qemu_vm  # noqa: E402
import ovmf  # noqa: E402
import peers  # noqa: E402
import test_real_bits  # noqa: E402
import test_ssl_realbits  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "scripts", "fwmatrix_scenarios.py")
SECTIONS = ["selftest", "netconsole", "https", "http_server", "ipv6"]
NETCONSOLE_PORT = 6666
SIZE = 1024 * 1024
BOOT_TIMEOUT = 400
FIGURES = os.path.join(ROOT, "build", "bitsrun", "fwmatrix.txt")

# (generation, NIC).  2022.11 with virtio-net is the full real-BITS set's machine (not repeated
# here); every generation runs on virtio-net (OVMF's usual NIC) and e1000 (a different iPXE
# driver), rtl8139 once, and virtio-net without iPXE's ROM (OVMF's own VirtioNetDxe) once.
# The RNG goes with the generation (ovmf.Generation.needs_rng).
MATRIX = [
    ("2020.11", "virtio-net"), ("2020.11", "e1000"),
    ("2022.11", "e1000"), ("2022.11", "rtl8139"),
    ("2025.02", "virtio-net"), ("2025.02", "e1000"),
    ("2026.08", "virtio-net"), ("2026.08", "e1000"), ("2026.08", "virtio-net-dxe"),
]


def _why_not():
    return test_ssl_realbits.REASON or test_real_bits.REASON


REASON = _why_not()
pytestmark = [pytest.mark.realbits, pytest.mark.fwmatrix,
              pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def _cell_id(cell):
    generation, nic = cell
    return "%s-%s%s" % (generation, nic, "-rng" if ovmf.BY_NAME[generation].needs_rng else "")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fwmatrix-pki"))
    test_ssl_realbits._make_pki(d)
    payload = peers.pattern(SIZE, seed=29)
    return d, payload


_RUNS = {}  # type: dict


_RECEIVED = []  # type: list


def _netconsole_receiver():
    """setup() part: a UDP receiver on the namespace's loopback (10.0.2.2 to the guest)."""
    del _RECEIVED[:]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", NETCONSOLE_PORT))
    sock.settimeout(0.2)

    def receive():
        while True:
            try:
                _RECEIVED.append(sock.recv(2048).decode("ascii", "replace"))
            except socket.timeout:
                continue
            except (OSError, socket.error):
                return
    thread = threading.Thread(target=receive)
    thread.daemon = True
    thread.start()
    return {"netconsole": str(NETCONSOLE_PORT)}


def _hook(line):
    """The host's side: the netconsole lines as received (waited for up to 20 s); http_server's
    three requests, then /done (whose answer may be cut short by the power-off that follows the
    program; the three before it must be whole)."""
    if line == "netconsole done":
        deadline = time.time() + 20
        while time.time() < deadline and len([d for d in _RECEIVED if d.startswith("netconsole line 5")]) < 1:
            time.sleep(0.1)
        return ("netconsole", list(_RECEIVED))
    if not line.startswith("ready http "):
        return None
    url = "http://127.0.0.1:%d/" % int(line.split()[2])
    bodies = [test_real_bits._curl(url + str(i)).strip() for i in range(3)]
    try:
        test_real_bits._curl(url + "done")
    except Exception:
        pass
    return ("http", bodies)


def _boot(cell, pki):
    """One boot of the scenario script on ``cell`` (cached: four tests read it)."""
    if cell in _RUNS:
        return _RUNS[cell]
    generation, nic = cell
    d, payload = pki
    https_setup = test_ssl_realbits._peers_in_namespace(d, payload)

    def setup():
        ports = test_real_bits._peers()
        ports.update(https_setup())
        ports.update(_netconsole_receiver())
        return ports
    args = ["--lab", "{lab}", "--echo", "{lab_echo}", "--host6", qemu_vm.GUEST_HOST6, "--plain", "{plain}",
            "--https", "{https}", "--size", str(SIZE), "--netconsole", "{netconsole}"] + SECTIONS
    started = time.time()
    result = bitsrun.run(script=SCRIPT, args=args, lab=True, setup=setup, hostfwd=[8000],
                         on_line=_hook, timeout=BOOT_TIMEOUT, ovmf=generation, nic=nic,
                         rng=ovmf.BY_NAME[generation].needs_rng)
    print("\n".join(result.output))
    sections = test_real_bits.sections_of(result.output)
    # a hook that raised left its text instead of a (name, value) pair: test_http_server shows it
    answers = dict(v if isinstance(v, tuple) else ("error", v) for _, v in result.hooks)
    run = (result, sections, answers, hashlib.sha256(payload).hexdigest())
    _RUNS[cell] = run
    _figures(cell, result, sections, time.time() - started)
    return run


def _figures(cell, result, sections, wall):
    """Boot time (QEMU start to the program's first line), the selftest's and the whole run's."""
    first = result.times[0] if result.times else 0.0
    marks = dict((line, at) for line, at in zip(result.output, result.times) if line.startswith("== "))
    selftest = marks.get("== selftest PASS", marks.get("== selftest FAIL", 0.0)) - marks.get("== selftest", 0.0)
    cipher = [line.split("cipher=")[1] for line in sections.get("https", (None, []))[1] if "cipher=" in line]
    verdicts = " ".join("%s=%s" % (name, (sections.get(name) or ("missing",))[0]) for name in SECTIONS)
    text = "fwmatrix %s OVMF %s: boot %.1f s, selftest %.1f s, run %.1f s (wall %.1f s), cipher %s; %s" % (
        _cell_id(cell), result.firmware.version if result.firmware else "?", first, selftest, result.seconds,
        wall, cipher[0] if cipher else "-", verdicts)
    directory = os.path.dirname(FIGURES)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(FIGURES, "a") as handle:
        handle.write("%s %s\n" % (time.strftime("%Y-%m-%d %H:%M"), text))
    print(text)


@pytest.fixture(params=MATRIX, ids=_cell_id)
def cell_run(request, pki):
    return request.param, _boot(request.param, pki)


def test_selftest(cell_run):
    cell, run = cell_run
    lines = test_real_bits.section(run, "selftest")
    summary = [line for line in lines if re.match(r"^\d+ passed, \d+ failed", line)]
    assert summary, lines
    skipped = [line for line in lines if re.search(r"\. SKIP \d", line)]
    if ovmf.BY_NAME[cell[0]].has_tcp6:
        assert re.match(r"^\d+ passed, 0 failed$", summary[-1]), lines
    else:  # exactly the two IPv6 checks, each saying why
        assert re.match(r"^\d+ passed, 0 failed, 2 skipped$", summary[-1]), lines
        names = [re.sub(r"^ *\d+ ", "", line.split(" .")[0]) for line in skipped]
        assert names == ["IPv6 address", "TCP echo over IPv6"], lines
        assert "the firmware has no TCP6" in "\n".join(lines)


def test_netconsole(cell_run):
    _, run = cell_run
    lines = test_real_bits.section(run, "netconsole")
    assert "netconsole line 5 of 5" in lines
    received = run[2].get("netconsole")
    assert received == ["netconsole line %d of 5\n" % i for i in range(1, 6)], (received, lines)


def test_https(cell_run):
    _, run = cell_run
    lines = test_real_bits.section(run, "https")
    assert "https bytes=%d" % SIZE in " ".join(lines)
    assert "https sha256=%s" % run[3] in lines
    assert [line for line in lines if line.startswith("https version=TLSv1.2 cipher=")], lines


def test_http_server(cell_run):
    _, run = cell_run
    lines = test_real_bits.section(run, "http_server")
    assert "http_server served=4 paths=/0,/1,/2,/done" in lines
    assert run[2].get("http") == ["hello from firmware /%d" % i for i in range(3)], run[0].hooks


def test_ipv6_echo_or_eafnosupport(cell_run):
    cell, run = cell_run
    lines = test_real_bits.section(run, "ipv6")
    if ovmf.BY_NAME[cell[0]].has_tcp6:
        assert "ipv6 echoed=True bytes=1900" in lines, lines
    else:  # the generation was built without TCP6: the expected answer, not a failure
        assert "ipv6 errno=EAFNOSUPPORT" in lines, lines
        assert [line for line in lines if "no EFI TCP6" in line], lines

