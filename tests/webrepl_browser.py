"""Headless Chromium for the web REPL test, spoken to with the W3C WebDriver protocol over
urllib (no selenium): Debian's ``chromium`` and ``chromium-driver`` packages, installed with
apt-get when missing (``ensure_chromium``), one browser per ``Browser`` object."""

from __future__ import print_function

import base64
import json
import os
import shutil
import socket
import subprocess
import time

try:
    from urllib.request import ProxyHandler, Request, build_opener
    from urllib.error import HTTPError
except ImportError:  # Python 2.7 (the browser test itself is Python 3 only)
    from urllib2 import ProxyHandler, Request, build_opener, HTTPError  # type: ignore

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
APT_TIMEOUT = 1500  # s: a first install downloads ~100 MB, after waiting up to 900 s for the lock
DRIVER_START = 20.0  # s for chromedriver to answer /status
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C WebDriver element reference key
KEYS = {"ENTER": u"\ue007", "UP": u"\ue013", "DOWN": u"\ue015", "CONTROL": u"\ue009"}
_opener = build_opener(ProxyHandler({}))  # loopback only, whatever http_proxy says


def ensure_chromium():
    """None if chromium and chromedriver are there (installing them with apt-get if needed),
    else the reason they cannot be had (the caller skips with it)."""
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return None
    apt = shutil.which("apt-get") if hasattr(shutil, "which") else None
    if apt is None:
        return "chromium/chromium-driver missing and no apt-get to install them"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "chromium/chromium-driver missing and not root: apt-get install -y chromium chromium-driver"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    wait = ["-o", "DPkg::Lock::Timeout=900"]  # the other lane of tools/check may be installing too
    for command in ([apt, "update", "-q"] + wait,
                    [apt, "install", "-y", "-q"] + wait + ["chromium", "chromium-driver"]):
        try:
            subprocess.check_output(command, stderr=subprocess.STDOUT, env=env, timeout=APT_TIMEOUT)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            output = getattr(exc, "output", b"") or b""
            return "apt-get could not install chromium: %s %s" % (exc, output[-500:].decode("utf-8", "replace"))
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        return "apt-get ran but %s or %s is still missing" % (CHROMIUM, CHROMEDRIVER)
    return None


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WebDriverError(Exception):
    pass


class Browser(object):
    """chromedriver + one headless Chromium session."""

    def __init__(self, width=960, height=640):
        self.port = _free_port()
        self.driver = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        self.base = "http://127.0.0.1:%d" % self.port
        self.session = None
        deadline = time.time() + DRIVER_START
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (IOError, OSError, WebDriverError):
                pass
            if time.time() > deadline:
                self.quit()
                raise WebDriverError("chromedriver did not start within %s s" % DRIVER_START)
            time.sleep(0.1)
        options = {"binary": CHROMIUM,
                   "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--no-proxy-server", "--window-size=%d,%d" % (width, height)]}
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode("utf-8") if body is not None else None
        if method == "POST" and data is None:
            data = b"{}"
        request = Request(self.base + path, data=data, headers={"Content-Type": "application/json"})
        request.get_method = lambda: method
        try:
            reply = _opener.open(request, timeout=30).read()
        except HTTPError as exc:
            raise WebDriverError("%s %s: %s" % (method, path, exc.read()[:2000]))
        return json.loads(reply.decode("utf-8")).get("value")

    def _s(self, method, path, body=None):
        return self._call(method, "/session/%s%s" % (self.session, path), body)

    # ---- the few commands the test needs
    def get(self, url):
        self._s("POST", "/url", {"url": url})

    def find(self, css):
        return self._s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def send_keys(self, element, text):
        self._s("POST", "/element/%s/value" % element, {"text": text})

    def click(self, element):
        self._s("POST", "/element/%s/click" % element)

    def execute(self, script, *args):
        return self._s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def new_window(self):
        handle = self._s("POST", "/window/new", {"type": "tab"})["handle"]
        self._s("POST", "/window", {"handle": handle})
        return handle

    def switch_to(self, handle):
        self._s("POST", "/window", {"handle": handle})

    def window_handle(self):
        return self._s("GET", "/window")

    def screenshot(self):
        return base64.b64decode(self._s("GET", "/screenshot"))

    def wait_for(self, script, predicate, timeout=15.0, what="condition"):
        """Run ``script`` until ``predicate(result)``; returns the result; raises on timeout."""
        deadline = time.time() + timeout
        while True:
            result = self.execute(script)
            if predicate(result):
                return result
            if time.time() > deadline:
                raise WebDriverError("timed out waiting for %s; last value: %r" % (what, result))
            time.sleep(0.05)

    def quit(self):
        try:
            if self.session is not None:
                self._s("DELETE", "")
        except (IOError, OSError, WebDriverError):
            pass
        self.session = None
        if self.driver.poll() is None:
            self.driver.terminate()
            try:
                self.driver.wait(10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
