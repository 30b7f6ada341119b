"""bitsnet.webrepl_bounds: the input bounds ``bitsnet.webrepl`` checks before it compiles a
line the browser pushed (its Rule 6).

``check_source`` estimates, without compiling, how deep the compiler would recurse in C for a
block being typed and how much bytecode one physical line would make, and says why a block
is refused: too long, too many lines, nested too deep for BITS's 128 KiB C stack, or a line
past BITS's peephole limit. Pure text work: no sockets, no state. It imports nothing BITS lacks.
"""

from __future__ import absolute_import

import re

MAX_LINE = 64 * 1024  # characters in one pushed line
MAX_BLOCK = 64 * 1024  # characters in one block (a statement typed over several lines)
MAX_BLOCK_LINES = 500  # lines in one block
MAX_DEPTH = 100  # expression nesting estimate: brackets, operator chains, indentation
MAX_LINE_WEIGHT = 200  # estimated bytecode bytes of one physical line (BITS's peephole: < 255)


# A rough tokenizer in one regular expression (the scan runs in C): strings (also unterminated
# ones still being typed), comments, line continuations, newlines with the next line's
# indentation, names, numbers, brackets, separators and operators. Exactness is not needed:
# the estimate only has to be at least what the compiler will recurse through.
_SCAN = re.compile(r"""
 (?P<str>[rRbBuUfF]{0,2}(?:'''(?:\\.|[^\\])*?(?:'''|\Z)|\"\"\"(?:\\.|[^\\])*?(?:\"\"\"|\Z)
                         |'(?:\\.|[^\\'\n])*'?|"(?:\\.|[^\\"\n])*"?))
|(?P<comment>\#[^\n]*)
|(?P<cont>\\\r?\n)
|(?P<nl>\r?\n(?P<indent>[ \t\f]*))
|(?P<name>[^\W\d]\w*)
|(?P<num>\d[\w.]*|\.\d[\w]*)
|(?P<open>[(\[{])
|(?P<close>[)\]}])
|(?P<sep>[,;]|=(?!=))
|(?P<cmp>[<>]=?|[=!]=)
|(?P<op>\*\*=?|//=?|<<=?|>>=?|->|:=|[-+*/%@&|^~.:]=?|!)
|(?P<space>[ \t\f]+)
""", re.VERBOSE | re.UNICODE)
_OPERATOR_WORDS = frozenset(["and", "or", "not", "in", "is", "if", "else", "lambda", "await", "yield", "for"])
_COMPARE_WORDS = frozenset(["in", "is"])


def check_source(source):
    """None if ``source`` (a block being typed) is safe to compile, else why not.

    Compiling recurses in C once per level of nesting: every bracket, every operator of a
    chain (``1+1+...`` is a left-nested tree), every attribute/call/subscript of a chain,
    every indented block. BITS's C stack is 128 KiB with no guard page (docs/bits-environment.md section 11): too deep a
    source silently overwrites firmware memory there, and 2.7 on a host segfaults. The estimate is the sum, over the
    open brackets, of the operators seen at that level since its last separator (``,`` ``;`` ``=`` or the end of a
    logical line), plus the open brackets and the indentation depth; it must stay within ``MAX_DEPTH``. And BITS's
    compiler aborts on a line whose bytecode reaches 255 bytes (its peephole assertion,
    docs/bits-environment.md section 9): a physical line's estimated bytecode (3 bytes per
    name, number, string or bracket, 9 per comparison, 1 per other operator) must stay within
    ``MAX_LINE_WEIGHT``. Margin measured on the host: the deepest input of each kind that passes
    (brackets, operator, unary, attribute, call, lambda, conditional, power chains, nested
    blocks) compiles under CPython 2.7 with its C stack limited to 64 KiB (``ulimit -s 64``)."""
    if len(source) > MAX_BLOCK:
        return "a block of more than %d characters" % MAX_BLOCK
    if source.count("\n") >= MAX_BLOCK_LINES:
        return "a block of more than %d lines" % MAX_BLOCK_LINES
    chains = [0]  # operators since the last separator, per open bracket level (0: none open)
    indents = [0]
    depth = weight = line = 0
    pending_indent = None
    position = 0
    while position < len(source):
        match = _SCAN.match(source, position)
        if match is None:
            position += 1  # a character no rule knows ($, ?, a stray backslash): costs nothing
            continue
        position = match.end()
        kind = match.lastgroup
        if kind == "indent":
            kind = "nl"
        if kind in ("space", "comment", "cont"):
            continue
        if kind == "nl":
            line += 1
            weight = 0
            if len(chains) == 1:  # the end of a logical line
                chains[0] = 0
                pending_indent = match.group("indent").expandtabs(8).replace("\f", "")
            continue
        if pending_indent is not None:  # the first token of a logical line: its indentation
            width = len(pending_indent)
            while width < indents[-1]:
                indents.pop()
            if width > indents[-1]:
                indents.append(width)
            pending_indent = None
        text = match.group(kind)
        if kind == "name" and text in _OPERATOR_WORDS:
            kind = "cmp" if text in _COMPARE_WORDS else "op"
        if kind in ("name", "num", "str"):
            weight += 3
            line += text.count("\n")  # a string over several lines
        elif kind == "open":
            weight += 3
            chains[-1] += 1  # a call, subscript or display nests like an operator
            chains.append(0)
        elif kind == "close":
            if len(chains) > 1:
                chains.pop()
        elif kind == "sep":
            chains[-1] = 0
        else:  # "op", "cmp"
            weight += 9 if kind == "cmp" else 1
            chains[-1] += 1
        depth = sum(chains) + len(chains) - 1 + len(indents) - 1
        if depth > MAX_DEPTH:
            return ("nesting deeper than %d levels (brackets, a chain of operators, attributes or calls, "
                    "indented blocks) near line %d: too deep for BITS's 128 KiB C stack; split it into "
                    "several statements" % (MAX_DEPTH, line + 1))
        if weight > MAX_LINE_WEIGHT:
            return ("line %d is too long for BITS's compiler (about 40 names or constants per line at most): "
                    "split it over several lines" % (line + 1))
    return None
