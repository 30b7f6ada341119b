"""Run a Python program inside real BITS on OVMF under QEMU and get its console output and exit status.

    python3 tools/bitsrun.py [--image PATH] [--stock | --as-is] [--lab] [--timeout S] [--hostfwd PORT ...]
                             [--restore-timer | --no-restore-timer] [--keep DIR] [-v]
                             [--ovmf NAME|CODE,VARS] [--nic NIC] [--rng | --no-rng]
                             (SCRIPT | -m MODULE | -c CODE) [ARGS ...]

What it does:
  1. the BITS ESP: ``--image`` is a FAT image (``.img``), an unpacked tree (holding ``efi/`` and
     ``boot/``) or a release tarball (``.tar.xz``/``.tar.gz``); by default BITS 2079's x86_64 EFI
     build: the release tarball, found as docs/testing.md section 4 says.  It is unpacked
     into a work directory, never changed in place;
  2. bitsnet goes into that copy with tools/bits_install.py (``--stock``: not; BITS's own
     ``_socket`` and ``select`` stay; ``--as-is``: not either, for an image that has bitsnet
     built in already, tools/bits_build.py);
  3. ``/boot/grub/grub.cfg`` becomes: ``source /boot/cfg/init.cfg`` (BITS's own start-up),
     ``py 'execfile("/boot/bitsrun/main.py")'`` (the wrapper below), ``halt`` (QEMU exits);
  4. QEMU boots it (tools/qemu_vm.py: q35, TCG, OVMF, virtio disk and NIC, user-mode network)
     -- ``--ovmf`` picks the firmware (a generation of tools/ovmf.py's catalogue, 2020.11 to
     2026.08, fetched from Debian's archive on first use, or a user's CODE,VARS pair; default the
     machine's own ``ovmf`` package), ``--nic`` the NIC model, ``--rng`` adds virtio-rng-pci,
     which EDK2 since 2024 needs to start its network stack -- inside a new network namespace
     with only a loopback, so nothing leaves the machine.  The
     guest is 10.0.2.15 (DHCP); 10.0.2.2 is the namespace's loopback, where ``--lab`` starts
     tools/lab.py (HTTP on port 8080, TCP+UDP echo, DNS on port 53, which is also where slirp's
     DNS proxy 10.0.2.3 -- the server DHCP hands out -- forwards to; its ``/connect/10.0.2.15/PORT``
     adds a hostfwd for PORT through QEMU's monitor first, so the selftest's connection from the
     lab reaches the firmware); ``--hostfwd PORT`` makes a listener on guest port PORT reachable
     at 127.0.0.1:PORT in the namespace.

The wrapper (in BITS): sets ``sys.argv`` to [program] + ARGS, restarts the local APIC timer if
asked (default: with ``--stock``, since BITS's start-up leaves it stopped on OVMF and nothing
else would restart it; bitsnet restarts it itself), runs the program -- a script or ``-c`` code
compiled and exec'ed as ``__main__`` (BITS has no runpy), ``-m`` through
``bitsnet.launch.run_module`` where bitsnet has it, else the module's code from
``pkgutil.get_loader`` -- and prints ``@@bitsrun exit N`` (``sys.exit`` codes as CPython maps
them; an uncaught exception prints its traceback and gives 1).  The serial console wraps long
lines and BITS's stdout is a write/flush-only Tee, so the wrapper puts its own writer on
``sys.stdout``/``sys.stderr`` that frames every line: ``|text`` is a (last) piece of a line,
``+text`` a piece that the next piece continues; the harness joins them back, so the output is
exactly what the program printed (tabs expanded, non-ASCII unicode backslash-escaped).

Placeholders in ARGS (``--lab``): ``{host}`` 10.0.2.2, ``{lab}`` 10.0.2.2:8080, ``{lab_http}``,
``{lab_echo}`` (TCP and UDP echo), ``{lab_dns}`` (53); API callers add their own (``setup``).

Exit status: the program's; 124 when the run timed out; 125 when BITS ended without the exit
line (a crash, a hang cut short by QEMU); 2 for usage errors or a missing image/QEMU.

Python API (tests/test_real_bits.py)::

    import bitsrun
    result = bitsrun.run(script="x.py", args=["--peer", "{lab}"], lab=True, timeout=300,
                         hostfwd=[8000], on_line=hook, ovmf="2025.02", nic="e1000", rng=True)
    result.output   # the program's output lines, unwrapped; result.times: when each arrived
    result.status   # exit status (None: no exit line)   result.seconds   result.timed_out
    result.console  # every console line (ANSI escapes removed), BITS's own messages included
    result.hooks    # [(line, value)] for every on_line call that returned something but None
    result.firmware # the tools/ovmf.py Firmware it booted (name, version, code, vars)

``on_line(line)`` is called (in a thread of its own, in the namespace, so it reaches
127.0.0.1:PORT of a ``hostfwd`` listener) for every program output line as it arrives;
``setup()`` runs in the namespace before the boot and returns extra placeholders (dict).

Typed at the GRUB prompt, as a user does (``run_typed``; README.rst's selftest under QEMU)::

    python3 tools/bitsrun.py --typed --lab-args '' --hostfwd 8081 \
        'python -m bitsnet.selftest --peer 10.0.2.2:8080 --listen-port 8081 --listen-via 127.0.0.1:8081'

BITS boots as shipped (its own grub.cfg and menu; bitsnet installed unless ``--as-is``), ``c``
at the menu opens the GRUB prompt and the command line is typed on the guest's keyboard (QEMU's
monitor, ``sendkey``), then ``echo "@@bitsrun typed status $?"`` and ``halt``; the exit status is
the command's GRUB status.  ``--lab-args ARGS`` first starts ``python tools/lab.py ARGS`` in the
namespace, as the README starts it -- none of ``--lab``'s crutches (DNS on port 53 behind slirp's
proxy, forwards added through the monitor): only ``--hostfwd``, which QEMU's command line takes.
"""

from __future__ import print_function

import argparse
import binascii
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import ovmf as ovmf_catalogue  # noqa: E402
import qemu_vm  # noqa: E402

DEFAULT_IMAGE = os.path.join(os.path.dirname(ROOT), "shared", "bits", "bits-2079-x86_64-efi.tar.xz")
PACKAGES = ["qemu-system-x86", "ovmf", "ipxe-qemu", "mtools", "dosfstools"]
BUILD = os.path.join(ROOT, "build", "bitsrun")
LAB_HTTP_PORT = 8080  # fixed: the namespace is ours, nothing else listens there
DNS_PORT = 53
ESP_MIB = 64  # FAT32 needs at least ~33 MiB
DEFAULT_TIMEOUT = 300.0
WIDTH = 76  # characters of program text per console line (the console is 80 columns or more)
START = "@@bitsrun start"
EXIT = "@@bitsrun exit "
_ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>78cDEHM])")

GRUB_CFG = """\
# bitsrun: BITS's start-up, the wrapper, then power off (QEMU exits)
source /boot/cfg/init.cfg
py 'execfile("/boot/bitsrun/main.py")'
halt
"""

# The wrapper, run by BITS's Python 2.7 (see the module docstring).  No peephole-sized lines, no
# float repr, only modules BITS has.
WRAPPER = r'''"""bitsrun's wrapper: runs the program named in /boot/bitsrun/config.txt (tools/bitsrun.py)."""
import sys


class BitsrunWriter(object):
    """Frames every line for the harness: '|' a (last) piece, '+' a piece continued next."""

    # BITS quirk: sys.stdout is a Tee with only write/flush, printing non-ASCII unicode raises,
    # and the serial console wraps long lines (docs/bits-environment.md section 8.2).

    def __init__(self, target, width):
        self.target = target
        self.width = width
        self.partial = ""

    def write(self, text):
        if not isinstance(text, str):
            text = text.encode("ascii", "backslashreplace")
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            self.emit(line.expandtabs(), "|")

    def emit(self, line, last):
        while len(line) > self.width:
            self.target.write("+" + line[:self.width] + "\n")
            line = line[self.width:]
        self.target.write(last + line + "\n")

    def flush(self):
        if self.partial:
            self.emit(self.partial.expandtabs(), "+")
            self.partial = ""
        self.target.flush()

    def close_line(self):
        if self.partial:
            self.emit(self.partial.expandtabs(), "|")
            self.partial = ""
        self.target.flush()


def bitsrun_config():
    config = {}
    for line in open("/boot/bitsrun/config.txt"):
        key, _, value = line.strip().partition(" ")
        config.setdefault(key, []).append(value.decode("hex"))
    return config


def bitsrun_restore_timer():
    # BITS quirk: the LAPIC timer is stopped after BITS starts on OVMF; no timer event fires
    # until it is restarted (docs/bits-environment.md section 7). bitsnet.lapic's own code.
    namespace = {"__name__": "bitsrun_lapic"}
    exec(compile(open("/boot/bitsrun/lapic.py").read(), "/boot/bitsrun/lapic.py", "exec"), namespace)
    before, after = namespace["restore_timer"](verbose=False)
    print("bitsrun: LAPIC timer initial count %d -> %d" % (before["initial_count"], after["initial_count"]))


def bitsrun_module_code(name):
    # BITS quirk: no runpy, no python -m (docs/bits-environment.md section 8.1).
    try:
        from bitsnet import launch
    except ImportError:
        launch = None
    if launch is not None and hasattr(launch, "run_module"):
        return None
    import pkgutil
    loader = pkgutil.get_loader(name)
    if loader is None:
        raise ImportError("No module named %s" % name)
    if loader.is_package(name):
        name = name + ".__main__"
        loader = pkgutil.get_loader(name)
        if loader is None:
            raise ImportError("No module named %s" % name)
    return loader.get_code(name), loader.get_filename(name)


def bitsrun_status(code):
    if code is None:
        return 0
    if isinstance(code, (int, long)):
        return int(code) & 0xFF
    sys.stderr.write(str(code) + "\n")
    return 1


def bitsrun_main():
    import traceback
    config = bitsrun_config()
    mode, target = config["mode"][0], config["target"][0]
    argv = config.get("arg", [])
    # BITS quirk: sys.argv is [] (docs/bits-environment.md section 8.1), set below.
    tee_out, tee_err = sys.stdout, sys.stderr
    if config.get("restore_timer") == ["1"]:  # before the program's output starts: console only
        try:
            bitsrun_restore_timer()
        except Exception as exc:
            tee_out.write("bitsrun: restarting the LAPIC timer failed: %s\n" % exc)
    tee_out.write("@@bitsrun start\n")
    writer = BitsrunWriter(tee_out, int(config["width"][0]))
    sys.stdout = sys.stderr = writer
    status = 0
    try:
        try:
            main = {"__name__": "__main__", "__builtins__": __builtins__, "__package__": None}
            if mode == "module":
                found = bitsrun_module_code(target)
                if found is None:
                    from bitsnet import launch
                    sys.argv = [target] + argv
                    result = launch.run_module(target, argv)
                    if result:
                        raise SystemExit(result)
                else:
                    code, filename = found
                    sys.argv = [filename] + argv
                    main["__file__"] = filename
                    exec(code, main)
            else:
                filename = target if mode == "script" else "-c"
                sys.argv = [filename] + argv
                if mode == "script":
                    main["__file__"] = target
                    sys.path.insert(0, target.rpartition("/")[0] or "/")
                    source = open(target).read()
                else:
                    source = open("/boot/bitsrun/code.py").read()
                exec(compile(source, "<string>" if mode == "code" else target, "exec"), main)
        except SystemExit as exc:
            status = bitsrun_status(exc.code)
        except BaseException:
            kind, value, trace = sys.exc_info()
            traceback.print_exception(kind, value, trace.tb_next)  # from the program's frame down
            status = 1
    finally:
        writer.close_line()
        sys.stdout, sys.stderr = tee_out, tee_err
    stack = sys.modules.get("bitsnet.stack")
    if stack is not None and hasattr(stack, "hand_closes_over"):
        # as the python command does (docs/architecture.md section 9): halt follows the exit line
        try:
            stack.hand_closes_over(2.0)
        except Exception as exc:
            tee_out.write("bitsrun: finishing the program's closes: %s\n" % exc)
    tee_out.write("@@bitsrun exit %d\n" % status)


bitsrun_main()
'''


class Result(object):
    """What one run gave: ``output`` (the program's lines), ``status``, ``seconds`` (the whole
    QEMU run), ``timed_out``, ``console`` (all lines), ``hooks`` ([(line, value)]), ``ports``,
    ``times`` (when each output line reached the host, seconds since QEMU started: a clock to check
    the guest's against)."""

    def __init__(self, output, status, seconds, timed_out, console, hooks, ports):
        self.output = output
        self.status = status
        self.seconds = seconds
        self.timed_out = timed_out
        self.console = console
        self.hooks = hooks
        self.ports = ports
        self.times = []  # type: list
        self.firmware = None  # type: object

    @property
    def text(self):
        return "\n".join(self.output)

    @property
    def exit_code(self):
        """The status as the command line reports it (124 timed out, 125 no exit line)."""
        if self.status is not None:
            return self.status
        return 124 if self.timed_out else 125

    def __repr__(self):
        return "Result(status=%r, seconds=%.1f, %d output lines%s)" % (
            self.status, self.seconds, len(self.output), ", timed out" if self.timed_out else "")


def has_tcp6(result):
    """Whether the firmware ``result``'s boot ran on has TCP6 (2020.11 has none: docs/edk2.md
    section 10); the machine's own OVMF (no ``--ovmf``) does."""
    generation = result.firmware.generation if result.firmware is not None else None
    return generation is None or generation.has_tcp6


def selftest_all_passed(result):
    """The regular expression of bitsnet.selftest's last line when every check it could run in
    ``result``'s boot passed: none skipped, but for its two IPv6 checks on a firmware generation
    built without TCP6 (2020.11, docs/edk2.md section 10)."""
    if not has_tcp6(result):
        return r"^\d+ passed, 0 failed, 2 skipped$"
    return r"^\d+ passed, 0 failed$"


class ImageError(Exception):
    """The BITS image cannot be found or unpacked."""


# ------------------------------------------------------------------------------------------ the ESP

def default_image():
    return DEFAULT_IMAGE


def unpack_image(image, tree):
    """The ESP's files (``efi/``, ``boot/``) of ``image`` copied into the new directory ``tree``."""
    if not os.path.exists(image):
        raise ImageError("no BITS image at %s" % image)
    if os.path.isdir(image):
        shutil.copytree(image, tree, symlinks=False)
    elif tarfile.is_tarfile(image):
        os.makedirs(tree)
        with tarfile.open(image) as archive:
            for member in archive.getmembers():
                _check_member(image, member.name)
            archive.extractall(tree)
        _hoist(tree)
    elif image.endswith((".tar.xz", ".txz")):  # Python 2.7's tarfile has no lzma: GNU tar reads it
        os.makedirs(tree)
        for name in subprocess.check_output(["tar", "-tJf", image]).decode("utf-8").splitlines():
            _check_member(image, name)
        subprocess.check_call(["tar", "-xJf", image, "-C", tree])
        _hoist(tree)
    else:  # a FAT image: mtools reads it without mounting
        os.makedirs(tree)
        subprocess.check_call(["mcopy", "-s", "-n", "-Q", "-i", image, "::/*", tree + "/"])
    names = dict((name.lower(), name) for name in os.listdir(tree))
    if "boot" not in names or "efi" not in names:
        raise ImageError("%s holds no efi/ and boot/ (found: %s)" % (image, ", ".join(sorted(names)) or "nothing"))
    return tree


def _check_member(image, name):
    """No absolute paths or .. out of the tree."""
    if name.startswith("/") or ".." in name.split("/"):
        raise ImageError("%s: unsafe path %s in the archive" % (image, name))


def _hoist(tree):
    """A tarball whose efi/ and boot/ sit one folder down (bits-2079/boot): move them up."""
    names = os.listdir(tree)
    if "boot" in names or len(names) != 1 or not os.path.isdir(os.path.join(tree, names[0])):
        return
    inner = os.path.join(tree, names[0])
    for name in os.listdir(inner):
        os.rename(os.path.join(inner, name), os.path.join(tree, name))
    os.rmdir(inner)


def install_bitsnet(tree):
    """tools/bits_install.py into the unpacked tree; its output (it also removes stale .pyc)."""
    import io
    import bits_install
    out = io.StringIO() if sys.version_info[0] >= 3 else io.BytesIO()
    if bits_install.main([tree], out=out) != 0:
        raise ImageError("bits_install.py failed:\n%s" % out.getvalue())
    return out.getvalue()


def _hex(text):
    if not isinstance(text, bytes):
        text = text.encode("utf-8")
    return binascii.hexlify(text).decode("ascii")


def prepare_tree(tree, mode, target, args, restore_timer, width=WIDTH):
    """grub.cfg, the wrapper, its config and the program itself into the unpacked tree."""
    boot = os.path.join(tree, "boot")
    bitsrun_dir = os.path.join(boot, "bitsrun")
    if os.path.isdir(bitsrun_dir):
        shutil.rmtree(bitsrun_dir)
    os.makedirs(bitsrun_dir)
    grub_dir = os.path.join(boot, "grub")
    with open(os.path.join(grub_dir, "grub.cfg"), "w") as handle:
        handle.write(GRUB_CFG)
    with open(os.path.join(bitsrun_dir, "main.py"), "w") as handle:
        handle.write(WRAPPER)
    shutil.copyfile(os.path.join(ROOT, "bitsnet", "lapic.py"), os.path.join(bitsrun_dir, "lapic.py"))
    if mode == "script":
        shutil.copyfile(target, os.path.join(bitsrun_dir, "script.py"))
        target = "/boot/bitsrun/script.py"
    elif mode == "code":
        with open(os.path.join(bitsrun_dir, "code.py"), "w") as handle:
            handle.write(target)
        target = "-c"
    lines = ["mode " + _hex(mode), "target " + _hex(target), "width " + _hex(str(width)),
             "restore_timer " + _hex("1" if restore_timer else "0")]
    lines.extend("arg " + _hex(arg) for arg in args)
    with open(os.path.join(bitsrun_dir, "config.txt"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


def make_esp(tree, image):
    """A FAT32 disk image (no partition table: OVMF reads a whole-disk file system) holding ``tree``."""
    with open(image, "wb") as handle:
        handle.truncate(ESP_MIB * 1024 * 1024)
    with open(os.devnull, "wb") as devnull:
        subprocess.check_call(["mkfs.fat", "-F", "32", "-n", "BITS", image], stdout=devnull)
    entries = [os.path.join(tree, name) for name in sorted(os.listdir(tree))]
    subprocess.check_call(["mcopy", "-s", "-Q", "-i", image] + entries + ["::/"])
    return image


# ------------------------------------------------------------------------------------------ host peers

class DnsServer(object):
    """tools/lab.py's DNS answers (``lab.dns_answer``) on UDP ``host``:``port``, in a thread."""

    def __init__(self, host="127.0.0.1", port=DNS_PORT):
        import lab
        self.answer = lab.dns_answer
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.thread = threading.Thread(target=self._serve)
        self.thread.daemon = True
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                query, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except (OSError, socket.error):
                return
            reply = self.answer(query)
            if reply:
                self.sock.sendto(reply, peer)

    def stop(self):
        self.stopping = True
        self.thread.join(2.0)
        self.sock.close()


def _lab_handler(monitor):
    """tools/lab.py's HTTP handler, except that ``GET /connect/10.0.2.15/PORT/TOKEN`` (the selftest's
    "listening socket reached from lab") first forwards PORT through QEMU's monitor: the guest's
    address does not exist in the namespace, only slirp's hostfwd reaches a listener in it."""
    import lab

    class Handler(lab._HttpHandler):
        def _connect_back(self, host, port, token):
            if host == qemu_vm.GUEST_SELF and port.isdigit():
                try:
                    monitor.hostfwd_add(int(port))
                except (OSError, socket.error) as exc:
                    return self._reply(502, ("QEMU monitor: %s\n" % exc).encode("ascii"))
                host = "127.0.0.1"
            return lab._HttpHandler._connect_back(self, host, port, token)
    return Handler


def start_lab(monitor=None):
    """tools/lab.py's servers on the namespace's loopback (HTTP on 8080) and DNS on port 53;
    (stop function, placeholders).  ``monitor``: QEMU's, for connections to the guest."""
    import lab
    running = lab.Lab("127.0.0.1", LAB_HTTP_PORT)
    if monitor is not None:
        running.http.RequestHandlerClass = _lab_handler(monitor)
    running.start()
    dns = DnsServer()
    ports = {"lab": "%s:%d" % (qemu_vm.GUEST_HOST, running.port), "lab_http": str(running.port),
             "lab_echo": str(running.echo_port), "lab_dns": str(dns.port)}

    def stop():
        dns.stop()
        running.stop()
    return stop, ports


# ------------------------------------------------------------------------------------------ the run

def unframe(lines):
    """The program's lines from the framed console lines between the start and exit markers;
    (output, status or None).  Lines without a frame (BITS's own output) are left out."""
    output, pieces, status, started = [], [], None, False
    for line in lines:
        if not started:
            started = line.endswith(START) or line == START
            continue
        at = line.find(EXIT)
        if at >= 0 and not line.startswith(("|", "+")) and line[at + len(EXIT):].strip().lstrip("-").isdigit():
            status = int(line[at + len(EXIT):].strip())
            break
        if line.startswith("+"):
            pieces.append(line[1:])
        elif line.startswith("|"):
            pieces.append(line[1:])
            output.append("".join(pieces))
            pieces = []
    if pieces:
        output.append("".join(pieces))
    return output, status


def clean(line):
    """A console line without terminal escape sequences."""
    return _ANSI.sub("", line)


def _boot(esp, timeout, hostfwd, on_line, setup, lab, args, echo, workdir, machine=None):
    """In the namespace: peers up, QEMU booted, console read; a Result."""
    stops = []
    ports = {"host": qemu_vm.GUEST_HOST}
    monitor = qemu_vm.Monitor(os.path.join(workdir, "monitor.sock"))
    try:
        if lab:
            stop, lab_ports = start_lab(monitor)
            stops.append(stop)
            ports.update(lab_ports)
            qemu_vm.use_resolver("127.0.0.1", workdir)  # the DNS server DHCP hands out is the lab's
        if setup is not None:
            ports.update(setup() or {})
        tree = os.path.join(workdir, "esp")
        prepare_tree(tree, *_substituted(args, ports))
        make_esp(tree, esp)
        return _run_qemu(esp, workdir, timeout, hostfwd, on_line, echo, ports, monitor, machine)
    finally:
        for stop in stops:
            stop()


def _substituted(args, ports):
    mode, target, program_args, restore_timer = args

    def value(match):
        return str(ports[match.group(1)]) if match.group(1) in ports else match.group(0)
    return mode, target, [re.sub(r"\{(\w+)\}", value, arg) for arg in program_args], restore_timer


def _run_qemu(esp, workdir, timeout, hostfwd, on_line, echo, ports, monitor, machine=None):
    machine = machine or {}  # firmware, nic, rng: qemu_vm.qemu_command's
    vars_copy = qemu_vm.fresh_vars(workdir, machine.get("firmware"))
    vm = qemu_vm.Qemu(qemu_vm.qemu_command(esp, vars_copy, hostfwd, monitor=monitor.path, **machine), timeout)
    console, hooks, threads, times = [], [], [], []
    framed, started, status = [], False, None
    try:
        for raw in vm.lines():
            line = clean(raw)
            console.append(line)
            if echo == "console":
                print(line)
                sys.stdout.flush()
            if not started:
                started = START in line
                continue
            if EXIT in line and not line.startswith(("|", "+")):  # the program's own text is framed
                status = unframe([START, line])[1]
                if status is not None:
                    break
            framed.append(line)
            if line.startswith("|"):
                times.append(vm.seconds())
                complete = unframe([START] + _last_line(framed))[0]
                text = complete[-1] if complete else ""
                if echo == "output":
                    print(text)
                    sys.stdout.flush()
                if on_line is not None:
                    threads.append(_call_hook(on_line, text, hooks))
        vm.wait(30)  # halt powers the machine off
    finally:
        vm.close()
        for thread in threads:
            thread.join(30)
    output, _ = unframe([START] + framed)
    result = Result(output, status, vm.seconds(), vm.timed_out and status is None, console, hooks, ports)
    result.times = (times + [result.seconds] * len(output))[:len(output)]
    return result


def _last_line(framed):
    """The framed pieces of the line that just ended (the trailing '+' run and its '|')."""
    start = len(framed) - 1
    while start > 0 and framed[start - 1].startswith("+"):
        start -= 1
    return framed[start:]


def _call_hook(on_line, text, hooks):
    def call():
        try:
            value = on_line(text)
        except Exception as exc:  # recorded: a test asserts on it
            value = "hook raised %s: %s" % (exc.__class__.__name__, exc)
        if value is not None:
            hooks.append((text, value))
    thread = threading.Thread(target=call)
    thread.daemon = True
    thread.start()
    return thread


def run(script=None, module=None, code=None, args=(), image=None, stock=False, lab=False,
        timeout=DEFAULT_TIMEOUT, hostfwd=(), on_line=None, setup=None, restore_timer=None,
        keep=None, echo=None, install=False, as_is=False, ovmf=None, nic=None, rng=None):
    """Boot BITS with the program and return its Result (see the module docstring).

    Exactly one of ``script`` (a host path), ``module``, ``code``.  ``restore_timer``: None means
    "with ``stock``".  ``as_is``: boot the image's own Python files unchanged (an image built with
    bitsnet inside, tools/bits_build.py) -- no install, and the timer left to the image.
    ``keep``: a directory for the ESP tree, disk image and NV store (else a temporary one under
    build/bitsrun, removed).  ``echo``: None, "output" or "console" (print
    as it arrives).  ``install``: apt-get missing Debian packages (as root).  ``ovmf``: the
    firmware (None: the machine's own; a tools/ovmf.py NAME, fetched on first use; "CODE,VARS";
    or an ovmf.Firmware), ``nic``: a qemu_vm.NICS name, ``rng``: add virtio-rng-pci.  Left
    None, these three come from $BITSNET_OVMF, $BITSNET_NIC and $BITSNET_RNG ("1"), else the
    machine's own OVMF, virtio-net, no RNG: so every real-BITS test can run on another machine
    (``BITSNET_OVMF=2026.08 BITSNET_RNG=1 pytest -m realbits``, docs/testing.md section 6).
    """
    ovmf, nic, rng = machine_defaults(ovmf, nic, rng)
    chosen = [(m, t) for m, t in (("script", script), ("module", module), ("code", code)) if t is not None]
    if len(chosen) != 1:
        raise ValueError("give exactly one of script, module, code")
    mode, target = chosen[0]
    if mode == "script":
        target = os.path.abspath(target)
    if nic not in qemu_vm.NICS:
        raise ImageError("unknown NIC %r: one of %s" % (nic, ", ".join(qemu_vm.NIC_NAMES)))
    problem = unavailable(image, install)
    if problem:
        raise ImageError(problem)
    try:  # before the namespace: a first use fetches the firmware from Debian's archive
        firmware = ovmf_catalogue.resolve(ovmf, install=True)
    except ovmf_catalogue.FirmwareError as exc:
        raise ImageError(str(exc))
    machine = {"firmware": firmware, "nic": nic, "rng": bool(rng)}
    if restore_timer is None:
        restore_timer = stock
    workdir = _workdir(keep, "run-")
    try:
        _unpack(image, workdir, not (stock or as_is))
        esp = os.path.join(workdir, "esp.img")
        result = qemu_vm.in_new_namespace(_boot, esp, timeout, list(hostfwd), on_line, setup, lab,
                                          (mode, target, list(args), restore_timer), echo, workdir, machine)
        result.firmware = firmware
        return result
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _workdir(keep, prefix):
    """The boot's working directory: ``keep`` (kept afterwards) or a new one under build/."""
    if not os.path.isdir(BUILD):
        os.makedirs(BUILD)
    return os.path.abspath(keep) if keep else tempfile.mkdtemp(prefix=prefix, dir=BUILD)


def _unpack(image, workdir, with_bitsnet):
    """The image's files in WORKDIR/esp (afresh), bitsnet installed there if ``with_bitsnet``."""
    tree = os.path.join(workdir, "esp")
    if os.path.exists(tree):
        shutil.rmtree(tree)
    unpack_image(os.path.abspath(image or DEFAULT_IMAGE), tree)
    if with_bitsnet:
        install_bitsnet(tree)
    return tree


def machine_defaults(ovmf=None, nic=None, rng=None):
    """(ovmf, nic, rng) with what was left None taken from the environment (see ``run``)."""
    if ovmf is None:
        ovmf = os.environ.get("BITSNET_OVMF") or None
    if nic is None:
        nic = os.environ.get("BITSNET_NIC") or "virtio-net"
    if rng is None:
        rng = os.environ.get("BITSNET_RNG") == "1"
    return ovmf, nic, bool(rng)


def unavailable(image=None, install=False):
    """Why a run cannot happen here (None: it can): packages, namespaces, the image."""
    if qemu_vm.missing_packages(PACKAGES) and not qemu_vm.ensure_packages(PACKAGES, install, tool="bitsrun"):
        return "needs the Debian packages %s" % ", ".join(qemu_vm.missing_packages(PACKAGES))
    if not qemu_vm.in_namespace() and not qemu_vm.can_unshare():
        return "needs user+network namespaces (`unshare -rn true` fails)"
    path = image or DEFAULT_IMAGE
    if not os.path.exists(path):
        return "no BITS image at %s" % path
    return None


# ------------------------------------------------------------------------------------------ typed at the GRUB prompt
# What a user does (README.rst, "The selftest"): BITS boots as it is shipped -- its own grub.cfg and
# menu, bitsnet put in by tools/bits_install.py --, ``c`` at the menu opens the GRUB prompt, and a
# command line is typed there on the keyboard (QEMU's monitor, sendkey: the PS/2 keyboard is what
# GRUB reads; OVMF's serial console does not reach it). The lab runs as the README starts it:
# ``python tools/lab.py ARGS``, a process of its own in the namespace.

TYPED_STATUS = "@@bitsrun typed status "
MENU_READY = "for a command-line"  # the last line of GRUB's menu help text
GRUB_PROMPT = "grub> "
KEY_DELAY = 0.03  # seconds between keys; the line editor echoes each one
GRUB_KEYS = {" ": "spc", "-": "minus", "=": "equal", ".": "dot", ",": "comma", "/": "slash", ";": "semicolon",
             "'": "apostrophe", "[": "bracket_left", "]": "bracket_right", "\\": "backslash", "`": "grave_accent",
             ":": "shift-semicolon", "_": "shift-minus", "+": "shift-equal", "?": "shift-slash",
             '"': "shift-apostrophe", "{": "shift-bracket_left", "}": "shift-bracket_right", "|": "shift-backslash",
             "~": "shift-grave_accent", "<": "shift-comma", ">": "shift-dot", "!": "shift-1", "@": "shift-2",
             "#": "shift-3", "$": "shift-4", "%": "shift-5", "^": "shift-6", "&": "shift-7", "*": "shift-8",
             "(": "shift-9", ")": "shift-0", "\n": "ret"}


def grub_keys(text):
    """QEMU sendkey names for ``text`` on a US keyboard; ValueError for a character it cannot type."""
    keys = []
    for char in text:
        if char in GRUB_KEYS:
            keys.append(GRUB_KEYS[char])
        elif char.isalnum() and ord(char) < 128:
            keys.append("shift-" + char.lower() if char.isupper() else char)
        else:
            raise ValueError("cannot type %r on the guest keyboard" % char)
    return keys


def type_keys(monitor, text):
    for key in grub_keys(text):
        monitor.command("sendkey %s 20" % key)  # held 20 ms: QEMU's default 100 ms is needlessly slow
        time.sleep(KEY_DELAY)


def start_lab_process(lab_args, timeout=20.0):
    """``python tools/lab.py LAB_ARGS`` as the README starts it; (process, its output so far) once it
    listens (its first line says so)."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "lab.py")] + list(lab_args),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []  # type: list

    def read():
        for raw in iter(proc.stdout.readline, b""):
            lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
    reader = threading.Thread(target=read)
    reader.daemon = True
    reader.start()
    deadline = time.time() + timeout
    while not lines and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the rest of what it prints (the instructions) follows at once
    if not lines or not lines[0].startswith("lab on "):
        proc.kill()
        raise ImageError("tools/lab.py %s did not start:\n%s" % (" ".join(lab_args), "\n".join(lines)))
    return proc, lines


def _typed_boot(esp, workdir, command, lab_args, hostfwd, timeout, echo):
    """In the namespace: the lab started, BITS booted, the command typed; a Result."""
    lab, lab_lines = (None, []) if lab_args is None else start_lab_process(lab_args)
    monitor = qemu_vm.Monitor(os.path.join(workdir, "monitor.sock"))
    vm = qemu_vm.Qemu(qemu_vm.qemu_command(esp, qemu_vm.fresh_vars(workdir), hostfwd, monitor=monitor.path),
                      timeout)
    raw, console, stage, status = "", [], "menu", None
    start = typed_at = 0  # console lines before the typed command, and before its output
    try:
        fd = vm.proc.stdout.fileno()
        while status is None or stage != "done":
            ready = select.select([fd], [], [], 0.5)[0]
            chunk = os.read(fd, 65536) if ready else b""
            if ready and not chunk:
                break  # QEMU exited
            raw += chunk.decode("latin-1").replace("\r", "")
            done, raw = _split_last(raw)
            for line in done:
                console.append(clean(line))
                if echo == "console":
                    print(console[-1])
                    sys.stdout.flush()
            partial = clean(raw)
            if stage == "menu" and [line for line in console if MENU_READY in line] and not ready:
                type_keys(monitor, "c")  # the menu is drawn and quiet: open the GRUB prompt
                stage = "prompt"
            elif stage == "prompt" and partial.endswith(GRUB_PROMPT) and not ready:
                start = len(console)
                type_keys(monitor, command + "\n")
                stage = "running"
            elif stage == "running" and not typed_at:
                # The echo of the typed line (GRUB's editor wraps it at the screen's edge) ends with
                # the command's last characters: the output starts after it.
                ends = [i for i in range(start, len(console)) if console[i].rstrip().endswith(command.rstrip()[-12:])]
                typed_at = ends[0] + 1 if ends else 0
            elif stage == "running" and partial.endswith(GRUB_PROMPT) and not ready:
                type_keys(monitor, 'echo "%s$?"\n' % TYPED_STATUS)  # the command is done: its status
                stage = "status"
            elif stage == "status":
                found = [line for line in console[typed_at:] if line.startswith(TYPED_STATUS)]
                if found:
                    status = int(found[0][len(TYPED_STATUS):].strip())
                    type_keys(monitor, "halt\n")
                    stage = "done"
            if vm.timed_out:
                break
        vm.wait(30)
    finally:
        vm.close()
        if lab is not None:
            lab.kill()
            lab.wait()
    if raw:
        console.append(clean(raw))
    output = console[typed_at:]
    ends = [i for i, line in enumerate(output) if line.startswith(GRUB_PROMPT)]
    output = output[:ends[0]] if ends else output
    if echo == "output":
        print("\n".join(output))
    result = Result(output, status, vm.seconds(), vm.timed_out and status is None, console, [], {})
    result.lab = lab_lines
    result.typed = command
    return result


def _split_last(text):
    parts = text.split("\n")
    return parts[:-1], parts[-1]


def run_typed(command, lab_args=None, image=None, hostfwd=(), timeout=DEFAULT_TIMEOUT, keep=None, echo=None,
              install=False, as_is=False):
    """Boot BITS as a user does and type ``command`` at its GRUB prompt; a Result.

    BITS's own grub.cfg and menu (bitsnet installed by tools/bits_install.py unless ``as_is``);
    ``c`` at the menu, ``command`` typed on the guest's keyboard, then ``echo "@@bitsrun typed
    status $?"`` and ``halt``. ``lab_args`` (a list): ``python tools/lab.py LAB_ARGS`` runs in the
    namespace first, its output in ``Result.lab``. ``hostfwd``: guest TCP ports forwarded from
    127.0.0.1 as ``-netdev user,hostfwd=tcp:127.0.0.1:PORT-:PORT``. ``Result.output``: the console
    lines the command printed (ANSI escapes removed; the console is 80 columns wide); ``status``:
    its GRUB status ($?), None if it never came back to the prompt."""
    grub_keys(command)  # raises before any boot for a character the keyboard cannot type
    problem = unavailable(image, install)
    if problem:
        raise ImageError(problem)
    workdir = _workdir(keep, "typed-")
    try:
        tree = _unpack(image, workdir, not as_is)
        esp = make_esp(tree, os.path.join(workdir, "esp.img"))
        return qemu_vm.in_new_namespace(_typed_boot, esp, workdir, command, lab_args, list(hostfwd), timeout, echo)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def typed_main(argv):
    """``bitsrun.py --typed [--lab-args 'ARGS'] [--hostfwd PORT] ... 'COMMAND'``: run_typed."""
    import shlex
    parser = argparse.ArgumentParser(prog="bitsrun.py --typed", description=run_typed.__doc__.split("\n")[0])
    parser.add_argument("command", help="the GRUB command line to type")
    parser.add_argument("--lab-args", help="start python tools/lab.py with these arguments first ('' for none)")
    parser.add_argument("--image", help="BITS ESP (default: %s)" % os.path.relpath(DEFAULT_IMAGE))
    parser.add_argument("--as-is", action="store_true", help="the image's Python files unchanged (bitsnet built in)")
    parser.add_argument("--hostfwd", type=int, action="append", default=[], metavar="PORT")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--keep")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the whole console")
    args = parser.parse_args(argv)
    lab_args = None if args.lab_args is None else shlex.split(args.lab_args)
    try:
        result = run_typed(args.command, lab_args, args.image, args.hostfwd, args.timeout, args.keep,
                           "console" if args.verbose else "output", as_is=args.as_is)
    except (ImageError, ValueError) as exc:
        print("bitsrun: %s" % exc, file=sys.stderr)
        return 2
    for line in result.lab:
        print("lab: " + line, file=sys.stderr)
    if result.status is None:
        print("bitsrun: no status after %.1f s (last console lines below)" % result.seconds, file=sys.stderr)
        for line in result.console[-15:]:
            print("  " + line, file=sys.stderr)
        return result.exit_code
    print("bitsrun: GRUB status %d after %.1f s" % (result.status, result.seconds), file=sys.stderr)
    return result.status


# ------------------------------------------------------------------------------------------ command line

def _split_argv(argv):
    """(bitsrun's options, program spec, program args): the program starts at -m/-c or the
    first word that is not an option (or an option's value)."""
    with_value = ("--image", "--timeout", "--hostfwd", "--keep", "--ovmf", "--nic")
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("-m", "-c"):
            if i + 1 >= len(argv):
                raise SystemExit("bitsrun: %s needs a value" % word)
            return argv[:i], (word, argv[i + 1]), argv[i + 2:]
        if word == "--":
            i += 1
            break
        if not word.startswith("-"):
            break
        i += 2 if word in with_value else 1
    if i >= len(argv):
        return argv, None, []
    return argv[:i], ("script", argv[i]), argv[i + 1:]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--typed" in argv[:argv.index("-m") if "-m" in argv else len(argv)]:
        argv.remove("--typed")
        return typed_main(argv)
    options, program, program_args = _split_argv(argv)
    parser = argparse.ArgumentParser(prog="bitsrun.py", usage="%(prog)s [options] (SCRIPT | -m MODULE | -c CODE) "
                                     "[ARGS ...]", description=__doc__.split("\n")[0])
    parser.add_argument("--image", help="BITS ESP: .img, unpacked tree or tarball (default: %s)"
                        % os.path.relpath(DEFAULT_IMAGE))
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--stock", action="store_true", help="leave bitsnet out: BITS's own _socket")
    what.add_argument("--as-is", action="store_true", help="the image's Python files unchanged (bitsnet built in)")
    parser.add_argument("--lab", action="store_true", help="run tools/lab.py at 10.0.2.2:8080 and DNS at 10.0.2.2:53")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds for the whole run")
    parser.add_argument("--hostfwd", type=int, action="append", default=[], metavar="PORT",
                        help="guest TCP port reachable at 127.0.0.1:PORT in the namespace (repeatable)")
    timer = parser.add_mutually_exclusive_group()
    timer.add_argument("--restore-timer", dest="restore_timer", action="store_true", default=None,
                       help="restart the LAPIC timer before the program (default with --stock)")
    timer.add_argument("--no-restore-timer", dest="restore_timer", action="store_false")
    parser.add_argument("--keep", help="keep the ESP tree, image and NV store in this directory")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install")
    parser.add_argument("--ovmf", metavar="NAME|CODE,VARS", help="the firmware: %s (fetched on first use) or a "
                        "CODE,VARS pair (default: $BITSNET_OVMF, else the machine's own ovmf package)"
                        % ", ".join(ovmf_catalogue.NAMES))
    parser.add_argument("--nic", choices=qemu_vm.NIC_NAMES,
                        help="the NIC model (default $BITSNET_NIC, else virtio-net; the others run iPXE's option ROM)")
    rng = parser.add_mutually_exclusive_group()
    rng.add_argument("--rng", dest="rng", action="store_true", default=None,
                     help="add a virtio-rng-pci device (EDK2 since 2024 needs an RNG for its network stack)")
    rng.add_argument("--no-rng", dest="rng", action="store_false", help="no RNG device (default unless $BITSNET_RNG=1)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the whole console, not only the program")
    args = parser.parse_args(options)
    args.ovmf, args.nic, args.rng = machine_defaults(args.ovmf, args.nic, args.rng)
    if program is None:
        parser.error("give a SCRIPT, -m MODULE or -c CODE")
    kind, target = program
    spec = {"script": dict(script=target), "-m": dict(module=target), "-c": dict(code=target)}[kind]
    try:
        result = run(args=program_args, image=args.image, stock=args.stock, lab=args.lab, timeout=args.timeout,
                     hostfwd=args.hostfwd, restore_timer=args.restore_timer, keep=args.keep, as_is=args.as_is,
                     echo="console" if args.verbose else "output", install=not args.no_install,
                     ovmf=args.ovmf, nic=args.nic, rng=args.rng, **spec)
    except ImageError as exc:
        print("bitsrun: %s" % exc, file=sys.stderr)
        return 2
    if result.status is None:
        print("bitsrun: %s after %.1f s without the exit line (last console lines below)"
              % ("timed out" if result.timed_out else "BITS ended", result.seconds), file=sys.stderr)
        for line in result.console[-15:]:
            print("  " + line, file=sys.stderr)
    else:
        print("bitsrun: exit status %d after %.1f s (OVMF %s, %s%s)" % (
            result.status, result.seconds, result.firmware.version or result.firmware.label, args.nic,
            ", virtio-rng" if args.rng else ""), file=sys.stderr)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
