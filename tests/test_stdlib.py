"""The standard library, unchanged, over bitsnet: scripts in tests/stdlib_scripts run "at the
boot prompt" (tools/efirun.py, which calls bitsnet.install()) against real peers on loopback.

The firmware's station address is 127.0.0.2; host peers listen on 127.0.0.1. Each script runs
in a subprocess of this interpreter (sys.executable), so the suite covers 2.7 and 3 alike.
"""

from __future__ import print_function

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import conftest
import peers

try:
    import queue
except ImportError:  # Python 2.7
    import Queue as queue  # type: ignore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
SCRIPTS = os.path.join(ROOT, "tests", "stdlib_scripts")
STATION = conftest.STATION  # the simulated machine's address (efirun --address)
BIG_FILE_BYTES = 20 * 1024 * 1024
BIG_FILE_SECONDS = 30  # the 20 MB download must not crawl: bitsnet Polls aggressively
PY2 = sys.version_info[0] == 2


class EfiRun(object):
    """tools/efirun.py running one script: lines of its stdout arrive through a queue."""

    def __init__(self, script, args=(), options=()):
        command = [sys.executable, EFIRUN] + conftest.STATION_ARGS + list(options) + [os.path.join(SCRIPTS, script)]
        command += [str(a) for a in args]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                     cwd=ROOT, universal_newlines=True, close_fds=True)
        _running.append(self)
        self.lines = queue.Queue()
        self.stdout = []
        self.stderr = []
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            thread = threading.Thread(target=self._pump, args=(stream, sink))
            thread.daemon = True
            thread.start()

    def _pump(self, stream, sink):
        for line in iter(stream.readline, ""):
            sink.append(line)
            if sink is self.stdout:
                self.lines.put(line.rstrip("\n"))
        if sink is self.stdout:
            self.lines.put(None)  # end of output

    def expect(self, prefix, timeout=30):
        """The next stdout line starting with ``prefix`` (its remaining words)."""
        deadline = time.time() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                line = None
            if line is None:
                self.kill()
                pytest.fail("no %r line from %s; stdout:\n%s\nstderr:\n%s" % (
                    prefix, self.proc.args if hasattr(self.proc, "args") else "efirun",
                    "".join(self.stdout), "".join(self.stderr)))
            if line.startswith(prefix):
                return line[len(prefix):].split()

    def finish(self, timeout=30):
        """Wait for the exit; assert it was clean; return stderr."""
        deadline = time.time() + timeout
        while self.proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        if self.proc.poll() is None:
            self.kill()
            pytest.fail("efirun did not exit within %s s; stderr:\n%s" % (timeout, "".join(self.stderr)))
        time.sleep(0.05)  # let the pump threads drain
        stderr = "".join(self.stderr)
        assert self.proc.returncode == 0, "exit %s; stdout:\n%s\nstderr:\n%s" % (
            self.proc.returncode, "".join(self.stdout), stderr)
        assert "firmware faults" not in stderr, stderr
        return stderr

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_running = []  # type: list   # EfiRun objects: killed after each test, whatever happened


@pytest.fixture(autouse=True)
def _kill_leftover_runs():
    yield
    while _running:
        _running.pop().kill()


def free_port():
    s = socket.socket()
    s.bind((peers.HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def http_dir(tmpdir_factory):
    """`python3 -m http.server` on the host, serving a 20 MB file and a small one."""
    root = tmpdir_factory.mktemp("www")
    big = peers.pattern(BIG_FILE_BYTES, seed=7)
    small = peers.pattern(5000, seed=8)
    root.join("big.bin").write(big, "wb")
    root.join("small.bin").write(small, "wb")
    port = free_port()
    proc = subprocess.Popen(["python3", "-m", "http.server", str(port), "--bind", peers.HOST,
                             "--directory", str(root)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection((peers.HOST, port), timeout=1).close()
            break
        except socket.error:
            if time.time() > deadline:
                proc.kill()
                pytest.fail("python3 -m http.server did not start")
            time.sleep(0.05)
    yield {"port": port, "big": hashlib.sha256(big).hexdigest(), "small": hashlib.sha256(small).hexdigest()}
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("options", [
    ["--firmware", "edk2"],
    ["--firmware", "edk2-2015"],
    ["--no-trampoline"],  # a BITS without bitsnet's trampoline: BITS's own _efi event hook
    ["--faults", "rx_piece=700,tx_fail=2"],
], ids=["edk2", "edk2-2015", "efi-hook", "faults"])
def test_urlopen_small_file(http_dir, options):
    run = EfiRun("fetch_url.py", ["http://%s:%d/small.bin" % (peers.HOST, http_dir["port"])], options)
    digest, size, _ = run.expect("sha256 ")
    run.finish()
    assert (digest, int(size)) == (http_dir["small"], 5000)


@pytest.mark.skipif(not PY2, reason="urllib.urlopen is Python 2's (3.x: urllib.request, above)")
def test_python2_urllib_urlopen_in_bits(http_dir):
    # URLopener.__init__ keeps os.unlink, which BITS's os (and the simulator's model of it) lacks.
    run = EfiRun("urllib_open.py", ["http://%s:%d/small.bin" % (peers.HOST, http_dir["port"])])
    digest, size = run.expect("sha256 ")
    run.finish()
    assert (digest, int(size)) == (http_dir["small"], 5000)


def test_urlopen_20mb_download_checksum_and_speed(http_dir):
    run = EfiRun("fetch_url.py", ["http://%s:%d/big.bin" % (peers.HOST, http_dir["port"])])
    digest, size, seconds = run.expect("sha256 ", timeout=BIG_FILE_SECONDS + 15)
    run.finish()
    assert (digest, int(size)) == (http_dir["big"], BIG_FILE_BYTES)
    assert float(seconds) < BIG_FILE_SECONDS
    print("20 MB in %s s" % seconds)


def curl(*args):
    return subprocess.check_output(["curl", "-sS", "--max-time", "20"] + list(args))


@pytest.mark.parametrize("firmware", ["edk2", "edk2-2015"])
def test_http_server_in_firmware_answers_curl_post_and_get(firmware):
    run = EfiRun("http_server.py", [2], ["--firmware", firmware])
    port = int(run.expect("READY ")[0])
    url = "http://%s:%d/echo" % (STATION, port)
    assert curl("-d", "payload-123", url) == b"/echo 321-daolyap"
    assert curl(url) == b"hello from the firmware\n"
    run.expect("DONE")
    run.finish()


def test_socketserver_echo_in_firmware():
    run = EfiRun("socketserver_echo.py", [2])
    port = int(run.expect("READY ")[0])
    for n in range(2):
        client = socket.create_connection((STATION, port), timeout=10)
        f = client.makefile("rwb")
        for line in (b"hello\n", b"second line %d\n" % n):
            f.write(line)
            f.flush()
            assert f.readline() == line.upper()
        f.close()
        client.close()
    run.expect("DONE")
    run.finish()


def test_select_chat_server_with_ten_host_clients():
    clients_count = 10
    run = EfiRun("chat_server.py", [clients_count])
    port = int(run.expect("READY ")[0])
    clients = [socket.create_connection((STATION, port), timeout=15) for _ in range(clients_count)]
    files = [c.makefile("rb") for c in clients]
    numbers = [int(f.readline().split()[1]) for f in files]
    assert sorted(numbers) == list(range(clients_count))
    for number, client in zip(numbers, clients):
        client.sendall(("hi from %d\n" % number).encode("ascii"))
    expected = set(("%d: hi from %d\n" % (n, n)).encode("ascii") for n in numbers)
    for f in files:
        got = set(f.readline() for _ in range(clients_count))
        assert got == expected
    for f, client in zip(files, clients):
        f.close()
        client.close()
    assert run.expect("DONE ") == [str(clients_count)]
    run.finish()


@pytest.mark.skipif(PY2, reason="selectors is Python 3 only")
def test_selectors_default_selector_is_poll_and_works():
    run = EfiRun("selectors_echo.py", [3])
    assert run.expect("SELECTOR ") == ["PollSelector"]
    port = int(run.expect("READY ")[0])
    payload = peers.pattern(300000, seed=3)
    for _ in range(3):
        client = socket.create_connection((STATION, port), timeout=10)
        client.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = client.recv(65536)
            assert chunk
            got += chunk
        assert got == payload
        client.close()
    run.expect("DONE")
    run.finish()


def test_200_sockets_leave_nothing_behind():
    with peers.EchoPeer() as echo:
        run = EfiRun("many_sockets.py", [echo.port, 200], ["--ledger"])
        assert run.expect("DONE ", timeout=60) == ["200"]
        stderr = run.finish()
    ledger = [line for line in stderr.splitlines() if line.startswith("efirun ledger:")]
    assert ledger, stderr
    counts = dict(part.split("=") for part in ledger[0].split(":", 1)[1].split())
    assert counts and all(v == "0" for v in counts.values()), ledger[0]


def test_stdlib_client_errors():
    silent = socket.socket()
    silent.bind((peers.HOST, 0))
    silent.listen(1)
    try:
        run = EfiRun("client_errors.py", [peers.closed_port(), silent.getsockname()[1]])
        refused = run.expect("refused ")
        assert refused[0] == "True"
        if not PY2:
            assert refused[1] == "ConnectionRefusedError"
        assert run.expect("gaierror ") == [str(-2)]
        words = run.expect("timeout ")
        assert words[:2] == ["timed", "out"] and 0.25 <= float(words[2]) < 2
        run.finish()
    finally:
        silent.close()


def test_install_after_the_host_modules_were_imported(http_dir):
    run = EfiRun("install_late.py", ["http://%s:%d/small.bin" % (peers.HOST, http_dir["port"])], ["--no-install"])
    digest, size = run.expect("sha256 ")
    run.finish()
    assert (digest, int(size)) == (http_dir["small"], 5000)


def test_bits_dropin_makes_plain_import_socket_use_bitsnet(http_dir):
    run = EfiRun("bits_dropin.py", ["http://%s:%d/small.bin" % (peers.HOST, http_dir["port"])], ["--no-install"])
    digest, size = run.expect("sha256 ")
    run.finish()
    assert (digest, int(size)) == (http_dir["small"], 5000)


@pytest.mark.skipif(PY2, reason="asyncio is Python 3 only")
def test_asyncio_client_and_server(http_dir):
    # asyncio is not in BITS (docs/bits-environment.md section 2): this one runs on the host's Python.
    run = EfiRun("asyncio_client_server.py", [http_dir["port"]], ["--host-stdlib"])
    assert run.expect("STATUS ")[:2] == ["HTTP/1.0", "200"]
    port = int(run.expect("READY ")[0])
    client = socket.create_connection((STATION, port), timeout=10)
    client.sendall(b"shout\n")
    assert client.makefile("rb").readline() == b"SHOUT\n"
    client.close()
    run.expect("DONE")
    run.finish()
