"""The name service of the socket module: what netdb.h and the resolver give a C program.

Contents: the tables a firmware has no /etc for (``SERVICES``, ``PROTOCOLS``, the local names
``HOSTS``) -- host arguments (``host_text``, ``host_address``) -- ``gethostname``,
``gethostbyname(_ex)``, ``gethostbyaddr`` -- ``getaddrinfo``, ``getnameinfo`` -- ``getservbyname``,
``getservbyport``, ``getprotobyname`` -- whether the firmware has IPv6 (``has_ipv6``,
``ipv6_available``, ``probe_ipv6``).

IP literals are read by ``bitsnet.inet`` with the forms glibc's getaddrinfo takes
(``inet.parse_ipv4(text, strict=False)``: "127.1", "0x7f.0.0.1", "010" is octal); names that are
not local go to ``bitsnet.dns``, imported on first use. Errors are ``errors.gaierror`` with
glibc's EAI_* codes and messages, as CPython raises them on Linux; ``_socket`` exports these
functions behind its error boundary (``errors.efi_boundary``).
"""

import sys

from bitsnet import errors, inet, pyarg
from bitsnet import family as families
from bitsnet.constants import (AF_INET, AF_INET6, AF_UNSPEC, AI_CANONNAME, AI_NUMERICHOST, AI_NUMERICSERV,
                               AI_PASSIVE, AI_V4MAPPED)
from bitsnet.constants import IPPROTO_ICMP, IPPROTO_IP, IPPROTO_TCP, IPPROTO_UDP, SOCK_DGRAM, SOCK_STREAM
from bitsnet.constants import NI_DGRAM, NI_NAMEREQD, NI_NUMERICHOST, NI_NUMERICSERV
from bitsnet.errors import (EAI_ADDRFAMILY, EAI_AGAIN, EAI_BADFLAGS, EAI_FAMILY, EAI_NONAME, EAI_SERVICE,
                            EAI_SOCKTYPE)

AI_KNOWN = 0x7ff  # every AI_* bit glibc accepts (AI_IDN... included); others: EAI_BADFLAGS

# The services table a firmware has no /etc/services for: name -> (port, protocols).
SERVICES = {
    "ftp": (21, ("tcp",)), "ssh": (22, ("tcp",)), "telnet": (23, ("tcp",)), "smtp": (25, ("tcp",)),
    "domain": (53, ("tcp", "udp")), "bootps": (67, ("udp",)), "bootpc": (68, ("udp",)),
    "tftp": (69, ("udp",)), "http": (80, ("tcp",)), "pop3": (110, ("tcp",)), "ntp": (123, ("udp",)),
    "imap": (143, ("tcp",)), "snmp": (161, ("udp",)), "ldap": (389, ("tcp",)), "https": (443, ("tcp",)),
    "syslog": (514, ("udp",)), "http-alt": (8080, ("tcp",)),
}
PROTOCOLS = {"ip": IPPROTO_IP, "icmp": IPPROTO_ICMP, "tcp": IPPROTO_TCP, "udp": IPPROTO_UDP}

# Names every firmware knows without DNS.
LOCALHOST = "127.0.0.1"
HOSTS = {"localhost": LOCALHOST, "localhost.localdomain": LOCALHOST}


# --- IPv6 in this firmware -----------------------------------------------------------------------
# CPython's has_ipv6 is a constant: "built with IPv6". Here it says whether the firmware has
# TCP6, which only the firmware knows, and bitsnet touches no firmware at import: it is False
# until ``probe_ipv6`` (bitsnet.install(): one LocateHandle for the TCP6 service binding -- no
# ConnectController, no DHCP) and kept current whenever an AF_INET6 socket or an AF_UNSPEC name
# lookup asks the NIC (``ipv6_available``). ``_socket.has_ipv6`` publishes it.
has_ipv6 = False


def ipv6_available():
    # type: () -> bool
    """Whether the NIC has TCP6 (asks the firmware; updates ``has_ipv6``)."""
    global has_ipv6
    from bitsnet import nic
    try:
        has_ipv6 = nic.default_nic().has_ipv6()
    except errors.error:
        has_ipv6 = False
    return has_ipv6


def probe_ipv6():
    """For bitsnet.install(): TCP6 service bindings present? One LocateHandle, nothing else."""
    global has_ipv6
    from bitsnet import nic
    has_ipv6 = False  # if the probe fails (no firmware to ask), the answer is no
    has_ipv6 = nic.ipv6_present()
    return has_ipv6


# --- Host arguments ------------------------------------------------------------------------------
def host_text(host, who="address"):
    """A host argument (str, bytes; unicode on 2.7) as str, checked as CPython's C code takes it
    for ``who`` -- the versions differ, and bitsnet follows the one it runs on:

    ``"getaddrinfo"``    text goes through the IDNA codec (3.x: str; 2.7: unicode), whose
                         label check raises UnicodeError for an empty or 64+-byte label; the
                         C string ends at a NUL
    ``"gethostbyname"``  (and _ex) 3.x: str through the IDNA codec; 2.7: ASCII only; a NUL is
                         TypeError
    ``"address"``        a socket address (getsockaddrarg): 3.x takes ASCII str as it is and
                         non-ASCII through IDNA; 2.7 unicode through IDNA; a NUL is TypeError
    """
    # bitsnet.dns only where it is needed: an import statement in a function costs ~110 us in
    # BITS even when the module is loaded (docs/performance.md section 7), and a connect on
    # 2.7 passes here twice (getaddrinfo, the socket address) with a str that needs no IDNA.
    py3 = sys.version_info[0] >= 3
    if isinstance(host, (bytes, bytearray)) and not isinstance(host, str):
        name = bytes(host).decode("ascii")  # 3.x bytes: no codec
        idna = False
    elif isinstance(host, str):
        name = host
        if py3:
            from bitsnet import dns
            idna = who != "address" or not dns.is_ascii(host)
        else:
            idna = False
    elif not py3 and isinstance(host, unicode):  # noqa: F821
        name = host
        idna = who != "gethostbyname"
    else:
        raise TypeError("str, bytes or bytearray expected, not %s" % type(host).__name__)
    if "\0" in name:
        if who == "getaddrinfo":
            name = name.split("\0")[0]  # CPython hands getaddrinfo(3) a C string: it ends at a NUL
        elif who == "address" and py3:
            raise TypeError("host name must not contain null character")
        else:
            raise TypeError("%s() argument 1 must be encoded string without null bytes, not %s"
                            % ("getsockaddrarg" if who == "address" else who, type(host).__name__))
    if idna:
        # BITS quirk: no "idna" codec (docs/bits-environment.md section 2.4): to_ascii makes its checks.
        from bitsnet import dns
        return dns.to_ascii(name, check_labels=True)
    if not isinstance(name, str):  # 2.7 unicode without IDNA: the default (ASCII) encoding
        return name.encode("ascii")
    return name


def host_address(host, passive=False):
    """Dotted quad for ``host``: "" (INADDR_ANY if ``passive``), literals, local names."""
    host = str(host)
    if host == "":
        return "0.0.0.0" if passive else LOCALHOST
    if host == "<broadcast>":
        return "255.255.255.255"
    literal = inet.parse_ipv4(host, strict=False)
    if literal is not None:
        return inet.format_ipv4(literal)
    return _resolve_name(host)


def _resolve_name(name):
    """A host name -> dotted quad: the local names (HOSTS), then bitsnet.dns (EAI_AGAIN when it cannot ask)."""
    address = HOSTS.get(name.lower().rstrip("."))
    if address is not None:
        return address
    try:
        from bitsnet import dns
        resolve = dns.resolve
    except (ImportError, AttributeError):
        raise errors.gai_error(EAI_NONAME)
    try:
        return resolve(name)
    except (errors.gaierror, errors.herror):
        raise
    except errors.error as exc:
        # No NIC, no address, DHCP silent: CPython's resolver says EAI_AGAIN, never a bare OSError.
        raise errors.gai_error(EAI_AGAIN, exc)


# --- Names and services ------------------------------------------------------------------------
def gethostname():
    """gethostname() -> string: the firmware has no name of its own; "localhost"."""
    return "localhost"


def gethostbyname(hostname):
    """gethostbyname(host) -> address: IP literals, "localhost", "" (0.0.0.0)."""
    return host_address(host_text(hostname, "gethostbyname"), passive=True)


def gethostbyname_ex(hostname):
    """gethostbyname_ex(host) -> (name, aliaslist, addresslist)"""
    name = host_text(hostname, "gethostbyname")
    if inet.parse_ipv4(name, strict=False) is not None or name.lower().rstrip(".") in HOSTS or not name:
        return name, [], [gethostbyname(name)]
    from bitsnet import dns
    answer = dns.lookup(name)
    return answer.name, list(answer.aliases), list(answer.addresses)


def gethostbyaddr(ip_address):
    """gethostbyaddr(host) -> (name, aliaslist, addresslist); only localhost is known."""
    address = gethostbyname(ip_address)
    if address == LOCALHOST:
        return "localhost", [], [address]
    from bitsnet import dns
    name, aliases = dns.reverse(address)
    return name, list(aliases), [address]


def _service_port(port, socktype, flags):
    if port is None:
        return 0
    if isinstance(port, pyarg.INT_TYPES):
        port = str(pyarg.integer(port, "", (-2 ** 63, 2 ** 63 - 1)))  # PyLong_AsLong, then passed on as text
    if isinstance(port, bytes) and not isinstance(port, str):
        port = port.decode("ascii")
    elif sys.version_info[0] >= 3:
        port.encode("utf-8")  # CPython encodes it: a lone surrogate is UnicodeEncodeError
    elif not isinstance(port, str):
        port = port.encode("ascii")  # 2.7 unicode
    port = str(port).split("\0")[0]  # CPython hands getaddrinfo(3) a C string: it ends at a NUL
    number = strtoul_port(port)
    if number is not None:
        if number < 0:
            raise errors.gai_error(EAI_SERVICE)
        return number
    if flags & AI_NUMERICSERV:
        raise errors.gai_error(EAI_NONAME)
    proto = "udp" if socktype == SOCK_DGRAM else "tcp"
    entry = SERVICES.get(port)
    if entry is None or (socktype and proto not in entry[1]):
        raise errors.gai_error(EAI_SERVICE)
    return entry[0]


def strtoul_port(text):
    """glibc's numeric service: strtoul(text, 10) with nothing after it, stored in an int
    (negative: refused) and used as a 16-bit port. None if ``text`` is not numeric."""
    if text == "":
        return 0  # strtoul stops at once, and the end of the string is "nothing after it"
    body = text.lstrip(" \t\n\v\f\r")
    sign = body[:1] if body[:1] in ("+", "-") else ""
    digits = body[len(sign):]
    if not digits or any(c not in "0123456789" for c in digits):
        return None
    value = min(int(digits), 2 ** 64 - 1)
    if sign == "-" and value != 2 ** 64 - 1:
        value = -value % 2 ** 64
    value &= 0xffffffff
    if value >= 2 ** 31:
        return -1
    return value & 0xffff


_literal_answers = {}  # type: dict   # getaddrinfo's answers for an address literal and a port number
_LITERALS_REMEMBERED = 64  # the table above starts afresh beyond this many


def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # type: (object, object, int, int, int, int) -> list
    """getaddrinfo(host, port [, family, type, proto, flags]) -> list of (family, type, proto,
    canonname, sockaddr)

    Literals of both families (an IPv6 one may carry "%scope_id"), "localhost", names through
    bitsnet.dns (A and, for AF_INET6 or AF_UNSPEC on a firmware with TCP6, AAAA: IPv6 first),
    and None or "" (the wildcard with AI_PASSIVE, otherwise loopback; IPv4 first); ports as
    numbers, numeric strings or service names (a built-in table)."""
    # An address literal with a port number -- every socket.create_connection((ip, port)) --
    # has one answer whatever the firmware says: kept, and a copy handed out, since the ~60
    # Python calls of the checks and the parse are ~0.3 ms of a connection in BITS
    # (docs/performance.md section 7). Only successful answers are kept.
    if host.__class__ is str and port.__class__ is int:
        key = (host, port, family, type, proto, flags)
        try:
            answer, cacheable = _literal_answers.get(key), True
        except TypeError:  # an unhashable argument: the checks below say what is wrong with it
            answer, cacheable = None, False
        if answer is not None:
            return list(answer)
        out = _getaddrinfo(host, port, family, type, proto, flags)
        if cacheable and (inet.parse_ipv4(host, strict=False) is not None or
                                inet.pack_ipv6(host.partition("%")[0]) is not None):
            if len(_literal_answers) >= _LITERALS_REMEMBERED:
                _literal_answers.clear()
            _literal_answers[key] = tuple(out)
        return out
    return _getaddrinfo(host, port, family, type, proto, flags)


def _getaddrinfo(host, port, family, type, proto, flags):
    """getaddrinfo() without the table of literal answers."""
    if host is not None and not isinstance(host, (str, bytes, bytearray)) and \
            not (sys.version_info[0] < 3 and isinstance(host, unicode)):  # type: ignore[name-defined]  # noqa: F821
        raise TypeError("getaddrinfo() argument 1 must be string or None")
    if port is not None and not isinstance(port, pyarg.INT_TYPES + (str, bytes, pyarg.UNICODE)):
        raise errors.error("Int or String expected")
    family, type, proto, flags = pyarg.integer(family), pyarg.integer(type), pyarg.integer(proto), pyarg.integer(flags)
    if host is None and port is None:
        raise errors.gai_error(EAI_NONAME)
    if flags & ~AI_KNOWN or (flags & AI_CANONNAME and host is None):
        raise errors.gai_error(EAI_BADFLAGS)  # glibc's first checks
    if family not in (AF_UNSPEC, AF_INET, AF_INET6):
        raise errors.gai_error(EAI_FAMILY)
    if type not in (0, SOCK_STREAM, SOCK_DGRAM):
        raise errors.gai_error(EAI_SOCKTYPE)
    if host is None and port is None:
        raise errors.gai_error(EAI_NONAME)
    if proto not in (0, IPPROTO_TCP, IPPROTO_UDP) and type == 0:
        raise errors.gai_error(EAI_SERVICE)
    if proto and type and (type, proto) not in ((SOCK_STREAM, IPPROTO_TCP), (SOCK_DGRAM, IPPROTO_UDP)):
        raise errors.gai_error(EAI_SOCKTYPE)
    port = _service_port(port, type, flags)
    if host is not None and not host:
        raise errors.gai_error(EAI_NONAME)  # glibc: "" is no name; None is
    if host is None:
        # IPv4 first, as glibc orders the wildcards; IPv6 only when the firmware has it (the
        # probe's answer: no firmware call here). EDK2 has no loopback interface (docs/edk2.md section 3.10),
        # so the non-passive answer matters on the simulator only; it is ordered the same way.
        wanted = [AF_INET, AF_INET6] if family == AF_UNSPEC else [family]
        addresses = [(af, families.of(af).wildcard if flags & AI_PASSIVE else families.of(af).loopback, 0)
                     for af in wanted if af == AF_INET or family == AF_INET6 or has_ipv6]
    else:
        addresses = _host_addresses(host_text(host, "getaddrinfo"), family, flags)
    canonname = str(host) if flags & AI_CANONNAME and host else ""
    kinds = [(SOCK_STREAM, IPPROTO_TCP), (SOCK_DGRAM, IPPROTO_UDP)]
    out = []  # type: list
    for af, address, scope in addresses:
        sockaddr = (address, port) if af == AF_INET else (address, port, 0, scope)
        out.extend((af, kind, number, "", sockaddr) for kind, number in kinds
                   if type in (0, kind) and proto in (0, number))
    if out and canonname:
        out[0] = out[0][:3] + (canonname,) + out[0][4:]  # glibc: only the first entry carries it
    return out


def _host_addresses(host, family, flags):
    """[(family, address, scope_id)] for a host name or literal, in the order to try them."""
    text, _, scope = host.partition("%")
    literal6 = inet.pack_ipv6(text) if ":" in text else None
    if literal6 is not None:
        if family == AF_INET:
            raise errors.gai_error(EAI_ADDRFAMILY)
        return [(AF_INET6, inet.format_ipv6(literal6), int(scope) if scope.isdigit() else 0)]
    if scope:
        raise errors.gai_error(EAI_NONAME)
    literal = inet.parse_ipv4(host, strict=False)
    if literal is not None:
        if family == AF_INET6:
            if flags & AI_V4MAPPED:
                return [(AF_INET6, "::ffff:" + inet.format_ipv4(literal), 0)]
            raise errors.gai_error(EAI_ADDRFAMILY)
        return [(AF_INET, inet.format_ipv4(literal), 0)]
    if flags & AI_NUMERICHOST:
        raise errors.gai_error(EAI_NONAME)
    local = host.lower().rstrip(".") in HOSTS
    if family == AF_INET or (family == AF_UNSPEC and (local or not ipv6_available())):
        # "localhost" under AF_UNSPEC: 127.0.0.1 only, as glibc answers from an /etc/hosts
        # without "::1 localhost" (a firmware has no loopback interface anyway, docs/edk2.md section 3.10).
        return [(AF_INET, _resolve_name(host), 0)]
    if family == AF_INET6:
        return [(AF_INET6, address, 0) for address in _resolve_names6(host)]
    # AF_UNSPEC on a firmware with IPv6: AAAA first (RFC 6724's default policy prefers IPv6),
    # then A; either may be missing; socket.create_connection tries them in this order.
    found = []
    failure = None
    for af, resolve in ((AF_INET6, _resolve_names6), (AF_INET, lambda name: [_resolve_name(name)])):
        try:
            found.extend((af, address, 0) for address in resolve(host))
        except errors.gaierror as exc:
            failure = exc  # if both fail, A's error is the one to report (as before IPv6)
    if not found:
        raise failure
    return found


def _resolve_names6(name):
    """The IPv6 addresses of a name: "localhost" is ::1; otherwise AAAA through bitsnet.dns."""
    if name.lower().rstrip(".") in HOSTS:
        return ["::1"]
    from bitsnet import dns
    try:
        return list(dns.lookup(name, dns.TYPE_AAAA).addresses)
    except (errors.gaierror, errors.herror):
        raise
    except errors.error as exc:
        raise errors.gai_error(EAI_AGAIN, exc)


def getnameinfo(sockaddr, flags):
    """getnameinfo(sockaddr, flags) -> (host, port): numeric host; service name if known."""
    if not isinstance(sockaddr, tuple):
        raise TypeError("getnameinfo() argument 1 must be a tuple")
    if not 2 <= len(sockaddr) <= 4:
        raise TypeError("getnameinfo(): illegal sockaddr argument")
    host, port = pyarg.text(sockaddr[0], "getnameinfo() argument 1"), pyarg.integer(sockaddr[1])
    flags = pyarg.integer(flags)
    scope_id = pyarg.integer(sockaddr[3], "", (0, 2 ** 32 - 1)) if len(sockaddr) > 3 else 0
    if len(sockaddr) > 2 and pyarg.integer(sockaddr[2], "", (-2 ** 31, 2 ** 32 - 1)) & 0xffffffff > 0xfffff:
        raise OverflowError("%s: flowinfo must be 0-1048575." % (  # CPython's "I", then the check
            "getnameinfo()" if sys.version_info >= (3, 7) else "getsockaddrarg"))
    literal6 = inet.ipv6_literal(host) if ":" in host else None
    if literal6 is None and len(sockaddr) != 2:
        raise errors.error("IPv4 sockaddr must be 2 tuple")
    port = strtoul_port(str(port))  # CPython resolves (host, "%d" % port) first
    if port < 0:
        raise errors.gai_error(EAI_SERVICE)
    if literal6 is not None:
        local = literal6 == "::1"
        if scope_id and literal6.startswith("fe80:"):
            literal6 += "%%%d" % scope_id  # glibc writes the interface name; EFI has only numbers
        host = literal6
    else:
        host = gethostbyname(host)
        local = host == LOCALHOST
    if flags & NI_NAMEREQD and not local:
        raise errors.gai_error(EAI_NONAME)
    if not flags & NI_NUMERICHOST and local:
        host = "localhost"
    service = str(port)
    if not flags & NI_NUMERICSERV:
        proto = "udp" if flags & NI_DGRAM else "tcp"
        for name, (number, protos) in sorted(SERVICES.items()):
            if number == port and proto in protos:
                service = name
                break
    return host, service


def getservbyname(servicename, protocolname=None):
    """getservbyname(servicename[, protocolname]) -> integer (from a built-in table)."""
    servicename = pyarg.text(servicename, "getservbyname() argument 1")
    if protocolname is not None:
        protocolname = pyarg.text(protocolname, "getservbyname() argument 2")
    entry = SERVICES.get(servicename)
    if entry is None or (protocolname and protocolname not in entry[1]):
        raise errors.error("service/proto not found")
    return entry[0]


def getservbyport(port, protocolname=None):
    """getservbyport(port[, protocolname]) -> string (from a built-in table)."""
    port = pyarg.integer(port)
    if not 0 <= port <= 0xffff:
        raise OverflowError("getservbyport: port must be 0-65535.")
    if protocolname is not None:
        protocolname = pyarg.text(protocolname, "getservbyport() argument 2")
    for name, (number, protos) in sorted(SERVICES.items()):
        if number == port and (not protocolname or protocolname in protos):
            return name
    raise errors.error("port/proto not found")


def getprotobyname(name):
    """getprotobyname(name) -> integer"""
    name = pyarg.text(name, "getprotobyname() argument")
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise errors.error("protocol not found")
