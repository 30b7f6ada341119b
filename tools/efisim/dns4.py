"""Models EDK2 NetworkPkg/DnsDxe (DnsProtocol.c, DnsImpl.c, DnsDhcp.c) for IPv4; quirks are
marked `# EDK2 quirk:`.

One ``Dns4Driver`` per NIC installs EFI_DNS4_SERVICE_BINDING_PROTOCOL on the NIC handle (only
with MachineConfig(dns4=True): most firmware has no DNS4 at all, docs/edk2.md section 6.3). Each child
(``Dns4Child``) is one DNS_INSTANCE talking to one server through a host UDP socket on loopback,
which is a NIC frame source: one DNS reply is one frame (docs/edk2.md section 3.4). What is modelled
(docs/edk2.md section 6):

* Configure: the server list checks, Protocol != 17 -> EFI_UNSUPPORTED, only DnsServerList[0] is
  ever used, UseDefaultSetting without an address (the NIC's policy switches to Dhcp, docs/edk2.md section 3.7,
  and Configure waits up to 5 s for the address, Dns4GetMapping), and an empty server list: EDK2
  then runs its own blocking DHCP exchange inside Configure and takes the first DNS server the
  DHCP server offers. Here that exchange is the machine's DHCP server answering after
  ``dhcp_delay`` (capped at the 5 s EDK2 waits) with MachineConfig.dns_servers -- EFI_TIMEOUT
  after 5 s when DHCP does not answer, EFI_NOT_FOUND when it offers no DNS server. A second
  Configure goes through the UDP reconfigure rules: another server, or LocalPort 0 after an
  ephemeral bind, is EFI_ALREADY_STARTED (Configure(NULL) first).
* HostNameToIp (CHAR16 name, A query), GeneralLookUp (any QTYPE), results allocated from pool
  for the caller to free, statuses as ParseDnsResponse sets them, retransmission and EFI_TIMEOUT,
  the driver-global cache (EnableDnsCache; entries die after their TTL), UpdateDnsCache,
  GetModeData (pool the caller frees), Poll, Cancel.
* IpToHostName is EFI_UNSUPPORTED: EDK2 never implemented it (reverse lookups need
  GeneralLookUp with a PTR query, or a resolver of one's own).

Where the model is more lenient than EDK2: answer owner names that are not compression pointers
are parsed properly (EDK2 ASSERTs that they are pointers and skips two bytes); malformed replies
complete the token with EFI_DEVICE_ERROR (EDK2 would read past the packet). Retransmission uses
exact deadlines, not EDK2's 1 s tick.

DnsDxe's IPv6 half (dns6.py) shares this engine: what differs -- structures, the address family
(nic.IPV4 / nic.IPV6), the address record type (A / AAAA) -- comes from Dns4Driver's class
attributes, and Dns6Driver overrides Configure, whose EFI_DNS6_CONFIG_DATA is shaped differently.
"""

from __future__ import print_function

import ctypes
import errno
import random
from efisim.nic import _host_socket  # the OS socket: once bitsnet is installed, `import socket` is bitsnet
import struct
from ctypes import POINTER, c_void_p

from bitsnet import efidefs
from efisim import uefi
from efisim.firmware import FIRMWARE, _now, efiapi, pointer_address
from efisim.nic import IPV4
from efisim.service_binding import ServiceBinding

S = uefi

DNS_PROTOCOL_UDP = 17
DNS_SERVER_PORT = 53
DNS_DEFAULT_TIMEOUT = 2  # seconds: the least RetryInterval EDK2 uses
DNS_DEFAULT_RETRY = 3  # retransmissions when the configured RetryCount is 0
DNS_TIME_TO_GETMAP = 5  # seconds Configure waits for the default address or the DHCP reply
DNS_TIMER_PERIOD = 0.1  # how often retransmit deadlines and cache timeouts are checked
DNS_TYPE_A, DNS_TYPE_CNAME = 1, 5
DNS_CLASS_INET = 1
RCODE_NAME_ERROR = 3

_H2A_SIZE = ctypes.sizeof(efidefs.DNS_HOST_TO_ADDR_DATA)
_RR_SIZE = ctypes.sizeof(efidefs.DNS_RESOURCE_RECORD)


def _ip(address_struct):
    return efidefs.ipv4_text(address_struct)


def _ip_to_int(text):
    a, b, c, d = [int(x) for x in text.split(".")]
    return (a << 24) | (b << 16) | (c << 8) | d


def _valid_netmask(mask):
    inverted = ~_ip_to_int(mask) & 0xFFFFFFFF
    return inverted & (inverted + 1) == 0


def _unicast(address, mask):
    ip, m = _ip_to_int(address), _ip_to_int(mask)
    if ip == 0 or ip >= 0xE0000000:
        return False
    if m and m != 0xFFFFFFFF and (ip & ~m & 0xFFFFFFFF in (0, ~m & 0xFFFFFFFF)):
        return False
    return True


def read_char16(address, limit=1024):
    """The UCS-2 string at ``address`` (up to its NUL), as text."""
    chars = []
    for value in (ctypes.c_uint16 * limit).from_address(address):
        if value == 0:
            break
        chars.append(value)
    return struct.pack("<%dH" % len(chars), *chars).decode("utf-16-le", "replace")


def encode_qname(name):
    # type: (str) -> bytes
    """NetLibCreateDnsQName: dotted text -> length-prefixed labels and the root's zero byte."""
    out = b""
    for label in name.split("."):
        if label:
            raw = label.encode("ascii", "replace")[:63]
            out += struct.pack("!B", len(raw)) + raw
    return out + b"\x00"


class _Malformed(Exception):
    pass


def _skip_name(packet, offset):
    """Offset just past the (possibly compressed) name at ``offset``."""
    data = bytearray(packet)
    steps = 0
    while True:
        if offset >= len(data) or steps > 128:
            raise _Malformed()
        length = data[offset]
        if length & 0xC0 == 0xC0:
            return offset + 2
        if length & 0xC0:
            raise _Malformed()
        if length == 0:
            return offset + 1
        offset += length + 1
        steps += 1


def parse_answers(packet, ancount, offset):
    """[(type, class, ttl, rdata)] of the answer section starting at ``offset``."""
    answers = []
    for _ in range(ancount):
        offset = _skip_name(packet, offset)
        if offset + 10 > len(packet):
            raise _Malformed()
        rtype, rclass, ttl, length = struct.unpack("!HHLH", packet[offset:offset + 10])
        offset += 10
        if offset + length > len(packet):
            raise _Malformed()
        answers.append((rtype, rclass, ttl, packet[offset:offset + length]))
        offset += length
    return answers


class _Query(object):
    """DNS4_TOKEN_ENTRY: one pending token, its query packet and its retransmission state."""

    def __init__(self, token, packet, ident, qtype, qclass, interval, host_name=0, general=False):
        self.token = token  # address of the EFI_DNS4_COMPLETION_TOKEN
        self.packet = packet
        self.ident = ident
        self.qtype, self.qclass = qtype, qclass
        self.interval = interval
        self.deadline = _now() + interval
        self.host_name = host_name  # the caller's CHAR16 pointer, read again when caching
        self.general = general


class Dns4Child(object):
    """One EFI_DNS4_PROTOCOL instance (DNS_INSTANCE)."""

    def __init__(self, driver):
        self.driver = driver
        self.handle = FIRMWARE.new_handle()
        self.interface = driver.new_interface()
        self.address = ctypes.addressof(self.interface)
        self.configured = False
        self.config = driver.CONFIG_DATA()  # DnsServerList pointer not kept
        self.servers = []  # type: list   # the configured list (only [0] is used)
        self.server = None  # type: str or None   # SessionDnsServer
        self.station = driver.family.any
        self.port = 0
        self.max_retry = 0
        self.sock = None  # type: object
        self._fd = None  # type: int or None
        self.queries = []  # type: list   # _Query

    # frame source (nic.py)
    def fileno(self):
        return self._fd

    def take_frame(self):
        if self.sock is None:
            return False
        try:
            packet, source = self.sock.recvfrom(65535)
        except (OSError, IOError) as exc:
            code = getattr(exc, "errno", None)
            return code not in (errno.EAGAIN, errno.EWOULDBLOCK)  # an ICMP error: one frame, ignored
        if tuple(source[:2]) != self.driver.server_endpoint(self.server):  # AF_INET6 names have 4 parts
            return True  # the UDP child is "connected" to the server: anything else is dropped
        self.driver.on_packet(self, packet)
        return True

    def close_socket(self):
        if self.sock is not None:
            self.driver.nic.remove_source(self)
            self.sock.close()
            self.sock = None
            self._fd = None


class Dns4Driver(ServiceBinding):
    """DnsDxe (IPv4 half) on one NIC: the service binding, children, the global cache."""

    SERVICE_BINDING = efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL  # type: type
    PROTOCOL = efidefs.EFI_DNS4_PROTOCOL  # type: type
    CONFIG_DATA = efidefs.EFI_DNS4_CONFIG_DATA  # type: type
    CACHE_ENTRY = efidefs.EFI_DNS4_CACHE_ENTRY  # type: type
    ADDRESS = efidefs.EFI_IPv4_ADDRESS  # type: type
    LEDGER_PREFIX = "dns4"
    QTYPE_ADDRESS = DNS_TYPE_A  # the record HostNameToIp asks for and keeps
    family = IPV4

    def __init__(self, machine):
        self.machine = machine
        self.nic = machine.nic
        self.children = {}  # type: dict
        self._by_interface = {}  # type: dict
        self._retired = []  # type: list
        self.cache = []  # type: list   # mDriverData->Dns4CacheList: [host name, ip, expiry, buffers]
        self.server_list = []  # type: list   # mDriverData->Dns4ServerList (every server configured)
        self.random = random.Random(machine.config.seed + 53)
        self.install_service_binding(self.SERVICE_BINDING, self.PROTOCOL)
        self._timer_work = self.on_timer  # one bound method, so remove_periodic finds it
        FIRMWARE.add_periodic(DNS_TIMER_PERIOD, uefi.TPL_CALLBACK, self._timer_work, "DnsOnTimer")

    # ------------------------------------------------------------------ bookkeeping
    def ledger(self):
        with FIRMWARE.lock:
            return {self.LEDGER_PREFIX + "_children": len(self.children),
                    self.LEDGER_PREFIX + "_tokens": sum(len(c.queries) for c in self.children.values())}

    def shutdown(self):
        with FIRMWARE.lock:
            FIRMWARE.remove_periodic(self._timer_work)
            for child in self.children.values():
                child.close_socket()
        self.uninstall_service_binding()

    def server_endpoint(self, server):
        """Where (server, 53) really listens: MachineConfig(dns_servers=["host:port"])."""
        return server, getattr(self.nic, "dns_ports", {}).get(server, DNS_SERVER_PORT)

    @staticmethod
    def complete(child, query, status):
        if query in child.queries:
            child.queries.remove(query)
        token = efidefs.EFI_DNS4_COMPLETION_TOKEN.from_address(query.token)
        token.Status = status
        if token.Event:  # EDK2 signals only a non-NULL event; the caller may poll Status instead
            FIRMWARE.signal(token.Event)

    # ------------------------------------------------------------------ entry points
    def _call(self, this, body, args):
        with FIRMWARE.lock:
            child = self._by_interface.get(pointer_address(this))
            if child is None:
                return S.EFI_INVALID_PARAMETER
            with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
                return body(child, *args)

    def new_child(self):
        child = Dns4Child(self)
        self.children[child.handle] = child
        self._by_interface[child.address] = child
        FIRMWARE.install_protocol(child.handle, self.PROTOCOL.guid, child.address)
        return child

    def destroy(self, child):
        self.reset(child)
        self.children.pop(child.handle, None)
        self._by_interface.pop(child.address, None)
        self._retired.append(child.interface)
        FIRMWARE.uninstall_protocol(child.handle, self.PROTOCOL.guid)

    @efiapi()
    def _GetModeData(self, this, mode):
        return self._call(this, self.get_mode_data, (mode,))

    @efiapi()
    def _Configure(self, this, config):
        # Not through _call: the blocking waits below run with the TPL restored, as EDK2's
        # Configure restores it around its DHCP exchange.
        with FIRMWARE.lock:
            child = self._by_interface.get(pointer_address(this))
            if child is None:
                return S.EFI_INVALID_PARAMETER
            return self.configure(child, config)

    @efiapi()
    def _HostNameToIp(self, this, host_name, token):
        return self._call(this, self.host_name_to_ip, (host_name, token))

    @efiapi()
    def _IpToHostName(self, this, address, token):
        # EDK2 quirk (DnsDxe): IpToHostName is not implemented at all.
        return S.EFI_UNSUPPORTED

    @efiapi()
    def _GeneralLookUp(self, this, qname, qtype, qclass, token):
        return self._call(this, self.general_lookup, (qname, qtype, qclass, token))

    @efiapi()
    def _UpdateDnsCache(self, this, delete, override, entry):
        if not entry.HostName or not entry.IpAddress or entry.Timeout == 0:
            return S.EFI_INVALID_PARAMETER
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            name = read_char16(pointer_address(entry.HostName))
            return self.update_cache(bool(delete), bool(override), name, self.family.text(entry.IpAddress.contents),
                                     entry.Timeout)

    @efiapi()
    def _Poll(self, this):
        return self._call(this, self.poll, ())

    @efiapi()
    def _Cancel(self, this, token):
        return self._call(this, self.cancel, (token,))

    # ------------------------------------------------------------------ Configure
    def configure(self, child, config):
        if config:
            cfg = config.contents
            count, servers = cfg.DnsServerListCount, pointer_address(cfg.DnsServerList)
            if bool(count) != bool(servers):
                return S.EFI_INVALID_PARAMETER
            if cfg.Protocol != DNS_PROTOCOL_UDP:
                return S.EFI_UNSUPPORTED
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            if not config:
                self.reset(child)
                return S.EFI_SUCCESS
            station, mask = _ip(cfg.StationIp), _ip(cfg.SubnetMask)
            if not cfg.UseDefaultSetting and (not _valid_netmask(mask) or not _unicast(station, mask)):
                return S.EFI_INVALID_PARAMETER
            listed = [_ip(a) for a in (efidefs.EFI_IPv4_ADDRESS * count).from_address(servers)] if count else []
        if not listed:
            # EDK2 quirk (DnsDxe, docs/edk2.md section 6.2): no server given -> Configure itself runs a DHCP
            # exchange asking for option 6 and busy-waits for the answer (the TPL restored).
            status, offered = self.dhcp_dns_servers()
            if status != S.EFI_SUCCESS:
                return status
            server = offered[0]
        else:
            server = listed[0]  # EDK2 (docs/edk2.md section 6.2): only the first server is ever used
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            if child.configured:
                # Dns4ConfigUdp on a configured UDP child: Udp4IsReconfigurable decides.
                same = (server == child.server and cfg.LocalPort == child.port and
                        bool(cfg.UseDefaultSetting) == bool(child.config.UseDefaultSetting) and
                        (cfg.UseDefaultSetting or station == child.station))
                if not same:
                    return S.EFI_ALREADY_STARTED
                self.store_config(child, cfg, listed)
                return S.EFI_SUCCESS
        if cfg.UseDefaultSetting:
            if self.nic.ip4.address is None:
                # UDP4 says EFI_NO_MAPPING and switches the policy to Dhcp (docs/edk2.md section 3.7); DnsDxe
                # (Dns4GetMapping) then polls up to 5 s for the address before giving up.
                try:
                    from efisim import ip4config2
                    ip4config2.request_dhcp(self.machine)
                except ImportError:
                    pass
                deadline = _now() + DNS_TIME_TO_GETMAP
                while self.nic.ip4.address is None and _now() < deadline:
                    FIRMWARE.sleep(0.02)
                if self.nic.ip4.address is None:
                    return S.EFI_NO_MAPPING
            station = self.nic.ip4.address
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            status = self.open_socket(child, station, cfg.LocalPort)
            if status != S.EFI_SUCCESS:
                return status
            child.server, child.station = server, station
            self.store_config(child, cfg, listed)
            if server not in self.server_list:
                self.server_list.append(server)  # AddDns4ServerIp
            child.configured = True
            return S.EFI_SUCCESS

    @staticmethod
    def store_config(child, cfg, listed):
        ctypes.memmove(ctypes.addressof(child.config), ctypes.addressof(cfg), ctypes.sizeof(cfg))
        child.config.DnsServerList = None
        child.servers = listed

    def dhcp_dns_servers(self):
        """GetDns4ServerFromDhcp4, blocking: (status, [server, ...])."""
        config = self.machine.config
        faults = getattr(self.machine, "faults", None)
        answers = config.dhcp and not getattr(faults, "no_dhcp", False)
        if not answers:
            FIRMWARE.sleep(DNS_TIME_TO_GETMAP)
            return S.EFI_TIMEOUT, []
        FIRMWARE.sleep(min(float(config.dhcp_delay), DNS_TIME_TO_GETMAP))
        offered = [str(s).partition(":")[0] for s in config.dns_servers]
        if not offered:
            return S.EFI_NOT_FOUND, []
        return S.EFI_SUCCESS, offered

    def open_socket(self, child, station, port):
        """The UDP child: a host socket on (station, LocalPort or ephemeral)."""
        if not self.family.reachable(station):
            return S.EFI_SUCCESS  # not on the loopback wire: nothing will ever answer
        sock = _host_socket.socket(self.family.host_family, _host_socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            sock.bind((station, port))
        except (OSError, IOError):
            sock.close()
            return S.EFI_ACCESS_DENIED  # Udp4Bind: the port is taken
        child.sock = sock
        child.port = sock.getsockname()[1]
        child._fd = sock.fileno()
        self.nic.add_source(child)
        self.nic.set_interest(child, True, False)
        return S.EFI_SUCCESS

    def reset(self, child):
        """Configure(NULL) / DestroyChild: every token EFI_ABORTED, the UDP child closed."""
        for query in list(child.queries):
            self.complete(child, query, S.EFI_ABORTED)
        child.close_socket()
        child.configured = False
        child.server = None
        child.servers = []
        child.port = 0
        ctypes.memset(ctypes.addressof(child.config), 0, ctypes.sizeof(child.config))

    # ------------------------------------------------------------------ GetModeData
    def get_mode_data(self, child, mode):
        if not mode:
            return S.EFI_INVALID_PARAMETER
        if not child.configured:
            return S.EFI_NOT_STARTED
        self.expire_cache()
        out = mode.contents
        ctypes.memset(ctypes.addressof(out), 0, ctypes.sizeof(out))
        ctypes.memmove(ctypes.addressof(out.DnsConfigData), ctypes.addressof(child.config),
                       ctypes.sizeof(child.config))
        # Everything handed out here is AllocatePool'd: the caller frees DnsConfigData.DnsServerList
        # (Dns4CopyConfigure), DnsServerList and DnsCacheList.
        if child.servers:
            out.DnsConfigData.DnsServerList = self.address_list(child.servers)
        out.DnsServerCount = len(self.server_list)
        out.DnsServerList = self.address_list(self.server_list)
        address = FIRMWARE.allocate(max(len(self.cache), 1) * ctypes.sizeof(self.CACHE_ENTRY))
        entries = (self.CACHE_ENTRY * max(len(self.cache), 1)).from_address(address)
        now = _now()
        for entry, (name, ip, expiry, buffers) in zip(entries, self.cache):
            entry.HostName = ctypes.cast(buffers[0], POINTER(efidefs.UINT16))  # driver memory
            entry.IpAddress = ctypes.pointer(buffers[1])
            entry.Timeout = max(int(expiry - now), 0)
        out.DnsCacheCount = len(self.cache)
        out.DnsCacheList = ctypes.cast(address, POINTER(self.CACHE_ENTRY))
        return S.EFI_SUCCESS

    def address_list(self, addresses):
        """A pool array of EFI_IPv4_ADDRESS (EFI_IPv6_ADDRESS for DNS6) the caller frees."""
        address = FIRMWARE.allocate(max(len(addresses), 1) * ctypes.sizeof(self.ADDRESS))
        table = (self.ADDRESS * max(len(addresses), 1)).from_address(address)
        for i, text in enumerate(addresses):
            table[i] = self.family.struct(text)
        return ctypes.cast(address, POINTER(self.ADDRESS))

    # ------------------------------------------------------------------ the cache
    def update_cache(self, delete, override, name, ip, timeout):
        """UpdateDns4Cache."""
        self.expire_cache()
        for item in self.cache:
            if item[0] == name and item[1] == ip:
                if delete:
                    self.cache.remove(item)
                    return S.EFI_SUCCESS
                if override:
                    item[2] = _now() + timeout
                    return S.EFI_SUCCESS
                return S.EFI_ACCESS_DENIED
        # EDK2 quirk (DnsDxe UpdateDns4Cache): no match -> the entry is added, even when the
        # caller asked to delete it.
        raw = (ctypes.c_uint16 * (len(name) + 1))(*([ord(c) for c in name] + [0]))
        self.cache.append([name, ip, _now() + timeout, (raw, self.family.struct(ip))])
        return S.EFI_SUCCESS

    def expire_cache(self):
        now = _now()
        self.cache = [item for item in self.cache if item[2] > now]

    def cached(self, name):
        self.expire_cache()
        return [item[1] for item in self.cache if item[0] == name]

    # ------------------------------------------------------------------ queries
    def start(self, child, token_pointer, qname, qtype, qclass, host_name=0, general=False):
        """The common part of HostNameToIp and GeneralLookUp after the cache check."""
        token = token_pointer.contents
        ident = self.random.randrange(1 << 16)
        header = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0)  # RD set, as EDK2 asks
        packet = header + qname + struct.pack("!HH", qtype, qclass)
        query = _Query(pointer_address(token_pointer), packet, ident, qtype, qclass, token.RetryInterval,
                       host_name, general)
        child.queries.append(query)
        self.send(child, query)
        return S.EFI_SUCCESS

    def send(self, child, query):
        if child.sock is None:
            return
        try:
            child.sock.sendto(query.packet, self.server_endpoint(child.server))
        except (OSError, IOError):
            pass  # lost on the wire: the retransmit timer will try again

    def prepare_token(self, child, token_pointer):
        """What HostNameToIp and GeneralLookUp do to every token before anything else."""
        token = token_pointer.contents
        # EDK2 quirk (DnsDxe): RetryCount and RetryInterval of the token are outputs: set to 0
        # and the configured interval; the configured RetryCount 0 means 3 retransmissions.
        token.Status = S.EFI_NOT_READY
        token.RetryCount = 0
        token.RetryInterval = child.config.RetryInterval
        if not child.configured:
            return S.EFI_NOT_STARTED
        child.max_retry = child.config.RetryCount or DNS_DEFAULT_RETRY
        if token.RetryInterval < DNS_DEFAULT_TIMEOUT:
            token.RetryInterval = DNS_DEFAULT_TIMEOUT
        return S.EFI_SUCCESS

    def host_name_to_ip(self, child, host_name, token_pointer):
        if not host_name or not token_pointer:
            return S.EFI_INVALID_PARAMETER
        status = self.prepare_token(child, token_pointer)
        if status != S.EFI_SUCCESS:
            return status
        name = read_char16(pointer_address(host_name))
        if child.config.EnableDnsCache:
            hits = self.cached(name)
            if hits:
                # Facts 6.2: a cached name completes synchronously, results allocated as usual.
                token = token_pointer.contents
                token.RspData.H2AData = self.h2a_data(hits)
                token.Status = S.EFI_SUCCESS
                if token.Event:
                    FIRMWARE.signal(token.Event)
                return S.EFI_SUCCESS
        return self.start(child, token_pointer, encode_qname(name), self.QTYPE_ADDRESS, DNS_CLASS_INET,
                          host_name=pointer_address(host_name))

    def general_lookup(self, child, qname, qtype, qclass, token_pointer):
        if not qname or not token_pointer:
            return S.EFI_INVALID_PARAMETER
        status = self.prepare_token(child, token_pointer)
        if status != S.EFI_SUCCESS:
            return status
        text = qname if isinstance(qname, bytes) else ctypes.string_at(pointer_address(qname))
        return self.start(child, token_pointer, encode_qname(text.decode("ascii", "replace")), qtype, qclass,
                          general=True)

    def h2a_data(self, addresses):
        """DNS_HOST_TO_ADDR_DATA and its IpList, both from pool: the caller frees both.
        (DNS6_HOST_TO_ADDR_DATA has the same layout with EFI_IPv6_ADDRESS entries.)"""
        data = FIRMWARE.allocate(_H2A_SIZE)
        ip_list = self.address_list(addresses)
        h2a = efidefs.DNS_HOST_TO_ADDR_DATA.from_address(data)
        h2a.IpCount = len(addresses)
        h2a.IpList = ctypes.cast(ip_list, POINTER(efidefs.EFI_IPv4_ADDRESS))  # the same pointer for DNS6
        return ctypes.cast(data, POINTER(efidefs.DNS_HOST_TO_ADDR_DATA))

    @staticmethod
    def lookup_data(qname_wire, answers):
        """DNS_GENERAL_LOOKUP_DATA: the structure, RRList, and each RR's QName and RData, all pool."""
        data = FIRMWARE.allocate(ctypes.sizeof(efidefs.DNS_GENERAL_LOOKUP_DATA))
        rr_list = FIRMWARE.allocate(_RR_SIZE * max(len(answers), 1))
        records = (efidefs.DNS_RESOURCE_RECORD * max(len(answers), 1)).from_address(rr_list)
        for record, (rtype, rclass, ttl, rdata) in zip(records, answers):
            # EDK2 quirk (DnsDxe ParseDnsResponse): QName is the question's name in wire format
            # (length-prefixed labels), not dotted text.
            name = FIRMWARE.allocate(len(qname_wire) + 1)
            ctypes.memmove(name, qname_wire + b"\x00", len(qname_wire) + 1)
            rd = FIRMWARE.allocate(len(rdata))
            ctypes.memmove(rd, rdata, len(rdata))
            ctypes.cast(ctypes.addressof(record), POINTER(c_void_p))[0] = name
            record.QType, record.QClass, record.TTL, record.DataLength = rtype, rclass, ttl, len(rdata)
            ctypes.cast(ctypes.addressof(record) + efidefs.DNS_RESOURCE_RECORD.RData.offset,
                        POINTER(c_void_p))[0] = rd
        lookup = efidefs.DNS_GENERAL_LOOKUP_DATA.from_address(data)
        lookup.RRCount = len(answers)
        lookup.RRList = ctypes.cast(rr_list, POINTER(efidefs.DNS_RESOURCE_RECORD))
        return ctypes.cast(data, POINTER(efidefs.DNS_GENERAL_LOOKUP_DATA))

    def on_packet(self, child, packet):
        """DnsOnPacketReceived + ParseDnsResponse for one reply from the server."""
        if len(packet) <= 12:
            return
        ident, flags, qdcount, ancount = struct.unpack("!HHHH", packet[:8])
        try:
            question_end = _skip_name(packet, 12)
            qtype, qclass = struct.unpack("!HH", packet[question_end:question_end + 4])
        except (_Malformed, struct.error):
            return
        # IsValidDnsResponse: a pending query with this ID, QTYPE and QCLASS; else ignored.
        query = None
        for candidate in child.queries:
            if candidate.ident == ident and candidate.qtype == qtype and candidate.qclass == qclass:
                query = candidate
                break
        if query is None:
            return
        token = efidefs.EFI_DNS4_COMPLETION_TOKEN.from_address(query.token)
        rcode = flags & 0x000F
        if rcode or ancount < 1 or not flags & 0x8000:
            self.complete(child, query, S.EFI_NOT_FOUND if rcode == RCODE_NAME_ERROR else S.EFI_DEVICE_ERROR)
            return
        try:
            answers = parse_answers(packet, ancount, question_end + 4)
        except _Malformed:
            self.complete(child, query, S.EFI_DEVICE_ERROR)
            return
        if query.general:
            token.RspData.GLookupData = self.lookup_data(packet[12:question_end - 1], answers)
            self.complete(child, query, S.EFI_SUCCESS)
            return
        addresses, cname_ttl = [], 0
        for rtype, rclass, ttl, rdata in answers:
            if rtype == self.QTYPE_ADDRESS:
                if len(rdata) != ctypes.sizeof(self.ADDRESS):
                    self.complete(child, query, S.EFI_DEVICE_ERROR)  # EDK2 ASSERTs DataLength == 4 (16)
                    return
                addresses.append((self.family.text(self.ADDRESS.from_buffer_copy(rdata)), ttl))
            elif rtype == DNS_TYPE_CNAME:
                cname_ttl = ttl  # RFC 1034 3.6.2: the chain's records follow; keep the TTL
            else:
                # EDK2 quirk (DnsDxe ParseDnsResponse): any other answer type aborts the parse
                # without completing the token: it waits on until it times out.
                return
        if not addresses:
            self.complete(child, query, S.EFI_NOT_FOUND)  # only CNAMEs: EFI_NOT_FOUND
            return
        if child.config.EnableDnsCache and query.host_name:
            # The caller's HostName is read again now: EDK2 keeps the pointer (zero-copy).
            name = read_char16(query.host_name)
            for ip, ttl in addresses:
                timeout = min(cname_ttl, ttl) if cname_ttl and ttl else max(cname_ttl, ttl)
                self.update_cache(False, True, name, ip, timeout)
        token.RspData.H2AData = self.h2a_data([ip for ip, _ in addresses])
        self.complete(child, query, S.EFI_SUCCESS)

    def on_timer(self):
        """DnsOnTimerRetransmit and DnsOnTimerUpdate: retransmit or time out; expire the cache."""
        now = _now()
        for child in list(self.children.values()):
            for query in list(child.queries):
                if now < query.deadline:
                    continue
                token = efidefs.EFI_DNS4_COMPLETION_TOKEN.from_address(query.token)
                if token.RetryCount < child.max_retry:
                    token.RetryCount += 1
                    query.deadline = now + query.interval
                    self.send(child, query)
                else:
                    self.complete(child, query, S.EFI_TIMEOUT)
        self.expire_cache()

    # ------------------------------------------------------------------ Poll / Cancel
    def poll(self, child):
        if not child.configured:
            return S.EFI_NOT_STARTED
        # The UDP child's Poll: one frame, EFI_NOT_READY when none was waiting (docs/edk2.md sections 4.2, 6.2).
        return S.EFI_SUCCESS if self.nic.poll_frame() else S.EFI_NOT_READY

    def cancel(self, child, token_pointer):
        if not child.configured:
            return S.EFI_NOT_STARTED
        token = pointer_address(token_pointer)
        matching = [q for q in child.queries if token in (0, q.token)]
        if token and not matching:
            return S.EFI_NOT_FOUND
        for query in matching:
            self.complete(child, query, S.EFI_ABORTED)
        return S.EFI_SUCCESS


def install(machine):
    """Install EFI_DNS4_SERVICE_BINDING_PROTOCOL on the NIC handle; returns the driver."""
    return Dns4Driver(machine)
