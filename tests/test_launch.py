"""bitsnet.launch (``python -m`` at the GRUB prompt, without runpy) and bitsnet.console (the
interactive console without code/codeop): host-only units, on Python 2.7 and 3."""

from __future__ import print_function

import os
import re
import sys
import time
import types

import pytest

import conftest  # noqa: F401  (import paths)
from bitsnet import console, launch

sys.path.insert(0, os.path.join(conftest.ROOT, "tools"))
import bitsrun  # noqa: E402

PROGRAM = u"""\
import sys
print("name=%s argv=%s" % (__name__, "|".join(sys.argv[1:])))
print("argv0=%s" % sys.argv[0].endswith("h2b_prog.py"))
what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "exit3":
    sys.exit(3)
if what == "exitmsg":
    sys.exit("it went wrong")
if what == "exit0":
    raise SystemExit
if what == "raise":
    raise ValueError("boom")
"""


@pytest.fixture
def program(tmpdir, monkeypatch):
    """A module ``h2b_prog`` and a package ``h2b_pkg`` (with __main__) on sys.path."""
    tmpdir.join("h2b_prog.py").write_text(PROGRAM, encoding="utf-8")
    pkg = tmpdir.mkdir("h2b_pkg")
    pkg.join("__init__.py").write_text(u"", encoding="utf-8")
    pkg.join("__main__.py").write_text(u"import sys\nprint('pkg main %s' % __package__)\n", encoding="utf-8")
    tmpdir.mkdir("h2b_nomain").join("__init__.py").write_text(u"", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmpdir))
    return tmpdir


def test_run_module_as_main_with_argv_then_puts_everything_back(program, capsys):
    main_before, argv_before = sys.modules["__main__"], list(sys.argv)
    assert launch.run_module("h2b_prog", ["a", "b"]) == 0
    out = capsys.readouterr().out
    assert "name=__main__ argv=a|b\n" in out and "argv0=True\n" in out
    assert sys.modules["__main__"] is main_before and sys.argv == argv_before


@pytest.mark.parametrize("what,status,err", [("exit3", 3, ""), ("exit0", 0, ""),
                                             ("exitmsg", 1, "it went wrong\n"), ("", 0, "")])
def test_system_exit_becomes_the_status(program, capsys, what, status, err):
    assert launch.run_module("h2b_prog", [what] if what else []) == status
    assert capsys.readouterr().err == err


def test_an_exception_prints_its_traceback_without_launch_frames(program, capsys):
    assert launch.run_module("h2b_prog", ["raise"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n") and "ValueError: boom" in err
    assert "h2b_prog.py" in err and "launch.py" not in err


def test_packages_run_their_main_and_missing_modules_are_named(program, capsys):
    assert launch.run_module("h2b_pkg") == 0
    assert "pkg main h2b_pkg" in capsys.readouterr().out
    assert launch.run_module("h2b_nomain") == 1
    assert "h2b_nomain.__main__" in capsys.readouterr().err
    assert launch.run_module("h2b_no_such_module") == 1
    assert capsys.readouterr().err == "python: No module named h2b_no_such_module\n"


def test_python_command_forms(program, capsys):
    assert launch.python_command(["python", "-m", "h2b_prog", "x"]) is True
    assert "argv=x" in capsys.readouterr().out
    assert launch.python_command(["python", "-m", "h2b_prog", "exit3"]) is False
    assert "python: exit status 3" in capsys.readouterr().err
    assert launch.python_command(["python", "-c", "import sys; print(sys.argv)", "q"]) is True
    assert "['-c', 'q']" in capsys.readouterr().out
    script = str(program.join("h2b_prog.py"))
    assert launch.python_command(["python", script, "y"]) is True
    assert "argv=y" in capsys.readouterr().out
    assert launch.python_command(["python", "-m"]) is False
    assert "argument expected for the -m option" in capsys.readouterr().err
    assert launch.python_command(["python", "-x"]) is False
    assert launch.python_command(["python", os.path.join(str(program), "nothere.py")]) is False


def test_what_cannot_be_loaded_is_a_message_and_a_status_not_a_raise(program, capsys):
    # The review: a package whose __init__ raises, a file with NUL bytes (2.7) and a file that is
    # not UTF-8 (3) raised through the GRUB command instead of a message and a status.
    bad = program.mkdir("h2b_badinit")
    bad.join("__init__.py").write_text(u"1 / 0\n", encoding="utf-8")
    bad.join("__main__.py").write_text(u"print('not reached')\n", encoding="utf-8")
    sub = program.mkdir("h2b_keyinit")
    sub.join("__init__.py").write_text(u"{}['x']\n", encoding="utf-8")
    sub.join("mod.py").write_text(u"print('not reached')\n", encoding="utf-8")
    program.join("h2b_nul.py").write_binary(b"print('a')\x00\nprint('b')\n")
    program.join("h2b_latin1.py").write_binary(b"print('\xe9t\xe9')\n")
    program.join("h2b_syntax.py").write_binary(b"x = = 1\n")
    cases = [(["-m", "h2b_badinit"], "python: can't run module 'h2b_badinit': ZeroDivisionError"),
             (["-m", "h2b_keyinit.mod"], "python: can't run module 'h2b_keyinit.mod': KeyError"),
             (["-m", "h2b_nul"], "python: can't run module 'h2b_nul': "),
             ([str(program.join("h2b_nul.py"))], "python: can't compile '%s': " % program.join("h2b_nul.py")),
             ([str(program.join("h2b_syntax.py"))], "python: can't compile "),
             (["-m", "h2b_syntax"], "python: can't run module 'h2b_syntax': SyntaxError")]
    if sys.version_info[0] >= 3:  # 2.7 reads bytes and its compiler takes Latin-1 in a string
        cases.append(([str(program.join("h2b_latin1.py"))], "python: can't open file "))
        cases.append((["-m", "h2b_latin1"], "python: can't run module 'h2b_latin1': SyntaxError"))
    for args, message in cases:
        assert launch.python_command(["python"] + args) is False, args
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert lines and lines[0].startswith(message) and "Traceback" not in captured.err, (args, captured.err)
        ran = "open file" not in message  # a file that cannot be read does not get as far as a status
        assert lines[1:] == (["python: exit status 1"] if ran else []), (args, captured.err)
        assert "not reached" not in captured.out
    assert launch.python_command(["python", os.path.join(str(program), "nothere.py")]) is False
    assert capsys.readouterr().err.startswith("python: can't open file ")


def test_bitsnet_modules_run_through_it(capsys):
    # Their argument parsing: --help exits 0 after printing usage, a bad argument is an error.
    assert launch.run_module("bitsnet.webrepl", ["--help"]) == 1  # SystemExit(USAGE): printed, 1
    assert "usage: python -m bitsnet.webrepl" in capsys.readouterr().err
    assert launch.run_module("bitsnet.netconsole", []) == 1
    assert "HOST[:PORT] missing" in capsys.readouterr().err


def test_plain_python_is_the_interactive_interpreter(capsys):
    namespace = {"__name__": "__main__"}
    lines = iter(["x = 6", "def f():", "    return x * 7", "", "f()", "1/0", "if 1:", "  exit(4)", ""])

    def readline(prompt):
        line = next(lines)
        print(prompt + line)
        return line
    assert launch.interact(namespace, readline) == 4
    captured = capsys.readouterr()
    assert captured.out.startswith(launch.BANNER + "\n") or launch.BANNER in captured.err
    assert "\n42\n" in captured.out and "... " in captured.out
    assert "ZeroDivisionError" in captured.err and "launch.py" not in captured.err
    assert namespace["x"] == 6


def test_interactive_interpreter_ends_at_eof(capsys):
    def readline(prompt):
        raise EOFError
    assert launch.interact({"__name__": "__main__"}, readline) == 0


def test_register_grub_commands_once(monkeypatch):
    calls = []
    fake_bits = types.ModuleType("bits")
    fake_bits.register_grub_command = lambda *args: calls.append(args)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bits", fake_bits)
    monkeypatch.setitem(launch._state, "registered", False)
    launch.register_grub_commands()
    launch.register_grub_commands()
    assert len(calls) == 1 and calls[0][0] == "python" and calls[0][1] is launch.python_command


# ----------------------------------------------------------------------------- console
def test_console_future_statements_stay_in_force():
    lines = []
    the_console = console.Console()
    the_console.write = lines.append  # type: ignore[method-assign]
    assert the_console.push("from __future__ import division") is False
    assert the_console.push("r = 1 / 2") is False
    assert the_console.locals["r"] == 0.5
    assert the_console.push("x = (1,") is True and the_console.push("2)") is False
    assert the_console.locals["x"] == (1, 2)
    assert the_console.push("x = = 1") is False and "SyntaxError" in "".join(lines)
    assert 'File "<console>"' in "".join(lines)


def test_exit_is_given_where_the_builtins_lack_it(monkeypatch):
    try:
        import __builtin__ as builtins  # type: ignore
    except ImportError:
        import builtins  # type: ignore[no-redef]
    for name in ("exit", "quit"):
        monkeypatch.delattr(builtins, name, raising=False)
    namespace = {}  # type: dict
    console.install_exit(namespace)
    assert "exit()" in repr(namespace["exit"])
    with pytest.raises(SystemExit) as info:
        namespace["quit"](2)
    assert info.value.code == 2


def test_bits_line_editor_is_used_when_present(monkeypatch):
    fake = types.ModuleType("readline")
    answers = ["print(1)\n", ""]
    fake._readline = lambda prompt: answers.pop(0)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "readline", fake)
    readline = console.default_readline()
    assert readline is console.bits_readline
    assert readline(">>> ") == "print(1)"
    with pytest.raises(EOFError):
        readline(">>> ")


def test_bits_serial_ctrl_c_at_the_prompt_is_a_keyboard_interrupt(capsys):
    # BITS raises KeyError((0, u'\x03', 0)) for Ctrl-C on a serial console; the prompt goes on.
    events = [KeyError((0, u"\x03", 0)), "x = 1", EOFError()]

    def readline(prompt):
        event = events.pop(0)
        if isinstance(event, BaseException):
            raise event
        return event
    namespace = {"__name__": "__main__"}
    assert launch.interact(namespace, readline) == 0
    assert "KeyboardInterrupt" in capsys.readouterr().err and namespace["x"] == 1
    with pytest.raises(KeyError):
        console.Console().interact(readline=lambda prompt: {}["other"])


# ----------------------------------------------------------------------------- real BITS
# The GRUB prompt itself: bitsrun's grub.cfg, with GRUB command lines of ours between BITS's
# start-up (init.cfg, where bits_install put the line that registers bitsnet.launch's "python")
# and bitsrun's wrapper, which ends the run. Their output is on the console, unframed. The
# interactive interpreter gets its keys through QEMU's monitor (sendkey), once its banner shows.
REAL_GRUB_CFG = """\
source /boot/cfg/init.cfg
echo "@@h2b begin"
python -m bitsnet.selftest --peer 10.0.2.2:8080
echo "@@h2b status $?"
python -c 'import sys; print "argv", sys.argv; sys.exit(3)' a b
echo "@@h2b status $?"
python -m no_such_module_h2b
echo "@@h2b status $?"
python
echo "@@h2b status $?"
echo "@@h2b end"
py 'execfile("/boot/bitsrun/main.py")'
halt
"""
TYPED = ["y = 6*7", "print 'got', y", "exit(5)"]  # BITS's line editor echoes as it redraws
_KEY_NAMES = {" ": "spc", "=": "equal", "*": "shift-8", "(": "shift-9", ")": "shift-0", "'": "apostrophe",
              ",": "comma"}
REAL_BITS_MISSING = bitsrun.unavailable()


def _type_into_bits(monitors, banner_seen):
    """Wait for the interpreter's banner, then type TYPED on the guest keyboard."""
    if not banner_seen.wait(240):
        return
    time.sleep(1.0)
    for line in TYPED:
        for char in line:
            monitors[-1].command("sendkey " + _KEY_NAMES.get(char, char))
            time.sleep(0.1)
        monitors[-1].command("sendkey ret")
        time.sleep(1.5)


@pytest.mark.realbits
@pytest.mark.skipif(REAL_BITS_MISSING is not None, reason=str(REAL_BITS_MISSING))
def test_python_m_at_the_grub_prompt_of_real_bits(monkeypatch):
    import threading
    import qemu_vm
    monitors, banner_seen = [], threading.Event()
    new_monitor, clean = qemu_vm.Monitor.__init__, bitsrun.clean

    def monitor_init(self, path):
        new_monitor(self, path)
        monitors.append(self)

    def watching_clean(line):
        if launch.BANNER in line:
            banner_seen.set()
        return clean(line)

    def setup():  # in the run's namespace, before the boot
        typist = threading.Thread(target=_type_into_bits, args=(monitors, banner_seen))
        typist.daemon = True
        typist.start()
        return {}
    monkeypatch.setattr(bitsrun, "GRUB_CFG", REAL_GRUB_CFG)
    monkeypatch.setattr(qemu_vm.Monitor, "__init__", monitor_init)
    monkeypatch.setattr(bitsrun, "clean", watching_clean)
    result = bitsrun.run(code="print('wrapper')", lab=True, timeout=300, setup=setup)
    lines = result.console
    text = "\n".join(lines)
    assert "@@h2b begin" in lines and "@@h2b end" in lines, text
    ours = lines[lines.index("@@h2b begin") + 1:lines.index("@@h2b end")]
    statuses = [line for line in ours if line.startswith("@@h2b status ")]
    assert statuses == ["@@h2b status 0", "@@h2b status 1", "@@h2b status 1", "@@h2b status 1"], text
    assert [line for line in ours if re.match(bitsrun.selftest_all_passed(result), line)], text
    assert "argv ['-c', 'a', 'b']" in ours and "python: exit status 3" in ours, text
    assert "python: No module named no_such_module_h2b" in ours, text
    # plain python: BITS's banner, a statement, a print, and exit(5) (BITS's own has no exit)
    assert launch.BANNER in ours and "got 42" in ours, text


# --- a program's last bytes at the prompt ---------------------------------------------------------
HANDOVER_PROGRAM = u"""\
import sys, time
from bitsnet import launch, stack
code = '''
import socket
s = socket.create_connection(("127.0.0.1", %d))
s.sendall(b"x" * %d)
s.close()
''' % (int(sys.argv[1]), int(sys.argv[2]))
launch.python_command(["python", "-c", code])
print("@@handed_over %s" % stack.tcp_closer.handed_over())
sys.stdout.flush()
time.sleep(%r)  # the GRUB prompt: nothing runs Python until the next command
print("@@end")
"""
HANDOVER_BYTES = 300 * 1000  # more than one send buffer: sendall returns with bytes still queued
PROMPT_PAUSE = 2.0


def test_a_program_that_ends_after_close_still_delivers_its_last_bytes_and_fin(tmpdir):
    """A program that sends and closes, then ends: its last bytes and its FIN reach the peer
    while the machine sits at the prompt -- not only at the next python command (or never, if
    the next command is halt). Without launch's hand-over the peer got a part and no EOF."""
    import socket
    import subprocess
    import threading
    import processes
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    got = {"bytes": 0, "eof_at": None}

    def serve():
        conn = server.accept()[0]
        while True:
            data = conn.recv(65536)
            if not data:
                break
            got["bytes"] += len(data)
        got["eof_at"] = time.time()
        conn.close()
    thread = threading.Thread(target=serve)
    thread.daemon = True
    thread.start()
    path = str(tmpdir.join("handover.py"))
    with open(path, "w") as f:
        f.write(HANDOVER_PROGRAM.replace("%r", repr(PROMPT_PAUSE)))
    # Completions 0.3 s late, as on OVMF, where a Transmit completes when the peer's ACK came:
    # the close waits for them before it posts Close behind the last byte.
    command = [sys.executable, processes.EFIRUN, "--faults", "delay=0.3"] + conftest.STATION_ARGS + [
        path, str(server.getsockname()[1]), str(HANDOVER_BYTES)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=conftest.ROOT,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"))
    end_at = None
    try:
        lines = []
        for raw in iter(process.stdout.readline, b""):
            lines.append(raw.decode("utf-8", "replace").strip())
            if lines[-1] == "@@end":
                end_at = time.time()
        err = processes.communicate(process, 60)[1].decode("utf-8", "replace")
    finally:
        server.close()
    thread.join(10)
    assert process.returncode == 0, "\n".join(lines) + err
    assert "@@handed_over True" in lines, lines
    assert end_at is not None and got["eof_at"] is not None, (lines, got)
    assert got["eof_at"] < end_at, "the FIN came only when the program's process exited"
    assert got["bytes"] == HANDOVER_BYTES, got
