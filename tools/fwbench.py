#!/usr/bin/env python3
"""Bulk transfer, round trips and connections in real BITS on OVMF, against a C program (docs/performance.md section 1).

    python3 tools/fwbench.py [--quick] [--rounds N] [--size MIB] [--only c,bitsnet,trampoline,stock]
                             [--profile] [--ab SECTIONS] [-v]

One sitting: every round boots, one after the other (never two QEMUs at once), each in its own
network namespace with tools/bench.py's peer (``--serve-peer``) on the namespace's loopback
(10.0.2.2 to the guest):

  c           tests/firmware/bench.c (gnu-efi, built here): EFI_TCP4 straight from C, 8 Receives of
              64 KiB outstanding -- the ceiling every other figure is divided by;
  bitsnet     BITS 2079's stock image with bitsnet installed (tools/bitsrun.py; the ``_efi`` hook
              path, what a user gets by dropping bitsnet into a built image): the leanest raw-EFI
              Python loop (tests/scripts/fwbench_guest.py, section raw), then the socket API;
  trampoline  the image tools/bits_build.py built (bitsnet's trampoline compiled in), when one is
              cached, with this tree's bitsnet installed over its own: the socket API;
  stock       BITS 2079's own ``_socket`` (no bitsnet): the socket API.

Figures (MB/s, or per second): bulk receive (C ``bulk_recv``; raw loop with and without batched
Polls; recv_into, recv, makefile().read(), urllib2), bulk send (C ``bulk_send``; ``raw_send``,
``send``: sendall), 1-byte round trips (``raw_trips``, ``trips``), connections (connect, one byte
each way, graceful close; C ``connections``; ``raw_conns``, the raw-EFI Python loop, ``conns``),
and two lab-shaped HTTP exchanges with the peer's HTTP/1.1 server, GETs of HTTP_BODY bytes: keep-alive
httplib requests (C ``http_keepalive``; ``httplib``) and a urllib2 connection per request (C
``http_conns``; ``urllib_conns``); C's Polls per exchange beside them.
Each is the median over the rounds, with its spread ((max - min) / median), and its ratio to C:
after section c has run the whole C set once, the guest runs the C program again right before
each Python measurement, with just that measurement (tests/scripts/fwbench_guest.py ``pair``),
and each Python figure is divided by the C figure just before it; the table shows the median of
those ratios and their spread (the host's load changes within a minute; the pairs share it).
``--profile`` adds one bitsnet boot that prints the receive path's counters and
one round trip and one connection call by call (sections profile and convprof of the guest
script; docs/performance.md sections 2 and 7); ``--ab fileab,copies`` one more bitsnet boot each
round with those guest sections (in-boot A/B comparisons, the cost of a copy; column ab, their
lines as notes); ``--ab convab --variants "A:module.NAME=value/B:..."`` alternates variants of
bitsnet's settings unit by unit for the conversational figures.  Exit status 0 when every boot ended normally.
"""

from __future__ import print_function

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bitsrun  # noqa: E402
import qemu_vm  # noqa: E402

FIRMWARE = os.path.join(ROOT, "tests", "firmware")
GUEST = os.path.join(ROOT, "tests", "scripts", "fwbench_guest.py")
BUILD = os.path.join(ROOT, "build", "fwbench")
C_RECEIVES = 8
BOOT_TIMEOUT = 600.0
# The guest's figure -> the C figure it is compared with.
C_OF = {"raw_recv": "bulk_recv", "raw_recv_batch": "bulk_recv", "recv_into": "bulk_recv", "recv": "bulk_recv",
        "makefile": "bulk_recv", "urllib": "bulk_recv", "raw_send": "bulk_send", "send": "bulk_send",
        "raw_trips": "round_trips", "trips": "round_trips", "conns": "connections", "raw_conns": "connections",
        "makefile_stdlib": "bulk_recv", "makefile_bitsnet": "bulk_recv", "urllib_stdlib": "bulk_recv",
        "urllib_bitsnet": "bulk_recv", "httplib": "http_keepalive", "urllib_conns": "http_conns"}
ORDER = ["bulk_recv", "raw_recv", "raw_recv_batch", "recv_into", "recv", "makefile", "urllib",
         "makefile_stdlib", "makefile_bitsnet", "urllib_stdlib", "urllib_bitsnet",
         "bulk_send", "raw_send", "send", "round_trips", "raw_trips", "trips", "connections", "raw_conns", "conns",
         "http_keepalive", "httplib", "http_conns", "urllib_conns", "round_trips_polls_x100",
         "connections_polls_x100", "http_keepalive_polls_x100", "http_conns_polls_x100"]
UNITS = {"round_trips": "/s", "raw_trips": "/s", "raw_conns": "/s", "trips": "/s", "connections": "/s", "conns": "/s",
         "http_keepalive": "/s", "httplib": "/s", "http_conns": "/s", "urllib_conns": "/s",
         "round_trips_polls_x100": "Polls per 100", "connections_polls_x100": "Polls per 100",
         "http_keepalive_polls_x100": "Polls per 100", "http_conns_polls_x100": "Polls per 100"}
HTTP_BODY = 256  # bytes of each lab-shaped HTTP response (GET /small/N: an XML-RPC or REST answer)


def start_peer():
    """tools/bench.py's peer in the namespace; placeholders for bitsrun (it ends with the namespace)."""
    import bench
    peer = bench.Peer()
    return {"peer": "%s:%d" % (qemu_vm.GUEST_HOST, peer.tcp), "peer_http": str(peer.http)}


# ------------------------------------------------------------------------------------------ C
def build_c(out):
    subprocess.check_call(["make", "-s", "-C", FIRMWARE, "OUT=" + out, os.path.join(out, "bench.efi")])
    return os.path.join(out, "bench.efi")


def _c_boot(efi_app, workdir, config, verbose):
    """In the namespace: the peer, a FAT disk with the app, QEMU; the app's "@@" lines."""
    import bench
    peer = bench.Peer()
    try:
        image = os.path.join(workdir, "disk.img")
        cfg = os.path.join(workdir, "CFG.TXT")
        with open(cfg, "w") as handle:
            handle.write("%d %s\n" % (peer.tcp, config.replace("HTTPPORT", str(peer.http))))
        with open(image, "wb") as handle:
            handle.truncate(16 * 1024 * 1024)
        for command in (["mformat", "-i", image, "::"], ["mmd", "-i", image, "::/EFI", "::/EFI/BOOT", "::/FWBENCH"],
                        ["mcopy", "-i", image, efi_app, "::/EFI/BOOT/BOOTX64.EFI"],
                        ["mcopy", "-i", image, cfg, "::/FWBENCH/CFG.TXT"]):
            subprocess.check_call(command)
        vars_copy = qemu_vm.fresh_vars(workdir)
        vm = qemu_vm.Qemu(qemu_vm.qemu_command(image, vars_copy), BOOT_TIMEOUT)
        lines = []
        try:
            for line in vm.lines():
                at = line.find("@@ ")
                if at < 0:
                    continue
                line = line[at + 3:].strip()
                lines.append(line)
                if verbose:
                    print("  c: " + line)
                if line == "end":
                    break
            vm.wait(20)
        finally:
            vm.close()
        return lines
    finally:
        peer.stop()


def run_c(efi_app, opts, verbose):
    """{figure: [values]} of one C boot (MB/s for bytes, per second for counts)."""
    config = "%d %d %d %d 1 %d HTTPPORT %d %d %d" % (opts.size, opts.send_size, opts.trips, opts.conns, C_RECEIVES,
                                                    opts.http_reqs, opts.http_conns, HTTP_BODY)
    workdir = tempfile.mkdtemp(prefix="c-", dir=BUILD)
    lines = qemu_vm.in_new_namespace(_c_boot, efi_app, workdir, config, verbose)
    figures, notes = {}, []
    for line in lines:
        words = line.split()
        if words[:1] == ["fig"] and len(words) == 3:
            value = float(words[2])
            figures.setdefault(words[1], []).append(value / 1e6 if words[1] in ("bulk_recv", "bulk_send") else value)
        elif words and words[0] in ("failures", "bulk_recv_polls_per_64k") or "failed" in line or "timeout" in line:
            notes.append(line)
    return figures, notes


# ------------------------------------------------------------------------------------------ BITS
class _ExtraFiles(object):
    """bitsrun with files of ours beside the program in /boot/bitsrun/ (the C app for section c)."""

    def __init__(self, files):
        self.files = files
        self.original = None

    def __enter__(self):
        self.original = original = bitsrun.prepare_tree
        files = self.files

        def prepare_tree(tree, *args, **kwargs):
            original(tree, *args, **kwargs)
            for name, path in files.items():
                shutil.copyfile(path, os.path.join(tree, "boot", "bitsrun", name))
        bitsrun.prepare_tree = prepare_tree
        return self

    def __exit__(self, *exc):
        bitsrun.prepare_tree = self.original


def run_bits(opts, sections, verbose, stock=False, image=None, efi_app=None):
    """{figure: [values]} of one BITS boot; the C figures (section c) are named "c:NAME"."""
    if efi_app is None:
        sections = [name for name in sections if name != "c"]
    args = ["--peer", "{peer}", "--http", "{peer_http}", "--size", str(opts.size), "--send-size",
            str(opts.send_size), "--trips", str(opts.trips), "--conns", str(opts.conns), "--http-reqs",
            str(opts.http_reqs), "--http-conns", str(opts.http_conns), "--http-body", str(HTTP_BODY)] + \
        (["--variants", opts.variants] if opts.variants else []) + \
        (["--reps", str(opts.reps)] if opts.reps else []) + sections
    with _ExtraFiles({"bench.efi": efi_app} if efi_app else {}):
        result = bitsrun.run(script=GUEST, args=args, stock=stock, image=image, setup=start_peer,
                             timeout=BOOT_TIMEOUT, echo="output" if verbose else None)
    figures, notes = {}, []
    for line in result.output:
        words = line.split()
        if words[:1] in (["info"], ["prof"], ["copy"], ["batch"], ["sendab"], ["conv"], ["convab"]):
            notes.append(line)
    # The console in order: the C app's own "@@ fig" lines (unframed, straight to the serial port)
    # and the program's framed "|fig" lines.  Each Python figure is paired with the C figure of
    # its kind just before it (the guest runs one right before each measurement): "ratio:NAME".
    last_c = {}
    for line in result.console:
        if line.startswith("|fig "):
            words = line[1:].split()
            if len(words) == 3:
                value = float(words[2])
                figures.setdefault(words[1], []).append(value)
                ref = last_c.get(C_OF.get(words[1]))
                if ref:
                    figures.setdefault("ratio:" + words[1], []).append(value / ref)
            continue
        at = line.find("@@ ")
        words = line[at + 3:].split() if at >= 0 and not line.startswith(("|", "+")) else []
        if words[:1] == ["fig"] and len(words) == 3:
            value = float(words[2])
            value = value / 1e6 if words[1] in ("bulk_recv", "bulk_send") else value
            figures.setdefault("c:" + words[1], []).append(value)
            last_c[words[1]] = value
        elif words and words[0].endswith("_polls_x100"):
            figures.setdefault("c:" + words[0], []).append(float(words[1]))
        elif words[:1] in (["failures"], ["timeout"], ["connect-failed"], ["configure-failed"]):
            if words != ["failures", "0"]:
                notes.append("c: " + " ".join(words))
    if result.status != 0:
        notes.append("exit status %s; last lines: %s" % (result.status, " | ".join(result.output[-5:])))
    return figures, notes, result.seconds


def trampoline_image():
    """The newest image tools/bits_build.py cached (any key: this tree's bitsnet goes over it)."""
    root = os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")), "bitsnet", "bits-build")
    try:
        import bits_build
        root = os.path.join(bits_build.cache_root(), "bits-build")
    except Exception:
        pass
    found = []
    if os.path.isdir(root):
        for key in os.listdir(root):
            path = os.path.join(root, key, "bits.img")
            if os.path.isfile(path):
                found.append((os.path.getmtime(path), path))
    return max(found)[1] if found else None


# ------------------------------------------------------------------------------------------ report
def median(values):
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0


def report(runs, out=print):
    """runs: {column: {figure: [values]}}; one table: each figure's median and spread, and its
    ratio to C -- the median of the per-measurement ratios, each Python figure divided by the C
    figure measured right before it in the same boot (their spread beside), else the ratio of the
    medians.  Column "c" (the C program booted alone) is shown for reference."""
    out("%-11s %-16s %10s %7s %3s %8s %7s" % ("boot", "figure", "median", "spread", "n", "vs C", "spread"))
    for column in ("bitsnet", "ab", "trampoline", "stock", "c"):
        figures = runs.get(column)
        if not figures:
            continue
        c = figures if column == "c" else dict((k[2:], v) for k, v in figures.items() if k.startswith("c:"))
        for name in ORDER:
            values, label = figures.get(name), name
            if name in c:
                values, label = c[name], ("C " + name) if column != "c" else name
            if not values:
                continue
            mid = median(values)
            spread = "%.0f%%" % ((max(values) - min(values)) / mid * 100) if mid else "-"
            ratios = figures.get("ratio:" + name)
            ref = c.get(C_OF.get(name, name))
            if name in c:
                ratio, ratio_spread = "1", ""
            elif ratios:
                mid_ratio = median(ratios)
                ratio = "%.3f" % mid_ratio
                ratio_spread = "%.0f%%" % ((max(ratios) - min(ratios)) / mid_ratio * 100) if mid_ratio else "-"
            else:
                ratio = "%.3f" % (mid / median(ref)) if ref and median(ref) else "-"
                ratio_spread = ""
            unit = UNITS.get(name, "MB/s")
            out("%-11s %-16s %10.3f %7s %3d %8s %7s  %s" % (column, label, mid, spread, len(values), ratio,
                                                             ratio_spread, unit))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, 4 MiB transfers")
    parser.add_argument("--rounds", type=int, default=None, help="boots of each kind (default 5, --quick 1)")
    parser.add_argument("--size", type=float, default=None,
                        help="MiB per transfer (default 8, --quick 4; 16 MiB makefile().read() exhausts BITS's heap)")
    parser.add_argument("--trips", type=int, default=300)
    parser.add_argument("--conns", type=int, default=20)
    parser.add_argument("--http-reqs", type=int, default=100, help="keep-alive HTTP requests (httplib)")
    parser.add_argument("--http-conns", type=int, default=20, help="HTTP requests, a connection each (urllib2)")
    parser.add_argument("--only", default="bitsnet,trampoline,stock",
                        help="the boots to run, comma-separated (default bitsnet,trampoline,stock; also c: "
                             "the C program booted alone)")
    parser.add_argument("--profile", nargs="?", const="profile,convprof", metavar="SECTIONS",
                        help="one more bitsnet boot: the receive path's counters (profile) and one round trip "
                             "and one connection call by call (convprof); default both")
    parser.add_argument("--ab", metavar="SECTIONS", help="one more bitsnet boot each round running these guest "
                        "sections (tests/scripts/fwbench_guest.py: fileab, copies, batch, sendab), column ab")
    parser.add_argument("--variants", help="for --ab convab: \"NAME:module.ATTR=value;.../NAME2:...\" "
                        "(bitsnet modules), alternated in one boot")
    parser.add_argument("--reps", type=int, default=None, help="alternations of an A/B section (guest default 5)")
    parser.add_argument("-v", "--verbose", action="store_true")
    opts = parser.parse_args(argv)
    # Five boots of each kind: with three, one slow boot in two moved a median by 0.15 (the
    # host's two cores are shared; docs/benchmarks.md section 2).
    rounds = opts.rounds or (1 if opts.quick else 5)
    opts.size = int((opts.size or (4 if opts.quick else 8)) * 1024 * 1024)
    opts.send_size = opts.size
    if not os.path.isdir(BUILD):
        os.makedirs(BUILD)
    problem = bitsrun.unavailable()
    if problem:
        print("fwbench: cannot run: %s" % problem)
        return 2
    only = set(opts.only.split(","))
    efi_app = build_c(BUILD)
    tramp = trampoline_image() if "trampoline" in only else None
    runs = {}
    notes = []
    ok = True
    began = time.time()

    def add(column, figures):
        for name, values in figures.items():
            runs.setdefault(column, {}).setdefault(name, []).extend(values)

    for number in range(rounds):
        if "c" in only:
            figures, more = run_c(efi_app, opts, opts.verbose)
            add("c", figures)
            notes.extend("round %d c: %s" % (number, n) for n in more)
            print("round %d c: %s" % (number, _brief(figures)))
        if "bitsnet" in only:
            figures, more, seconds = run_bits(opts, ["c", "api", "raw"], opts.verbose, efi_app=efi_app)
            add("bitsnet", figures)
            notes.extend("round %d bitsnet: %s" % (number, n) for n in more)
            print("round %d bitsnet (%.0f s): %s" % (number, seconds, _brief(figures)))
            ok = ok and "exit status" not in " ".join(more)
        if opts.ab:
            figures, more, seconds = run_bits(opts, ["c"] + opts.ab.split(","), opts.verbose, efi_app=efi_app)
            add("ab", figures)
            notes.extend("round %d ab: %s" % (number, n) for n in more)
            print("round %d ab (%.0f s): %s" % (number, seconds, _brief(figures)))
        if tramp:
            figures, more, seconds = run_bits(opts, ["c", "api"], opts.verbose, image=tramp, efi_app=efi_app)
            add("trampoline", figures)
            notes.extend("round %d trampoline: %s" % (number, n) for n in more)
            print("round %d trampoline (%.0f s): %s" % (number, seconds, _brief(figures)))
        if "stock" in only:
            stock_opts = argparse.Namespace(**vars(opts))
            stock_opts.size = stock_opts.send_size = max(opts.size // 4, 1024 * 1024)  # ~1 MB/s: keep the boot short
            figures, more, seconds = run_bits(stock_opts, ["c", "api"], opts.verbose, stock=True, efi_app=efi_app)
            add("stock", figures)
            notes.extend("round %d stock: %s" % (number, n) for n in more)
            print("round %d stock (%.0f s): %s" % (number, seconds, _brief(figures)))
        sys.stdout.flush()
    if opts.profile:
        figures, more, seconds = run_bits(opts, opts.profile.split(","), opts.verbose, efi_app=efi_app)
        notes.extend(more)
    print("")
    print("fwbench: %d round(s), %.0f s, transfers of %d bytes; QEMU TCG + OVMF; medians" % (
        rounds, time.time() - began, opts.size))
    report(runs)
    for note in notes:
        print("note: " + note)
    return 0 if ok else 1


def _brief(figures):
    return " ".join("%s=%.2f" % (name, median(values)) for name, values in sorted(figures.items())
                    if not name.startswith("c:"))


if __name__ == "__main__":
    sys.exit(main())
