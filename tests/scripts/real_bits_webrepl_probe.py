"""Run inside real BITS (tests/test_webrepl_realbits.py): the web REPL's input bounds on the real
128 KiB C stack (the deepest accepted input of each kind is compiled; so is the widest accepted
line, followed by another line, which is what BITS's peephole abort needs), its HTTP head parser
on seeded garbage, and a runaway recursion under the limit the REPL sets in BITS."""

import sys
from bitsnet import webrepl as w
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
}
for kind in sorted(kinds):
    make = kinds[kind]
    depth = 1
    while w.check_source(make(depth + 1)) is None:
        depth += 1
    compile(make(depth) + "\n", "<x>", "single" if kind != "blocks" else "exec")
    print("compiled deepest %s: %d" % (kind, depth))
    sys.stdout.flush()
# The widest list line that passes, followed by another line (the peephole abort's condition).
n = 1
while w.check_source("x = [" + ", ".join("n%d" % i for i in range(n + 1)) + "]\ny = 1") is None:
    n += 1
compile("x = [" + ", ".join("n%d" % i for i in range(n)) + "]\ny = 1\n", "<x>", "exec")
print("compiled the widest accepted list line: %d names" % n)
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
