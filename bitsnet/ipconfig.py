"""The NIC's addresses: IPv4 through EFI_IP4_CONFIG2_PROTOCOL (reuse, DHCP bring-up, static
config) and IPv6 as EFI_IP6_CONFIG_PROTOCOL reports it (``current6``).

``ensure_configured(timeout)``  the NIC's address, starting DHCP if it has none (progress on
                                stdout; error(ETIMEDOUT) with advice if no lease comes).
``configure(address, netmask, gateway, dns)``  a static address instead (policy Static).
``current()``                   what the NIC has now (None: no address yet).
``interfaces()``                a summary of every NIC, for ``bitsnet.interfaces()``.
``timer_ticks()``, ``check_timer()``  does the firmware timer tick? (issue 11: checked before
                                DHCP, which EDK2 drives from timer events only).
``DHCP_TIMEOUT``                default seconds to wait for a lease.

Everything is read fresh from the firmware on each call: the address can change under us
(another application, a network boot attempt -- facts 5.2 -- or a rebooted simulator), and
one GetData costs far less than a stale address.
"""

from __future__ import print_function

import collections
import ctypes
import errno
import sys
import time

import efi

from bitsnet import efidefs, errors, events, nic

# Seconds to wait for a DHCP lease. EDK2's own DHCP gives up after about 60 s (DISCOVER
# retransmits at 4, 8, 16, 32 s, facts 5.2); a lab network answers within a few seconds, and a
# user at the prompt wants the advice to configure a static address long before a minute.
DHCP_TIMEOUT = 30.0
DHCP_POLL_STALL_US = 10000  # 10 ms between InterfaceInfo reads: EDK2's timer period (facts 3.4)

# The firmware timer check (issue 11). A relative timer event of 1 ms must fire within
# TIMER_CHECK_WINDOW seconds of wall clock: EDK2 expires timer events from its 10 ms tick, so a
# working firmware answers in about 10 ms; a second is generous and still fails fast.
TIMER_CHECK_WINDOW = 1.0
TIMER_CHECK_DELAY_100NS = 10000  # 1 ms in SetTimer's 100 ns units
TimerRelative = 2  # EFI_TIMER_DELAY (facts 2.2 SetTimer); not among the efi names bitsnet may use
TIMER_REMEDY = ("the firmware timer is stopped (no EFI timer event fires, so EDK2 never polls the NIC and DHCP"
                " cannot finish); on BITS the usual cause is its SMP start-up, which reprograms the local APIC"
                " timer that OVMF ticks from: run bitsnet.lapic.restore_timer() first, or configure a static"
                " address with bitsnet.configure(...)")

Ip4Info = collections.namedtuple("Ip4Info", "address netmask gateway dns_servers routes name")
# IPv6 (IP6 Config, facts 5.3): ``address`` is the preferred one (global before link-local, None
# while there is none); ``netmask`` and ``routes`` are None and [] so that endpoint code can treat
# both kinds alike (TCP6/UDP6 take neither, facts 3.1 and 4.1).
Ip6Info = collections.namedtuple("Ip6Info", "address addresses netmask routes")


def _link_local(address):
    # type: (str) -> bool
    return address.lower().startswith(("fe8", "fe9", "fea", "feb"))  # fe80::/10


def prefix_length(netmask):
    # type: (str) -> int
    """24 for '255.255.255.0'."""
    value = 0
    for part in netmask.split("."):
        value = (value << 8) | int(part)
    return bin(value).count("1")


def _mask_text(netmask):
    if isinstance(netmask, int) or (isinstance(netmask, str) and netmask.isdigit()):
        bits = int(netmask)
        value = (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF if bits else 0
        return "%d.%d.%d.%d" % (value >> 24, value >> 16 & 255, value >> 8 & 255, value & 255)
    return netmask


# --- GetData / SetData with the sizing rules of facts 5.2 ---------------------------------
def _get_policy(config):
    policy = ctypes.c_int(0)
    size = efi.UINTN(ctypes.sizeof(policy))
    status = config.GetData(ctypes.byref(config), efidefs.Ip4Config2DataTypePolicy, ctypes.byref(size),
                            ctypes.addressof(policy))
    errors.raise_for_status(status, "Ip4Config2.GetData(Policy)")
    return policy.value


def _set(config, data_type, data, what):
    size = ctypes.sizeof(data) if data is not None else 0
    status = config.SetData(ctypes.byref(config), data_type, size,
                            ctypes.addressof(data) if data is not None else None)
    # bits-efi-api item 1: SetData(Policy) may answer EFI_NOT_READY while DHCP runs asynchronously.
    if status != efi.EFI_NOT_READY:
        errors.raise_for_status(status, "Ip4Config2.SetData(%s)" % what)


def _set_policy(config, policy):
    _set(config, efidefs.Ip4Config2DataTypePolicy, ctypes.c_int(policy), "Policy")


def _get_addresses(config, data_type):
    """An array item (Gateway, DnsServer) as dotted strings; [] when unset (EFI_NOT_FOUND)."""
    size = efi.UINTN(0)
    status = config.GetData(ctypes.byref(config), data_type, ctypes.byref(size), None)
    if status == efi.EFI_SUCCESS or status == efi.EFI_NOT_FOUND or size.value == 0:
        return []  # facts 5.2: NOT_FOUND is "unset" (always so for Gateway under Dhcp)
    if status != efi.EFI_BUFFER_TOO_SMALL:
        return []
    count = size.value // ctypes.sizeof(efidefs.EFI_IPv4_ADDRESS)
    array = (efidefs.EFI_IPv4_ADDRESS * count)()
    size.value = ctypes.sizeof(array)
    status = config.GetData(ctypes.byref(config), data_type, ctypes.byref(size), ctypes.addressof(array))
    if status != efi.EFI_SUCCESS:
        return []
    return [efidefs.ipv4_text(a) for a in array[:size.value // ctypes.sizeof(efidefs.EFI_IPv4_ADDRESS)]]


def _address_array(addresses):
    array = (efidefs.EFI_IPv4_ADDRESS * len(addresses))()
    for i, text in enumerate(addresses):
        array[i] = efidefs.ipv4(text)
    return array


# --- Reading the state ---------------------------------------------------------------------
def _info(the_nic):
    info, routes = the_nic.interface_info()
    address = efidefs.ipv4_text(info.StationAddress)
    if address == "0.0.0.0":
        return None  # facts 5.2: StationAddress/SubnetMask are 0 while unconfigured
    config = the_nic.config2()
    gateway = None
    for _subnet, mask, via in routes:
        if mask == "0.0.0.0" and via != "0.0.0.0":
            gateway = via
    if gateway is None:
        gateways = _get_addresses(config, efidefs.Ip4Config2DataTypeGateway)
        gateway = gateways[0] if gateways else None
    dns = _get_addresses(config, efidefs.Ip4Config2DataTypeDnsServer)
    return Ip4Info(address, efidefs.ipv4_text(info.SubnetMask), gateway, dns, routes, the_nic.name_of(info))


def current():
    """The default NIC's address as an Ip4Info, or None while it has none."""
    return _info(nic.default_nic())


def _info6(the_nic):
    addresses = [address for address, _prefix in the_nic.interface_info6()]
    preferred = [a for a in addresses if not _link_local(a)] + [a for a in addresses if _link_local(a)]
    return Ip6Info(preferred[0] if preferred else None, addresses, None, [])


IPV6_TIMEOUT = 10.0  # seconds for SLAAC: a router answers a solicitation within a second or two (RFC 4861)


def ensure_configured6(timeout=None):
    # type: (float) -> Ip6Info
    """The NIC's IPv6 addresses once a usable (not link-local) one exists.

    EDK2's default IP6 Config policy is Manual (facts 5.3): without an address set by hand, only
    the link-local address exists and TCP6/UDP6 children with an unspecified station address
    answer EFI_NO_MAPPING for ever. As EDK2's own HTTP and PXE boot do, switch the policy to
    Automatic (SLAAC/DHCPv6) then, and poll InterfaceInfo until an address shows (EDK2 signals
    no event for it); error(ETIMEDOUT) if none comes within ``timeout``."""
    the_nic = nic.default_nic()
    info = _info6(the_nic)
    if info.address is not None and not _link_local(info.address):
        return info
    config = the_nic.config6()
    if config is None:
        raise errors.socket_error(errno.EAFNOSUPPORT, "no EFI_IP6_CONFIG_PROTOCOL on %s" % the_nic.name)
    timeout = IPV6_TIMEOUT if timeout is None else timeout
    policy = ctypes.c_int(0)
    size = efi.UINTN(ctypes.sizeof(policy))
    status = config.GetData(ctypes.byref(config), efidefs.Ip6ConfigDataTypePolicy, ctypes.byref(size),
                            ctypes.addressof(policy))
    if status == efi.EFI_SUCCESS and policy.value == efidefs.Ip6ConfigPolicyManual:
        sys.stdout.write("bitsnet: IPv6 autoconfiguration on %s ... " % the_nic.name)
        sys.stdout.flush()
        automatic = ctypes.c_int(efidefs.Ip6ConfigPolicyAutomatic)
        status = config.SetData(ctypes.byref(config), efidefs.Ip6ConfigDataTypePolicy, ctypes.sizeof(automatic),
                                ctypes.addressof(automatic))
        if status not in (efi.EFI_SUCCESS, efi.EFI_NOT_READY):
            sys.stdout.write("failed\n")
            errors.raise_for_status(status, "Ip6Config.SetData(Policy)")
    else:
        sys.stdout.write("bitsnet: waiting for an IPv6 address on %s ... " % the_nic.name)
    start = events.clock()
    found = []

    def usable():
        got = _info6(the_nic)
        if got.address is not None and not _link_local(got.address):
            found.append(got)
        return bool(found)

    if not events.wait_until(usable, start + timeout, poll=_stall):
        sys.stdout.write("no address\n")
        sys.stdout.flush()
        raise errors.socket_error(errno.EADDRNOTAVAIL, "IPv6 on %s: no global address within %g s (no router"
                                  " advertisement)" % (the_nic.name, timeout))
    sys.stdout.write("%s in %.1f s\n" % (found[-1].address, events.clock() - start))
    sys.stdout.flush()
    return found[-1]


def current6():
    # type: () -> Ip6Info
    """The default NIC's IPv6 addresses now, as an Ip6Info (no waiting: EDK2 brings IPv6 up
    on its own -- a link-local address after DAD, global ones from SLAAC/DHCPv6 or manual --
    and TCP6/UDP6 answer EFI_NO_MAPPING until one is usable; ``ensure_configured6`` waits for one)."""
    return _info6(nic.default_nic())


def _stall():
    events.boot_services().Stall(DHCP_POLL_STALL_US)


def timer_ticks(window=None):
    # type: (float) -> bool
    """Whether a 1 ms relative timer event fires within ``window`` seconds of wall clock.

    A Type-0 EVT_TIMER event polled with CheckEvent (facts 2.3): no notify function, so the
    answer does not depend on how bitsnet notices completions. Wall clock is ``time.time``
    (GRUB's TSC-based clock in BITS), which keeps running when the firmware tick does not;
    Stall busy-waits on the firmware's TimerLib, also independent of the tick.
    """
    window = TIMER_CHECK_WINDOW if window is None else window
    bs = events.boot_services()
    event = efi.EFI_EVENT()
    status = bs.CreateEvent(efi.EVT_TIMER, 0, efi.EFI_EVENT_NOTIFY(), None, ctypes.byref(event))
    errors.raise_for_status(status, "CreateEvent(EVT_TIMER)")
    try:
        errors.raise_for_status(bs.SetTimer(event, TimerRelative, TIMER_CHECK_DELAY_100NS), "SetTimer")
        start = time.time()
        while True:
            if bs.CheckEvent(event) == efi.EFI_SUCCESS:
                return True
            if time.time() - start >= window:
                return False
            bs.Stall(1000)
    finally:
        bs.CloseEvent(event)


def check_timer(window=None):
    """Raise error(EIO) naming the cause and the remedy if the firmware timer does not tick."""
    if not timer_ticks(window):
        raise errors.socket_error(errno.EIO, TIMER_REMEDY)


def ensure_configured(timeout=None):
    # type: (float) -> Ip4Info
    """The NIC's address, bringing it up with DHCP if it has none (waits up to ``timeout``)."""
    the_nic = nic.default_nic()
    info = _info(the_nic)
    if info is not None:
        return info  # reuse whatever the firmware already has (DHCP by the shell, static, PXE)
    timeout = DHCP_TIMEOUT if timeout is None else timeout
    # Issue 11: with the firmware tick stopped DHCP would spin until the timeout; say why at once.
    check_timer()
    name = the_nic.name
    config = the_nic.config2()
    if _get_policy(config) == efidefs.Ip4Config2PolicyDhcp:
        # bits-efi-api item 1 / facts 5.2: setting Dhcp again does not restart a DHCP that
        # already succeeded (or, on old stacks, one that failed): go through Static to force it.
        _set_policy(config, efidefs.Ip4Config2PolicyStatic)
    _set_policy(config, efidefs.Ip4Config2PolicyDhcp)
    sys.stdout.write("bitsnet: DHCP on %s ... " % name)
    sys.stdout.flush()
    start = events.clock()
    found = []

    def leased():
        # facts 5.2: EDK2 never signals DHCP completion; poll InterfaceInfo until an address shows.
        got = _info(the_nic)
        if got is not None:
            found.append(got)
        return bool(found)

    if not events.wait_until(leased, start + timeout, poll=_stall):
        sys.stdout.write("no answer\n")
        sys.stdout.flush()
        raise errors.socket_error(errno.ETIMEDOUT, "DHCP on %s: no answer within %g s; use bitsnet.configure(...)"
                                  " for a static address" % (name, timeout))
    info = found[-1]
    sys.stdout.write("%s/%d in %.1f s\n" % (info.address, prefix_length(info.netmask), events.clock() - start))
    sys.stdout.flush()
    return info


def configure(address, netmask, gateway=None, dns=()):
    """Give the NIC a static address (policy Static, ManualAddress, Gateway, DnsServer).

    ``netmask`` is dotted ('255.255.255.0') or a prefix length (24). Returns the new Ip4Info.
    """
    the_nic = nic.default_nic()
    config = the_nic.config2()
    manual = efidefs.EFI_IP4_CONFIG2_MANUAL_ADDRESS()
    try:
        manual.Address = efidefs.ipv4(address)
        manual.SubnetMask = efidefs.ipv4(_mask_text(netmask))
        gateways = _address_array([gateway]) if gateway else None
        servers = _address_array(list(dns)) if dns else None
    except ValueError as e:
        raise errors.socket_error(errno.EINVAL, str(e))
    if _get_policy(config) != efidefs.Ip4Config2PolicyStatic:
        _set_policy(config, efidefs.Ip4Config2PolicyStatic)  # facts 5.2: clears the DHCP lease
    _set(config, efidefs.Ip4Config2DataTypeManualAddress, manual, "ManualAddress")
    if gateways is not None:
        _set(config, efidefs.Ip4Config2DataTypeGateway, gateways, "Gateway")
    if servers is not None:
        _set(config, efidefs.Ip4Config2DataTypeDnsServer, servers, "DnsServer")
    info = _info(the_nic)
    if info is None:
        raise errors.socket_error(errno.EADDRNOTAVAIL, "Ip4Config2 did not take the address %s" % address)
    return info


def interfaces():
    """[{name, mac, address, netmask, gateway, dns, ipv6}] for every NIC (address None if unset;
    ipv6: [(address, prefix length)] from IP6 Config, [] when the firmware has no IPv6)."""
    out = []
    for each in nic.find_all():
        info = _info(each)
        out.append({
            "name": each.name,
            "mac": each.mac,
            "address": info.address if info else None,
            "netmask": info.netmask if info else None,
            "gateway": info.gateway if info else None,
            "dns": list(info.dns_servers) if info else [],
            "ipv6": each.interface_info6(),
        })
    return out
