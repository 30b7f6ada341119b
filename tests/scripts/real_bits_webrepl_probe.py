"""Run inside real BITS (tests/test_webrepl_realbits.py): the web REPL's input bounds on the real
128 KiB C stack (the deepest accepted input of each kind is compiled, elif chains and with items
included) and under BITS's peephole abort (the largest accepted input of each line-number-table
and basic-block shape, followed by another line, which is what the abort needs), its HTTP head
parser on seeded garbage, and a runaway recursion under the limit the REPL sets in BITS."""

import sys
from bitsnet import webrepl as w
from bitsnet import webrepl_bounds as bounds
print("IN_BITS %r" % w.IN_BITS)
kinds = {
    "brackets": lambda n: "(" * n + "1" + ")" * n,
    "operators": lambda n: "x = (1\n" + "+ 1\n" * n + ")",
    "unary": lambda n: "x = (\n" + "-\n" * n + "1)",
    "attributes": lambda n: "x = (a\n" + ".b\n" * n + ")",
    "calls": lambda n: "x = (f\n" + "()\n" * n + ")",
    "lambdas": lambda n: "x = (" + "lambda:\n" * n + "1)",
    "conditionals": lambda n: "x = (1\n" + "if a else 1\n" * n + ")",
    "powers": lambda n: "x = (2\n" + "** 2\n" * n + ")",
    "blocks": lambda n: "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "pass\n",
    "mixed": lambda n: "x = " + "(1 + " * n + "1" + ")" * n,
    "elifs": lambda n: "if a: pass\n" + "elif a: pass\n" * n,
    "with items": lambda n: "with " + ", ".join(["a"] * n) + ": pass",  # over 20: a SyntaxError, after
}
# Line-number tables and basic blocks (the second outside review): the largest accepted input of each shape,
# always followed by another statement (a step is written only when a later line has code).
tables = {
    "and chain": lambda n: "def f():\n x = (" + " and ".join(["a"] * n) + ")\n y = 1",
    "conditional expressions": lambda n: "x = (" + "a if b else " * n + "c)\ny = 1",
    "comprehension ifs": lambda n: "x = [i for i in y " + "if a " * n + "]\ny = 1",
    "chained =": lambda n: "x = " + "a = " * n + "1\ny = 1",
    "attributes over lines": lambda n: "x = (a\n" + ".b\n" * n + ")\ny = 1",
    "decorators": lambda n: "@a\n" * n + "def f(): pass\ny = 1",
    "names in a list": lambda n: "x = [" + ", ".join("n%d" % i for i in range(n)) + "]\ny = 1",
    "pass lines": lambda n: "def f():\n x = 1\n" + " pass\n" * n + " y = 2",
    "if statements": lambda n: "def f():\n" + " if a: pass\n" * n,
    "for loops": lambda n: "def f():\n" + " for a in b: pass\n" * n,
}


def largest(make):
    """The largest n the bounds accept for make(n) (doubling, then bisecting)."""
    low, high = 1, 2
    while bounds.check(make(high)) is None:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if bounds.check(make(middle)) is None:
            low = middle
        else:
            high = middle
    return low


for kind in sorted(kinds):
    make = kinds[kind]
    depth = largest(make)
    try:
        compile(make(depth) + "\n", "<x>", "single" if kind not in ("blocks", "elifs") else "exec")
    except (SyntaxError, SystemError) as exc:  # 2.7 takes 20 with items (BITS: SystemError), after
        print("%s %s" % (type(exc).__name__, exc))  # its symbol table has recursed through them all
    print("compiled deepest %s: %d" % (kind, depth))
    sys.stdout.flush()
for kind in sorted(tables):
    make = tables[kind]
    n = largest(make)
    compile(make(n) + "\n", "<x>", "exec")
    print("compiled the largest accepted %s: %d" % (kind, n))
    sys.stdout.flush()
# The head parser on seeded garbage.
seed = [12345]


def rnd(k):
    seed[0] = (seed[0] * 1103515245 + 12345) & 0x7fffffff
    return seed[0] % k


bad = 0
for i in range(300):
    data = bytearray(b"GET /poll?since=0 HTTP/1.1\r\nHost: 10.0.2.15:8080\r\nX-Repl-Token: ab")
    for _ in range(1 + rnd(5)):
        at = rnd(len(data) + 1)
        data[at:at] = bytearray([rnd(256)])
    try:
        w.parse_head(bytes(data))
    except w.BadRequest:
        bad += 1
print("parse_head: 300 mutated heads, %d refused, no other exception" % bad)



# A runaway recursion with the limit the REPL sets in BITS.
def f(n):
    return f(n + 1)


limit = sys.getrecursionlimit()
sys.setrecursionlimit(w._depth() + w.BITS_RECURSION)
try:
    f(0)
except RuntimeError as exc:
    print("runaway recursion: %s" % exc)
sys.setrecursionlimit(limit)
print("probe done")
