"""Simulated DnsDxe, IPv6 half: EFI_DNS6_PROTOCOL Configure and HostNameToIp (AAAA) against a server on [::1].

Raw EFI only; the behaviour is docs/edk2.md section 6 ("DNS6 mirrors DNS4"): results allocated
from pool for the caller to free, only the first server used, EFI_NOT_FOUND for NXDOMAIN.
"""

from __future__ import print_function

import ctypes
import socket
import struct
import threading
from ctypes import byref

import efi
import pytest

import conftest
import efiraw
import efiraw6 as r6
from bitsnet import efidefs

S = efi
DNS_PORT = conftest.port(8)  # this process's slot: parallel CI lanes share the one ::1
ANSWERS = {"six.test": ["2001:db8::6", "::1"]}
pytestmark = pytest.mark.machine(static=True, ipv6_policy="automatic", ipv6_delay=0.1,
                                 ipv6_dns_servers=["[::1]:%d" % DNS_PORT])


class _AaaaServer(object):
    """Answers AAAA queries from ANSWERS, NXDOMAIN for other names; counts the queries."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        self.sock.bind(("::1", DNS_PORT))
        self.sock.settimeout(0.1)
        self.queries = []
        self.stop = False
        self.thread = threading.Thread(target=self._run)
        self.thread.daemon = True
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                packet, client = self.sock.recvfrom(512)
            except socket.timeout:
                continue
            except (OSError, IOError):
                return
            ident = struct.unpack("!H", packet[:2])[0]
            labels, offset = [], 12
            while bytearray(packet[offset:offset + 1])[0]:
                n = bytearray(packet[offset:offset + 1])[0]
                labels.append(packet[offset + 1:offset + 1 + n].decode("ascii"))
                offset += n + 1
            question = packet[12:offset + 5]
            qtype = struct.unpack("!H", packet[offset + 1:offset + 3])[0]
            name = ".".join(labels)
            self.queries.append((name, qtype))
            found = ANSWERS.get(name, []) if qtype == 28 else []
            flags = 0x8180 if name in ANSWERS else 0x8183  # NXDOMAIN for unknown names
            reply = struct.pack("!HHHHHH", ident, flags, 1, len(found), 0, 0) + question
            for address in found:
                reply += struct.pack("!HHHIH", 0xC00C, 28, 1, 300, 16) + socket.inet_pton(socket.AF_INET6, address)
            self.sock.sendto(reply, client)

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def server():
    peer = _AaaaServer()
    yield peer
    peer.close()


class Dns6(object):
    def __init__(self):
        self.sb = r6.service(efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID, efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL)
        child = efi.EFI_HANDLE()
        efi.check_status(self.sb.CreateChild(byref(self.sb), byref(child)))
        self.handle = child.value
        self.proto = efidefs.EFI_DNS6_PROTOCOL.from_handle(self.handle)

    def configure(self, servers=("::1",), cache=False, station=""):
        cfg = efidefs.EFI_DNS6_CONFIG_DATA()
        cfg.Protocol = 17
        cfg.EnableDnsCache = cache
        cfg.StationIp = r6.ip6(station)
        cfg.RetryInterval = 2
        table = (efidefs.EFI_IPv6_ADDRESS * max(len(servers), 1))(*[r6.ip6(s) for s in servers])
        if servers:
            cfg.DnsServerCount = len(servers)
            cfg.DnsServerList = ctypes.cast(table, ctypes.POINTER(efidefs.EFI_IPv6_ADDRESS))
        return self.proto.Configure(byref(self.proto), byref(cfg))

    def resolve(self, name):
        """(status, [addresses]) of HostNameToIp, polling until the token completes."""
        tok = efidefs.EFI_DNS6_COMPLETION_TOKEN()
        tok.Status = S.EFI_NOT_READY  # no event: EDK2 lets the caller poll Status (docs/edk2.md section 6.2)
        chars = (ctypes.c_uint16 * (len(name) + 1))(*([ord(c) for c in name] + [0]))  # CHAR16
        status = self.proto.HostNameToIp(byref(self.proto), chars, byref(tok))
        if status != S.EFI_SUCCESS:
            return status, []
        deadline = efiraw._clock() + 5
        while tok.Status == S.EFI_NOT_READY and efiraw._clock() < deadline:
            self.proto.Poll(byref(self.proto))
        if tok.Status != S.EFI_SUCCESS:
            return tok.Status, []
        h2a = tok.RspData.H2AData.contents
        found = [r6.ip6_text(h2a.IpList[i]) for i in range(h2a.IpCount)]
        bs = efiraw.boot_services()
        # Both allocations are the caller's to free (docs/edk2.md section 6.2); the ledger checks it.
        assert bs.FreePool(ctypes.cast(h2a.IpList, ctypes.c_void_p).value) == S.EFI_SUCCESS
        assert bs.FreePool(ctypes.cast(tok.RspData.H2AData, ctypes.c_void_p).value) == S.EFI_SUCCESS
        return tok.Status, found

    def destroy(self):
        return self.sb.DestroyChild(byref(self.sb), self.handle)


def test_host_name_to_ip_asks_for_aaaa_and_returns_ipv6_addresses(machine, server):
    assert r6.Ip6Config().wait_for("::1")
    dns = Dns6()
    assert dns.configure() == S.EFI_SUCCESS
    status, found = dns.resolve(u"six.test")
    assert status == S.EFI_SUCCESS and found == ["2001:db8::6", "::1"]
    assert server.queries == [("six.test", 28)]
    status, found = dns.resolve(u"nowhere.test")
    assert status == S.EFI_NOT_FOUND and found == []  # NXDOMAIN (docs/edk2.md section 6.2)
    assert dns.destroy() == S.EFI_SUCCESS


def test_configure_checks_and_the_servers_from_the_router(machine, server):
    dns = Dns6()
    cfg = efidefs.EFI_DNS6_CONFIG_DATA(Protocol=6)
    assert dns.proto.Configure(byref(dns.proto), byref(cfg)) == S.EFI_UNSUPPORTED  # only UDP
    cfg = efidefs.EFI_DNS6_CONFIG_DATA(Protocol=17, DnsServerCount=1)
    assert dns.proto.Configure(byref(dns.proto), byref(cfg)) == S.EFI_INVALID_PARAMETER  # count without list
    # No server given: DnsDxe asks DHCPv6 (here: the router of the simulated link) itself.
    assert dns.configure(servers=()) == S.EFI_SUCCESS
    assert dns.configure(servers=("2001:db8::53",)) == S.EFI_ALREADY_STARTED  # another server
    status, found = dns.resolve(u"six.test")
    assert status == S.EFI_SUCCESS and "::1" in found
    mode = efidefs.EFI_DNS6_MODE_DATA()
    assert dns.proto.GetModeData(byref(dns.proto), byref(mode)) == S.EFI_SUCCESS
    assert r6.ip6_text(mode.DnsConfigData.StationIp) == "::1"
    assert [r6.ip6_text(mode.DnsServerList[i]) for i in range(mode.DnsServerCount)] == ["::1"]
    bs = efiraw.boot_services()
    for pointer in (mode.DnsServerList, mode.DnsCacheList):  # the caller frees what GetModeData allocated
        assert bs.FreePool(ctypes.cast(pointer, ctypes.c_void_p).value) == S.EFI_SUCCESS
    assert dns.destroy() == S.EFI_SUCCESS
