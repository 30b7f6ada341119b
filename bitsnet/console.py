"""bitsnet.console: the interactive interpreter's console, without ``code``, ``codeop`` or ``ast``.

BITS's Python has none of those three modules (docs/bits-environment.md section 2), yet the
web REPL and the GRUB ``python`` command (``bitsnet.launch``) need what ``code.InteractiveConsole``
does: collect lines until a statement is complete, run it in one namespace, show tracebacks.

Contents: ``compile_command`` (complete, incomplete or a syntax error: codeop's rule),
``Compiler`` (the same, remembering ``from __future__`` statements), ``Console`` (the line
buffer, running, tracebacks, ``interact``), ``install_exit`` (``exit()``/``quit()`` where the
builtins lack them, as in BITS: no ``site``), ``bits_readline`` (the prompt's line editor).

How "incomplete" is told from "wrong" (codeop's rule, which needs only ``compile``): the source
is compiled as it is, with one newline added and with two. If it compiles as it is, it is
complete. If it fails with one newline and fails the same way with two, it is a syntax error;
any other outcome means more lines could still make it valid (an open block, bracket or
string). Python 3.11's parser says "incomplete input" itself when asked (flag
``PyCF_ALLOW_INCOMPLETE_INPUT``), and the three-way comparison is not reliable there, so 3.11
and later ask it, as their codeop does.
"""

from __future__ import absolute_import

import sys
import traceback
import warnings

import __future__

PyCF_DONT_IMPLY_DEDENT = 0x200  # the tokenizer must not close an open block at the end
PyCF_ALLOW_INCOMPLETE_INPUT = 0x4000  # 3.11+: the parser reports "incomplete input"
PyCF_ONLY_AST = 0x400  # the syntax tree, no code (2.7 and 3; BITS has _ast built in, not ast)
_ASK_PARSER = sys.version_info >= (3, 11)
FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:  # what "from __future__ import" can switch on
    FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag

PS1 = ">>> "
PS2 = "... "


def _blank(source):
    """Only blank lines and comments: compiled as ``pass`` (the interpreter shows a new prompt)."""
    for line in source.split("\n"):
        line = line.strip()
        if line and line[0] != "#":
            return False
    return True


class Compiler(object):
    """``compile_command`` with memory: after ``from __future__ import division`` every later
    statement is compiled with it in force, as at the interactive prompt."""

    def __init__(self):
        self.flags = PyCF_DONT_IMPLY_DEDENT | (PyCF_ALLOW_INCOMPLETE_INPUT if _ASK_PARSER else 0)
        self.only_ast = 0

    def _compile(self, source, filename, symbol, incomplete_input=True):
        flags = self.flags | self.only_ast
        if not incomplete_input:
            flags &= ~(PyCF_DONT_IMPLY_DEDENT | PyCF_ALLOW_INCOMPLETE_INPUT)
        # dont_inherit: this module's own __future__ imports must not leak into the user's code.
        code = compile(source, filename, symbol, flags, True)
        self.flags |= getattr(code, "co_flags", 0) & FUTURE_FLAGS
        return code

    def __call__(self, source, filename="<input>", symbol="single", only_ast=False):
        """A code object if ``source`` is complete, None if it needs more lines; raises
        SyntaxError (or OverflowError/ValueError for bad literals) if no more lines can help.
        ``only_ast``: the syntax tree instead of a code object (``PyCF_ONLY_AST``: the same
        parse, and no code generated, so nothing of 2.7's code generator runs -- what the web
        REPL needs to check a block before BITS's compiler sees it)."""
        self.only_ast = PyCF_ONLY_AST if only_ast else 0
        try:
            return self._complete(source, filename, symbol)
        finally:
            self.only_ast = 0

    def _complete(self, source, filename, symbol):
        if _blank(source) and symbol != "eval":
            source = "pass"
        if _ASK_PARSER:
            return self._ask_parser(source, filename, symbol)
        return self._compare(source, filename, symbol)

    def _ask_parser(self, source, filename, symbol):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            try:
                self._compile(source, filename, symbol)
            except SyntaxError:
                try:
                    self._compile(source + "\n", filename, symbol)
                    return None
                except SyntaxError as exc:
                    if "incomplete input" in str(exc):
                        return None
        return self._compile(source, filename, symbol, incomplete_input=False)

    def _compare(self, source, filename, symbol):
        code = error1 = error2 = None
        try:
            code = self._compile(source, filename, symbol)
        except SyntaxError:
            pass
        if code is not None:
            return code
        with warnings.catch_warnings():  # the probes must not print a warning twice more
            warnings.simplefilter("ignore")
            try:
                self._compile(source + "\n", filename, symbol)
                return None  # complete once the line ends: a block still open
            except SyntaxError as exc:
                error1 = exc
            try:
                self._compile(source + "\n\n", filename, symbol)
            except SyntaxError as exc:
                error2 = exc
        if error2 is not None and repr(error1) == repr(error2):
            raise error1
        return None


def compile_command(source, filename="<input>", symbol="single"):
    """``codeop.compile_command``: a code object, None (incomplete), or SyntaxError."""
    return Compiler()(source, filename, symbol)


class _Quitter(object):
    """``exit``/``quit`` as ``site`` makes them: BITS runs without ``site`` and has neither."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name

    def __call__(self, code=None):
        raise SystemExit(code)


def install_exit(namespace):
    """Give ``namespace`` ``exit()`` and ``quit()`` if the builtins have none (BITS)."""
    try:
        import __builtin__ as builtins  # type: ignore
    except ImportError:
        import builtins  # type: ignore[no-redef]
    for name in ("exit", "quit"):
        if not hasattr(builtins, name) and name not in namespace:
            namespace[name] = _Quitter(name)


class Console(object):
    """``code.InteractiveConsole``'s job: ``push`` lines, run complete statements in
    ``self.locals``, show tracebacks without the console's own frames."""

    def __init__(self, namespace=None, filename="<console>"):
        self.locals = namespace if namespace is not None else {"__name__": "__console__", "__doc__": None}
        self.filename = filename
        self.compile = Compiler()
        self.buffer = []  # type: list

    def resetbuffer(self):
        self.buffer = []

    def write(self, text):
        """Where tracebacks and messages go; subclasses redirect it."""
        sys.stderr.write(text)

    def prompt(self):
        return PS2 if self.buffer else PS1

    def push(self, line):
        """Add one line (without its newline); True while more lines are needed."""
        self.buffer.append(line)
        more = self.runsource("\n".join(self.buffer), self.filename)
        if not more:
            self.resetbuffer()
        return more

    def runsource(self, source, filename=None, symbol="single"):
        """True if ``source`` is incomplete; otherwise it was run (or its error shown)."""
        try:
            code = self.compile(source, filename or self.filename, symbol)
        except (OverflowError, SyntaxError, ValueError):
            self.showsyntaxerror(filename or self.filename)
            return False
        if code is None:
            return True
        self.runcode(code)
        return False

    def runcode(self, code):
        """Run in the namespace; SystemExit goes to the caller (it ends the console)."""
        try:
            exec(code, self.locals)
        except SystemExit:
            raise
        except BaseException:  # KeyboardInterrupt too: shown as the interpreter shows it
            self.showtraceback()

    def showsyntaxerror(self, filename=None):
        etype, value, tb = sys.exc_info()
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
        if filename and etype is SyntaxError:
            try:
                msg, (_, lineno, offset, line) = value.args
            except (TypeError, ValueError):
                pass
            else:
                value = SyntaxError(msg, (filename, lineno, offset, line))
                sys.last_value = value
        self.write("".join(traceback.format_exception_only(etype, value)))

    def showtraceback(self):
        """The traceback from the user's code on (this module's exec frame left out)."""
        etype, value, tb = sys.exc_info()
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
        try:
            self.write("".join(traceback.format_exception(etype, value, tb.tb_next if tb else None)))
        finally:
            tb = None

    def interact(self, banner=None, readline=None, exitmsg=None):
        """Read, compile, run until end of input (or SystemExit); ``readline(prompt)`` returns
        a line without its newline and raises EOFError at the end."""
        readline = readline or default_readline()
        if banner:
            self.write(banner + "\n")
        status = None
        while True:
            try:
                line = readline(self.prompt())
            except EOFError:
                self.write("\n")
                break
            except (KeyboardInterrupt, KeyError) as exc:
                if isinstance(exc, KeyError) and not _is_ctrl_c(exc):
                    raise
                self.write("\nKeyboardInterrupt\n")
                self.resetbuffer()
                continue
            try:
                self.push(line)
            except SystemExit as exc:
                status = exc.code
                break
        if exitmsg:
            self.write(exitmsg + "\n")
        return status


def _is_ctrl_c(exc):
    """BITS quirk: Ctrl-C typed on a serial console raises ``KeyError((0, u'\\x03', 0))`` from
    BITS's key handler, not KeyboardInterrupt (docs/bits-environment.md section 8.3)."""
    key = exc.args[0] if exc.args else None
    return isinstance(key, tuple) and len(key) == 3 and key[1] in (u"\x03", "\x03")


def bits_readline(prompt):
    """One line from BITS's line editor (history, cursor keys), as the C prompt gets it: BITS's
    ``readline._readline`` returns "" on Ctrl-D, Ctrl-Z or Esc on an empty line, else the line
    with its newline. (``raw_input`` bypasses it: BITS's sys.stdout is not a file.)"""
    line = sys.modules["readline"]._readline(prompt)  # type: ignore[attr-defined]
    if not line:
        raise EOFError
    return line[:-1] if line.endswith("\n") else line


def default_readline():
    """BITS's line editor when present (``init`` imports BITS's readline), else input()."""
    if hasattr(sys.modules.get("readline"), "_readline"):
        return bits_readline
    try:
        return raw_input  # type: ignore[name-defined]  # noqa: F821
    except NameError:
        return input
