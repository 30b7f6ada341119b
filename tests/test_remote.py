"""``python URL ARGS`` at the BITS prompt (bitsnet.remote, bitsnet.zipmemory, bitsnet.launch): a
program fetched over the simulated firmware from a real HTTP(S) server on loopback, run as
``__main__``; a zip with ``__main__.py`` imported from memory; every fetch failure one line.
The zip reader is checked on the host against archives Python's own ``zipfile`` writes."""

from __future__ import print_function

import io
import os
import subprocess
import sys
import threading
import zipfile
import zlib

import pytest

import conftest
import peers
from bitsnet import remote, zipmemory

ROOT = conftest.ROOT
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")

PROGRAM = b"""\
import sys
print("prog name=%s argv=%s" % (__name__, "|".join(sys.argv)))
def deeper():
    raise ValueError("raised in a fetched program")
if sys.argv[1:] == ["raise"]:
    deeper()
sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
"""

# What the command prints, one line per URL, between markers the test finds in stdout.
DRIVER = """\
import sys
from bitsnet import launch
for spec in sys.argv[1:]:
    args = spec.split(" ")
    sys.stdout.write("@@ %s\\n" % spec.rpartition("/")[2])
    sys.stdout.flush()
    ok = launch.python_command(["python"] + args)
    sys.stdout.write("@@ ok=%s\\n" % ok)
"""


def make_zip(files, compression=zipfile.ZIP_DEFLATED, prefix=b""):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return prefix + buffer.getvalue()


APP = {"__main__.py": b"import sys, helper, tools.sub\nprint('zip main %s %s %s' % (helper.X, tools.sub.Y, "
                      b"'|'.join(sys.argv)))\nsys.exit(helper.X)\n",
       "helper.py": b"X = 4\n", "tools/__init__.py": b"", "tools/sub.py": b"Y = 'sub'\n"}


def run_driver(specs, env=None):
    """tools/efirun.py with DRIVER (BITS's Python model); (status, {"name ARGS": (ok, text)}, out)."""
    command = [sys.executable, EFIRUN] + conftest.STATION_ARGS + ["-c", DRIVER] + list(specs)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT,
                            universal_newlines=True, env=dict(os.environ, **(env or {})))
    timer = threading.Timer(120, proc.kill)
    timer.start()
    try:
        out = proc.communicate()[0]
    finally:
        timer.cancel()
    results, current, lines = {}, None, []
    for line in out.splitlines():
        if line.startswith("@@ ok="):
            results[current] = (line == "@@ ok=True", "\n".join(lines))
        elif line.startswith("@@ "):
            current, lines = line[3:], []
        elif not line.startswith("bitsnet: DHCP"):  # the first fetch brings the network up
            lines.append(line)
    return proc.returncode, results, out


def test_programs_and_zips_from_a_url_run_as_main(tmpdir):
    files = {"prog.py": PROGRAM, "app.zip": make_zip(APP), "stored.zip": make_zip(APP, zipfile.ZIP_STORED, b"#!x\n"),
             "nomain.zip": make_zip({"helper.py": b"X = 1\n"}), "junk.zip": b"PK\x03\x04 not really a zip"}
    with peers.HttpPeer(tmpdir, files) as peer:
        status, results, out = run_driver([peer.url("prog.py") + " a b", peer.url("prog.py") + " 3",
                                           peer.url("prog.py") + " raise", peer.url("app.zip") + " z",
                                           peer.url("stored.zip"), peer.url("nomain.zip"), peer.url("junk.zip"),
                                           peer.url("absent.py")])
    assert status == 0, out
    ok, text = results["prog.py a b"]
    assert ok and "prog name=__main__ argv=%s|a|b" % peer.url("prog.py") in text, out
    assert results["app.zip z"][0] is False and "zip main 4 sub %s|z" % peer.url("app.zip") in results["app.zip z"][1]
    assert "python: exit status 4" in results["app.zip z"][1], out
    assert "zip main 4 sub %s" % peer.url("stored.zip") in results["stored.zip"][1], out
    assert results["nomain.zip"] == (False, "python: can't fetch %s: can't find '__main__' module in the archive"
                                     % peer.url("nomain.zip")), out
    assert results["junk.zip"][0] is False and results["junk.zip"][1].startswith(
        "python: can't fetch %s: not a zip archive" % peer.url("junk.zip")), out
    assert results["absent.py"] == (False, "python: can't fetch %s: HTTP 404 File not found" % peer.url("absent.py"))


def test_exit_status_and_tracebacks_with_the_programs_lines(tmpdir):
    with peers.HttpPeer(tmpdir, {"prog.py": PROGRAM}) as peer:
        status, results, out = run_driver([peer.url("prog.py") + " 3", peer.url("prog.py") + " raise"])
    assert status == 0, out
    assert results["prog.py 3"] == (False, "prog name=__main__ argv=%s|3\npython: exit status 3" % peer.url("prog.py"))
    assert results["prog.py raise"][0] is False
    text = results["prog.py raise"][1]
    assert 'File "%s", line 4, in deeper' % peer.url("prog.py") in text, out
    assert 'raise ValueError("raised in a fetched program")' in text, out  # the line itself, via linecache
    assert "ValueError: raised in a fetched program" in text and "remote.py" not in text, out
    assert text.endswith("\npython: exit status 1"), out


def test_fetch_errors_are_one_line_and_false():
    refused = "http://127.0.0.1:%d/x.py" % peers.closed_port()
    silent = peers.OneShotPeer(lambda conn: conn.recv(100))  # accepts, reads, then closes without a reply
    try:
        status, results, out = run_driver([refused, "http://127.0.0.1:%d/y.py" % silent.port])
    finally:
        silent.join()
    assert status == 0, out
    assert results["x.py"][0] is False and "\n" not in results["x.py"][1], out
    assert results["x.py"][1].startswith("python: can't fetch %s: " % refused), out
    assert "refused" in results["x.py"][1].lower(), out
    assert results["y.py"][0] is False and "\n" not in results["y.py"][1], out
    assert "Traceback" not in out, out


@pytest.mark.parametrize("cafile,expected", [("ca.pem", "prog name=__main__"),
                                             ("ca2.pem", "CERTIFICATE_VERIFY_FAILED")])
def test_https_is_verified_with_bitsnet_ssl_default_cas(tmpdir, cafile, expected):
    test_ssl = pytest.importorskip("test_ssl")
    if not test_ssl.ENGINE:
        pytest.skip(test_ssl.NO_ENGINE or "no TLS engine")
    if not test_ssl.OPENSSL:
        pytest.skip("the openssl command is needed to make the test CA")
    pki = test_ssl.make_pki(str(tmpdir.mkdir("pki")))
    driver = DRIVER.replace("from bitsnet import launch", "from bitsnet import launch, ssl\n"
                            "ssl.DEFAULT_CAFILES[:] = [%r]" % os.path.join(pki, cafile))
    with test_ssl.HttpsPeer(pki, "good", {"prog.py": PROGRAM}) as peer:
        url = peer.url("prog.py")
        command = [sys.executable, EFIRUN] + conftest.STATION_ARGS + ["-c", driver, url + " q"]
        out = subprocess.check_output(command, stderr=subprocess.STDOUT, cwd=ROOT, universal_newlines=True)
    assert expected in out, out
    if cafile == "ca2.pem":
        assert "python: can't fetch %s: " % url in out and "ok=False" in out and "Traceback" not in out, out


# ----------------------------------------------------------------------------- the zip reader, on the host
def test_zip_reader_matches_zipfile_and_refuses_what_it_cannot_read():
    files = {"a.py": b"x" * 5000, "d/b.txt": b"hello", "empty": b""}
    for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        archive = zipmemory.ZipArchive(make_zip(files, compression, prefix=b"#!/usr/bin/env python\n"), "t.zip")
        assert archive.names() == sorted(files)
        assert dict((name, archive.read(name)) for name in files) == files
    data = bytearray(make_zip({"a.py": b"abc" * 100}, zipfile.ZIP_STORED))
    data[data.find(b"abcabc")] ^= 1
    with pytest.raises(ValueError) as info:
        zipmemory.ZipArchive(bytes(data), "t.zip").read("a.py")
    assert str(info.value) == "t.zip: a.py: CRC or size mismatch"
    with pytest.raises(ValueError) as info:
        zipmemory.ZipArchive(b"PK\x03\x04" + b"\0" * 40, "u.zip")
    assert "not a zip archive" in str(info.value)
    bzip = make_zip({"a.py": b"x"}, zipfile.ZIP_STORED)
    central = bzip.find(zipmemory.CENTRAL_SIGNATURE)
    odd = bzip[:central + 10] + b"\x0c\x00" + bzip[central + 12:]  # method 12 (bzip2) in the directory
    with pytest.raises(ValueError) as info:
        zipmemory.ZipArchive(odd, "b.zip").read("a.py")
    assert "compression method 12 is not supported" in str(info.value)
    assert zlib.crc32(b"") == 0 and zipmemory.is_zip(bzip) and not zipmemory.is_zip(b"print(1)\n")


def test_memory_importer_loads_packages_and_takes_them_out_again():
    archive = zipmemory.ZipArchive(make_zip({"zm_top.py": b"V = 1\n", "zm_pkg/__init__.py": b"P = 2\n",
                                             "zm_pkg/inner.py": b"from zm_pkg import P\nI = P + 1\n"}), "mem.zip")
    importer = zipmemory.MemoryImporter(archive).install()
    try:
        import zm_top  # type: ignore[import-not-found]
        import zm_pkg.inner  # type: ignore[import-not-found]
        assert (zm_top.V, zm_pkg.inner.I) == (1, 3)
        assert zm_pkg.inner.__file__ == "mem.zip/zm_pkg/inner.py" and zm_pkg.__path__ == ["mem.zip/zm_pkg"]
        assert importer.get_source("zm_top").strip() in ("V = 1", b"V = 1")
    finally:
        importer.uninstall()
    assert importer not in sys.meta_path
    assert not [name for name in sys.modules if name.startswith(("zm_top", "zm_pkg"))]


def test_fetch_refuses_other_schemes():
    with pytest.raises(remote.FetchError) as info:
        remote.fetch("ftp://lab/x.py")
    assert str(info.value) == "ftp://lab/x.py: not an http:// or https:// URL"
