"""bitsnet.lab: unattended runs -- a plan from the lab, run, its results and BITS's log delivered.

    set BITSNET_LAB=http://lab.example:8080/plans/{product}.txt   (GRUB, before init.cfg runs)
    python -m bitsnet.lab [--no-end] [PLAN-URL]                   (at the prompt, by hand)

A boot with the GRUB variable ``BITSNET_LAB`` set runs ``boot()`` from ``/boot/cfg/init.cfg``
(``tools/bits_install.py`` adds the line): it fetches the plan, runs it with the console mirrored
over the network, uploads what the plan names, and ends as the plan says: power off, reboot or
stay at the BITS menu. ``BITSNET_LAB`` is a URL (placeholders ``{uuid}``, ``{serial}``,
``{product}``, ``{machine}`` as in ``bitsnet.upload``), or ``HOST[:PORT]`` (the lab host of
``bitsnet.selftest``), which means ``http://HOST:PORT/plan.txt`` (port 8080 by default).

The plan (docs/lab.md section 5): a text file, one directive a line, words split as a shell
splits them (quotes for names with spaces), ``#`` starts a comment::

    timeout 300                       # time limit of each step from here on (0: none)
    test-timeout 120                  # and of each BITS test in a tests step (default: none)
    console 10.0.2.2:6666             # netconsole receiver (default: the plan's host, port 6666)
    console syslog 10.0.2.2:514       # or RFC 5424 syslog; "console off": none
    tests "ACPI Tests" "SMBIOS"       # BITS test submenus or tests; "tests" alone: all of them
    run scripts/check.py --fast       # a program (URL relative to the plan), as python URL does
    run -m bitsnet.selftest           # or a module, as python -m does
    upload junit results/{machine}/{run}/junit.xml   # the JUnit XML of the tests and steps
    upload log results/{machine}/{run}/{name}        # BITS's log ({name}: bits-log.txt)
    retries 5                         # attempts after a failed upload (backoff 1 s doubling)
    end halt                          # halt | reboot | prompt (the default)

How it runs -- every result reaches the lab or the console
----------------------------------------------------------
1. The plan is fetched (``bitsnet.remote.fetch``, a few attempts: the lab may still be starting).
   If it cannot be, that is one line on the console and the boot goes on to the menu.
2. It is parsed whole first; each line that is wrong is reported with its number and left out,
   and the rest runs (the errors are also a failed "plan" test case in the JUnit XML, and the
   exit status is 1).
3. Steps run in order, each under its time limit (``bitsnet.watchdog``). A step that raises,
   exits non-zero, cannot be fetched or passes its limit is recorded as failed; the next step
   runs anyway. Every step is a test case of the JUnit XML (suite "plan"); BITS's own tests are
   recorded by ``bitsnet.results``, whose totals stay BITS's console summary.
4. Uploads run after the last step, in plan order, each retried with backoff by
   ``bitsnet.upload.deliver``; one that fails for good is one line on the console naming what
   was not delivered. Put ``upload log`` last: the log then holds the other uploads' lines.
5. The console mirror stops, and the end action runs: ``halt`` and ``reboot`` call the
   firmware's ResetSystem (EfiResetShutdown, EfiResetCold), which BITS has no Python function
   for; ``prompt`` returns to BITS's menu.
"""

from __future__ import absolute_import, print_function

import os
import re
import sys

from bitsnet import clock, results, watchdog

PY2 = sys.version_info[0] == 2
DEFAULT_PORT = 8080  # bitsnet.selftest's default lab port (tools/lab.py)
DEFAULT_PLAN = "plan.txt"
DEFAULT_TIMEOUT = 600.0  # s per step unless the plan says: BITS's ACPI tests take a minute under QEMU TCG
CONSOLE_PORT = 6666  # netconsole's default receiver port
SYSLOG_PORT = 514
PLAN_ATTEMPTS = 4  # fetches of the plan before giving up ...
PLAN_RETRY = 2.0  # ... s apart, doubling: a lab server may start after the machine
SUITE = "plan"  # JUnit testsuite of the plan's own steps
UPLOAD_TIMEOUT = None  # s per socket operation of an upload (None: bitsnet.upload's default)
UPLOADS = {"junit": ("junit.xml", "application/xml"), "log": ("bits-log.txt", "text/plain; charset=utf-8")}
ENDS = ("halt", "reboot", "prompt")
EfiResetCold, EfiResetShutdown = 0, 2  # EFI_RESET_TYPE (UEFI 2.x, ResetSystem)
MAX_SHOWN_ERRORS = 20  # plan errors listed on the console (a plan that is not a plan: an HTML page)
DIRECTIVES = ("timeout", "test-timeout", "console", "tests", "run", "upload", "retries", "end")


class PlanError(ValueError):
    """One wrong line of a plan: ``line`` (1-based) and the message."""

    def __init__(self, line, message):
        ValueError.__init__(self, "line %d: %s" % (line, message))
        self.line = line


class TestTimeLimit(watchdog.TimeLimit):
    """One BITS test ran past the plan's ``test-timeout``: ``results.run_tests`` records it and
    goes on with the next test (the step's own limit is a plain TimeLimit, which ends the step)."""


class Step(object):
    """One ``tests`` or ``run`` line: ``kind``, ``args``, ``timeout``, ``line``, ``test_timeout``."""

    def __init__(self, kind, args, timeout, line, test_timeout=0.0):
        self.kind, self.args, self.timeout, self.line = kind, args, timeout, line
        self.test_timeout = test_timeout

    def describe(self):
        return " ".join([self.kind] + [_quoted(a) for a in self.args])


def _quoted(word):
    return '"%s"' % word if (" " in word or not word) else word


class Plan(object):
    """A parsed plan: ``steps``, ``uploads`` ([(what, template, line)]), ``console`` ((kind,
    host, port), or None for "off", or "default"), ``end``, ``errors`` ([PlanError])."""

    def __init__(self):
        self.steps = []  # type: list
        self.uploads = []  # type: list
        self.console = "default"  # type: object
        self.end = "prompt"
        self.end_line = None  # type: int
        self.errors = []  # type: list
        self.retries = None  # type: int   # None: bitsnet.upload's default


def _split(text):
    import shlex
    return shlex.split(text, True)  # comments=True: "#" to the end of the line


def _host_port(text, default_port):
    host, colon, port = text.rpartition(":")
    if not colon:
        return text, default_port
    if not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ValueError("%r is not HOST[:PORT]" % text)
    return host.strip("[]"), int(port)


def parse(text):
    """The Plan of ``text`` (bytes or text); wrong lines are in ``errors``, never raised."""
    if isinstance(text, bytes) and not PY2:
        text = text.decode("utf-8", "replace")
    plan = Plan()
    limits = {"step": DEFAULT_TIMEOUT, "test": 0.0}  # the time limits in force (timeout, test-timeout)
    for number, raw in enumerate(text.splitlines(), 1):
        try:
            words = _split(raw)
        except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
            plan.errors.append(PlanError(number, str(exc).lower()))
            continue
        if not words:
            continue
        try:
            _directive(plan, words, limits, number)
        except PlanError as exc:
            plan.errors.append(exc)
    return plan


def _directive(plan, words, limits, number):
    """Apply one line to ``plan`` (and ``limits``); PlanError if it is wrong."""
    name, args = words[0].lower(), words[1:]
    if name in ("timeout", "test-timeout"):
        try:
            value = float(args[0]) if len(args) == 1 and args[0].lower() not in ("nan", "inf") else -1
        except ValueError:
            value = -1
        if value < 0:
            raise PlanError(number, "%s needs one number of seconds (0: no limit)" % name)
        limits["step" if name == "timeout" else "test"] = value
    elif name == "console":
        plan.console = _console(args, number)
    elif name == "tests":
        plan.steps.append(Step("tests", args, limits["step"], number, limits["test"]))
    elif name == "run":
        if not args or (args[0] == "-m" and len(args) < 2) or (args[0].startswith("-") and args[0] != "-m"):
            raise PlanError(number, "run needs a program URL (or -m MODULE) and its arguments")
        plan.steps.append(Step("run", args, limits["step"], number))
    elif name == "upload":
        if len(args) != 2 or args[0].lower() not in UPLOADS:
            raise PlanError(number, "upload needs what (%s) and one URL" % " or ".join(sorted(UPLOADS)))
        from bitsnet import upload
        unknown = [word for word in re.findall(r"\{(\w*)\}", args[1]) if word not in upload.PLACEHOLDERS]
        if unknown:
            raise PlanError(number, "upload: unknown placeholder {%s} (known: %s)"
                            % (unknown[0], ", ".join("{%s}" % p for p in upload.PLACEHOLDERS)))
        plan.uploads.append((args[0].lower(), args[1], number))
    elif name == "retries":
        if len(args) != 1 or not args[0].isdigit() or int(args[0]) > 100:
            raise PlanError(number, "retries needs a whole number from 0 to 100")
        plan.retries = int(args[0])
    elif name == "end":
        if len(args) != 1 or args[0].lower() not in ENDS:
            raise PlanError(number, "end needs one of %s" % ", ".join(ENDS))
        if plan.end_line is not None:
            raise PlanError(number, "a second end line (the first is line %d)" % plan.end_line)
        plan.end, plan.end_line = args[0].lower(), number
    else:
        raise PlanError(number, "unknown directive %r (known: %s)" % (words[0], ", ".join(DIRECTIVES)))


def _console(args, number):
    if [a.lower() for a in args] == ["off"]:
        return None
    kind = "netconsole"
    if args and args[0].lower() in ("syslog", "netconsole"):
        kind, args = args[0].lower(), args[1:]
    if len(args) != 1:
        raise PlanError(number, "console needs [syslog] HOST[:PORT], or off")
    try:
        host, port = _host_port(args[0], SYSLOG_PORT if kind == "syslog" else CONSOLE_PORT)
    except ValueError as exc:
        raise PlanError(number, "console: %s" % exc)
    return kind, host, port


# --------------------------------------------------------------------------- where the plan is
def plan_url(setting, ident=None):
    """The plan's URL for a ``BITSNET_LAB`` value (module docstring); ValueError if it is none."""
    setting = (setting or "").strip()
    if not setting:
        raise ValueError("BITSNET_LAB is empty")
    if "{" in setting:
        from bitsnet import upload
        setting = upload.expand(setting, ident)
    lower = setting.lower()
    if lower.startswith(("http://", "https://")):
        rest = setting.split("://", 1)[1]
        if "/" not in rest or rest.endswith("/") and rest.count("/") == 1:
            return setting.rstrip("/") + "/" + DEFAULT_PLAN
        return setting
    if "/" in setting:
        raise ValueError("BITSNET_LAB=%s: give HOST[:PORT] or an http(s) URL" % setting)
    host, port = _host_port(setting, DEFAULT_PORT)
    return "http://%s:%d/%s" % (host if ":" not in host else "[%s]" % host, port, DEFAULT_PLAN)


def _join(base, reference):
    if PY2:
        from urlparse import urljoin  # type: ignore[import-not-found]
    else:
        from urllib.parse import urljoin
    return urljoin(base, reference)


def _host_of(url):
    rest = url.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


# --------------------------------------------------------------------------- running it
def say(text):
    """One line of the runner's on the console (and so in BITS's log and the mirror)."""
    line = "lab: %s\n" % (text,)
    if PY2 and not isinstance(line, str):
        # BITS quirk: printing non-ASCII unicode raises, and BITS's log (a cStringIO) takes
        # bytes (docs/bits-environment.md section 8.2): a URL or a message may be unicode here.
        line = line.encode("ascii", "backslashreplace")
    sys.stdout.write(line)
    flush = getattr(sys.stdout, "flush", None)
    if flush is not None:
        flush()


def _traceback_text():
    import traceback
    return traceback.format_exc()


class Runner(object):
    """Runs one Plan fetched from ``url``; ``report`` (a bitsnet.results.Report) collects BITS's
    tests and the plan's steps; ``failures`` counts what went wrong (0: a clean run)."""

    def __init__(self, plan, url):
        self.plan, self.url = plan, url
        self.report = results.Report()
        self.failures = 0
        self.delivered = 0

    def _record(self, name):
        record = results.TestRecord(name, SUITE)
        self.report.tests.append(record)
        return record

    def record_plan_errors(self):
        if not self.plan.errors:
            return
        for error in self.plan.errors[:MAX_SHOWN_ERRORS]:
            say("plan %s: %s" % (self.url, error))
        if len(self.plan.errors) > MAX_SHOWN_ERRORS:
            say("plan %s: %d more wrong lines (all of them in the JUnit XML)"
                % (self.url, len(self.plan.errors) - MAX_SHOWN_ERRORS))
        record = self._record("plan syntax")
        record.done = True
        record.exception = "\n".join(["PlanError: %s" % e for e in self.plan.errors])
        self.failures += 1

    def run_steps(self):
        total = len(self.plan.steps)
        for index, step in enumerate(self.plan.steps, 1):
            limit = "no time limit" if not step.timeout else "limit %s s" % _seconds(step.timeout)
            say("step %d/%d (line %d): %s (%s)" % (index, total, step.line, step.describe(), limit))
            started = clock.monotonic()
            ok, why = self._run_step(step)
            seconds = clock.monotonic() - started
            if not ok:
                self.failures += 1
            say("step %d/%d: %s in %s s%s" % (index, total, "done" if ok else "FAILED", _seconds(seconds),
                                              (": " + why) if why else ""))

    def _run_step(self, step):
        """(ok, why) of one step; never raises an Exception (a TimeLimit is caught here too)."""
        if step.kind == "tests":
            return self._tests(step)
        record = self._record(step.describe())
        started = clock.monotonic()
        saved = results.tee_stdio(record)  # the console first, then a copy for the step's test case
        guard = watchdog.limit(step.timeout, "step %d (line %d)" % (self.plan.steps.index(step) + 1, step.line))
        try:
            try:
                with guard:
                    status = self._run_program(step)
            finally:
                results.restore_stdio(saved)
                record.seconds = clock.monotonic() - started
                record.done = True
        except (Exception, watchdog.TimeLimit) as exc:
            record.exception = _traceback_text()
            return False, "%s: %s" % (type(exc).__name__, exc)
        if guard.fired:  # the program printed the TimeLimit's traceback (python does) and ended
            timeout = watchdog.TimeLimit(step.timeout, guard.what)
            record.exception = "TimeLimit: %s" % timeout
            return False, "TimeLimit: %s" % timeout
        if status:
            record.exception = "ExitStatus: the program exited with status %d" % status
            return False, "exit status %d" % status
        return True, ""

    def _run_program(self, step):
        from bitsnet import launch, remote
        if step.args[0] == "-m":
            return launch.run_module(step.args[1], step.args[2:])
        url = _join(self.url, step.args[0])
        program = remote.fetch_program(url)  # FetchError: recorded by the caller
        return program.run(step.args[1:])

    def _tests(self, step):
        before = len(self.report.tests)
        what = "step %d (line %d)" % (self.plan.steps.index(step) + 1, step.line)
        each = watchdog.limit(step.test_timeout, "a BITS test (%s)" % what, restart=lambda: len(self.report.tests),
                              exception=TestTimeLimit)
        try:
            with watchdog.limit(step.timeout, what):
                with each:
                    results.run_tests(step.args or None, report=self.report, resume_on=(TestTimeLimit,))
        except (Exception, watchdog.TimeLimit) as exc:
            if isinstance(exc, LookupError) or len(self.report.tests) == before:
                record = self._record(step.describe())
                record.done = True
                record.exception = _traceback_text()
            return False, "%s: %s" % (type(exc).__name__, exc)
        ran = self.report.tests[before:]
        bad = [r for r in ran if r.status != "passed"]
        say("tests: %d run, %d passed, %d failed (asserts: %s)" % (
            len(ran), len(ran) - len(bad), len(bad), "%d passed, %d failed" % (
                sum(r.passed for r in ran), sum(r.failed for r in ran))))
        return not bad, ("%d of %d tests failed" % (len(bad), len(ran))) if bad else ""

    def upload_all(self, ident):
        from bitsnet import upload
        for what, template, line in self.plan.uploads:
            name, content_type = UPLOADS[what]
            try:
                url = _join(self.url, upload.expand(template, ident, name=name))
                data = self._data(what, ident)
            except Exception as exc:  # a bad template, no log: this result is lost, and said so
                self.failures += 1
                say("NOT DELIVERED: %s (line %d): %s: %s" % (what, line, type(exc).__name__, exc))
                continue
            try:
                options = {} if self.plan.retries is None else {"retries": self.plan.retries}
                if UPLOAD_TIMEOUT is not None:
                    options["timeout"] = UPLOAD_TIMEOUT
                upload.deliver(url, data, content_type=content_type, name=name, progress=say, **options)
            except Exception as exc:  # UploadError's one line says what, where and why
                self.failures += 1
                say("NOT DELIVERED: %s" % (exc,))
                continue
            self.delivered += 1
            say("delivered %s: %d bytes to %s" % (what, len(data), url))

    def _data(self, what, ident):
        if what == "junit":
            properties = [("machine.uuid", ident.get("uuid")), ("machine.serial", ident.get("serial")),
                          ("machine.product", ident.get("product")), ("run", ident.get("run")),
                          ("plan", self.url)]
            return self.report.junit_xml(hostname=ident.get("machine"), properties=properties)
        return results.log_text()


def _seconds(value):
    # BITS quirk: no exponent formats (docs/bits-environment.md section 10): fixed notation only.
    return "%.1f" % value if value != int(value) else "%d" % value


def _identity():
    try:
        from bitsnet import machineid
        return machineid.identity()
    except Exception as exc:  # the uploads name the machine "unknown" then
        say("machine identity unknown: %s" % (exc,))
        return {"uuid": "unknown", "serial": "unknown", "product": "unknown", "machine": "unknown", "run": "run"}


def fetch_plan(url, attempts=None, pause=None):
    """The plan's text; FetchError after ``attempts`` tries (default PLAN_ATTEMPTS, PLAN_RETRY s
    apart, doubling), with the last one's line."""
    from bitsnet import remote
    import time
    attempts = PLAN_ATTEMPTS if attempts is None else attempts
    pause = PLAN_RETRY if pause is None else pause
    attempt = 1
    while True:
        try:
            return remote.fetch(url)
        except remote.FetchError as exc:
            if attempt >= attempts:
                raise
            attempt += 1
            say("plan not fetched (%s); try %d of %d in %s s" % (exc, attempt, attempts, _seconds(pause)))
            time.sleep(pause)
            pause *= 2


def _start_console(plan, url):
    if plan.console is None:
        return None
    kind, host, port = plan.console if plan.console != "default" else ("netconsole", _host_of(url), CONSOLE_PORT)
    from bitsnet import netconsole
    try:
        if kind == "syslog":
            console = netconsole.start(host, port, syslog=True)
        else:
            console = netconsole.start(host, port)
    except Exception as exc:  # a console that cannot mirror is no reason not to run the plan
        say("console not mirrored: %s: %s" % (type(exc).__name__, exc))
        return None
    say("console mirrored to %s:%d (%s)" % (host, port, kind))
    return console


def run(url, ident=None):
    """Fetch, run and deliver the plan at ``url``; (status, end action). Prints as it goes;
    raises nothing but KeyboardInterrupt-like BaseExceptions."""
    ident = _identity() if ident is None else ident
    say("machine %s, run %s; plan %s" % (ident.get("machine"), ident.get("run"), url))
    from bitsnet import remote
    try:
        text = fetch_plan(url)
    except remote.FetchError as exc:
        say("plan not fetched: %s; nothing run, nothing uploaded" % (exc,))
        return 1, "prompt"
    plan = parse(text)
    console = _start_console(plan, url)
    runner = Runner(plan, url)
    try:
        runner.record_plan_errors()
        runner.run_steps()
        runner.upload_all(ident)
        say("plan done: %d steps, %d problems, %d of %d uploads delivered; end: %s"
            % (len(plan.steps), runner.failures, runner.delivered, len(plan.uploads), plan.end))
    finally:
        if console is not None:
            from bitsnet import netconsole
            stats = netconsole.stop()
            if stats and (stats.get("dropped") or stats.get("errors")):
                say("console mirror: %d lines sent, %d dropped (last error: %s)"
                    % (stats["sent"], stats["dropped"], stats["last_error"]))
    return (1 if runner.failures else 0), plan.end


def end(action):
    """``halt`` or ``reboot``: the firmware's ResetSystem (does not return when it works);
    ``prompt``: nothing. A reset that fails is one line, and the boot goes on."""
    if action not in ("halt", "reboot"):
        return
    say("end: %s" % action)
    try:
        import ctypes
        import efi
        runtime = efi.system_table.RuntimeServices.contents
        kind = EfiResetShutdown if action == "halt" else EfiResetCold
        runtime.ResetSystem(kind, efi.EFI_SUCCESS, 0, ctypes.c_void_p())
    except Exception as exc:
        say("%s failed (%s: %s); staying at the prompt" % (action, type(exc).__name__, exc))


def boot():
    """The boot hook (init.cfg): with ``BITSNET_LAB`` set, run its plan and end as it says.
    Never raises into GRUB."""
    try:
        setting = os.environ.get("BITSNET_LAB")
    except Exception:
        setting = None
    if not setting:
        return
    try:
        url = plan_url(setting)
        status, action = run(url)
        end(action)
    except BaseException as exc:  # GRUB would show a traceback; the menu must still come
        say("stopped: %s: %s" % (type(exc).__name__, exc))


USAGE = """usage: python -m bitsnet.lab [--no-end] [PLAN-URL]

Fetch the plan (default: from $BITSNET_LAB), run it, upload what it names and end as it says
(halt, reboot or prompt; --no-end: stay). Plan format: docs/lab.md, or help(bitsnet.lab).
"""


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    no_end = "--no-end" in args
    args = [a for a in args if a != "--no-end"]
    if any(a.startswith("-") for a in args) or len(args) > 1:
        raise SystemExit(USAGE)
    try:
        url = plan_url(args[0] if args else os.environ.get("BITSNET_LAB"))
    except ValueError as exc:
        raise SystemExit("lab: %s\n%s" % (exc, USAGE))
    status, action = run(url)
    if not no_end:
        end(action)
    return status


if __name__ == "__main__":
    from bitsnet import lab as _module  # state in the module bitsnet.lab, not in __main__
    sys.exit(_module.main())
