"""What ``pip install .`` makes of the repository, built offline: the sdist, the wheel built from
that sdist, and the package installed from the wheel. Also: the version is written once, and
the package carries no knowledge of the test harness.

The builds run in a copy of the tree (the Python 3 and 2.7 lanes of tools/check run side by
side; setuptools writes build/ and *.egg-info where it builds). The interpreter builds with its
own setuptools and wheel if it has both (.venv/py27 does); otherwise with a throwaway
environment that virtualenv seeds from the wheels it bundles (.venv/py3). No index is asked:
``--no-index --no-build-isolation --no-deps``, and ``--isolated`` keeps the machine's pip
configuration out.
"""

from __future__ import print_function

import glob
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PROBE = "import setuptools, wheel, pip"  # setuptools first: it must load before distutils


def _read(path):
    with io.open(path, "rb") as f:
        return f.read()


def _version():
    """bitsnet.__version__ as written in bitsnet/__init__.py (the one place)."""
    text = _read(os.path.join(ROOT, "bitsnet", "__init__.py")).decode("utf-8")
    found = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    assert len(found) == 1, found
    return found[0]


def _run(command, cwd):
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.communicate()[0].decode("utf-8", "replace")
    return proc.returncode, out


def _builder(work):
    """A Python with pip, setuptools and wheel, or skip."""
    if _run([sys.executable, "-c", _PROBE], work)[0] == 0:
        return sys.executable
    try:
        import virtualenv  # noqa: F401
    except ImportError:
        pytest.skip("no setuptools+wheel here and no virtualenv to make an environment with them")
    env = os.path.join(work, "env")
    status, out = _run([sys.executable, "-m", "virtualenv", "--no-download", "--no-periodic-update", "-q", env],
                       work)
    python = os.path.join(env, "bin", "python")
    if status != 0 or _run([python, "-c", _PROBE], work)[0] != 0:
        pytest.skip("virtualenv could not make a build environment offline:\n" + out)
    return python


@pytest.fixture(scope="module")
def built():
    """{"sdist": path, "wheel": path, "target": the directory the wheel was installed into}."""
    work = tempfile.mkdtemp(prefix="bitsnet-packaging-")
    try:
        python = _builder(work)
        source = os.path.join(work, "src")
        shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", ".venv*", ".cache", "build", "dist", "*.egg-info", "__pycache__", "*.pyc"))
        dist = os.path.join(work, "dist")
        status, out = _run([python, "-c", "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))",
                            dist], source)
        assert status == 0, out
        sdist = os.path.join(dist, out.strip().splitlines()[-1])
        pip = [python, "-m", "pip", "--isolated", "--disable-pip-version-check"]
        status, out = _run(pip + ["wheel", "--no-build-isolation", "--no-deps", "--no-index", "-w", dist, sdist], work)
        assert status == 0, out
        wheels = glob.glob(os.path.join(dist, "*.whl"))
        assert len(wheels) == 1, (wheels, out)
        target = os.path.join(work, "installed")
        status, out = _run(pip + ["install", "--no-deps", "--no-index", "--target", target, wheels[0]], work)
        assert status == 0, out
        yield {"sdist": sdist, "wheel": wheels[0], "target": target}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _package_files():
    return sorted("bitsnet/" + os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "bitsnet", "*.py")))


def test_the_wheel_holds_the_package_the_trampoline_and_the_license_only(built):
    version = _version()
    assert os.path.basename(built["wheel"]) == "bitsnet-%s-py2.py3-none-any.whl" % version
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        package = sorted(n for n in names if n.startswith("bitsnet/"))
        assert package == sorted(_package_files() + ["bitsnet/trampoline.c"])
        assert wheel.read("bitsnet/trampoline.c") == _read(os.path.join(ROOT, "trampoline.c"))
        info = "bitsnet-%s.dist-info/" % version
        others = [n for n in names if not n.startswith("bitsnet/")]
        assert others and all(n.startswith(info) for n in others), others  # no tests/, tools/, setup.py
        licenses = [n for n in others if os.path.basename(n) == "LICENSE"]
        assert len(licenses) == 1 and wheel.read(licenses[0]) == _read(os.path.join(ROOT, "LICENSE"))
        metadata = wheel.read(info + "METADATA").decode("utf-8")
        assert "\nVersion: %s\n" % version in metadata
        assert "\nLicense: BSD-3-Clause\n" in metadata
        assert "Requires-Dist" not in metadata  # BITS has no pip: bitsnet depends on nothing
        assert wheel.read(info + "top_level.txt").decode("utf-8").split() == ["bitsnet"]


def test_the_sdist_holds_what_building_the_wheel_needs_and_no_tests(built):
    with tarfile.open(built["sdist"]) as sdist:
        names = [n.split("/", 1)[1] for n in sdist.getnames() if "/" in n]
    for needed in ("LICENSE", "README.rst", "pyproject.toml", "setup.cfg", "setup.py", "trampoline.c"):
        assert needed in names
    assert [n for n in names if n.startswith("bitsnet/") and n.endswith(".py")] != []
    assert not [n for n in names if n.startswith(("tests/", "tools/", "docs/", "bits/"))]


def test_the_installed_package_imports_and_tells_its_version(built):
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import bitsnet; "
            "print(bitsnet.__version__); print(os.path.dirname(os.path.abspath(bitsnet.__file__)))")
    status, out = _run([sys.executable, "-c", code, built["target"]], os.path.dirname(built["target"]))
    assert status == 0, out
    version, where = out.strip().splitlines()[-2:]
    assert version == _version()
    assert where == os.path.join(os.path.abspath(built["target"]), "bitsnet")
    assert os.path.isfile(os.path.join(where, "trampoline.c"))


def test_the_version_is_written_once():
    version = _version()
    cfg = _read(os.path.join(ROOT, "setup.cfg")).decode("utf-8")
    assert re.search(r"^version = attr: bitsnet\.__version__$", cfg, re.M)
    for name in ("setup.cfg", "setup.py", "pyproject.toml", "MANIFEST.in"):
        assert version not in _read(os.path.join(ROOT, name)).decode("utf-8"), name


def test_the_package_names_no_test_module():
    """install() keeps the test runner and the simulator because they declare themselves
    (``__bitsnet_keep__``), not because bitsnet knows them."""
    source = _read(os.path.join(ROOT, "bitsnet", "__init__.py")).decode("utf-8")
    for name in ("pytest", "pluggy", "efisim"):
        assert name not in source
    import bitsnet
    import efisim  # noqa: F401  (conftest imported it already)
    for name in ("efisim", "efisim.machine", "pytest", "_pytest.main", "pluggy", "bitsnet.tcp", "efi"):
        assert bitsnet._kept(name), name
    for name in ("http.client", "socketserver", "SocketServer", "no_such_module"):
        assert not bitsnet._kept(name), name
