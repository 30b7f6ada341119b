"""bitsnet.webrepl_http: the HTTP/1.x messages of ``bitsnet.webrepl``, and nothing else.

``parse_head`` turns the bytes of a request head into (method, target, version, headers) or
refuses them with ``BadRequest``; ``Request`` is one parsed request as the routes see it;
``http_response`` is the bytes of one answer; ``host_allowed`` is the DNS-rebinding check on
the Host header. No sockets, no clock, no state: the server loop that reads and writes the
bytes is ``bitsnet.webrepl.ReplServer``. It imports nothing BITS lacks.
"""

from __future__ import absolute_import

from bitsnet import inet


class BadRequest(Exception):
    """A request refused before it reaches the application: (status, reason)."""

    def __init__(self, status, reason):
        Exception.__init__(self, status, reason)
        self.status, self.reason = status, reason


_METHODS = ("GET", "POST", "HEAD")
# RFC 9110 5.6.2 token characters: what a header name may hold.
_TCHAR = frozenset(bytearray(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
_SINGLE = ("host", "origin", "content-length", "x-repl-token", "x-repl-session")  # at most once each
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 411: "Length Required", 413: "Payload Too Large",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
            505: "HTTP Version Not Supported"}


def _printable(data):
    return all(0x21 <= b < 0x7f for b in bytearray(data))


def is_decimal(text):
    """Whether ``text`` is one or more ASCII digits: what ``int()`` is then given. Not
    ``isdigit()``, which is true of superscripts and other scripts' digits that ``int()``
    refuses (``Content-Length: \xb2`` raised, the review's finding)."""
    return bool(text) and all("0" <= c <= "9" for c in text)


def parse_head(head):
    """(method, target, version, {lower-case name: value}) from the bytes before the blank
    line, all native ``str``; BadRequest for anything but plain HTTP/1.x in origin form
    (``/path?query``): no absolute URLs, no ``//``, no control bytes, no folded or repeated
    headers. Nothing here can raise anything else, whatever the bytes."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not all(parts) or not all(_printable(p) for p in parts):
        raise BadRequest(400, "malformed request line")
    method, target, version = [p.decode("ascii") for p in parts]
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(505 if version.startswith("HTTP/") else 400, "only HTTP/1.0 and HTTP/1.1")
    if method not in _METHODS:
        raise BadRequest(501 if method.isalpha() else 400, "method not supported")
    if not target.startswith("/") or target.startswith("//"):
        raise BadRequest(400, "the request target must be a path (origin form)")
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or not all(c in _TCHAR for c in bytearray(name)):
            raise BadRequest(400, "malformed header line")
        name = name.decode("ascii").lower()
        value = value.strip(b" \t")
        if any(b < 0x20 and b != 0x09 or b == 0x7f for b in bytearray(value)):
            raise BadRequest(400, "control character in a header")
        text = value.decode("latin-1")
        if name in headers:
            if name in _SINGLE:
                raise BadRequest(400, "repeated %s header" % name)
            text = headers[name] + ", " + text
        headers[name] = text
    return method, target, version, headers


def parse_query(query):
    """{name: value} of ``a=1&b=2`` (the first of a repeated name; no percent-decoding: every
    value the REPL takes is hex or decimal, and a token sent encoded simply does not match)."""
    params = {}
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        params.setdefault(name, value)
    return params


class Request(object):
    """One parsed request: what the routes look at, and ``reply`` to answer it."""

    def __init__(self, method, target, version, headers, client_address):
        self.command = method
        self.target = target
        self.version = version
        self.path, _, query = target.partition("?")
        self.query = parse_query(query)
        self.headers = headers
        self.client_address = client_address
        self.body = b""
        self.response = None  # type: bytes

    def header(self, name):
        return self.headers.get(name.lower(), "")

    def param(self, name, default=""):
        return self.query.get(name, default)

    def reply(self, status, body=b"", content_type="text/plain; charset=utf-8", headers=()):
        self.response = http_response(status, body, content_type, headers, self.command == "HEAD")


def http_response(status, body=b"", content_type="text/plain; charset=utf-8", headers=(), head_only=False):
    """The bytes of one HTTP/1.0 response (one request per connection: nothing to keep)."""
    if not isinstance(body, bytes):
        body = body.encode("utf-8")
    lines = ["HTTP/1.0 %d %s" % (status, _REASONS.get(status, "Error")),
             "Server: bitsnet-webrepl",
             "Content-Type: " + content_type,
             "Content-Length: %d" % len(body),
             "Cache-Control: no-store",
             "Referrer-Policy: no-referrer",  # the token is in the page's URL
             "X-Content-Type-Options: nosniff",
             "X-Frame-Options: DENY",  # no framing: no clicks on the console through another page
             "Content-Security-Policy: frame-ancestors 'none'",
             "Connection: close"]
    lines += ["%s: %s" % (name, value) for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)


def host_allowed(host, extra=()):
    """Whether a Host header names this machine in a way DNS rebinding cannot produce: an IP
    literal (IPv4 dotted quad, or IPv6 in brackets), ``localhost``, or a name the operator
    allowed (``--allow-host``). A rebinding attack needs the browser to send a name the
    attacker controls; a port forward (QEMU hostfwd, ssh -L) keeps an IP literal or localhost."""
    if host.startswith("["):
        literal, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and is_decimal(rest[1:]))):
            return False
        return bool(literal) and all(c in "0123456789abcdefABCDEF:." for c in literal) and ":" in literal
    name, colon, port = host.partition(":")
    if colon and not is_decimal(port):
        return False
    name = name.lower().rstrip(".")
    if name == "localhost" or name in extra:
        return True
    return inet.parse_ipv4(name, strict=True) is not None  # a dotted quad, as browsers send it
