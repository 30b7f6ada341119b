"""bitsnet.webrepl: the browser console, run "at the boot prompt" (tools/efirun.py) and driven
from the host: its HTTP protocol with urllib (2.7 and 3), then end to end with headless
Chromium over WebDriver (3 only). The server listens on the simulated station address."""

from __future__ import print_function

import os
import re
import socket
import subprocess
import sys
import threading
import time
import types

import pytest

import conftest
from bitsnet import webrepl

try:
    from urllib.request import ProxyHandler, Request, build_opener
    from urllib.error import HTTPError
except ImportError:  # Python 2.7
    from urllib2 import ProxyHandler, Request, build_opener, HTTPError  # type: ignore

try:
    import queue
except ImportError:  # Python 2.7
    import Queue as queue  # type: ignore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")
DOCS_SCREENSHOT = os.path.join(ROOT, "docs", "webrepl.png")
STATION = conftest.STATION  # the simulated machine's address (efirun --address)
START_TIMEOUT = 30.0
RUN_TIMEOUT = 15.0  # s for a command's output to show up
BROWSER_BUDGET = 60.0  # s the whole browser test may take
WRONG_TOKEN = "0" * 32
_opener = build_opener(ProxyHandler({}))


def free_port():
    s = socket.socket()
    s.bind((STATION, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def exchange(address, data, timeout=10.0, read=True, half_close=False, time_connect=False):
    """Send ``data`` on a fresh connection to ``address`` and read until the server closes:
    (all bytes answered, seconds taken). A reset after the answer (the server closes with
    unread data) counts as the end; so does a refusal while we were still sending. ``read``
    False: send only. ``half_close``: say "nothing more" after the bytes (a request cut short
    is then dropped at once). ``time_connect``: the seconds include the connect (a server
    whose backlog is full makes that wait)."""
    started = time.time()
    sock = socket.create_connection(address, timeout=timeout)
    if not time_connect:
        started = time.time()
    answer = b""
    try:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except socket.error:
            pass  # refused and closed while we were still sending: read what came
        while read:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    except socket.error:
        pass
    finally:
        sock.close()
    return answer, time.time() - started


class WebReplRun(object):
    """``efirun.py -m bitsnet.webrepl`` in a subprocess; ``url``/``token`` from its console line.
    ``client_timeout``: run it with that CLIENT_TIMEOUT instead (through ``-c``)."""

    def __init__(self, *args, **options):
        self.port = free_port()
        command = [sys.executable, EFIRUN, "--ledger"] + conftest.STATION_ARGS
        if options.get("client_timeout") is not None:
            command += ["-c", "import sys; from bitsnet import webrepl; webrepl.CLIENT_TIMEOUT = %r; "
                        "webrepl.main(sys.argv[1:])" % options["client_timeout"]]
        else:
            command += ["-m", "bitsnet.webrepl"]
        command += ["--port", str(self.port)]
        self._start(command + list(args))

    def _start(self, command):
        """Run ``command`` (an efirun.py line serving the REPL on ``self.port``); wait for its URL."""
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=ROOT, universal_newlines=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.lines = queue.Queue()
        self.stdout, self.stderr = [], []
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            thread = threading.Thread(target=self._pump, args=(stream, sink))
            thread.daemon = True
            thread.start()
        self.url = self._expect("webrepl: open ")
        self.base = self.url.split("/?")[0]
        self.token = self.url.split("token=")[1]

    def _pump(self, stream, sink):
        for line in iter(stream.readline, ""):
            sink.append(line)
            self.lines.put(line.rstrip("\n"))

    def _expect(self, prefix):
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        self.kill()
        pytest.fail("no %r line; stdout:\n%s\nstderr:\n%s" % (prefix, "".join(self.stdout), "".join(self.stderr)))

    def request(self, method, path, body=None, token=None, session=None, headers=None):
        """(status, headers, text); token=None uses the right one, "" sends none."""
        all_headers = dict(headers or {})
        token = self.token if token is None else token
        if token:
            all_headers["X-Repl-Token"] = token
        if session:
            all_headers["X-Repl-Session"] = session
        data = body.encode("utf-8") if body is not None else (b"" if method == "POST" else None)
        request = Request(self.base + path, data=data, headers=all_headers)
        request.get_method = lambda: method
        try:
            reply = _opener.open(request, timeout=10)
            return reply.getcode(), reply.info(), reply.read().decode("utf-8")
        except HTTPError as exc:
            return exc.code, exc.info(), exc.read().decode("utf-8")

    def finish(self, timeout=20):
        deadline = time.time() + timeout
        while self.proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.kill()
            pytest.fail("webrepl did not exit; stderr:\n" + "".join(self.stderr))
        time.sleep(0.1)  # let the pump threads drain
        stderr = "".join(self.stderr)
        assert self.proc.returncode == 0, stderr
        assert "firmware faults" not in stderr and "Traceback" not in stderr, stderr
        ledger = [line for line in stderr.splitlines() if line.startswith("efirun ledger:")]
        assert ledger and all(part.endswith("=0") for part in ledger[0].split(":")[1].split()), stderr
        return "".join(self.stdout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Client(object):
    """One console session over the plain HTTP protocol (what the page's script does)."""

    def __init__(self, run):
        self.run = run
        status, headers, text = run.request("POST", "/session")
        assert status == 200, text
        self.session = headers["X-Repl-Session"]
        self.next = int(headers["X-Repl-Next"])

    def push(self, line):
        status, headers, text = self.run.request("POST", "/push", line, session=self.session)
        assert status == 200, (status, text)
        return headers["X-Repl-State"]

    def poll(self):
        status, headers, text = self.run.request("GET", "/poll?since=%d" % self.next, session=self.session)
        assert status == 200, (status, text)
        self.next = int(headers["X-Repl-Next"])
        return headers["X-Repl-State"], text

    def execute(self, *lines):
        """Push the lines, wait until the command ran; the console text it added."""
        text = ""
        for line in lines + (None,):
            if line is not None:
                self.push(line)
            deadline = time.time() + RUN_TIMEOUT
            while True:
                state, more = self.poll()
                text += more
                if state != "running":
                    break
                assert time.time() < deadline, "still running: %r" % text
                time.sleep(0.05)
        return text


@pytest.fixture
def run():
    the_run = WebReplRun()
    yield the_run
    the_run.kill()


# ----------------------------------------------------------------------------- host-only units
def test_tokens_equal_with_and_without_compare_digest(monkeypatch):
    for compare in (webrepl._compare_digest, None):
        monkeypatch.setattr(webrepl, "_compare_digest", compare)
        assert webrepl.tokens_equal("abc123", "abc123")
        assert not webrepl.tokens_equal("abc124", "abc123")
        assert not webrepl.tokens_equal("abc12", "abc123")
        assert not webrepl.tokens_equal("", "abc123")


def test_token_comes_from_bitsnet_entropy():
    from bitsnet import entropy
    first, second = webrepl.make_token(), webrepl.make_token()
    assert len(first) == 32 and int(first, 16) >= 0 and first != second
    assert webrepl.token_source().startswith(entropy.source())
    assert ("WARNING" in webrepl.token_source()) != entropy.strong()  # a warning exactly when weak


def test_a_weak_entropy_source_is_named_and_warned_about(monkeypatch):
    # What BITS on a board without EFI_RNG_PROTOCOL or RDRAND has (os.urandom is absent there).
    import bitsnet
    fake = types.ModuleType("bitsnet.entropy")
    fake.random_bytes = lambda n: b"\x5a" * n  # type: ignore[attr-defined]
    fake.source = lambda: "weak mix: rdtsc, GetTime"  # type: ignore[attr-defined]
    fake.strong = lambda: False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bitsnet.entropy", fake)
    monkeypatch.setattr(bitsnet, "entropy", fake, raising=False)
    assert webrepl.make_token() == "5a" * 16 and webrepl.make_token(8) == "5a" * 8
    source = webrepl.token_source()
    assert source.startswith("weak mix: rdtsc, GetTime -- WARNING: not a strong random source")
    assert "--token" in source
    fake.strong = lambda: True  # type: ignore[attr-defined]
    assert webrepl.token_source() == "weak mix: rdtsc, GetTime"


def test_command_line():
    assert webrepl.parse_args([]) == ("", webrepl.DEFAULT_PORT, None, ())
    token = "0123456789abcdef" * 2
    assert webrepl.parse_args(["--port", "81", "--bind=127.0.0.2", "--token", token]) == ("127.0.0.2", 81, token, ())
    assert webrepl.parse_args(["--allow-host", "bits.lab,x.example"])[3] == ("bits.lab", "x.example")
    for bad in (["--port"], ["--port", "x"], ["--what", "1"]):
        with pytest.raises(SystemExit):
            webrepl.parse_args(bad)


def test_short_or_unsafe_tokens_are_refused():
    # The review: --token 1 was accepted, undoing the 128 random bits of the default one.
    for bad in ("1", "x" * (webrepl.MIN_TOKEN_CHARS - 1), "a b" * 10, "%41" * 10, "token=" * 5, u"\xe9" * 30):
        with pytest.raises(SystemExit) as caught:
            webrepl.parse_args(["--token", bad])
        assert "--token refused" in str(caught.value), bad
        with pytest.raises(ValueError):
            webrepl.WebRepl("127.0.0.1", 0, bad)
    good = "x" * webrepl.MIN_TOKEN_CHARS
    assert webrepl.parse_args(["--token", good])[2] == good
    run = webrepl.WebRepl("127.0.0.1", 0, good)
    try:
        assert run.token == good and run.token_source == "--token"
    finally:
        run.server.server_close()


class HostRun(WebReplRun):
    """The server in this process on the host's own sockets, its loop on a thread: for what
    needs a module constant changed (no firmware involved)."""

    def __init__(self, monkeypatch, **constants):  # pylint: disable=super-init-not-called
        for name, value in constants.items():
            monkeypatch.setattr(webrepl, name, value)
        self.console = []
        console = type("Console", (), {"write": lambda _, text: self.console.append(text), "flush": lambda _: None})
        self.repl = webrepl.WebRepl("127.0.0.1", 0, None, console=console())
        self.token = self.repl.token
        self.base = "http://127.0.0.1:%d" % self.repl.server.server_address[1]
        self.thread = threading.Thread(target=self.repl.serve)
        self.thread.daemon = True
        self.thread.start()

    def stop(self):
        self.repl.stopping = True
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_an_abandoned_session_can_be_taken_over(monkeypatch):
    run = HostRun(monkeypatch, SESSION_IDLE=0.5, STOP_GRACE=0.1)
    try:
        first = Client(run)
        assert first.execute("x = 1") == ">>> x = 1\n"
        status, _, text = run.request("POST", "/session")
        assert status == 409 and "already in use" in text
        time.sleep(0.7)  # the first page stops beating
        second = Client(run)
        assert second.execute("x").endswith(">>> x\n1\n")  # the same namespace
        assert run.request("GET", "/poll?since=0", session=first.session)[0] == 409
        assert any("taken over" in line for line in run.console)
    finally:
        run.stop()


# ----------------------------------------------------------------------------- over HTTP, in the firmware
def test_without_the_token_nothing_runs(run, tmpdir):
    marker = tmpdir.join("ran")
    code = "open(%r, 'w').write('x')" % str(marker)
    client = Client(run)
    for token in ("", WRONG_TOKEN, run.token[:-1], run.token + "0", run.token.upper() + "X"):
        for method, path in (("POST", "/push"), ("GET", "/"), ("POST", "/session"), ("GET", "/poll?since=0"),
                             ("POST", "/interrupt")):
            status, _, text = run.request(method, path, code, token=token, session=client.session)
            assert status == 403 and "token" in text and "<html" not in text, (token, path, status, text)
        status, _, _ = run.request("POST", "/push?token=" + (token or "x"), code, token="", session=client.session)
        assert status == 403
    assert run.request("GET", "/?token=" + WRONG_TOKEN, token="")[0] == 403
    # The right token but not the session that holds the console: refused too (409).
    status, _, text = run.request("POST", "/push", code, session="not-the-session")
    assert status == 409 and "Reload" in text
    assert not marker.check()
    assert code not in client.poll()[1]  # nothing was even echoed
    # Positive control: the same request with token and session runs the code.
    client.execute(code)
    assert marker.read() == "x"
    page = run.request("GET", "/?token=" + run.token, token="")
    assert page[0] == 200 and "<textarea" in page[2]
    assert not re.search(r'(src|href)="(?!data:)', page[2])  # self-contained: no external assets
    client.execute("exit()")
    assert "refused" in run.finish()


def test_console_semantics_over_http(run):
    source = run._expect("webrepl: access token from ")  # which entropy source made the token
    assert source, source
    client = Client(run)
    assert client.execute("x = 6") == ">>> x = 6\n"
    assert client.execute("x * 7") == ">>> x * 7\n42\n"  # one namespace across commands
    assert client.push("def f(n):") == "more"
    assert client.push("    return n * 2") == "more"
    assert client.execute("", "f(21)") == ">>> def f(n):\n...     return n * 2\n... \n>>> f(21)\n42\n"
    text = client.execute("1/0")
    assert "Traceback (most recent call last):" in text and "ZeroDivisionError" in text
    assert "webrepl.py" not in text  # the console's own frames are not shown
    text = client.execute("input('? ')")  # the firmware keyboard is not the browser's
    assert "EOFError" in text and "no console input" in text
    text = client.execute("def g(:")
    assert "SyntaxError" in text
    assert client.push("for i in range(2):") == "more"
    assert client.push("    print('line %d' % i)") == "more"
    assert client.execute("") == ">>> for i in range(2):\n...     print('line %d' % i)\n... \nline 0\nline 1\n"
    assert client.execute("from __future__ import division") == ">>> from __future__ import division\n"
    assert client.execute("1 / 2") == ">>> 1 / 2\n0.5\n"  # in force for later commands, as in python
    client.execute("exit()")
    run.finish()


def test_interrupt_while_serving_and_second_session(run):
    client = Client(run)
    client.push("while True: pass")
    assert client.push("") == "running"
    started = time.time()
    for _ in range(5):  # the server keeps answering while the loop runs
        state, _ = client.poll()
        assert state == "running"
    assert time.time() - started < 3.0
    # One session at a time: a second browser is told why, even while a command runs.
    status, headers, text = run.request("POST", "/session")
    assert status == 409 and headers["X-Repl-Error"] == "busy" and "already in use" in text
    status, headers, _ = run.request("POST", "/interrupt", session=client.session)
    assert status == 200
    text = client.execute()
    assert "KeyboardInterrupt" in text and "webrepl.py" not in text
    assert text.count('File "<console>"') == 1, text  # as the interpreter shows it: one frame
    assert client.execute("print('after')") == ">>> print('after')\nafter\n"
    # A released session can be taken at once.
    assert run.request("POST", "/release", session=client.session)[0] == 200
    second = Client(run)
    assert second.execute("1+1").endswith("2\n")
    assert run.request("GET", "/poll?since=0", session=client.session)[0] == 409
    second.execute("exit()")
    run.finish()


SHORT_CLIENT_TIMEOUT = 2.0  # s: the test waits for it once; webrepl's own 10 s would be most of its time


def test_broken_clients_do_not_stall_it():
    run = WebReplRun(client_timeout=SHORT_CLIENT_TIMEOUT)
    try:
        _broken_clients_do_not_stall(run)
    finally:
        run.kill()


def _broken_clients_do_not_stall(run):
    silent = socket.create_connection((STATION, run.port), timeout=20)  # connects, says nothing
    partial = socket.create_connection((STATION, run.port), timeout=20)
    partial.sendall(b"POST /push HTTP/1.1\r\nContent-Length: 100\r\n\r\nprint(")  # and then nothing
    garbage = socket.create_connection((STATION, run.port), timeout=20)
    garbage.sendall(b"\x16\x03\x01\x02\x00" + b"\x00" * 300 + b"\r\n\r\n")  # a TLS hello, say
    started = time.time()
    client = Client(run)
    assert client.execute("2+2").endswith("4\n")
    assert time.time() - started < 3.0
    answer = b""
    while True:  # a request line that is not HTTP: an error 400
        data = garbage.recv(4096)
        if not data:
            break
        answer += data
    assert b"400" in answer
    # A head without the token is refused at once (its body never read), not left to time out.
    assert partial.recv(100).startswith(b"HTTP/1.0 403")
    # Within HEADER_TIMEOUT the silent connection is dropped (EOF or reset).
    for sock in (silent, partial):
        try:
            while sock.recv(100):
                pass
        except socket.error:
            pass
        assert time.time() - started < SHORT_CLIENT_TIMEOUT + 5
        sock.close()
    garbage.close()
    client.execute("exit()")
    run.finish()


# ----------------------------------------------------------------------------- in a real browser
OUT = "return document.getElementById('out').textContent"
STATE = "return window.repl && window.repl.state"


@pytest.mark.skipif(sys.version_info[0] < 3, reason="the browser test runs on Python 3")
def test_in_headless_chromium(run, tmpdir):
    import webrepl_browser
    reason = webrepl_browser.ensure_chromium()
    if reason:
        pytest.skip(reason)
    started = time.time()
    marker = tmpdir.join("ran")
    browser = webrepl_browser.Browser()
    try:
        browser.get(run.url)
        browser.wait_for(STATE, lambda s: s == "ready", what="the console to be ready")
        box = browser.find("#in")
        enter = webrepl_browser.KEYS["ENTER"]

        def typed(text, expect, what):
            browser.send_keys(box, text)
            return browser.wait_for(OUT, lambda out: expect in out, what=what)

        typed("6 * 7" + enter, ">>> 6 * 7\n42\n", "a result")
        typed("def twice(x):" + enter, ">>> def twice(x):\n", "a block opened")
        assert browser.wait_for(STATE, lambda s: s == "more") == "more"
        assert browser.execute("return document.getElementById('prompt').textContent") == "... "
        typed("    return 2 * x" + enter + enter + "twice(21)" + enter, ">>> twice(21)\n42\n", "a multi-line block")
        typed("1/0" + enter, "ZeroDivisionError", "a traceback")
        assert "Traceback (most recent call last):" in browser.execute(OUT)
        # History: arrow up twice brings back "twice(21)".
        browser.send_keys(box, webrepl_browser.KEYS["UP"] + webrepl_browser.KEYS["UP"])
        assert browser.execute("return document.getElementById('in').value") == "twice(21)"
        before = browser.execute(OUT).count("42\n")
        browser.send_keys(box, enter)
        browser.wait_for(OUT, lambda out: out.count("42\n") == before + 1, what="the recalled command's output")
        # Interrupt a command that never ends, with the page's button.
        browser.send_keys(box, "while True: pass" + enter + enter)
        browser.wait_for(STATE, lambda s: s == "running", what="the loop to be running")
        time.sleep(0.5)
        assert browser.execute(STATE) == "running"  # the page keeps hearing from the server
        browser.click(browser.find("#stop"))
        browser.wait_for(OUT, lambda out: "KeyboardInterrupt" in out, what="KeyboardInterrupt")
        browser.wait_for(STATE, lambda s: s == "ready")
        time.sleep(0.3)  # any late or repeated poll answer would have arrived by now
        assert browser.execute(OUT).count("KeyboardInterrupt") == 1  # output shown exactly once
        # Requests without the token run nothing; the page itself does run it.
        code = "open(%r, 'w').write('x')" % str(marker)
        status, _, _ = run.request("POST", "/push", code, token=WRONG_TOKEN,
                                   session=browser.execute("return window.repl.session"))
        assert status == 403 and not marker.check()
        typed("print('ok')" + enter, ">>> print('ok')\nok\n", "output after the interrupt")
        # A second page is told the console is in use.
        first = browser.window_handle()
        browser.new_window()
        browser.get(run.url)
        browser.wait_for(OUT, lambda out: "already in use" in out, what="the one-session message")
        assert browser.execute(STATE) == "lost"
        browser.switch_to(first)
        typed(code + enter, ">>> " + code, "the side effect")
        browser.wait_for(STATE, lambda s: s == "ready")
        assert marker.read() == "x"
        screenshot = browser.screenshot()
        assert screenshot.startswith(b"\x89PNG")
        tmpdir.join("webrepl.png").write_binary(screenshot)
        if os.environ.get("BITSNET_WEBREPL_SCREENSHOT"):  # regenerate docs/webrepl.png for the README
            with open(os.environ["BITSNET_WEBREPL_SCREENSHOT"], "wb") as f:
                f.write(screenshot)
        browser.send_keys(box, "exit()" + enter)
        browser.wait_for(STATE, lambda s: s == "closed", what="the page to see the server stop")
    finally:
        browser.quit()
    console = run.finish()
    assert "refused POST /push" in console and "favicon" not in console  # the page fetches nothing else
    assert time.time() - started < BROWSER_BUDGET
