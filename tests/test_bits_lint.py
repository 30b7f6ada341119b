"""Lints for what breaks only inside BITS, checked on the host (docs/bits-environment.md sections 9 and 10).

1. The compile-time crash: BITS's peephole optimizer asserts, and BITS aborts, when the bytecode
   of one line-number entry is 255 bytes or more (GRUB's memchr cannot find the 255 byte that
   makes CPython skip such code). On Python 2.7 -- the compiler BITS runs -- every file that can
   be compiled in BITS (bitsnet/*.py, bits/boot/python/*.py) is compiled and every code object,
   recursively through ``co_consts``, is checked for a 255 address increment in ``co_lnotab``.
   Conservative: folded constant tuples are flagged too, though they do not crash.
2. Number formats GRUB's printf breaks: ``%e``/``%g`` (every float exponent), ``%X`` (lower
   case), ``%o`` (empty) and integer precision (``%.3d`` ignores it), and ``{:e}``/``{:g}`` in
   ``str.format``. Checked in the string literals of bitsnet/ that are formatted: a literal
   (or implicitly joined literals) followed by ``%`` or ``.format``. A float reaching
   ``str()``/``repr()`` cannot be found this way; code review and ``%.Nf`` it is.
"""

from __future__ import print_function

import glob
import io
import os
import re
import sys
import tokenize

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BITS_FILES = sorted(glob.glob(os.path.join(ROOT, "bitsnet", "*.py")) +
                    glob.glob(os.path.join(ROOT, "bits", "boot", "python", "*.py")))
BITSNET_FILES = sorted(glob.glob(os.path.join(ROOT, "bitsnet", "*.py")))
PY27 = sys.version_info[:2] == (2, 7)

# A %-conversion: mapping key, flags, width, precision, length, type.
_PERCENT = re.compile(r"%(\([^)]*\))?([-+ #0]*)(\d+|\*)?(\.(\d+|\*))?[hlL]?([a-zA-Z%])")
_FORMAT_FIELD = re.compile(r"\{[^{}]*:([^{}]*)\}")


# ----------------------------------------------------------------------------- 1. compile crash
def code_objects(code):
    """``code`` and every code object nested in it (a list: no recursion, BITS-style)."""
    found, todo = [], [code]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(const for const in current.co_consts if hasattr(const, "co_lnotab"))
    return found


def long_lines(code):
    """[(code name, line)] where one line-number entry's bytecode reaches 255 bytes."""
    hits = []
    for each in code_objects(code):
        table = bytearray(each.co_lnotab)
        line = each.co_firstlineno
        for i in range(0, len(table), 2):
            if table[i] == 255:
                hits.append((each.co_name, line))
            line += table[i + 1]
    return hits


def read_source(path):
    with io.open(path, "rb") as f:
        return f.read()


@pytest.mark.skipif(not PY27, reason="BITS compiles with Python 2.7's compiler; its bytecode is what counts")
def test_the_detector_finds_the_measured_threshold():
    names = ", ".join("n%d" % i for i in range(83))
    assert long_lines(compile("x = [%s]\ny = 1\n" % names, "t", "exec")) == [("<module>", 1)]
    names = ", ".join("n%d" % i for i in range(82))
    assert long_lines(compile("x = [%s]\ny = 1\n" % names, "t", "exec")) == []
    items = ", ".join("%d: %d" % (i, i) for i in range(36))
    nested = "def f():\n    x = {%s}\n    return x\n" % items
    assert long_lines(compile(nested, "t", "exec")) == [("f", 2)]


@pytest.mark.skipif(not PY27, reason="BITS compiles with Python 2.7's compiler; its bytecode is what counts")
@pytest.mark.parametrize("path", BITS_FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_no_line_can_crash_bits_compiler(path):
    hits = long_lines(compile(read_source(path), path, "exec", 0, True))
    assert not hits, "%s: 255+ bytes of bytecode on one line (split it over several lines): %s" % (
        os.path.relpath(path, ROOT), ", ".join("line %d in %s" % (line, name) for name, line in hits))


# ----------------------------------------------------------------------------- 2. number formats
def bad_formats(text):
    """The conversions in ``text`` (a %-format or a str.format string) that GRUB's printf breaks."""
    bad = []
    for match in _PERCENT.finditer(text):
        kind, precision = match.group(6), match.group(4)
        if kind in "eEgGXo" or (kind in "diux" and precision):
            bad.append(match.group(0))
    for match in _FORMAT_FIELD.finditer(text):
        spec = match.group(1)
        if spec and spec[-1] in "eEgGn%" and "!" not in match.group(0).split(":")[0]:
            bad.append(match.group(0))
    return bad


def _literal(token_text):
    """The value of a string token (prefixes and quotes stripped; escapes left as written)."""
    text = token_text.lstrip("bBrRuUfF")
    quote = text[:3] if text[:3] in ('"""', "'''") else text[:1]
    return text[len(quote):-len(quote)]


def formatted_strings(path):
    """[(line, text)] of string literals that are %-formatted or .format()ted in ``path``."""
    with io.open(path, "r", encoding="utf-8") as f:
        tokens = [t for t in tokenize.generate_tokens(f.readline)
                  if t[0] not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    found = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != tokenize.STRING:
            i += 1
            continue
        start, parts = tokens[i][2][0], []
        while i < len(tokens) and tokens[i][0] == tokenize.STRING:
            parts.append(_literal(tokens[i][1]))
            i += 1
        following = tokens[i][1] if i < len(tokens) else ""
        after = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if following == "%" or (following == "." and after == "format"):
            found.append((start, "".join(parts)))
    return found


def test_the_format_lint_finds_what_bits_breaks():
    assert bad_formats("%g %e %X %o %.3d %5.2x") == ["%g", "%e", "%X", "%o", "%.3d", "%5.2x"]
    assert bad_formats("%d %5d %-5d %05d %x %#x %s %r %.3f %5.1f %% %(n)d %c") == []
    assert bad_formats("{:e} {0:.2g} {:X} {:.3f} {name!r}") == ["{:e}", "{0:.2g}"]


@pytest.mark.parametrize("path", BITSNET_FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_no_number_format_that_bits_breaks(path):
    hits = [(line, bad) for line, text in formatted_strings(path) for bad in bad_formats(text)]
    assert not hits, "%s: GRUB's printf breaks these (use %%d, %%x, %%.Nf, '{:X}'.format): %s" % (
        os.path.relpath(path, ROOT), ", ".join("line %d: %s" % hit for hit in hits))
