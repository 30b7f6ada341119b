"""bitsnet.launch: ``python -m MODULE [ARGS...]`` at the BITS (GRUB) prompt, without ``runpy``.

BITS's GRUB has ``py 'CODE'`` and an interactive ``python`` command, but no ``-m`` and no
``runpy`` (docs/bits-environment.md section 8.1). This module supplies both:

``run_module(name, argv)``
    runs a module as ``__main__``, as ``python -m`` does: its code is found through its
    loader (``pkgutil.get_loader`` on 2.7, ``importlib.util.find_spec`` on 3) and run in a
    fresh ``__main__`` module with ``sys.argv = [its file] + argv``; a package runs its
    ``__main__`` submodule. ``SystemExit`` ends it with its status (a message is printed as
    ``python`` prints it), any other exception with its traceback; both become the returned
    exit status. ``sys.argv`` and ``sys.modules["__main__"]`` are put back afterwards.
``python_command(args)``
    the GRUB ``python`` command: ``python -m MODULE [ARGS...]``, ``python -c CODE [ARGS...]``,
    ``python FILE [ARGS...]``, ``python URL [ARGS...]`` (an ``http://`` or ``https://`` program,
    or a zip with ``__main__.py``, fetched and run by ``bitsnet.remote``), and plain
    ``python``, which opens the interactive interpreter as
    BITS's own command does (same banner; ``bitsnet.console`` over BITS's line editor, in
    ``__main__``'s namespace; Ctrl-D or Esc on an empty line leaves).
``register_grub_commands()``
    makes that the ``python`` command: ``bits.register_grub_command`` registers it again, and
    GRUB runs the latest registration of a name; on a boot with ``BITSNET_LAB`` set it then runs
    the lab's plan (``bitsnet.lab``). ``tools/bits_install.py`` adds the line that
    calls it to ``/boot/cfg/init.cfg``, after ``init.init()``.

The command returns true when the exit status is 0, so GRUB scripts can test it
(``if python -m bitsnet.selftest; then ...``).
"""

from __future__ import absolute_import

import sys
import traceback

from bitsnet import console

BANNER = "Starting the Python interactive interpreter. Press Ctrl-D or Esc to exit."
SUMMARY = "[-m MODULE | -c CODE | FILE | URL] [ARGS...]"
DESCRIPTION = ("Start the Python interpreter; with -m MODULE run MODULE as __main__ (python -m), "
               "with -c CODE run CODE, with FILE run that file, with an http(s) URL fetch and run "
               "that program (.py, or .zip with __main__.py); ARGS become sys.argv[1:].")
USAGE = "usage: python [-m MODULE | -c CODE | FILE | URL] [ARGS...]   (no arguments: interactive)\n"

_INTEGERS = (int, type(2 ** 64))  # int, and long on Python 2
CLOSE_HANDOVER = 2.0  # s a finished program's background closes may take to reach the firmware
_state = {"registered": False, "last_main": None}


class _NoModule(ImportError):
    """The module, or the package it is in, cannot be found."""


def _find_code(name):
    """(code, file name, loader, package) of module ``name``, or of ``name.__main__`` for a
    package; raises ImportError (from the parent package's import too)."""
    loader, filename, code = _loader_and_code(name)
    if loader is None:
        raise _NoModule("No module named %s" % name)
    if code is not None:
        return code, filename, loader, name.rpartition(".")[0]
    main_name = name + ".__main__"
    loader, filename, code = _loader_and_code(main_name)
    if loader is None or code is None:
        raise _NoModule("No module named %s; '%s' is a package and cannot be directly executed"
                        % (main_name, name))
    return code, filename, loader, name


def _loader_and_code(name):
    """(loader, file name, code or None for a package) of ``name``; (None, None, None) if absent."""
    if sys.version_info[0] >= 3:
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return None, None, None
        if spec.submodule_search_locations is not None:
            return spec.loader, spec.origin, None
        return spec.loader, spec.origin, spec.loader.get_code(name)
    import pkgutil  # 2.7: what runpy itself uses there
    loader = pkgutil.get_loader(name)
    if loader is None:
        return None, None, None
    if loader.is_package(name):
        return loader, None, None
    get_filename = getattr(loader, "get_filename", None)
    return loader, get_filename(name) if get_filename else name, loader.get_code(name)


def _exit_status(exc):
    """What ``python`` makes of ``SystemExit(code)``: None is 0, an int is itself, anything
    else is printed to stderr and is 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, _INTEGERS) and not isinstance(code, bool):
        return code
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:  # a console that cannot print it (non-ASCII in BITS) must not hide the status
        pass
    return 1


def _print_traceback(skip):
    """The traceback of the exception being handled, without its first ``skip`` frames (ours)."""
    etype, value, tb = sys.exc_info()
    try:
        for _ in range(skip):
            if tb is not None:
                tb = tb.tb_next
        traceback.print_exception(etype, value, tb)
    finally:
        tb = None


def _run_code(code, filename, argv0, argv, attributes):
    """Run ``code`` as ``__main__`` with ``sys.argv = [argv0] + argv``; the exit status."""
    main = type(sys)("__main__")
    main.__dict__.update(attributes)
    main.__file__ = filename
    saved_main = sys.modules.get("__main__")
    saved_argv = getattr(sys, "argv", None)
    sys.modules["__main__"] = main
    sys.argv = [argv0] + list(argv)
    try:
        exec(code, main.__dict__)
        return 0
    except SystemExit as exc:
        return _exit_status(exc)
    except BaseException:  # KeyboardInterrupt too: printed, as python prints it, with status 1
        _print_traceback(1)
        return 1
    finally:
        sys.argv = saved_argv if saved_argv is not None else []
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        # Python 2 clears a module's globals when the module object dies; functions the program
        # left behind (atexit handlers, callbacks) would then see None. Keep the last one alive.
        _state["last_main"] = main


def _load_failed(doing, target):
    """Status 1 for the exception being handled, a failure to find, read, compile or import
    what the command names, after one line on stderr: ``python: can't DOING TARGET: Type:
    message``. Whatever the program's file holds (NUL bytes: TypeError from 2.7's compiler;
    bytes that are not UTF-8: UnicodeDecodeError on 3; a package whose ``__init__`` raises
    anything), nothing raises through GRUB's command: GRUB would lose the status, and BITS
    prints a traceback of ours instead of the program's fault."""
    etype, value = sys.exc_info()[:2]
    lines = traceback.format_exception_only(etype, value)
    message = lines[-1].strip() if lines else etype.__name__
    if isinstance(value, SyntaxError) and value.lineno:  # where: its own line lacks the place
        message = "%s (%s, line %d)" % (message, value.filename or target, value.lineno)
    text = "python: can't %s %s: %s\n" % (doing, target, message)
    try:
        if not isinstance(text, str):  # 2.7 unicode from a message: BITS's console takes ASCII
            text = text.encode("ascii", "backslashreplace")
        sys.stderr.write(text)
    except Exception:  # a console that cannot print it must not hide the status
        pass
    return 1


def run_module(name, argv=()):
    """Run module ``name`` as ``python -m name argv...`` does; returns the exit status."""
    try:
        code, filename, loader, package = _find_code(name)
    except _NoModule as exc:
        sys.stderr.write("python: %s\n" % exc)
        return 1
    except Exception:  # the package's import failed, or the module's code did not compile
        return _load_failed("run module", "'%s'" % name)
    attributes = {"__loader__": loader, "__package__": package or None}
    return _run_code(code, filename, filename or name, argv, attributes)


def run_source(source, filename, argv0, argv=()):
    """Compile and run ``source`` as ``__main__`` (``python -c``, ``python FILE``)."""
    try:
        code = compile(source, filename, "exec", 0, True)
    except Exception:  # SyntaxError; NUL bytes: ValueError (3), TypeError (2.7); OverflowError
        return _load_failed("compile", "'%s'" % filename)
    return _run_code(code, filename, argv0, argv, {"__package__": None})


def interact(namespace=None, readline=None):
    """The interactive interpreter of BITS's ``python`` command, in ``__main__``'s namespace."""
    if namespace is None:
        namespace = sys.modules["__main__"].__dict__
    console.install_exit(namespace)
    the_console = console.Console(namespace, "<stdin>")
    status = the_console.interact(BANNER, readline)
    return _status_of(status)


def _status_of(code):
    return _exit_status(SystemExit(code))


def python_command(args):
    """The GRUB ``python`` command; ``args`` is ``["python", ARG...]``. True when status is 0."""
    try:
        return _python_command(args)
    finally:
        _hand_closes_over()


def _hand_closes_over():
    """BITS quirk: between two GRUB commands nothing runs Python (docs/bits-environment.md
    section 8.1), so the background closes a program leaves -- its last bytes and FIN still queued
    in bitsnet -- would wait for the next ``python`` command, and a ``halt`` typed first would
    lose them. Hand them to the firmware now (docs/architecture.md section 9), within
    CLOSE_HANDOVER seconds; a program that never imported the socket layer costs nothing."""
    stack = sys.modules.get("bitsnet.stack")
    if stack is not None:
        try:
            stack.hand_closes_over(CLOSE_HANDOVER)
        except Exception as exc:  # a firmware error here must not turn the command into a traceback
            sys.stderr.write("python: finishing the program's closes: %s\n" % exc)


def _python_command(args):
    rest = list(args[1:])
    if not rest:
        return interact() == 0
    option = rest[0]
    if option in ("-m", "-c") and len(rest) < 2:
        sys.stderr.write("python: argument expected for the %s option\n%s" % (option, USAGE))
        return False
    if option == "-m" and len(rest) >= 2:
        status = run_module(rest[1], rest[2:])
    elif option == "-c" and len(rest) >= 2:
        status = run_source(rest[1] + "\n", "<string>", "-c", rest[2:])
    elif option in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return True
    elif _is_url(option):
        return _run_url(option, rest[1:])
    elif option.startswith("-"):
        sys.stderr.write("python: unknown option %s\n%s" % (option, USAGE))
        return False
    else:
        try:
            with open(option) as f:
                source = f.read()
        except Exception:  # IOError; UnicodeDecodeError on 3 for a file that is not UTF-8
            return _load_failed("open file", "'%s'" % option) == 0
        status = run_source(source, option, option, rest[1:])
    if status:
        sys.stderr.write("python: exit status %d\n" % status)
    return status == 0


def _is_url(option):
    return option.lower().startswith(("http://", "https://"))


def _run_url(url, argv):
    """``python URL ARGS``: a program from the lab (bitsnet.remote); True when its status is 0. A
    fetch that fails is one line and false, as a file that cannot be opened is."""
    from bitsnet import remote
    try:
        program = remote.fetch_program(url)
    except remote.FetchError as exc:
        sys.stderr.write("python: can't fetch %s\n" % exc)
        return False
    status = program.run(argv)
    if status:
        sys.stderr.write("python: exit status %d\n" % status)
    return status == 0


def register_grub_commands():
    """Make ``python`` (with ``-m``) a GRUB command; once per boot, later calls do nothing.
    Then, on a boot with the GRUB variable ``BITSNET_LAB`` set (before init.cfg ran), run the
    lab's plan (``_lab_boot``)."""
    if _state["registered"]:
        return
    import bits
    bits.register_grub_command("python", python_command, SUMMARY, DESCRIPTION)
    _state["registered"] = True
    _lab_boot()


def _lab_boot():
    """An unattended run (bitsnet.lab.boot) when ``BITSNET_LAB`` is set: init.cfg's one bitsnet
    line, which tools/bits_install.py adds after BITS's start-up, serves both."""
    import os
    try:
        wanted = os.environ.get("BITSNET_LAB")
    except Exception:  # BITS's os.environ is GRUB's: nothing to read is nothing to do
        wanted = None
    if wanted:
        from bitsnet import lab
        lab.boot()
