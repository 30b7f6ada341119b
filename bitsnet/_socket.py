"""The drop-in ``_socket``: what the standard ``socket.py`` of Python 2.7 and 3.x builds on.

Install it as ``sys.modules['_socket']`` (``bitsnet.install()`` does) and the stock ``socket``
module, and everything above it (httplib/http.client, urllib2/urllib.request, SocketServer,
BaseHTTPServer, selectors...), runs unchanged over the firmware's TCP4/UDP4 (and TCP6/UDP6)
protocols.

This module is the socket type and the fd table; the rest of the module's surface lives
beside it and is exported from here (it is the ``_socket`` module, so every name is here):

  bitsnet.constants  ``AF_*``, ``SOCK_*``, ``SOL_*``, ``SO_*``, ``TCP_*``, ``MSG_*``, ``SHUT_*``,
                     ``AI_*``, ``NI_*``: Linux's values, so code that compares them with numbers
                     it learnt elsewhere still works
  bitsnet.errors     ``error``, ``herror``, ``gaierror``, ``timeout`` (each Python version's
                     inheritance), ``EAI_*``, and the one error boundary (``efi_boundary``) that
                     every public function and method here is wrapped in
  bitsnet.netdb      ``getaddrinfo``, ``gethostbyname(_ex)``, ``gethostbyaddr``, ``gethostname``,
                     ``getnameinfo``, ``getservbyname/port``, ``getprotobyname``; ``has_ipv6``
  bitsnet.inet       ``inet_aton/ntoa``, ``inet_pton/ntop``, ``hton*/ntoh*``
  bitsnet.pyarg      CPython's argument checks (the TypeError/OverflowError a wrong argument gets)
  bitsnet.socketpair the in-memory endpoint behind ``socketpair()``

Here, in file order:

  the fd table   ``fileno()`` numbers (from ``FIRST_FD`` on, never reused) -> ``_Descriptor``
                 (one endpoint, shared by ``dup()``); ``select.py`` resolves fds here
  ``socket``     the socket type. It is the base class of 3.x's ``socket.socket`` (``__slots__``
                 without ``__weakref__``, ``family``/``type``/``proto`` as properties,
                 ``fileno=`` adopts an fd, ``_accept()`` returns ``(fd, address)``) and the
                 ``_sock`` inside 2.7's ``_socketobject`` (``accept()`` returns
                 ``(socket, address)``; dropping it closes it, because 2.7's ``close()`` only
                 drops the reference)
  functions      ``get/setdefaulttimeout``, ``dup``, ``fromfd``, ``close``, ``socketpair``; then
                 the public surface: netdb's and inet's functions behind the error boundary

Waiting. Every endpoint method is a non-blocking primitive (``bitsnet/tcp.py``); a blocking
call here is "try; if it would block, ``events.wait_until(ready, deadline, poll=ep.progress)``;
try again". The deadline is our own monotonic timer, so ``settimeout`` works whatever timeouts
the firmware has (EDK2 cannot time a connect out in less than 60 s, docs/edk2.md section 3.9). Nothing drives
the firmware between a program's calls, so a non-blocking call Polls once (``_progress``) before
it answers EAGAIN or EINPROGRESS. The call's deadline also reaches the waits below the socket --
DHCP, SLAAC, EFI_NO_MAPPING retries -- as the ``deadline`` argument of the endpoint's ``bind``,
``connect_start``, ``connect`` and ``sendto``; a non-blocking connect whose address is still
coming answers EINPROGRESS and connects later (``TcpEndpoint.connect_later``). One thread at a
time: a second thread entering while another is inside gets a RuntimeError (``_enter``).

Half-close: none in EFI TCP (docs/edk2.md section 3.3 Close); what ``shutdown`` does instead is
``TcpEndpoint.shutdown``'s (tcp.py's docstring).

IPv6. AF_INET6 sockets run over EFI_TCP6/UDP6 when the NIC has them (``has_ipv6``; otherwise
``socket(AF_INET6)`` fails with EAFNOSUPPORT, as on a Linux without IPv6), with Python's
(host, port, flowinfo, scope_id) tuples; what differs between the families is in ``family.py``.
EFI's IPv4 and IPv6 stacks are separate drivers, so an AF_INET6 socket never carries IPv4:
IPV6_V6ONLY reads 1 and setting it to 0 fails (EOPNOTSUPP), which makes
``socket.has_dualstack_ipv6()`` False and leaves http.server's DualStackServer serving IPv6.

``send(MSG_OOB)`` is a Transmit with EFI's Urgent flag; EDK2 delivers urgent data inline, so
``recv(MSG_OOB)`` is EINVAL (Linux's answer when no urgent byte is waiting). Not supported (the
error CPython gives for an unsupported feature): unknown socket options (ENOPROTOOPT), ancillary
data (EOPNOTSUPP), AF_UNIX and raw sockets (EAFNOSUPPORT / EPROTONOSUPPORT).
"""

from __future__ import absolute_import

import collections as _collections
import errno as _errno
import struct as _struct
import sys as _sys

from bitsnet import clock as _clock
from bitsnet import errors as _errors
from bitsnet import events as _events
from bitsnet import family as _families
from bitsnet import inet as _inet
from bitsnet import netdb as _netdb
from bitsnet import pyarg as _pyarg
from bitsnet import socketpair as _socketpair

from bitsnet.constants import *  # noqa: F401,F403   # AF_*, SOCK_*, SO_*, MSG_*, AI_*, NI_*...: Linux's values
from bitsnet.constants import AF_INET, AF_INET6, IPPROTO_IPV6, IPPROTO_TCP, IPPROTO_UDP, IPV6_V6ONLY
from bitsnet.constants import IPV6_TCLASS, IPV6_UNICAST_HOPS
from bitsnet.constants import IP_TOS, IP_TTL, IPPROTO_IP, SOCK_DGRAM, SOCK_RAW, SOCK_STREAM, SOMAXCONN
from bitsnet.constants import MSG_DONTWAIT, MSG_OOB, MSG_PEEK, MSG_TRUNC, MSG_WAITALL, SHUT_RD, SHUT_RDWR, SHUT_WR
from bitsnet.constants import SO_ACCEPTCONN, SO_BROADCAST, SO_ERROR, SO_KEEPALIVE, SO_LINGER, SO_RCVBUF
from bitsnet.constants import SO_REUSEADDR, SO_SNDBUF, SO_TYPE, SOL_SOCKET, TCP_MAXSEG, TCP_NODELAY
from bitsnet.errors import EAI_ADDRFAMILY, EAI_AGAIN, EAI_BADFLAGS, EAI_FAIL, EAI_FAMILY  # noqa: F401
from bitsnet.errors import EAI_MEMORY, EAI_NONAME, EAI_SERVICE, EAI_SOCKTYPE, EAI_SYSTEM  # noqa: F401

error = _errors.error
herror = _errors.herror
gaierror = _errors.gaierror
timeout = _errors.timeout

# CPython's has_ipv6 is a constant: "built with IPv6"; here it is whether the firmware has TCP6,
# False until bitsnet.install() probes (see netdb.has_ipv6, whose answer this publishes: it is
# copied after every call that may have asked the NIC). socket.py copies it when it is
# imported, which install() arranges to happen after the probe.
has_ipv6 = False

_TYPE_FLAGS = 0o4000 | 0o2000000  # SOCK_NONBLOCK | SOCK_CLOEXEC: Linux takes them in ``type``
_SOCK_MAX = 11  # Linux: socket types 0..10 exist; others are EINVAL

# select() refuses int descriptors from here on (CPython: ValueError); bitsnet's own fds are
# above it after a few sockets and always accepted (they are never handed to an OS).
FD_SETSIZE = 1024

# fileno() numbers start high so they are never mistaken for stdin/stdout/stderr (or any real
# fd on a host) and are never reused: a stale number cannot name a newer socket.
FIRST_FD = 1000

_default_timeout = [None]  # type: list   # setdefaulttimeout(); None = blocking

_INT_TYPES = _pyarg.INT_TYPES
_NO_ADDRESS = object()  # sendto()'s address left out


def _error(err, detail=None):
    return _errors.socket_error(err, detail)


# --- Argument checks: the exceptions CPython's argument parsing raises (bitsnet/pyarg.py) -------
_int = _pyarg.integer
_size_arg = _pyarg.size
_bytes_arg = _pyarg.bytes_copy
_send_buffer = _pyarg.send_buffer
_omitted = _pyarg.omitted
_C_LONG = _pyarg.C_LONG
_DEFAULT_ARG = _pyarg.DEFAULT_ARG
# CPython allocates recv()'s result before it looks at the socket: sizes within this many bytes
# of SSIZE_MAX (the bytes/str object header, x64) are OverflowError, other huge ones MemoryError.
_BYTES_HEADER = 33 if _sys.version_info[0] >= 3 else 37
_MAX_RECV = _pyarg.SSIZE_MAX - _BYTES_HEADER
_NOT_STREAM_RECV_FLAGS = ~(MSG_PEEK | MSG_DONTWAIT | MSG_WAITALL)  # any of these: EOPNOTSUPP
# A recv() or recvfrom() up to this size hands over the received bytes without allocating a
# result first; a larger one allocates as CPython does, so absurd sizes raise MemoryError too.
_UNCOPIED_RECV_MAX = 1 << 24


def _progress(endpoint):
    """Let the stack move once (Poll, completions) before a non-blocking call or a readiness
    query answers "not yet" (docs/architecture.md section 6.1): nothing else drives the firmware between a
    program's calls, so without it a non-blocking loop would see EAGAIN for ever. One Poll:
    cheap, and only paid on the would-block path. Returns True."""
    endpoint.progress()
    return True


# --- One thread at a time (docs/architecture.md section 7) ----------------------------------------
# bitsnet is not thread-safe and need not be: firmware Python has no threads. On a host a second
# thread entering while another is inside would corrupt the registries (events, endpoints), so it
# is refused with a RuntimeError that names the rule. Cheap: one get_ident() per call. BITS has
# no thread module: there the check is off (there is no second thread).
try:
    from _thread import get_ident as _get_ident
except ImportError:
    try:
        from thread import get_ident as _get_ident  # type: ignore[no-redef]  # 2.7 on a host
    except ImportError:
        _get_ident = None  # type: ignore[assignment]
_inside = _events.entered  # [the thread inside bitsnet's socket layer, how deep]
# A socket object may be finalized on any thread: the cyclic garbage collector runs on whichever
# thread allocates (a test's peer thread, the simulator's firmware threads), and its __del__ must
# not enter the firmware there. It queues the fd instead; the next thread that enters releases it.
_HOME_THREAD = _get_ident() if _get_ident is not None else None  # the thread that imported bitsnet
_deferred_closes = _collections.deque()  # type: _collections.deque   # fds whose object died elsewhere


def _enter():
    """Mark the calling thread as inside; RuntimeError if another thread is (see above)."""
    if _get_ident is None:
        return
    me = _get_ident()
    owner = _inside[0]
    if owner is not None and owner != me:
        raise RuntimeError("bitsnet is not thread-safe: a socket call from thread %d while thread %d is inside"
                           " bitsnet; use bitsnet's sockets from one thread at a time" % (me, owner))
    _inside[0] = me
    _inside[1] += 1
    if _deferred_closes:
        _close_deferred()


def _close_deferred():
    """Release the fds of socket objects finalized on another thread (see _deferred_closes)."""
    while _deferred_closes:
        try:
            _release(_deferred_closes.popleft())
        except Exception:
            pass  # as a close() from __del__: nobody to tell


def _finalized_elsewhere():
    """Whether a __del__ running now must leave the firmware alone: it runs on a thread other
    than bitsnet's home thread, or while another thread is inside bitsnet (BITS: never)."""
    if _get_ident is None:
        return False
    me = _get_ident()
    return me != _HOME_THREAD or _inside[0] not in (None, me)


def _leave():
    if _get_ident is None:
        return
    _inside[1] -= 1
    if _inside[1] <= 0:
        _inside[0] = None
        _inside[1] = 0


def _efi_guarded(method):
    """A socket method behind the error boundary (``errors.efi_boundary``: an ``efi.EFIException``
    from a layer below becomes ``error``, docs/architecture.md section 13 rule 4), refusing a
    second thread's concurrent entry (``_enter``) -- where there can be one: BITS has no threads,
    and there the two calls per socket call are left out (a round trip makes four;
    docs/performance.md section 7)."""
    if _get_ident is None:
        return _errors.efi_boundary(method)
    return _errors.efi_boundary(method, _enter, _leave)


_boundary = _errors.efi_boundary  # module functions that never reach the firmware: the translation only


# --- The fd table ------------------------------------------------------------------------------
class _Descriptor(object):
    """What an fd names: one endpoint, plus the state that belongs to it rather than to a
    socket object (``dup()`` shares it; timeouts are per socket object, as in CPython)."""

    __slots__ = ("endpoint", "family", "type", "proto", "refs", "connect_pending", "wildcard")

    def __init__(self, endpoint, family, type, proto):
        self.endpoint = endpoint
        self.family = family
        self.type = type
        self.proto = proto
        self.refs = 1  # fds naming this descriptor
        # The socket layer's, not the endpoint's (Linux: struct socket's SS_CONNECTING, not sk_state):
        # which connect() reports the outcome depends on the calls and their timeouts, never seen below.
        self.connect_pending = False  # a non-blocking connect not yet reported by a later connect
        self.wildcard = False  # bound to INADDR_ANY / in6addr_any: getsockname says so until connected


_fds = {}  # type: dict   # fd -> _Descriptor
_next_fd = [FIRST_FD]


def _register(descriptor):
    fd = _next_fd[0]
    _next_fd[0] += 1
    _fds[fd] = descriptor
    return fd


def _release(fd):
    """Forget ``fd``; the endpoint closes when no fd names it any more (graceful unless
    SO_LINGER was set to 0 seconds). Never blocks: the endpoint finishes in the background."""
    descriptor = _fds.pop(fd, None)
    if descriptor is None:
        return
    descriptor.refs -= 1
    if descriptor.refs <= 0:
        descriptor.endpoint.close()  # it honours its own SO_LINGER (the endpoint keeps it)


def lookup(fd):
    """The descriptor ``fd`` names, or None (select.py's way into the table)."""
    return _fds.get(fd)


def _publish_ipv6():
    """Copy netdb's answer to "has the firmware TCP6?" into ``has_ipv6``."""
    global has_ipv6
    has_ipv6 = _netdb.has_ipv6


def _ipv6_available():
    # type: () -> bool
    """Whether the NIC has TCP6 (asks the firmware; updates ``has_ipv6``)."""
    try:
        return _netdb.ipv6_available()
    finally:
        _publish_ipv6()


def _probe_ipv6():
    """For bitsnet.install(): TCP6 service bindings present? One LocateHandle, nothing else."""
    try:
        return _netdb.probe_ipv6()
    finally:
        _publish_ipv6()


def _new_endpoint(family, type, proto):
    """The endpoint class for (family, type), imported on first use (no firmware at import)."""
    family, type, proto = _int(family), _int(type), _int(proto)
    if type & ~0xf & ~_TYPE_FLAGS or not 0 <= type & 0xf < _SOCK_MAX:
        raise _error(_errno.EINVAL)  # Linux (__sys_socket, __sock_create): unknown flags or type
    type &= 0xf
    if not 0 <= proto <= 255 and family in (AF_INET, AF_INET6):
        raise _error(_errno.EINVAL)  # Linux: an impossible protocol number
    if family not in (AF_INET, AF_INET6):
        raise _error(_errno.EAFNOSUPPORT)
    if type == SOCK_RAW:  # as Linux answers an unprivileged program; EFI has no raw sockets at all
        raise _error(_errno.EPERM if proto else _errno.EPROTONOSUPPORT)
    if type not in (SOCK_STREAM, SOCK_DGRAM):
        raise _error(_errno.ESOCKTNOSUPPORT)  # Linux inet_create: no such type for AF_INET
    if family == AF_INET6 and not _ipv6_available():
        # What Linux booted with ipv6.disable=1 says: the firmware has no TCP6/UDP6 on the NIC.
        raise _error(_errno.EAFNOSUPPORT, "Address family not supported by protocol (no EFI TCP6 in this firmware)")
    fam = _families.of(family)
    if type == SOCK_STREAM:
        if proto not in (0, IPPROTO_TCP):
            raise _error(_errno.EPROTONOSUPPORT)
        return _endpoint_class("tcp", "TcpEndpoint")(fam)
    if proto not in (0, IPPROTO_UDP):  # SOCK_DGRAM (the type was checked above)
        raise _error(_errno.EPROTONOSUPPORT)
    return _endpoint_class("udp", "UdpEndpoint")(fam)


_endpoint_modules = {}  # type: dict   # bitsnet.tcp and bitsnet.udp once imported, by name


def _endpoint_class(module, name):
    """bitsnet.tcp.TcpEndpoint or bitsnet.udp.UdpEndpoint, the module imported at the first
    socket: an import statement costs ~110 us in BITS every time it runs, even for a module
    already loaded (docs/performance.md section 7)."""
    loaded = _endpoint_modules.get(module)
    if loaded is None:
        __import__("bitsnet." + module)
        loaded = _endpoint_modules[module] = _sys.modules["bitsnet." + module]
    return getattr(loaded, name)


def _check_timeout(value):
    """settimeout()/setdefaulttimeout() argument -> None or a float >= 0."""
    value = _pyarg.seconds(value)
    if value is not None and value < 0.0:
        raise ValueError("Timeout value out of range")
    return value


@_boundary
def getdefaulttimeout():
    """getdefaulttimeout() -> timeout

    Returns the default timeout in seconds (float) for new socket objects.
    A value of None indicates that new socket objects have no timeout."""
    return _default_timeout[0]


@_boundary
def setdefaulttimeout(timeout):
    """setdefaulttimeout(timeout)

    Set the default timeout in seconds (float) for new socket objects.
    A value of None indicates that new socket objects have no timeout."""
    _default_timeout[0] = _check_timeout(timeout)


# --- Addresses ---------------------------------------------------------------------------------
def _port_number(port, who):
    port = _int(port)
    if not 0 <= port <= 0xffff:
        raise OverflowError("%s: port must be 0-65535." % who)
    return port


def _inet_address(address, who):
    """An AF_INET socket address tuple -> ("a.b.c.d", port), resolving the host as CPython does
    (``""`` is INADDR_ANY, ``"<broadcast>"`` INADDR_BROADCAST, names through gethostbyname)."""
    if not isinstance(address, tuple):
        raise TypeError("%s(): AF_INET address must be tuple, not %s" % (who, type(address).__name__))
    if len(address) != 2:
        raise TypeError("AF_INET address must be a pair (host, port)")
    host, port = address
    host = _text(host)
    port = _port_number(port, who + "()")
    return _host_address(host, passive=True), port


def _inet6_address(address, who):
    """An AF_INET6 socket address (host, port[, flowinfo[, scope_id]]) -> (host, port), as
    CPython checks it; names resolve to their AAAA address. flowinfo and scope_id are checked
    and then dropped: EFI_TCP6/UDP6 have neither (one NIC, no flow labels)."""
    if not isinstance(address, tuple):
        raise TypeError("%s(): AF_INET6 address must be tuple, not %s" % (who, type(address).__name__))
    if not 2 <= len(address) <= 4:
        raise TypeError("AF_INET6 address must be a tuple (host, port[, flowinfo[, scopeid]])")
    host, port = _text(address[0]), _port_number(address[1], who + "()")
    flowinfo = _int(address[2]) if len(address) > 2 else 0
    if len(address) > 3:
        _int(address[3], "", (0, 2 ** 32 - 1))
    if not 0 <= flowinfo <= 0xfffff:
        raise OverflowError("%s(): flowinfo must be 0-1048575." % who)
    if host == "":
        return "::", port
    literal = _inet.ipv6_literal(host)
    if literal is not None:
        return literal, port
    # As bytes: an address's name takes no IDNA step in getaddrinfo (host_text made its own).
    return _netdb.getaddrinfo(host.encode("ascii") if str is not bytes else host, port, AF_INET6)[0][4][0], port


def _sockaddr(family, address, who):
    """A socket address of ``family`` -> the (host, port) an endpoint takes: the one place an
    address is checked (CPython's errors) and made a canonical literal of the family (names
    resolved); the endpoints and family.py trust what comes out of here."""
    if family == AF_INET6:
        return _inet6_address(address, who)
    return _inet_address(address, who)


_text = _netdb.host_text
_host_address = _netdb.host_address


# --- Socket options: one table -----------------------------------------------------------------
# Every option is a row of _OPTIONS: (level, optname) -> _Option(family, type, shape, read, write).
# family/type: the sockets it applies to (None: any); any other socket gets ENOPROTOOPT, as an
# unknown option does (Linux). shape: the C value, struct "i" (an int may be given) or "ii"
# (struct linger: bytes only). read(sock, endpoint) -> the value (an int; "ii": a pair);
# write(sock, endpoint, value) sets it (None: read-only, ENOPROTOOPT as for an unknown option).
# An option an endpoint does not keep (KeyError from get_option/set_option) is ENOPROTOOPT too.
_Option = _collections.namedtuple("_Option", "family type shape read write")


def _no_option(name):
    raise _error(_errno.ENOPROTOOPT)


def _endpoint_option(name, convert):
    """(read, write) of the endpoint's option ``name``; ``convert(sock, value)`` -> what is kept."""
    def read(sock, endpoint):
        try:
            return int(endpoint.get_option(name))
        except KeyError:  # an option of the other protocol (TCP_NODELAY on a UDP socket...)
            _no_option(name)

    def write(sock, endpoint, value):
        try:
            endpoint.set_option(name, convert(sock, value))
        except KeyError:
            _no_option(name)
    return read, write


def _boolean(sock, value):
    return int(value != 0)


def _integer(sock, value):
    return value


def _hop_limit(sock, value):
    """IP_TTL/IPV6_UNICAST_HOPS as Linux takes them: -1 is the default (64, what Linux reports
    and bitsnet configures), otherwise 1-255 (IPv6: 0-255) or EINVAL."""
    if value == -1:
        return 64
    if not (1 if sock._family == AF_INET else 0) <= value <= 255:
        raise _error(_errno.EINVAL)
    return value


def _traffic_class(sock, value):
    """IP_TOS/IPV6_TCLASS as Linux takes them: IPv4's TOS is cut to a byte, IPv6's class is -1
    (0) or 0-255 (else EINVAL); on TCP the two ECN bits are the stack's own, kept out."""
    if sock._family == AF_INET:
        value &= 0xff
    elif value == -1:
        value = 0
    elif not 0 <= value <= 255:
        raise _error(_errno.EINVAL)
    return value & ~3 if sock._type == SOCK_STREAM else value


def _read_linger(sock, endpoint):
    linger = endpoint.get_option("linger")  # the endpoint's: its close() honours it (tcp.py)
    return (0, 0) if linger is None else (int(bool(linger[0])), int(linger[1]))


def _write_linger(sock, endpoint, value):
    endpoint.set_option("linger", (int(value[0] != 0), value[1]))  # (1, 0): close() resets (RST)


def _read_error(sock, endpoint):
    _progress(endpoint)  # docs/architecture.md section 6.1: a connect or a send may have failed meanwhile
    return endpoint.take_error()  # and clears it, as on any OS


def _write_v6only(sock, endpoint, value):
    if not value:
        # EFI's TCP4 and TCP6 (UDP4 and UDP6) are separate drivers with separate port tables: an
        # AF_INET6 socket never sees IPv4 traffic, so IPV6_V6ONLY is always 1. Refusing 0 keeps
        # socket.has_dualstack_ipv6() truthful (False); http.server's DualStackServer ignores
        # the error and serves IPv6 only.
        raise _error(_errno.EOPNOTSUPP, "Operation not supported (EFI TCP6 never carries IPv4:"
                                        " IPV6_V6ONLY is always 1)")


# The IP header's hop limit and traffic class: EFI carries them in the child's configuration
# (TCP4/UDP4 TimeToLive and TypeOfService, TCP6/UDP6 HopLimit and TrafficClass), so on TCP they
# take effect at the next Configure -- set them before bind/connect/listen, as TCP_NODELAY
# (docs/edk2.md section 3.9); later they are recorded and read back only.
_OPTIONS = {
    (SOL_SOCKET, SO_REUSEADDR): _Option(None, None, "i", *_endpoint_option("reuseaddr", _boolean)),
    (SOL_SOCKET, SO_KEEPALIVE): _Option(None, None, "i", *_endpoint_option("keepalive", _boolean)),
    (SOL_SOCKET, SO_BROADCAST): _Option(None, None, "i", *_endpoint_option("broadcast", _boolean)),
    (SOL_SOCKET, SO_RCVBUF): _Option(None, None, "i", *_endpoint_option("rcvbuf", _integer)),
    (SOL_SOCKET, SO_SNDBUF): _Option(None, None, "i", *_endpoint_option("sndbuf", _integer)),
    (SOL_SOCKET, SO_LINGER): _Option(None, None, "ii", _read_linger, _write_linger),
    (SOL_SOCKET, SO_ERROR): _Option(None, None, "i", _read_error, None),
    (SOL_SOCKET, SO_TYPE): _Option(None, None, "i", lambda sock, endpoint: sock._type, None),
    (SOL_SOCKET, SO_ACCEPTCONN): _Option(None, None, "i", lambda sock, endpoint: int(bool(endpoint.listening)), None),
    (IPPROTO_TCP, TCP_NODELAY): _Option(None, None, "i", *_endpoint_option("nodelay", _boolean)),
    # EDK2's MSS on Ethernet once connected, Linux's 536 before; EFI decides it (read-only here)
    (IPPROTO_TCP, TCP_MAXSEG): _Option(None, SOCK_STREAM, "i", lambda sock, endpoint: 1460 if endpoint.connected
                                       else 536, None),
    (IPPROTO_IP, IP_TTL): _Option(AF_INET, None, "i", *_endpoint_option("ttl", _hop_limit)),
    (IPPROTO_IP, IP_TOS): _Option(AF_INET, None, "i", *_endpoint_option("tos", _traffic_class)),
    (IPPROTO_IPV6, IPV6_V6ONLY): _Option(AF_INET6, None, "i", lambda sock, endpoint: 1, _write_v6only),
    (IPPROTO_IPV6, IPV6_UNICAST_HOPS): _Option(AF_INET6, None, "i", *_endpoint_option("ttl", _hop_limit)),
    (IPPROTO_IPV6, IPV6_TCLASS): _Option(AF_INET6, None, "i", *_endpoint_option("tos", _traffic_class)),
}


def _option_value(value, shape):
    """setsockopt's value (an int, or bytes as struct ``shape``) -> an int or a tuple; EINVAL if short."""
    if shape == "i" and isinstance(value, _INT_TYPES):
        return value
    size = _struct.calcsize(shape)
    if isinstance(value, _INT_TYPES) or len(value) < size:
        raise _error(_errno.EINVAL)
    fields = _struct.unpack(shape, value[:size])
    return fields[0] if shape == "i" else fields


# --- The socket type ---------------------------------------------------------------------------
class socket(object):
    """socket(family=AF_INET, type=SOCK_STREAM, proto=0, fileno=None) -> socket object

    A TCP or UDP socket over the firmware's EFI_TCP4/UDP4 (AF_INET) or EFI_TCP6/UDP6 (AF_INET6)
    protocols (see the module docstring). With ``fileno``, the new object takes over an fd
    returned by ``_accept()``, ``dup()`` or ``detach()``. Dropping the last reference closes
    it gracefully."""

    # No __dict__, and on 3.x no __weakref__: 3.x's socket.socket adds its own slots to this
    # base. 2.7's _socket.socket is the object itself, and can be weakly referenced.
    __slots__ = ("_fd", "_descriptor", "_timeout", "_family", "_type", "_proto") + \
        (("__weakref__",) if _sys.version_info[0] < 3 else ())

    @_boundary
    def __init__(self, family=_DEFAULT_ARG, type=_DEFAULT_ARG, proto=_DEFAULT_ARG, fileno=None):
        self._fd = -1
        self._descriptor = None
        if fileno is not None:
            if not isinstance(fileno, _INT_TYPES) or isinstance(fileno, bool):
                raise TypeError("fileno must be an integer, not %s" % fileno.__class__.__name__)
            if fileno < 0:
                raise ValueError("negative file descriptor")
            descriptor = _fds.get(fileno)
            if descriptor is None:
                raise _error(_errno.EBADF)
            fd = fileno
        else:
            # 3.7+: -1 means the default (socket.py passes it); 2.7 and 3.6 take -1 as a number (EINVAL).
            family = AF_INET if _omitted(family) else family
            type = SOCK_STREAM if _omitted(type) else type
            proto = 0 if _omitted(proto) else proto
            endpoint = _new_endpoint(family, type, proto)
            descriptor = _Descriptor(endpoint, family, type & ~_TYPE_FLAGS, proto)
            fd = _register(descriptor)
        self._family = descriptor.family
        self._type = descriptor.type
        self._proto = descriptor.proto
        if fileno is not None:
            # CPython 3.7+ takes what is given with fileno= as it is; it asks the fd only for
            # what was left out (which is what the descriptor knows here).
            self._family = self._family if _omitted(family) else _int(family)
            self._type = self._type if _omitted(type) else _int(type)
            self._proto = self._proto if _omitted(proto) else _int(proto)
        self._descriptor = descriptor
        self._fd = fd
        self._timeout = _default_timeout[0]
        if fileno is None and _int(type) & _TYPE_FLAGS & 0o4000:
            self._timeout = 0.0  # SOCK_NONBLOCK (3.x), as CPython's socket() honours it

    # -- identity and lifetime
    family = property(lambda self: self._family, doc="the socket family")
    type = property(lambda self: self._type, doc="the socket type")
    proto = property(lambda self: self._proto, doc="the socket protocol")
    timeout = property(lambda self: self._timeout, doc="the socket timeout")

    def __repr__(self):
        return "<socket object, fd=%d, family=%d, type=%d, %s=%d>" % (
            self._fd, self._family, self._type, "proto" if _sys.version_info[0] >= 3 else "protocol", self._proto)

    def fileno(self):  # type: () -> int
        """fileno() -> integer

        Return the integer file descriptor of the socket (-1 once closed)."""
        return self._fd

    @_boundary
    def close(self):
        """close()

        Close the socket. The connection is closed gracefully (FIN) in the background; with
        SO_LINGER set to 0 seconds it is reset instead. Closing twice is harmless."""
        fd, self._fd, self._descriptor = self._fd, -1, None
        if fd >= 0:
            if fd not in _fds and _sys.version_info[0] >= 3:
                # CPython 3 reports close(2)'s EBADF: the fd was closed behind this object's
                # back (_socket.close(fd), another object's detach()...). 2.7 ignores it.
                raise _error(_errno.EBADF)
            _release(fd)

    def detach(self):
        """detach()

        Close the socket object without closing the underlying fd; return that fd."""
        fd, self._fd, self._descriptor = self._fd, -1, None
        return fd

    def dup(self):
        """dup() -> socket object

        A new socket object for the same connection (closed independently)."""
        sock = socket(self._family, self._type, self._proto, fileno=dup(self._live_fd()))
        sock._timeout = self._timeout
        return sock

    def __del__(self):
        # The 2.7 socket.py never closes its _sock; this is where that connection ends.
        try:
            if self._fd >= 0 and _sys.version_info[0] >= 3:
                import warnings  # as CPython 3's sock_finalize
                warnings.warn("unclosed %r" % (self,), ResourceWarning, stacklevel=2, source=self)
        except Exception:
            pass
        if self._fd >= 0 and _finalized_elsewhere():
            fd, self._fd, self._descriptor = self._fd, -1, None
            _deferred_closes.append(fd)
            return
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _live_fd(self):
        if self._fd < 0:
            raise _error(_errno.EBADF)
        return self._fd

    def _endpoint(self):
        descriptor = self._descriptor
        if descriptor is None:
            raise _error(_errno.EBADF)
        return descriptor.endpoint

    def _live_endpoint(self):
        """_endpoint(), and EBADF also when the fd was closed behind this object's back (an
        fcntl on it fails in CPython); not on the data path, which _endpoint() keeps cheap."""
        endpoint = self._endpoint()
        if _fds.get(self._fd) is not self._descriptor:
            raise _error(_errno.EBADF)
        return endpoint

    # -- timeouts
    def settimeout(self, timeout):
        """settimeout(timeout)

        Set a timeout on socket operations. 'timeout' can be a float, giving in seconds, or
        None. Setting a timeout of None disables the timeout feature and is equivalent to
        setblocking(1). Setting a timeout of zero is the same as setblocking(0)."""
        timeout = _check_timeout(timeout)
        self._live_endpoint()  # EBADF once closed, as the ioctl on fd -1 gives in CPython
        self._timeout = timeout

    def gettimeout(self):
        """gettimeout() -> timeout

        Returns the timeout in seconds (float) associated with socket operations. A timeout
        of None indicates that timeouts on socket operations are disabled."""
        return self._timeout

    def setblocking(self, flag):
        """setblocking(flag)

        Set the socket to blocking (flag is true) or non-blocking (false)."""
        flag = _int(flag, "", _C_LONG)  # CPython: PyLong_AsLong
        self._live_endpoint()  # EBADF once closed, as the ioctl on fd -1 gives in CPython
        self._timeout = None if flag else 0.0

    def getblocking(self):
        """getblocking() -> bool: False when the socket is non-blocking (timeout 0)."""
        return self._timeout != 0.0

    def _sock_call(self, endpoint, attempt, args, ready, nonblocking, deadline):
        """The one shape of every call that may block (CPython's ``sock_call_ex``): try
        ``attempt(*args)``; any answer but None is the result. If it would block, a non-blocking
        call lets the stack move once and tries again (docs/architecture.md section 6.1), then
        raises EAGAIN; a blocking one waits for ``ready()`` until ``deadline`` (``timeout``)."""
        progressed = False
        while True:
            got = attempt(*args)
            if got is not None:
                return got
            if nonblocking:
                if progressed:
                    raise _error(_errno.EAGAIN)
                progressed = _progress(endpoint)
                continue
            self._wait(endpoint, ready, deadline)

    def _wait(self, endpoint, ready, deadline):
        """Wait for ``ready()`` until ``deadline``; ``timeout`` if it passes (never for 0)."""
        # checked=True: every caller has just tried and found the socket not ready; Poll first.
        if not _events.wait_until(ready, deadline, poll=endpoint.progress, checked=True):
            raise timeout("timed out")

    def _deadline(self):
        return None if self._timeout is None else _clock.monotonic() + self._timeout

    def _out(self, address):
        """An endpoint's (host, port) as this family shows it: AF_INET6 has 4-tuples."""
        if address is not None and self._family == AF_INET6:
            return (address[0], address[1], 0, 0)
        return address

    # -- connection set-up
    @_efi_guarded
    def bind(self, address):
        """bind(address)

        Bind the socket to a local address, a pair (host, port) -- for AF_INET6 (host, port[,
        flowinfo[, scope_id]]); port 0 picks a free port. While the address is still coming
        (DHCP), a socket with a timeout waits at most that long (``timeout``); others wait for it."""
        endpoint = self._endpoint()
        deadline = self._deadline() if self._timeout else None  # docs/architecture.md section 6.4
        local = _sockaddr(self._family, address, "bind")
        endpoint.bind(local, deadline=deadline)
        # EDK2 quirk: TCP4 needs the station address for a "0.0.0.0" listener (docs/bits-efi.md section 4),
        # so the endpoint holds the real one; getsockname() reports the wildcard, as CPython.
        self._descriptor.wildcard = local[0] == _families.of(self._family).wildcard

    @_efi_guarded
    def listen(self, backlog=SOMAXCONN):
        """listen([backlog])

        Accept connections; at most ``backlog`` wait to be accepted (EDK2 caps it at 10)."""
        backlog = _int(backlog)
        endpoint = self._endpoint()
        if self._type == SOCK_DGRAM:
            raise _error(_errno.EOPNOTSUPP)  # Linux: UDP has no listen
        endpoint.listen(max(0, backlog))

    @_efi_guarded
    def connect(self, address):
        """connect(address)

        Connect the socket to a remote address, a pair (host, port)."""
        failure = self._connect(address)
        if failure is not None:
            raise failure

    @_efi_guarded
    def connect_ex(self, address):
        """connect_ex(address) -> errno

        This is like connect(address), but returns an error code instead of raising."""
        if self._descriptor is None:
            return _errno.EBADF
        try:
            failure = self._connect(address)
        except timeout as exc:  # ours (no errno), or ETIMEDOUT (py3: OSError(ETIMEDOUT) is a TimeoutError)
            return exc.errno or _errno.EWOULDBLOCK
        return 0 if failure is None else failure.errno or _errno.EIO

    def _connect(self, address):
        """None when connected, else the error to raise: connect() raises it whole, with the
        firmware's explanation (DHCP gave up, CreateChild failed), connect_ex() returns its errno."""
        endpoint = self._endpoint()
        deadline = self._deadline()  # one deadline for the whole call, address bring-up included
        remote = _sockaddr(self._family, address, "connect")
        if self._type == SOCK_DGRAM:  # only the default peer: nothing goes on the wire
            try:
                endpoint.connect(remote, deadline=deadline)
            except error as exc:
                if isinstance(exc, timeout) and not exc.errno and self._timeout == 0.0:
                    return _error(_errno.EAGAIN)  # the address is still coming (DHCP)
                if isinstance(exc, timeout) and not exc.errno:
                    raise
                return exc
            return None
        if _inet.is_multicast(remote[0]):
            # Linux (tcp_v4_connect, tcp_v6_connect): no TCP to a multicast or broadcast address.
            return _error(_errno.ENETUNREACH)
        descriptor = self._descriptor
        reported, descriptor.connect_pending = descriptor.connect_pending, False
        # The common case, a socket that never connected (nothing to report, nothing under way):
        # straight to the SYN. The questions below each update the endpoint (~0.1 ms in BITS).
        fresh = not reported and endpoint.never_connected
        if not fresh:
            if endpoint.connecting and self._timeout == 0.0:
                _progress(endpoint)  # docs/architecture.md section 6.1: the handshake moves between calls too
            if endpoint.listening:
                return _error(_errno.EISCONN)
            if endpoint.connected:
                # Linux (__inet_stream_connect): the first connect after a non-blocking one finished
                # says 0 (the socket becomes SS_CONNECTED then), later ones EISCONN.
                return None if reported else _error(_errno.EISCONN)
        if not fresh and endpoint.connecting:
            if self._timeout == 0.0:
                descriptor.connect_pending = True
                return _error(_errno.EALREADY)
        elif not fresh and reported and endpoint.failed:
            # Linux: the connect after a failed non-blocking one reports its error (sock_error);
            # the one after that starts afresh.
            return self._connect_failed(endpoint)
        else:
            try:
                endpoint.connect_start(remote, deadline=deadline)
            except timeout as exc:
                if self._timeout != 0.0 or exc.errno:  # (ETIMEDOUT is a TimeoutError on 3.x)
                    raise
                # docs/architecture.md section 6.4: the address is still coming (DHCP, SLAAC): EINPROGRESS now,
                # and the SYN goes out by later progress (connect_ex, select, SO_ERROR...).
                endpoint.connect_later(remote)
                descriptor.connect_pending = True
                return _error(_errno.EINPROGRESS)
            except error as exc:
                return exc
            if self._timeout == 0.0:
                # Even when the handshake already finished inside connect_start (the simulator's
                # loopback is that fast): Linux's non-blocking TCP connect always says EINPROGRESS.
                descriptor.connect_pending = True
                return _error(_errno.EINPROGRESS)
        if endpoint.connecting:
            if self._timeout == 0.0:
                return _error(_errno.EINPROGRESS)
            self._wait(endpoint, lambda: not endpoint.connecting, deadline)
        if endpoint.connected:
            return None
        if self._timeout is None:
            return self._connect_failed(endpoint)  # Linux's blocking connect reports it itself
        # Under a timeout CPython's connect polls and reads SO_ERROR: the socket is not disconnected.
        return _error(endpoint.take_error() or _errno.ECONNABORTED)

    def _connect_failed(self, endpoint):
        """The error of a failed connect that connect() itself reports: Linux then disconnects
        the socket (tcp_disconnect: POLLOUT|POLLHUP, no POLLIN; a new connect starts afresh)."""
        failure = _error(endpoint.take_error() or _errno.ECONNABORTED)
        endpoint.disconnect()
        return failure

    def _accept_endpoint(self):
        endpoint = self._endpoint()
        if self._type == SOCK_DGRAM:
            raise _error(_errno.EOPNOTSUPP)  # Linux: UDP has no accept
        if not endpoint.listening:
            raise _error(_errno.EINVAL)
        return self._sock_call(endpoint, endpoint.accept, (), endpoint.acceptable, self._timeout == 0.0,
                               self._deadline())

    @_efi_guarded
    def _accept(self):
        """_accept() -> (integer fd, address): Python 3's socket.accept() builds on this."""
        child = self._accept_endpoint()
        descriptor = _Descriptor(child, self._family, self._type, self._proto)
        return _register(descriptor), self._out(child.remote_address)

    def accept(self):
        """accept() -> (socket object, address info)

        Wait for an incoming connection (Python 2.7's socket.py wraps the socket object)."""
        fd, address = self._accept()
        return socket(self._family, self._type, self._proto, fileno=fd), address

    # -- names and options
    @_efi_guarded
    def getsockname(self):
        """getsockname() -> address info: the local (host, port)."""
        endpoint = self._endpoint()
        wildcard = _families.of(self._family).wildcard
        local = endpoint.local_address
        if local is None:
            return self._out((wildcard, 0))
        if self._descriptor.wildcard and endpoint.remote_address is None:
            return self._out((wildcard, local[1]))  # bound to the wildcard, not connected
        return self._out(local)

    @_efi_guarded
    def getpeername(self):
        """getpeername() -> address info: the remote (host, port)."""
        endpoint = self._endpoint()
        remote = endpoint.remote_address
        if remote is None and endpoint.connecting:
            _progress(endpoint)  # docs/architecture.md section 6.1: a non-blocking connect may have finished
            remote = endpoint.remote_address
        if remote is None:
            raise _error(_errno.ENOTCONN)
        return self._out(remote)

    def _option(self, level, optname):
        """The _OPTIONS row of (level, optname) for this socket; ENOPROTOOPT if there is none."""
        option = _OPTIONS.get((level, optname))
        if option is None or option.family not in (None, self._family) or option.type not in (None, self._type):
            raise _error(_errno.ENOPROTOOPT)
        return option

    @_efi_guarded
    def setsockopt(self, level, optname, value, optlen=None):
        """setsockopt(level, option, value)

        Set a socket option (the table _OPTIONS): SO_REUSEADDR, SO_KEEPALIVE, SO_BROADCAST,
        SO_RCVBUF, SO_SNDBUF, SO_LINGER (struct "ii"; 0 seconds makes close() reset),
        TCP_NODELAY, IP_TTL, IP_TOS, IPV6_UNICAST_HOPS, IPV6_TCLASS, IPV6_V6ONLY (1 only)."""
        level, optname = _int(level), _int(optname)
        if isinstance(value, _INT_TYPES):
            value = _int(value) if -2 ** 31 <= value < 2 ** 31 else _bytes_arg(value)  # TypeError, as CPython
        elif value is None and optlen is None:
            raise TypeError("setsockopt() takes exactly 4 arguments (3 given)")
        else:
            value = _bytes_arg(value)
        endpoint = self._endpoint()
        option = self._option(level, optname)
        if option.write is None:
            raise _error(_errno.ENOPROTOOPT)  # read-only (SO_ERROR, SO_TYPE, SO_ACCEPTCONN, TCP_MAXSEG)
        option.write(self, endpoint, _option_value(value, option.shape))

    @_efi_guarded
    def getsockopt(self, level, optname, buflen=0):
        """getsockopt(level, option[, buffersize]) -> value

        SO_ERROR is the pending errno (and clears it), as on any OS."""
        level, optname, buflen = _int(level), _int(optname), _int(buflen)
        endpoint = self._endpoint()
        if not 0 <= buflen <= 1024:
            raise error("getsockopt buflen out of range")
        option = self._option(level, optname)
        value = option.read(self, endpoint)
        if option.shape == "i":
            return _struct.pack("i", value)[:buflen] if buflen else value
        return _struct.pack(option.shape, *value)[:buflen] if buflen else value[0]

    # -- data
    @_efi_guarded
    def recv(self, bufsize, flags=0):  # type: (int, int) -> bytes
        """recv(buffersize[, flags]) -> data

        Receive up to buffersize bytes; b'' means the peer closed (or, after SHUT_RD, that
        nothing has come)."""
        # The common case first: a TCP socket that may wait, a small size, no flags -- straight to
        # the endpoint's own blocking recv (docs/performance.md section 7: each Python call
        # counts in BITS, and a round trip is made of few socket calls).
        if type(bufsize) is int and 0 < bufsize <= _UNCOPIED_RECV_MAX and type(flags) is int and not flags:
            descriptor = self._descriptor
            # Not under a threaded host harness (events.wait_hook: tests/cpython runs threads over
            # bitsnet): there another thread's turn may consume this endpoint's completions
            # while recv_blocking watches its own token, and CPython's test_socket hung once in
            # BasicTCPTest2.testSendAll; the generic wait serves threads as it always has. BITS
            # has no threads (docs/bits-environment.md section 2.5): the fast path is for it.
            if descriptor is not None and descriptor.endpoint.plain_stream and self._timeout != 0.0 \
                    and _events.wait_hook is None:
                return descriptor.endpoint.recv_blocking(bufsize, self._timeout)
        # The common arguments otherwise without the checks' calls.
        if type(bufsize) is not int or not 0 <= bufsize <= _MAX_RECV:
            bufsize = _size_arg(bufsize)
        if type(flags) is not int or flags:
            flags = _int(flags)
        if bufsize < 0:
            raise ValueError("negative buffersize in recv")
        if bufsize > _MAX_RECV:
            raise OverflowError("byte string is too large")
        if bufsize == 0 and _sys.version_info[0] >= 3:
            self._endpoint()
            return b""  # CPython 3 asks the OS nothing: a queued datagram stays queued
        if bufsize <= _UNCOPIED_RECV_MAX:  # the received bytes, uncopied
            if self._type == SOCK_DGRAM:
                return self._recvfrom_into(None, bufsize, flags)[0]
            if not flags & MSG_WAITALL:
                return self._recv_stream(None, bufsize, flags)
        self._endpoint()
        buffer = bytearray(bufsize)
        n = self._recv_into(buffer, bufsize, flags)
        return bytes(buffer) if n == bufsize else memoryview(buffer)[:n].tobytes()

    @_efi_guarded
    def recv_into(self, buffer, nbytes=0, flags=0):  # type: (object, int, int) -> int
        """recv_into(buffer, [nbytes[, flags]]) -> nbytes_read

        Receive up to nbytes bytes into the writable buffer (all of it if nbytes is 0)."""
        buffer, nbytes = _pyarg.writable_buffer(buffer, nbytes, "recv_into")
        return self._recv_into(buffer, nbytes, _int(flags))

    @_efi_guarded
    def recvfrom(self, bufsize, flags=0):
        """recvfrom(buffersize[, flags]) -> (data, address info); None for a TCP socket."""
        if self._type != SOCK_DGRAM:
            return self.recv(bufsize, flags), None
        bufsize, flags = _size_arg(bufsize), _int(flags)
        if bufsize < 0:
            raise ValueError("negative buffersize in recvfrom")
        if bufsize > _MAX_RECV:
            raise OverflowError("byte string is too large")
        if bufsize <= _UNCOPIED_RECV_MAX:
            data, source = self._recvfrom_into(None, bufsize, flags)
            return data, self._out(source)
        buffer = bytearray(bufsize)  # as CPython does: so a huge size is a MemoryError
        n, source = self._recvfrom_into(buffer, bufsize, flags)
        return bytes(buffer[:n]), self._out(source)

    @_efi_guarded
    def recvfrom_into(self, buffer, nbytes=0, flags=0):
        """recvfrom_into(buffer[, nbytes[, flags]]) -> (nbytes, address info)"""
        buffer, nbytes = _pyarg.writable_buffer(buffer, nbytes, "recvfrom_into")
        if self._type == SOCK_DGRAM:
            n, source = self._recvfrom_into(buffer, nbytes, _int(flags))
            return n, self._out(source)
        return self._recv_into(buffer, nbytes, _int(flags)), None

    def _recv_into(self, buffer, nbytes, flags):
        if self._type == SOCK_DGRAM:
            return self._recvfrom_into(buffer, nbytes, flags)[0]
        return self._recv_stream(buffer, nbytes, flags)

    def _recv_stream(self, buffer, nbytes, flags):
        """recv_into ``buffer`` on a stream socket: the count; ``buffer`` None: recv, the bytes."""
        endpoint = self._endpoint()
        if flags & MSG_OOB:
            # EDK2 delivers urgent data inline, with the rest (RxData.UrgentFlag only marks it):
            # there is never an out-of-band byte to read -- Linux's answer then is EINVAL.
            raise _error(_errno.EINVAL, "Invalid argument (EFI TCP delivers urgent data inline)")
        if flags & _NOT_STREAM_RECV_FLAGS:
            raise _error(_errno.EOPNOTSUPP)
        if nbytes == 0:
            return 0 if buffer is not None else b""
        peek = bool(flags & MSG_PEEK)
        nonblocking = self._timeout == 0.0 or bool(flags & MSG_DONTWAIT)
        deadline = self._deadline()
        if flags & MSG_WAITALL and not peek and self._timeout is None and not flags & MSG_DONTWAIT:
            # Only a blocking socket waits for all: CPython's fd is non-blocking under a timeout,
            # so there MSG_WAITALL returns what one readable moment brings, as a plain recv.
            return self._recv_all(endpoint, buffer, nbytes, deadline)
        if buffer is None:
            return self._sock_call(endpoint, endpoint.recv, (nbytes, peek), endpoint.can_recv, nonblocking,
                                   deadline)
        return self._sock_call(endpoint, endpoint.recv_into, (buffer, nbytes, peek), endpoint.can_recv,
                               nonblocking, deadline)

    def _recvfrom_into(self, buffer, nbytes, flags):
        """One datagram into ``buffer``: (bytes copied, source); ``buffer`` None: (its first
        ``nbytes`` bytes, source). The rest of a longer datagram is dropped, as on any OS
        (MSG_PEEK leaves it queued)."""
        endpoint = self._endpoint()
        if flags & ~(MSG_PEEK | MSG_DONTWAIT):
            raise _error(_errno.EOPNOTSUPP)
        nonblocking = self._timeout == 0.0 or bool(flags & MSG_DONTWAIT)
        deadline = self._deadline()
        peek = bool(flags & MSG_PEEK)
        if buffer is None:
            return self._sock_call(endpoint, endpoint.recvfrom, (nbytes, peek), endpoint.can_recv, nonblocking,
                                   deadline)
        return self._sock_call(endpoint, endpoint.recvfrom_into, (buffer, nbytes, peek), endpoint.can_recv,
                               nonblocking, deadline)

    def _recv_all(self, endpoint, buffer, nbytes, deadline):
        """MSG_WAITALL on a blocking socket: until ``nbytes``, EOF or an error. Bytes gathered
        are never dropped (docs/architecture.md section 6.2): an error after some data returns the data and
        stays pending for the next call, as Linux's tcp_recvmsg does."""
        view = memoryview(buffer)
        got = 0
        while got < nbytes:
            if got and endpoint.has_error():
                break
            try:
                n = endpoint.recv_into(view[got:], nbytes - got, False)
            except error:
                if got:
                    break  # cannot happen after has_error(); kept so no byte is ever lost
                raise
            if n == 0:
                break
            if n is None:
                try:
                    self._wait(endpoint, endpoint.can_recv, deadline)
                except timeout:
                    if got:
                        break
                    raise
                continue
            got += n
        return got

    @_efi_guarded
    def send(self, data, flags=0):  # type: (bytes, int) -> int
        """send(data[, flags]) -> count

        Send data; return how many bytes were taken (the send buffer is bounded)."""
        data, view = _send_buffer(data)
        return self._send(data, view, _int(flags), self._deadline())

    def _send(self, data, view, flags, deadline, address=None):
        """Send from ``view`` (a byte-wise memoryview); ``data`` is its object when that is bytes
        and the whole of it, for the zero-copy Transmit (docs/architecture.md section 8.1), else ``view`` again."""
        endpoint = self._endpoint()
        if flags & ~(MSG_DONTWAIT | MSG_OOB) or (flags & MSG_OOB and self._type != SOCK_STREAM):
            raise _error(_errno.EOPNOTSUPP)
        if self._type == SOCK_DGRAM:
            return self._send_datagram(endpoint, view.tobytes(), address, flags, deadline)
        if not len(view):
            return 0
        # MSG_OOB: EFI TCP's Urgent flag (tcp.send_urgent); socketpair() has no urgent data
        send = endpoint.send_urgent if flags & MSG_OOB else endpoint.send
        nonblocking = self._timeout == 0.0 or bool(flags & MSG_DONTWAIT)
        return self._sock_call(endpoint, send, (data,), endpoint.can_send, nonblocking, deadline)

    def _send_datagram(self, endpoint, data, address, flags, deadline):
        """One datagram to ``address`` (None: the connected peer); all of it or an error."""
        nonblocking = self._timeout == 0.0 or bool(flags & MSG_DONTWAIT)
        try:
            return self._sock_call(endpoint, endpoint.sendto, (data, address, deadline), endpoint.can_send,
                                   nonblocking, deadline)
        except timeout as exc:
            if not exc.errno and nonblocking:
                raise _error(_errno.EAGAIN)  # the address is still coming (DHCP): docs/architecture.md section 6.4
            raise

    @_efi_guarded
    def sendall(self, data, flags=0):  # type: (bytes, int) -> None
        """sendall(data[, flags])

        Send all of data; the timeout, if any, applies to the whole call (as in 3.5+)."""
        sent = 0
        if type(data) is bytes and type(flags) is int and not flags and data:
            # The common case (see recv): a TCP endpoint takes the bytes at once (its send
            # buffer has room) -- no deadline, no _send/_sock_call; else on from what it took.
            descriptor = self._descriptor
            if descriptor is not None and descriptor.endpoint.plain_stream:
                sent = descriptor.endpoint.send(data) or 0
                if sent == len(data):
                    return
        if type(data) is bytes:  # without _send_buffer's calls
            view = memoryview(data)
        else:
            data, view = _send_buffer(data)
        if type(flags) is not int or flags:
            flags = _int(flags)
        deadline = self._deadline()
        if sent:  # the rest, as a view (copied once when queued, as every later piece is)
            view = view[sent:]
            sent = self._send(view, view, flags, deadline)
        else:
            sent = self._send(data, view, flags, deadline)
        while sent < len(view):
            rest = view[sent:]
            sent += self._send(rest, rest, flags, deadline)

    @_efi_guarded
    def sendto(self, data, *args):
        """sendto(data[, flags], address) -> count

        For a connected TCP socket the address is checked and otherwise ignored."""
        if len(args) not in (1, 2):
            raise TypeError("sendto() takes 2 or 3 arguments (%d given)" % (len(args) + 1))
        flags_or_address, address = args if len(args) == 2 else (args[0], _NO_ADDRESS)
        two = address is _NO_ADDRESS  # sendto(data, address); sendto(data, 0, None) is a TypeError
        flags = 0 if two else _int(flags_or_address)
        data, view = _send_buffer(data)
        remote = _sockaddr(self._family, flags_or_address if two else address, "sendto")
        return self._send(data, view, flags, self._deadline(), remote)

    if _sys.version_info[0] >= 3:  # CPython 2.7 has no sendmsg/recvmsg
        def sendmsg(self, buffers, ancdata=(), flags=0, address=None):
            """sendmsg(buffers[, ancdata[, flags[, address]]]) -> count

            Send the buffers' bytes as one send (or one datagram). EFI has no ancillary data
            (no SCM_RIGHTS, no IP_PKTINFO...): any is refused with EOPNOTSUPP."""
            views = [_send_buffer(b)[1] for b in buffers]
            if list(ancdata):
                raise _error(_errno.EOPNOTSUPP, "Operation not supported (EFI sockets carry no ancillary data)")
            data = b"".join(view.tobytes() for view in views)
            if address is not None:
                return self.sendto(data, flags, address)
            return self.send(data, flags)

        def recvmsg(self, bufsize, ancbufsize=0, flags=0):
            """recvmsg(bufsize[, ancbufsize[, flags]]) -> (data, ancdata, msg_flags, address)

            ancdata is always [] (EFI delivers none); address is None on a TCP socket."""
            bufsize, ancbufsize = _size_arg(bufsize), _size_arg(ancbufsize)
            if bufsize < 0:
                raise ValueError("negative buffer size in recvmsg()")
            if ancbufsize < 0:
                raise ValueError("negative ancillary buffer size in recvmsg()")
            if self._type != SOCK_DGRAM:
                return self.recv(bufsize, flags), [], 0, None
            # The whole datagram (handed over uncopied), so that a cut one says MSG_TRUNC.
            data, address = self.recvfrom(max(bufsize, 65535), flags)
            if len(data) > bufsize:
                return data[:bufsize], [], MSG_TRUNC, address
            return data, [], 0, address

        def recvmsg_into(self, buffers, ancbufsize=0, flags=0):
            """recvmsg_into(buffers[, ancbufsize[, flags]]) -> (nbytes, ancdata, msg_flags, address)

            Scatter one receive over the writable buffers, in order; ancdata is always []."""
            views = []
            for target in buffers:
                view = memoryview(target)
                if view.readonly:
                    raise TypeError("recvmsg_into() argument 1 must be an iterable of single-segment"
                                    " read-write buffers")
                views.append(view.cast("B") if view.format != "B" or view.ndim != 1 else view)
            total = sum(len(view) for view in views)
            data, ancdata, msg_flags, address = self.recvmsg(total, ancbufsize, flags)
            offset = 0
            for view in views:
                piece = data[offset:offset + len(view)]
                view[:len(piece)] = piece
                offset += len(piece)
            return len(data), ancdata, msg_flags, address

    @_efi_guarded
    def shutdown(self, how):
        """shutdown(flag)

        SHUT_RD: recv no longer waits -- it returns what is buffered or arrives, else b'' -- as
        on Linux. SHUT_WR or SHUT_RDWR: send our FIN; EFI TCP4 only has a full close, so
        whatever the peer sends after that is not delivered (see the module docstring)."""
        how = _int(how)
        endpoint = self._endpoint()
        if how not in (SHUT_RD, SHUT_WR, SHUT_RDWR):
            raise _error(_errno.EINVAL)
        if self._type != SOCK_DGRAM and not endpoint.connected:
            raise _error(_errno.ENOTCONN)
        endpoint.shutdown(how)  # SHUT_RD is the endpoint's (``read_shut``): its recv stops waiting


SocketType = socket


@_boundary
def dup(fd):  # type: (int) -> int
    """dup(integer) -> integer

    Another fd for the same socket; the connection closes when every fd is closed."""
    descriptor = _fds.get(_int(fd))
    if descriptor is None:
        raise _error(_errno.EBADF)
    descriptor.refs += 1
    return _register(descriptor)


@_boundary
def fromfd(fd, family, type, proto=0):
    """fromfd(fd, family, type[, proto]) -> socket object

    A new socket object for a duplicate of ``fd`` (2.7's _socket has it; 3.x's socket.py
    defines its own from dup())."""
    return socket(family, type, proto, fileno=dup(fd))


@_efi_guarded  # the endpoint's close reaches the firmware
def close(fd):
    """close(integer) -> None

    Close an integer socket file descriptor (as os.close() would on a real OS)."""
    if _int(fd) not in _fds:
        raise _error(_errno.EBADF)
    _release(fd)


@_boundary
def socketpair(family=AF_INET, type=SOCK_STREAM, proto=0):
    """socketpair([family[, type[, proto]]]) -> (socket object, socket object)

    Two connected stream sockets, in memory (there is no AF_UNIX; family must be AF_INET)."""
    if family != AF_INET:
        raise _error(_errno.EAFNOSUPPORT)
    if type != SOCK_STREAM or proto not in (0, IPPROTO_TCP):
        raise _error(_errno.EOPNOTSUPP)
    first, second = _socketpair.pair()
    return tuple(socket(fileno=_register(_Descriptor(end, family, type, proto))) for end in (first, second))


# --- The public surface: one error boundary -------------------------------------------------------
# The socket module's functions that live in netdb and inet, exported here behind the boundary
# (``errors.efi_boundary``: an efi.EFIException met anywhere below becomes ``error``). Pure
# functions are wrapped too, so that every public function of this module is covered alike; those
# that may resolve a name drive the firmware (DHCP, DNS4, UDP) and keep the one-thread rule too.
@_efi_guarded
def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # type: (object, object, int, int, int, int) -> list
    try:
        return _netdb.getaddrinfo(host, port, family, type, proto, flags)
    finally:
        _publish_ipv6()  # an AF_UNSPEC lookup may have asked the NIC


getaddrinfo.__doc__ = _netdb.getaddrinfo.__doc__
gethostname = _boundary(_netdb.gethostname)
gethostbyname = _efi_guarded(_netdb.gethostbyname)
gethostbyname_ex = _efi_guarded(_netdb.gethostbyname_ex)
gethostbyaddr = _efi_guarded(_netdb.gethostbyaddr)
getnameinfo = _efi_guarded(_netdb.getnameinfo)
getservbyname = _boundary(_netdb.getservbyname)
getservbyport = _boundary(_netdb.getservbyport)
getprotobyname = _boundary(_netdb.getprotobyname)
inet_aton = _boundary(_inet.inet_aton)
inet_ntoa = _boundary(_inet.inet_ntoa)
inet_pton = _boundary(_inet.inet_pton)
inet_ntop = _boundary(_inet.inet_ntop)
htons = _boundary(_inet.htons)
ntohs = _boundary(_inet.ntohs)
htonl = _boundary(_inet.htonl)
ntohl = _boundary(_inet.ntohl)
_strtoul_port = _netdb.strtoul_port  # (tests compare with it)
