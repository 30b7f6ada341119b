#!/usr/bin/env python3
"""Build BITS (x86_64 UEFI) with bitsnet in it and ``_bitsnet_trampoline`` compiled into its Python.

    python3 tools/bits_build.py SOURCE --out IMAGE [--tree DIR] [--jobs N] [--work DIR] [--no-cache]

SOURCE is a BITS source tree (a checkout of biosbits/bits with deps/ filled) or its release
tarball (bits-2079-src.tar.xz, whose top folder is bits/). SOURCE itself is never changed: the
build works on a copy of its own, in a work directory keyed by SOURCE's content hash.

What it does (one console line per stage, with the elapsed time):
1. copy SOURCE to WORK/<key>/bits and install bitsnet there with tools/bits_install.py (the
   package, the socket/select entry points, trampoline.c in _PyImport_Inittab and in the
   python module's Makefile.core.def);
2. copy GRUB (deps/grub) and apply TOOLCHAIN_PATCHES: BITS 2079 (2016) does not build with
   gcc 12 / binutils 2.40 as released (docs/bits-build.md section 1);
3. GRUB's autogen.sh and configure with TOOLCHAIN_FLAGS, for x86_64-efi only (BITS's Makefile
   also builds i386-pc and i386-efi, which bitsnet does not run on);
4. ``make install`` and grub-mkimage: efi/boot/bootx64.efi and boot/grub/x86_64-efi/;
5. BITS's boot/ files, its Python files compiled by a CPython 2.7 (``python2``: same bytecode as
   BITS's 2.7.10) with the mtime in every .pyc zeroed (GRUB gives none), and lib.zip; bitsnet's
   files stay source only, as bits_install.py leaves them;
6. a FAT ESP image (mtools, dosfstools) with efi/ and boot/; ``--tree DIR`` also writes the two
   folders to DIR.

Rebuilds are incremental: the work directory is reused while SOURCE is the same. A change to
bitsnet's Python files only re-copies them (seconds); a change to trampoline.c runs an
incremental ``make`` (minutes); a change to Makefile.core.def runs autogen.sh and configure again.
The finished image is also cached by a key over SOURCE, trampoline.c, bitsnet/, the entry points,
bits_install.py and TOOLCHAIN_PATCHES/TOOLCHAIN_FLAGS, in ${XDG_CACHE_HOME:-~/.cache}/bitsnet/
bits-build/<key>/, so a later run with the same inputs (CI) only copies it: no build tools needed.

Needs (Debian/Ubuntu): build-essential bison flex autoconf automake autopoint autogen gettext
libtool pkg-config zip mtools dosfstools xz-utils, and a CPython 2.7 as ``python2`` (Debian 12 has
none: ``pyenv install 2.7.18``, or BITS_BUILD_PYTHON2=/path/to/python2.7). Everything runs under
``nice``. Exit status: 0 built, 1 the build failed (the log's tail is shown), 2 usage or a
missing dependency.
"""

from __future__ import print_function

import argparse
import fcntl
import glob
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BITS_INSTALL = os.path.join(HERE, "bits_install.py")

# Source edits without which GRUB 2.02~beta (BITS 2079's) does not build with gcc 12 / binutils 2.40:
# (file under deps/grub, text to find, text to put in place of its first occurrence). Each applies once.
TOOLCHAIN_PATCHES = (
    # glibc 2.28 moved major()/minor() out of <sys/types.h>.
    ("util/getroot.c", "#include <sys/types.h>\n", "#include <sys/types.h>\n#include <sys/sysmacros.h>\n"),
    ("util/raid.c", "#include <sys/types.h>\n", "#include <sys/types.h>\n#include <sys/sysmacros.h>\n"),
    # binutils 2.31+ emits R_X86_64_PLT32 for calls where it used R_X86_64_PC32; same arithmetic here.
    ("util/grub-mkimagexx.c", "\t\tcase R_X86_64_PC32:\n", "\t\tcase R_X86_64_PC32:\n\t\tcase R_X86_64_PLT32:\n"),
    ("grub-core/kern/x86_64/dl.c", "\t\t  case R_X86_64_PC32:\n",
     "\t\t  case R_X86_64_PC32:\n\t\t  case R_X86_64_PLT32:\n"),
)

# GRUB's configure, as BITS's Makefile runs it for one flavour, plus what today's gcc needs: no PIE
# (GRUB's modules are relocated by GRUB itself), -fcommon (gcc 10 made -fno-common the default and
# GRUB 2.02 defines its globals in headers), and no -Werror on warnings gcc 12 added.
FLAVOUR = "x86_64-efi"
TOOLCHAIN_FLAGS = (
    "--disable-werror",
    "TARGET_CFLAGS=-Os -Wno-discarded-array-qualifiers -no-pie -fno-pie -fcommon -Wno-error",
    "TARGET_LDFLAGS=-no-pie",
    "HOST_CFLAGS=-fcommon -Wno-error",
    "CFLAGS=-O2 -fcommon -Wno-error",
)
CONFIGURE_OPTIONS = (
    "--program-prefix=", "--target=x86_64", "--with-platform=efi", "--disable-nls", "--disable-efiemu",
    "--disable-grub-emu-usb", "--disable-grub-emu-sdl", "--disable-grub-mkfont", "--disable-grub-mount",
    "--disable-device-mapper", "--disable-libzfs", "MAKEINFO=/bin/true",
)
ENTRY_POINTS = ("_socket.py", "select.py")  # BITS's modules that bits_install.py replaces with bitsnet's
GRUB_MODULES = ("fat", "part_msdos", "part_gpt", "iso9660")  # in bootx64.efi itself, as BITS's Makefile
# Bump when the build's output changes for the same inputs (a new step, a fixed step): new cache key.
RECIPE_VERSION = 2

# BITS's Makefile's pylibs: the standard library modules that make up boot/python/lib.zip.
PYLIBS = (
    "__future__.py _abcoll.py _threading_local.py _weakrefset.py abc.py argparse.py atexit.py base64.py "
    "BaseHTTPServer.py bdb.py bisect.py cgi.py cmd.py codecs.py collections.py ConfigParser.py "
    "contextlib.py copy.py copy_reg.py csv.py ctypes/__init__.py ctypes/_endian.py difflib.py dis.py "
    "dummy_thread.py dummy_threading.py encodings fnmatch.py formatter.py functools.py genericpath.py "
    "getopt.py gettext.py glob.py hashlib.py heapq.py httplib.py inspect.py keyword.py linecache.py "
    "locale.py logging/__init__.py mimetools.py mimetypes.py opcode.py optparse.py pdb.py pickle.py "
    "pkgutil.py posixpath.py pprint.py profile.py pstats.py pydoc.py pydoc_data re.py repr.py "
    "rfc822.py rlcompleter.py shlex.py shutil.py socket.py SocketServer.py sre_compile.py "
    "sre_constants.py sre_parse.py stat.py string.py StringIO.py struct.py textwrap.py threading.py "
    "timeit.py token.py tokenize.py traceback.py types.py unittest urllib.py urllib2.py urlparse.py "
    "UserDict.py uuid.py warnings.py weakref.py").split()

DEBIAN_PACKAGES = ("build-essential bison flex autoconf automake autopoint autogen gettext libtool "
                   "pkg-config zip mtools dosfstools xz-utils")
# Tools the build runs -> the Debian package that has it.
BUILD_TOOLS = (
    ("gcc", "build-essential"), ("make", "build-essential"), ("objcopy", "build-essential"),
    ("bison", "bison"), ("flex", "flex"), ("autoconf", "autoconf"), ("automake", "automake"),
    ("autopoint", "autopoint"), ("autogen", "autogen"), ("msgfmt", "gettext"), ("libtoolize", "libtool"),
    ("pkg-config", "pkg-config"), ("mcopy", "mtools"), ("mkfs.vfat", "dosfstools"), ("xz", "xz-utils"),
)
PYTHON2_HINT = ("a CPython 2.7 as python2 (Debian 12 has none: 'pyenv install 2.7.18', or set "
                "BITS_BUILD_PYTHON2=/path/to/python2.7)")
IMAGE_MIB = 128
SKIP_NAMES = (".git", ".hg", ".svn")
CACHE_KEEP = 3  # finished images kept in the cache (the newest)


class BuildError(Exception):
    """A build step failed."""


class MissingDependency(Exception):
    """A tool the build needs is not installed."""


# ---------------------------------------------------------------------------- small helpers
class Progress(object):
    """One console line per stage, with the time since the start."""

    def __init__(self, out=None):
        self.start = time.time()
        self.out = out or sys.stdout

    def __call__(self, text):
        self.out.write("bits_build [%6.1fs] %s\n" % (time.time() - self.start, text))
        self.out.flush()


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bitsnet")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _hash_file(digest, path):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)


def _walk(top, skip_top=()):
    """Sorted relative paths of the files (and symlinks) under ``top``; VCS folders are left out."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = os.path.relpath(dirpath, top)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES
                             and not (rel_dir == "." and d in skip_top))
        for name in filenames:
            if name not in SKIP_NAMES:
                found.append(os.path.normpath(os.path.join(rel_dir, name)))
        for name in dirnames:  # symlinks to folders are not followed by os.walk: hash the link
            if os.path.islink(os.path.join(dirpath, name)):
                found.append(os.path.normpath(os.path.join(rel_dir, name)))
    return sorted(found)


def tree_digest(top, skip_top=()):
    """Content hash of a folder: every file's relative path, mode's x bit and bytes."""
    digest = hashlib.sha256()
    for rel in _walk(top, skip_top):
        path = os.path.join(top, rel)
        digest.update(rel.encode("utf-8", "surrogateescape") if sys.version_info[0] > 2 else rel)
        if os.path.islink(path):
            digest.update(b"\0link\0" + os.readlink(path).encode("utf-8", "surrogateescape"))
        else:
            digest.update(b"\0x\0" if os.stat(path).st_mode & stat.S_IXUSR else b"\0-\0")
            _hash_file(digest, path)
        digest.update(b"\0\0")
    return digest.hexdigest()


def run(args, log, cwd=None, env=None):
    """Run a command with its output appended to ``log``; BuildError (with the log's tail) if it fails."""
    with open(log, "ab") as out:
        out.write(("\n$ (cd %s && %s)\n" % (cwd or os.getcwd(), " ".join(args))).encode("utf-8"))
        out.flush()
        status = subprocess.call(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if status != 0:
        raise BuildError("%s failed (exit status %d)\n%s\nlog: %s"
                         % (os.path.basename(args[0]), status, _tail(log, 30), log))


def _tail(path, lines):
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 16384))
        text = f.read().decode("utf-8", "replace")
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def _which(name):
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def find_python2():
    """A CPython 2.7 to compile BITS's Python files and to run GRUB's autogen scripts, or None."""
    candidates = []
    if os.environ.get("BITS_BUILD_PYTHON2"):
        candidates.append(os.environ["BITS_BUILD_PYTHON2"])
    candidates += [p for p in (_which("python2.7"), _which("python2")) if p]
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", "2.7*", "bin", "python2.7")), reverse=True)
    for candidate in candidates:
        try:
            version = subprocess.check_output([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                              stderr=subprocess.STDOUT)
        except (OSError, subprocess.CalledProcessError):
            continue
        if version.strip() == b"(2, 7)":
            return candidate
    return None


def check_dependencies():
    """The python2 to use; MissingDependency (one line) naming what to install otherwise."""
    missing = sorted(set(tool for tool, _ in BUILD_TOOLS if not _which(tool)))
    python2 = find_python2()
    if missing or not python2:
        what = ", ".join(missing + ([] if python2 else ["python2"]))
        raise MissingDependency("missing build tools: %s; install them with 'apt-get install %s'%s"
                                % (what, DEBIAN_PACKAGES, "" if python2 else " and " + PYTHON2_HINT))
    return python2


def ensure_dependencies(install=False):
    """check_dependencies(), after ``apt-get install`` of the Debian packages that hold the missing
    tools when ``install`` (as root or with password-less sudo: CI on a fresh machine)."""
    try:
        return check_dependencies()
    except MissingDependency:
        missing = sorted(set(package for tool, package in BUILD_TOOLS if not _which(tool)))
        if not install or not missing or not _which("apt-get"):
            raise
    import qemu_vm  # tools/ is on sys.path wherever bits_build is imported
    qemu_vm.apt_install(missing, tool="bits_build")
    return check_dependencies()


# ------------------------------------------------------------------------------ the inputs
class Source(object):
    """SOURCE (a tree or a tarball), its content key, and how to copy it."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        if os.path.isdir(self.path):
            if not os.path.isfile(os.path.join(self.path, "rc", "python", "config.c")):
                raise ValueError("%s is not a BITS source tree (no rc/python/config.c)" % path)
            if not os.path.isfile(os.path.join(self.path, "deps", "grub", "autogen.sh")):
                raise ValueError("%s has no deps/grub: fill deps/ first (git submodule update --init)" % path)
            self.kind = "tree"
        elif os.path.isfile(self.path) and tarfile.is_tarfile(self.path):
            self.kind = "tarball"
        else:
            raise ValueError("%s is neither a BITS source tree nor a BITS source tarball" % path)
        self._key = None

    def key(self):
        """Hash of the sources: the tarball's bytes, or the tree's files (without build output)."""
        if self._key is None:
            digest = hashlib.sha256(b"bits-source\0")
            if self.kind == "tarball":
                _hash_file(digest, self.path)
            else:
                digest.update(tree_digest(self.path, skip_top=("build",)).encode("ascii"))
                digest.update(self.version()[0].encode("utf-8"))
            self._key = digest.hexdigest()[:24]
        return self._key

    def version(self):
        """(buildid, buildnum) as BITS's Makefile computes them: from git, where SOURCE is a checkout."""
        buildid, buildnum = "Unknown - not built from repository", "snapshot"
        if self.kind == "tree" and os.path.exists(os.path.join(self.path, ".git")):
            env = dict(os.environ, GIT_CEILING_DIRECTORIES=self.path)
            try:
                head = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=self.path, env=env)
                count = subprocess.check_output(["git", "rev-list", "--count", "HEAD"], cwd=self.path, env=env)
                buildid, buildnum = head.decode().strip(), str(2000 + int(count))
            except (OSError, subprocess.CalledProcessError, ValueError):
                pass
        return buildid, buildnum

    def copy_to(self, target, log):
        """SOURCE's files at ``target`` (without VCS folders or SOURCE's own build/ output)."""
        staging = target + ".tmp"
        if os.path.exists(staging):
            shutil.rmtree(staging)
        os.makedirs(staging)
        if self.kind == "tarball":
            run(["tar", "-xf", self.path, "-C", staging], log)
            tops = os.listdir(staging)
            inner = os.path.join(staging, tops[0]) if len(tops) == 1 else staging
            if not os.path.isfile(os.path.join(inner, "rc", "python", "config.c")):
                raise BuildError("%s does not hold a BITS source tree (no rc/python/config.c)" % self.path)
            if inner != staging:
                os.rename(inner, staging + ".inner")
                os.rmdir(staging)
                os.rename(staging + ".inner", staging)
        else:
            excludes = ["--exclude=%s" % name for name in SKIP_NAMES] + ["--exclude=./build"]
            pack = subprocess.Popen(["tar", "-cf", "-"] + excludes + ["-C", self.path, "."], stdout=subprocess.PIPE)
            status = subprocess.call(["tar", "-xf", "-", "-C", staging], stdin=pack.stdout)
            pack.stdout.close()
            if pack.wait() != 0 or status != 0:
                raise BuildError("copying %s to %s failed" % (self.path, staging))
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(staging, target)


def bitsnet_inputs():
    """(relative path, bytes) of everything from this repository that goes into the build."""
    files = [os.path.join("bitsnet", name) for name in sorted(os.listdir(os.path.join(ROOT, "bitsnet")))
             if name.endswith(".py")]
    files += ["trampoline.c", "tools/bits_install.py", "bits/boot/python/_socket.py", "bits/boot/python/select.py"]
    return [(rel, _read(os.path.join(ROOT, rel))) for rel in files]


def image_key(source):
    """The cache key of the finished image: everything the build's output depends on."""
    digest = hashlib.sha256(b"bits-image\0")
    digest.update(source.key().encode("ascii"))
    digest.update(repr((RECIPE_VERSION, FLAVOUR, TOOLCHAIN_PATCHES, TOOLCHAIN_FLAGS, CONFIGURE_OPTIONS,
                        GRUB_MODULES, PYLIBS, IMAGE_MIB)).encode("utf-8"))
    for rel, data in bitsnet_inputs():
        digest.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(data).hexdigest().encode("ascii"))
    return digest.hexdigest()[:24]


# ------------------------------------------------------------------------------ the build
class Build(object):
    """The work directory of one SOURCE and the steps that fill it.

    WORK/<source key>/
      bits/           SOURCE's copy, bitsnet installed in it (rc/ is GRUB's contrib folder)
      grub/           deps/grub's copy, patched; grub-core/contrib-deps: the other deps
      grub-build/     GRUB's build folder (configure, make)
      grub-inst/      make install's prefix
      target/         efi/ and boot/ as they go on the ESP
      state/          what each step was last run on (digests), build.log
    """

    def __init__(self, source, work, jobs, progress, python2):
        self.source = source
        self.dir = os.path.join(work, source.key())
        self.jobs = jobs
        self.say = progress
        self.python2 = python2
        self.bits = os.path.join(self.dir, "bits")
        self.grub = os.path.join(self.dir, "grub")
        self.grub_build = os.path.join(self.dir, "grub-build")
        self.grub_inst = os.path.join(self.dir, "grub-inst")
        self.target = os.path.join(self.dir, "target")
        self.state = os.path.join(self.dir, "state")
        self.log = os.path.join(self.state, "build.log")
        self.bin = os.path.join(self.state, "bin")  # python and python2 for GRUB's scripts

    # -- state: a step records the digest of its inputs when it succeeds
    def _stamp(self, name):
        path = os.path.join(self.state, "stamp." + name)
        return _read(path).decode("ascii") if os.path.isfile(path) else None

    def _set_stamp(self, name, value):
        _write(os.path.join(self.state, "stamp." + name), (value or "").encode("ascii"))

    def _clear_stamp(self, name):
        path = os.path.join(self.state, "stamp." + name)
        if os.path.exists(path):
            os.remove(path)

    def env(self):
        env = dict(os.environ, GRUB_CONTRIB=os.path.join(self.bits, "rc"), LC_ALL="C")
        env["PATH"] = self.bin + os.pathsep + env.get("PATH", "")
        env.pop("MAKEFLAGS", None)
        return env

    def run(self, args, cwd=None):
        run(args, self.log, cwd=cwd, env=self.env())

    def lock(self):
        """An open file holding the work directory's lock: one build in it at a time."""
        if not os.path.isdir(self.state):
            os.makedirs(self.state)
        lock = open(os.path.join(self.state, "lock"), "w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lock

    def build(self):
        """Every step, each skipped where its inputs are unchanged; call it holding lock()."""
        _write(self.log, b"")
        self.say("work directory %s (log: state/build.log)" % self.dir)
        self._tools()
        self.step_copy()
        self.step_install()
        self.step_grub_tree()
        self.step_configure()
        self.step_make()
        self.step_target()

    def _tools(self):
        if not os.path.isdir(self.bin):
            os.makedirs(self.bin)
        for name in ("python", "python2"):
            link = os.path.join(self.bin, name)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(self.python2, link)

    def step_copy(self):
        if self._stamp("copied") == self.source.key() and os.path.isdir(self.bits):
            self.say("sources: reused the copy of %s" % self.source.path)
            return
        for name in ("copied", "grub-tree", "configured", "made"):
            self._clear_stamp(name)
        self.source.copy_to(self.bits, self.log)
        self._set_stamp("copied", self.source.key())
        self.say("sources: copied %s" % self.source.path)

    def step_install(self):
        self.run([sys.executable, BITS_INSTALL, self.bits])
        self.say("bitsnet: installed by tools/bits_install.py")

    def _contrib_defs(self):
        """Digest of what autogen.sh reads from the contrib folder (the Makefile.*.def/common files)."""
        digest = hashlib.sha256()
        for path in sorted(glob.glob(os.path.join(self.bits, "rc", "*", "Makefile.*"))):
            digest.update(os.path.relpath(path, self.bits).encode("utf-8") + b"\0")
            _hash_file(digest, path)
        return digest.hexdigest()

    def step_grub_tree(self):
        defs = self._contrib_defs()
        if self._stamp("grub-tree") == defs and os.path.isdir(self.grub):
            self.say("grub: sources and autogen.sh reused")
            return
        self._clear_stamp("configured")
        if self._stamp("grub-copied") != self.source.key() or not os.path.isdir(self.grub):
            if os.path.exists(self.grub):
                shutil.rmtree(self.grub)
            shutil.copytree(os.path.join(self.bits, "deps", "grub"), self.grub, symlinks=True,
                            ignore=shutil.ignore_patterns(*SKIP_NAMES))
            deps = os.path.join(self.grub, "grub-core", "contrib-deps")
            shutil.copytree(os.path.join(self.bits, "deps"), deps, symlinks=True,
                            ignore=lambda d, names: [n for n in names if n in SKIP_NAMES
                                                     or (d == os.path.join(self.bits, "deps") and n == "grub")])
            self._fixup_libffi(deps)
            for rel, old, new in TOOLCHAIN_PATCHES:
                apply_patch(os.path.join(self.grub, rel), old, new)
            self._set_stamp("grub-copied", self.source.key())
            self.say("grub: copied deps/ and applied %d toolchain patches" % len(TOOLCHAIN_PATCHES))
        self.run(["./autogen.sh"], cwd=self.grub)
        self._set_stamp("grub-tree", defs)
        self.say("grub: autogen.sh done")

    @staticmethod
    def _fixup_libffi(deps):
        """ffi.h from ffi.h.in, as BITS's Makefile's fixup-libffi does with sed."""
        text = _read(os.path.join(deps, "libffi", "include", "ffi.h.in")).decode("latin-1")
        text = (text.replace("#ifndef @TARGET@", "#ifdef GRUB_TARGET_CPU_I386")
                .replace("#define @TARGET@", "#define X86\n#else\n#define X86_64")
                .replace("@HAVE_LONG_DOUBLE@", "1").replace("@HAVE_LONG_DOUBLE_VARIANT@", "0")
                .replace("@FFI_EXEC_TRAMPOLINE_TABLE@", "0"))
        _write(os.path.join(deps, "libffi", "include", "ffi.h"), text.encode("latin-1"))

    def step_configure(self):
        key = self._stamp("grub-tree") or ""
        if self._stamp("configured") == key and os.path.isfile(os.path.join(self.grub_build, "Makefile")):
            self.say("grub: configure reused")
            return
        self._clear_stamp("made")
        if not os.path.isdir(self.grub_build):
            os.makedirs(self.grub_build)
        self.run([os.path.join(self.grub, "configure"), "--prefix=" + self.grub_inst,
                  "--libdir=" + os.path.join(self.grub_inst, "lib")] + list(CONFIGURE_OPTIONS)
                 + list(TOOLCHAIN_FLAGS), cwd=self.grub_build)
        self._set_stamp("configured", key)
        self.say("grub: configured for %s" % FLAVOUR)

    def step_make(self):
        rc = tree_digest(os.path.join(self.bits, "rc"))
        if self._stamp("made") == rc and os.path.isfile(self._mkimage()):
            self.say("grub: make skipped (rc/ unchanged)")
            return
        self.run(["make", "-j%d" % self.jobs, "install"], cwd=self.grub_build)
        self._set_stamp("made", rc)
        self.say("grub: make -j%d install done" % self.jobs)

    def _mkimage(self):
        return os.path.join(self.grub_inst, "bin", "grub-mkimage")

    def step_target(self):
        """target/: efi/ and boot/ as BITS's Makefile lays them out (x86_64-efi only)."""
        staging = self.target + ".tmp"
        if os.path.exists(staging):
            shutil.rmtree(staging)
        boot = os.path.join(staging, "boot")
        for rel in ("efi/boot", "boot/grub/" + FLAVOUR, "boot/mcu", "boot/mcu.first", "boot/python"):
            os.makedirs(os.path.join(staging, rel))
        modules = os.path.join(self.grub_inst, "lib", "grub", FLAVOUR)
        for suffix in ("img", "lst", "mod"):
            for path in glob.glob(os.path.join(modules, "*." + suffix)):
                shutil.copy(path, os.path.join(boot, "grub", FLAVOUR))
        self.run([self._mkimage(), "-O", FLAVOUR, "--output=" + os.path.join(staging, "efi", "boot", "bootx64.efi"),
                  "--prefix=/boot/grub", "--directory=" + modules] + list(GRUB_MODULES))
        _write(os.path.join(boot, "grub", "grub.cfg"), b"source /boot/cfg/toplevel.cfg\n")
        for name in ("syslinux", "Documentation", "cfg"):
            shutil.copytree(os.path.join(self.bits, name), os.path.join(boot, name), symlinks=True)
        _write(os.path.join(boot, "bits-log.txt"), b"\n" * 524288)
        for name, to in (("bits-cfg.txt", "boot"), ("NEWS.txt", "boot"), ("COPYING", "boot"), ("INSTALL.txt", ".")):
            shutil.copy(os.path.join(self.bits, name), os.path.join(staging, to, name))
        buildid, buildnum = self.source.version()
        readme = _read(os.path.join(self.bits, "README.txt")).decode("latin-1")
        readme = readme.replace("@@BUILDID@@", buildid).replace("@@BUILDNUM@@", buildnum)
        _write(os.path.join(boot, "README.txt"), readme.encode("latin-1"))
        self._python(os.path.join(boot, "python"), buildid, buildnum)
        if os.path.exists(self.target):
            shutil.rmtree(self.target)
        os.rename(staging, self.target)
        self.say("target: efi/ and boot/ assembled (Python compiled by %s)" % self.python2)

    def _python(self, python, buildid, buildnum):
        for name in os.listdir(os.path.join(self.bits, "python")):
            path = os.path.join(self.bits, "python", name)
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(python, name), symlinks=True)
            else:
                shutil.copy(path, python)
        _write(os.path.join(python, "bitsversion.py"),
               ('buildid = "%s"\nbuildnum = "%s"\n' % (buildid, buildnum)).encode("utf-8"))
        defaults = _read(os.path.join(self.bits, "bits-cfg.txt"))
        _write(os.path.join(python, "bitsconfigdefaults.py"),
               b'# Built-in configuration defaults.\n# Do not edit; edit /boot/bits-cfg.txt instead.\n'
               b'defaults = """\n' + defaults + b'"""\n')
        self.bytecompile(python)
        # bitsnet ships as source only (bits/README.txt): with every mtime 0, a .pyc would win
        # over a .py edited later on the boot medium. BITS's own files keep theirs, as BITS does.
        source_only = glob.glob(os.path.join(python, "bitsnet", "*.pyc"))
        source_only += [os.path.join(python, name[:-3] + ".pyc") for name in ENTRY_POINTS]
        for path in source_only:
            if os.path.isfile(path):
                os.remove(path)
        libzip = os.path.join(self.state, "lib.zip")
        if self._stamp("lib.zip") != self.source.key() or not os.path.isfile(libzip):
            self._libzip(libzip)
            self._set_stamp("lib.zip", self.source.key())
        shutil.copy(libzip, os.path.join(python, "lib.zip"))

    def bytecompile(self, folder):
        """compileall with python2, then the .pyc mtimes zeroed: GRUB's files have none (mtime 0)."""
        self.run([self.python2, "-m", "compileall", "-q", "-d", "", folder])
        for dirpath, _, filenames in os.walk(folder):
            for name in filenames:
                if name.endswith(".pyc"):
                    with open(os.path.join(dirpath, name), "r+b") as f:
                        f.seek(4)
                        f.write(b"\0\0\0\0")

    def _libzip(self, libzip):
        pylib = os.path.join(self.state, "python-lib")
        if os.path.exists(pylib):
            shutil.rmtree(pylib)
        lib = os.path.join(self.bits, "deps", "python", "Lib")
        for rel in PYLIBS:
            source, dest = os.path.join(lib, rel), os.path.join(pylib, rel)
            if os.path.isdir(source):
                shutil.copytree(source, dest)
            else:
                if not os.path.isdir(os.path.dirname(dest)):
                    os.makedirs(os.path.dirname(dest))
                shutil.copy2(source, dest)
        self.bytecompile(pylib)
        with zipfile.ZipFile(libzip + ".tmp", "w", zipfile.ZIP_DEFLATED) as archive:
            for rel in _walk(pylib):
                if rel.endswith(".pyc"):
                    archive.write(os.path.join(pylib, rel), rel)
        os.rename(libzip + ".tmp", libzip)


def apply_patch(path, old, new):
    """Replace the first ``old`` by ``new`` in the file; nothing if ``new`` is there already."""
    text = _read(path).decode("latin-1")
    if new in text:
        return
    if old not in text:
        raise BuildError("toolchain patch does not apply: %r not found in %s" % (old, path))
    _write(path, text.replace(old, new, 1).encode("latin-1"))


def make_image(tree, image, log):
    """A FAT32 ESP image of IMAGE_MIB MiB (sparse) holding tree's efi/ and boot/."""
    staging = image + ".tmp"
    if os.path.exists(staging):
        os.remove(staging)
    with open(staging, "wb") as f:
        f.truncate(IMAGE_MIB << 20)
    run(["mkfs.vfat", "-F", "32", "-n", "BITS", staging], log)
    run(["mcopy", "-s", "-Q", "-m", "-i", staging, os.path.join(tree, "efi"), os.path.join(tree, "boot"), "::/"], log)
    os.rename(staging, image)


def _copy_tree_out(tree, dest):
    """efi/ and boot/ of ``tree`` into ``dest`` (replacing what those two folders held)."""
    if not os.path.isdir(dest):
        os.makedirs(dest)
    for name in ("efi", "boot"):
        target = os.path.join(dest, name)
        if os.path.exists(target):
            shutil.rmtree(target)
        shutil.copytree(os.path.join(tree, name), target, symlinks=True)


def _copy_image_out(image, dest):
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    staging = "%s.%d.tmp" % (dest, os.getpid())
    subprocess.check_call(["cp", "--sparse=always", image, staging])
    os.rename(staging, dest)


def _prune_cache(images, keep):
    entries = [os.path.join(images, name) for name in os.listdir(images)]
    entries = [e for e in entries if os.path.isfile(os.path.join(e, "bits.img"))]
    entries.sort(key=lambda e: os.stat(os.path.join(e, "bits.img")).st_mtime, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def cached_image(source_path):
    """The cached image for SOURCE and this checkout's bitsnet, or None (used by the tests)."""
    path = os.path.join(cache_root(), "bits-build", image_key(Source(source_path)), "bits.img")
    return path if os.path.isfile(path) else None


def work_ready(source_path, work=None):
    """Whether a finished work directory for SOURCE exists: a rebuild is incremental (the tests)."""
    work = work or os.path.join(cache_root(), "bits-work")
    return os.path.isfile(os.path.join(work, Source(source_path).key(), "state", "stamp.made"))


def build(source_path, out=None, tree=None, jobs=2, work=None, use_cache=True, progress=None):
    """Build (or take from the cache) the image of SOURCE with bitsnet; returns the cached image's path."""
    say = progress or Progress()
    source = Source(source_path)
    key = image_key(source)
    entry = os.path.join(cache_root(), "bits-build", key)
    image = os.path.join(entry, "bits.img")
    say("source %s (%s, key %s); image key %s" % (source.path, source.kind, source.key(), key))
    if use_cache and os.path.isfile(image) and os.path.isdir(os.path.join(entry, "tree", "boot")):
        say("cache hit: %s" % image)
    else:
        python2 = check_dependencies()
        work = work or os.path.join(cache_root(), "bits-work")
        builder = Build(source, work, jobs, say, python2)
        with builder.lock():  # held until the image is in the cache: a second run waits, then reuses
            builder.build()
            if not os.path.isdir(entry):
                os.makedirs(entry)
            make_image(builder.target, os.path.join(builder.state, "bits.img"), builder.log)
            staged_tree = os.path.join(entry, "tree.tmp")
            if os.path.exists(staged_tree):
                shutil.rmtree(staged_tree)
            _copy_tree_out(builder.target, staged_tree)
            if os.path.exists(os.path.join(entry, "tree")):
                shutil.rmtree(os.path.join(entry, "tree"))
            os.rename(staged_tree, os.path.join(entry, "tree"))
            _copy_image_out(os.path.join(builder.state, "bits.img"), image)
            _prune_cache(os.path.dirname(entry), CACHE_KEEP)
        say("image: %s" % image)
    if out:
        _copy_image_out(image, out)
        say("wrote %s" % out)
    if tree:
        _copy_tree_out(os.path.join(entry, "tree"), tree)
        say("wrote %s/efi and %s/boot" % (tree, tree))
    return image


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="bits_build.py", description="Build BITS (x86_64-efi) with bitsnet and its trampoline compiled in.")
    parser.add_argument("source", metavar="SOURCE", help="BITS source tree (deps/ filled) or bits-*-src.tar.xz")
    parser.add_argument("--out", metavar="IMAGE", required=True, help="where to write the FAT ESP image")
    parser.add_argument("--tree", metavar="DIR", help="also write the unpacked efi/ and boot/ here")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() if hasattr(os, "cpu_count") else 2,
                        help="make -jN (default: the number of CPUs)")
    parser.add_argument("--work", metavar="DIR",
                        help="work directories (default: ${XDG_CACHE_HOME:-~/.cache}/bitsnet/bits-work)")
    parser.add_argument("--no-cache", action="store_true", help="build even if the image is cached")
    args = parser.parse_args(argv)
    try:
        os.nice(10)  # a long build beside other work: everything it starts inherits this
    except OSError:
        pass
    say = Progress()
    try:
        build(args.source, out=args.out, tree=args.tree, jobs=max(1, args.jobs or 1), work=args.work,
              use_cache=not args.no_cache, progress=say)
    except ValueError as exc:
        parser.error(str(exc))
    except MissingDependency as exc:
        print("bits_build.py: %s" % exc, file=sys.stderr)
        return 2
    except (BuildError, EnvironmentError) as exc:
        print("bits_build.py: build failed: %s" % exc, file=sys.stderr)
        return 1
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
