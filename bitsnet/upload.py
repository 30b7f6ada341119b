"""bitsnet.upload: deliver results to the lab -- HTTP PUT or POST, with progress and retries.

    from bitsnet import upload
    url = upload.expand("http://lab:8080/results/{uuid}/{run}/{name}", upload.identity(),
                        name="junit.xml")
    upload.deliver(url, report.junit_xml(), content_type="application/xml")

Contents: ``identity`` (``bitsnet.machineid``'s), ``expand``, ``deliver``, ``deliver_file``,
``UploadError``.

URL templates (``expand``): ``{uuid}``, ``{serial}``, ``{product}``, ``{machine}`` (the best
of the three), ``{run}`` (this boot's run id) and ``{name}`` (what is uploaded) are replaced by
their values, percent-encoded as one path segment each (a product name has spaces, commas and
parentheses; a slash in a value cannot make a directory). Any other ``{word}`` is an error.

Delivery (``deliver``): one request per attempt, ``Content-Length`` known in advance (nginx's
WebDAV module, and most servers, want it for a PUT), the body sent in CHUNK-byte pieces; a body
of PROGRESS_MIN bytes or more reports its progress every tenth of the way through ``progress``
(one line each; default: printed on the console). A 2xx answer is success. What may pass --
a connection refused, reset or timed out, a name that does not resolve yet, an HTTP 408, 425,
429 or 5xx -- is retried after a pause that doubles from ``backoff`` seconds (at most
BACKOFF_MAX), ``retries`` times; each failed attempt is reported through ``progress``. Any
other answer (3xx, 4xx: the URL or the server's configuration is wrong, the same request will
not do better), and an error that is not the network's (a URL httplib refuses, a bug), end
it at once. When nothing more will be tried ``deliver`` raises
``UploadError`` with one line saying what was not delivered where and why: a result is never
dropped silently. No threads (BITS has none): the caller waits, the pauses included.
"""

from __future__ import absolute_import, print_function

import re
import sys

from bitsnet import clock, machineid

identity = machineid.identity
PY2 = sys.version_info[0] == 2
_text_type = unicode if PY2 else str  # type: ignore[name-defined]  # noqa: F821

CHUNK = 64 * 1024  # bytes per send: one of bitsnet's transmit pieces, a small share of the body each
PROGRESS_MIN = 256 * 1024  # bodies this large report progress (a smaller one takes < 1 s)
RETRIES = 5  # attempts after the first: with BACKOFF, 31 s of pauses ride out a lab restart
BACKOFF = 1.0  # s before the first retry, doubling ...
BACKOFF_MAX = 30.0  # ... up to this
TIMEOUT = 30.0  # s a connect, send or receive may wait
RETRY_STATUSES = (408, 425, 429)  # and every 5xx: the server may take it later
PLACEHOLDERS = ("uuid", "serial", "product", "machine", "run", "name")
_PLACEHOLDER = re.compile(r"\{(\w*)\}")
_sleep = None  # type: object   # time.sleep, looked up at first use; tests replace it


class UploadError(IOError):
    """A delivery that failed for good: ``str()`` is one line naming what, where and why.
    ``url``, ``size``, ``attempts``, ``status`` (the last HTTP status, or None), ``reason``."""

    def __init__(self, message, url=None, size=0, attempts=0, status=None, reason=None, code=None):
        IOError.__init__(self, message)
        self.message_text = message
        self.errno = code
        self.url, self.size, self.attempts, self.status, self.reason = url, size, attempts, status, reason

    def __str__(self):
        return self.message_text


def _quote(value):
    if PY2:
        from urllib import quote  # type: ignore[attr-defined,no-redef]
    else:
        from urllib.parse import quote  # type: ignore[no-redef]
    if isinstance(value, _text_type):
        value = value.encode("utf-8")
    return quote(value, safe="")


def expand(template, ident=None, name=None):
    """``template`` with its placeholders (module docstring) replaced; ``ident`` is an
    ``identity()`` dict (default: this machine's), ``name`` the value of ``{name}``. An unknown
    placeholder, or ``{name}`` without a name, raises ValueError."""
    ident = identity() if ident is None else ident
    values = dict(ident)
    if name is not None:
        values["name"] = name

    def value(match):
        key = match.group(1)
        if key not in PLACEHOLDERS:
            raise ValueError("unknown placeholder {%s} in URL template %r (known: %s)"
                             % (key, template, ", ".join("{%s}" % k for k in PLACEHOLDERS)))
        if values.get(key) is None:
            raise ValueError("URL template %r needs {%s}, which has no value here" % (template, key))
        return _quote(_text_type(values[key]) if not isinstance(values[key], bytes) else values[key])
    return _PLACEHOLDER.sub(value, template)


# --------------------------------------------------------------------------- one attempt
def _split(url):
    """(scheme, host, port, path) of an http or https URL; ValueError otherwise."""
    if PY2:
        from urlparse import urlsplit  # type: ignore[import-not-found,no-redef]
    else:
        from urllib.parse import urlsplit  # type: ignore[no-redef]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http:// or https:// URL: %r" % (url,))
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, parts.hostname, parts.port, path


def _http():
    if PY2:
        import httplib  # type: ignore[import-not-found]
        return httplib
    import http.client
    return http.client


def _native(text):
    """``text`` as the native str: on 2.7 a byte string, as BITS's console and its log (a
    StringIO that cannot join non-ASCII bytes with unicode) want everything printed."""
    if PY2 and isinstance(text, _text_type):
        return text.encode("ascii", "backslashreplace")
    if not PY2 and isinstance(text, bytes):
        return text.decode("ascii", "backslashreplace")
    return str(text)


def _one_line(text):
    return " ".join(_native(text).split()) or "(no detail)"


def _describe(exc):
    """One line for an exception of a failed attempt."""
    detail = getattr(exc, "strerror", None) or exc
    return _one_line("%s: %s" % (type(exc).__name__, _native(detail) if not isinstance(detail, str) else detail))


class _Attempt(object):
    """One request: connect, headers, the body in CHUNK pieces (with progress), the answer."""

    def __init__(self, method, url, data, content_type, timeout, headers, progress):
        self.method, self.url, self.data = method, url, data
        self.content_type, self.timeout, self.headers, self.progress = content_type, timeout, headers, progress

    def run(self):
        """(status, reason) of the answer; raises what the connection raised."""
        http = _http()
        scheme, host, port, path = _split(self.url)
        kind = http.HTTPSConnection if scheme == "https" else http.HTTPConnection
        conn = kind(host, port, timeout=self.timeout)
        try:
            conn.putrequest(self.method, path, skip_accept_encoding=True)
            conn.putheader("Content-Type", self.content_type)
            conn.putheader("Content-Length", str(len(self.data)))
            conn.putheader("User-Agent", "bitsnet.upload")
            for key, value in self.headers:
                conn.putheader(key, value)
            conn.endheaders()
            self._send_body(conn)
            response = conn.getresponse()
            response.read()  # the answer's body is not wanted; read so the close is clean
            return response.status, _one_line(response.reason or "")
        finally:
            conn.close()

    def _send_body(self, conn):
        size = len(self.data)
        report = self.progress is not None and size >= PROGRESS_MIN
        step = size // 10 or 1
        next_report = step
        sent = 0
        while sent < size:
            piece = self.data[sent:sent + CHUNK]
            conn.send(piece)
            sent += len(piece)
            if report and (sent >= next_report or sent == size):
                self.progress("upload: %s %s: %d of %d bytes (%d%%)" % (self.method, self.url, sent, size,
                                                                       sent * 100 // size))
                next_report = (sent // step + 1) * step


def _retryable_status(status):
    return status in RETRY_STATUSES or 500 <= status <= 599


def _say(line):
    print(line)


def deliver(url, data, method="PUT", content_type="application/octet-stream", retries=RETRIES,
            progress=_say, timeout=TIMEOUT, backoff=BACKOFF, headers=(), name=None):
    """Send ``data`` (bytes; text is sent as UTF-8) to ``url`` with ``method`` (PUT or POST);
    the module docstring says how it retries. ``progress``: a function taking one line (None:
    silent); ``headers``: (name, value) pairs added; ``name``: what the data is, for messages
    (default: the URL's last segment). Returns the HTTP status (2xx); raises UploadError when
    it was not delivered, ValueError for a URL that is not http(s)."""
    global _sleep
    if isinstance(data, _text_type):
        data = data.encode("utf-8")
    elif isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    method = method.upper()
    _split(url)  # a bad URL is the caller's error, not the lab's: raised now, never retried
    url = _native(url)
    label = _native(name or url.rstrip("/").rsplit("/", 1)[-1] or url)
    attempt = _Attempt(method, url, data, content_type, timeout, list(headers), progress)
    delay, attempts = float(backoff), 0
    status, reason, code = None, "", None
    started = clock.monotonic()
    while True:
        attempts += 1
        permanent = False
        try:
            status, reason = attempt.run()
        except (EnvironmentError, _http().HTTPException) as exc:
            status, reason, code = None, _describe(exc), getattr(exc, "errno", None)
            permanent = isinstance(exc, _http().InvalidURL)  # httplib refuses the URL itself
        except Exception as exc:  # a bug: asking again will not help
            status, reason, code, permanent = None, _describe(exc), None, True
        if status is not None and 200 <= status <= 299:
            if progress is not None and len(data) >= PROGRESS_MIN:
                progress("upload: %s %s: %d %s, %d bytes in %.1f s" % (method, url, status, reason, len(data),
                                                                      clock.monotonic() - started))
            return status
        what = reason if status is None else "HTTP %d %s" % (status, reason)
        final = permanent or attempts > retries or (status is not None and not _retryable_status(status))
        if final:
            raise UploadError(_one_line("upload: %s (%d bytes) not delivered: %s %s: %s (%d attempt%s)" % (
                label, len(data), method, url, what, attempts, "" if attempts == 1 else "s")),
                url=url, size=len(data), attempts=attempts, status=status, reason=what, code=code)
        if progress is not None:
            progress(_one_line("upload: %s %s failed (%s); retry %d of %d in %.1f s" % (
                method, url, what, attempts, retries, delay)))
        if _sleep is None:
            import time
            _sleep = time.sleep
        _sleep(delay)  # type: ignore[operator]
        delay = min(BACKOFF_MAX, delay * 2)


def deliver_file(template, path, name=None, content_type="application/octet-stream", **options):
    """Deliver the file at ``path`` (read whole: BITS's ``open`` reads the boot disk) to
    ``template`` expanded with ``{name}`` = ``name`` or the file's base name; ``options`` go
    to ``deliver``. A file that cannot be read raises UploadError too (nothing was sent)."""
    name = name or path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    url = expand(template, name=name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except EnvironmentError as exc:
        reason = _describe(exc)
        raise UploadError(_one_line("upload: %s not delivered: cannot read %s: %s" % (name, path, reason)),
                          url=url, code=getattr(exc, "errno", None), reason=reason)
    return deliver(url, data, content_type=content_type, name=name, **options)
