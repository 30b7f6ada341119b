"""Models the TCP6 half of EDK2 NetworkPkg/TcpDxe: EFI_TCP6_SERVICE_BINDING_PROTOCOL and EFI_TCP6_PROTOCOL.

TcpDxe is one driver for both IP versions, and so is the model: ``Tcp6Driver`` is tcp4.Tcp4Driver
with the IPv6 address family (nic.IPV6: host AF_INET6 sockets on ::1), its own children, ledger
and ephemeral-port counter, and the two entry points whose structures differ -- Configure
(EFI_TCP6_ACCESS_POINT has no UseDefaultAddress and no SubnetMask) and GetModeData (Tcp6 config
data, EFI_IP6_MODE_DATA). Connect, Accept, Transmit, Receive, Close, Cancel, Poll, the TCB state
machine and the timers are tcp4_tcb's. The function table has no Routes slot (docs/edk2.md section 3.2).

Addresses (docs/edk2.md section 3.7): an all-zero StationAddress lets IP6 choose the source; until the NIC has a
usable address (ip6config.py: the "global" address ::1, after SLAAC or a manual address's DAD)
Configure returns EFI_NO_MAPPING and the child stays no-mapping until Configure is called again.
An explicit StationAddress must be one of the NIC's addresses. The link-local address exists at
once but the host cannot carry traffic for it: a child bound to it never sees a frame.

The machine's "global" address ::1 is also every host peer's address, so a connect to the
machine itself is recognised by its port instead (tcp4_tcb.addressed_to_self): a SYN to a port
one of the machine's own TCP6 children holds goes nowhere, as a SYN to one's own address does
on EDK2 (no loopback: neighbour discovery for it is never answered).
"""

from __future__ import print_function

import ctypes

from bitsnet import efidefs
from efisim import uefi
from efisim.firmware import FIRMWARE
from efisim.nic import IPV6, ip6_packed
from efisim.tcp4 import MAX_PACKET_SIZE, Tcp4Driver

S = uefi  # status codes

IP6_MAX_PACKET_SIZE = MAX_PACKET_SIZE - 20  # a 40-byte IPv6 header instead of IPv4's 20
EFI_IP_PROTO_TCP = 6


def valid_unicast(text):
    """NetIp6IsValidUnicast, except for ::1.

    EDK2 rejects the unspecified address, multicast (ff00::/8) and the loopback ::1. The
    simulator accepts ::1: the host's loopback is its wire, and ::1 stands for the global address
    a real network would give (ip6config.py)."""
    packed = bytearray(ip6_packed(text))
    return any(packed) and packed[0] != 0xFF


class Tcp6Driver(Tcp4Driver):
    """TcpDxe's TCP6 service on one NIC (see the module docstring)."""

    SERVICE_BINDING = efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL
    PROTOCOL = efidefs.EFI_TCP6_PROTOCOL
    LEDGER_PREFIX = "tcp6"
    ETHER_TYPE = 0x86DD
    family = IPV6

    def __init__(self, machine):
        Tcp4Driver.__init__(self, machine)
        # The edk2-2015 quirks belong to MdeModulePkg's Tcp4Dxe; TCP6 has always been NetworkPkg's
        # TcpDxe, so it follows the current behaviour under both profiles.
        self.old_stack = False
        # EDK2 TcpDriverEntryPoint: mTcp6RandomPort = mTcp4RandomPort -- the same start value
        # (Tcp4Stack computes it from the seed), then a counter of its own (docs/edk2.md section 3.8).

    # ------------------------------------------------------------------ Configure
    def configure(self, child, config):
        if not config:
            # As TCP4 (docs/edk2.md section 3.3): only a configured child may be reset.
            if not child.configured:
                return S.EFI_ACCESS_DENIED
            self.unconfigure(child)
            return S.EFI_SUCCESS
        data = config.contents
        ap = data.AccessPoint
        station, remote = IPV6.text(ap.StationAddress), IPV6.text(ap.RemoteAddress)
        # Tcp6Configure (docs/edk2.md section 3.3): addresses zero or valid unicast; active needs address and port.
        if remote != IPV6.any and not valid_unicast(remote):
            return S.EFI_INVALID_PARAMETER
        if station != IPV6.any and not valid_unicast(station):
            return S.EFI_INVALID_PARAMETER
        if ap.ActiveFlag and (ap.RemotePort == 0 or remote == IPV6.any):
            return S.EFI_INVALID_PARAMETER
        status, option = self.control_option(data)
        if status != S.EFI_SUCCESS:
            return status
        if child.configured:
            return S.EFI_ACCESS_DENIED
        ip6 = self.nic.ip6
        if station == IPV6.any:
            chosen = ip6.usable()
            if chosen is None:
                # Facts 3.7: no usable source address yet (DAD/SLAAC not finished) -> EFI_NO_MAPPING;
                # the child is "no-mapping" until Configure is called again. Unlike IP4, IP6
                # starts nothing here: the policy stays as it is.
                child.no_mapping = True
                return S.EFI_NO_MAPPING
            station = chosen  # reported by GetModeData, as TCP4 reports the default address
        elif not ip6.has(station):
            return S.EFI_INVALID_PARAMETER  # Ip6 Configure: not one of the interface's addresses
        return self.apply_config(child, option, bool(ap.ActiveFlag), (station, "0.0.0.0", ap.StationPort),
                                 (remote, ap.RemotePort), False, (data.TrafficClass, data.HopLimit), [])

    def route(self, child, destination):
        """Every destination is on-link for IP6 here (no prefix is routed through a gateway);
        whether anything answers is the wire's business (nic.IPV6.reachable)."""
        return destination

    # ------------------------------------------------------------------ GetModeData
    def fill_config(self, child, data):
        """EFI_TCP6_CONFIG_DATA as GetModeData reports it (ControlOption aside)."""
        data.TrafficClass, data.HopLimit = child.tos, child.ttl
        ap = data.AccessPoint
        ap.StationAddress = IPV6.struct(child.station)
        ap.StationPort = child.port
        ap.RemoteAddress = IPV6.struct(child.remote)
        ap.RemotePort = child.rport
        ap.ActiveFlag = child.state != Listen

    def fill_ip_mode(self, child, mode):
        fill_ip6_mode(self.nic, mode, child.configured, child.no_mapping, EFI_IP_PROTO_TCP,
                      child.station, child.remote if child.active else IPV6.any, (child.tos, child.ttl))


def fill_ip6_mode(nic, mode, configured, no_mapping, protocol, station, destination, ip_params):
    """EFI_IP6_MODE_DATA of a TCP6/UDP6 child's IP6 instance. Unlike IP4's, its tables are pool
    allocations the caller must FreePool (docs/edk2.md section 3.3): AddressList when the interface has
    addresses; the other tables are left empty (NULL)."""
    ctypes.memset(ctypes.addressof(mode), 0, ctypes.sizeof(mode))
    mode.IsStarted = configured or no_mapping
    mode.MaxPacketSize = IP6_MAX_PACKET_SIZE
    mode.IsConfigured = configured
    if not mode.IsStarted:
        return
    cfg = mode.ConfigData
    cfg.DefaultProtocol = protocol
    cfg.AcceptIcmpErrors = True
    cfg.StationAddress = IPV6.struct(station)
    cfg.DestinationAddress = IPV6.struct(destination)
    cfg.TrafficClass, cfg.HopLimit = ip_params
    cfg.ReceiveTimeout = 0xFFFFFFFF
    addresses = list(nic.ip6.addresses)
    if addresses:
        size = ctypes.sizeof(efidefs.EFI_IP6_ADDRESS_INFO) * len(addresses)
        pool = FIRMWARE.allocate(size)
        table = (efidefs.EFI_IP6_ADDRESS_INFO * len(addresses)).from_address(pool)
        for entry, (address, prefix) in zip(table, addresses):
            entry.Address = IPV6.struct(address)
            entry.PrefixLength = prefix
        mode.AddressCount = len(addresses)
        mode.AddressList = ctypes.cast(pool, ctypes.POINTER(efidefs.EFI_IP6_ADDRESS_INFO))


Listen = efidefs.Tcp6StateListen


def install(machine):
    """Install EFI_TCP6_SERVICE_BINDING_PROTOCOL on the NIC handle; returns the driver."""
    return Tcp6Driver(machine)
