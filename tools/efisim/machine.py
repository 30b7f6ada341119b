"""Boot a simulated machine: the firmware core plus one NIC with EDK2's network drivers.

``boot(MachineConfig(...))`` resets the one firmware instance and installs, on a fresh NIC
handle, what EDK2's NetworkPkg installs on a connected NIC: IP4 Config2 and the TCP4, UDP4 and
(optionally, docs/edk2.md section 6.3) DNS4 service bindings; and, unless ``ipv6=False`` (a firmware
built without NETWORK_IP6_ENABLE, docs/edk2.md section 7), IP6 Config and the TCP6, UDP6 and (with DNS4) DNS6
service bindings. Each driver module offers ``install(machine)`` returning a driver object
with ``ledger()`` (what it still holds for the application, e.g. live children and outstanding
tokens) and ``shutdown()``.

Firmware generations (``generation``, efirun's ``--generation``; docs/edk2.md section 10): Debian's
OVMF builds differ in what bitsnet depends on, and ``GENERATIONS`` says how:
  ``2020.11``   no IPv6 (built without NETWORK_IP6_ENABLE: no IP6 Config, TCP6, UDP6 or DNS6); its
                tick comes from the 8254, not the local APIC timer (``tick_source``)
  ``2022.11``   what the project has always modelled (the default)
  ``2025.02``, ``2026.08``  the RNG rule: without ``rng=True`` the NIC keeps its Simple Network
                Protocol and nothing binds above it -- ConnectController answers EFI_NOT_FOUND;
                a Hash2 service binding (Hash2DxeCrypto) exists
Options given explicitly (``ipv6=True``) override what the generation implies.

Two firmware profiles (``--firmware``):
  ``edk2``       current EDK2 NetworkPkg, as described in docs/edk2.md (the default);
  ``edk2-2015``  the older MdeModulePkg stack BITS was tested on (docs/bits-efi.md sections 2, 3, 5):
                 TCP4 Cancel returns EFI_UNSUPPORTED, Configure with UseDefaultAddress fails with
                 EFI_ALREADY_STARTED, and TCP4 children do not inherit the IP4 routes.
"""

from __future__ import print_function

import os

from efisim import uefi
from efisim.firmware import FIRMWARE
from efisim.nic import Nic

PROFILES = ("edk2", "edk2-2015")

# What differs between the firmware generations (docs/edk2.md section 10): option defaults
# ("ipv6") and traits no option sets -- "rng_required": NetworkPkg drivers load only with an
# EFI_RNG_PROTOCOL (section 10.1); "hash2": a Hash2 service binding exists (section 10.2);
# "tick_source": where the UEFI timer tick comes from (section 10.3; recorded, not modelled: the
# simulator has no local APIC).
# "vendor": the system table's FirmwareVendor (section 10.5, measured).
DEBIAN_VENDOR = "Debian distribution of EDK II"
GENERATIONS = {  # type: dict
    "2020.11": {"ipv6": False, "rng_required": False, "hash2": False, "tick_source": "8254", "vendor": "EDK II"},
    "2022.11": {"ipv6": True, "rng_required": False, "hash2": False, "tick_source": "local APIC",
                "vendor": "EDK II"},
    "2025.02": {"ipv6": True, "rng_required": True, "hash2": True, "tick_source": "local APIC",
                "vendor": DEBIAN_VENDOR},
    "2026.08": {"ipv6": True, "rng_required": True, "hash2": True, "tick_source": "local APIC",
                "vendor": DEBIAN_VENDOR},
}
GENERATION_OPTIONS = ("ipv6",)  # the keys of GENERATIONS that are MachineConfig options


class MachineConfig(object):
    """Everything that differs between simulated machines; efirun's options map onto it."""

    def __init__(self, **options):
        self.address = "127.0.0.2/8"  # what DHCP hands out (or the static address)
        self.gateway = "127.0.0.1"
        self.dns_servers = []  # type: list   # ["127.0.0.1:5353"]: DHCP option 6 plus port
        self.static = False  # address preconfigured (policy Static + ManualAddress), no DHCP
        self.dhcp = True  # False: the DHCP server never answers
        self.dhcp_delay = 0.3  # seconds from DHCP start to lease (OVMF on QEMU: about 4 s)
        # False: no DnsDxe, so no DNS4 (nor DNS6) service binding (most vendor firmware, docs/edk2.md section 6.3)
        self.dns4 = True
        self.firmware = "edk2"
        self.seed = 0
        self.timer = True  # False: the firmware timer tick is stopped (docs/architecture.md section 11)
        self.nic_connected = True  # False: only SNP until ConnectController (docs/edk2.md section 2.4)
        self.faults = ""  # fault spec for faults.Faults.configure: "delay=0.5,tx_fail=2,no_dhcp"
        self.ipv6 = True  # False: no IP6 Config, TCP6 or UDP6 (firmware without NETWORK_IP6_ENABLE)
        self.ipv6_delay = 0.3  # seconds SLAAC (policy Automatic) or DAD (manual address) takes; None: never
        self.ipv6_policy = "manual"  # EDK2's default; "automatic" (set by PXE/HTTP boot), "static" (::1 by hand)
        self.ipv6_dns_servers = []  # type: list   # ["[::1]:5353"]: what the router (RDNSS) hands out, plus port
        self.rng = False  # True: an EFI_RNG_PROTOCOL backed by os.urandom (rng.py); Debian's OVMF has none
        self.tls = "edk2"  # TlsDxe (tls.py): "edk2", "edk2-2019" (no EfiTlsVerifyHost), None: none
        # Debian's OVMF build modelled (GENERATIONS): sets the defaults of GENERATION_OPTIONS
        self.generation = options.get("generation", "2022.11")
        if self.generation not in GENERATIONS:
            raise ValueError("generation must be one of %s" % ", ".join(sorted(GENERATIONS)))
        for name in GENERATION_OPTIONS:
            setattr(self, name, GENERATIONS[self.generation][name])
        for name, value in options.items():
            if not hasattr(self, name):
                raise TypeError("unknown machine option %r" % name)
            setattr(self, name, value)
        if self.ipv6_policy not in ("manual", "automatic", "static"):
            raise ValueError("ipv6_policy must be manual, automatic or static")
        if self.ipv6_delay is not None and float(self.ipv6_delay) < 0:
            raise ValueError("ipv6_delay must be >= 0 (or None: never)")
        if self.tls not in (None, False, "edk2", "edk2-2019"):
            raise ValueError("tls must be edk2, edk2-2019 or None")
        if self.firmware not in PROFILES:
            raise ValueError("firmware profile must be one of %s" % ", ".join(PROFILES))
        self._check_loopback()
        _make_faults(self)  # a bad fault spec fails here, before anything boots

    def _check_loopback(self):
        """The host's loopback is the wire: every address the machine uses must be in 127.0.0.0/8."""
        address, _, prefix = str(self.address).partition("/")
        if prefix and not (prefix.isdigit() and 0 < int(prefix) < 32):
            raise ValueError("address %r: prefix length must be 1..31" % self.address)
        checks = [("address", address)]
        if self.gateway:
            checks.append(("gateway", self.gateway))
        for server in self.dns_servers:
            host, _, port = str(server).partition(":")
            if port and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError("dns server %r: bad port" % server)
            checks.append(("dns server", host))
        for server in self.ipv6_dns_servers:
            if ipv6_dns_host_port(server)[0] != "::1":
                raise ValueError("ipv6 dns server %r: the only IPv6 address on loopback is ::1" % (server,))
        for what, text in checks:
            parts = str(text).split(".")
            if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
                raise ValueError("%s %r is not an IPv4 address" % (what, text))
            if parts[0] != "127":
                raise ValueError("%s %s is not in 127.0.0.0/8: the simulated NIC is on loopback only"
                                 % (what, text))

    @property
    def old_stack(self):
        return self.firmware == "edk2-2015"

    @property
    def rng_required(self):
        # type: () -> bool
        """EDK2's network drivers need an EFI_RNG_PROTOCOL in this generation (docs/edk2.md section 10.1)."""
        return GENERATIONS[self.generation]["rng_required"]

    @property
    def hash2(self):
        # type: () -> bool
        """This generation has a Hash2 service binding (docs/edk2.md section 10.2)."""
        return GENERATIONS[self.generation]["hash2"]

    @property
    def tick_source(self):
        # type: () -> str
        """Where this generation's UEFI timer tick comes from (docs/edk2.md section 10.3)."""
        return GENERATIONS[self.generation]["tick_source"]


class Machine(object):
    """A booted machine: ``firmware``, ``nic`` and the installed ``drivers`` by name."""

    def __init__(self, config):
        self.config = config
        self.firmware = FIRMWARE
        self.nic = Nic(FIRMWARE)
        self.drivers = {}  # type: dict
        self.faults = _make_faults(config)
        FIRMWARE.faults = self.faults
        FIRMWARE.set_vendor(GENERATIONS[config.generation]["vendor"])
        FIRMWARE.ledger_sources.append(self._driver_ledger)
        FIRMWARE.install_protocol(self.nic.handle, uefi.EFI_SIMPLE_NETWORK_PROTOCOL_GUID,
                                  FIRMWARE.allocate_static(656))
        self.rng = None
        if config.rng:
            from efisim import rng
            self.rng = rng.install()
        self.hash2 = None
        if config.hash2:  # Hash2DxeCrypto: its service binding on a handle of its own (presence only)
            self.hash2 = FIRMWARE.new_handle()
            FIRMWARE.install_protocol(self.hash2, uefi.EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID,
                                      FIRMWARE.allocate_static(16))
        self.tls = None  # TlsDxe is no NIC driver: its service binding is there from boot on
        if config.tls:
            from efisim import tls
            if tls.available()[0]:
                self.tls = tls.install(self, config.tls)
                FIRMWARE.ledger_sources.append(self.tls.ledger)
        if config.rng_required and not config.rng:
            # EDK2 quirk (docs/edk2.md section 10.1): every NetworkPkg driver's dependency expression
            # names gEfiRngProtocolGuid, so none is dispatched: the NIC keeps only its SNP, and
            # ConnectController finds no driver for it (no hook: EFI_NOT_FOUND).
            pass
        elif config.nic_connected:
            self.connect_drivers()
        else:
            FIRMWARE.connect_hooks[self.nic.handle] = self._connect_controller

    def _connect_controller(self, recursive):
        if self.drivers:
            return uefi.EFI_SUCCESS
        self.connect_drivers()
        return uefi.EFI_SUCCESS

    def connect_drivers(self):
        """What ConnectController(NIC, recursive) does in EDK2: start the network drivers."""
        from efisim import ip4config2
        # MnpDxe's service binding on the NIC (presence only: bitsnet never makes MNP children)
        FIRMWARE.install_protocol(self.nic.handle, uefi.EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID,
                                  FIRMWARE.allocate_static(16))
        self.drivers["ip4config2"] = ip4config2.install(self)
        names = ["tcp4", "udp4", "dns4"]
        if self.config.ipv6:
            names += ["ip6config", "tcp6", "udp6", "dns6"]
        for name in names:
            if name in ("dns4", "dns6") and not self.config.dns4:
                continue  # no DnsDxe: neither DNS4 nor DNS6
            if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")):
                continue  # driver not written yet (an ImportError inside a driver still propagates)
            module = __import__("efisim." + name, fromlist=["install"])
            self.drivers[name] = module.install(self)

    def _driver_ledger(self):
        counts = {}  # type: dict
        for driver in self.drivers.values():
            for name, value in driver.ledger().items():
                counts[name] = counts.get(name, 0) + value
        return counts

    def shutdown(self):
        for driver in list(self.drivers.values()):
            driver.shutdown()
        if self.drivers:
            FIRMWARE.uninstall_protocol(self.nic.handle, uefi.EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID)
        self.drivers.clear()
        if self.hash2 is not None:
            FIRMWARE.uninstall_protocol(self.hash2, uefi.EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID)
        self.nic.close()
        if self.rng is not None:
            self.rng.shutdown()
        if self.tls is not None:
            self.tls.shutdown()
        FIRMWARE.stop_timer()
        FIRMWARE.faults = None


def ipv6_dns_host_port(text):
    """ "[::1]:5353" or "::1" -> ("::1", port (53 by default)); ValueError if malformed."""
    text = str(text)
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError("ipv6 dns server %r: expected [ADDRESS]:PORT" % text)
    else:
        host, port = text, ""
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError("ipv6 dns server %r: bad port" % text)
    return host, int(port) if port else 53


def _make_faults(config):
    """``faults.Faults(config.seed)`` configured from ``config.faults`` (None without faults.py);
    ValueError for a bad spec."""
    try:
        from efisim import faults
    except ImportError:
        if config.faults:
            raise ValueError("fault injection is not available (tools/efisim/faults.py missing)")
        return None
    return faults.Faults(config.seed).configure(config.faults)


_current = [None]  # type: list


def boot(config=None):
    """Reset the firmware and boot a machine with ``config``; the previous one is shut down."""
    config = config or MachineConfig()
    if _current[0] is not None:
        _current[0].shutdown()
    FIRMWARE.reset(timer_running=config.timer)
    machine = Machine(config)
    _current[0] = machine
    return machine


def current():
    """The machine booted last (None before the first boot)."""
    return _current[0]
