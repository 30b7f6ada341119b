"""The source tree's own rules (docs/architecture.md section 13): ASCII sources, one docstring per module
saying its job, every Python file valid for the interpreter running the tests (so the 2.7 run
catches Python-3-only syntax anywhere, not only in modules a test imports; a file whose opening
says "Python 3 only" is exempt there), and runnable entry points."""

from __future__ import print_function

import ast
import io
import os
import stat
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ("bitsnet", "bits", "tools", "tests")
SKIP_DIRS = ("__pycache__", ".venv", "build")
EXECUTABLES = ("tools/check", ".ci/run")
PY3_ONLY = b"Python 3 only"  # in the first lines of a file that need not compile on 2.7


def python_files():
    found = []
    for top in SOURCE_DIRS:
        for directory, subdirs, files in os.walk(os.path.join(ROOT, top)):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS)
            found.extend(os.path.relpath(os.path.join(directory, name), ROOT)
                         for name in sorted(files) if name.endswith(".py"))
    return found


SOURCES = python_files() + ["trampoline.c"]


def read(relative):
    with io.open(os.path.join(ROOT, relative), "rb") as source:
        return source.read()


def test_sources_are_ascii():
    bad = []
    for relative in SOURCES:
        lines = read(relative).splitlines()
        bad.extend("%s:%d" % (relative, number) for number, line in enumerate(lines, 1)
                   if any(byte > 127 for byte in bytearray(line)))
    assert not bad, "non-ASCII bytes at " + ", ".join(bad[:20])


def test_python_files_compile_on_this_interpreter():
    bad = []
    for relative in SOURCES:
        if sys.version_info[0] < 3 and PY3_ONLY in read(relative)[:500]:
            continue  # e.g. the asyncio script: its docstring says so
        if relative.endswith(".py"):
            try:
                compile(read(relative), relative, "exec")
            except SyntaxError as exc:  # e.g. an f-string or a keyword-only argument on 2.7
                bad.append("%s:%s: %s" % (relative, exc.lineno, exc.msg))
    assert not bad, "\n".join(bad)


def test_modules_open_with_a_docstring():
    bad = [relative for relative in SOURCES if relative.startswith(("bitsnet", "tools")) and
           relative.endswith(".py") and not (ast.get_docstring(ast.parse(read(relative))) or "").strip()]
    assert not bad, "no module docstring saying its one job: " + ", ".join(bad)


@pytest.mark.parametrize("relative", EXECUTABLES)
def test_entry_point_is_executable(relative):
    mode = os.stat(os.path.join(ROOT, relative)).st_mode
    assert mode & stat.S_IXUSR, "%s is not executable (chmod +x, and commit the mode)" % relative
    assert read(relative).startswith(b"#!"), "%s has no #! line" % relative
