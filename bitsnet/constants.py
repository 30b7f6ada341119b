"""The socket API's numbers: ``AF_*``, ``SOCK_*``, ``SOL_*``, ``SO_*``, ``IPPROTO_*``, ``IP_*``,
``TCP_*``, ``MSG_*``, ``SHUT_*``, ``AI_*``, ``NI_*``, ``INADDR_*``.

Linux's values (its headers: sys/socket.h, netinet/in.h, netinet/tcp.h, netdb.h), so code that
compares them with numbers it learnt elsewhere still works. ``_socket`` exports every name
here; ``netdb``, ``inet`` and ``socketpair`` take theirs from here too. The EAI_* codes are
with the exceptions, in ``errors``. Nothing but numbers: ``from bitsnet.constants import *``
brings in no other name.
"""

import sys as _sys

AF_UNSPEC = 0
AF_INET = 2
AF_INET6 = 10  # over EFI_TCP6/UDP6 when the firmware has them (see _socket.has_ipv6)
SOCK_STREAM = 1
SOCK_DGRAM = 2
SOCK_RAW = 3  # exists so that code can name it; EFI has no raw sockets (EPERM, as unprivileged Linux)
SOCK_RDM = 4
SOCK_SEQPACKET = 5
IPPROTO_IP = 0
IPPROTO_ICMP = 1
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
IPV6_V6ONLY = 26
SOL_SOCKET = 1
SOL_TCP = IPPROTO_TCP
SOL_UDP = IPPROTO_UDP
SO_REUSEADDR = 2
SO_TYPE = 3
SO_ERROR = 4
SO_BROADCAST = 6
SO_SNDBUF = 7
SO_RCVBUF = 8
SO_KEEPALIVE = 9
SO_LINGER = 13
SO_ACCEPTCONN = 30
TCP_NODELAY = 1
TCP_MAXSEG = 2
IP_TOS = 1
IP_TTL = 2
IPV6_UNICAST_HOPS = 16
IPV6_TCLASS = 67
IP_ADD_MEMBERSHIP = 35
IP_DROP_MEMBERSHIP = 36
SOMAXCONN = 128
MSG_OOB = 0x1
MSG_PEEK = 0x2
MSG_TRUNC = 0x20
MSG_DONTWAIT = 0x40
MSG_WAITALL = 0x100
SHUT_RD = 0
SHUT_WR = 1
SHUT_RDWR = 2
AI_PASSIVE = 0x1
AI_CANONNAME = 0x2
AI_NUMERICHOST = 0x4
AI_V4MAPPED = 0x8
AI_ALL = 0x10
AI_ADDRCONFIG = 0x20
AI_NUMERICSERV = 0x400
NI_NUMERICHOST = 0x1
NI_NUMERICSERV = 0x2
NI_NOFQDN = 0x4
NI_NAMEREQD = 0x8
NI_DGRAM = 0x10
NI_MAXHOST = 1025
NI_MAXSERV = 32
INADDR_ANY = 0
INADDR_BROADCAST = 0xffffffff
INADDR_LOOPBACK = 0x7f000001
INADDR_NONE = 0xffffffff

if _sys.version_info[0] >= 3:  # CPython 2.7 on Linux has neither (glibc headers aside)
    SOCK_NONBLOCK = 0o4000
    SOCK_CLOEXEC = 0o2000000
