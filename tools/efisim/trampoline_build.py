"""Build ``trampoline.c`` for the running interpreter and import it as ``_bitsnet_trampoline``.

In BITS the trampoline is compiled into the interpreter (see the comment at the top of
``trampoline.c``). On a host it is an extension module built on first use with gcc into
``build/trampoline/<tag>/`` of the repository, one directory per interpreter ABI (``cpython-311``,
``cpython-36m``, ``cpython-27mu``), so Python 2.7 and 3 test runs share a checkout.

The build is cached (redone only when ``trampoline.c`` is newer than the module) and atomic (gcc
writes a private temporary file that is renamed into place), so parallel test runs do not clash.
Run as a script, it builds and prints the module's path::

    python tools/efisim/trampoline_build.py
"""

from __future__ import print_function

import os
import subprocess
import sys
import sysconfig
import uuid

MODULE = "_bitsnet_trampoline"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "trampoline.c")
CFLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra"]


def abi_tag():
    # type: () -> str
    """Directory name for this interpreter's ABI: cache tag plus ABI flags (``cpython-27mu``)."""
    if sys.version_info[0] >= 3:
        return sys.implementation.cache_tag + (sysconfig.get_config_var("ABIFLAGS") or "")
    flags = ("d" if hasattr(sys, "gettotalrefcount") else "") + "m" + ("u" if sys.maxunicode > 0xFFFF else "")
    return "cpython-%d%d%s" % (sys.version_info[0], sys.version_info[1], flags)


def extension_suffix():
    # type: () -> str
    return sysconfig.get_config_var("EXT_SUFFIX") or sysconfig.get_config_var("SO") or ".so"


def include_dir():
    # type: () -> str
    """Where Python.h is: the base interpreter's headers (a virtualenv has none of its own)."""
    for path in (sysconfig.get_config_var("INCLUDEPY"), sysconfig.get_paths().get("include")):
        if path and os.path.exists(os.path.join(path, "Python.h")):
            return path
    raise RuntimeError("cannot build %s: Python.h not found for %s (looked in %s); install this "
                       "interpreter's development headers (python3-dev, or a pyenv build)"
                       % (MODULE, sys.executable, sysconfig.get_config_var("INCLUDEPY")))


def output_path():
    # type: () -> str
    return os.path.join(ROOT, "build", "trampoline", abi_tag(), MODULE + extension_suffix())


def compile_module(target, extra_flags=()):
    # type: (str, tuple) -> str
    """Compile ``trampoline.c`` to ``target`` atomically; returns gcc's warnings ("" if none)."""
    directory = os.path.dirname(target)
    try:
        os.makedirs(directory)
    except OSError:
        if not os.path.isdir(directory):
            raise
    temporary = "%s.%s.tmp" % (target, uuid.uuid4().hex)  # no other build, process or thread, uses it
    command = ["gcc"] + CFLAGS + list(extra_flags) + ["-I" + include_dir(), SOURCE, "-o", temporary]
    try:
        try:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise RuntimeError("cannot build %s: gcc not found (%s); install gcc" % (MODULE, exc))
        output = process.communicate()[0].decode("utf-8", "replace")
        if process.returncode != 0:
            raise RuntimeError("cannot build %s: %s\n%s" % (MODULE, " ".join(command), output))
        os.rename(temporary, target)  # atomic: a parallel run sees the old module or the new one
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return output


def build(force=False):
    # type: (bool) -> str
    """Compile unless the module is newer than ``trampoline.c``; returns the module's path."""
    target = output_path()
    if force or not os.path.exists(target) or os.path.getmtime(target) < os.path.getmtime(SOURCE):
        warnings = compile_module(target)
        if warnings.strip():  # shown, not fatal here; tests/test_trampoline.py insists on none
            sys.stderr.write(warnings)
    return target


def ensure_trampoline():
    """Build if needed, put the module's directory first on sys.path, import and return it."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    directory = os.path.dirname(build())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    import importlib
    if hasattr(importlib, "invalidate_caches"):  # 3.3+: the directory may have been listed before
        importlib.invalidate_caches()
    return importlib.import_module(MODULE)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    path = build(force="--force" in args)
    ensure_trampoline()
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
