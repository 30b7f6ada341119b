"""NIC discovery and the bookkeeping of every service-binding child bitsnet makes.

``find()``/``default_nic()``  the NIC handle that carries both EFI_IP4_CONFIG2_PROTOCOL and the
                              TCP4 service binding (EDK2 installs both on the controller handle,
                              docs/edk2.md section 2.4); if there is none the NIC may not be connected yet, so
                              ``connect_controllers()`` connects every SNP handle first and says
                              so on the console.
``Nic``                       one such handle: ``create_child``/``destroy_child``/``adopt_child``
                              through its service bindings, ``children()`` for leak checks,
                              ``config2()`` and ``interface_info()`` for ipconfig.
``why_no_nic()``              when there is none even after connecting: (cause, message), the first
                              row of ``NO_NIC_CAUSES`` that fits what the firmware has (no NIC
                              driver, no RNG for EDK2's network stack, stack not started, ...).
``reset()``                   forget the cached NIC and children (the simulator rebooted).

Every child this module hands out is counted until ``destroy_child``: a non-zero ``children()``
after everything was closed is a leak (it holds a port and an IP child in the firmware).
"""

import ctypes
import errno
import sys

import efi

try:
    from typing import Optional, Tuple  # noqa: F401  (type comments)
except ImportError:  # BITS's Python 2.7 has no typing module
    pass

from bitsnet import efidefs, errors

# Service binding protocol class per service-binding GUID (their layout is the same).
_SERVICE_BINDINGS = {
    efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID: efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL,
    efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID: efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL,
    efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID: efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL,
    efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID: efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL,
    efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID: efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL,
}

_state = {"nic": None, "connect": None}  # type: dict   # connect: what ConnectController answered, as text

# EDK2 quirk (docs/edk2.md section 10.1): EDK2 since edk2-stable202405 (the CVE-2023-45236/45237 fix)
# loads none of its network drivers above the NIC's own without an EFI_RNG_PROTOCOL: the NIC
# keeps its Simple Network Protocol and ConnectController finds no driver (EFI_NOT_FOUND).
RNG_NEEDED = ("this firmware's network stack needs a random number generator: the NIC has a driver (Simple"
              " Network) but nothing started above it, and the firmware has no EFI_RNG_PROTOCOL; EDK2 since"
              " 2024 (the fix for CVE-2023-45236/45237) starts its network drivers only with one. Enable the"
              " random number generator in the firmware setup; under QEMU add -device virtio-rng-pci")

# Why no NIC is usable: the first row whose protocols are all missing names the cause
# (``why_no_nic``). Facts: snp (Simple Network handles), mnp (Managed Network service binding),
# rng (EFI_RNG_PROTOCOL), ip4config2, tcp4 (its service binding), hash2 (Hash2 service binding).
NO_NIC_CAUSES = [  # (cause, protocols all missing, message)
    ("no-nic-driver", ("snp",), "no NIC driver: no handle carries the Simple Network Protocol (no network"
                                " controller, no UEFI driver or option ROM for it, or networking switched off"
                                " in the firmware setup)"),
    ("no-rng", ("mnp", "rng"), RNG_NEEDED),
    ("not-connected", ("mnp",), "the network stack did not start on the NIC: %(snp)d Simple Network handle(s)"
                                " but no Managed Network service binding; ConnectController: %(connect)s"
                                " (network stack switched off in the firmware setup, or not built in)"),
    ("no-ipv4", ("ip4config2",), "no IPv4 on the NIC: Managed Network but no IP4 Config2 (Ip4Dxe not built"
                                 " in, or IPv4 switched off; under QEMU: fw_cfg opt/org.tianocore/IPv4Support)"),
    # EDK2 quirk (docs/edk2.md section 10.2): TcpDxe since 2024 loads only with a Hash2 service binding.
    ("no-hash2", ("tcp4", "hash2"), "no TCP4: IPv4 is up but TcpDxe did not start; EDK2's TcpDxe since 2024"
                                    " needs the Hash2 service binding (Hash2DxeCrypto), which this firmware"
                                    " lacks"),
    ("no-tcp4", ("tcp4",), "no TCP4 on the NIC: IPv4 is up but the firmware has no TcpDxe"),
    ("apart", (), "IP4 Config2 and the TCP4 service binding are on different handles: bitsnet needs both on"
                  " the NIC's handle"),
]


def _boot_services():
    return efi.system_table.BootServices.contents


def _handles(guid):
    """Handles carrying ``guid``; an empty list (not EFI_NOT_FOUND) when there are none."""
    try:
        return list(efi.locate_handles(guid))
    except efi.EFIException:
        return []


def _nic_handles():
    with_config = set(_handles(efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID))
    return [h for h in _handles(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID) if h in with_config]


class Nic(object):
    """One network controller handle and the children bitsnet created on it."""

    def __init__(self, handle):
        # type: (int) -> None
        self.handle = handle
        self._children = set()  # type: set   # (service-binding GUID, child handle)
        self._bindings = {}  # type: dict     # GUID -> service binding protocol interface
        self._child_calls = {}  # type: dict  # GUID -> (CreateChild, DestroyChild, byref(binding))

    def __repr__(self):
        return "<Nic %s handle=0x%x children=%d>" % (self.name, self.handle, len(self._children))

    # -- service-binding children ---------------------------------------------------------
    def has_service(self, sb_guid):
        # type: (object) -> bool
        return self.handle in _handles(sb_guid)

    def service_binding(self, sb_guid):
        binding = self._bindings.get(sb_guid)
        if binding is None:
            cls = _SERVICE_BINDINGS.get(sb_guid, efidefs.EFI_SERVICE_BINDING_PROTOCOL)
            try:
                binding = cls.from_address(efi.get_protocol(self.handle, sb_guid))
            except efi.EFIException as e:
                raise errors.socket_error(errno.ENETDOWN, "%s on %s: %s" % (
                    efidefs.GUID_NAMES.get(sb_guid, sb_guid), self.name, errors.status_name(e.args[0])))
            self._bindings[sb_guid] = binding
        return binding

    def _calls(self, sb_guid):
        """(CreateChild, DestroyChild, byref(binding)) of ``sb_guid``, kept: reading a ctypes
        function field builds a new callable each time (child.EfiChild._call), and a connection
        makes one child and destroys one."""
        calls = self._child_calls.get(sb_guid)
        if calls is None:
            binding = self.service_binding(sb_guid)
            calls = self._child_calls[sb_guid] = (binding.CreateChild, binding.DestroyChild, ctypes.byref(binding))
        return calls

    def create_child(self, sb_guid):
        # type: (object) -> int
        """CreateChild on the service binding ``sb_guid``; returns the new child handle."""
        calls = self._calls(sb_guid)
        child = efi.EFI_HANDLE()
        status = calls[0](calls[2], ctypes.byref(child))
        if status != efi.EFI_SUCCESS:
            errors.raise_for_status(status, "CreateChild")
        handle = child.value
        if not handle:
            raise errors.socket_error(errno.EIO, "CreateChild returned a NULL handle")
        self._children.add((sb_guid, handle))
        return handle

    def adopt_child(self, sb_guid, handle):
        # type: (object, int) -> None
        """Count a child the firmware made for us (an accepted TCP connection, docs/edk2.md section 3.3 Accept)."""
        self._children.add((sb_guid, handle))

    def destroy_child(self, sb_guid, handle):
        # type: (object, int) -> int
        """DestroyChild; returns the EFI status (the child is forgotten either way)."""
        self._children.discard((sb_guid, handle))
        calls = self._calls(sb_guid)
        return calls[1](calls[2], handle)

    def children(self, sb_guid=None):
        # type: (object) -> int
        """How many children bitsnet made (of ``sb_guid`` only, if given) are still alive."""
        return sum(1 for guid, _ in self._children if sb_guid is None or guid == sb_guid)

    # -- IP4 Config2 ------------------------------------------------------------------------
    def config2(self):
        """The NIC's EFI_IP4_CONFIG2_PROTOCOL."""
        binding = self._bindings.get(efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID)
        if binding is None:
            binding = efidefs.EFI_IP4_CONFIG2_PROTOCOL.from_handle(self.handle)
            self._bindings[efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID] = binding
        return binding

    def interface_info(self):
        """(EFI_IP4_CONFIG2_INTERFACE_INFO, [(subnet, mask, gateway)...]) read now.

        EDK2 quirk (Ip4Config2Impl.c, docs/edk2.md section 5.2): the route table is written right after the structure
        inside the caller's buffer, so a buffer of exactly sizeof(INTERFACE_INFO) fails with EFI_BUFFER_TOO_SMALL
        once any route exists: ask for the size first, then read (and retry if it grew).
        """
        config = self.config2()
        for _ in range(4):
            size = efi.UINTN(0)
            status = config.GetData(ctypes.byref(config), efidefs.Ip4Config2DataTypeInterfaceInfo,
                                    ctypes.byref(size), None)
            if status not in (efi.EFI_BUFFER_TOO_SMALL, efi.EFI_SUCCESS):
                errors.raise_for_status(status, "Ip4Config2.GetData(InterfaceInfo)")
            needed = max(size.value, ctypes.sizeof(efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO))
            buf = ctypes.create_string_buffer(needed)
            size.value = needed
            status = config.GetData(ctypes.byref(config), efidefs.Ip4Config2DataTypeInterfaceInfo,
                                    ctypes.byref(size), buf)
            if status == efi.EFI_BUFFER_TOO_SMALL:
                continue  # a route appeared in between
            errors.raise_for_status(status, "Ip4Config2.GetData(InterfaceInfo)")
            info = efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO.from_buffer_copy(buf.raw[:ctypes.sizeof(
                efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO)])
            routes = []
            for i in range(info.RouteTableSize):
                route = info.RouteTable[i]  # points into ``buf``, still alive here
                routes.append((efidefs.ipv4_text(route.SubnetAddress), efidefs.ipv4_text(route.SubnetMask),
                               efidefs.ipv4_text(route.GatewayAddress)))
            info.RouteTable = ctypes.POINTER(efidefs.EFI_IP4_ROUTE_TABLE)()  # ``buf`` dies with this call
            return info, routes
        raise errors.socket_error(errno.EIO, "Ip4Config2.GetData(InterfaceInfo) keeps growing")

    # -- IP6 Config (docs/edk2.md section 5.3) ------------------------------------------------
    def config6(self):
        """The NIC's EFI_IP6_CONFIG_PROTOCOL, or None if the firmware has no IPv6 on it."""
        binding = self._bindings.get(efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID)
        if binding is None:
            if not self.has_service(efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID):
                return None
            binding = efidefs.EFI_IP6_CONFIG_PROTOCOL.from_handle(self.handle)
            self._bindings[efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID] = binding
        return binding

    def has_ipv6(self):
        # type: () -> bool
        """Whether this NIC carries the TCP6 service binding (what AF_INET6 sockets need)."""
        return self.has_service(efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID)

    def interface_info6(self):
        """[(address text, prefix length)] from IP6 Config InterfaceInfo ([] without IPv6).

        The address table is written after the structure inside the caller's buffer, as for
        IP4 Config2's routes (docs/edk2.md sections 5.2, 5.3): ask for the size first, then read."""
        config = self.config6()
        if config is None:
            return []
        from bitsnet import family  # family imports efidefs only; no cycle, but keep nic light
        for _ in range(4):
            size = efi.UINTN(0)
            status = config.GetData(ctypes.byref(config), efidefs.Ip6ConfigDataTypeInterfaceInfo,
                                    ctypes.byref(size), None)
            if status not in (efi.EFI_BUFFER_TOO_SMALL, efi.EFI_SUCCESS):
                return []  # EFI_NOT_READY / NOT_FOUND while the interface comes up
            base = ctypes.sizeof(efidefs.EFI_IP6_CONFIG_INTERFACE_INFO)
            buf = ctypes.create_string_buffer(max(size.value, base))
            size.value = len(buf)
            status = config.GetData(ctypes.byref(config), efidefs.Ip6ConfigDataTypeInterfaceInfo,
                                    ctypes.byref(size), buf)
            if status == efi.EFI_BUFFER_TOO_SMALL:
                continue  # an address appeared in between
            if status != efi.EFI_SUCCESS:
                return []
            info = efidefs.EFI_IP6_CONFIG_INTERFACE_INFO.from_buffer(buf)
            out = []
            for i in range(info.AddressInfoCount):
                entry = info.AddressInfo[i]  # points into ``buf``, alive here
                out.append((family.INET6.efi_text(entry.Address), entry.PrefixLength))
            return out
        return []

    @property
    def name(self):
        # type: () -> str
        """The interface name EDK2 gives it ("eth0")."""
        try:
            info, _ = self.interface_info()
        except errors.error:
            return "nic@0x%x" % self.handle
        return self.name_of(info)

    def name_of(self, info):
        # type: (efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO) -> str
        """The Name of an InterfaceInfo (CHAR16, read as UINT16: c_wchar is 4 bytes on Linux)."""
        chars = []
        for c in info.Name:
            if not c:
                break
            chars.append(chr(c) if c < 128 else "?")
        return "".join(chars) or "nic@0x%x" % self.handle

    @property
    def mac(self):
        # type: () -> str
        """The hardware address as "52:54:00:12:34:56"."""
        info, _ = self.interface_info()
        size = min(info.HwAddressSize, 32) or 6
        return ":".join("%02x" % b for b in info.HwAddress.Addr[:size])


def connect_controllers():
    # type: () -> int
    """ConnectController(h, NULL, NULL, TRUE) on every handle carrying the Simple Network
    Protocol, saying so on the console (the first time: with the cause, ``why_no_nic``, if it
    failed); returns how many handles there were.

    EDK2 quirk (docs/edk2.md section 2.4): a boot order that does not name the NIC (OVMF with ``bootindex`` on
    the disk only, many vendor "fast boot" paths) never starts the network drivers: the NIC
    carries SNP and nothing else -- no TCP4/UDP4 service binding, no IP4 Config2.
    """
    snp = _handles(efidefs.EFI_SIMPLE_NETWORK_PROTOCOL_GUID)
    if not snp:
        return 0
    say = _state["connect"] is None  # the console hears it once; later attempts are silent
    if say:
        sys.stdout.write("bitsnet: the firmware has not started networking on any NIC; connecting %d network"
                         " controller%s (ConnectController) ... " % (len(snp), "" if len(snp) == 1 else "s"))
        sys.stdout.flush()
    bs = _boot_services()
    statuses = [bs.ConnectController(handle, None, None, True) for handle in snp]
    _state["connect"] = ", ".join(sorted(set(errors.status_name(s) for s in statuses)))
    found = _nic_handles()
    if not say:
        return len(snp)
    if found:
        sys.stdout.write("ok, %d NIC%s ready\n" % (len(found), "" if len(found) == 1 else "s"))
    else:
        sys.stdout.write("failed (%s): %s\n" % (_state["connect"], _cause()[1]))
    sys.stdout.flush()
    return len(snp)


def why_no_nic():
    # type: () -> Optional[Tuple[str, str]]
    """(cause, message): why no NIC carries IP4 Config2 and TCP4, from what the firmware has now
    (call it after ``find_all()`` found none: that connected the NICs); None when a NIC is usable."""
    return None if _nic_handles() else _cause()


def _cause():
    # type: () -> Tuple[str, str]
    """The first row of ``NO_NIC_CAUSES`` whose protocols are all missing (the last row always fits)."""
    facts = {
        "snp": len(_handles(efidefs.EFI_SIMPLE_NETWORK_PROTOCOL_GUID)),
        "mnp": _handles(efidefs.EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID),
        "rng": _handles(efidefs.EFI_RNG_PROTOCOL_GUID),
        "ip4config2": _handles(efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID),
        "tcp4": _handles(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID),
        "hash2": _handles(efidefs.EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID),
        "connect": _state["connect"] or "not tried",
    }
    for cause, missing, message in NO_NIC_CAUSES:
        if not any(facts[name] for name in missing):
            return cause, message % facts
    raise AssertionError("NO_NIC_CAUSES ends with a row that always fits")


def ipv6_present():
    # type: () -> bool
    """Whether any handle carries the TCP6 service binding: one LocateHandle, nothing else
    (no ConnectController), for ``bitsnet.install()``'s has_ipv6."""
    return bool(_handles(efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID))


def find_all():
    """Every NIC that carries IP4 Config2 and the TCP4 service binding, connecting NICs if needed."""
    handles = _nic_handles()
    if not handles and connect_controllers():
        handles = _nic_handles()
    return [Nic(h) for h in handles]


def find():
    """The first NIC (see ``find_all``); error(ENETDOWN) if the firmware has none."""
    nics = find_all()
    if not nics:
        raise errors.socket_error(errno.ENETDOWN, "no usable network interface: %s" % _cause()[1])
    return nics[0]


def default_nic():
    """The NIC every endpoint uses, found once."""
    if _state["nic"] is None:
        _state["nic"] = find()
    return _state["nic"]


def reset():
    """Forget the NIC and its children (tests reboot the simulated machine between tests)."""
    _state["nic"] = None
    _state["connect"] = None
