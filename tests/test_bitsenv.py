"""tools/efirun.py gives the program BITS's Python environment (tools/efisim/bitsenv.py,
docs/bits-environment.md sections 2-5 and 8): BITS's errno/os/time/random, only BITS's modules, no
threads, its sys.path and stdout, its Ctrl-C -- while the simulator keeps the host's Python.
``--host-stdlib`` gives the host's Python back."""

from __future__ import print_function

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
RUN_TIMEOUT = 90.0
PY2 = sys.version_info[0] == 2

sys.path.insert(0, os.path.join(ROOT, "tools"))
from efisim import bitsenv  # noqa: E402

import processes  # noqa: E402


def run_efirun(args, env=None, timeout=RUN_TIMEOUT):
    """(exit status, stdout, stderr) of ``python tools/efirun.py ARGS`` under the BITS model."""
    full_env = dict(os.environ)
    full_env["BITSNET_SIM_PYTHON"] = "bits"
    full_env.pop("PYTHONPATH", None)
    full_env.update(env or {})
    status, out, err = processes.run_efirun(args, timeout, env=full_env)
    return status, out.decode("utf-8", "replace"), err


FUTURE = "from __future__ import print_function\n"


def run_code(code, *options):
    status, out, err = run_efirun(list(options) + ["-c", FUTURE + textwrap.dedent(code)])
    assert status == 0, err
    return out.splitlines()


# Prints "NAME ok" or "NAME ImportError: message" for each module name in argv.
IMPORTS = """
    import sys
    for name in sys.argv[1:]:
        try:
            __import__(name)
            print(name + " ok")
        except ImportError as e:
            print(name + " ImportError: " + str(e))
"""


def import_results(names, *options):
    status, out, err = run_efirun(list(options) + ["-c", textwrap.dedent(IMPORTS)] + list(names))
    assert status == 0, err
    return dict(line.split(" ", 1) for line in out.splitlines())


# ----------------------------------------------------------------------------- errno (section 3)
def test_errno_has_bits_nine_names_with_grub_values():
    lines = run_code("""
        import errno
        print(sorted(n for n in dir(errno) if not n.startswith("__")))
        print(sorted((k, v) for k, v in vars(errno).items() if k.startswith("E")))
        print(sorted(errno.errorcode.items()))
    """, "--no-install")
    assert lines[0] == repr(["EDOM", "EINTR", "EINVAL", "EISDIR", "ENOENT", "ENOMEM", "ENOTDIR", "ENXIO", "ERANGE",
                             "errorcode"])
    assert lines[1] == repr([("EDOM", 18), ("EINTR", 28), ("EINVAL", 10), ("EISDIR", 4), ("ENOENT", 5),
                             ("ENOMEM", 3), ("ENOTDIR", 4), ("ENXIO", 12), ("ERANGE", 11)])
    assert lines[2] == repr([(3, "ENOMEM"), (4, "EISDIR"), (5, "ENOENT"), (10, "EINVAL"), (11, "ERANGE"),
                             (12, "ENXIO"), (18, "EDOM"), (28, "EINTR")])


@pytest.mark.skipif(not PY2, reason="Python 3's socket.py has no EINTR/EBADF")
def test_stdlib_socket_sees_bits_errno_after_install():
    # bitsnet.install() re-imports socket.py; in BITS it reads EINTR 28 and falls back to EBADF 9.
    assert run_code("import socket; print(socket.EINTR, socket.EBADF, socket._socket.__name__)") == \
        ["28 9 bitsnet._socket"]


# ----------------------------------------------------------------------------- modules (section 2)
def test_modules_bits_lacks_cannot_be_imported():
    missing = ["json", "runpy", "threading", "thread", "subprocess", "email", "datetime", "ssl", "hmac",
               "queue" if not PY2 else "Queue", "ctypes.util", "logging.handlers", "typing", "efisim", "tests"]
    if PY2:
        missing += ["io", "_thread"]
    else:
        missing += ["io", "_thread", "StringIO", "urllib2", "httplib"]  # StringIO/cStringIO became io: absent
    results = import_results(missing, "--no-install")
    for name in missing:
        assert results[name].startswith("ImportError: No module named "), (name, results[name])
    assert results["json"] == "ImportError: No module named json"
    assert results["threading"].startswith("ImportError: No module named ")  # thread, as BITS says


def test_modules_bits_has_can_be_imported():
    present = ["socket", "select", "struct", "ctypes", "hashlib", "collections", "binascii", "zlib", "base64",
               "argparse", "traceback", "uuid", "efi", "_efi", "bitsnet", "bitsnet.selftest", "encodings.utf_8"]
    if PY2:
        present += ["httplib", "urllib2", "urlparse", "SocketServer", "BaseHTTPServer", "StringIO", "cStringIO",
                    "dummy_threading"]
    else:
        present += ["http.client", "urllib.request", "urllib.parse", "socketserver", "http.server"]
    results = import_results(present)
    assert dict((n, results[n]) for n in present) == dict((n, "ok") for n in present)


def test_bits_modules_the_simulator_lacks_say_so():
    results = import_results(["bits", "acpi"], "--no-install")
    assert results["bits"] == "ImportError: No module named bits (BITS has it in /boot/python; " \
                              "the simulator does not)"


def test_no_idna_codec():
    # BITS's encodings/idna.pyc needs stringprep, which lib.zip lacks; punycode works.
    lines = run_code("""
        import codecs
        for name in ("idna", "punycode"):
            try:
                print(name, codecs.encode(u"b\\xfccher", name))
            except LookupError as e:
                print(name, "LookupError", "unknown encoding: idna" in str(e))
    """, "--no-install")
    assert lines == ["idna LookupError True", "punycode %s" % (b"bcher-kva",)]


def test_from_package_import_of_a_missing_submodule_fails():
    status, out, err = run_efirun(["--no-install", "-c", "import ctypes\nfrom ctypes import util"])
    assert status == 1 and "ImportError: cannot import name util" in err, err


# ----------------------------------------------------------------------------- os, time, random (sections 4-6)
def test_os_is_bits_stub():
    lines = run_code_env("""
        import os
        print(sorted(n for n in dir(os) if not n.startswith("_")))
        print(hasattr(os, "urandom"), hasattr(os, "strerror"), hasattr(os, "getpid"), hasattr(os, "linesep"))
        print(os.environ["BITSENV_PROBE"], os.environ.get("BITSENV_NONE", "dflt"), "BITSENV_PROBE" in os.environ,
              "BITSENV_PROBE" in os.environ.keys(), ("BITSENV_PROBE", "x1") in os.environ.items())
        try:
            list(os.environ)
            print("iterable")
        except TypeError:
            print("TypeError")
        print(os.getcwd(), os.path.abspath("x"), hasattr(os.path, "samefile"), os.stat("/").st_mtime)
    """, {"BITSENV_PROBE": "x1"})
    public = ["altsep", "curdir", "defpath", "devnull", "environ", "error", "extsep", "getcwd", "getcwdu", "getenv",
              "listdir", "lstat", "name", "pardir", "path", "pathsep", "putenv", "sep", "stat", "stat_result", "sys",
              "unsetenv"]
    assert lines[0] == repr(public)
    assert lines[1] == "False False False False"
    assert lines[2] == "x1 dflt True True True"
    assert lines[3] == "TypeError"
    assert lines[4] == "/ /x False 0"


def run_code_env(code, env):
    status, out, err = run_efirun(["--no-install", "-c", FUTURE + textwrap.dedent(code)], env=env)
    assert status == 0, err
    return out.splitlines()


def test_os_environ_reads_the_environment():
    assert run_code_env("import os; print(os.environ['BITSENV_X'])", {"BITSENV_X": "y"}) == ["y"]


def test_time_is_bits_millisecond_clock():
    lines = run_code("""
        import time
        print(sorted(n for n in dir(time) if not n.startswith("_")))
        print(hasattr(time, "monotonic"), hasattr(time, "clock"), hasattr(time, "strftime"))
        t0 = time.time()
        print(1e7 < t0 < 1.3e7, t0 == round(t0, 3))
        time.sleep(0.05)
        print(0.049 <= time.time() - t0 < 0.5)
        class C(object):
            now = time.localtime
        try:
            C().now()
            print("function")
        except TypeError:
            print("method")  # a Python function, as in BITS: logging's asctime breaks the same way
        print(tuple(time.gmtime(0))[:6], time.localtime().tm_isdst)
    """, "--no-install")
    assert lines[0] == repr(["gmtime", "localtime", "sleep", "struct_time", "time"])
    assert lines[1:5] == ["False False False", "True True", "True", "method"]
    assert lines[5] == "(1970, 1, 1, 0, 0, 0) -1"


def test_random_signal_tempfile_are_empty():
    lines = run_code("""
        import random, signal, tempfile
        for m in (random, signal, tempfile):
            print(sorted(n for n in dir(m) if not n.startswith("__")))
        try:
            random.random()
        except AttributeError:
            print("AttributeError")
        import uuid
        for make in (uuid.uuid4, uuid.uuid1):
            try:
                make()
            except AttributeError:
                print("AttributeError")
        print(uuid.UUID("5b446ed1-e30b-4faa-871a-3654eca36080").version)
    """, "--no-install")
    assert lines == ["[]", "[]", "[]", "AttributeError", "AttributeError", "AttributeError", "4"]


# ----------------------------------------------------------------------------- sys, stdout, Ctrl-C (sections 1, 8)
def test_sys_path_argv_and_stdout(tmpdir):
    script = tmpdir.join("show.py")
    script.write(FUTURE + textwrap.dedent("""
        import sys
        print(sys.argv)
        print("" in sys.path, %r in sys.path)
        print([hasattr(s, a) for s in (sys.stdout, sys.stderr) for a in ("write", "flush", "fileno", "encoding",
                                                                        "isatty")])
        sys.stderr.write("to stderr\\n")
    """ % str(tmpdir)))
    status, out, err = run_efirun(["--no-install", str(script), "a"])
    assert status == 0, err
    assert out.splitlines() == [repr([str(script), "a"]), "False False",
                                repr([True, True, False, False, False] * 2)]
    assert "to stderr" in err


# Prints whether the site builtins exist, then tries to open argv[1] for writing in four modes,
# then reads argv[2].
SITE_AND_OPEN = """
    import sys
    try:
        import builtins
    except ImportError:
        import __builtin__ as builtins
    print([hasattr(builtins, n) for n in ("exit", "quit", "copyright", "credits", "license")])
    for mode in ("w", "a", "r+", "wb"):
        try:
            open(sys.argv[1], mode)
            print(mode + " opened")
        except IOError as e:
            print(mode + " " + str(e))
    print(len(open(sys.argv[2]).read()) > 0)
"""


def test_no_site_builtins_and_read_only_open(tmpdir):
    target = str(tmpdir.join("written.txt"))
    status, out, err = run_efirun(["--no-install", "-c", textwrap.dedent(SITE_AND_OPEN), target, EFIRUN])
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == repr([False] * 5)
    assert lines[1:5] == ["%s [Errno 0] Error: %r" % (mode, target) for mode in ("w", "a", "r+", "wb")]
    assert lines[5] == "True" and not os.path.exists(target)


def test_a_script_cannot_import_its_siblings(tmpdir):
    tmpdir.join("sibling_mod.py").write("X = 1\n")
    script = tmpdir.join("main.py")
    script.write("import sibling_mod\n")
    status, out, err = run_efirun(["--no-install", str(script)])
    assert status == 1 and "No module named sibling_mod" in err, err


def test_pythonpath_modules_play_boot_python(tmpdir):
    tmpdir.join("helper_mod.py").write("import os, errno\nX = (hasattr(os, 'urandom'), errno.EINTR)\n")
    status, out, err = run_efirun(["--no-install", "-c", "import helper_mod; print(helper_mod.X)"],
                                  env={"PYTHONPATH": str(tmpdir)})
    assert (status, out.strip()) == (0, "(False, 28)"), err


def test_ctrl_c_raises_bits_key_error():
    code = "import sys\nsys.stdout.write('ready\\n')\nsys.stdout.flush()\nwhile True:\n    pass\n"
    env = dict(os.environ, BITSNET_SIM_PYTHON="bits")
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen([sys.executable, EFIRUN, "--no-install", "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = processes.communicate(proc, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.decode("utf-8", "replace")
    assert proc.returncode == 1, text
    assert ("KeyError: (0, u'\\x03', 0L)" if PY2 else "KeyError: (0, '\\x03', 0)") in text, text


# ----------------------------------------------------------------------------- the host side
def test_the_model_is_the_default():
    status, out, err = run_efirun(["--no-install", "-c", "import errno; print(hasattr(errno, 'EAGAIN'))"],
                                  env={"BITSNET_SIM_PYTHON": ""})
    assert (status, out.strip()) == (0, "False"), err
    status, out, err = run_efirun(["--no-install", "-c", "import errno; print(hasattr(errno, 'EAGAIN'))"],
                                  env={"BITSNET_SIM_PYTHON": "host"})
    assert (status, out.strip()) == (0, "True"), err


def test_host_stdlib_restores_the_host():
    lines = run_code("""
        import errno, os, sys, time, json, threading
        print(hasattr(errno, "EAGAIN"), hasattr(os, "urandom"), hasattr(time, "strftime"),
              hasattr(sys.stdout, "fileno"))
    """, "--host-stdlib", "--no-install")
    assert lines == ["True True True True"]


def test_bitsnet_download_runs_under_the_model():
    # A TCP download through bitsnet against the lab's HTTP server: the simulator (threads, the
    # host's socket for the lab) works while the program has BITS's environment.
    lines = run_code("""
        import hashlib, os, socket
        host, port = os.environ["BITSNET_LAB"].split(":")
        conn = socket.create_connection((host, int(port)), 10)
        conn.sendall(b"GET /bytes/100000 HTTP/1.0\\r\\nHost: lab\\r\\n\\r\\n")
        reply = b""
        while True:
            data = conn.recv(65536)
            if not data:
                break
            reply += data
        conn.close()
        head, body = reply.split(b"\\r\\n\\r\\n", 1)
        print(head.split(b"\\r\\n")[0].decode("ascii"), len(body), type(conn).__module__, socket._socket.__name__)
    """, "--lab")
    assert lines[-1].split(" ", 1)[1] == "200 OK 100000 socket bitsnet._socket", lines


# ----------------------------------------------------------------------------- the module list
def test_module_list_names():
    sections = bitsenv.read_module_list()
    assert len(sections["builtin"]) == 39 and "errno" in sections["builtin"]
    assert "socket" in sections["libzip"] and "json" not in sections["libzip"]
    assert "random" in sections["boot"] and "efi" in sections["boot"]
    py3 = bitsenv.allowed_names(sections, py2=False)
    assert "http.client" in py3 and "httplib" not in py3 and "io" not in py3 and "threading" not in py3
