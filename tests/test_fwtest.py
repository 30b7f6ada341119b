"""Fidelity against real firmware (docs/simulator.md section 6): the fwtest scenarios on the simulator versus OVMF.

The simulator half always runs: every scenario in tests/firmware/scenarios runs through
efisim.scenario against real loopback peers and must reproduce the OVMF trace recorded in
tests/firmware/ovmf-trace.txt (or differ only as tests/firmware/DEVIATIONS documents).  The QEMU
half (marker ``firmware``) boots OVMF with the probe via ``tools/fwtest.py`` and runs only where
qemu-system-x86, ovmf, ipxe-qemu, gnu-efi and mtools are installed (FWTEST_INSTALL=1 lets it
apt-get install them first, for CI on a clean machine) and ``unshare -rn`` works.
"""

from __future__ import print_function

import contextlib
import fcntl
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import conftest  # noqa: E402
import fwtest  # noqa: E402

STATION = conftest.STATION  # this test process's simulated machine

FIRMWARE_BUDGET = 180  # seconds: the whole QEMU comparison (about 45 s measured)


@pytest.fixture
def peers():
    running = fwtest.Peers()
    yield running
    running.close()


@contextlib.contextmanager
def _one_simulated_network():
    """Run the scenarios in one test process at a time: they use fixed ports ($LISTEN, the UDP
    scenarios' 40300 and up) and a limited broadcast, which a second simulated machine on this
    host's loopback -- the other tools/check lane -- would hear and answer, as a second machine
    on one Ethernet would."""
    lock_dir = os.path.join(ROOT, "build")
    if not os.path.isdir(lock_dir):
        os.makedirs(lock_dir)
    with open(os.path.join(lock_dir, "fwtest-simulator.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _simulator_traces(peers, patterns=None):
    scenarios = fwtest.load_scenarios(patterns)
    only = set() if fwtest.simulator_has_udp4() else set(name for name, text in scenarios if fwtest.uses_udp(text))
    # This test process's own station (conftest.STATION): tools/check runs two lanes at once.
    with _one_simulated_network():
        lines, _ = fwtest.run_simulator([sc for sc in scenarios if sc[0] not in only], peers, station=STATION)
    names = [name for name, _ in scenarios if not name.startswith("_")]
    literal = set(int(p) for _, text in scenarios for p in re.findall(r"port=(\d+)", text))
    return names, fwtest.normalise(lines, dict(fwtest.SIM_SYMBOLS, SELF=STATION, **peers.ports), literal), lines, only


def test_simulator_matches_recorded_ovmf_trace(peers):
    names, sim, raw, only = _simulator_traces(peers)
    assert not [line for line in raw if line.startswith("@@ crash")], raw
    assert not [line for line in raw if " error " in line], "scenario errors: %r" % raw
    recorded = fwtest.read_recorded()
    assert set(names) <= set(recorded), "scenarios without a recorded OVMF trace: run fwtest.py --record"
    deviations = fwtest.load_deviations()
    results = fwtest.compare(names, recorded, sim, deviations, only)
    output = []
    differ = fwtest.report(results, out=output.append, deviations=deviations)
    assert differ == 0, "\n".join(output)
    assert sum(1 for r in results if r[1] == "agree") >= len(names) - len(deviations) - len(only)


def test_recorded_trace_covers_the_core_behaviours():
    """The recorded OVMF trace holds the facts the simulator is tuned to (docs/edk2.md sections 3 and 5)."""
    recorded = fwtest.read_recorded()
    assert "L11 configure -> NO_MAPPING" in recorded["00_ip4_nomapping"]
    assert "L3 ip4-info -> BUFFER_TOO_SMALL size=152" in recorded["01_ip4_info_sizing"]
    assert "event connect c1 CONNECTION_RESET prompt" in recorded["11_tcp_refused"]
    assert "event receive r1 SUCCESS sync len=4 data=30313233" in recorded["12_tcp_receive_partial"]
    assert "L10 receive -> CONNECTION_FIN" in recorded["13_tcp_peer_fin"]
    assert "event receive r1 ABORTED sync" in recorded["15_tcp_configure_null"]
    assert "L6 configure -> INVALID_PARAMETER" in recorded["16_tcp_port_clash"]
    assert "event close x SUCCESS timer" in recorded["17_tcp_graceful_close"]
    assert "L13 udp-configure -> ALREADY_STARTED" in recorded["30_udp_basic"]
    assert "L15 udp-configure -> ACCESS_DENIED" in recorded["30_udp_basic"]
    assert "event udp-receive r3 PORT_UNREACHABLE sync" in recorded["30_udp_basic"]


def test_normalise_maps_addresses_ports_and_connect_timing():
    symbols = dict(fwtest.QEMU_SYMBOLS, ECHO=5555)
    lines = ["noise @@ not at start", "@@ scenario s", "@@ L2 mode -> SUCCESS station=10.0.2.15 mask=255.255.255.0 "
             "port=1911 remote=10.0.2.2:5555 active=1", "@@ event connect c1 SUCCESS sync",
             "@@ event receive r1 SUCCESS sync len=1 data=41", "@@ L3 mode -> SUCCESS port=40123", "@@ end"]
    traces = fwtest.normalise(lines, symbols, literal_ports=(40123,))
    assert traces == {"s": ["L2 mode -> SUCCESS station=$SELF mask=$MASK port=eph remote=$HOST:$ECHO active=1",
                            "event connect c1 SUCCESS prompt", "event receive r1 SUCCESS sync len=1 data=41",
                            "L3 mode -> SUCCESS port=40123"]}


def test_compare_counts_differences_and_documented_deviations(tmp_path=None):
    fw = {"a": ["L1 x -> SUCCESS"], "b": ["L1 y -> SUCCESS", "event close x SUCCESS timer"],
          "c": ["L1 z -> NOT_FOUND"]}
    sim = {"a": ["L1 x -> SUCCESS"], "b": ["L1 y -> SUCCESS", "event close x SUCCESS prompt"],
           "c": ["L1 z -> SUCCESS"]}
    deviations = {"c": [("fw", "L1 z -> NOT_FOUND"), ("sim", "L1 z -> SUCCESS")]}
    results = fwtest.compare(["a", "b", "c"], fw, sim, deviations)
    assert [r[1] for r in results] == ["agree", "differ", "documented"]
    results.append(("d", "firmware-only", [("fw", "L1 udp-child -> SUCCESS")]))
    assert results[1][2] == [("fw", "event close x SUCCESS timer"), ("sim", "event close x SUCCESS prompt")]
    output = []
    assert fwtest.report(results, out=output.append, deviations=deviations) == 1
    assert output[-1] == "1 agree, 1 differ, 1 documented, 1 firmware-only"


def test_deviations_file_parses():
    deviations = fwtest.load_deviations()
    for name, lines in deviations.items():
        assert os.path.exists(os.path.join(fwtest.SCENARIO_DIR, name + ".scn")), name
        assert lines and all(side in ("fw", "sim") for side, _ in lines)


def _firmware_ready():
    if fwtest.missing_packages() and os.environ.get("FWTEST_INSTALL") == "1":
        fwtest.ensure_packages()  # CI on a clean machine: apt-get install the five Debian packages
    if fwtest.missing_packages():
        return False
    try:
        return subprocess.call(["unshare", "-rn", "true"]) == 0
    except OSError:
        return False


FIRMWARE_READY = _firmware_ready()
NOT_READY = "needs qemu-system-x86, ovmf, ipxe-qemu, gnu-efi, mtools and unprivileged `unshare -rn`"


@pytest.mark.firmware
@pytest.mark.skipif(not FIRMWARE_READY, reason=NOT_READY)
def test_ovmf_agrees_with_simulator():
    _fwtest_agrees(["--no-install"])


# The other EDK2 generations (tools/ovmf.py; the one above is the machine's own, 2022.11 on Debian
# 12), each on one NIC, with the RNG the generation needs: every scenario agrees with the simulator
# (docs/edk2.md section 10 says where generations differ).  tools/check runs them in the
# pytest-fwmatrix step.
GENERATION_RUNS = [("2020.11", "virtio-net"), ("2025.02", "e1000"), ("2026.08", "virtio-net")]


@pytest.mark.firmware
@pytest.mark.fwmatrix
@pytest.mark.skipif(not FIRMWARE_READY, reason=NOT_READY)
@pytest.mark.parametrize("generation,nic", GENERATION_RUNS,
                         ids=["%s-%s" % run for run in GENERATION_RUNS])
def test_ovmf_generation_agrees_with_simulator(generation, nic):
    import ovmf
    rng = ["--rng"] if ovmf.BY_NAME[generation].needs_rng else []
    output = _fwtest_agrees(["--ovmf", generation, "--nic", nic] + rng)  # fetched on first use
    assert "fwtest: OVMF %s" % generation in output


def _fwtest_agrees(args):
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "fwtest.py")] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # fwtest kills QEMU itself after QEMU_TIMEOUT; this is the outer guard
    import threading
    timer = threading.Timer(FIRMWARE_BUDGET, proc.kill)
    timer.start()
    try:
        output = proc.communicate()[0].decode("ascii", "replace")
    finally:
        timer.cancel()
    print(output)
    last = output.strip().splitlines()[-1] if output.strip() else ""
    assert re.match(r"^\d+ agree, 0 differ", last) is not None, output
    assert proc.returncode == 0, output
    return output


# --- tools/qemu_vm.py, shared with tools/bitsrun.py ------------------------------------------------
qemu_vm = fwtest.qemu_vm


def test_qemu_command_line():
    command = qemu_vm.qemu_command("disk.img", "vars.fd", hostfwd=[8000], monitor="/tmp/m.sock")
    text = " ".join(command)
    assert "q35,accel=tcg" in text and "readonly=on,file=%s" % qemu_vm.OVMF_CODE in text
    assert "virtio-blk-pci,drive=disk0,bootindex=1" in text and "virtio-net-pci,netdev=n0,bootindex=2" in text
    assert ",hostfwd=tcp:127.0.0.1:8000-:8000" in text
    assert command[command.index("-monitor") + 1] == "unix:/tmp/m.sock,server=on,wait=off"
    plain = qemu_vm.qemu_command("disk.img", "vars.fd")
    assert plain[plain.index("-monitor") + 1] == "none" and "hostfwd" not in " ".join(plain)


def _inside():
    """What a process in the new namespace sees: only a loopback, up."""
    import socket as host_socket
    server = host_socket.socket(host_socket.AF_INET, host_socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = host_socket.create_connection(server.getsockname(), timeout=5)
    client.close()
    server.close()
    with open("/proc/self/net/dev") as handle:  # this process's network namespace (sysfs is the mounter's)
        devices = sorted(line.split(":")[0].strip() for line in handle.readlines()[2:])
    return devices, qemu_vm.in_namespace()


def _fails():
    raise ValueError("inside")


@pytest.mark.skipif(not qemu_vm.can_unshare(), reason="needs user+network namespaces (unshare -rn)")
def test_in_new_namespace_runs_the_function_there():
    assert qemu_vm.in_new_namespace(_inside) == (["lo"], True)
    assert not qemu_vm.in_namespace()  # the caller stays where it was
    with pytest.raises(RuntimeError) as raised:
        qemu_vm.in_new_namespace(_fails)
    assert "ValueError: inside" in str(raised.value)
