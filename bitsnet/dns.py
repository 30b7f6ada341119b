"""Name resolution: IP literals, the hosts table, the firmware's DNS4, or bitsnet's own DNS client.

Contents: ``HOST_NOT_FOUND``... and their messages (glibc's; the ``EAI_*`` table is
``errors``', re-exported here) -- ``hosts`` (``HostsTable``; ``HOSTS_FILES`` are read at the first lookup) -- the
resolver API (``resolve``, ``lookup``, ``reverse``, ``set_servers``, ``servers``, ``reset``) --
the DNS4 path -- the own client over ``udp.UdpEndpoint``; the message codec (``build_query``,
``parse_response``) is ``bitsnet.dnsmessage``'s.

Resolution order for a name (docs/architecture.md section 12): an IP literal; the hosts table; the answer cache;
EFI_DNS4_PROTOCOL when the NIC has its service binding (docs/edk2.md section 6.3: most firmware does not);
otherwise -- or when DNS4 timed out and more servers are known -- our own client. Reverse
lookups (PTR) never use DNS4 (EDK2 quirk: its IpToHostName is not implemented, docs/edk2.md section 6.2).

DNS servers come from IP4 Config2 (DHCP option 6, or ``bitsnet.configure(dns=...)``), unless
``set_servers`` overrides them. EDK2's DnsDxe, given no server list, runs its own blocking DHCP
inside Configure (docs/edk2.md section 6.2), so the list is always passed explicitly, as EDK2's HttpDxe does.

The own client: one A (or PTR) query per server in turn, ``ATTEMPTS`` rounds, ``TIMEOUT``
seconds per try; an answer counts only if it comes from the server's port 53 with our ID and
our question (RFC 5452); a truncated answer (TC) is rejected -- there is no DNS over TCP here --
and the next server is tried. CNAME chains are followed within an answer and by re-querying
the target (at most ``MAX_CNAME_DEPTH``), all within the time one name's query has
(``lookup_time``: ``ATTEMPTS`` rounds of ``TIMEOUT`` per server), so a server that answers every
link of a long chain slowly cannot stretch a lookup. Names that are not printable host names
(a CNAME or PTR target, or an owner, with ESC, NUL, CR/LF or a dot inside a label) are dropped
from answers by the parser. Positive answers are cached for their smallest TTL.

The parser (``bitsnet.dnsmessage``) takes any byte string: every length and pointer is bounds-checked, compression
pointers must point strictly backwards (no loops), names stay within 255 bytes; anything else
is ``DnsFormatError``, which the resolver treats as "no answer from this server". Its work is
bounded too, since backward pointers alone still let one 64 KiB answer chain thousands of
names through thousands of pointers (seconds of CPU): at most ``MAX_NAME_JUMPS`` pointers per
name, ``MAX_PARSE_STEPS`` labels and pointers per message, ``MAX_RECORDS`` records read (the
rest of a longer answer is ignored), and the query's deadline is looked at while parsing.

Errors are ``errors.gaierror`` with glibc's EAI_* codes and messages (what CPython raises on
Linux), and ``errors.herror`` for reverse lookups.
"""

import collections
import ctypes
import errno
import os

import efi

from bitsnet import clock, efidefs, entropy, errors, events, inet, ipconfig, nic

# The message codec (RFC 1035 section 4) is dnsmessage's; its names are read here too.
from bitsnet.dnsmessage import CLASS_IN, DEADLINE_EVERY, FLAG_QR, FLAG_RD, FLAG_TC, MAX_LABEL  # noqa: F401
from bitsnet.dnsmessage import MAX_NAME, MAX_NAME_JUMPS, MAX_PARSE_STEPS, MAX_RECORDS  # noqa: F401
from bitsnet.dnsmessage import RCODE_FORMERR, RCODE_NOERROR, RCODE_NXDOMAIN, RCODE_SERVFAIL  # noqa: F401
from bitsnet.dnsmessage import TYPE_A, TYPE_AAAA, TYPE_CNAME, TYPE_PTR  # noqa: F401
from bitsnet.dnsmessage import DnsFormatError, build_query, encode_name, parse_response, read_name  # noqa: F401

# getaddrinfo's error codes and glibc's messages: the one table is in errors (re-exported here).
from bitsnet.errors import EAI_ADDRFAMILY, EAI_AGAIN, EAI_BADFLAGS, EAI_FAIL, EAI_FAMILY  # noqa: F401
from bitsnet.errors import EAI_MEMORY, EAI_MESSAGES, EAI_NODATA, EAI_NONAME, EAI_OVERFLOW  # noqa: F401
from bitsnet.errors import EAI_SERVICE, EAI_SOCKTYPE, EAI_SYSTEM  # noqa: F401

# h_errno values (netdb.h) and hstrerror's messages, for herror.
HOST_NOT_FOUND = 1
TRY_AGAIN = 2
NO_RECOVERY = 3
NO_DATA = 4
H_MESSAGES = {HOST_NOT_FOUND: "Unknown host", TRY_AGAIN: "Host name lookup failure",
              NO_RECOVERY: "Unknown server error", NO_DATA: "No address associated with name"}

# --- resolver settings ----------------------------------------------------------------------------
DNS_PORT = 53
TIMEOUT = 2.0  # seconds per try; EDK2 forces its own RetryInterval to >= 2 s (docs/edk2.md section 6.2)
ATTEMPTS = 2  # rounds over the server list (glibc: "attempts:2")
# RFC 5452 / RFC 6056: each query from a random source port as well as a random id, so that an
# off-path forger must guess 32 bits, not 16. EDK2 hands out ephemeral UDP ports in sequence.
SOURCE_PORTS = (49152, 65535)
SOURCE_PORT_TRIES = 4  # ports tried before falling back to the firmware's choice
MAX_CNAME_DEPTH = 8  # re-queries of a CNAME target
CACHE_SIZE = 256  # cached answers; the oldest go first
MAX_CACHE_TTL = 3600  # seconds: a lying TTL must not pin an answer for days
DNS4_PROTOCOL_UDP = 17

Answer = collections.namedtuple("Answer", "name aliases addresses")

_state = {"servers": None, "use_dns4": True, "hosts_loaded": False}
_cache = collections.OrderedDict()  # type: collections.OrderedDict   # (name, qtype) -> (expiry, value)


def gaierror(code):
    return errors.gai_error(code)


def herror(code):
    return errors.herror(code, H_MESSAGES[code])


def _ipv4_literal(text):
    """The canonical dotted quad of an IPv4 literal in the forms getaddrinfo takes
    (``inet.parse_ipv4(text, strict=False)``: "127.1", "0x7f.0.0.1"), or None."""
    return inet.ipv4_text(text, strict=False)


# --- the hosts table --------------------------------------------------------------------------------
class HostsTable(object):
    """Static names, /etc/hosts style: ``add("10.0.0.5", "labserver", "labserver.example")``,
    ``load(path)`` for a file of "address name [alias...]" lines ('#' comments)."""

    def __init__(self):
        self._by_name = {}  # type: dict   # name -> (canonical, aliases, [addresses])
        self._by_address = {}  # type: dict  # address -> (canonical, aliases)
        self.clear()

    def clear(self):
        self._by_name.clear()
        self._by_address.clear()
        self.add("127.0.0.1", "localhost")

    def add(self, address, name, *aliases):
        if _ipv4_literal(address) is None:
            if inet.ipv6_literal(address) is None:
                raise ValueError("not an IP address: %r" % (address,))
            address = inet.ipv6_literal(address)
        canonical = name.rstrip(".")
        for each in (canonical,) + tuple(a.rstrip(".") for a in aliases):
            entry = self._by_name.setdefault(each.lower(), (canonical, list(aliases), []))
            if address not in entry[2]:
                entry[2].append(address)
        self._by_address.setdefault(address, (canonical, list(aliases)))

    def load(self, path):
        # type: (str) -> int
        """Add every entry of a hosts file; returns how many lines were taken."""
        taken = 0
        with open(path) as f:
            for line in f:
                fields = line.split("#", 1)[0].split()
                if len(fields) >= 2 and (_ipv4_literal(fields[0]) or inet.ipv6_literal(fields[0])):
                    self.add(fields[0], fields[1], *fields[2:])
                    taken += 1
        return taken

    def lookup(self, name, qtype=TYPE_A):
        """Answer for ``name`` with its addresses of ``qtype`` (A or AAAA), or None."""
        entry = self._by_name.get(name.rstrip(".").lower())
        if not entry:
            return None
        addresses = [a for a in entry[2] if (":" in a) == (qtype == TYPE_AAAA)]
        return Answer(entry[0], list(entry[1]), addresses) if addresses else None

    def reverse(self, address):
        """(canonical, aliases) for ``address``, or None."""
        return self._by_address.get(address)


hosts = HostsTable()

# Hosts files read at the first lookup, if present: the BITS tree's place for lab names
# (GRUB paths; open() in BITS reads through GRUB's file systems).
HOSTS_FILES = ["/boot/bitsnet/hosts"]


def _load_hosts_files():
    if _state["hosts_loaded"]:
        return
    _state["hosts_loaded"] = True
    for path in HOSTS_FILES:
        try:
            if os.path.exists(path):
                hosts.load(path)
        except (IOError, OSError, ValueError):
            pass  # an unreadable hosts file must not break resolution


# --- the resolver API -------------------------------------------------------------------------------
def set_servers(servers, use_dns4=None):
    """Use ``servers`` (dotted quads) instead of IP4 Config2's list; None goes back to it.
    ``use_dns4=False`` skips the firmware's DNS4 even where it exists."""
    _state["servers"] = None if servers is None else [s for s in servers]
    if use_dns4 is not None:
        _state["use_dns4"] = bool(use_dns4)


def servers():
    """The DNS servers in use: the override, or what IP4 Config2 has (DHCP brings it up)."""
    if _state["servers"] is not None:
        return list(_state["servers"])
    return list(ipconfig.ensure_configured().dns_servers)


def reset():
    """Forget the cache and the overrides (tests; a new network)."""
    _cache.clear()
    _state.update(servers=None, use_dns4=True, hosts_loaded=False)


def resolve(name):
    # type: (str) -> str
    """The first IPv4 address of ``name`` (gethostbyname); raises gaierror."""
    return lookup(name).addresses[0]


def lookup(name, qtype=TYPE_A):
    """Answer(canonical name, aliases, addresses) for ``name`` (gethostbyname_ex); ``qtype``
    TYPE_AAAA asks for IPv6 addresses instead (getaddrinfo with AF_INET6 / AF_UNSPEC).

    AAAA questions always go through bitsnet's own client, over UDP4 to the same servers:
    EFI_DNS4's HostNameToIp asks only for A records (docs/edk2.md section 6.2), and EFI_DNS6 would need IPv6
    DNS servers, which IP6 Config rarely has where DHCPv6 is not run (docs/edk2.md sections 5.3, 6.2)."""
    literal = _ipv4_literal(name) if qtype == TYPE_A else inet.ipv6_literal(str(name))
    if literal is not None:
        return Answer(literal, [], [literal])
    name = _check_name(name)
    _load_hosts_files()
    found = hosts.lookup(name, qtype)
    if found is not None:
        return found
    cached = _cached((name.lower(), qtype))
    if cached is not None:
        return cached
    server_list = servers()
    if not server_list:
        raise gaierror(EAI_NONAME)
    rest = server_list
    if qtype == TYPE_A and _state["use_dns4"] and _dns4_available():
        addresses, status = _dns4_lookup(name, server_list)
        if addresses:
            return Answer(name, [], addresses)
        if status == efi.EFI_NOT_FOUND:
            raise gaierror(EAI_NONAME)  # docs/edk2.md section 6.2: NXDOMAIN, or no A record
        if status == efi.EFI_TIMEOUT:
            rest = server_list[1:]  # EDK2 quirk (docs/edk2.md section 6.2): only [0] was asked
            if not rest:
                raise gaierror(EAI_AGAIN)
        # Anything else (DNS4 unusable, EFI_DEVICE_ERROR for SERVFAIL or a reply it could not
        # parse): our own client tells these cases apart.
    answer, ttl = _resolve(name, rest, qtype)
    _remember((name.lower(), qtype), answer, ttl)
    return answer


def reverse(address):
    # type: (str) -> tuple
    """(canonical name, aliases) for an IPv4 address (gethostbyaddr); raises herror."""
    literal = _ipv4_literal(address)
    if literal is None:
        raise herror(HOST_NOT_FOUND)
    _load_hosts_files()
    found = hosts.reverse(literal)
    if found is not None:
        return found[0], list(found[1])
    qname = ".".join(reversed(literal.split("."))) + ".in-addr.arpa"
    cached = _cached((qname, TYPE_PTR))
    if cached is not None:
        return cached
    try:
        server_list = servers()
    except errors.error:
        raise herror(TRY_AGAIN)
    if not server_list:
        raise herror(HOST_NOT_FOUND)
    try:
        records, ttl = _query_servers(qname, TYPE_PTR, server_list)
    except errors.gaierror as e:
        raise herror(HOST_NOT_FOUND if e.args[0] in (EAI_NONAME, EAI_NODATA) else TRY_AGAIN)
    names = [value for owner, rtype, _, value in records if rtype == TYPE_PTR]
    if not names:
        raise herror(HOST_NOT_FOUND)
    result = (names[0], names[1:])
    _remember((qname, TYPE_PTR), result, ttl)
    return result


def is_ascii(name):
    """Whether text ``name`` is all ASCII."""
    try:
        name.encode("ascii")
    except UnicodeError:
        return False
    return True


def to_ascii(name, check_labels=False):
    """A host name in text (unicode on 2.7, str on 3) -> its ASCII form as a native str, as
    CPython's socket functions encode it with the "idna" codec; ASCII names are just that.
    With ``check_labels``, the codec's own check too: UnicodeError for an empty label (but a
    trailing dot) or one of 64 bytes or more -- the codec makes it before any look-up.

    BITS quirk: BITS has no "idna" codec -- encodings.idna needs stringprep, which lib.zip lacks
    (docs/bits-environment.md section 2) -- and ``u"x".encode("idna")`` raises LookupError there. Where
    the codec is missing, each non-ASCII label becomes "xn--" + its punycode (BITS has that
    codec), lower-cased instead of the full nameprep mapping: right for names already in the
    normal form a browser or DNS zone file uses. UnicodeError if a label cannot be encoded."""
    if not name:
        return str(name)
    try:
        ascii_name = name.encode("ascii")
    except UnicodeError:
        try:
            ascii_name = name.encode("idna")
        except LookupError:
            labels = []
            for label in name.replace(u"\u3002", u".").split(u"."):
                try:
                    labels.append(label.encode("ascii"))
                except UnicodeError:
                    labels.append(b"xn--" + label.lower().encode("punycode"))
            ascii_name = b".".join(labels)
    if check_labels:
        labels = ascii_name.split(b".")
        for label in labels[:-1]:
            if not 0 < len(label) < 64:
                raise UnicodeError("label empty or too long")
        if len(labels[-1]) >= 64:
            raise UnicodeError("label too long")
    return ascii_name if str is bytes else ascii_name.decode("ascii")


def _check_name(name):
    if not isinstance(name, str) or str is not bytes:
        try:
            # unicode (2.7) / str (3): IDNA as CPython does; bytes (3): ASCII only
            name = to_ascii(name) if isinstance(name, type(u"")) else name.decode("ascii")
        except (AttributeError, UnicodeError):
            raise gaierror(EAI_NONAME)
    name = name.rstrip(".")
    if not name or len(name) > 253 or any(not label or len(label) > MAX_LABEL for label in name.split(".")):
        raise gaierror(EAI_NONAME)
    try:
        name.encode("ascii")
    except UnicodeError:
        raise gaierror(EAI_NONAME)
    return name


def _cached(key):
    entry = _cache.get(key)
    if entry is None:
        return None
    if entry[0] <= clock.monotonic():
        del _cache[key]
        return None
    return entry[1]


def _remember(key, value, ttl):
    if ttl <= 0:
        return
    _cache.pop(key, None)
    _cache[key] = (clock.monotonic() + min(ttl, MAX_CACHE_TTL), value)
    while len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)


# --- the own client ---------------------------------------------------------------------------------
def lookup_time(server_list):
    """Seconds one name may take with bitsnet's own client: ``ATTEMPTS`` rounds of ``TIMEOUT``
    per server (README, "Names do not resolve"); a CNAME chain's re-queries share it."""
    return ATTEMPTS * TIMEOUT * max(1, len(server_list))


def _resolve(name, server_list, qtype=TYPE_A):
    """(Answer, ttl) for A or AAAA records, following CNAMEs, re-querying a target the answer
    did not resolve, all within ``lookup_time``."""
    aliases = []
    current = name
    ttl = MAX_CACHE_TTL
    deadline = clock.monotonic() + lookup_time(server_list)
    for _ in range(MAX_CNAME_DEPTH):
        records, record_ttl = _query_servers(current, qtype, server_list, deadline)
        ttl = min(ttl, record_ttl)
        target, addresses = follow_chain(records, current, qtype)
        if target.lower() != current.lower():
            aliases.append(current)
        for owner, rtype, _, value in records:
            if rtype == TYPE_CNAME and owner.lower() != current.lower() and owner not in aliases:
                aliases.append(owner)
        if addresses:
            return Answer(target, [a for a in aliases if a.lower() != target.lower()], addresses), ttl
        if target.lower() == current.lower():
            raise gaierror(EAI_NODATA)  # the name exists, without a record of this type
        current = target
    raise gaierror(EAI_FAIL)  # a CNAME chain longer than anyone sane uses


def follow_chain(records, name, qtype=TYPE_A):
    """(final name, [addresses]) from answer records: CNAMEs from ``name``, then its A (or
    ``qtype``) records."""
    current = name.lower()
    canonical = name
    for _ in range(len(records) + 1):
        cname = [value for owner, rtype, _, value in records if rtype == TYPE_CNAME and owner.lower() == current]
        if not cname:
            break
        canonical = cname[0]
        current = canonical.lower()
    addresses = [value for owner, rtype, _, value in records if rtype == qtype and owner.lower() == current]
    return canonical, addresses


def _query_servers(qname, qtype, server_list, deadline=None):
    """([(owner, type, ttl, value)], min ttl) from the first server that answers; raises
    gaierror, EAI_AGAIN at the latest at ``deadline`` (default: ``lookup_time`` from now)."""
    from bitsnet import udp  # udp imports ipconfig/nic; resolving needs it only here
    failure = EAI_AGAIN
    if deadline is None:
        deadline = clock.monotonic() + lookup_time(server_list)
    for _ in range(ATTEMPTS):
        for server in server_list:
            if clock.monotonic() >= deadline:
                raise gaierror(failure)
            ident = entropy.getrandbits(16)  # RFC 5452: unpredictable (BITS has no random)
            query = build_query(ident, qname, qtype)
            ep = _query_endpoint(udp)
            try:
                packet = _exchange(ep, query, server, ident, qname, qtype, deadline)
            finally:
                ep.close()
            if packet is None:
                continue  # silence, or only garbage: next server
            rcode, truncated, records = packet
            if truncated:
                failure = EAI_FAIL  # no DNS over TCP: a truncated answer is useless
                continue
            if rcode == RCODE_NXDOMAIN:
                raise gaierror(EAI_NONAME)  # authoritative: no other server will know better
            if rcode != RCODE_NOERROR:
                failure = EAI_FAIL if rcode == RCODE_FORMERR else EAI_AGAIN
                continue
            ttl = min([r[2] for r in records] or [0])
            return records, ttl
    raise gaierror(failure)


def _query_endpoint(udp):
    """A UDP endpoint bound to a random port in SOURCE_PORTS (unbound if every try clashes)."""
    ep = udp.UdpEndpoint()
    low, high = SOURCE_PORTS
    for _ in range(SOURCE_PORT_TRIES):
        try:
            ep.bind(("", low + entropy.randbelow(high - low + 1)))
            break
        except errors.error as e:
            if e.errno != errno.EADDRINUSE:
                break  # no address yet, no network: sendto will say so
    return ep


def _exchange(ep, query, server, ident, qname, qtype, lookup_deadline=None):
    """Send ``query`` to ``server``:53 and wait up to TIMEOUT (and not past the lookup's
    deadline) for the matching answer."""
    try:
        ep.sendto(query, (server, DNS_PORT))
    except errors.error:
        return None
    deadline = clock.monotonic() + TIMEOUT
    if lookup_deadline is not None:
        deadline = min(deadline, lookup_deadline)
    while events.wait_until(ep.can_recv, deadline, poll=ep.progress):
        try:
            got = ep.recvfrom(65535)
        except errors.error:
            return None  # e.g. ICMP port unreachable reported on this endpoint
        if got is None:
            continue
        data, source = got
        if source != (server, DNS_PORT):
            continue  # RFC 5452: only the server we asked
        try:
            return parse_response(data, ident, qname, qtype, deadline)
        except DnsFormatError:
            continue  # a forged or broken answer: keep waiting for the real one
    return None


# --- the firmware's DNS4 (docs/edk2.md section 6) ---------------------------------------------------
def _dns4_available():
    try:
        return nic.default_nic().has_service(efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID)
    except errors.error:
        return False


def _dns4_lookup(name, server_list):
    """([addresses], status) through EFI_DNS4_PROTOCOL.HostNameToIp; status None: DNS4 unusable."""
    the_nic = nic.default_nic()
    info = ipconfig.ensure_configured()
    sb = efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID
    try:
        handle = the_nic.create_child(sb)
    except errors.error:
        return [], None
    owner = object()  # the registry owner of this lookup's token
    try:
        proto = efidefs.EFI_DNS4_PROTOCOL.from_handle(handle)
        server_array = (efidefs.EFI_IPv4_ADDRESS * len(server_list))()
        for i, server in enumerate(server_list):
            server_array[i] = efidefs.ipv4(server)
        config = efidefs.EFI_DNS4_CONFIG_DATA()
        # EDK2 quirk (DnsDxe, docs/edk2.md section 6.2): with DnsServerListCount 0 it runs its own blocking DHCP in
        # Configure; give the list (only [0] is used), and the address explicitly (docs/edk2.md section 3.7).
        config.DnsServerListCount = len(server_list)
        config.DnsServerList = ctypes.cast(server_array, ctypes.POINTER(efidefs.EFI_IPv4_ADDRESS))
        config.UseDefaultSetting = False
        config.EnableDnsCache = True
        config.Protocol = DNS4_PROTOCOL_UDP
        config.StationIp = efidefs.ipv4(info.address)
        config.SubnetMask = efidefs.ipv4(info.netmask)
        config.RetryCount = max(0, ATTEMPTS - 1)
        config.RetryInterval = max(1, int(round(TIMEOUT)))
        # EDK2 quirk: DnsDxe's UDP child would take EDK2's next sequential port (docs/edk2.md
        # section 4.2); RFC 5452 as for our own client: a random one from the entropy source
        # instead (a taken port is EFI_ACCESS_DENIED: another, and in the end the firmware's, 0).
        low, high = SOURCE_PORTS
        ports = [low + entropy.randbelow(high - low + 1) for _ in range(SOURCE_PORT_TRIES)] + [0]
        for port in ports:
            config.LocalPort = port
            status = proto.Configure(ctypes.byref(proto), ctypes.byref(config))
            if status != efi.EFI_ACCESS_DENIED:
                break
        if status != efi.EFI_SUCCESS:
            return [], None
        host_name = (efi.UINT16 * (len(name) + 1))(*([ord(c) for c in name] + [0]))  # CHAR16 (docs/edk2.md section 6.2)
        token = efidefs.EFI_DNS4_COMPLETION_TOKEN()
        op = events.submit(token, token, lambda op: None, owner, keep=(host_name, server_array))
        status = proto.HostNameToIp(ctypes.byref(proto), host_name, ctypes.byref(token))
        if status != efi.EFI_SUCCESS:
            events.unsubmit(op)
            return [], None
        # EDK2 retransmits every RetryInterval (>= 2 s) RetryCount times, then EFI_TIMEOUT.
        limit = max(2, config.RetryInterval) * (config.RetryCount + 1) + 1.0
        if not events.wait_until(lambda: events.check(op), clock.monotonic() + limit,
                                 poll=lambda: proto.Poll(ctypes.byref(proto))):
            proto.Cancel(ctypes.byref(proto), ctypes.byref(token))
            events.check(op)
            return [], efi.EFI_TIMEOUT
        if op.status != efi.EFI_SUCCESS:
            return [], op.status
        return _take_h2a(token), efi.EFI_SUCCESS
    finally:
        # DestroyChild resets the instance and ends every token (DnsDestroyChild); then the
        # registry lets go of this lookup's token -- unless it failed: the child may live on and
        # still write the token, which then stays registered until it completes (events.orphan).
        if the_nic.destroy_child(sb, handle) == efi.EFI_SUCCESS:
            events.abandon(owner)
        else:
            events.orphan(owner)


def _take_h2a(token):
    """The addresses of a completed HostNameToIp; frees the driver's pool (docs/edk2.md section 6.2)."""
    data = token.RspData.H2AData
    if not data:
        return []
    h2a = data.contents
    addresses = [efidefs.ipv4_text(h2a.IpList[i]) for i in range(h2a.IpCount)] if h2a.IpList else []
    bs = events.boot_services()
    if h2a.IpList:
        bs.FreePool(ctypes.cast(h2a.IpList, ctypes.c_void_p))
    bs.FreePool(ctypes.cast(data, ctypes.c_void_p))
    return addresses
