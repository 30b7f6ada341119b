"""bitsnet.remote: programs and files from the lab over HTTP(S), with errors in one line.

``fetch(url)``
    the body of an ``http://`` or ``https://`` URL, through the standard library's client
    (``urllib2`` on 2.7, ``urllib.request`` on 3) over bitsnet's sockets. HTTPS is verified as
    ``bitsnet.ssl`` verifies: a default context, which loads the CA files ``bitsnet.ssl`` knows
    (``DEFAULT_CAFILES``: ``/boot/bitsnet/ca.pem``). Anything that goes wrong -- no route, refused,
    timed out, HTTP 404, a certificate that does not verify, a body over ``MAX_BODY`` -- is a
    ``FetchError`` whose text is one line naming the URL and the cause.
``fetch_program(url)`` -> ``Program``, and ``Program.run(argv)``
    ``python http://HOST/path/prog.py ARGS`` at the GRUB prompt (``bitsnet.launch``): the program
    is fetched (and checked: a zip must hold ``__main__.py``; ``FetchError`` otherwise), then run
    as ``__main__`` with ``sys.argv = [url] + argv``; the exit status is as with ``python -m``. A
    body that is a zip archive (by its signature, whatever the URL's name) runs its
    ``__main__.py`` with the archive's modules importable for the run (``bitsnet.zipmemory``:
    BITS's zipimport reads only files, and BITS has no writable disk).
``run_url(url, argv)``
    both, for a caller that wants a status only (``bitsnet.lab``): a fetch error prints its one
    line and gives ``FETCH_STATUS``.

Tracebacks through a fetched ``.py`` show its source lines: the source goes into ``linecache``
under the URL (with no modification time, so ``checkcache`` leaves it alone).
"""

from __future__ import absolute_import

import sys

FETCH_TIMEOUT = 30.0  # s per socket operation: a lab server answers in well under a second
MAX_BODY = 32 * 1024 * 1024  # bytes: a program or plan larger than this is a mistake, not a job
CHUNK = 64 * 1024
FETCH_STATUS = 2  # CPython's status for "can't open file"
SCHEMES = ("http://", "https://")


class FetchError(IOError):
    """A URL could not be fetched; ``str()`` is one line naming the URL and the cause."""


def is_url(text):
    return text.lower().startswith(SCHEMES)


def _one_line(text):
    return " ".join(str(text).split())


def _describe(exc):
    """The cause of a failed fetch, in words (urllib wraps socket and ssl errors in URLError)."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and hasattr(exc, "msg"):  # HTTPError
        return "HTTP %d %s" % (code, _one_line(exc.msg))
    reason = getattr(exc, "reason", None)
    if reason is not None and not isinstance(reason, str):
        exc = reason  # URLError(reason=socket.error / SSLError / socket.timeout)
    elif reason is not None:
        return _one_line(reason)
    text = _one_line(exc) or type(exc).__name__
    name = type(exc).__name__
    if name in ("timeout", "TimeoutError") and "timed out" not in text:
        text = "timed out"
    return text


def _urlopen():
    if sys.version_info[0] >= 3:
        from urllib.request import urlopen
    else:
        from urllib2 import urlopen  # type: ignore[import-not-found,no-redef]
    return urlopen


def fetch(url, timeout=None, limit=None):
    """The body of ``url`` as bytes; ``FetchError`` (one line) for any failure. ``timeout``
    (default FETCH_TIMEOUT) is per socket operation; ``limit`` (default MAX_BODY) in bytes."""
    timeout = FETCH_TIMEOUT if timeout is None else timeout
    limit = MAX_BODY if limit is None else limit
    if not is_url(url):
        raise FetchError("%s: not an http:// or https:// URL" % url)
    try:
        urlopen = _urlopen()
        if url.lower().startswith("https://"):
            from bitsnet import ssl as bitsnet_ssl
            response = urlopen(url, timeout=timeout, context=bitsnet_ssl.create_default_context())
        else:
            response = urlopen(url, timeout=timeout)
        try:
            pieces, size = [], 0
            while True:
                piece = response.read(CHUNK)
                if not piece:
                    break
                size += len(piece)
                if size > limit:
                    raise FetchError("%s: larger than %d bytes" % (url, limit))
                pieces.append(piece)
        finally:
            response.close()
    except FetchError:
        raise
    except Exception as exc:  # everything a client can raise, BITS's Ctrl-C KeyError included
        raise FetchError("%s: %s" % (url, _describe(exc)))
    return b"".join(pieces)


def _remember_source(url, source):
    """Let tracebacks show the fetched program's lines (linecache keeps entries without mtime)."""
    try:
        import linecache
        text = source.decode("utf-8", "replace") if sys.version_info[0] >= 3 else source
        lines = text.splitlines(True)
        linecache.cache[url] = (len(source), None, lines, url)
    except Exception:  # tracebacks without source lines are still tracebacks
        pass


class Program(object):
    """A fetched program: ``run(argv)`` runs it as ``__main__`` and returns the exit status."""

    def __init__(self, url, body):
        from bitsnet import zipmemory
        self.url = url
        self.body = body
        self.archive = None
        if zipmemory.is_zip(body):
            try:
                self.archive = zipmemory.ZipArchive(body, url)
                present = "__main__.py" in self.archive
            except ValueError as exc:
                raise FetchError(_one_line(exc))
            if not present:
                raise FetchError("%s: can't find '__main__' module in the archive" % url)

    def run(self, argv=()):
        from bitsnet import launch
        if self.archive is None:
            _remember_source(self.url, self.body)
            return launch.run_source(self.body, self.url, self.url, argv)
        from bitsnet import zipmemory
        filename = self.url + "/__main__.py"
        importer = zipmemory.MemoryImporter(self.archive).install()
        try:
            try:
                code = compile(self.archive.read("__main__.py"), filename, "exec", 0, True)
            except (SyntaxError, ValueError, TypeError):
                launch._print_traceback(0)
                return 1
            return launch._run_code(code, filename, self.url, argv, {"__loader__": importer, "__package__": ""})
        finally:
            importer.uninstall()


def fetch_program(url):
    """The program at ``url``, fetched and checked; ``FetchError`` (one line) if it cannot run."""
    return Program(url, fetch(url))


def run_url(url, argv=()):
    """Fetch ``url`` and run it as ``__main__``; the exit status (``FETCH_STATUS`` when the fetch
    failed, after one line on stderr)."""
    try:
        program = fetch_program(url)
    except FetchError as exc:
        sys.stderr.write("python: can't fetch %s\n" % exc)
        return FETCH_STATUS
    return program.run(argv)
