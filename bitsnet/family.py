"""What differs between AF_INET and AF_INET6, in one place; everything else is shared.

Contents: address text <-> packed bytes for both families (``pack_ipv4``, ``pack_ipv6``,
``format_ipv6``, ``ipv6_literal``: bitsnet.inet's, re-exported) -- ``Family``: per family
the service-binding GUIDs, the EFI protocol classes and structures, the address conversions,
the wildcard and loopback addresses, and the config-data builders -- ``INET``, ``INET6``,
``of(af)``.

``tcp.TcpEndpoint`` and ``udp.UdpEndpoint`` take a ``Family`` and call only what is here for
anything version-specific: EFI_TCP6/UDP6 differ from TCP4/UDP4 only in the address fields of
the access point / config data / session data, in having no Routes() slot (docs/edk2.md sections 3.2, 4.1) and
no UseDefaultAddress/SubnetMask (an all-zero StationAddress lets IP6 choose the source, docs/edk2.md section 3.7).
Tokens, fragment tables and the completion rules are the same (docs/edk2.md section 3.1: "TCPx").

Each family's EFI names are written out in its own table (the classes ``_Inet`` and ``_Inet6``):
``fam.TCP_IO_TOKEN`` is ``efidefs.EFI_TCP6_IO_TOKEN`` for INET6, so grepping a spec name finds
where the family supplies it. Nothing here touches the firmware.
"""

import struct

from bitsnet import efidefs, inet
from bitsnet.constants import AF_INET, AF_INET6  # noqa: F401  (Linux's values, as _socket exports them)

try:
    from typing import Any, Optional  # noqa: F401  (type comments)
except ImportError:  # BITS's Python 2.7 has no typing module
    pass

# Address text <-> bytes is bitsnet.inet's (the one place); re-exported here for the callers.
pack_ipv6 = inet.pack_ipv6
format_ipv6 = inet.format_ipv6
ipv6_literal = inet.ipv6_literal


def pack_ipv4(text):
    # type: (str) -> Optional[bytes]
    """inet_pton(AF_INET): exactly four decimal parts 0..255, no leading zeros; None if not."""
    return inet.parse_ipv4(text, strict=True)


# --- the two families ----------------------------------------------------------------------------
class Family(object):
    """One address family: constants, address conversions and the EFI names of its protocols.

    ``fam.TCP_IO_TOKEN``, ``fam.UDP_CONFIG_DATA``... are ``efidefs.EFI_TCP4_IO_TOKEN`` /
    ``EFI_UDP6_CONFIG_DATA``...: the spec name with the version digit taken out. ``_Inet`` and
    ``_Inet6`` below write each family's table out; here the names are only declared."""

    # The EFI names every family supplies (Tcp4.h/Tcp6.h, Udp4.h/Udp6.h, Dns4.h/Dns6.h)
    TCP_SERVICE_BINDING_PROTOCOL_GUID = None  # type: Any
    TCP_PROTOCOL_GUID = None  # type: Any
    TCP_SERVICE_BINDING_PROTOCOL = None  # type: Any
    TCP_PROTOCOL = None  # type: Any
    TCP_ACCESS_POINT = None  # type: Any
    TCP_OPTION = None  # type: Any
    TCP_CONFIG_DATA = None  # type: Any
    TCP_COMPLETION_TOKEN = None  # type: Any
    TCP_CONNECTION_TOKEN = None  # type: Any
    TCP_LISTEN_TOKEN = None  # type: Any
    TCP_IO_TOKEN = None  # type: Any
    TCP_CLOSE_TOKEN = None  # type: Any
    TCP_FRAGMENT_DATA = None  # type: Any
    TCP_RECEIVE_DATA = None  # type: Any
    TCP_TRANSMIT_DATA = None  # type: Any
    TCP_PACKET = None  # type: Any

    UDP_SERVICE_BINDING_PROTOCOL_GUID = None  # type: Any
    UDP_PROTOCOL_GUID = None  # type: Any
    UDP_SERVICE_BINDING_PROTOCOL = None  # type: Any
    UDP_PROTOCOL = None  # type: Any
    UDP_CONFIG_DATA = None  # type: Any
    UDP_SESSION_DATA = None  # type: Any
    UDP_COMPLETION_TOKEN = None  # type: Any
    UDP_FRAGMENT_DATA = None  # type: Any
    UDP_RECEIVE_DATA = None  # type: Any
    UDP_TRANSMIT_DATA = None  # type: Any
    UDP_PACKET = None  # type: Any

    DNS_SERVICE_BINDING_PROTOCOL_GUID = None  # type: Any
    DNS_PROTOCOL_GUID = None  # type: Any
    DNS_SERVICE_BINDING_PROTOCOL = None  # type: Any
    DNS_PROTOCOL = None  # type: Any
    DNS_CONFIG_DATA = None  # type: Any
    DNS_MODE_DATA = None  # type: Any
    DNS_CACHE_ENTRY = None  # type: Any
    DNS_COMPLETION_TOKEN = None  # type: Any
    DNS_RSP_DATA = None  # type: Any

    tcp_sb = None  # type: Any  # TCP_SERVICE_BINDING_PROTOCOL_GUID, the name create_child is given
    udp_sb = None  # type: Any  # UDP_SERVICE_BINDING_PROTOCOL_GUID

    def __init__(self, af, version, wildcard, loopback, size):
        # type: (int, int, str, str, int) -> None
        self.af = af
        self.version = version
        self.wildcard = wildcard  # "" and None bind to this
        self.loopback = loopback
        self.size = size  # packed address bytes
        self.name = "IPv%d" % version
        # EFI_TCP6/UDP6 have no Routes() (docs/edk2.md sections 3.2, 4.1) and no UseDefaultAddress/SubnetMask.
        self.has_routes = version == 4
        self._tcp_config = None  # type: Any   # tcp_config's one structure
        self._addresses = {}  # type: dict   # _address_of's structures, by text

    def __repr__(self):
        return "<Family %s>" % self.name

    # -- addresses
    def pack(self, text):
        # type: (str) -> Optional[bytes]
        """Packed bytes of a literal of this family, or None."""
        if self.version == 4:
            return pack_ipv4(text)
        return pack_ipv6(text.split("%", 1)[0])

    def text(self, packed):
        # type: (bytes) -> str
        return "%d.%d.%d.%d" % struct.unpack("!4B", packed) if self.version == 4 else format_ipv6(packed)

    def efi_address(self, text=None):
        """EFI_IPv4_ADDRESS / EFI_IPv6_ADDRESS for a literal (None or "": all zero)."""
        address = efidefs.EFI_IPv4_ADDRESS() if self.version == 4 else efidefs.EFI_IPv6_ADDRESS()
        if text:
            packed = self.pack(text)
            if packed is None:
                raise ValueError("not an %s address: %r" % (self.name, text))
            address.Addr[:] = bytearray(packed)
        return address

    def _address_of(self, text, mask=False):
        """``efi_address(text)`` (``mask``: ``efidefs.ipv4(text)``, a subnet mask) made once per
        text, for copying into a config's fields only (never handed to the firmware to fill):
        each one is a ctypes structure, a pack and a copy, ~40 us in BITS (docs/performance.md
        section 7), and a connection's station, mask and peer are mostly the last ones'."""
        key = (text, mask)
        address = self._addresses.get(key)
        if address is None:
            if len(self._addresses) >= 64:
                self._addresses.clear()
            address = self._addresses[key] = efidefs.ipv4(text) if mask else self.efi_address(text)
        return address

    def efi_text(self, address):
        # type: (Any) -> str
        return self.text(bytes(bytearray(address.Addr)))

    def sockaddr(self, host, port):
        """The address tuple Python shows: (host, port) or (host, port, flowinfo, scope_id)."""
        return (host, port) if self.version == 4 else (host, port, 0, 0)

    def is_wildcard(self, host):
        return host in ("", None) or host == self.wildcard

    # -- EFI config data (docs/edk2.md sections 3.1, 4.1): only the address fields differ
    def tcp_access_point(self, config, station, netmask, port, remote, active):
        """Fill ``config.AccessPoint``; ``station`` None lets the firmware choose (IPv6 only)."""
        ap = config.AccessPoint
        if self.version == 4:
            # EDK2 quirk: UseDefaultAddress=TRUE may switch the NIC to DHCP (docs/edk2.md section 3.7),
            # and old TcpDxe failed it with EFI_ALREADY_STARTED (docs/bits-efi.md section 2): give the
            # address explicitly.
            ap.UseDefaultAddress = False
            ap.SubnetMask = self._address_of(netmask, mask=True)
        # Every field, since tcp_config's structure keeps the last Configure's.
        ap.StationAddress = self._address_of(station)
        ap.StationPort = port
        ap.RemoteAddress = self._address_of(remote and remote[0])
        ap.RemotePort = remote[1] if remote is not None else 0
        ap.ActiveFlag = active

    def tcp_config(self, hop_limit, tos=0):
        """The family's one EFI_TCPx_CONFIG_DATA, with these values. One serves every Configure:
        EDK2 copies it in the call (and writes the port it chose into it, docs/edk2.md section
        3.8), and building a new one was a visible part of a connect in BITS (docs/performance.md
        section 7). ``tcp_access_point`` fills all of its AccessPoint; ControlOption is the
        caller's to set."""
        config = self._tcp_config
        if config is None:
            config = self._tcp_config = self.TCP_CONFIG_DATA()
        if self.version == 4:
            config.TimeToLive = hop_limit
            config.TypeOfService = tos
        else:
            config.HopLimit = hop_limit
            config.TrafficClass = tos
        return config

    def udp_receive_data(self, count):
        """EFI_UDPx_RECEIVE_DATA with a FragmentTable of ``count`` entries."""
        if self.version == 4:
            return efidefs.udp4_receive_data(count)
        return efidefs.udp6_receive_data(count)

    def udp_config(self, station, netmask, port, remote, hop_limit, receive_timeout, duplicate_port, tos=0):
        config = self.UDP_CONFIG_DATA()
        config.AllowDuplicatePort = duplicate_port
        config.ReceiveTimeout = receive_timeout
        if self.version == 4:
            config.AcceptBroadcast = True
            config.TimeToLive = hop_limit
            config.TypeOfService = tos
            # EDK2 quirk: UseDefaultAddress=TRUE may switch the NIC to DHCP (docs/edk2.md section 3.7):
            # give the address explicitly, as tcp_access_point does.
            config.UseDefaultAddress = False
            config.SubnetMask = efidefs.ipv4(netmask)
        else:
            config.HopLimit = hop_limit
            config.TrafficClass = tos
        config.StationAddress = self.efi_address(station)
        config.StationPort = port
        if remote is not None:
            config.RemoteAddress = self.efi_address(remote[0])
            config.RemotePort = remote[1]
        return config


class _Inet(Family):
    """IPv4: the EFI_TCP4, EFI_UDP4 and EFI_DNS4 names."""

    TCP_SERVICE_BINDING_PROTOCOL_GUID = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID
    TCP_PROTOCOL_GUID = efidefs.EFI_TCP4_PROTOCOL_GUID
    TCP_SERVICE_BINDING_PROTOCOL = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL
    TCP_PROTOCOL = efidefs.EFI_TCP4_PROTOCOL
    TCP_ACCESS_POINT = efidefs.EFI_TCP4_ACCESS_POINT
    TCP_OPTION = efidefs.EFI_TCP4_OPTION
    TCP_CONFIG_DATA = efidefs.EFI_TCP4_CONFIG_DATA
    TCP_COMPLETION_TOKEN = efidefs.EFI_TCP4_COMPLETION_TOKEN
    TCP_CONNECTION_TOKEN = efidefs.EFI_TCP4_CONNECTION_TOKEN
    TCP_LISTEN_TOKEN = efidefs.EFI_TCP4_LISTEN_TOKEN
    TCP_IO_TOKEN = efidefs.EFI_TCP4_IO_TOKEN
    TCP_CLOSE_TOKEN = efidefs.EFI_TCP4_CLOSE_TOKEN
    TCP_FRAGMENT_DATA = efidefs.EFI_TCP4_FRAGMENT_DATA
    TCP_RECEIVE_DATA = efidefs.EFI_TCP4_RECEIVE_DATA
    TCP_TRANSMIT_DATA = efidefs.EFI_TCP4_TRANSMIT_DATA
    TCP_PACKET = efidefs.EFI_TCP4_PACKET

    UDP_SERVICE_BINDING_PROTOCOL_GUID = efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID
    UDP_PROTOCOL_GUID = efidefs.EFI_UDP4_PROTOCOL_GUID
    UDP_SERVICE_BINDING_PROTOCOL = efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL
    UDP_PROTOCOL = efidefs.EFI_UDP4_PROTOCOL
    UDP_CONFIG_DATA = efidefs.EFI_UDP4_CONFIG_DATA
    UDP_SESSION_DATA = efidefs.EFI_UDP4_SESSION_DATA
    UDP_COMPLETION_TOKEN = efidefs.EFI_UDP4_COMPLETION_TOKEN
    UDP_FRAGMENT_DATA = efidefs.EFI_UDP4_FRAGMENT_DATA
    UDP_RECEIVE_DATA = efidefs.EFI_UDP4_RECEIVE_DATA
    UDP_TRANSMIT_DATA = efidefs.EFI_UDP4_TRANSMIT_DATA
    UDP_PACKET = efidefs.EFI_UDP4_PACKET

    DNS_SERVICE_BINDING_PROTOCOL_GUID = efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID
    DNS_PROTOCOL_GUID = efidefs.EFI_DNS4_PROTOCOL_GUID
    DNS_SERVICE_BINDING_PROTOCOL = efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL
    DNS_PROTOCOL = efidefs.EFI_DNS4_PROTOCOL
    DNS_CONFIG_DATA = efidefs.EFI_DNS4_CONFIG_DATA
    DNS_MODE_DATA = efidefs.EFI_DNS4_MODE_DATA
    DNS_CACHE_ENTRY = efidefs.EFI_DNS4_CACHE_ENTRY
    DNS_COMPLETION_TOKEN = efidefs.EFI_DNS4_COMPLETION_TOKEN
    DNS_RSP_DATA = efidefs.EFI_DNS4_RSP_DATA

    tcp_sb = TCP_SERVICE_BINDING_PROTOCOL_GUID
    udp_sb = UDP_SERVICE_BINDING_PROTOCOL_GUID


class _Inet6(Family):
    """IPv6: the EFI_TCP6, EFI_UDP6 and EFI_DNS6 names."""

    TCP_SERVICE_BINDING_PROTOCOL_GUID = efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID
    TCP_PROTOCOL_GUID = efidefs.EFI_TCP6_PROTOCOL_GUID
    TCP_SERVICE_BINDING_PROTOCOL = efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL
    TCP_PROTOCOL = efidefs.EFI_TCP6_PROTOCOL
    TCP_ACCESS_POINT = efidefs.EFI_TCP6_ACCESS_POINT
    TCP_OPTION = efidefs.EFI_TCP6_OPTION
    TCP_CONFIG_DATA = efidefs.EFI_TCP6_CONFIG_DATA
    TCP_COMPLETION_TOKEN = efidefs.EFI_TCP6_COMPLETION_TOKEN
    TCP_CONNECTION_TOKEN = efidefs.EFI_TCP6_CONNECTION_TOKEN
    TCP_LISTEN_TOKEN = efidefs.EFI_TCP6_LISTEN_TOKEN
    TCP_IO_TOKEN = efidefs.EFI_TCP6_IO_TOKEN
    TCP_CLOSE_TOKEN = efidefs.EFI_TCP6_CLOSE_TOKEN
    TCP_FRAGMENT_DATA = efidefs.EFI_TCP6_FRAGMENT_DATA
    TCP_RECEIVE_DATA = efidefs.EFI_TCP6_RECEIVE_DATA
    TCP_TRANSMIT_DATA = efidefs.EFI_TCP6_TRANSMIT_DATA
    TCP_PACKET = efidefs.EFI_TCP6_PACKET

    UDP_SERVICE_BINDING_PROTOCOL_GUID = efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID
    UDP_PROTOCOL_GUID = efidefs.EFI_UDP6_PROTOCOL_GUID
    UDP_SERVICE_BINDING_PROTOCOL = efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL
    UDP_PROTOCOL = efidefs.EFI_UDP6_PROTOCOL
    UDP_CONFIG_DATA = efidefs.EFI_UDP6_CONFIG_DATA
    UDP_SESSION_DATA = efidefs.EFI_UDP6_SESSION_DATA
    UDP_COMPLETION_TOKEN = efidefs.EFI_UDP6_COMPLETION_TOKEN
    UDP_FRAGMENT_DATA = efidefs.EFI_UDP6_FRAGMENT_DATA
    UDP_RECEIVE_DATA = efidefs.EFI_UDP6_RECEIVE_DATA
    UDP_TRANSMIT_DATA = efidefs.EFI_UDP6_TRANSMIT_DATA
    UDP_PACKET = efidefs.EFI_UDP6_PACKET

    DNS_SERVICE_BINDING_PROTOCOL_GUID = efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID
    DNS_PROTOCOL_GUID = efidefs.EFI_DNS6_PROTOCOL_GUID
    DNS_SERVICE_BINDING_PROTOCOL = efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL
    DNS_PROTOCOL = efidefs.EFI_DNS6_PROTOCOL
    DNS_CONFIG_DATA = efidefs.EFI_DNS6_CONFIG_DATA
    DNS_MODE_DATA = efidefs.EFI_DNS6_MODE_DATA
    DNS_CACHE_ENTRY = efidefs.EFI_DNS6_CACHE_ENTRY
    DNS_COMPLETION_TOKEN = efidefs.EFI_DNS6_COMPLETION_TOKEN
    DNS_RSP_DATA = efidefs.EFI_DNS6_RSP_DATA

    tcp_sb = TCP_SERVICE_BINDING_PROTOCOL_GUID
    udp_sb = UDP_SERVICE_BINDING_PROTOCOL_GUID


INET = _Inet(AF_INET, 4, "0.0.0.0", "127.0.0.1", 4)  # type: Family
INET6 = _Inet6(AF_INET6, 6, "::", "::1", 16)  # type: Family
_BY_AF = {AF_INET: INET, AF_INET6: INET6}


def of(af):
    # type: (int) -> Family
    """The Family for an AF_* number; KeyError if bitsnet has none."""
    return _BY_AF[af]


def of_address(text):
    """The Family whose literal ``text`` is (INET6 for anything with a ':'), or None."""
    if ":" in text:
        return INET6 if INET6.pack(text) is not None else None
    return INET if pack_ipv4(text) is not None else None
