"""bitsnet.webrepl_lnotab: what CPython 2.7's compiler (BITS's) would emit for a source, counted
from its syntax tree without compiling it, for the web REPL's input bounds
(``bitsnet.webrepl_bounds``).

BITS aborts when a code object's line-number table holds the byte 255 (docs/bits-environment.md
section 9): an address step of 255 bytes or more between two line-number entries, or a line
step of 255 lines or more. And 2.7's assembler orders basic blocks with a C recursion per block
(docs/bits-environment.md section 11). ``measure(tree)`` walks the tree (``compile(...,
PyCF_ONLY_AST)``) in the order the compiler visits it and applies the compiler's rule for
line-number entries: a statement starts a new entry at its line; an expression starts one only
when its line is later than the current one; the entry is written when the next instruction is
emitted. The bytes of each node are those of 2.7's ``compile.c`` (an instruction with an
argument is 3 bytes, one without 1), placed in the gaps between its children where the compiler
emits them; where it varies the larger count is taken. Nested code objects (functions, lambdas,
class bodies, generator expressions, set and dict comprehensions) are measured on their own.

The walk is iterative (a list of pending actions, no Python recursion), so its own depth does
not depend on the input's. On Python 3 the same 2.7 costs are applied to 3's tree (node types
2.7 lacks get a generic cost): the REPL's answers stay close to BITS's, which is what matters.
"""

from __future__ import absolute_import

import _ast

PyCF_ONLY_AST = getattr(_ast, "PyCF_ONLY_AST", 0x400)


class Shape(object):
    """What ``measure`` found: the largest address step and line step of any line-number entry,
    and the most basic blocks in one code object."""

    def __init__(self):
        self.step = self.line_step = self.blocks = 0
        self.step_line = self.line_step_line = 0  # the line each of the two steps starts at


class _Code(object):
    """One code object being measured: its current line, whether an entry was written for it,
    the bytes since the last entry, and its basic blocks."""

    def __init__(self, firstlineno, bound):
        self.line = self.last_line = firstlineno
        self.line_set = False
        self.bytes = 0  # since the last line-number entry
        self.blocks = 1
        self.bound = bound  # names a nested function could take as free variables (closures)


def _is(node, *names):
    return type(node).__name__ in names


def _constant(node):
    """2.7's expr_constant: a number or string test is decided at compile time (-1: not)."""
    if _is(node, "Num"):
        return 1 if node.n else 0
    if _is(node, "Str", "Bytes"):
        return 1 if node.s else 0
    if _is(node, "Constant") and not isinstance(node.value, (type(None), bool)):
        return 1 if node.value else 0
    return -1


def _walk(nodes):
    """Every AST node under ``nodes`` (a node or a list), iteratively."""
    stack = list(nodes) if isinstance(nodes, list) else [nodes]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, _ast.AST):
            yield node
            for field in node._fields:
                stack.append(getattr(node, field, None))


def _bound_names(args, body):
    """Names a function binds (its parameters and every name stored in it): the only ones a
    nested function can take from it as free variables."""
    names = set()
    for node in _walk([args, body]):
        if _is(node, "Name") and not _is(node.ctx, "Load"):
            names.add(node.id)
        elif _is(node, "arg"):
            names.add(node.arg)
        elif _is(node, "arguments"):
            names.update(a for a in (node.vararg, node.kwarg) if isinstance(a, str))
    return names


def _used_names(nodes):
    return set(node.id for node in _walk(nodes) if _is(node, "Name"))


class _Measure(object):
    def __init__(self):
        self.shape = Shape()
        self.codes = []
        self.actions = []

    # ---- the actions
    def emit(self, size):
        code = self.codes[-1]
        if not code.line_set:  # the first instruction of a new line: a line-number entry
            shape = self.shape
            if code.bytes > shape.step:
                shape.step, shape.step_line = code.bytes, code.last_line
            if code.line - code.last_line > shape.line_step:
                shape.line_step, shape.line_step_line = code.line - code.last_line, code.last_line
            code.bytes, code.last_line, code.line_set = 0, code.line, True
        code.bytes += size

    def enter(self, firstlineno, bound):
        outer = self.codes[-1].bound if self.codes else set()
        self.codes.append(_Code(firstlineno, outer | bound))

    def leave(self):
        code = self.codes.pop()
        self.shape.blocks = max(self.shape.blocks, code.blocks)

    def blocks(self, count):
        self.codes[-1].blocks += count

    def visit(self, node):
        """The compiler's line rule for ``node``, then its plan pushed to be run in order."""
        if isinstance(node, list):
            self.actions.extend(("visit", item) for item in reversed(node))
            return
        if node is None or not isinstance(node, _ast.AST):
            return
        code = self.codes[-1]
        if isinstance(node, _ast.stmt) or _is(node, "ExceptHandler"):
            code.line, code.line_set = node.lineno, False
        elif isinstance(node, _ast.expr) and node.lineno > code.line:
            code.line, code.line_set = node.lineno, False
        plan = getattr(self, "plan_" + type(node).__name__, None)
        steps = plan(node) if plan is not None else self.plan_generic(node)
        self.actions.extend(reversed(steps))

    def run(self, tree):
        self.enter(1, set())
        self.actions += [("emit", 4), ("visit", tree)]  # the module's implicit return None last
        while self.actions:
            action = self.actions.pop()
            kind = action[0]
            if kind == "visit":
                self.visit(action[1])
            elif kind == "emit":
                self.emit(action[1])
            elif kind == "blocks":
                self.blocks(action[1])
            elif kind == "enter":
                self.enter(action[1], action[2])
            else:
                self.leave()
        self.leave()
        return self.shape

    # ---- helpers for the plans
    def closure(self, args, body):
        """Bytes a function object's closure takes where it is made: LOAD_CLOSURE per free
        variable (at most the names it uses that enclosing functions bind) and BUILD_TUPLE."""
        free = _used_names(body) & self.codes[-1].bound
        free -= _bound_names(args, []) if args is not None else set()
        return 3 * len(free) + 3 if free else 0

    def function(self, node, args, body, post):
        """A nested code object: ``body`` measured on its own, then ``post`` bytes and the
        closure in the enclosing code."""
        bound = _bound_names(args, body) if args is not None else set()
        decorators = getattr(node, "decorator_list", None)
        firstlineno = min([node.lineno] + [d.lineno for d in decorators or []])  # 2.7: the first decorator's
        return [("enter", firstlineno, bound), ("visit", body), ("emit", 4), ("leave",),  # the implicit return None
                ("emit", post + self.closure(args, body))]

    @staticmethod
    def V(node):
        return ("visit", node)

    # ---- statements (2.7 compile.c; bytes: 3 for an instruction with an argument, else 1)
    def plan_Module(self, node):
        return [self.V(node.body)]

    plan_Interactive = plan_Module

    def plan_FunctionDef(self, node):
        args = node.args
        steps = [self.V(node.decorator_list), self.V(args.defaults), self.V(getattr(args, "kw_defaults", None))]
        # LOAD_CONST code, MAKE_FUNCTION, a CALL_FUNCTION per decorator, the STORE
        return steps + self.function(node, args, node.body, 9 + 3 * len(node.decorator_list))

    plan_AsyncFunctionDef = plan_FunctionDef

    def plan_ClassDef(self, node):
        steps = [self.V(node.decorator_list), ("emit", 3), self.V(node.bases), self.V(getattr(node, "keywords", None))]
        # BUILD_TUPLE, LOAD_CONST code, MAKE_FUNCTION, CALL_FUNCTION, BUILD_CLASS, decorators, STORE
        return steps + self.function(node, None, node.body, 16 + 3 * len(node.decorator_list))

    def plan_Return(self, node):
        return [self.V(node.value), ("emit", 1 if node.value is not None else 4)]

    def plan_Assign(self, node):
        steps = [self.V(node.value)]
        for target in node.targets:
            steps += [("emit", 1), self.V(target)]  # DUP_TOP before all but the last: 1 more is fine
        return steps

    def plan_AugAssign(self, node):
        return [self.V(node.target), ("emit", 4), self.V(node.value), ("emit", 5)]

    def plan_Print(self, node):
        steps = [self.V(node.dest)]
        for value in node.values:  # PRINT_ITEM, or DUP_TOP, ROT_TWO, PRINT_ITEM_TO
            steps += [self.V(value), ("emit", 3 if node.dest is not None else 1)]
        return steps + [("emit", 2)]

    def plan_For(self, node):
        # SETUP_LOOP, iter, GET_ITER, FOR_ITER, target, body, JUMP_ABSOLUTE, POP_BLOCK, orelse
        return [("blocks", 4), ("emit", 3), self.V(node.iter), ("emit", 4), self.V(node.target), self.V(node.body),
                ("emit", 4), self.V(node.orelse)]

    plan_AsyncFor = plan_For

    def plan_While(self, node):
        constant = _constant(node.test)
        if constant == 0:
            return [self.V(node.orelse)]
        test = [] if constant == 1 else [self.V(node.test), ("emit", 3)]
        return [("blocks", 4), ("emit", 3)] + test + [self.V(node.body), ("emit", 4), self.V(node.orelse)]

    def plan_If(self, node):
        constant = _constant(node.test)
        if constant >= 0:
            return [self.V(node.body if constant else node.orelse)]
        return [("blocks", 2), self.V(node.test), ("emit", 3), self.V(node.body),
                ("emit", 3 if node.orelse else 0), self.V(node.orelse)]

    def plan_With(self, node):
        items = getattr(node, "items", None) or [node]  # 3: withitems; 2.7: the statement itself
        steps = []
        for item in items:  # SETUP_WITH (and POP_TOP without a target)
            steps += [("blocks", 2), self.V(item.context_expr), ("emit", 4), self.V(item.optional_vars)]
        # POP_BLOCK, LOAD_CONST None, WITH_CLEANUP, END_FINALLY per item
        return steps + [self.V(node.body), ("emit", 6 * len(items))]

    plan_AsyncWith = plan_With

    def plan_Raise(self, node):
        parts = [getattr(node, name, None) for name in ("type", "inst", "tback", "exc", "cause")]
        return [self.V([part for part in parts if part is not None]), ("emit", 3)]

    def plan_TryExcept(self, node):
        steps = [("blocks", 3 + 2 * len(node.handlers)), ("emit", 3), self.V(node.body), ("emit", 4)]
        return steps + [self.V(node.handlers), ("emit", 1), self.V(node.orelse)]

    def plan_ExceptHandler(self, node):
        # DUP_TOP, type, COMPARE_OP, POP_JUMP_IF_FALSE, POP_TOP, the name or POP_TOP, POP_TOP, body,
        # JUMP_FORWARD
        name = node.name
        store = [self.V(name)] if isinstance(name, _ast.AST) else [("emit", 3 if name else 1)]
        return [("emit", 1), self.V(node.type), ("emit", 7)] + store + [("emit", 1), self.V(node.body), ("emit", 3)]

    def plan_TryFinally(self, node):
        return [("blocks", 2), ("emit", 3), self.V(node.body), ("emit", 4), self.V(node.finalbody), ("emit", 1)]

    def plan_Try(self, node):  # 3's try statement: 2.7's TryFinally around TryExcept
        steps = [("blocks", 5 + 2 * len(node.handlers)), ("emit", 6), self.V(node.body), ("emit", 8)]
        return steps + [self.V(node.handlers), ("emit", 1), self.V(node.orelse), self.V(node.finalbody),
                        ("emit", 1)]

    plan_TryStar = plan_Try

    def plan_Assert(self, node):
        return [("blocks", 1), self.V(node.test), ("emit", 6), self.V(node.msg), ("emit", 6)]

    def plan_Import(self, node):
        # LOAD_CONST level, LOAD_CONST None, IMPORT_NAME, a LOAD_ATTR per dot, STORE
        return [("emit", sum(15 + 3 * alias.name.count(".") for alias in node.names))]

    def plan_ImportFrom(self, node):
        # LOAD_CONST level, LOAD_CONST names, IMPORT_NAME, IMPORT_FROM + STORE per name, POP_TOP
        return [("emit", 10 + 6 * len(node.names))]

    def plan_Exec(self, node):
        return [self.V(node.body), self.V(node.globals), self.V(node.locals), ("emit", 5)]

    def plan_Expr(self, node):
        if _constant(node.value) >= 0:  # a docstring or a lone constant: no code at all
            return []
        return [self.V(node.value), ("emit", 1)]

    def plan_nothing(self, node):
        return []

    plan_Global = plan_Nonlocal = plan_Pass = plan_nothing

    def plan_Break(self, node):
        return [("emit", 1)]

    def plan_Continue(self, node):
        return [("emit", 3)]

    # ---- expressions
    def plan_BoolOp(self, node):
        steps = [("blocks", 2), self.V(node.values[0])]
        for value in node.values[1:]:
            steps += [("emit", 3), self.V(value)]  # JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP
        return steps

    def plan_BinOp(self, node):
        return [self.V(node.left), self.V(node.right), ("emit", 1)]

    def plan_UnaryOp(self, node):
        return [self.V(node.operand), ("emit", 1)]

    def plan_Lambda(self, node):
        args = node.args
        steps = [self.V(args.defaults), self.V(getattr(args, "kw_defaults", None))]
        return steps + self.function(node, args, node.body, 6)

    def plan_IfExp(self, node):
        return [("blocks", 4), self.V(node.test), ("emit", 3), self.V(node.body), ("emit", 3), self.V(node.orelse)]

    def plan_Dict(self, node):
        steps = [("emit", 3)]  # BUILD_MAP (2.7: first; then value, key, STORE_MAP for each)
        for key, value in zip(node.keys, node.values):
            steps += [self.V(value), self.V(key), ("emit", 1)]
        return steps

    def plan_Set(self, node):
        return [self.V(node.elts), ("emit", 3)]

    def plan_ListComp(self, node):  # 2.7: in the enclosing code object
        steps = [("emit", 3)]  # BUILD_LIST
        for generator in node.generators:
            steps += [("blocks", 3), self.V(generator.iter), ("emit", 4), self.V(generator.target)]
            for test in generator.ifs:
                steps += [self.V(test), ("emit", 3)]
        return steps + [self.V(node.elt), ("emit", 3 + 3 * len(node.generators))]

    def plan_GeneratorExp(self, node):
        # The first iterable in the enclosing code, then LOAD_CONST, MAKE_FUNCTION, GET_ITER,
        # CALL_FUNCTION there; the loops in a code object of their own.
        generators = node.generators
        inner = [("emit", 9)]  # BUILD_SET/BUILD_MAP, LOAD_FAST .0, FOR_ITER
        for index, generator in enumerate(generators):
            if index:
                inner += [self.V(generator.iter), ("emit", 4)]
            inner += [("blocks", 3), self.V(generator.target)]
            for test in generator.ifs:
                inner += [self.V(test), ("emit", 3)]
        elements = [node.value, node.key] if _is(node, "DictComp") else [node.elt]
        inner += [self.V(elements), ("emit", 5 + 3 * len(generators))]
        bound = set(n.id for g in generators for n in _walk(g.target) if _is(n, "Name"))
        return [self.V(generators[0].iter), ("enter", node.lineno, bound)] + inner + [
            ("leave",), ("emit", 10 + self.closure(None, [node]))]

    plan_SetComp = plan_DictComp = plan_GeneratorExp

    def plan_Yield(self, node):
        return [self.V(node.value), ("emit", 1 if node.value is not None else 4)]

    def plan_Compare(self, node):
        steps = [self.V(node.left)]
        last = len(node.comparators) - 1
        for index, comparator in enumerate(node.comparators):
            # DUP_TOP, ROT_THREE, COMPARE_OP, JUMP_IF_FALSE_OR_POP inside a chain
            steps += [self.V(comparator), ("emit", 8 if index < last else 3)]
        if last:
            steps += [("blocks", 2), ("emit", 5)]  # JUMP_FORWARD, ROT_TWO, POP_TOP
        return steps

    def plan_Call(self, node):
        steps = [self.V(node.func), self.V(node.args)]
        for keyword in node.keywords:
            steps += [("emit", 3), self.V(keyword.value)]  # LOAD_CONST of the name
        return steps + [self.V(getattr(node, "starargs", None)), self.V(getattr(node, "kwargs", None)),
                        ("emit", 3)]

    def plan_Repr(self, node):
        return [self.V(node.value), ("emit", 1)]

    def plan_load(self, node):
        return [("emit", 3)]

    plan_Num = plan_Str = plan_Bytes = plan_Constant = plan_NameConstant = plan_Name = plan_load
    plan_Ellipsis = plan_load

    def plan_Attribute(self, node):
        return [self.V(node.value), ("emit", 3)]

    def plan_Subscript(self, node):
        return [self.V(node.value), self.V(node.slice), ("emit", 1)]

    def plan_Index(self, node):
        return [self.V(node.value)]

    def plan_Slice(self, node):
        steps = []
        for part in (node.lower, node.upper):
            steps.append(self.V(part) if part is not None else ("emit", 3))
        return steps + [self.V(node.step), ("emit", 3)]

    def plan_ExtSlice(self, node):
        return [self.V(node.dims), ("emit", 3)]

    def plan_List(self, node):
        if _is(node.ctx, "Store"):
            return [("emit", 3), self.V(node.elts)]  # UNPACK_SEQUENCE, then each target
        return [self.V(node.elts), ("emit", 3)]  # BUILD_LIST / BUILD_TUPLE, or DELETE

    plan_Tuple = plan_List

    def plan_generic(self, node):
        """A node 2.7 has no counterpart for (3's f-strings, await, starred...): its children in
        field order, 3 bytes after each and 3 at the end."""
        steps = []
        for field in node._fields:
            value = getattr(node, field, None)
            for child in (value if isinstance(value, list) else [value]):
                if isinstance(child, _ast.AST) and not isinstance(child, (_ast.expr_context, _ast.operator)):
                    steps += [self.V(child), ("emit", 3)]
        return steps + [("emit", 3)]


def parse(source, flags=0):
    """The syntax tree ``compile`` would build for ``source`` (as the console completes it: a
    newline added), or None if it does not parse (then nothing is compiled)."""
    for ending in ("\n", "\n\n"):
        try:
            return compile(source + ending, "<input>", "exec", flags | PyCF_ONLY_AST, True)
        except (SyntaxError, ValueError, OverflowError, TypeError, MemoryError):
            continue
    return None


def measure(tree):
    # type: (object) -> Shape
    """The ``Shape`` of the code 2.7 compiles from ``tree``."""
    return _Measure().run(tree)
