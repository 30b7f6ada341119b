"""The web REPL's input bounds (bitsnet.webrepl_bounds, bitsnet.webrepl_lnotab) against the
real CPython 2.7 compiler, BITS's: a table of input shapes, each grown until the checker
refuses it, then compiled by 2.7 at the limit (in a subprocess; for the C stack with the stack
limited to 64 KiB, half of BITS's 128 KiB, so a crash ends the subprocess, not the test).

* "stack" shapes (docs/bits-environment.md section 11): the deepest accepted input compiles on
  the small stack; a known crashing size is refused.
* "lnotab" shapes (section 9: BITS aborts on a byte 255 in a line-number table): the checker's
  byte count equals what 2.7 writes in its table (within a byte) at limit-1 and limit, the input
  at the limit leaves no 255 in it, and the real abort comes soon after the limit (the checker
  is not needlessly strict).
* "blocks" shapes (2.7's assembler and stack-depth pass recurse in C per basic block).

The shapes are the second outside review's (498 elif clauses, a 45-term and chain, conditional
expressions, comprehension ifs, chained =) and their relatives. On Python 3 the checker reads
3's syntax tree with 2.7's costs: the safety properties are checked there too, the exact byte
count only on 2.7 (where the REPL in BITS runs)."""

from __future__ import print_function

import os
import resource
import subprocess
import sys

import pytest

import conftest
from bitsnet import webrepl_bounds, webrepl_lnotab

PY27 = os.path.join(conftest.ROOT, ".venv", "py27", "bin", "python")
ON_27 = sys.version_info[0] == 2
SMALL_STACK = 64 * 1024  # half of BITS's 128 KiB (host frames are no smaller than BITS's)
pytestmark = pytest.mark.skipif(not os.path.exists(PY27) or not sys.platform.startswith("linux"),
                                reason="needs the 2.7 venv (the real compiler) on Linux")

# What the real 2.7 compiler writes: for each source (NUL-separated on stdin), the largest
# address and line step of its line-number tables and whether a byte 255 is in one of them.
REAL_LNOTAB = r"""
import sys, types
for source in sys.stdin.read().split("\0"):
    try:
        code = compile(source, "<x>", "exec")
    except SyntaxError as exc:
        print("SyntaxError")
        continue
    worst = [0, 0, 0]
    todo = [code]
    while todo:
        co = todo.pop()
        table = bytearray(co.co_lnotab)
        worst[0] = max([worst[0]] + list(table[0::2]))
        worst[1] = max([worst[1]] + list(table[1::2]))
        worst[2] = worst[2] or 255 in table
        todo.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    print("%d %d %d" % tuple(worst))
"""


def real_lnotab(sources):
    """[(step, line step, has 255) or None for a SyntaxError] from 2.7's compiler."""
    process = subprocess.Popen([PY27, "-c", REAL_LNOTAB], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out, _ = process.communicate("\0".join(sources).encode("ascii"))
    assert process.returncode == 0
    return [tuple(int(x) for x in line.split()) if line != b"SyntaxError" else None for line in out.splitlines()]


def crashes_on_small_stack(source, stack=SMALL_STACK):
    """Whether compiling ``source`` in 2.7 with a ``stack``-byte C stack dies of a signal
    (a SyntaxError, such as 2.7's "too many statically nested blocks", is not a crash)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    # A fixed, small environment: its strings sit on the same stack, so they must not vary.
    process = subprocess.Popen([PY27, "-c", "import sys; compile(sys.stdin.read(), '<x>', 'exec')"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=limit, env={"PATH": "/usr/bin:/bin"})
    process.communicate(source.encode("ascii"))
    return process.returncode < 0


def limit_of(make, most=2000):
    """The largest n for which the checker accepts make(n) (it accepts 1; monotone in n)."""
    assert webrepl_bounds.check(make(1)) is None, make(1)[:80]
    low, high = 1, 2
    while high <= most and webrepl_bounds.check(make(high)) is None:
        low, high = high, high * 2
    assert high <= most, "never refused"
    while high - low > 1:
        middle = (low + high) // 2
        if webrepl_bounds.check(make(middle)) is None:
            low = middle
        else:
            high = middle
    return low


# --------------------------------------------------------------------------- the C stack
# (name, make(n), a size known to crash 2.7 on the small stack, least acceptable limit)
STACK_SHAPES = [
    ("elif clauses", lambda n: "if a: pass\n" + "elif a: pass\n" * n, 200, 60),
    ("elif clauses with bodies", lambda n: "if a:\n pass\n" + "elif a:\n pass\n" * n, 200, 60),
    ("with items", lambda n: "with " + ", ".join(["a"] * n) + ": pass", 250, 15),  # 2.7 takes 20 at most
    ("elif in a function", lambda n: "def f(x):\n if x: pass\n" + " elif x: pass\n" * n, 200, 60),
    ("brackets", lambda n: "(" * n + "1" + ")" * n, 3000, 45),
    ("operators", lambda n: "x = (1\n" + "+ 1\n" * n + ")", 3000, 45),
    ("unary", lambda n: "x = (\n" + "-\n" * n + "1)", 3000, 45),
    ("attributes", lambda n: "x = (a\n" + ".b\n" * n + ")", 3000, 45),
    ("calls", lambda n: "x = (f\n" + "()\n" * n + ")", 3000, 45),
    ("lambdas", lambda n: "x = (" + "lambda:\n" * n + "1)", 3000, 45),
    ("conditionals", lambda n: "x = (1\n" + "if a else 1\n" * n + ")", 3000, 45),
    ("powers", lambda n: "x = (2\n" + "** 2\n" * n + ")", 3000, 45),
    ("not", lambda n: "x = " + "not " * n + "a", 3000, 45),
    ("comparisons", lambda n: "x = (a\n" + "< a\n" * n + ")", 3000, 45),
    ("blocks", lambda n: "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "pass", 3000, 45),
]


@pytest.mark.parametrize("name,make,crashing,least", STACK_SHAPES, ids=[s[0] for s in STACK_SHAPES])
def test_the_deepest_accepted_input_compiles_on_half_of_bits_stack(name, make, crashing, least):
    limit = limit_of(make)
    assert limit >= least, (name, limit)  # ordinary code is not refused
    assert webrepl_bounds.check(make(limit + 1)) is not None
    assert not crashes_on_small_stack(make(limit)), (name, limit)
    assert webrepl_bounds.check(make(crashing)) is not None, (name, crashing)
    if name == "elif clauses":  # the control: the bound is what saves it
        assert crashes_on_small_stack(make(crashing))


def test_the_reviews_498_elif_clauses_overflow_bits_stack_and_are_refused():
    # The review: 200 elif lines overflow 64 KiB, 498 overflow 128 KiB (BITS's), and the REPL
    # accepted and ran 498.
    source = STACK_SHAPES[0][1](498)
    assert crashes_on_small_stack(source, 128 * 1024)
    why = webrepl_bounds.check(source)
    assert why is not None and "elif" in why, why


# --------------------------------------------------------------------------- line-number tables
# (name, make(n), Python 2 only) -- each shape followed by another statement, since a step
# is only written when a later line gets an entry.
LNOTAB_SHAPES = [
    ("and chain in a function", lambda n: "def f():\n x = (" + " and ".join(["a"] * n) + ")\n y = 1", False),
    ("or chain in an if", lambda n: "if " + " or ".join(["a"] * n) + ": x = 1\ny = 1", False),
    ("conditional expressions", lambda n: "x = (" + "a if b else " * n + "c)\ny = 1", False),
    ("comprehension ifs", lambda n: "x = [i for i in y " + "if a " * n + "]\ny = 1", False),
    ("chained =", lambda n: "x = " + "a = " * n + "1\ny = 1", False),
    ("names in a list", lambda n: "x = [" + ", ".join("n%d" % i for i in range(n)) + "]\ny = 1", False),
    ("dict items", lambda n: "x = {" + ", ".join("%d: a" % i for i in range(n)) + "}\ny = 1", False),
    ("comparison chain", lambda n: "x = (" + " < ".join(["a"] * n) + ")\ny = 1", False),
    ("keyword arguments", lambda n: "f(" + ", ".join("k%d=a" % i for i in range(n)) + ")\ny = 1", False),
    ("sum of names", lambda n: "x = " + " + ".join(["a"] * n) + "\ny = 1", False),
    ("attributes over lines", lambda n: "x = (a\n" + ".b\n" * n + ")\ny = 1", False),
    ("calls over lines", lambda n: "x = (f\n" + "()\n" * n + ")\ny = 1", False),
    ("decorators", lambda n: "@a\n" * n + "def f(): pass\ny = 1", False),
    ("generator over lines", lambda n: "x = (i for i in (a\n" + ".b\n" * n + "))\ny = 1", False),
    ("closure", lambda n: "def f():\n" + "".join(" a%d = 1\n" % i for i in range(n))
     + " def g():\n  return (" + ",\n".join("a%d" % i for i in range(n)) + ")\n y = 1", False),
    ("import names", lambda n: "from m import (" + ",\n".join("n%d" % i for i in range(n)) + ")\ny = 1", False),
    ("print items", lambda n: "print " + ", ".join(["a"] * n) + "\ny = 1", True),
    # Line steps: lines that make no code between two that do.
    ("pass lines", lambda n: "def f():\n x = 1\n" + " pass\n" * n + " y = 2", False),
    ("comment lines", lambda n: "def f():\n x = 1\n" + " #\n" * n + " y = 2", False),
    ("a long string", lambda n: "def f():\n x = 1\n '''\n" + "s\n" * n + " '''\n y = 2", False),
]


@pytest.mark.parametrize("name,make,py2_only", LNOTAB_SHAPES, ids=[s[0] for s in LNOTAB_SHAPES])
def test_line_number_tables_at_the_limit(name, make, py2_only):
    if py2_only and not ON_27:
        pytest.skip("2.7 syntax")
    limit = limit_of(make, most=4000)
    sizes = [limit - 1, limit, limit + 1] + list(range(limit + 2, 3 * limit + 3, max(1, limit // 20)))
    real = real_lnotab([make(n) for n in sizes])
    assert real[1] is not None and not real[1][2], (name, limit, real[1])  # accepted: no 255 in any table
    assert webrepl_bounds.check(make(limit + 1)) is not None
    aborts = [n for n, r in zip(sizes, real) if r is not None and r[2]]
    assert aborts, (name, "2.7 never writes a 255: the shape tests nothing")
    if ON_27:  # the checker counts what the compiler emits, so it is not needlessly strict
        assert aborts[0] <= 2 * limit + 2, (name, limit, aborts[0])
        for n, (step, line_step, _) in zip(sizes[:2], real[:2]):
            shape = webrepl_lnotab.measure(webrepl_lnotab.parse(make(n)))
            assert step <= shape.step <= step + 1 and line_step <= shape.line_step, (name, n, shape.step, step)


def test_the_reviews_45_term_and_chain_is_refused():
    source = LNOTAB_SHAPES[0][1](45)
    assert real_lnotab([source])[0][2]  # a 255 in 2.7's table: BITS aborts compiling it
    why = webrepl_bounds.check(source)
    assert why is not None and "bytes of code" in why, why


# --------------------------------------------------------------------------- basic blocks
BLOCK_SHAPES = [
    ("if statements", lambda n: "def f():\n" + " if a: pass\n" * n, 800),
    ("for loops", lambda n: "def f():\n" + " for a in b: pass\n" * n, 450),
    ("conditional expressions", lambda n: "def f():\n" + " x = a if b else c\n" * n, 480),
]


@pytest.mark.parametrize("name,make,crashing", BLOCK_SHAPES, ids=[s[0] for s in BLOCK_SHAPES])
def test_basic_blocks_at_the_limit(name, make, crashing):
    limit = limit_of(make)
    assert limit >= 50, (name, limit)
    assert not crashes_on_small_stack(make(limit)), (name, limit)
    if crashing < webrepl_bounds.MAX_BLOCK_LINES:
        assert crashes_on_small_stack(make(crashing)), (name, crashing)  # the control
        assert webrepl_bounds.check(make(crashing)) is not None
