#!/usr/bin/env python
"""Install bitsnet into a BITS source tree or an unpacked BITS image, and take it out again.

    python tools/bits_install.py [--dry-run] [--uninstall] TARGET

TARGET is either
  a BITS source tree (biosbits/bits: it has rc/python/config.c, rc/python/Makefile.core.def
      and python/), rebuilt afterwards; or
  an unpacked built BITS image: the folder holding boot/python, used as it is.

What install does, each step only if it is not done already (running it twice changes nothing):
1. The package: every .py file of bitsnet/ to <python>/bitsnet/ (<python> is python/ in a source
   tree, boot/python in an image); files there that bitsnet no longer has are removed.
2. The entry points: BITS puts /boot/python first on sys.path and ships its own _socket.py and
   select.py there; bits/boot/python/_socket.py and select.py of this repository (they only call
   bitsnet.install()) replace them. BITS's own files are kept as _socket.py.bits-orig and
   select.py.bits-orig, so --uninstall restores them byte for byte.
3. Bytecode: GRUB's file systems give Python no modification times, so a .pyc cannot be told
   stale from fresh and an old one would win over the new .py. Every .pyc/.pyo of bitsnet is
   removed; those next to BITS's entry points are kept as *.bits-orig with their .py.
4. Source tree only: trampoline.c is copied to rc/python/trampoline.c (the build copies
   rc/python/ to grub-core/contrib/python/) and made a built-in module of BITS's Python:
   rc/python/config.c gets ``extern void init_bitsnet_trampoline(void);`` and the
   ``{"_bitsnet_trampoline", init_bitsnet_trampoline},`` entry of ``_PyImport_Inittab`` next to
   ``_efi`` under ``#ifdef GRUB_MACHINE_EFI``; rc/python/Makefile.core.def gets
   ``efi = contrib/python/trampoline.c;`` next to ``efi = contrib/python/efimodule.c;``
   (docs/bits-efi.md section 11). An image cannot get it without a rebuild: bitsnet
   then uses BITS's own ``_efi`` event hook (BITS 2070 and later).
5. The ``python -m MODULE`` command at the GRUB prompt: BITS's GRUB ``python`` command takes no
   arguments and BITS has no runpy, so cfg/init.cfg (boot/cfg/init.cfg in an image) gets one
   line after BITS's ``py 'init.init(); del init'``:
   ``py 'import bitsnet.launch; bitsnet.launch.register_grub_commands()'``, which registers
   bitsnet.launch's ``python`` command over BITS's (GRUB runs the latest registration of a name;
   plain ``python`` still opens the interactive interpreter).

--uninstall undoes exactly that: the package goes, the .bits-orig files come back, the lines
added to config.c, Makefile.core.def and init.cfg are taken out again (nothing else in those
files is touched), rc/python/trampoline.c goes. --dry-run prints the same list of changes and
makes none.

Bytecode is not shipped: BITS compiles bitsnet's .py at import (it writes no .pyc). A .pyc
compiled here by a host Python 2.7 would save that compile time at each boot, but it needs a
Python 2.7 on the installing machine, and a .pyc (mtime 0, like every file GRUB shows) would
silently win over a .py later edited on the boot medium -- the stale-bytecode trap of step 3.
tests/test_bits_lint.py keeps every line of bitsnet below the size that crashes BITS's
compiler (docs/bits-environment.md section 9), so compiling in BITS is safe.

Exit status: 0 done (or nothing to do), 1 a change failed or a file is not what was expected,
2 usage error (TARGET is neither kind of BITS tree).
"""

from __future__ import print_function

import argparse
import io
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PACKAGE_DIR = os.path.join(ROOT, "bitsnet")
SHIM_DIR = os.path.join(ROOT, "bits", "boot", "python")  # helper E's drop-in entry points
TRAMPOLINE_C = os.path.join(ROOT, "trampoline.c")

ENTRY_POINTS = ("_socket.py", "select.py")
BYTECODE = (".pyc", ".pyo")
BACKUP = ".bits-orig"  # suffix of BITS's own files that install replaced
MODULE = "_bitsnet_trampoline"
TRAMPOLINE_MARK = b"_bitsnet_trampoline"  # how a trampoline.c is recognised as bitsnet's

# The lines added to config.c and Makefile.core.def; uninstall removes exactly these lines.
CONFIG_EXTERN = "extern void init_bitsnet_trampoline(void);"
CONFIG_ENTRY = '{"%s", init_bitsnet_trampoline},' % MODULE
CONFIG_IFDEF = "#ifdef GRUB_MACHINE_EFI  /* bitsnet */"  # only if config.c has no _efi entry to join
CONFIG_ENDIF = "#endif  /* bitsnet */"
MAKEFILE_LINE = "efi = contrib/python/trampoline.c;"
ADDED_LINES = (CONFIG_EXTERN, CONFIG_ENTRY, CONFIG_IFDEF, CONFIG_ENDIF, MAKEFILE_LINE)
# The line added to init.cfg (step 5), after BITS's init.init() line (or at the end without one).
INIT_CFG_LINE = "py 'import bitsnet.launch; bitsnet.launch.register_grub_commands()'"

_INITTAB = re.compile(r"^\s*struct\s+_inittab\s+_PyImport_Inittab\s*\[\s*\]")
_EXTERN_INIT = re.compile(r"^\s*extern\s+void\s+\w+\s*\(\s*void\s*\)\s*;")
_EFI_ENTRY = re.compile(r'^(\s*)\{\s*"_efi"\s*,\s*init_efi\s*\}\s*,')
_SENTINEL = re.compile(r"^(\s*)\{\s*0\s*,\s*0\s*\}")
_EFIMODULE = re.compile(r"^(\s*)efi\s*=\s*contrib/python/efimodule\.c\s*;")
_INIT_INIT = re.compile(r"""^\s*py\s+['"].*\binit\.init\(\)""")


class UsageError(Exception):
    """TARGET is not something this tool can install into."""


class InstallError(Exception):
    """A file is not as expected; nothing sensible can be done automatically."""


class Layout(object):
    """Where things are in the target: ``kind`` is "source" or "image"."""

    def __init__(self, target):
        self.root = os.path.abspath(target)
        rc_python = os.path.join(self.root, "rc", "python")
        source_python = os.path.join(self.root, "python")
        image_python = os.path.join(self.root, "boot", "python")
        if (os.path.isfile(os.path.join(rc_python, "config.c"))
                and os.path.isfile(os.path.join(rc_python, "Makefile.core.def"))
                and os.path.isdir(source_python)):
            self.kind, self.python, self.rc_python = "source", source_python, rc_python
            self.init_cfg = os.path.join(self.root, "cfg", "init.cfg")
        elif os.path.isdir(image_python):
            self.kind, self.python, self.rc_python = "image", image_python, None
            self.init_cfg = os.path.join(self.root, "boot", "cfg", "init.cfg")
        elif os.path.basename(self.root) == "python" and os.path.basename(os.path.dirname(self.root)) == "boot":
            raise UsageError("%s is boot/python itself: give the folder that holds boot/" % target)
        else:
            raise UsageError("%s is neither a BITS source tree (rc/python/config.c, rc/python/Makefile.core.def, "
                             "python/) nor an unpacked BITS image (boot/python/)" % target)

    def rel(self, path):
        return os.path.relpath(path, self.root)


class Plan(object):
    """The changes to make, in order; each is described before (or instead of) being made."""

    def __init__(self, layout):
        self.layout = layout
        self.steps = []  # type: list   # (description, function, args)

    def __len__(self):
        return len(self.steps)

    def write(self, path, data, why, replaced=None):
        """``replaced``: whether a file is there when this step runs (default: is there now)."""
        replaced = os.path.exists(path) if replaced is None else replaced
        self.steps.append(("%s %s (%s)" % ("update" if replaced else "create",
                                           self.layout.rel(path), why), _write, (path, data)))

    def rename(self, path, new_path, why):
        self.steps.append(("move %s to %s (%s)" % (self.layout.rel(path), self.layout.rel(new_path), why),
                           _rename, (path, new_path)))

    def remove(self, path, why):
        self.steps.append(("remove %s (%s)" % (self.layout.rel(path), why), _remove, (path,)))

    def note(self, text):
        """Something the user should know; changes nothing."""
        self.steps.append(("note: " + text, _nothing, ()))

    def edit(self, path, lines, changes):
        """Replace the file with ``lines``; ``changes`` are ("+"/"-", text) pairs to show."""
        description = "edit %s:%s" % (self.layout.rel(path),
                                      "".join("\n      %s %s" % (sign, text) for sign, text in changes))
        self.steps.append((description, _write, (path, "".join(lines).encode("latin-1"))))

    def run(self, dry_run, out):
        for description, function, args in self.steps:
            would = "would " if dry_run and function is not _nothing else ""
            out.write(_native(would + description + "\n"))
            if not dry_run:
                function(*args)


def _native(text):
    """``text`` as the native str (file lines are decoded as latin-1: unicode on Python 2)."""
    if isinstance(text, str):
        return text
    return text.encode("ascii", "backslashreplace")


def _read(path):
    with io.open(path, "rb") as f:
        return f.read()


def _write(path, data):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with io.open(path, "wb") as f:
        f.write(data)


def _nothing():
    pass


def _rename(path, new_path):
    os.rename(path, new_path)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def package_files():
    """{name: bytes} of bitsnet's runtime: every .py file of the package (no bytecode, no tests)."""
    return dict((name, _read(os.path.join(PACKAGE_DIR, name)))
                for name in sorted(os.listdir(PACKAGE_DIR)) if name.endswith(".py"))


def _lines(path):
    """The file's lines (latin-1, so any byte round-trips) and its line ending."""
    lines = _read(path).decode("latin-1").splitlines(True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    return lines, newline


# ------------------------------------------------------------------------------- install
def plan_install(layout):
    plan = Plan(layout)
    _plan_package(plan, layout)
    for name in ENTRY_POINTS:
        _plan_entry_point(plan, layout, name)
    if layout.kind == "source":
        _plan_trampoline(plan, layout)
        _plan_config_c(plan, layout)
        _plan_makefile(plan, layout)
    _plan_init_cfg(plan, layout)
    if len(plan) == 1 and plan.steps[0][1] is _nothing:
        return Plan(layout)  # only the note: nothing to do
    return plan


def _plan_package(plan, layout):
    target = os.path.join(layout.python, "bitsnet")
    if os.path.exists(target) and not os.path.isdir(target):
        raise InstallError("%s exists and is not a directory" % layout.rel(target))
    wanted = package_files()
    present = sorted(os.listdir(target)) if os.path.isdir(target) else []
    for name in present:
        path = os.path.join(target, name)
        if name == "__pycache__" or name.endswith(BYTECODE):
            plan.remove(path, "stale bytecode: GRUB gives no mtimes to check it against")
        elif name not in wanted:
            plan.remove(path, "not part of this bitsnet")
    for name, data in sorted(wanted.items()):
        path = os.path.join(target, name)
        if not os.path.isfile(path) or _read(path) != data:
            plan.write(path, data, "bitsnet package")


def _plan_entry_point(plan, layout, name):
    path = os.path.join(layout.python, name)
    backup = path + BACKUP
    shim = _read(os.path.join(SHIM_DIR, name))
    current = _read(path) if os.path.isfile(path) else None
    # BITS's own files are saved once, by the install that first replaces them; its bytecode with
    # them (also when an image ships the bytecode alone). Later installs find our shim there.
    first = not os.path.exists(backup) and (current is None or not _is_shim(current))
    if current is not None and current != shim:
        if first:
            plan.rename(path, backup, "BITS's own, restored by --uninstall")
        elif not _is_shim(current):
            raise InstallError("%s is neither BITS's (that is %s) nor bitsnet's: move it away first"
                               % (layout.rel(path), layout.rel(backup)))
    if current != shim:
        plan.write(path, shim, "entry point: import %s gives bitsnet's" % name[:-3], replaced=not first)
    for suffix in BYTECODE:
        compiled = path[:-3] + suffix
        if not os.path.exists(compiled):
            continue
        if first and not os.path.exists(compiled + BACKUP):
            plan.rename(compiled, compiled + BACKUP, "BITS's own bytecode would shadow the new .py")
        else:
            plan.remove(compiled, "stale bytecode: GRUB gives no mtimes to check it against")


def _plan_trampoline(plan, layout):
    path = os.path.join(layout.rc_python, "trampoline.c")
    data = _read(TRAMPOLINE_C)
    if os.path.isfile(path):
        current = _read(path)
        if current == data:
            return
        if TRAMPOLINE_MARK not in current:
            raise InstallError("%s exists and is not bitsnet's trampoline" % layout.rel(path))
    plan.write(path, data, "built-in module %s" % MODULE)


def _plan_config_c(plan, layout):
    path = os.path.join(layout.rc_python, "config.c")
    lines, newline = _lines(path)
    starts = [i for i, line in enumerate(lines) if _INITTAB.match(line)]
    if not starts:
        raise InstallError("%s has no _PyImport_Inittab: add %s by hand" % (layout.rel(path), CONFIG_ENTRY))
    start = starts[0]
    changes = []
    if not any(line.strip() == CONFIG_EXTERN for line in lines):
        externs = [i for i in range(start) if _EXTERN_INIT.match(lines[i])]
        at = externs[-1] + 1 if externs else start
        lines.insert(at, CONFIG_EXTERN + newline)
        changes.append(("+", CONFIG_EXTERN))
        start += 1
    if not any(line.strip() == CONFIG_ENTRY for line in lines[start:]):
        block = _inittab_entry(lines, start, newline)
        if block is None:
            raise InstallError("%s: no end ({0, 0}) found in _PyImport_Inittab" % layout.rel(path))
        at, added = block
        lines[at:at] = added
        changes.extend(("+", line.rstrip()) for line in added)
    if changes:
        plan.edit(path, lines, changes)


def _inittab_entry(lines, start, newline):
    """(index, lines) to insert into _PyImport_Inittab, or None if its end is not found.

    Next to BITS's ``{"_efi", init_efi},`` if there is one (inside its ``#ifdef GRUB_MACHINE_EFI``:
    the trampoline is built for EFI only); otherwise a block of our own above the sentinel.
    """
    for i in range(start, len(lines)):
        efi_entry = _EFI_ENTRY.match(lines[i])
        if efi_entry:
            return i + 1, [efi_entry.group(1) + CONFIG_ENTRY + newline]
        sentinel = _SENTINEL.match(lines[i])
        if sentinel:
            at = i
            while at > start and lines[at - 1].strip().startswith("/*"):
                at -= 1  # stay above the "/* Sentinel */" comment
            indent = sentinel.group(1)
            return at, [CONFIG_IFDEF + newline, indent + CONFIG_ENTRY + newline, CONFIG_ENDIF + newline]
    return None


def _plan_makefile(plan, layout):
    path = os.path.join(layout.rc_python, "Makefile.core.def")
    lines, newline = _lines(path)
    if any(line.strip() == MAKEFILE_LINE for line in lines):
        return
    for i, line in enumerate(lines):
        match = _EFIMODULE.match(line)
        if match:
            lines.insert(i + 1, match.group(1) + MAKEFILE_LINE + newline)
            plan.edit(path, lines, [("+", match.group(1) + MAKEFILE_LINE)])
            return
    raise InstallError("%s has no 'efi = contrib/python/efimodule.c;' line: add %r by hand to the python module"
                       % (layout.rel(path), MAKEFILE_LINE))


def _plan_init_cfg(plan, layout):
    """Step 5: the line that registers ``python -m`` at boot, after ``init.init()``."""
    path = layout.init_cfg
    if not os.path.isfile(path):
        plan.note("no %s: 'python -m' needs %s run at boot (add it to your GRUB configuration)"
                  % (layout.rel(path), INIT_CFG_LINE))
        return
    lines, newline = _lines(path)
    if any(line.strip() == INIT_CFG_LINE for line in lines):
        return
    anchors = [i for i, line in enumerate(lines) if _INIT_INIT.match(line)]
    at = anchors[-1] + 1 if anchors else len(lines)
    if at == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        # The last line has no line end: give it one, and ours none (--uninstall takes both back).
        lines[-1] += newline
        lines.append(INIT_CFG_LINE)
    else:
        lines.insert(at, INIT_CFG_LINE + newline)
    plan.edit(path, lines, [("+", INIT_CFG_LINE)])


def _unplan_init_cfg(plan, layout):
    path = layout.init_cfg
    if not os.path.isfile(path):
        return
    lines, _ = _lines(path)
    ours = [i for i, line in enumerate(lines) if line.strip() == INIT_CFG_LINE]
    if not ours:
        return
    for i in reversed(ours):
        if i == len(lines) - 1 and i > 0 and not lines[i].endswith(("\n", "\r")):
            lines[i - 1] = lines[i - 1].rstrip("\r\n")  # the line end install added
        del lines[i]
    plan.edit(path, lines, [("-", INIT_CFG_LINE)] * len(ours))


# ----------------------------------------------------------------------------- uninstall
def plan_uninstall(layout):
    plan = Plan(layout)
    target = os.path.join(layout.python, "bitsnet")
    if os.path.isdir(target):
        plan.remove(target, "bitsnet package")
    for name in ENTRY_POINTS:
        _plan_restore(plan, layout, name)
    if layout.kind == "source":
        path = os.path.join(layout.rc_python, "trampoline.c")
        if os.path.isfile(path):
            if TRAMPOLINE_MARK not in _read(path):
                raise InstallError("%s is not bitsnet's trampoline: left alone" % layout.rel(path))
            plan.remove(path, "built-in module %s" % MODULE)
        for name in ("config.c", "Makefile.core.def"):
            path = os.path.join(layout.rc_python, name)
            lines, _ = _lines(path)
            kept = [line for line in lines if line.strip() not in ADDED_LINES]
            if len(kept) != len(lines):
                plan.edit(path, kept, [("-", line.rstrip("\r\n")) for line in lines if line.strip() in ADDED_LINES])
    _unplan_init_cfg(plan, layout)
    return plan


def _plan_restore(plan, layout, name):
    path = os.path.join(layout.python, name)
    backup = path + BACKUP
    ours = os.path.isfile(path) and _is_shim(_read(path))
    if os.path.isfile(backup):
        if os.path.exists(path):
            plan.remove(path, "bitsnet's entry point")
        plan.rename(backup, path, "BITS's own")
    elif ours:
        plan.remove(path, "bitsnet's entry point; BITS had none")
    for suffix in BYTECODE:
        compiled = path[:-3] + suffix
        if os.path.exists(compiled + BACKUP):
            if os.path.exists(compiled):
                plan.remove(compiled, "bytecode of bitsnet's entry point")
            plan.rename(compiled + BACKUP, compiled, "BITS's own")
        elif ours and os.path.exists(compiled):
            plan.remove(compiled, "bytecode of bitsnet's entry point")


def _is_shim(data):
    """An entry point of ours (this version's or an older one's): it calls bitsnet.install()."""
    return b"bitsnet.install()" in data


# ---------------------------------------------------------------------------------- main
def main(argv=None, out=None):
    out = out or sys.stdout
    parser = argparse.ArgumentParser(
        prog="bits_install.py", description="Install bitsnet into a BITS source tree or an unpacked BITS image.",
        epilog="See the module docstring (python -c 'import bits_install; help(bits_install)') for each step.")
    parser.add_argument("target", metavar="TARGET",
                        help="BITS source tree (rc/python/config.c, python/) or the folder holding boot/python")
    parser.add_argument("--uninstall", action="store_true", help="take bitsnet out and restore BITS's own files")
    parser.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    args = parser.parse_args(argv)
    try:
        layout = Layout(args.target)
    except UsageError as exc:
        parser.error(str(exc))
    what = "uninstall" if args.uninstall else "install"
    try:
        plan = plan_uninstall(layout) if args.uninstall else plan_install(layout)
        if not plan:
            out.write("nothing to do: bitsnet is %s in %s (%s)\n"
                      % ("not installed" if args.uninstall else "installed", layout.root, _kind(layout)))
            return 0
        out.write("%s bitsnet %s %s (%s)\n" % ("would" if args.dry_run else "will", what, layout.root, _kind(layout)))
        plan.run(args.dry_run, out)
    except (InstallError, EnvironmentError) as exc:
        out.flush()
        print("bits_install.py: %s failed: %s" % (what, exc), file=sys.stderr)
        return 1
    if not args.dry_run and not args.uninstall:
        if layout.kind == "source":
            out.write("done: rebuild BITS; at the boot prompt 'import socket' is bitsnet's "
                      "(with %s built in), and 'python -m MODULE' works\n" % MODULE)
        else:
            out.write("done: at the boot prompt 'import socket' is bitsnet's (without %s: it uses BITS's "
                      "_efi event hook, BITS 2070 and later), and 'python -m MODULE' works\n" % MODULE)
    elif not args.dry_run:
        out.write("done: BITS's own files are back\n")
    return 0


def _kind(layout):
    return "BITS source tree" if layout.kind == "source" else "unpacked BITS image"


if __name__ == "__main__":
    sys.exit(main())
