"""Models the IPv6 half of EDK2 NetworkPkg/DnsDxe: EFI_DNS6_SERVICE_BINDING_PROTOCOL and EFI_DNS6_PROTOCOL.

DnsDxe serves both IP versions with one engine, and so does the model: ``Dns6Driver`` is
dns4.Dns4Driver with the IPv6 address family (a host AF_INET6 socket on ::1), AAAA queries in
HostNameToIp, EFI_IPv6_ADDRESS results (DNS6_HOST_TO_ADDR_DATA, cache entries, mode data), its
own children, cache and ledger -- and its own Configure, because EFI_DNS6_CONFIG_DATA differs
(docs/edk2.md section 6.1: no UseDefaultSetting and no SubnetMask, a UINT32 DnsServerCount):

* DnsServerCount and DnsServerList must agree; Protocol must be 17 (EFI_UNSUPPORTED); a
  StationIp must be :: or a valid unicast address. Only DnsServerList[0] is used (docs/edk2.md section 6.2).
* DnsServerCount 0: EDK2 runs a blocking DHCPv6 information request inside Configure (docs/edk2.md section 6.2,
  "DNS6 mirrors DNS4"). Here the router of ip6config.py answers after ``ipv6_delay`` (at most the
  5 s EDK2 waits) with MachineConfig.ipv6_dns_servers -- EFI_NOT_FOUND if it offers none,
  EFI_TIMEOUT after 5 s when there is no router (``ipv6_delay=None``).
* StationIp ::: the UDP6 child needs a usable address; while there is none Configure polls for it
  up to 5 s (Dns6GetMapping) and then fails with EFI_NO_MAPPING.
* A second Configure with another server, port or station is EFI_ALREADY_STARTED.
"""

from __future__ import print_function

from bitsnet import efidefs
from efisim import uefi
from efisim.dns4 import DNS_PROTOCOL_UDP, DNS_TIME_TO_GETMAP, Dns4Driver
from efisim.firmware import pointer_address
from efisim.firmware import FIRMWARE, _now
from efisim.nic import IPV6
from efisim.tcp6 import valid_unicast

S = uefi

DNS_TYPE_AAAA = 28


class Dns6Driver(Dns4Driver):
    """DnsDxe (IPv6 half) on one NIC (see the module docstring)."""

    SERVICE_BINDING = efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL
    PROTOCOL = efidefs.EFI_DNS6_PROTOCOL
    CONFIG_DATA = efidefs.EFI_DNS6_CONFIG_DATA
    CACHE_ENTRY = efidefs.EFI_DNS6_CACHE_ENTRY
    ADDRESS = efidefs.EFI_IPv6_ADDRESS
    LEDGER_PREFIX = "dns6"
    QTYPE_ADDRESS = DNS_TYPE_AAAA
    family = IPV6

    def configure(self, child, config):
        if config:
            cfg = config.contents
            count, servers = cfg.DnsServerCount, pointer_address(cfg.DnsServerList)
            if bool(count) != bool(servers):
                return S.EFI_INVALID_PARAMETER
            if cfg.Protocol != DNS_PROTOCOL_UDP:
                return S.EFI_UNSUPPORTED
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            if not config:
                self.reset(child)
                return S.EFI_SUCCESS
            station = IPV6.text(cfg.StationIp)
            if station != IPV6.any and not valid_unicast(station):
                return S.EFI_INVALID_PARAMETER
            listed = [IPV6.text(a) for a in (efidefs.EFI_IPv6_ADDRESS * count).from_address(servers)] \
                if count else []
        if not listed:
            status, offered = self.dhcp6_dns_servers()
            if status != S.EFI_SUCCESS:
                return status
            server = offered[0]
        else:
            server = listed[0]  # EDK2 (docs/edk2.md section 6.2): only the first server is ever used
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            if child.configured:
                # Dns6ConfigUdp on a configured UDP6 child: Udp6IsReconfigurable decides.
                same = (server == child.server and cfg.LocalPort == child.port and
                        station in (IPV6.any, child.station))
                if not same:
                    return S.EFI_ALREADY_STARTED
                self.store_config(child, cfg, listed)
                return S.EFI_SUCCESS
        if station == IPV6.any:
            # UDP6 says EFI_NO_MAPPING without a usable address (docs/edk2.md section 3.7); Dns6GetMapping polls
            # up to 5 s for one. IP6 starts nothing meanwhile (see ip6config.py).
            deadline = _now() + DNS_TIME_TO_GETMAP
            while self.nic.ip6.usable() is None and _now() < deadline:
                FIRMWARE.sleep(0.02)
            station = self.nic.ip6.usable()
            if station is None:
                return S.EFI_NO_MAPPING
        elif not self.nic.ip6.has(station):
            return S.EFI_INVALID_PARAMETER  # UDP6: not one of the interface's addresses
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            status = self.open_socket(child, station, cfg.LocalPort)
            if status != S.EFI_SUCCESS:
                return status
            child.server, child.station = server, station
            self.store_config(child, cfg, listed)
            child.config.StationIp = IPV6.struct(station)
            if server not in self.server_list:
                self.server_list.append(server)  # AddDns6ServerIp
            child.configured = True
            return S.EFI_SUCCESS

    def dhcp6_dns_servers(self):
        """GetDns6ServerFromDhcp6, blocking: (status, [server, ...])."""
        delay = self.machine.config.ipv6_delay
        if delay is None:
            FIRMWARE.sleep(DNS_TIME_TO_GETMAP)
            return S.EFI_TIMEOUT, []
        FIRMWARE.sleep(min(float(delay), DNS_TIME_TO_GETMAP))
        driver = self.machine.drivers.get("ip6config")
        offered = list(driver.advertised_dns) if driver is not None else []
        if not offered:
            return S.EFI_NOT_FOUND, []
        return S.EFI_SUCCESS, offered


def install(machine):
    """Install EFI_DNS6_SERVICE_BINDING_PROTOCOL on the NIC handle; returns the driver."""
    return Dns6Driver(machine)
