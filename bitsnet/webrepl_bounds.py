"""bitsnet.webrepl_bounds: the input bounds ``bitsnet.webrepl`` checks before it compiles a
block the browser pushed (its rule "bounded input"), derived from what CPython 2.7's compiler (BITS's) does.

Two checks, in this order:

``check_source(source)``, on the text, before anything parses it: the block's size and lines,
and how deep the parser and compiler would recurse in C (brackets, operator/attribute/call
chains, indented blocks, and two shapes 2.7 recurses on once per clause: the ``elif`` clauses of
one ``if`` and the items of one ``with``) within ``MAX_DEPTH``. BITS's C stack is 128 KiB with
no guard page (docs/bits-environment.md section 11): too deep an input overwrites firmware memory.

``check_code(tree)``, on the syntax tree of a complete block (``compile(...,
PyCF_ONLY_AST)``, which generates no code), before it is compiled: the line-number table 2.7
would write, counted by ``bitsnet.webrepl_lnotab`` from the bytes its compiler emits. BITS
aborts on a byte 255 in that table (docs/bits-environment.md section 9): ``MAX_STEP`` bytes of
code between two line-number entries at most, ``MAX_LINE_STEP`` lines. And at most
``MAX_BLOCKS`` basic blocks in one code object (2.7's assembler recurses in C per block).

``check(source, flags)`` runs both, parsing in between as the console does. Pure text work: no
sockets, no state; imports nothing BITS lacks (``_ast`` is built into BITS's Python).
"""

from __future__ import absolute_import

import re

from bitsnet import webrepl_lnotab

MAX_LINE = 64 * 1024  # characters in one pushed line
MAX_BLOCK = 64 * 1024  # characters in one block (a statement typed over several lines)
MAX_BLOCK_LINES = 500  # lines in one block
MAX_DEPTH = 100  # recursion estimate: brackets, operator chains, indentation, elif clauses, with items
# BITS aborts on a byte 255 in a line-number table: steps of 255 bytes or 255 lines. The counts
# of webrepl_lnotab matched 2.7's own tables within a byte over the shapes of
# tests/test_webrepl_bounds.py; the margin covers what it does not model exactly.
MAX_STEP = 240  # bytes of code between two line-number entries
MAX_LINE_STEP = 250  # lines between two line-number entries (comments, blank lines, strings, pass)
MAX_BLOCKS = 500  # basic blocks in one code object (2.7's assembler recurses in C over them)


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
_CHAIN_WORDS = frozenset(["elif", "else"])  # continue an if chain at the same indentation


def check_source(source):
    """None if ``source`` (a block being typed) is safe to parse, else why not.

    Parsing and compiling recurse in C once per level of nesting: every bracket, every operator
    of a chain (``1+1+...`` is a left-nested tree), every attribute/call/subscript of a chain,
    every indented block -- and in 2.7 every ``elif`` of one ``if`` (each is the ``else`` of the
    one before: the compiler and its symbol table recurse per clause; 170 clauses overflow
    64 KiB of C stack on the host) and every item of one ``with`` (nested ``with`` statements to
    2.7: 200 items overflow 64 KiB). The estimate is the sum, over the open brackets, of the
    operators seen at that level since its last separator (``,`` ``;`` ``=`` or the end of a
    logical line), plus the open brackets, the indentation depth, the ``elif`` clauses of the
    open ``if`` chains and the items of the open ``with`` statements; it must stay within
    ``MAX_DEPTH``. Margin measured on the host: the deepest input of each kind that passes
    compiles under CPython 2.7 with its C stack limited to 64 KiB (``ulimit -s 64``), half of
    BITS's (tests/test_webrepl_bounds.py)."""
    if len(source) > MAX_BLOCK:
        return "a block of more than %d characters" % MAX_BLOCK
    if source.count("\n") >= MAX_BLOCK_LINES:
        return "a block of more than %d lines" % MAX_BLOCK_LINES
    chains = [0]  # operators since the last separator, per open bracket level (0: none open)
    indents = [[0, 0]]  # per indentation level: [width, nesting it adds (elif clauses, with items)]
    depth = line = 0
    pending_indent = ""  # the first line's indentation is looked at like every other's
    first_word = None  # the first token of the logical line
    opened = 0  # nesting the logical line adds to the block it opens (the items of a with)
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
            if len(chains) == 1:  # the end of a logical line
                chains[0] = 0
                pending_indent = match.group("indent").expandtabs(8).replace("\f", "")
            continue
        text = match.group(kind)
        if pending_indent is not None:  # the first token of a logical line: its indentation
            width = len(pending_indent)
            while width < indents[-1][0]:
                indents.pop()
            if width > indents[-1][0]:
                indents.append([width, opened])  # a block opened by a with: inside all its items
            elif text == "elif":
                indents[-1][1] += 1  # the next clause of the if chain at this level
            elif text not in _CHAIN_WORDS:
                indents[-1][1] = 0  # a new statement: the chain at this level is over
            pending_indent = None
            first_word, opened = text, 0
        if kind == "name" and text in _OPERATOR_WORDS:
            kind = "cmp" if text in _COMPARE_WORDS else "op"
        if kind in ("name", "num", "str"):
            line += text.count("\n")  # a string over several lines
        elif kind == "open":
            chains[-1] += 1  # a call, subscript or display nests like an operator
            chains.append(0)
        elif kind == "close":
            if len(chains) > 1:
                chains.pop()
        elif kind == "sep":
            chains[-1] = 0
            if text == "," and first_word == "with" and len(chains) == 1:
                opened += 1  # 2.7 nests "with a, b:" as "with a: with b:"
        else:  # "op", "cmp"
            chains[-1] += 1
        depth = (sum(chains) + len(chains) - 1 + len(indents) - 1 + sum(extra for _, extra in indents)
                 + opened)
        if depth > MAX_DEPTH:
            return ("nesting deeper than %d levels (brackets, a chain of operators, attributes or calls, "
                    "indented blocks, elif clauses, with items) near line %d: too deep for BITS's 128 KiB "
                    "C stack; split it into several statements" % (MAX_DEPTH, line + 1))
    return None


def check_code(tree):
    """None if the code 2.7 compiles from ``tree`` (a complete block's syntax tree) keeps to
    BITS's compiler, else why not: see ``bitsnet.webrepl_lnotab``."""
    shape = webrepl_lnotab.measure(tree)
    if shape.step > MAX_STEP:
        return ("line %d makes %d bytes of code before the next line number, more than BITS's compiler takes "
                "(%d): split it over several lines or statements" % (shape.step_line, shape.step, MAX_STEP))
    if shape.line_step > MAX_LINE_STEP:
        return ("%d lines without code (comments, blank lines, a long string, pass) after line %d: BITS's "
                "compiler takes at most %d; shorten them" % (shape.line_step, shape.line_step_line, MAX_LINE_STEP))
    if shape.blocks > MAX_BLOCKS:
        return ("too many branches and loops in one function or block (%d basic blocks, at most %d for BITS's "
                "128 KiB C stack): split it into several functions" % (shape.blocks, MAX_BLOCKS))
    return None


def check(source, flags=0):
    """Both checks, as the web REPL makes them: ``check_source``, then, if the block parses
    (with a newline added, as the console completes it), ``check_code`` on its tree."""
    why = check_source(source)
    if why is None:
        tree = webrepl_lnotab.parse(source, flags)
        if tree is not None:
            why = check_code(tree)
    return why
