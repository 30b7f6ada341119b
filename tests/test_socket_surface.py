"""bitsnet._socket's surface after the split into constants/errors/netdb/inet/pyarg/socketpair:
the same public names as before (it IS BITS's ``_socket``), the private names other modules
use, and the one error boundary: every public entry point is wrapped in
``errors.efi_boundary``, so an ``efi.EFIException`` raised anywhere below comes out as
``socket.error`` (OSError) with an errno. No simulated machine is booted: the inner calls that
would reach the firmware are monkeypatched to raise.
"""

from __future__ import print_function

import errno
import sys

import efi
import pytest

from bitsnet import _socket as bs
from bitsnet import dns, errors, nic, socketpair

# dir(bitsnet._socket) without the "_" names, recorded before the split (Python 2.7; 3.x adds
# SOCK_NONBLOCK and SOCK_CLOEXEC).
PUBLIC = """
    AF_INET AF_INET6 AF_UNSPEC AI_ADDRCONFIG AI_ALL AI_CANONNAME AI_NUMERICHOST AI_NUMERICSERV
    AI_PASSIVE AI_V4MAPPED EAI_ADDRFAMILY EAI_AGAIN EAI_BADFLAGS EAI_FAIL EAI_FAMILY EAI_MEMORY
    EAI_NONAME EAI_SERVICE EAI_SOCKTYPE EAI_SYSTEM FD_SETSIZE FIRST_FD INADDR_ANY INADDR_BROADCAST
    INADDR_LOOPBACK INADDR_NONE IPPROTO_ICMP IPPROTO_IP IPPROTO_IPV6 IPPROTO_TCP IPPROTO_UDP
    IPV6_TCLASS IPV6_UNICAST_HOPS IPV6_V6ONLY IP_ADD_MEMBERSHIP IP_DROP_MEMBERSHIP IP_TOS IP_TTL
    MSG_DONTWAIT MSG_OOB MSG_PEEK
    MSG_TRUNC MSG_WAITALL NI_DGRAM NI_MAXHOST NI_MAXSERV NI_NAMEREQD NI_NOFQDN NI_NUMERICHOST
    NI_NUMERICSERV SHUT_RD SHUT_RDWR SHUT_WR SOCK_DGRAM SOCK_RAW SOCK_RDM SOCK_SEQPACKET SOCK_STREAM
    SOL_SOCKET SOL_TCP SOL_UDP SOMAXCONN SO_ACCEPTCONN SO_BROADCAST SO_ERROR SO_KEEPALIVE SO_LINGER
    SO_RCVBUF SO_REUSEADDR SO_SNDBUF SO_TYPE SocketType TCP_MAXSEG TCP_NODELAY absolute_import
    close dup error fromfd gaierror getaddrinfo getdefaulttimeout gethostbyaddr gethostbyname
    gethostbyname_ex gethostname getnameinfo getprotobyname getservbyname getservbyport has_ipv6
    herror htonl htons inet_aton inet_ntoa inet_ntop inet_pton lookup ntohl ntohs setdefaulttimeout
    socket socketpair timeout
""".split() + (["SOCK_CLOEXEC", "SOCK_NONBLOCK"] if sys.version_info[0] >= 3 else [])

# "_" names that other modules and the tests use (select.py, bitsnet/__init__.py, conftest...).
PRIVATE_USED = ["_enter", "_leave", "_inside", "_INT_TYPES", "_fds", "_probe_ipv6", "_ipv6_available",
                "_strtoul_port"]

# Entry points that reach no endpoint and no firmware, so need no boundary (select.py's
# per-poll ``lookup`` stays a plain function); everything else public must carry it.
PURE_FUNCTIONS = {"lookup"}
PURE_METHODS = {"fileno", "gettimeout", "getblocking", "detach", "settimeout", "setblocking", "accept", "dup",
                "sendmsg", "recvmsg", "recvmsg_into"}  # the last six only call wrapped ones


def test_public_names_are_what_they_were_before_the_split():
    assert sorted(name for name in dir(bs) if not name.startswith("_")) == sorted(PUBLIC)


def test_private_names_other_modules_use_are_still_there():
    assert [name for name in PRIVATE_USED if not hasattr(bs, name)] == []


def test_every_public_entry_point_is_behind_the_error_boundary():
    functions = [name for name in dir(bs) if not name.startswith("_") and callable(getattr(bs, name))
                 and not isinstance(getattr(bs, name), type)]
    assert "getaddrinfo" in functions and "inet_pton" in functions
    uncovered = [name for name in functions
                 if name not in PURE_FUNCTIONS and not getattr(getattr(bs, name), "efi_boundary", False)]
    assert uncovered == []
    methods = [name for name in dir(bs.socket) if (not name.startswith("_") or name in ("__init__", "_accept"))
               and callable(getattr(bs.socket, name))]
    uncovered = [name for name in methods
                 if name not in PURE_METHODS and not getattr(getattr(bs.socket, name), "efi_boundary", False)]
    assert uncovered == []


def _raise_efi(status):
    def firmware_failed(*args, **kwargs):
        raise efi.EFIException(status)
    return firmware_failed


def _check(caught, err, op):
    exc = caught.value
    assert isinstance(exc, bs.error) and isinstance(exc, (OSError, IOError))
    assert not isinstance(exc, efi.EFIException)
    assert exc.errno == err, exc
    assert op in str(exc), exc


@pytest.mark.parametrize("call, op", [
    (lambda: bs.getaddrinfo("printer.example", 80, bs.AF_INET), "getaddrinfo"),
    (lambda: bs.gethostbyname("printer.example"), "gethostbyname"),
    (lambda: bs.gethostbyname_ex("printer.example"), "gethostbyname_ex"),
    (lambda: bs.getnameinfo(("printer.example", 80), 0), "getnameinfo"),
])
def test_an_efi_exception_inside_a_name_lookup_is_a_socket_error(monkeypatch, call, op):
    monkeypatch.setattr(dns, "lookup", _raise_efi(efi.EFI_DEVICE_ERROR))
    monkeypatch.setattr(dns, "resolve", _raise_efi(efi.EFI_DEVICE_ERROR))
    with pytest.raises(bs.error) as caught:
        call()
    _check(caught, errno.EIO, "EFI_DEVICE_ERROR in %s" % op)


def test_an_efi_exception_inside_gethostbyaddr_is_a_socket_error(monkeypatch):
    monkeypatch.setattr(dns, "reverse", _raise_efi(efi.EFI_TIMEOUT))
    with pytest.raises(bs.error) as caught:
        bs.gethostbyaddr("10.0.2.3")
    _check(caught, errno.ETIMEDOUT, "EFI_TIMEOUT in gethostbyaddr")


def test_an_efi_exception_inside_socket_methods_is_a_socket_error(monkeypatch):
    first, second = bs.socketpair()
    try:
        monkeypatch.setattr(socketpair.PairEndpoint, "recv", _raise_efi(efi.EFI_NO_MEDIA))
        monkeypatch.setattr(socketpair.PairEndpoint, "send", _raise_efi(efi.EFI_CONNECTION_RESET))
        with pytest.raises(bs.error) as caught:
            first.recv(10)
        _check(caught, errno.ENETDOWN, "EFI_NO_MEDIA in recv")
        with pytest.raises(bs.error) as caught:
            first.sendall(b"x")
        _check(caught, errno.ECONNRESET, "EFI_CONNECTION_RESET in sendall")
        assert bs._inside == [None, 0]  # the boundary left the thread rule as it found it
    finally:
        first.close()
        second.close()


def test_an_efi_exception_inside_select_or_poll_is_a_socket_error(monkeypatch):
    from bitsnet import select as bs_select
    first, second = bs.socketpair()
    try:
        monkeypatch.setattr(socketpair.PairEndpoint, "can_recv", _raise_efi(efi.EFI_DEVICE_ERROR))
        with pytest.raises(bs.error) as caught:
            bs_select.select([first], [], [], 0)
        _check(caught, errno.EIO, "EFI_DEVICE_ERROR in _wait_ready")
        poller = bs_select.poll()
        poller.register(first, bs_select.POLLIN)
        with pytest.raises(bs.error) as caught:
            poller.poll(0)
        _check(caught, errno.EIO, "EFI_DEVICE_ERROR in _wait_ready")
        assert bs._inside == [None, 0]  # the boundary left the thread rule as it found it
    finally:
        first.close()
        second.close()


def test_an_efi_exception_while_making_a_socket_is_a_socket_error(monkeypatch):
    monkeypatch.setattr(nic, "default_nic", _raise_efi(efi.EFI_NOT_FOUND))
    before = sorted(bs._fds)
    with pytest.raises(bs.error) as caught:
        bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    _check(caught, errno.ENETUNREACH, "EFI_NOT_FOUND in __init__")
    assert sorted(bs._fds) == before


def test_the_boundary_translates_and_marks():
    @errors.efi_boundary
    def connect():
        raise efi.EFIException(efi.EFI_CONNECTION_RESET)
    assert connect.efi_boundary and connect.__name__ == "connect"
    with pytest.raises(errors.error) as caught:
        connect()
    assert caught.value.errno == errno.ECONNREFUSED  # the operation's own row (errno_for)


def test_one_eai_table():
    assert dns.EAI_MESSAGES is errors.EAI_MESSAGES
    assert bs.EAI_NONAME == dns.EAI_NONAME == errors.EAI_NONAME
    exc = errors.gai_error(errors.EAI_AGAIN, "no DHCP answer")
    assert isinstance(exc, bs.gaierror)
    assert exc.args == (errors.EAI_AGAIN, "Temporary failure in name resolution (no DHCP answer)")
