"""``python -m bitsnet.selftest``: does networking work on this board, and if not, why?

Usage at the boot prompt::

    python -m bitsnet.selftest [--peer HOST[:PORT] | --url URL] [--peer6 ADDR] [--timeout S]
                               [--listen-port P] [--listen-via HOST:PORT] [--verbose]

Without a peer it checks what the firmware offers and brings the address up. With ``--peer``
(a host running ``tools/lab.py``; ``HOST``, ``HOST:PORT``, ``[IPV6]:PORT`` or a bare IPv6
address) it also moves real traffic: a query to the lab's own DNS server, a TCP echo round trip
(also over IPv6, at an address the board can reach: ``--peer6``, derived from how the lab was
reached, or the lab's own -- else a SKIP saying why), a UDP echo, an HTTP download with its
throughput, and a connection from the lab to a socket listening here.
``--url`` only downloads that URL. Every check prints PASS, FAIL (the reason, and the EFI status
behind it where there is one) or SKIP (why); the last line is ``N passed, N failed, N skipped``
and the exit status is 1 when anything failed. Lines stay within an 80-column console.

It imports nothing BITS's Python lacks: ``lab.json`` is read by ``parse_json`` below (BITS has
no ``json``), and numbers are printed only as ``%d`` and ``%.Nf`` (docs/bits-environment.md section 10).
"""

from __future__ import print_function

import argparse
import errno
import hashlib
import os
import re
import sys
import textwrap

import efi

import bitsnet
from bitsnet import clock, efidefs

WIDTH = 80
DOWNLOAD_BYTES = 4 * 1024 * 1024  # big enough to measure, small enough for a slow board
ECHO_BYTES = 64 * 1024
LINGER_LIMIT = 10.0  # seconds for graceful closes (2 s TIME_WAIT each) to finish at the end

PROTOCOLS = [  # (short name, service GUID), in the order they are reported
    ("IP4Config2", efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID),
    ("TCP4", efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID),
    ("UDP4", efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID),
    ("DNS4", efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID),
    ("IP6Config", efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID),
    ("TCP6", efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID),
    ("UDP6", efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID),
]

QEMU_HOST = ("10.0.2.2", "fec0::2")  # QEMU user networking: the host (its loopback) as a guest sees it
QEMU_PREFIX6 = "fec0:"  # the IPv6 prefix slirp advertises to its guests (fec0::/64)

_clock = clock.monotonic  # bitsnet's one clock: deadlines handed to bitsnet are in it


class Fail(Exception):
    """The check failed; the message says why in a firmware engineer's words."""


class Skip(Exception):
    """The check could not run here; the message says why."""


def _explain(exc):
    """Words for an exception escaping a check (socket errors carry the EFI status in their text)."""
    if isinstance(exc, (Fail, Skip)):
        return str(exc)
    text = str(exc) or exc.__class__.__name__
    if getattr(exc, "errno", None) is not None and not text.startswith("["):
        text = "[Errno %s] %s" % (exc.errno, text)
    return "%s: %s" % (exc.__class__.__name__, text)


class Report(object):
    """Runs checks in order and prints one PASS/FAIL/SKIP line each, with details below."""

    def __init__(self, verbose=False, out=None):
        self.verbose = verbose
        self.out = out or sys.stdout
        self.counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        self.number = 0

    def say(self, text):
        for line in text.splitlines() or [""]:
            indent = " " * (len(line) - len(line.lstrip()) + 2)
            for piece in textwrap.wrap(line, WIDTH - 1, subsequent_indent=indent, break_on_hyphens=False) or [""]:
                self.out.write(piece + "\n")
        self.out.flush()

    def check(self, title, function, *args):
        """Run ``function(*args)``: its return value (text) is the detail; Fail/Skip say otherwise."""
        self.number += 1
        label = "%2d %s " % (self.number, title)
        # The line is written when the check ends: progress a check prints (DHCP) stays above it.
        start = _clock()
        result, detail, value = "PASS", "", None
        try:
            value = function(*args)
            detail = value if isinstance(value, (str, type(u""))) else ""
        except Skip as exc:
            result, detail = "SKIP", _explain(exc)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # any failure is reported, never a traceback on the console
            result, detail = "FAIL", _explain(exc)
            if self.verbose:
                import traceback
                traceback.print_exc(file=self.out)
        elapsed = "%.2f s" % (_clock() - start)
        dots = "." * max(1, WIDTH - 1 - len(label) - 5 - len(elapsed) - 1)
        self.out.write("%s%s %s %s\n" % (label, dots, result, elapsed))
        if detail:
            self.say("     " + detail.replace("\n", "\n     "))
        self.counts[result] += 1
        return value if result == "PASS" else None

    def summary(self):
        c = self.counts
        line = "%d passed, %d failed" % (c["PASS"], c["FAIL"])
        if c["SKIP"]:
            line += ", %d skipped" % c["SKIP"]
        self.say(line)
        return 1 if c["FAIL"] else 0


# --- The checks -------------------------------------------------------------------------------
def check_firmware():
    """What the firmware is and offers (bitsnet.fwreport); FAIL only when the firmware itself keeps
    the network stack from starting (no RNG on EDK2 since 2024, docs/edk2.md section 10.1)."""
    from bitsnet import fwreport
    lines, problem = fwreport.report()
    if problem:
        raise Fail("%s\n%s" % (problem, "\n".join(lines)))
    return "\n".join(lines)


def check_protocols():
    """Which network protocols the firmware offers, per handle (once the NICs are connected, as
    the first socket would connect them); FAIL with the cause if no NIC is usable."""
    from bitsnet import nic
    nic.find_all()
    per_handle = {}  # type: dict
    for name, guid in PROTOCOLS:
        try:
            handles = list(efi.locate_handles(guid))
        except efi.EFIException:
            continue
        for handle in handles:
            per_handle.setdefault(handle, []).append(name)
    lines = ["handle 0x%x: %s" % (h or 0, " ".join(names)) for h, names in sorted(per_handle.items())]
    usable = [names for names in per_handle.values() if "IP4Config2" in names and "TCP4" in names]
    if not usable:
        lines.append(nic.why_no_nic()[1])
        raise Fail("\n".join(lines))
    if not any("DNS4" in names for names in per_handle.values()):
        lines.append("no DNS4 (common: it ships only with HTTP boot); bitsnet resolves over UDP")
    return "\n".join(lines)


def check_nic():
    from bitsnet import ipconfig
    interfaces = ipconfig.interfaces()
    if not interfaces:
        raise Fail("no NIC with IP4 Config2 and TCP4, even after ConnectController")
    first = interfaces[0]
    return "%s MAC %s (%d interface%s)" % (first["name"], first["mac"], len(interfaces),
                                           "" if len(interfaces) == 1 else "s")


def check_timer():
    """The firmware timer must tick: MNP's receive polling and DHCP run from timer events. In
    BITS it is found stopped (its SMP start-up stops the local APIC timer): bitsnet restarts it
    once, as the first socket would, and that is a PASS with a note; FAIL if it stays dead."""
    from bitsnet import ipconfig
    if ipconfig.check_timer() == "restarted":  # raises (EIO, why and what to do) if dead
        return "stopped (BITS's SMP start-up), restarted; a 1 ms timer event fires now"
    return "a 1 ms timer event fired"


def check_address(timeout):
    from bitsnet import ipconfig
    before = ipconfig.current()
    start = _clock()
    info = ipconfig.ensure_configured(timeout)
    how = "already configured" if before is not None else "configured in %.2f s" % (_clock() - start)
    return "%s netmask %s, %s" % (info.address, info.netmask, how)


def check_gateway_and_dns():
    from bitsnet import ipconfig
    info = ipconfig.current()
    if info is None:
        raise Skip("no address")
    gateway = info.gateway or "none"
    dns = ", ".join(info.dns_servers) if info.dns_servers else "none (names will not resolve)"
    return "gateway %s; DNS servers %s" % (gateway, dns)


def check_ipv6_address(timeout):
    """IPv6 (SKIP without TCP6): the addresses IP6 Config has, SLAAC switched on if needed."""
    from bitsnet import ipconfig, nic
    the_nic = nic.default_nic()
    if not the_nic.has_ipv6():
        raise Skip("the firmware has no TCP6 on %s (built without NETWORK_IP6_ENABLE?): AF_INET6 sockets"
                   " fail with EAFNOSUPPORT" % the_nic.name)
    info = ipconfig.ensure_configured6(timeout)
    return "%s (all: %s)" % (info.address, ", ".join(info.addresses))


def _is_ipv6(host):
    return ":" in host


def _ipv6_target(peer_host, lab, peer6):
    """(address, why it is the one) for the IPv6 echo, or raises Skip saying why there is none.

    In order: ``--peer6``; the peer itself when it is IPv6; an address derived from how the lab
    was reached (a loopback peer: the lab shares this machine, so ::1; QEMU's user networking,
    the lab at 10.0.2.2 and this board in slirp's fec0::/64: the host's ::1 is fec0::2 there);
    the lab's own IPv6 addresses from lab.json."""
    if peer6:
        return peer6, "as --peer6 names it"
    if _is_ipv6(peer_host):
        return peer_host, "the --peer address"
    from bitsnet import ipconfig
    board = [a.lower() for a in ipconfig.current6().addresses]
    if lab.get("loopback6"):
        if peer_host.startswith("127."):
            return "::1", "the lab is on this machine's loopback (reached at %s)" % peer_host
        if peer_host == QEMU_HOST[0] and [a for a in board if a.startswith(QEMU_PREFIX6)]:
            return QEMU_HOST[1], ("QEMU user networking's name for the lab host's ::1 (the lab was reached "
                                  "at %s, this board is in fec0::/64)" % QEMU_HOST[0])
    global_board = [a for a in board if not a.startswith("fe80:")]
    if lab.get("addresses6"):
        if not global_board:
            raise Skip("the lab is at %s, but this board has only a link-local IPv6 address (no router "
                       "advertised a prefix): it cannot reach it" % ", ".join(lab["addresses6"]))
        return lab["addresses6"][0], "the lab's own address (lab.json)"
    hint = ""
    if peer_host == QEMU_HOST[0]:
        hint = " (under QEMU user networking the host is %s: --peer6 %s)" % (QEMU_HOST[1], QEMU_HOST[1])
    raise Skip("the lab gave no IPv6 address a board can reach (it listens on loopback, or its host has no "
               "IPv6 address beyond loopback and link-local); name one with --peer6 ADDR%s" % hint)


def check_tcp_echo6(socket, peer_host, lab, peer6, timeout):
    """TCP echo to the lab over IPv6, at an address the board can reach (``_ipv6_target``); SKIP
    when the lab offers none or the firmware has no TCP6."""
    if not lab.get("tcp_echo6"):
        raise Skip("the lab has no IPv6 echo (its host has no IPv6, or it is bound to one IPv4 address)")
    from bitsnet import nic
    if not nic.default_nic().has_ipv6():
        raise Skip("the firmware has no TCP6")
    address, why = _ipv6_target(peer_host, lab, peer6)
    detail = check_tcp_echo(socket, address, lab["tcp_echo6"], timeout)
    return "[%s]:%d, %s; %s" % (address, lab["tcp_echo6"], why, detail)


def check_lab_dns(socket, host, lab, timeout):
    """The lab's own DNS server (its port is in lab.json), asked over UDP with bitsnet's DNS codec:
    one of the lab's names must come back with the address lab.json gives for it, and a name
    it does not have as NXDOMAIN (rcode 3)."""
    from bitsnet import dnsmessage, entropy
    names = lab.get("names") or {}
    if not names or not lab.get("dns"):
        raise Skip("the lab serves no DNS names")
    server = (host, lab["dns"])
    family = socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    results = []
    wait = min(timeout, 5.0)
    try:
        name = sorted(names)[0]
        for qname, expected in ((name, names[name]), ("no-such-name." + name.partition(".")[2], None)):
            ident = entropy.getrandbits(16)
            sock.sendto(dnsmessage.build_query(ident, qname, dnsmessage.TYPE_A), server)
            deadline = _clock() + wait
            while True:
                try:
                    sock.settimeout(max(deadline - _clock(), 0.001))
                    data, source = sock.recvfrom(4096)
                except socket.timeout:
                    raise Fail("no answer from the lab's DNS at %s port %d for %s within %.0f s" % (
                        server + (qname, wait)))
                try:
                    rcode, _, records = dnsmessage.parse_response(data, ident, qname, dnsmessage.TYPE_A)
                    break
                except dnsmessage.DnsFormatError:
                    continue  # not the answer to this question: wait on
            addresses = [value for _, rtype, _, value in records if rtype == dnsmessage.TYPE_A]
            if expected is None:
                if rcode != dnsmessage.RCODE_NXDOMAIN:
                    raise Fail("%s: rcode %d %s, not NXDOMAIN (3)" % (qname, rcode, addresses))
                results.append("%s: no such name (NXDOMAIN)" % qname)
            else:
                if rcode != dnsmessage.RCODE_NOERROR or addresses != [expected]:
                    raise Fail("%s: rcode %d %s, lab.json says %s" % (qname, rcode, addresses, expected))
                results.append("%s -> %s" % (qname, addresses[0]))
    finally:
        sock.close()
    return "%s; answered by the lab's DNS at %s port %d" % ("; ".join(results), source[0], source[1])


def check_resolution(socket, names):
    results = []
    for name in names:
        try:
            results.append("%s -> %s" % (name, socket.gethostbyname(name)))
        except socket.gaierror as exc:
            raise Fail("%s did not resolve: %s" % (name, _explain(exc)))
    return "; ".join(results)


def _split_peer(peer, default_port=8080):
    """(host, port) of ``HOST``, ``HOST:PORT``, ``[IPV6]``, ``[IPV6]:PORT`` or a bare IPv6
    address (more than one colon, no brackets: no port); ValueError for anything else."""
    text = peer.strip()
    if "://" in text:  # BITSNET_LAB may be the URL of a lab's plan (bitsnet.lab): its host and port
        text = text.split("://", 1)[1].split("/", 1)[0]
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError("bad peer %r: [IPV6]:PORT expected" % peer)
        port = rest[1:]
    elif text.count(":") > 1:
        host, port = text, ""
    else:
        host, _, port = text.partition(":")
    if not host or (port and not port.isdigit()):
        raise ValueError("bad peer %r: HOST, HOST:PORT or [IPV6]:PORT expected" % peer)
    return host, int(port or default_port)


def check_lab(socket, peer, timeout):
    """GET /lab.json over a plain socket: proves TCP connect, send, receive and FIN."""
    try:
        body = _http_get(socket, peer, "/lab.json", timeout)[1]
    except socket.error as exc:
        if getattr(exc, "errno", None) == errno.ECONNREFUSED:
            raise Fail("nothing listens on %s:%d (connection refused): is tools/lab.py running there, "
                       "on that port, and not firewalled?" % peer)
        raise
    return parse_json(body.decode("ascii"))


# One JSON token: punctuation, a string, a number or a literal word.
_JSON_TOKEN = re.compile(r'\s*(?:([][{}:,])|"((?:[^"\\]|\\.)*)"|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(true|false|null))')
_JSON_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|.)')
_JSON_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_JSON_WORDS = {"true": True, "false": False, "null": None}


def _json_unescape(match):
    code = match.group(1)
    if code[0] == "u" and len(code) == 5:
        return (unichr if sys.version_info[0] == 2 else chr)(int(code[1:], 16))  # type: ignore[name-defined]  # noqa: F821
    return _JSON_ESCAPES.get(code, code)


def parse_json(text):
    """The value of a JSON document, as ``json.loads`` gives it (BITS's Python has no ``json``).

    Enough for ``lab.json``, which comes from our own lab: it checks that brackets match and
    that nothing follows the value, but not where commas and colons stand. No recursion (BITS's
    C stack is small): open containers are kept on a list."""
    stack = []  # type: list   # [container, key waiting for its value] per open { or [
    result = []  # type: list   # the top-level value, once complete
    pos = 0
    while not result:
        match = _JSON_TOKEN.match(text, pos)
        if match is None:
            raise ValueError("bad JSON at offset %d: %r" % (pos, text[pos:pos + 20]))
        pos = match.end()
        punct, string, number, word = match.groups()
        if punct in ("{", "["):
            stack.append([{} if punct == "{" else [], None])
            continue
        if punct in (":", ","):
            continue
        if punct is not None:  # } or ]
            if not stack or isinstance(stack[-1][0], dict) != (punct == "}"):
                raise ValueError("bad JSON at offset %d: unmatched %r" % (pos - 1, punct))
            value = stack.pop()[0]
        elif string is not None:
            value = _JSON_ESCAPE.sub(_json_unescape, string)
        elif number is not None:
            value = float(number) if any(c in number for c in ".eE") else int(number)
        else:
            value = _JSON_WORDS[word]
        if not stack:
            result.append(value)
        elif isinstance(stack[-1][0], list):
            stack[-1][0].append(value)
        elif stack[-1][1] is None:
            stack[-1][1] = value
        else:
            stack[-1][0][stack[-1][1]] = value
            stack[-1][1] = None
    if text[pos:].strip():
        raise ValueError("bad JSON at offset %d: trailing data" % pos)
    return result[0]


def _http_get(socket, peer, path, timeout):
    """A minimal HTTP/1.0 GET; returns (headers dict, body bytes)."""
    sock = socket.create_connection(peer, timeout)
    try:
        host = "[%s]" % peer[0] if _is_ipv6(peer[0]) else peer[0]
        sock.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)).encode("ascii"))
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    finally:
        sock.close()
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/") or lines[0].split()[1] != "200":
        raise Fail("HTTP GET %s answered %r" % (path, lines[0]))
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:]))
    return headers, body


def check_tcp_echo(socket, host, port, timeout):
    data = bytes(bytearray(i % 251 for i in range(ECHO_BYTES)))
    sock = socket.create_connection((host, port), timeout)
    try:
        start = _clock()
        sock.sendall(b"x")
        if sock.recv(1) != b"x":
            raise Fail("echo of one byte came back wrong")
        rtt = _clock() - start
        sock.sendall(data)
        received = bytearray()
        while len(received) < len(data):
            chunk = sock.recv(65536)
            if not chunk:
                raise Fail("peer closed after %d of %d bytes" % (len(received), len(data)))
            received += chunk
        if bytes(received) != data:
            raise Fail("echoed data differs from what was sent")
    finally:
        sock.close()
    return "round trip %.1f ms; %d KiB echoed intact" % (rtt * 1000, ECHO_BYTES // 1024)


def check_udp_echo(socket, host, port, timeout):
    try:
        sock = socket.socket(socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET, socket.SOCK_DGRAM)
    except socket.error as exc:
        raise Skip("UDP sockets are not available: %s" % _explain(exc))
    try:
        sock.settimeout(timeout)
        sock.sendto(b"bitsnet selftest", (host, port))
        data, source = sock.recvfrom(2048)
        if data != b"bitsnet selftest":
            raise Fail("UDP echo came back wrong: %r" % data[:40])
    finally:
        sock.close()
    return "datagram echoed by %s port %d" % source[:2]


def check_download(socket, peer, size, timeout):
    start = _clock()
    headers, body = _http_get(socket, peer, "/bytes/%d" % size, timeout)
    elapsed = max(_clock() - start, 1e-6)
    if len(body) != size:
        raise Fail("got %d of %d bytes" % (len(body), size))
    if headers.get("x-sha256") and hashlib.sha256(body).hexdigest() != headers["x-sha256"]:
        raise Fail("checksum mismatch: data was corrupted")
    return "%d bytes in %.2f s: %.2f MB/s, checksum good" % (size, elapsed, size / elapsed / 1e6)


def check_url(url, timeout):
    try:
        from urllib.request import urlopen
    except ImportError:  # Python 2.7
        from urllib2 import urlopen  # type: ignore
    start = _clock()
    body = urlopen(url, timeout=timeout).read()
    elapsed = max(_clock() - start, 1e-6)
    return "%d bytes in %.2f s (%.2f MB/s)" % (len(body), elapsed, len(body) / elapsed / 1e6)


def check_listen(socket, peer, address, timeout, listen_port=0, via=None):
    """A socket listening here (on ``listen_port``, 0: any), reached from the lab (GET
    /connect/HOST/PORT/TOKEN). ``via`` (host, port): where the lab must connect instead of this
    address and port -- the host side of a port forward (QEMU user networking's hostfwd), when
    the lab cannot reach this machine directly."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("", listen_port))
        listener.listen(1)
        port = listener.getsockname()[1]
        token = "bitsnet-%d" % port
        target = via or (address, port)
        _http_get(socket, peer, "/connect/%s/%d/%s" % (target[0], target[1], token), timeout)
        listener.settimeout(timeout)
        conn, source = listener.accept()
        try:
            conn.settimeout(timeout)
            got = b""
            while True:
                data = conn.recv(100)
                if not data:
                    break
                got += data
        finally:
            conn.close()
    finally:
        listener.close()
    if got != token.encode("ascii"):
        raise Fail("lab connected but sent %r" % got)
    how = " (the lab connected to %s:%d)" % target if via else ""
    return "port %d reached from %s%s" % (port, source[0], how)


def _kept_open():
    """(endpoints, EFI children, tokens) of sockets that stay open on purpose while the selftest
    runs: the running netconsole's (``python -m bitsnet.netconsole HOST -- bitsnet.selftest``)."""
    from bitsnet import events
    netconsole = sys.modules.get("bitsnet.netconsole")
    console = netconsole.active() if netconsole is not None else None
    sock = getattr(getattr(console, "sender", None), "sock", None)
    if sock is None:
        return 0, 0, 0
    try:
        endpoint = getattr(sock, "_sock", sock)._endpoint()  # 2.7's socket wraps the _socket one
    except Exception:  # closed meanwhile: nothing of it is held
        return 0, 0, 0
    return 1, 1, events.outstanding(endpoint)


def check_invariants():
    """Everything closed above must be released: no EFI child, token or event left behind
    (beyond what a running netconsole holds)."""
    from bitsnet import events, nic, tcp, udp
    deadline = _clock() + LINGER_LIMIT

    def live():
        return tcp.live_endpoints() + udp.live_endpoints() - _kept_open()[0]
    while live() and _clock() < deadline:
        tcp.reap()
        udp.reap()
        events.wait_until(lambda: False, _clock() + 0.05)
    kept_endpoints, kept_children, kept_tokens = _kept_open()
    problems = []
    if live():
        problems.append("%d sockets still closing" % live())
    children = nic.default_nic().children() - kept_children
    if children:
        problems.append("%d EFI children not destroyed" % children)
    tokens = events.outstanding() - kept_tokens
    if tokens:
        problems.append("%d EFI tokens still outstanding" % tokens)
    if problems:
        raise Fail("; ".join(problems))
    kept = " (the netconsole's socket stays open)" if kept_endpoints else ""
    return "no EFI child or token left%s; %d completions seen" % (kept, events.stats["completions"])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bitsnet.selftest",
                                     description="Check that networking works in this firmware.")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--peer", metavar="HOST[:PORT]", default=os.environ.get("BITSNET_LAB"),
                        help="a host running tools/lab.py (default port 8080; an IPv6 address as [ADDR]:PORT "
                             "or ADDR); default: $BITSNET_LAB, which efirun.py --lab sets (in BITS: "
                             "'set BITSNET_LAB=HOST:PORT' in GRUB)")
    target.add_argument("--url", help="only download this http:// URL")
    parser.add_argument("--listen-port", type=int, default=0, metavar="P",
                        help="port of the socket the lab connects to (default: any free port)")
    parser.add_argument("--listen-via", metavar="HOST:PORT",
                        help="where the lab connects to reach that socket, e.g. the host side of a QEMU "
                             "hostfwd to --listen-port (default: this machine's address and the port)")
    parser.add_argument("--peer6", metavar="ADDR",
                        help="the lab's IPv6 address for the IPv6 echo (default: derived from how the lab was "
                             "reached -- fec0::2 under QEMU user networking -- or lab.json's)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per step (default 30)")
    parser.add_argument("--verbose", action="store_true", help="tracebacks for failures")
    args = parser.parse_args(argv)
    try:
        peer = _split_peer(args.peer) if args.peer else None
        via = _split_peer(args.listen_via, args.listen_port) if args.listen_via else None
    except ValueError as exc:
        parser.error(str(exc))
    peer6 = args.peer6.strip("[]") if args.peer6 else None

    bitsnet.install()
    import socket
    report = Report(args.verbose)
    from bitsnet import events
    report.say("bitsnet %s selftest, Python %s on %s, events: %s" % (
        bitsnet.__version__, sys.version.split()[0], sys.platform, events.mode()))
    report.check("firmware", check_firmware)
    report.check("firmware network protocols", check_protocols)
    report.check("network interface", check_nic)
    report.check("firmware timer", check_timer)
    address = report.check("IPv4 address", check_address, args.timeout)
    if address is None:
        report.say("without an address nothing else can work")
        return report.summary()
    report.check("gateway and DNS servers", check_gateway_and_dns)
    report.check("IPv6 address", check_ipv6_address, min(args.timeout, 10.0))
    report.check("local name resolution", check_resolution, socket, ["localhost"])
    if args.url:
        report.check("download %s" % args.url[:40], check_url, args.url, args.timeout)
    elif peer is not None:
        shown = "[%s]:%d" % peer if _is_ipv6(peer[0]) else "%s:%d" % peer
        lab = report.check("TCP connect to lab %s" % shown, check_lab, socket, peer, args.timeout)
        if lab is not None:
            report.check("DNS query to the lab's server", check_lab_dns, socket, peer[0], lab, args.timeout)
            report.check("TCP echo", check_tcp_echo, socket, peer[0], lab["tcp_echo"], args.timeout)
            report.check("TCP echo over IPv6", check_tcp_echo6, socket, peer[0], lab, peer6, args.timeout)
            report.check("UDP echo", check_udp_echo, socket, peer[0], lab["udp_echo"], args.timeout)
            report.check("HTTP download", check_download, socket, peer, DOWNLOAD_BYTES, args.timeout)
            report.check("listening socket reached from lab", check_listen, socket, peer,
                         address.split()[0], args.timeout, args.listen_port, via)
    else:
        report.say("no --peer: traffic checks skipped\n"
                   "  (run tools/lab.py on a host, then --peer HOST:PORT)")
    report.check("socket layer released everything", check_invariants)
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
