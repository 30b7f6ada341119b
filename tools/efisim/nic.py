"""One simulated network interface: its handle, its IPv4 and IPv6 state, and EDK2's receive pacing.

The "wire" is the host's loopback: every simulated socket is backed by a non-blocking host
socket bound to the station address. What makes the model EDK2-like is *when* bytes from the
host enter the simulated stack: one frame at a time (docs/edk2.md section 3.4), pulled either by an
explicit ``Poll`` of any TCP/UDP/IP child of this NIC or by MNP's own 10 ms timer
(``MnpSystemPoll``), one frame per tick shared by every socket of the NIC.

Drivers register a *frame source* for each host socket (``add_source``): an object with
``fileno()`` and ``take_frame()``, which consumes at most one frame (one MSS of data, one
accepted SYN, a connect completion, a FIN or a RST) and returns True if it did. The NIC
keeps the sources in an epoll set and serves ready ones round-robin, so one busy socket
cannot starve the others.

``IPV4`` and ``IPV6`` are the per-family tables the TCP and UDP models share their engines
through: host socket family, the wildcard address, EFI address structures <-> text, and which
addresses the loopback wire reaches (127.0.0.0/8; for IPv6 only ::1, the host's one loopback).
"""

from __future__ import print_function

import select as _host_select  # the host's: bitsnet may later replace sys.modules['select']
import socket as _host_socket

from bitsnet import efidefs
from efisim import uefi

MNP_POLL_PERIOD = 0.010  # MnpDxe's system poll timer (docs/edk2.md section 3.4)


def ip_to_int(text):
    # type: (str) -> int
    a, b, c, d = [int(x) for x in text.split(".")]
    return (a << 24) | (b << 16) | (c << 8) | d


def int_to_ip(value):
    # type: (int) -> str
    return "%d.%d.%d.%d" % (value >> 24 & 255, value >> 16 & 255, value >> 8 & 255, value & 255)


def prefix_to_mask(prefix):
    # type: (int) -> str
    return int_to_ip((0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF if prefix else 0)


def ip6_text(packed):
    # type: (bytes) -> str
    """Canonical text of 16 packed bytes (the host's inet_ntop: the simulator runs on the host)."""
    return _host_socket.inet_ntop(_host_socket.AF_INET6, packed)


def ip6_packed(text):
    # type: (str) -> bytes
    return _host_socket.inet_pton(_host_socket.AF_INET6, text)


class AddressFamily(object):
    """What differs between the IPv4 and IPv6 halves of a driver model (see the module docstring)."""

    def __init__(self, name, host_family, any_address, to_struct, to_text, reachable):
        self.name = name
        self.host_family = host_family
        self.any = any_address  # the all-zero address, as text
        self.struct = to_struct  # text -> EFI_IPv4_ADDRESS / EFI_IPv6_ADDRESS
        self.text = to_text  # EFI address structure -> canonical text
        self.reachable = reachable  # text -> on the loopback wire?

    def __repr__(self):
        return "<AddressFamily %s>" % self.name


def _ipv6_struct(text):
    return efidefs.ipv6(ip6_packed(text or "::"))


def _ipv6_text(address):
    return ip6_text(efidefs.ipv6_bytes(address))


IPV4 = AddressFamily("ipv4", _host_socket.AF_INET, "0.0.0.0", efidefs.ipv4, efidefs.ipv4_text,
                     lambda address: address.startswith("127."))
IPV6 = AddressFamily("ipv6", _host_socket.AF_INET6, "::", _ipv6_struct, _ipv6_text,
                     lambda address: address == "::1")


class Ip4Interface(object):
    """The IP4 default interface of the NIC, as Ip4Dxe holds it: address, mask, routes, DNS."""

    def __init__(self):
        self.address = None  # type: str or None   # None: not configured (0.0.0.0)
        self.netmask = "0.0.0.0"
        self.routes = []  # type: list   # [(subnet, mask, gateway)] as dotted strings
        self.dns_servers = []  # type: list

    def configured(self):
        return self.address is not None

    def route_for(self, destination):
        """The gateway to use for ``destination`` ('0.0.0.0' = on-link), or None: no route."""
        best = None
        for subnet, mask, gateway in self.routes:
            m = ip_to_int(mask)
            if ip_to_int(destination) & m == ip_to_int(subnet) & m:
                if best is None or m > ip_to_int(best[1]):
                    best = (subnet, mask, gateway)
        return None if best is None else best[2]


class Ip6Interface(object):
    """The IP6 interface of the NIC as Ip6Dxe holds it: its addresses (link-local first), routes, DNS."""

    def __init__(self, link_local):
        self.link_local = link_local  # created at once (docs/edk2.md section 5.3); never usable on the loopback wire
        self.addresses = []  # type: list   # [(address, prefix length)], link-local included
        self.routes = []  # type: list   # [(gateway, destination, prefix length)]
        self.gateways = []  # type: list
        self.dns_servers = []  # type: list

    def usable(self):
        """The address IP6 picks for an unspecified StationAddress, or None: EFI_NO_MAPPING.
        Only a non-link-local address reaches the peers on [::1] (see ip6config.py)."""
        for address, _ in self.addresses:
            if not address.lower().startswith("fe80:"):
                return address
        return None

    def has(self, address):
        return any(a == address for a, _ in self.addresses)


def link_local_from_mac(mac):
    # type: (bytes) -> str
    """fe80::/64 with the modified EUI-64 interface ID of ``mac`` (RFC 4291 appendix A)."""
    b = bytearray(mac)
    eui = bytearray([b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]])
    return ip6_text(bytes(bytearray([0xFE, 0x80] + [0] * 6) + eui))


class Nic(object):
    """The NIC: handle, MAC, IP4 interface, frame pacing, and listeners for address changes."""

    def __init__(self, firmware, name="eth0", mac="52:54:00:12:34:56", mss=1460):
        self.firmware = firmware
        self.name = name
        self.mac = bytes(bytearray(int(x, 16) for x in mac.split(":")))
        self.mss = mss
        self.handle = firmware.new_handle()
        self.ip4 = Ip4Interface()
        self.ip6 = Ip6Interface(link_local_from_mac(self.mac))
        self._epoll = _host_select.epoll()
        self._sources = {}  # type: dict   # fileno -> source
        self._turn = 0
        self.address_listeners = []  # type: list   # callables(old_address, new_address)
        self.dns_ports = {}  # type: dict   # DNS server -> host port its queries go to (see ip4config2)
        self.frames = 0
        firmware.add_periodic(MNP_POLL_PERIOD, uefi.TPL_CALLBACK, self.poll_frame, "MnpSystemPoll")

    # -- frame pacing --------------------------------------------------------------------
    def add_source(self, source):
        fd = source.fileno()
        self._sources[fd] = source
        self._epoll.register(fd, _host_select.EPOLLIN | _host_select.EPOLLOUT | _host_select.EPOLLERR)

    def set_interest(self, source, readable, writable):
        """Narrow what wakes a source, e.g. no EPOLLIN while its receive window is full."""
        mask = _host_select.EPOLLERR | _host_select.EPOLLHUP
        mask |= _host_select.EPOLLIN if readable else 0
        mask |= _host_select.EPOLLOUT if writable else 0
        self._epoll.modify(source.fileno(), mask)

    def remove_source(self, source):
        fd = source.fileno()
        if self._sources.pop(fd, None) is not None:
            try:
                self._epoll.unregister(fd)
            except (OSError, IOError, ValueError):
                pass

    def poll_frame(self):
        """Process at most one received frame for this NIC. True if one was processed."""
        with self.firmware.lock:
            ready = sorted(fd for fd, _ in self._epoll.poll(0) if fd in self._sources)
            if not ready:
                return False
            self._turn += 1
            start = self._turn % len(ready)
            for fd in ready[start:] + ready[:start]:
                source = self._sources.get(fd)
                if source is not None and source.take_frame():
                    self.frames += 1
                    return True
            return False

    # -- IPv4 address changes -------------------------------------------------------------
    def set_address(self, address, netmask, routes, dns_servers):
        """Install (or, with address None, tear down) the default interface's address."""
        old = self.ip4.address
        self.ip4.address = address
        self.ip4.netmask = netmask if address else "0.0.0.0"
        self.ip4.routes = list(routes) if address else []
        self.ip4.dns_servers = list(dns_servers)
        if old != address:
            for listener in list(self.address_listeners):
                listener(old, address)

    def close(self):
        for source in list(self._sources.values()):
            self.remove_source(source)
        self._epoll.close()


def host_socket(kind, family=_host_socket.AF_INET):
    """A non-blocking host socket of ``kind`` (SOCK_STREAM or SOCK_DGRAM) for the backing."""
    sock = _host_socket.socket(family, kind)
    sock.setsockopt(_host_socket.SOL_SOCKET, _host_socket.SO_REUSEADDR, 1)
    sock.setblocking(False)
    return sock
