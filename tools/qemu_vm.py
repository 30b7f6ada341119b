"""Booting OVMF under QEMU inside a network namespace of our own: what tools/fwtest.py and
tools/bitsrun.py share.

Packages    ``missing_packages(names)`` / ``ensure_packages(names)``: the Debian packages a tool
            needs (one file proves each is installed); ``apt-get install`` when running as root
            (or with password-less sudo), else it says what to install.
Namespace   A tool's QEMU and its host peers run in a new user+network namespace that has only
            a loopback device, so no packet can leave the machine: ``enter_namespace`` re-runs a
            script under ``unshare -rn``; ``in_new_namespace(function)`` runs a function in a
            forked child that entered one itself (for a Python API whose caller stays outside);
            ``loopback_up()`` brings ``lo`` up in either; ``use_resolver`` (forked child only)
            points the namespace's /etc/resolv.conf, which slirp's DNS proxy reads, at a peer.
QEMU        ``qemu_command(...)``: q35 with TCG (KVM does not work for OVMF here), OVMF code
            read-only as pflash unit 0 and a private copy of the NV store as unit 1 (``fresh_vars``;
            ``firmware``: a tools/ovmf.py Firmware, default the machine's own OVMF), the disk on
            virtio-blk with bootindex 1, the NIC with bootindex 2 (without one OVMF may leave it
            unconnected; ``nic``: one of ``NICS``, driven through the iPXE option ROM QEMU
            loads from ipxe-qemu, or by OVMF's VirtioNetDxe alone), ``rng``: a virtio-rng-pci
            device (EDK2 since 2024 starts no network stack without an RNG, docs/edk2.md section
            10), user-mode networking: the guest is 10.0.2.15 by DHCP,
            10.0.2.2 is the namespace's loopback, ``hostfwd`` ports reach listeners in the guest.
            ``Qemu`` starts it with the serial console on a pipe and hands out console lines.
"""

from __future__ import print_function

import ctypes
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
# One file per Debian package that proves it is installed.
PACKAGE_FILES = {
    "qemu-system-x86": "/usr/bin/qemu-system-x86_64",
    "ovmf": OVMF_CODE,
    "ipxe-qemu": "/usr/lib/ipxe/qemu/efi-virtio.rom",
    "gnu-efi": "/usr/lib/crt0-efi-x86_64.o",
    "mtools": "/usr/bin/mcopy",
    "dosfstools": "/sbin/mkfs.fat",
    "nginx": "/usr/sbin/nginx",  # the lab's WebDAV server in the tests (tests/labservers.py)
    "rsyslog": "/usr/sbin/rsyslogd",  # the lab's syslog server in the tests
}
NETNS_ENV = "QEMU_VM_NETNS"  # set to "1" in a process that runs inside the namespace
MOUNTNS_ENV = "QEMU_VM_MOUNTNS"  # "1": and in a mount namespace of its own (in_new_namespace)
# --nic NAME -> QEMU's device model.  For the first three QEMU loads iPXE's EFI option ROM from
# ipxe-qemu (efi-virtio.rom, efi-e1000.rom, efi-rtl8139.rom), which OVMF runs and which provides
# the Simple Network Protocol (docs/edk2.md sections 9, 10); virtio-net-dxe is virtio-net without
# that ROM, so that OVMF's own VirtioNetDxe is the only driver for it.
NICS = {"virtio-net": "virtio-net-pci", "e1000": "e1000", "rtl8139": "rtl8139",
        "virtio-net-dxe": "virtio-net-pci,romfile="}
NIC_NAMES = ["virtio-net", "e1000", "rtl8139", "virtio-net-dxe"]
GUEST_HOST = "10.0.2.2"  # the namespace's loopback as the guest sees it (slirp's host alias)
GUEST_SELF = "10.0.2.15"  # the address slirp's DHCP gives the guest
GUEST_HOST6 = "fec0::2"  # slirp's IPv6 host alias: the namespace's ::1 as the guest sees it
APT_LOCK_WAIT = 900  # s apt-get waits for another apt-get's lock (apt 1.9.11+: DPkg::Lock::Timeout)
_clock = getattr(time, "monotonic", time.time)


# ------------------------------------------------------------------------------------------ packages

def which(program):
    for directory in os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(os.pathsep):
        path = os.path.join(directory, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def missing_packages(packages):
    return [p for p in packages if not os.path.exists(PACKAGE_FILES[p])]


def ensure_packages(packages, install=True, tool="qemu_vm"):
    """Install what is missing with apt-get (CI starts from a clean machine); True when all present."""
    missing = missing_packages(packages)
    if not missing:
        return True
    if not install or which("apt-get") is None:
        print("%s: missing Debian packages: %s (apt-get install %s)" % (tool, ", ".join(missing), " ".join(missing)))
        return False
    apt_install(missing, tool)
    missing = missing_packages(packages)
    if missing:
        print("%s: still missing: %s" % (tool, ", ".join(missing)))
    return not missing


def apt_install(packages, tool="qemu_vm"):
    """``apt-get install`` ``packages`` as root (or with password-less sudo), ``apt-get update``
    and once more if that fails (a fresh machine's package lists may be missing or stale); the
    exit status."""
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print("%s: installing %s" % (tool, " ".join(packages)))
    sys.stdout.flush()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # tools/check's two lanes may install at the same time on a fresh machine (nginx for the 2.7
    # tests while the 3 lane installs QEMU): wait for the other's dpkg lock instead of failing.
    command = prefix + ["apt-get", "-o", "DPkg::Lock::Timeout=%d" % APT_LOCK_WAIT, "install", "-y",
                        "--no-install-recommends"] + list(packages)
    status = subprocess.call(command, env=env)
    if status != 0:
        subprocess.call(prefix + ["apt-get", "-o", "DPkg::Lock::Timeout=%d" % APT_LOCK_WAIT, "update"], env=env)
        status = subprocess.call(command, env=env)
    return status


# ------------------------------------------------------------------------------------------ namespace

def in_namespace():
    return os.environ.get(NETNS_ENV) == "1"


def can_unshare():
    """Whether ``unshare -rn`` works here (user namespaces allowed)."""
    if which("unshare") is None:
        return False
    try:
        with open(os.devnull, "wb") as devnull:
            return subprocess.call(["unshare", "-rn", "true"], stdout=devnull, stderr=devnull) == 0
    except OSError:
        return False


def loopback_up():
    """``ip link set lo up`` without needing iproute2 (SIOCGIFFLAGS / SIOCSIFFLAGS with IFF_UP)."""
    import fcntl
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH", fcntl.ioctl(sock.fileno(), 0x8913, request)[:18])[1]
        fcntl.ioctl(sock.fileno(), 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b"\0" * 14))
    finally:
        sock.close()


def enter_namespace(script, argv, tool="qemu_vm"):
    """Re-run ``script`` with ``argv`` in a new user+network namespace with only a loopback device;
    its exit status.  The re-run sees ``in_namespace()`` true and calls ``loopback_up()``."""
    if which("unshare") is None:
        raise SystemExit("%s: `unshare` (util-linux) is needed for the network namespace" % tool)
    env = dict(os.environ)
    env[NETNS_ENV] = "1"
    command = ["unshare", "-rn", sys.executable, os.path.abspath(script)] + list(argv)
    return subprocess.call(command, env=env)


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


def _unshare_here():
    """This (single-threaded, freshly forked) process into a new user+network+mount namespace,
    mapped to root inside as ``unshare -r`` does, with the loopback up.  The mount namespace is
    for ``use_resolver``; its mounts are private, nothing reaches the machine's."""
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) failed")
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", "0 %d 1" % uid),
                       ("/proc/self/gid_map", "0 %d 1" % gid)):
        try:
            with open(path, "w") as handle:
                handle.write(text)
        except (IOError, OSError):
            if path != "/proc/self/setgroups":  # absent on old kernels
                raise
    os.environ[NETNS_ENV] = "1"
    os.environ[MOUNTNS_ENV] = "1"
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making the new mount namespace private failed")
    loopback_up()


def use_resolver(address, directory):
    """Point /etc/resolv.conf at ``address`` for this namespace (a bind mount in its own mount
    namespace): slirp's DNS proxy (the guest's 10.0.2.3, what DHCP hands out) forwards to the
    first nameserver there, which the machine's file names outside the namespace.  False where
    this process has no mount namespace of its own (``enter_namespace``'s ``unshare -rn``)."""
    if os.environ.get(MOUNTNS_ENV) != "1" or not os.path.exists("/etc/resolv.conf"):
        return False
    path = os.path.join(directory, "resolv.conf")
    with open(path, "w") as handle:
        handle.write("nameserver %s\n" % address)
    libc = ctypes.CDLL(None, use_errno=True)
    target = os.path.realpath("/etc/resolv.conf")
    if libc.mount(path.encode(), target.encode(), None, MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), "bind-mounting %s on %s failed" % (path, target))
    return True


def in_new_namespace(function, *args, **kwargs):
    """``function(*args, **kwargs)`` run in a forked child inside a new network namespace; its
    return value (pickled back), or its exception raised here.  Callables passed in (hooks) run in
    the child, where they reach the namespace's loopback."""
    import pickle
    import traceback
    if in_namespace():
        return function(*args, **kwargs)
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        status = 0
        try:
            os.close(read_end)
            try:
                _unshare_here()
                payload = ("ok", function(*args, **kwargs))
            except BaseException as exc:  # reported to the parent, whatever it was
                payload = ("error", "%s\n%s" % (exc, traceback.format_exc()))
            try:
                data = pickle.dumps(payload, 2)
            except Exception as exc:
                data = pickle.dumps(("error", "result not picklable: %s" % exc), 2)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
        except BaseException:
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    if not data:
        raise RuntimeError("the namespace child died without a result")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise RuntimeError("in the network namespace: " + value)
    return value


# ------------------------------------------------------------------------------------------ QEMU

def fresh_vars(directory, firmware=None):
    """A private copy of OVMF's NV store (no persisted Ip4Config2 policy, boot entries, ...);
    ``firmware``: whose template (a tools/ovmf.py Firmware; None: the machine's own OVMF)."""
    path = os.path.join(directory, "OVMF_VARS.fd")
    shutil.copyfile(firmware.vars if firmware is not None else OVMF_VARS, path)
    return path


# The machine's SMBIOS identity (System Information, type 1): a lab names machines by it
# (bitsnet.machineid); without -uuid QEMU leaves the UUID all zeros, "not present".
MACHINE_UUID = "5a1eb175-0c0d-4e1a-9b17-000000000007"
MACHINE_SERIAL = "BITSNET-QEMU-7"


def qemu_command(image, vars_copy, hostfwd=(), memory=256, netdev_extra="", monitor=None, firmware=None,
                 nic="virtio-net", rng=False):
    """The QEMU command line; ``hostfwd``: guest TCP ports reached at the same port on 127.0.0.1;
    ``monitor``: a Unix socket path for the human monitor (``Monitor``), else none; ``firmware``
    (a tools/ovmf.py Firmware; None: the machine's own), ``nic`` (a ``NICS`` name) and ``rng``
    (a virtio-rng-pci device) as the module docstring says."""
    if nic not in NICS:
        raise ValueError("unknown NIC %r: one of %s" % (nic, ", ".join(NIC_NAMES)))
    netdev = "user,id=n0,net=10.0.2.0/24,host=%s,dhcpstart=%s,dns=10.0.2.3" % (GUEST_HOST, GUEST_SELF)
    for port in hostfwd:  # listeners inside the firmware, reached from the namespace's loopback
        netdev += ",hostfwd=tcp:127.0.0.1:%d-:%d" % (port, port)
    netdev += netdev_extra
    return ["qemu-system-x86_64", "-machine", "q35,accel=tcg", "-m", str(memory), "-nodefaults",
            "-display", "none", "-no-reboot", "-serial", "stdio",
            "-uuid", MACHINE_UUID, "-smbios", "type=1,serial=" + MACHINE_SERIAL,
            "-monitor", "unix:%s,server=on,wait=off" % monitor if monitor else "none",
            "-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + (firmware.code if firmware is not None
                                                                          else OVMF_CODE),
            "-drive", "if=pflash,format=raw,unit=1,file=" + vars_copy,
            "-drive", "file=%s,format=raw,if=none,id=disk0" % image,
            "-device", "virtio-blk-pci,drive=disk0,bootindex=1",
            "-netdev", netdev, "-device", "%s,netdev=n0,bootindex=2" % NICS[nic]] + \
        (["-device", "virtio-rng-pci"] if rng else [])


class Monitor(object):
    """QEMU's human monitor on a Unix socket: one connection per command (the chardev serves one
    client at a time)."""

    PROMPT = b"(qemu) "

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def command(self, text, timeout=10.0):
        """Run one monitor command; its output (text)."""
        with self.lock:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(self.path)
                self._until_prompt(sock)
                sock.sendall(text.encode("ascii") + b"\n")
                reply = self._until_prompt(sock)
            finally:
                sock.close()
        return reply.decode("latin-1").replace("\r", "")

    def _until_prompt(self, sock):
        data = b""
        while not data.endswith(self.PROMPT):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data

    def hostfwd_add(self, port):
        """Guest TCP ``port`` reachable at 127.0.0.1:``port`` from now on (slirp's netdev n0)."""
        return self.command("hostfwd_add n0 tcp:127.0.0.1:%d-:%d" % (port, port))


class Qemu(object):
    """One QEMU run: ``lines()`` yields the serial console line by line (text, no CR) until QEMU
    exits or ``timeout`` seconds have passed since the start (then it is killed: ``timed_out``)."""

    def __init__(self, command, timeout):
        self.started = _clock()
        self.timed_out = False
        self._devnull = open(os.devnull, "rb")
        self.proc = subprocess.Popen(command, stdin=self._devnull, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self._killer = threading.Timer(timeout, self._expire)
        self._killer.daemon = True
        self._killer.start()

    def _expire(self):
        self.timed_out = True
        self.kill()

    def lines(self):
        for raw in iter(self.proc.stdout.readline, b""):
            yield raw.decode("latin-1").replace("\r", "").rstrip("\n")

    def kill(self):
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass

    def wait(self, grace=20.0):
        """Wait up to ``grace`` seconds for QEMU to exit by itself, then kill it; the exit code."""
        deadline = _clock() + grace
        while self.proc.poll() is None and _clock() < deadline:
            time.sleep(0.1)
        self.kill()
        return self.proc.wait()

    def seconds(self):
        return _clock() - self.started

    def close(self):
        self._killer.cancel()
        self.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self._devnull.close()
