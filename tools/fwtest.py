"""Replay the fwtest scenarios on real OVMF in QEMU and on the simulator, and compare the traces.

    python3 tools/fwtest.py [--sim-only | --qemu-only] [--scenario GLOB ...] [--keep DIR] [--no-install]
                            [--ovmf NAME|CODE,VARS] [--nic NIC] [--rng | --no-rng]

What it does (docs/simulator.md section 6):
  1. makes sure the Debian packages are there (qemu-system-x86, ovmf, ipxe-qemu, gnu-efi, mtools;
     ``apt-get install`` when running as root, else it says what to install);
  2. builds tests/firmware/probe.c with gnu-efi (tests/firmware/Makefile) into build/fwtest/;
  3. writes a FAT image with the probe as \\EFI\\BOOT\\BOOTX64.EFI and the scenarios as \\FWTEST\\SCN.TXT;
  4. re-runs itself inside a new network namespace (``unshare -rn``: only a loopback exists, so
     nothing leaves the machine), starts the host peers on that loopback, boots OVMF in QEMU
     (q35, TCG, disk bootindex=1, virtio-net bootindex=2, user-mode network; docs/edk2.md section 9) and reads
     the probe's trace from the serial console.  ``--ovmf`` boots another generation of EDK2 (tools/ovmf.py,
     fetched before entering the namespace), ``--nic`` another NIC model, ``--rng`` adds virtio-rng-pci
     (docs/edk2.md section 10);
  5. runs the same scenarios through the simulator (tools/efisim/scenario.py) against the same peers;
  6. normalises both traces (addresses and peer ports become $SYMBOLS) and compares them scenario by
     scenario: statuses, completion order, synchronous-vs-queued completion, data, and timing only in
     coarse classes (sync / prompt < 1 s / timer).  Differences recorded in tests/firmware/DEVIATIONS
     are counted separately.  The last line is ``N agree, N differ`` (plus the documented count).
Steps 1 and 4 (packages, namespace, the QEMU command line) are tools/qemu_vm.py, shared with
tools/bitsrun.py.

Scenario symbols: $HOST (host peers: 10.0.2.2 on QEMU = QEMU's host alias, 127.0.0.1 on the simulator),
$SELF (the DHCP address: 10.0.2.15 / 127.0.0.2), $DNS, $MASK, and one port per host peer:
$ECHO (echoes until EOF), $GREET (sends 16 bytes, stays open), $FIN (16 bytes then FIN), $LATEFIN
(FIN after 0.3 s, no data), $SILENT (never sends), $RESET (RST after 0.3 s), $CLOSED (nobody listens);
$UECHO (UDP echo), $ULATE (UDP echo after 0.3 s);
$LISTEN is the port
for listeners inside the firmware, which "host connect $LISTEN [TEXT]" lines reach (hostfwd on QEMU).

Timing rule: a Connect completion comes from network input; on real firmware the timer tick that is
dispatched when Connect restores its TPL can deliver the SYN-ACK before Connect returns (seen on OVMF),
so for connect tokens "sync" is compared as "prompt".  The same race can complete any token that waits
for network input inside an unrelated call (a UDP echo answering while Transmit still runs), so scenarios
post a receive only after its answer has arrived ("settle"), or against a peer that answers late.
Exit status: 0 when nothing differs beyond the documented deviations.
"""

from __future__ import print_function

import argparse
import fnmatch
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ovmf  # noqa: E402
import qemu_vm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRMWARE_DIR = os.path.join(ROOT, "tests", "firmware")
SCENARIO_DIR = os.path.join(FIRMWARE_DIR, "scenarios")
DEVIATIONS = os.path.join(FIRMWARE_DIR, "DEVIATIONS")
RECORDED = os.path.join(FIRMWARE_DIR, "ovmf-trace.txt")  # the last OVMF trace, normalised (--record)
BUILD = os.path.join(ROOT, "build", "fwtest")

PACKAGES = ["qemu-system-x86", "ovmf", "ipxe-qemu", "gnu-efi", "mtools"]

QEMU_SYMBOLS = {"HOST": "10.0.2.2", "SELF": "10.0.2.15", "DNS": "10.0.2.3", "MASK": "255.255.255.0"}
SIM_SYMBOLS = {"HOST": "127.0.0.1", "SELF": "127.0.0.2", "DNS": "127.0.0.3", "MASK": "255.0.0.0"}
LISTEN_PORT = 40200  # $LISTEN: listeners inside the firmware (hostfwd on QEMU); fixed, the namespace is ours
GREETING = b"0123456789abcdef"
QEMU_TIMEOUT = 240.0  # seconds for the whole QEMU run before it is killed
_clock = getattr(time, "monotonic", time.time)


# ------------------------------------------------------------------------------------------ packages

def missing_packages():
    return qemu_vm.missing_packages(PACKAGES)


def ensure_packages(install=True):
    """Install what is missing with apt-get (CI starts from a clean machine); True when all present."""
    return qemu_vm.ensure_packages(PACKAGES, install, tool="fwtest")


# ------------------------------------------------------------------------------------------ scenarios

PRELUDE = ("_dhcp", "ip4 setpolicy dhcp\nip4 waitaddress 30000\n")


def load_scenarios(patterns=None):
    """[(name, text)] in file order; ``patterns``: fnmatch globs on the name.  Only 00_ip4_nomapping
    runs before DHCP; a selection without it starts with the uncompared PRELUDE, which gets an address."""
    found = []
    for filename in sorted(os.listdir(SCENARIO_DIR)):
        if not filename.endswith(".scn"):
            continue
        name = filename[:-4]
        if patterns and not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        with open(os.path.join(SCENARIO_DIR, filename)) as handle:
            found.append((name, handle.read()))
    if found and found[0][0] != "00_ip4_nomapping":
        found.insert(0, PRELUDE)
    return found


def scenario_text(scenarios, symbols):
    """SCN.TXT: "scenario NAME" headers and the scenario lines with $SYMBOLs replaced."""
    def substitute(match):
        key = match.group(1)
        if key not in symbols:
            raise KeyError("scenario uses unknown symbol $%s" % key)
        return str(symbols[key])
    out = []
    for name, text in scenarios:
        out.append("scenario " + name)
        out.extend(re.sub(r"\$([A-Z]+)", substitute, line) for line in text.splitlines())
    return "\n".join(out) + "\n"


def normalise(lines, symbols, literal_ports=()):
    """{scenario: [trace lines]} with values turned back into $SYMBOLs and ephemeral ports as "eph"."""
    reverse = sorted(((str(v), "$" + k) for k, v in symbols.items()), key=lambda kv: -len(kv[0]))
    ports = dict((str(v), "$" + k) for k, v in symbols.items() if isinstance(v, int))
    result = {}  # type: dict
    current = None
    for line in lines:
        if not line.startswith("@@ "):
            continue
        text = line[3:].strip()
        if text.startswith("scenario "):
            current = text.split(None, 1)[1]
            result[current] = []
            continue
        if current is None or text == "end":
            continue

        def port(match):
            value = match.group(2)
            if value in ports:
                return match.group(1) + ports[value]
            if value != "0" and int(value) not in literal_ports:
                return match.group(1) + "eph"
            return match.group(0)
        text = re.sub(r"(port=|:)(\d+)", port, text)
        if text.startswith("event connect ") and text.endswith(" sync"):
            text = text[:-len("sync")] + "prompt"  # see the timing rule in the module docstring
        for value, name in reverse:
            if "." in value:
                text = re.sub(r"(?<![\d.])%s(?![\d.])" % re.escape(value), name, text)
        result[current].append(text)
    return result


# ------------------------------------------------------------------------------------------ host peers

class Peers(object):
    """The host side: one listener per behaviour on 127.0.0.1, each in its own thread."""

    BEHAVIOURS = ("ECHO", "GREET", "FIN", "LATEFIN", "SILENT", "RESET")

    def __init__(self):
        self.ports = {"LISTEN": LISTEN_PORT}
        self.sockets = []
        self.threads = []
        self.stopping = False
        for name in self.BEHAVIOURS:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            listener.settimeout(0.2)
            self.ports[name] = listener.getsockname()[1]
            self.sockets.append(listener)
            thread = threading.Thread(target=self._serve, args=(name, listener))
            thread.daemon = True
            thread.start()
            self.threads.append(thread)
        for name, delay in (("UECHO", 0.0), ("ULATE", 0.3)):
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.bind(("127.0.0.1", 0))
            udp.settimeout(0.2)
            self.ports[name] = udp.getsockname()[1]
            self.sockets.append(udp)
            thread = threading.Thread(target=self._udp_echo, args=(udp, delay))
            thread.daemon = True
            thread.start()
            self.threads.append(thread)
        closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        closed.bind(("127.0.0.1", 0))
        self.ports["CLOSED"] = closed.getsockname()[1]
        closed.close()  # nothing listens there: connects get RST

    def _serve(self, name, listener):
        while not self.stopping:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            except (OSError, socket.error):
                return
            thread = threading.Thread(target=self._session, args=(name, conn))
            thread.daemon = True
            thread.start()

    def _udp_echo(self, udp, delay):
        while not self.stopping:
            try:
                data, peer = udp.recvfrom(65536)
                if delay:
                    time.sleep(delay)  # the datagrams of one scenario are few: answering in line is fine
                udp.sendto(data, peer)
            except socket.timeout:
                continue
            except (OSError, socket.error):
                return

    def _session(self, name, conn):
        conn.settimeout(30.0)
        try:
            if name in ("GREET", "FIN"):
                conn.sendall(GREETING)
            if name == "FIN":
                conn.shutdown(socket.SHUT_WR)
            if name == "LATEFIN":
                time.sleep(0.3)
                conn.shutdown(socket.SHUT_WR)
            if name == "RESET":
                time.sleep(0.3)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return  # close() below sends the RST
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                if name == "ECHO":
                    conn.sendall(data)
        except (OSError, socket.error, socket.timeout):
            pass
        finally:
            conn.close()

    def close(self):
        self.stopping = True
        for thread in self.threads:  # each accept loop wakes within its 0.2 s timeout
            thread.join(2.0)
        for listener in self.sockets:
            listener.close()


# ------------------------------------------------------------------------------------------ QEMU half

def build_probe(out):
    """make -C tests/firmware into ``out``; the path of probe.efi."""
    subprocess.check_call(["make", "-s", "-C", FIRMWARE_DIR, "OUT=" + out])
    return os.path.join(out, "probe.efi")


def make_image(probe, scn_text, workdir):
    """A 16 MiB FAT disk (no partition table: OVMF reads it as a whole-disk file system)."""
    image = os.path.join(workdir, "disk.img")
    scn = os.path.join(workdir, "SCN.TXT")
    with open(scn, "w") as handle:
        handle.write(scn_text)
    if os.path.exists(image):
        os.unlink(image)
    with open(image, "wb") as handle:
        handle.truncate(16 * 1024 * 1024)
    for command in (["mformat", "-i", image, "::"],
                    ["mmd", "-i", image, "::/EFI", "::/EFI/BOOT", "::/FWTEST"],
                    ["mcopy", "-i", image, probe, "::/EFI/BOOT/BOOTX64.EFI"],
                    ["mcopy", "-i", image, scn, "::/FWTEST/SCN.TXT"]):
        subprocess.check_call(command)
    return image


def host_action(words, peers, self_address):
    """Act for a "host VERB ARGS" line: ``connect PORT [TEXT]`` opens a connection to the firmware's
    listener (through hostfwd on QEMU) and sends TEXT; the socket is kept until the run ends."""
    if not words:
        return
    if words[0] == "connect" and len(words) > 1:
        def run():
            try:
                conn = socket.create_connection((self_address, int(words[1])), timeout=10)
                peers.sockets.append(conn)
                if len(words) > 2:
                    conn.sendall(words[2].encode("ascii"))
            except (OSError, socket.error, socket.timeout) as exc:
                print("fwtest: host connect failed: %s" % exc)
        thread = threading.Thread(target=run)
        thread.daemon = True
        thread.start()


def run_qemu(scenarios, peers, workdir, verbose=False, machine=None):
    """Boot OVMF with the probe; (raw serial lines, seconds).  ``machine``: qemu_vm.qemu_command's
    firmware, nic and rng."""
    machine = machine or {}
    probe = build_probe(workdir)
    symbols = dict(QEMU_SYMBOLS, **peers.ports)
    image = make_image(probe, scenario_text(scenarios, symbols), workdir)
    vars_copy = qemu_vm.fresh_vars(workdir, machine.get("firmware"))  # fresh: no persisted Ip4Config2 policy
    vm = qemu_vm.Qemu(qemu_vm.qemu_command(image, vars_copy, [LISTEN_PORT], **machine), QEMU_TIMEOUT)
    lines = []
    try:
        for line in vm.lines():
            at = line.find("@@ ")
            if at < 0:
                continue
            line = line[at:]
            lines.append(line)
            if verbose:
                print("  fw: " + line)
            if line.startswith("@@ host "):
                host_action(line.split()[2:], peers, "127.0.0.1")
            if line == "@@ end":
                break
        vm.wait(20)  # the probe shuts the machine down after "@@ end"
    finally:
        vm.close()
    return lines, vm.seconds()


# ------------------------------------------------------------------------------------------ simulator half

def run_simulator(scenarios, peers, verbose=False, station=SIM_SYMBOLS["SELF"]):
    """Boot a simulated machine (DHCP hands out ``station``/8, by default 127.0.0.2, gateway $HOST,
    DNS $DNS) and run the scenarios through efisim.scenario.Interpreter; (trace lines, seconds).

    Two runs at once on one host need two stations: the listeners of scenarios that connect to
    $SELF ($LISTEN) are host sockets on the station address, so two machines both claiming
    127.0.0.2 would accept each other's connections."""
    for path in (ROOT, os.path.join(ROOT, "tools"), os.path.join(ROOT, "tools", "efisim", "boot_python")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from efisim import machine as sim_machine
    from efisim import scenario as sim_scenario
    symbols = dict(SIM_SYMBOLS, SELF=station, **peers.ports)
    lines = []

    def out(line):
        lines.append(line)
        if verbose:
            print("  sim: " + line)
    started = _clock()
    booted = sim_machine.boot(sim_machine.MachineConfig(address=station + "/8", gateway="127.0.0.1",
                                                        dns_servers=["127.0.0.3:53"]))
    try:
        interpreter = sim_scenario.Interpreter(out, host=lambda words: host_action(words, peers, station))
        interpreter.run_text(scenario_text(scenarios, symbols))
        crashes = list(booted.firmware.crashes)
    finally:
        booted.shutdown()
    for crash in crashes:
        lines.append("@@ crash " + crash.splitlines()[-1] if crash else "@@ crash")
    return lines, _clock() - started


# ------------------------------------------------------------------------------------------ comparison

def load_deviations(path=DEVIATIONS):
    """{scenario: [(side, line)]}: blocks "[scenario]" followed by "fw: LINE" / "sim: LINE" lines (the
    diff lines that are known and explained); other lines are the explanation."""
    deviations = {}  # type: dict
    if not os.path.exists(path):
        return deviations
    current = None
    with open(path) as handle:
        for raw in handle:
            line = raw.rstrip("\n")
            match = re.match(r"^\[(\S+)\]\s*$", line)
            if match:
                current = deviations.setdefault(match.group(1), [])
            elif current is not None and (line.startswith("fw: ") or line.startswith("sim: ")):
                side, _, text = line.partition(": ")
                current.append((side, text.strip()))
    return deviations


def diff_lines(fw, sim):
    """The lines only one side has, in order: [("fw", line) | ("sim", line)] (a multiset difference
    that keeps order; identical traces give [])."""
    import difflib
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, fw, sim, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        out.extend(("fw", line) for line in fw[i1:i2])
        out.extend(("sim", line) for line in sim[j1:j2])
    return out


def uses_udp(text):
    return any(line.split()[:1] == ["udp"] for line in text.splitlines())


def simulator_has_udp4():
    """UDP scenarios need the simulator's UDP4 driver and the interpreter's UDP verbs."""
    if not os.path.exists(os.path.join(ROOT, "tools", "efisim", "udp4.py")):
        return False
    for path in (ROOT, os.path.join(ROOT, "tools"), os.path.join(ROOT, "tools", "efisim", "boot_python")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from efisim import scenario as sim_scenario
    return hasattr(sim_scenario.Interpreter, "do_udp")


def compare(names, fw, sim, deviations, firmware_only=()):
    """[(name, verdict, diff)] with verdict "agree" | "differ" | "documented" | "missing" |
    "firmware-only" (the simulator cannot run it yet; the firmware trace is shown)."""
    results = []
    for name in names:
        if name in firmware_only:
            results.append((name, "firmware-only", [("fw", line) for line in fw.get(name, ["(no trace)"])]))
            continue
        if name not in fw or name not in sim:
            results.append((name, "missing", [("fw" if name not in fw else "sim", "(no trace)")]))
            continue
        diff = diff_lines(fw[name], sim[name])
        if not diff:
            results.append((name, "agree", diff))
        elif name in deviations and sorted(diff) == sorted(deviations[name]):
            results.append((name, "documented", diff))
        else:
            results.append((name, "differ", diff))
    return results


def write_recorded(traces, names, path=RECORDED):
    with open(path, "w") as handle:
        handle.write("# OVMF trace recorded by `python3 tools/fwtest.py --record` (normalised); the simulator\n"
                     "# half (`--sim-only`, tests/test_fwtest.py) compares against it when QEMU is not run.\n")
        for name in names:
            handle.write("[%s]\n" % name)
            for line in traces.get(name, []):
                handle.write(line + "\n")


def read_recorded(path=RECORDED):
    traces = {}  # type: dict
    current = None
    with open(path) as handle:
        for raw in handle:
            line = raw.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            match = re.match(r"^\[(\S+)\]$", line)
            if match:
                current = traces.setdefault(match.group(1), [])
            elif current is not None:
                current.append(line)
    return traces


def report(results, out=print, deviations=None):
    for name, verdict, diff in results:
        out("%-28s %s" % (name, verdict))
        if verdict != "agree":
            for side, line in diff:
                out("    %-4s %s" % (side + ":", line))
    agree = sum(1 for r in results if r[1] == "agree")
    documented = [r[0] for r in results if r[1] == "documented"]
    only = [r[0] for r in results if r[1] == "firmware-only"]
    differ = len(results) - agree - len(documented) - len(only)
    if only:
        out("firmware-only, simulator lacks UDP4: %s" % ", ".join(only))
    if documented:
        out("documented deviations (tests/firmware/DEVIATIONS): %s" % ", ".join(documented))
    stale = [r[0] for r in results if r[1] == "agree" and r[0] in (deviations or {})]
    if stale:
        out("deviations no longer observed (remove from DEVIATIONS): %s" % ", ".join(stale))
    out("%d agree, %d differ%s%s" % (agree, differ, (", %d documented" % len(documented)) if documented else "",
                                    (", %d firmware-only" % len(only)) if only else ""))
    return differ


# ------------------------------------------------------------------------------------------ main

def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sim-only", action="store_true",
                        help="run only the simulator half and compare it with the recorded OVMF trace")
    parser.add_argument("--record", action="store_true",
                        help="after the OVMF run, store its trace as tests/firmware/ovmf-trace.txt")
    parser.add_argument("--qemu-only", action="store_true", help="run only the firmware half (print its trace)")
    parser.add_argument("--scenario", action="append", help="glob of scenario names (repeatable)")
    parser.add_argument("--keep", help="directory for the probe, image, NV store and raw traces, kept afterwards "
                        "(default: a temporary build/fwtest/run-* removed at the end; traces copied to build/fwtest)")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install")
    parser.add_argument("-v", "--verbose", action="store_true", help="echo trace lines as they arrive")
    parser.add_argument("--ovmf", metavar="NAME|CODE,VARS", help="the firmware: %s (fetched on first use) or a "
                        "CODE,VARS pair (default: the machine's own ovmf package)" % ", ".join(ovmf.NAMES))
    parser.add_argument("--nic", default="virtio-net", choices=qemu_vm.NIC_NAMES, help="the NIC model")
    rng = parser.add_mutually_exclusive_group()
    rng.add_argument("--rng", dest="rng", action="store_true", default=False, help="add a virtio-rng-pci device")
    rng.add_argument("--no-rng", dest="rng", action="store_false", help="no RNG device (the default)")
    args = parser.parse_args(argv)
    if args.record and (args.ovmf or args.nic != "virtio-net" or args.rng):
        raise SystemExit("fwtest: --record keeps the trace of the default machine only (no --ovmf, --nic, --rng)")
    scenarios = load_scenarios(args.scenario)
    if not scenarios:
        raise SystemExit("fwtest: no scenario matches")
    names = [name for name, _ in scenarios if not name.startswith("_")]
    literal = set(int(p) for _, text in scenarios for p in re.findall(r"port=(\d+)", text))
    if not args.sim_only and not qemu_vm.in_namespace():
        if not ensure_packages(install=not args.no_install):
            return 2
        try:  # fetched here: the namespace has no network
            ovmf.resolve(args.ovmf, install=not args.no_install)
        except ovmf.FirmwareError as exc:
            print("fwtest: %s" % exc, file=sys.stderr)
            return 2
        return qemu_vm.enter_namespace(__file__, argv, tool="fwtest")
    if qemu_vm.in_namespace():
        qemu_vm.loopback_up()
    # Each run gets its own directory for the probe, the disk image and the NV store, so that two runs
    # (a developer's and the test suite's) never share a disk image; the traces are copied to build/fwtest.
    if not os.path.isdir(BUILD):
        os.makedirs(BUILD)
    workdir = args.keep or tempfile.mkdtemp(prefix="run-", dir=BUILD)
    if not os.path.isdir(workdir):
        os.makedirs(workdir)
    try:
        return _run(args, scenarios, names, literal, workdir)
    finally:
        if not args.keep:
            for name in ("trace-fw.txt", "trace-sim.txt"):
                if os.path.exists(os.path.join(workdir, name)):
                    shutil.copyfile(os.path.join(workdir, name), os.path.join(BUILD, name))
            shutil.rmtree(workdir, ignore_errors=True)


def _run(args, scenarios, names, literal, workdir):
    """Both halves and the comparison (main's body once the run directory exists)."""
    peers = Peers()
    try:
        fw = sim = None
        if not args.sim_only:
            firmware = ovmf.resolve(args.ovmf, install=False)
            machine = {"firmware": firmware, "nic": args.nic, "rng": args.rng}
            raw, seconds = run_qemu(scenarios, peers, workdir, args.verbose, machine)
            with open(os.path.join(workdir, "trace-fw.txt"), "w") as handle:
                handle.write("\n".join(raw) + "\n")
            print("fwtest: OVMF %s (%s%s) run took %.1f s (%d trace lines)" % (
                firmware.version or firmware.label, args.nic, ", virtio-rng" if args.rng else "", seconds, len(raw)))
            fw = normalise(raw, dict(QEMU_SYMBOLS, **peers.ports), literal)
        firmware_only = set()
        if not simulator_has_udp4():
            firmware_only = set(name for name, text in scenarios if uses_udp(text))
        if not args.qemu_only:
            raw, seconds = run_simulator([sc for sc in scenarios if sc[0] not in firmware_only], peers, args.verbose)
            with open(os.path.join(workdir, "trace-sim.txt"), "w") as handle:
                handle.write("\n".join(raw) + "\n")
            print("fwtest: simulator run took %.1f s" % seconds)
            sim = normalise(raw, dict(SIM_SYMBOLS, **peers.ports), literal)
    finally:
        peers.close()
    if fw is not None and args.record:
        write_recorded(fw, names)
        print("fwtest: recorded the OVMF trace in %s" % os.path.relpath(RECORDED, ROOT))
    if fw is None and os.path.exists(RECORDED):
        fw = read_recorded()
        print("fwtest: comparing with the recorded OVMF trace %s" % os.path.relpath(RECORDED, ROOT))
    if fw is None or sim is None:
        for name in names:
            print("[%s]" % name)
            for line in (fw or sim).get(name, ["(no trace)"]):
                print("    " + line)
        return 0
    deviations = load_deviations()
    differ = report(compare(names, fw, sim, deviations, firmware_only), deviations=deviations)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
