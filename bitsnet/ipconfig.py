"""The NIC's addresses: IPv4 through EFI_IP4_CONFIG2_PROTOCOL (reuse, DHCP bring-up, static
config) and IPv6 as EFI_IP6_CONFIG_PROTOCOL reports it (``current6``).

``ensure_configured(timeout)``  the NIC's address, starting DHCP if it has none (progress on
                                stdout; error(ETIMEDOUT) with advice if no lease comes).
``start_dhcp()``                start DHCP if the NIC has no address, without waiting for it
                                (``bitsnet.interfaces()``: a program polling for an address).
``configure(address, netmask, gateway, dns)``  a static address instead (policy Static);
                                ``configure(dns=[...])`` alone sets the DNS servers and keeps
                                the address (DHCP's, or the static one).
``current()``                   what the NIC has now (None: no address yet).
``interfaces(start=False)``     a summary of every NIC, for ``bitsnet.interfaces()``.
``timer_ticks()``, ``check_timer()``  does the firmware timer tick? (docs/architecture.md section 11: checked before
                                DHCP, which EDK2 drives from timer events only). If not, and
                                this is BITS with the local APIC timer stopped, it is restarted
                                once (``bitsnet.lapic``), with one line saying so.
``tick_source()``               where the tick comes from, as far as bitsnet can tell without
                                changing anything (the selftest's firmware check).
``DHCP_TIMEOUT``                default seconds to wait for a lease.

Everything is read fresh from the firmware on each call: the address can change under us
(another application, a network boot attempt -- docs/edk2.md section 5.2 -- or a rebooted simulator), and
one GetData costs far less than a stale address.
"""

from __future__ import print_function

import collections
import ctypes
import errno
import sys

import efi

from bitsnet import clock, efidefs, errors, events, inet, nic

# Seconds to wait for a DHCP lease. EDK2's own DHCP gives up after about 60 s (DISCOVER
# retransmits at 4, 8, 16, 32 s, docs/edk2.md section 5.2); a lab network answers within a few seconds, and a
# user at the prompt wants the advice to configure a static address long before a minute.
DHCP_TIMEOUT = 30.0
DHCP_POLL_STALL_US = 10000  # 10 ms between InterfaceInfo reads: EDK2's timer period (docs/edk2.md section 3.4)

# The firmware timer check (docs/architecture.md section 11). A relative timer event of 1 ms must fire within
# TIMER_CHECK_WINDOW seconds of wall clock: EDK2 expires timer events from its 10 ms tick, so a
# working firmware answers in about 10 ms; a second is generous and still fails fast.
TIMER_CHECK_WINDOW = 1.0
TIMER_CHECK_DELAY_100NS = 10000  # 1 ms in SetTimer's 100 ns units
TimerRelative = 2  # EFI_TIMER_DELAY (docs/edk2.md section 2.2 SetTimer); not among the efi names bitsnet may use
TIMER_REMEDY = ("the firmware timer is stopped (no EFI timer event fires, so EDK2 never polls the NIC and DHCP"
                " cannot finish); on BITS the usual cause is its SMP start-up, which reprograms the local APIC"
                " timer that OVMF ticks from: run bitsnet.lapic.restore_timer() first, or configure a static"
                " address with bitsnet.configure(...)")
TIMER_STILL_STOPPED = ("the firmware timer is stopped (no EFI timer event fires, so EDK2 never polls the NIC and DHCP"
                       " cannot finish), and restarting the local APIC timer as OVMF programs it did not help: this"
                       " firmware ticks from another source; configure a static address with bitsnet.configure(...)")
TIMER_NOT_LAPIC = ("the firmware timer is stopped (no EFI timer event fires, so EDK2 never polls the NIC and DHCP"
                   " cannot finish), but the local APIC timer runs: this firmware ticks from another source;"
                   " configure a static address with bitsnet.configure(...)")

# Module state, tied to the default NIC object (a new machine or nic.reset() makes a new one):
# the DHCP run start_dhcp() began and nobody has waited for yet, and DNS servers set by
# configure(dns=...) while DHCP owns the address (IP4 Config2 refuses them then, docs/edk2.md section 5.2).
_state = {"dhcp_nic": None, "dhcp_since": 0.0, "dns_nic": None, "dns": None, "timer_restored": False,
          "until": None}  # type: dict   # until: a DHCP wait a caller's deadline cut short ends then

Ip4Info = collections.namedtuple("Ip4Info", "address netmask gateway dns_servers routes name")
# Speed (docs/performance.md section 7): every TCP connect asked IP4 Config2 for the address twice
# (three GetData calls and their parsing each, a third of a connection's time in real BITS), so
# ensure_configured() answers from the last reading for INFO_TTL seconds. bitsnet's own changes
# (configure, configure_dns, SetData, a DHCP start) forget it at once; a change made behind
# bitsnet's back (a lease that moves) is seen after at most INFO_TTL. 0 turns the cache off.
INFO_TTL = 1.0
_cached = {"nic": None, "info": None, "until": 0.0}  # type: dict


def _forget():
    """Drop ensure_configured()'s cached reading (the address, routes or DNS servers change)."""
    _cached["nic"] = None
# IPv6 (IP6 Config, docs/edk2.md section 5.3): ``address`` is the preferred one (global before link-local, None
# while there is none); ``netmask`` and ``routes`` are None and [] so that endpoint code can treat
# both kinds alike (TCP6/UDP6 take neither, docs/edk2.md sections 3.1 and 4.1).
Ip6Info = collections.namedtuple("Ip6Info", "address addresses netmask routes")


def _link_local(address):
    # type: (str) -> bool
    return address.lower().startswith(("fe8", "fe9", "fea", "feb"))  # fe80::/10


prefix_length = inet.prefix_length  # 24 for "255.255.255.0" (kept here: callers name it so)


# --- GetData / SetData with the sizing rules of docs/edk2.md section 5.2 -------------------
def _get_policy(config):
    policy = ctypes.c_int(0)
    size = efi.UINTN(ctypes.sizeof(policy))
    status = config.GetData(ctypes.byref(config), efidefs.Ip4Config2DataTypePolicy, ctypes.byref(size),
                            ctypes.addressof(policy))
    errors.raise_for_status(status, "Ip4Config2.GetData(Policy)")
    return policy.value


def _set(config, data_type, data, what):
    _forget()
    size = ctypes.sizeof(data) if data is not None else 0
    status = config.SetData(ctypes.byref(config), data_type, size,
                            ctypes.addressof(data) if data is not None else None)
    # EDK2 quirk (docs/bits-efi.md section 1): SetData(Policy) may answer EFI_NOT_READY while DHCP runs.
    if status != efi.EFI_NOT_READY:
        errors.raise_for_status(status, "Ip4Config2.SetData(%s)" % what)


def _set_policy(config, policy):
    _set(config, efidefs.Ip4Config2DataTypePolicy, ctypes.c_int(policy), "Policy")


def _get_addresses(config, data_type):
    """An array item (Gateway, DnsServer) as dotted strings; [] when unset (EFI_NOT_FOUND)."""
    size = efi.UINTN(0)
    status = config.GetData(ctypes.byref(config), data_type, ctypes.byref(size), None)
    if status == efi.EFI_SUCCESS or status == efi.EFI_NOT_FOUND or size.value == 0:
        return []  # docs/edk2.md section 5.2: NOT_FOUND is "unset" (always so for Gateway under Dhcp)
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
        return None  # docs/edk2.md section 5.2: StationAddress/SubnetMask are 0 while unconfigured
    config = the_nic.config2()
    gateway = None
    for _subnet, mask, via in routes:
        if mask == "0.0.0.0" and via != "0.0.0.0":
            gateway = via
    if gateway is None:
        gateways = _get_addresses(config, efidefs.Ip4Config2DataTypeGateway)
        gateway = gateways[0] if gateways else None
    dns = _dns_override(the_nic)
    if dns is None:
        dns = _get_addresses(config, efidefs.Ip4Config2DataTypeDnsServer)
    return Ip4Info(address, efidefs.ipv4_text(info.SubnetMask), gateway, dns, routes, the_nic.name_of(info))


def _dns_override(the_nic):
    """The servers configure(dns=...) set for ``the_nic`` under DHCP, or None."""
    owner = _state["dns_nic"]
    if owner is None or owner is not nic._state.get("nic") or owner.handle != the_nic.handle:
        return None
    return list(_state["dns"])


def current():
    """The default NIC's address as an Ip4Info, or None while it has none."""
    return _info(nic.default_nic())


def _info6(the_nic):
    addresses = [address for address, _prefix in the_nic.interface_info6()]
    preferred = [a for a in addresses if not _link_local(a)] + [a for a in addresses if _link_local(a)]
    return Ip6Info(preferred[0] if preferred else None, addresses, None, [])


IPV6_TIMEOUT = 10.0  # seconds for SLAAC: a router answers a solicitation within a second or two (RFC 4861)


def ensure_configured6(timeout=None, deadline=None):
    # type: (float, float) -> Ip6Info
    """The NIC's IPv6 addresses once a usable (not link-local) one exists.

    EDK2 quirk (docs/edk2.md section 5.3): the default IP6 Config policy is Manual: without an address set by hand, only
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
    check_timer()  # SLAAC and DAD run from timer events too: without a tick no address comes
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
    start = clock.monotonic()
    found = []

    def usable():
        got = _info6(the_nic)
        if got.address is not None and not _link_local(got.address):
            found.append(got)
        return bool(found)

    caller = deadline  # docs/architecture.md section 6.4: the socket call's deadline may come first
    if not events.wait_until(usable, start + timeout if caller is None else min(caller, start + timeout),
                             poll=_stall):
        if caller is not None and caller < start + timeout:
            sys.stdout.write("(in the background)\n")
            sys.stdout.flush()
            raise errors.timeout("timed out")  # SLAAC goes on; the next call waits again
        sys.stdout.write("no address\n")
        sys.stdout.flush()
        raise errors.socket_error(errno.EADDRNOTAVAIL, "IPv6 on %s: no global address within %s s (no router"
                                  " advertisement)" % (the_nic.name, _seconds(timeout)))
    sys.stdout.write("%s in %.1f s\n" % (found[-1].address, clock.monotonic() - start))
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


def _seconds(value):
    # type: (float) -> str
    """'30', '0.5', '2.25': a duration for a message. BITS quirk: never %g or repr() for a float
    (GRUB's printf, docs/bits-environment.md section 10)."""
    text = "%.3f" % value
    return text.rstrip("0").rstrip(".") if "." in text else text


def timer_ticks(window=None):
    # type: (float) -> bool
    """Whether a 1 ms relative timer event fires within ``window`` seconds of wall clock.

    A Type-0 EVT_TIMER event polled with CheckEvent (docs/edk2.md section 2.3): no notify function, so the
    answer does not depend on how bitsnet notices completions. Wall clock is ``clock.monotonic``
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
        start = clock.monotonic()
        while True:
            if bs.CheckEvent(event) == efi.EFI_SUCCESS:
                return True
            if clock.monotonic() - start >= window:
                return False
            bs.Stall(1000)
    finally:
        bs.CloseEvent(event)


def _lapic_access():
    """Register access to the local APIC (``bitsnet.lapic``), or None where there is none to
    program: anywhere but BITS (a host, the simulator). Tests replace it with a fake."""
    from bitsnet import lapic
    try:
        return lapic.BitsAccess()
    except RuntimeError:
        return None  # no BITS ``bits`` module with MSR and MMIO access


def _restore_lapic_timer():
    # type: () -> str
    """Restart a stopped local APIC timer as OVMF programs it, at most once per process.

    Returns "restored", "running" (the LAPIC timer runs: the tick comes from elsewhere),
    "done" (restored once already) or "absent" (no LAPIC access: not BITS).

    BITS's SMP start-up leaves the local APIC timer stopped, and OVMF's UEFI tick comes from it
    (docs/bits-environment.md section 7; bitsnet/lapic.py). Restarting it is safe only there,
    so only when the timer is found stopped: a running LAPIC timer is left alone.
    """
    if _state["timer_restored"]:
        return "done"
    access = _lapic_access()
    if access is None:
        return "absent"
    from bitsnet import lapic
    try:
        before = lapic.timer_state(access)
        if not lapic.is_stopped(before):
            return "running"
        lapic.restore_timer(access, verbose=False)
    except RuntimeError as e:  # APIC disabled, an MSR access faulted
        sys.stdout.write("bitsnet: could not restart the local APIC timer: %s\n" % e)
        return "absent"
    _state["timer_restored"] = True
    sys.stdout.write("bitsnet: the firmware timer was stopped (local APIC timer %s); restarted it as"
                     " OVMF programs it\n" % ("masked" if before["masked"] else "count 0"))
    sys.stdout.flush()
    return "restored"


def check_timer(window=None):
    # type: (float) -> str
    """Return "ticks" if the firmware timer ticks. If it does not and this is BITS with the
    local APIC timer stopped, restart that timer once (one line on stdout), check again and
    return "restarted" if it ticks now. Otherwise raise error(EIO) naming the cause and the
    remedy."""
    if timer_ticks(window):
        return "ticks"
    # BITS quirk: its SMP start-up leaves OVMF's tick source, the LAPIC timer, stopped
    # (docs/bits-environment.md section 7).
    outcome = _restore_lapic_timer()
    if outcome == "restored" and timer_ticks(window):
        return "restarted"
    message = {"restored": TIMER_STILL_STOPPED, "done": TIMER_STILL_STOPPED, "running": TIMER_NOT_LAPIC}
    raise errors.socket_error(errno.EIO, message.get(outcome, TIMER_REMEDY))


TICK_PROBE_WINDOW = 0.1  # tick_source(): ten of EDK2's 10 ms ticks


def tick_source(window=TICK_PROBE_WINDOW):
    # type: (float) -> str
    """Whether the firmware timer ticks and where from, in words; reads only, changes nothing.

    OVMF since edk2-stable202205 ticks from the local APIC timer, older builds from the 8254 PIT
    (docs/edk2.md section 10.3); BITS's SMP start-up stops the local APIC timer, so a firmware
    that still ticks with it stopped ticks from elsewhere. Outside BITS there is no local APIC
    access (the simulator): only whether it ticks."""
    if _state["timer_restored"]:
        return "the local APIC timer (found stopped, restarted by bitsnet)"
    ticks = timer_ticks(window)
    access = _lapic_access()
    if access is None:
        return "%s (its source is not checked outside BITS)" % ("ticks" if ticks else "stopped")
    from bitsnet import lapic
    try:
        stopped = lapic.is_stopped(lapic.timer_state(access))
    except RuntimeError as e:
        return "%s (local APIC unreadable: %s)" % ("ticks" if ticks else "stopped", e)
    if ticks and stopped:
        return "not the local APIC timer (stopped): the 8254 PIT or the HPET"
    if ticks:
        return "the local APIC timer (it runs)"
    if stopped:
        return "stopped, as is the local APIC timer (BITS's SMP start-up stops it): bitsnet restarts that before DHCP"
    return "stopped, though the local APIC timer runs: another source, which bitsnet cannot restart"


def _dhcp_pending(the_nic):
    # type: (object) -> bool
    """Whether start_dhcp() began a DHCP run on ``the_nic`` (the default NIC) that may still
    answer: less than DHCP_TIMEOUT ago, and nobody waited for it to the end yet."""
    return (_state["dhcp_nic"] is the_nic and the_nic is nic._state.get("nic")
            and clock.monotonic() - _state["dhcp_since"] < DHCP_TIMEOUT)


def _begin_dhcp(the_nic):
    """Set policy Dhcp so that EDK2 starts a DHCP run now (no waiting)."""
    config = the_nic.config2()
    if _get_policy(config) == efidefs.Ip4Config2PolicyDhcp:
        # EDK2 quirk (docs/bits-efi.md section 1, docs/edk2.md section 5.2): setting Dhcp again does not restart a DHCP
        # that already succeeded (or, on old stacks, one that failed): go through Static to force it.
        _set_policy(config, efidefs.Ip4Config2PolicyStatic)
    _set_policy(config, efidefs.Ip4Config2PolicyDhcp)


def start_dhcp():
    # type: () -> bool
    """Start DHCP on the default NIC if it has no address, and return at once (True if it
    started a run). A run started here is not restarted by the next calls, nor by the
    ``ensure_configured`` that then waits for it, until DHCP_TIMEOUT has passed: a program may
    poll ``bitsnet.interfaces()`` until the address shows. Checks the firmware timer first
    (``check_timer``: DHCP cannot finish without it)."""
    the_nic = nic.default_nic()
    if _info(the_nic) is not None or _dhcp_pending(the_nic):
        return False
    check_timer()
    _begin_dhcp(the_nic)
    _state.update(dhcp_nic=the_nic, dhcp_since=clock.monotonic())
    return True


def ensure_configured(timeout=None, deadline=None):
    # type: (float, float) -> Ip4Info
    """The NIC's address, bringing it up with DHCP if it has none (waits up to ``timeout``, and
    not beyond ``deadline``, the socket call's: docs/architecture.md section 6.4)."""
    the_nic = nic.default_nic()
    if _cached["nic"] is the_nic and clock.monotonic() < _cached["until"]:
        return _cached["info"]
    info = _info(the_nic)
    if info is not None:
        if _state["until"] is not None:
            _state.update(dhcp_nic=None, until=None)  # a wait cut short: DHCP has answered since
        if INFO_TTL:
            _cached.update(nic=the_nic, info=info, until=clock.monotonic() + INFO_TTL)
        return info  # reuse whatever the firmware already has (DHCP by the shell, static, PXE)
    name = the_nic.name
    start = clock.monotonic()
    resumed = _state["until"] is not None and _state["dhcp_nic"] is the_nic and the_nic is nic._state.get("nic")
    if resumed:
        until = _state["until"]  # an earlier wait for this run was cut short by its caller's deadline
    else:
        until = start + (DHCP_TIMEOUT if timeout is None else timeout)
        if _dhcp_pending(the_nic):
            _state["dhcp_nic"] = None  # wait for the run start_dhcp() began; a later call restarts
        else:
            # docs/architecture.md section 11: with the firmware tick stopped DHCP would spin until the timeout; say why
            # at once (or, in BITS, restart the stopped LAPIC timer first).
            check_timer()
            _begin_dhcp(the_nic)
            _state["dhcp_since"] = clock.monotonic()
        sys.stdout.write("bitsnet: DHCP on %s ... " % name)
        sys.stdout.flush()
    # docs/architecture.md section 6.4: the socket call's own deadline (a non-blocking one: now) may come first;
    # then this call times out and DHCP goes on, and the next call resumes this wait.
    caller = deadline
    limit = until if caller is None or caller >= until else caller
    found = []

    def leased():
        # EDK2 quirk (docs/edk2.md section 5.2): no event signals DHCP completion; poll InterfaceInfo until an address
        # shows.
        got = _info(the_nic)
        if got is not None:
            found.append(got)
        return bool(found)

    if not events.wait_until(leased, limit, poll=_stall):
        if limit < until:
            if not resumed:
                sys.stdout.write("(in the background)\n")
                sys.stdout.flush()
            _state.update(dhcp_nic=the_nic, until=until)
            raise errors.timeout("timed out")
        _state.update(dhcp_nic=None, until=None)
        sys.stdout.write("no answer\n" if not resumed else "bitsnet: DHCP on %s: no answer\n" % name)
        sys.stdout.flush()
        raise errors.socket_error(errno.ETIMEDOUT, "DHCP on %s: no answer within %s s; use bitsnet.configure(...)"
                                  " for a static address" % (name, _seconds(DHCP_TIMEOUT if timeout is None
                                                                           else timeout)))
    info = found[-1]
    _state.update(dhcp_nic=None, until=None)
    if resumed:
        sys.stdout.write("bitsnet: DHCP on %s: " % name)
    sys.stdout.write("%s/%d in %.1f s\n" % (info.address, prefix_length(info.netmask), clock.monotonic() - start))
    sys.stdout.flush()
    return info


def configure_dns(servers):
    """Use ``servers`` (dotted quads) as the DNS servers and keep the address as it is.

    With a static address they go into IP4 Config2's DnsServer. Under Dhcp, IP4 Config2 refuses
    them (EFI_WRITE_PROTECTED, docs/edk2.md section 5.2) and DHCP would replace them anyway, and before any
    address (EDK2 starts in policy Static with none) the switch to Dhcp would clear them
    (docs/edk2.md section 5.2), so bitsnet keeps them and reports them instead of DHCP's (``current()``,
    ``interfaces()``, the resolver) until the next ``configure``. Returns the Ip4Info (None
    while the NIC has no address yet: DHCP keeps running, this does not wait for it)."""
    the_nic = nic.default_nic()
    _forget()
    try:
        array = _address_array(list(servers))
    except ValueError as e:
        raise errors.socket_error(errno.EINVAL, str(e))
    config = the_nic.config2()
    if _get_policy(config) == efidefs.Ip4Config2PolicyStatic and _info(the_nic) is not None:
        _set(config, efidefs.Ip4Config2DataTypeDnsServer, array, "DnsServer")
        _state.update(dns_nic=None, dns=None)
    else:
        _state.update(dns_nic=the_nic, dns=[efidefs.ipv4_text(a) for a in array])
    return _info(the_nic)


def configure(address=None, netmask=None, gateway=None, dns=()):
    """Give the NIC a static address (policy Static, ManualAddress, Gateway, DnsServer).

    ``netmask`` is dotted ('255.255.255.0') or a prefix length (24). Returns the new Ip4Info.
    Without an address, only ``dns`` is set (``configure_dns``): DHCP's address stays.
    """
    if address is None:
        if netmask is not None or gateway is not None or not dns:
            raise errors.socket_error(errno.EINVAL, "configure() needs an address and a netmask, or dns=[...] alone")
        return configure_dns(dns)
    if netmask is None:
        raise errors.socket_error(errno.EINVAL, "configure(%s): a netmask is needed" % address)
    the_nic = nic.default_nic()
    _forget()
    config = the_nic.config2()
    manual = efidefs.EFI_IP4_CONFIG2_MANUAL_ADDRESS()
    try:
        manual.Address = efidefs.ipv4(address)
        manual.SubnetMask = efidefs.ipv4(inet.netmask_text(netmask))
        gateways = _address_array([gateway]) if gateway else None
        servers = _address_array(list(dns)) if dns else None
    except ValueError as e:
        raise errors.socket_error(errno.EINVAL, str(e))
    if _get_policy(config) != efidefs.Ip4Config2PolicyStatic:
        _set_policy(config, efidefs.Ip4Config2PolicyStatic)  # docs/edk2.md section 5.2: clears the DHCP lease
    _set(config, efidefs.Ip4Config2DataTypeManualAddress, manual, "ManualAddress")
    if gateways is not None:
        _set(config, efidefs.Ip4Config2DataTypeGateway, gateways, "Gateway")
    if servers is not None:
        _set(config, efidefs.Ip4Config2DataTypeDnsServer, servers, "DnsServer")
        _state.update(dns_nic=None, dns=None)  # the firmware has them now
    _state["dhcp_nic"] = None  # no DHCP run to wait for any more
    info = _info(the_nic)
    if info is None:
        raise errors.socket_error(errno.EADDRNOTAVAIL, "Ip4Config2 did not take the address %s" % address)
    return info


def interfaces(start=False):
    """[{name, mac, address, netmask, gateway, dns, ipv6}] for every NIC (address None if unset;
    ipv6: [(address, prefix length)] from IP6 Config, [] when the firmware has no IPv6).
    ``start``: first start DHCP on the default NIC if it has no address (``start_dhcp``, no
    waiting), as ``bitsnet.interfaces()`` does."""
    nics = nic.find_all()
    if start and nics:  # no NIC at all: an empty list, as before, not start_dhcp's ENETDOWN
        start_dhcp()
    out = []
    for each in nics:
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
