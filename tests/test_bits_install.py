"""tools/bits_install.py: install into and uninstall from fixture BITS trees (a source tree and an
unpacked image, tests/fixtures/bits_src and bits_image), byte for byte, idempotently, dry-run."""

from __future__ import print_function

import io
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
BOOT_PYTHON = os.path.join(TOOLS, "efisim", "boot_python")
SHIMS = os.path.join(ROOT, "bits", "boot", "python")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import bits_install  # noqa: E402

BITS_PYC = b"\x03\xf3\r\nBITS's own compiled _socket"  # stands in for bytecode shipped with BITS
EFI_ENTRY = '    {"_efi", init_efi},'
OUR_ENTRY = '    {"_bitsnet_trampoline", init_bitsnet_trampoline},'
OUR_EXTERN = "extern void init_bitsnet_trampoline(void);"
OUR_SOURCE = "        efi = contrib/python/trampoline.c;"
INIT_LINE = "py 'import bitsnet.launch; bitsnet.launch.register_grub_commands()'"
INIT_INIT = "py 'init.init(); del init'"
REAL_BITS = "/tmp/bits"  # BITS 2079 unpacked (source tree in bits/, image in boot/), when present


# ----------------------------------------------------------------------------- helpers
def tree(kind, tmpdir):
    """A fresh copy of a fixture tree ("bits_src" or "bits_image"); returns its path."""
    path = os.path.join(str(tmpdir), kind)
    shutil.copytree(os.path.join(FIXTURES, kind), path)
    return path


def snapshot(path):
    """{relative path: bytes} of every file under ``path`` (directories show through their files)."""
    files = {}
    for directory, _, names in os.walk(path):
        for name in names:
            full = os.path.join(directory, name)
            files[os.path.relpath(full, path)] = read(full)
    return files


def read(path):
    with io.open(path, "rb") as f:
        return f.read()


def write(path, data):
    with io.open(path, "wb") as f:
        f.write(data)


def text(path):
    return read(path).decode("latin-1")


def run(*args):
    """(exit status, stdout) of bits_install.main(args), in-process."""
    out = io.StringIO() if sys.version_info[0] >= 3 else io.BytesIO()
    try:
        status = bits_install.main(list(args), out=out)
    except SystemExit as exc:
        status = exc.code
    value = out.getvalue()
    return status, value if isinstance(value, str) else value.decode("ascii")


def package_names():
    return sorted(name for name in os.listdir(os.path.join(ROOT, "bitsnet")) if name.endswith(".py"))


# ----------------------------------------------------------------------------- source tree
def test_source_tree_install_then_uninstall_is_byte_identical(tmpdir):
    src = tree("bits_src", tmpdir)
    write(os.path.join(src, "python", "_socket.pyc"), BITS_PYC)
    original = snapshot(src)

    status, out = run(src)
    assert status == 0, out
    python = os.path.join(src, "python")
    # 1. the package: exactly bitsnet's .py files
    assert sorted(os.listdir(os.path.join(python, "bitsnet"))) == package_names()
    for name in package_names():
        assert read(os.path.join(python, "bitsnet", name)) == read(os.path.join(ROOT, "bitsnet", name))
    # 2. entry points replaced, BITS's own kept; 3. BITS's bytecode moved out of the way
    for name in ("_socket.py", "select.py"):
        assert read(os.path.join(python, name)) == read(os.path.join(SHIMS, name))
        assert read(os.path.join(python, name + ".bits-orig")) == original[os.path.join("python", name)]
    assert not os.path.exists(os.path.join(python, "_socket.pyc"))
    assert read(os.path.join(python, "_socket.pyc.bits-orig")) == BITS_PYC
    # 4. trampoline.c built in: copied, declared, in the inittab next to _efi, in the EFI sources
    rc = os.path.join(src, "rc", "python")
    assert read(os.path.join(rc, "trampoline.c")) == read(os.path.join(ROOT, "trampoline.c"))
    config = text(os.path.join(rc, "config.c")).splitlines()
    assert config.count(OUR_EXTERN) == 1 and config.count(OUR_ENTRY) == 1
    assert config.index(OUR_EXTERN) < config.index("struct _inittab _PyImport_Inittab[] = {")
    assert config[config.index(OUR_ENTRY) - 2:config.index(OUR_ENTRY) + 2] == [
        "#ifdef GRUB_MACHINE_EFI", EFI_ENTRY, OUR_ENTRY, "#endif"]
    makefile = text(os.path.join(rc, "Makefile.core.def")).splitlines()
    assert makefile.count(OUR_SOURCE) == 1
    assert makefile[makefile.index(OUR_SOURCE) - 1] == "        efi = contrib/python/efimodule.c;"
    # each edit adds exactly its lines, nothing else
    assert len(config) == len(original[os.path.join("rc", "python", "config.c")].splitlines()) + 2
    assert len(makefile) == len(original[os.path.join("rc", "python", "Makefile.core.def")].splitlines()) + 1
    # 5. python -m at the GRUB prompt: one line right after init.init()
    init_cfg = text(os.path.join(src, "cfg", "init.cfg")).splitlines()
    assert init_cfg[-2:] == [INIT_INIT, INIT_LINE]
    assert len(init_cfg) == len(original[os.path.join("cfg", "init.cfg")].splitlines()) + 1

    status, out = run("--uninstall", src)
    assert status == 0, out
    assert snapshot(src) == original


def test_install_twice_changes_nothing_the_second_time(tmpdir):
    src = tree("bits_src", tmpdir)
    assert run(src)[0] == 0
    installed = snapshot(src)
    status, out = run(src)
    assert status == 0 and out.startswith("nothing to do: bitsnet is installed"), out
    assert snapshot(src) == installed
    status, out = run("--uninstall", src)
    assert status == 0
    status, out = run("--uninstall", src)
    assert status == 0 and out.startswith("nothing to do: bitsnet is not installed"), out


def test_reinstall_removes_stale_bytecode_and_obsolete_modules(tmpdir):
    src = tree("bits_src", tmpdir)
    assert run(src)[0] == 0
    installed = snapshot(src)
    package = os.path.join(src, "python", "bitsnet")
    write(os.path.join(package, "tcp.pyc"), b"old bytecode")
    write(os.path.join(package, "oldmodule.py"), b"# from an older bitsnet\n")
    write(os.path.join(package, "tcp.py"), b"# an older tcp.py\n")
    write(os.path.join(src, "python", "select.pyc"), b"bytecode of the shim")  # GRUB cannot tell it is stale
    status, out = run(src)
    assert status == 0, out
    assert "remove python/bitsnet/tcp.pyc" in out and "remove python/bitsnet/oldmodule.py" in out
    assert "update python/bitsnet/tcp.py" in out and "remove python/select.pyc" in out
    assert snapshot(src) == installed


def test_dry_run_lists_every_change_and_makes_none(tmpdir):
    src = tree("bits_src", tmpdir)
    write(os.path.join(src, "python", "_socket.pyc"), BITS_PYC)
    original = snapshot(src)
    status, out = run("--dry-run", src)
    assert status == 0, out
    assert snapshot(src) == original
    lines = out.splitlines()
    assert lines[0].startswith("would bitsnet install")
    for expected in ["would create python/bitsnet/%s " % name for name in package_names()] + [
            "would move python/_socket.py to python/_socket.py.bits-orig ",
            "would create python/_socket.py ",
            "would move python/_socket.pyc to python/_socket.pyc.bits-orig ",
            "would move python/select.py to python/select.py.bits-orig ",
            "would create rc/python/trampoline.c ",
            "would edit rc/python/config.c:",
            "      + " + OUR_EXTERN,
            "      + " + OUR_ENTRY,
            "would edit rc/python/Makefile.core.def:",
            "      + " + OUR_SOURCE,
            "would edit cfg/init.cfg:",
            "      + " + INIT_LINE]:
        assert [line for line in lines if line.startswith(expected)], (expected, out)

    assert run(src)[0] == 0
    installed = snapshot(src)
    status, out = run("--uninstall", "--dry-run", src)
    assert status == 0 and "would remove python/bitsnet " in out and "      - " + OUR_EXTERN in out, out
    assert "would edit cfg/init.cfg:\n      - " + INIT_LINE in out, out
    assert snapshot(src) == installed


def test_config_c_without_an_efi_entry_gets_its_own_block(tmpdir):
    src = tree("bits_src", tmpdir)
    config = os.path.join(src, "rc", "python", "config.c")
    lines = text(config).splitlines(True)
    at = lines.index(EFI_ENTRY + "\n")
    write(config, "".join(lines[:at - 1] + lines[at + 2:]).encode("latin-1"))  # no #ifdef ... _efi ... #endif
    original = snapshot(src)
    assert run(src)[0] == 0
    lines = text(config).splitlines()
    at = lines.index("#ifdef GRUB_MACHINE_EFI  /* bitsnet */")
    assert lines[at:at + 5] == ["#ifdef GRUB_MACHINE_EFI  /* bitsnet */", OUR_ENTRY, "#endif  /* bitsnet */",
                                "    /* Sentinel */", "    {0, 0}"]
    assert run("--uninstall", src)[0] == 0
    assert snapshot(src) == original


def test_crlf_files_keep_their_line_endings(tmpdir):
    src = tree("bits_src", tmpdir)
    for name in ("config.c", "Makefile.core.def"):
        path = os.path.join(src, "rc", "python", name)
        write(path, read(path).replace(b"\n", b"\r\n"))
    original = snapshot(src)
    assert run(src)[0] == 0
    config = read(os.path.join(src, "rc", "python", "config.c"))
    assert (OUR_ENTRY + "\r\n").encode("ascii") in config and b"\n" not in config.replace(b"\r\n", b"")
    assert run("--uninstall", src)[0] == 0
    assert snapshot(src) == original


# ----------------------------------------------------------------------------- built image
def test_image_install_then_uninstall_is_byte_identical(tmpdir):
    image = tree("bits_image", tmpdir)
    original = snapshot(image)
    status, out = run(image)
    assert status == 0, out
    python = os.path.join(image, "boot", "python")
    assert sorted(os.listdir(os.path.join(python, "bitsnet"))) == package_names()
    for name in ("_socket.py", "select.py"):
        assert read(os.path.join(python, name)) == read(os.path.join(SHIMS, name))
    assert "trampoline" not in out.replace("without _bitsnet_trampoline", "")  # no C module without a rebuild
    assert "_efi event hook" in out and "'python -m MODULE' works" in out
    init_cfg = text(os.path.join(image, "boot", "cfg", "init.cfg")).splitlines()
    assert init_cfg[-2:] == [INIT_INIT, INIT_LINE]
    status, out = run("--uninstall", image)
    assert status == 0, out
    assert snapshot(image) == original


def test_image_shipping_only_bytecode(tmpdir):
    image = tree("bits_image", tmpdir)
    python = os.path.join(image, "boot", "python")
    os.remove(os.path.join(python, "_socket.py"))
    write(os.path.join(python, "_socket.pyc"), BITS_PYC)
    original = snapshot(image)
    assert run(image)[0] == 0
    assert read(os.path.join(python, "_socket.py")) == read(os.path.join(SHIMS, "_socket.py"))
    assert not os.path.exists(os.path.join(python, "_socket.pyc"))
    assert not os.path.exists(os.path.join(python, "_socket.py.bits-orig"))
    assert run(image)[0] == 0  # idempotent here too
    assert run("--uninstall", image)[0] == 0
    assert snapshot(image) == original


def test_installed_image_resolves_socket_to_bitsnet(tmpdir):
    # What BITS does at the boot prompt: /boot/python first on sys.path, then `import socket`.
    image = tree("bits_image", tmpdir)
    python = os.path.join(image, "boot", "python")
    os.remove(os.path.join(python, "efi.py"))  # the fixture's efi is a stub; use the simulator's
    assert run(image)[0] == 0
    code = ("from __future__ import print_function\n"
            "import sys; sys.path[:0] = [%r, %r, %r]\n"
            "import socket, select, _socket, bitsnet\n"
            "print(_socket.__name__, select.__name__, socket._socket.__name__)\n"
            "print(bitsnet.__file__.startswith(%r))\n") % (python, BOOT_PYTHON, TOOLS, python)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(tmpdir))
    out, err = proc.communicate()
    assert proc.returncode == 0, err.decode("utf-8", "replace")
    assert out.decode("ascii").split() == ["bitsnet._socket", "bitsnet.select", "bitsnet._socket", "True"]


@pytest.mark.parametrize("shape", ["init.init not last", "no line end at the end", "no init.init", "crlf"])
def test_init_cfg_line_in_any_shape_and_back_byte_for_byte(tmpdir, shape):
    image = tree("bits_image", tmpdir)
    path = os.path.join(image, "boot", "cfg", "init.cfg")
    data = read(path)
    if shape == "init.init not last":
        data += b"echo after init\n"
    elif shape == "no line end at the end":
        data = data.rstrip(b"\n")
    elif shape == "no init.init":
        data = data.replace(INIT_INIT.encode("ascii") + b"\n", b"")
    else:
        data = data.replace(b"\n", b"\r\n")
    write(path, data)
    original = snapshot(image)
    assert run(image)[0] == 0
    lines = text(path).splitlines()
    assert lines.count(INIT_LINE) == 1
    if shape != "no init.init":
        assert lines[lines.index(INIT_INIT) + 1] == INIT_LINE
    else:
        assert lines[-1] == INIT_LINE
    if shape == "crlf":
        assert b"\n" not in read(path).replace(b"\r\n", b"")
    assert run(image)[0] == 0 and text(path).splitlines().count(INIT_LINE) == 1  # idempotent
    assert run("--uninstall", image)[0] == 0
    assert snapshot(image) == original


def test_image_without_init_cfg_says_how_to_register_python_m(tmpdir):
    image = tree("bits_image", tmpdir)
    shutil.rmtree(os.path.join(image, "boot", "cfg"))
    original = snapshot(image)
    status, out = run(image)
    assert status == 0 and "note: no boot/cfg/init.cfg: 'python -m' needs " + INIT_LINE in out, out
    assert run("--uninstall", image)[0] == 0
    assert snapshot(image) == original


@pytest.mark.skipif(not os.path.isdir(os.path.join(REAL_BITS, "boot", "cfg")), reason="no BITS 2079 in /tmp/bits")
@pytest.mark.parametrize("kind", ["image", "source"])
def test_real_bits_2079_layout(tmpdir, kind):
    # A copy of the real tree's files that install touches (read-only: /tmp/bits is not changed).
    target = str(tmpdir.join(kind))
    if kind == "image":
        shutil.copytree(os.path.join(REAL_BITS, "boot", "cfg"), os.path.join(target, "boot", "cfg"))
        shutil.copytree(os.path.join(REAL_BITS, "boot", "python"), os.path.join(target, "boot", "python"))
        init_cfg = os.path.join(target, "boot", "cfg", "init.cfg")
    else:
        for part in ("cfg", "python", os.path.join("rc", "python")):
            shutil.copytree(os.path.join(REAL_BITS, "bits", part), os.path.join(target, part))
        init_cfg = os.path.join(target, "cfg", "init.cfg")
    original = snapshot(target)
    status, out = run(target)
    assert status == 0, out
    lines = text(init_cfg).splitlines()
    assert lines[-2:] == [INIT_INIT, INIT_LINE]
    assert run("--uninstall", target)[0] == 0
    assert snapshot(target) == original


# ----------------------------------------------------------------------------- refusals
def test_not_a_bits_tree_is_a_usage_error(tmpdir):
    status, out = run(str(tmpdir))
    assert status == 2
    image = tree("bits_image", tmpdir)
    assert run(os.path.join(image, "boot", "python"))[0] == 2


@pytest.mark.parametrize("damage", ["foreign trampoline.c", "no efimodule line", "no inittab", "own _socket.py"])
def test_unexpected_files_stop_it_before_any_change(tmpdir, damage):
    src = tree("bits_src", tmpdir)
    rc = os.path.join(src, "rc", "python")
    if damage == "foreign trampoline.c":
        write(os.path.join(rc, "trampoline.c"), b"/* someone else's */\n")
    elif damage == "no efimodule line":
        makefile = os.path.join(rc, "Makefile.core.def")
        write(makefile, read(makefile).replace(b"efimodule.c", b"othermodule.c"))
    elif damage == "no inittab":
        config = os.path.join(rc, "config.c")
        write(config, read(config).replace(b"_PyImport_Inittab", b"_SomethingElse"))
    else:  # installed, then someone put their own _socket.py over the shim
        assert run(src)[0] == 0
        write(os.path.join(src, "python", "_socket.py"), b"# hand-made\n")
    before = snapshot(src)
    status, out = run(src)
    assert status == 1, out
    assert snapshot(src) == before
