"""The simulator's EFI_DNS4_PROTOCOL against docs/edk2.md section 6.2 (EDK2 DnsDxe),
called through ctypes as a BITS script calls it, against a real DNS server on loopback
(tests/dnspeer.py); plus the UDP4 "wire" taking port-53 traffic to that server."""

from __future__ import print_function

import ctypes
import struct
import time
from ctypes import POINTER, byref

import efi
import pytest

import conftest
import dnspeer
import efiraw
from bitsnet import efidefs as d
from efisim import machine as _machine
from test_efi_udp4 import Udp4, config_data

_clock = getattr(time, "monotonic", time.time)
WAIT = 5.0
LAB_ADDRESS = "127.0.0.1"
RECORDS = {
    "labserver.example": [("A", LAB_ADDRESS)],
    "alias.example": [("CNAME", "www.example")],
    "www.example": [("A", "127.0.0.10"), ("A", "127.0.0.11")],
    "onlycname.example": [("CNAME", "nowhere.example")],
    dnspeer.reverse_name(LAB_ADDRESS): [("PTR", "labserver.example")],
    "cut.example": [("A", "127.0.0.12"), ("A", "127.0.0.13")],
}


def bs():
    return efi.system_table.BootServices.contents


def status_name(status):
    return efi.efi_status_decode.get(status, hex(status) if status is not None else "None")


@pytest.fixture
def lab():
    with dnspeer.DnsPeer(RECORDS, silent=["silent.example"], servfail=["broken.example"],
                         truncated=["cut.example"]) as peer:
        yield peer


@pytest.fixture
def machine(request, lab):
    """Like conftest's machine, with the lab's DNS server handed out by DHCP (its real port)."""
    marker = request.node.get_closest_marker("machine")
    options = dict(static=True, dns_servers=[lab.address])
    options.update(marker.kwargs if marker else {})
    booted = _machine.boot(conftest.machine_config(**options))
    yield booted
    crashes = list(booted.firmware.crashes)
    ledger = booted.firmware.ledger()
    booted.shutdown()
    assert not crashes, "firmware faults:\n" + "\n".join(crashes)
    leaked = dict((k, v) for k, v in ledger.items() if v)
    assert not leaked, "firmware still holds %r after the test" % leaked


def dns_config(servers=(LAB_ADDRESS,), use_default=True, cache=False, retry_count=1, retry_interval=2,
               protocol=17, count=None, station="0.0.0.0", mask="0.0.0.0"):
    cfg = d.EFI_DNS4_CONFIG_DATA()
    table = (d.EFI_IPv4_ADDRESS * max(len(servers), 1))(*[d.ipv4(s) for s in servers])
    cfg.DnsServerListCount = len(servers) if count is None else count
    if servers:
        cfg.DnsServerList = ctypes.cast(table, POINTER(d.EFI_IPv4_ADDRESS))
    cfg._table = table
    cfg.UseDefaultSetting = use_default
    cfg.EnableDnsCache = cache
    cfg.Protocol = protocol
    cfg.StationIp = d.ipv4(station)
    cfg.SubnetMask = d.ipv4(mask)
    cfg.RetryCount = retry_count
    cfg.RetryInterval = retry_interval
    return cfg


def char16(text):
    return (ctypes.c_uint16 * (len(text) + 1))(*([ord(c) for c in text] + [0]))


class Token(object):
    def __init__(self):
        self.token = d.EFI_DNS4_COMPLETION_TOKEN()
        event = efi.EFI_EVENT()
        efi.check_status(bs().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(event)))
        self.event = event.value
        self.token.Event = self.event
        self.signalled = False

    def check(self):
        if not self.signalled and bs().CheckEvent(self.event) == efi.EFI_SUCCESS:
            self.signalled = True
        return self.signalled

    def wait(self, child, timeout=WAIT):
        deadline = _clock() + timeout
        while not self.check():
            if _clock() > deadline:
                return None
            child.poll()
            time.sleep(0.002)
        return self.token.Status

    def close(self):
        efi.check_status(bs().CloseEvent(self.event))


class Dns4(efiraw.Child):
    """One DNS4 child made with CreateChild, and its protocol."""

    SERVICE_BINDING = d.EFI_DNS4_SERVICE_BINDING_PROTOCOL
    PROTOCOL = d.EFI_DNS4_PROTOCOL

    def __init__(self):
        efiraw.Child.__init__(self)
        self.keep = []

    def poll(self):
        return self._call("Poll")

    def host_name_to_ip(self, name):
        tok = Token()
        self.tokens.append(tok)
        text = char16(name)
        self.keep.append(text)  # EDK2 keeps the HostName pointer until completion
        return self._call("HostNameToIp", text, byref(tok.token)), tok

    def general_lookup(self, qname, qtype, qclass=1):
        tok = Token()
        self.tokens.append(tok)
        return self._call("GeneralLookUp", qname, qtype, qclass, byref(tok.token)), tok

    def cancel(self, tok=None):
        return self._call("Cancel", byref(tok.token) if tok is not None else None)

    def resolve(self, name):
        """(status, [addresses]) of HostNameToIp(name); frees the driver's allocations."""
        status, tok = self.host_name_to_ip(name)
        assert status == efi.EFI_SUCCESS, status_name(status)
        result = tok.wait(self)
        if result != efi.EFI_SUCCESS:
            return result, []
        return result, free_h2a(tok.token.RspData.H2AData)

    def destroy(self):
        status = self.sb.DestroyChild(byref(self.sb), self.handle)
        for tok in self.tokens:
            tok.close()
        return status


def free_pool(pointer):
    efi.check_status(bs().FreePool(ctypes.cast(pointer, ctypes.c_void_p)))


def free_h2a(h2a):
    """The addresses of a DNS_HOST_TO_ADDR_DATA, then FreePool of IpList and the structure."""
    data = h2a.contents
    addresses = [d.ipv4_text(data.IpList[i]) for i in range(data.IpCount)]
    free_pool(data.IpList)
    free_pool(h2a)
    return addresses


@pytest.fixture
def children(machine):
    made = []

    def make():
        child = Dns4()
        made.append(child)
        return child
    yield make
    for child in made:
        child.destroy()


def test_absent_without_dns4(lab):
    booted = _machine.boot(conftest.machine_config(static=True, dns4=False))
    try:
        assert not booted.firmware.handles_by_protocol(d.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID)
        assert booted.firmware.handles_by_protocol(d.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID)
    finally:
        booted.shutdown()


def test_configure_rules(children):
    child = children()
    assert child.configure(dns_config(count=0)) == efi.EFI_INVALID_PARAMETER  # list without count
    assert child.configure(dns_config(servers=(), count=1)) == efi.EFI_INVALID_PARAMETER
    assert child.configure(dns_config(protocol=6)) == efi.EFI_UNSUPPORTED  # only UDP
    assert child.configure(dns_config(use_default=False)) == efi.EFI_INVALID_PARAMETER  # StationIp 0
    assert child.configure(dns_config(use_default=False, station=conftest.STATION, mask="255.0.0.0")) == \
        efi.EFI_SUCCESS
    # A second Configure goes through UDP4's reconfigure check (docs/edk2.md section 6.2).
    assert child.configure(dns_config(servers=("127.0.0.3",))) == efi.EFI_ALREADY_STARTED
    assert child.configure(None) == efi.EFI_SUCCESS
    assert child.configure(dns_config(servers=("127.0.0.3",))) == efi.EFI_SUCCESS


def test_host_name_to_ip_before_configure(children):
    child = children()
    status, tok = child.host_name_to_ip("labserver.example")
    assert status == efi.EFI_NOT_STARTED
    assert tok.token.Status == efi.EFI_NOT_READY  # written even so
    assert child.poll() == efi.EFI_NOT_STARTED
    assert child.cancel() == efi.EFI_NOT_STARTED


def test_lookup_allocates_results_the_caller_frees(machine, children):
    child = children()
    assert child.configure(dns_config(retry_interval=0)) == efi.EFI_SUCCESS
    pool = machine.firmware.ledger()["pool"]
    status, tok = child.host_name_to_ip("labserver.example")
    assert status == efi.EFI_SUCCESS
    # EDK2 quirk (DnsDxe): the token's RetryCount/RetryInterval are outputs; interval >= 2 s.
    assert tok.token.RetryCount == 0 and tok.token.RetryInterval == 2
    assert tok.wait(child) == efi.EFI_SUCCESS
    assert machine.firmware.ledger()["pool"] == pool + 2  # H2AData and IpList
    assert free_h2a(tok.token.RspData.H2AData) == [LAB_ADDRESS]
    assert machine.firmware.ledger()["pool"] == pool


def test_cname_chain_and_errors(children, lab):
    child = children()
    assert child.configure(dns_config()) == efi.EFI_SUCCESS
    assert child.resolve("alias.example") == (efi.EFI_SUCCESS, ["127.0.0.10", "127.0.0.11"])
    assert child.resolve("nosuch.example")[0] == efi.EFI_NOT_FOUND  # NXDOMAIN
    assert child.resolve("onlycname.example")[0] == efi.EFI_NOT_FOUND  # no address at the end
    assert child.resolve("broken.example")[0] == efi.EFI_DEVICE_ERROR  # SERVFAIL
    assert child.resolve("cut.example")[0] == efi.EFI_DEVICE_ERROR  # truncated mid-record
    assert ("labserver.example", 1) not in lab.queries


def test_timeout_after_retries(children, lab):
    child = children()
    assert child.configure(dns_config(retry_count=1, retry_interval=1)) == efi.EFI_SUCCESS
    start = _clock()
    status, tok = child.host_name_to_ip("silent.example")
    assert status == efi.EFI_SUCCESS
    # RetryInterval 1 is raised to 2 s; one retransmission: EFI_TIMEOUT after 2 x 2 s.
    assert tok.wait(child, timeout=10) == efi.EFI_TIMEOUT
    assert 3.8 <= _clock() - start < 6.0
    assert tok.token.RetryCount == 1
    assert lab.queries.count(("silent.example", 1)) == 2


def test_cache_answers_synchronously(machine, children, lab):
    child = children()
    assert child.configure(dns_config(cache=True)) == efi.EFI_SUCCESS
    assert child.resolve("labserver.example") == (efi.EFI_SUCCESS, [LAB_ADDRESS])
    asked = len(lab.queries)
    status, tok = child.host_name_to_ip("labserver.example")
    assert status == efi.EFI_SUCCESS and tok.check()  # completed inside the call
    assert free_h2a(tok.token.RspData.H2AData) == [LAB_ADDRESS]
    assert len(lab.queries) == asked
    mode = d.EFI_DNS4_MODE_DATA()
    assert child._call("GetModeData", byref(mode)) == efi.EFI_SUCCESS
    assert mode.DnsCacheCount == 1 and mode.DnsServerCount == 1
    entry = mode.DnsCacheList[0]
    name = ctypes.string_at(ctypes.addressof(entry.HostName.contents), 2 * len("labserver.example") + 2)
    assert name == u"labserver.example\0".encode("utf-16-le")
    assert d.ipv4_text(entry.IpAddress.contents) == LAB_ADDRESS and 0 < entry.Timeout <= dnspeer.TTL
    assert d.ipv4_text(mode.DnsConfigData.DnsServerList[0]) == LAB_ADDRESS
    for pointer in (mode.DnsConfigData.DnsServerList, mode.DnsServerList, mode.DnsCacheList):
        free_pool(pointer)


def test_update_dns_cache(children, lab):
    child = children()
    assert child.configure(dns_config(cache=True)) == efi.EFI_SUCCESS
    name, address = char16("manual.example"), d.ipv4("127.0.0.44")
    entry = d.EFI_DNS4_CACHE_ENTRY()
    entry.HostName = ctypes.cast(name, POINTER(efi.UINT16))
    entry.IpAddress = ctypes.pointer(address)
    entry.Timeout = 0
    assert child._call("UpdateDnsCache", False, False, entry) == efi.EFI_INVALID_PARAMETER
    entry.Timeout = 60
    assert child._call("UpdateDnsCache", False, False, entry) == efi.EFI_SUCCESS
    assert child._call("UpdateDnsCache", False, False, entry) == efi.EFI_ACCESS_DENIED
    assert child._call("UpdateDnsCache", False, True, entry) == efi.EFI_SUCCESS
    assert child.resolve("manual.example") == (efi.EFI_SUCCESS, ["127.0.0.44"])
    assert ("manual.example", 1) not in lab.queries
    assert child._call("UpdateDnsCache", True, False, entry) == efi.EFI_SUCCESS
    assert child.resolve("manual.example")[0] == efi.EFI_NOT_FOUND  # asked the server now
    # EDK2 quirk (DnsDxe UpdateDns4Cache): deleting an entry that is not there adds it.
    assert child._call("UpdateDnsCache", True, False, entry) == efi.EFI_SUCCESS
    asked = len(lab.queries)
    assert child.resolve("manual.example") == (efi.EFI_SUCCESS, ["127.0.0.44"])
    assert len(lab.queries) == asked


def test_general_lookup_ptr(children):
    child = children()
    assert child.configure(dns_config()) == efi.EFI_SUCCESS
    status, tok = child.general_lookup(dnspeer.reverse_name(LAB_ADDRESS).encode("ascii"), 12)
    assert status == efi.EFI_SUCCESS
    assert tok.wait(child) == efi.EFI_SUCCESS
    data = tok.token.RspData.GLookupData.contents
    assert data.RRCount == 1
    rr = data.RRList[0]
    assert rr.QType == 12 and rr.QClass == 1 and rr.TTL == dnspeer.TTL
    # EDK2 quirk (DnsDxe): QName is the question's name in wire format.
    assert rr.QName == dnspeer.encode_name(dnspeer.reverse_name(LAB_ADDRESS))[:-1]
    assert ctypes.string_at(rr.RData, rr.DataLength) == dnspeer.encode_name("labserver.example")
    for field in (d.DNS_RESOURCE_RECORD.QName, d.DNS_RESOURCE_RECORD.RData):
        free_pool(ctypes.c_void_p.from_address(ctypes.addressof(rr) + field.offset).value)  # the raw pointer
    free_pool(data.RRList)
    free_pool(tok.token.RspData.GLookupData)


def test_ip_to_host_name_is_unsupported(children):
    # EDK2 quirk (DnsDxe): IpToHostName was never implemented.
    child = children()
    assert child.configure(dns_config()) == efi.EFI_SUCCESS
    tok = Token()
    child.tokens.append(tok)
    assert child._call("IpToHostName", d.ipv4(LAB_ADDRESS), byref(tok.token)) == efi.EFI_UNSUPPORTED


def test_cancel_and_reset_abort(children):
    child = children()
    assert child.configure(dns_config()) == efi.EFI_SUCCESS
    first, second = child.host_name_to_ip("silent.example")[1], child.host_name_to_ip("silent.example")[1]
    stranger = Token()
    child.tokens.append(stranger)
    assert child.cancel(stranger) == efi.EFI_NOT_FOUND
    assert child.cancel(first) == efi.EFI_SUCCESS
    assert first.check() and first.token.Status == efi.EFI_ABORTED
    assert child.configure(None) == efi.EFI_SUCCESS
    assert second.check() and second.token.Status == efi.EFI_ABORTED


def test_empty_server_list_asks_dhcp(children):
    # EDK2 quirk (DnsDxe, docs/edk2.md section 6.2): no server -> a blocking DHCP exchange inside Configure.
    child = children()
    start = _clock()
    assert child.configure(dns_config(servers=())) == efi.EFI_SUCCESS
    assert _clock() - start >= 0.2  # the machine's DHCP server answers after dhcp_delay
    assert child.resolve("labserver.example") == (efi.EFI_SUCCESS, [LAB_ADDRESS])


@pytest.mark.machine(static=False)
def test_use_default_setting_waits_for_dhcp(machine, children):
    child = children()
    assert child.configure(dns_config()) == efi.EFI_SUCCESS  # waited for the DHCP lease
    assert machine.drivers["ip4config2"].policy == d.Ip4Config2PolicyDhcp
    assert child.resolve("labserver.example") == (efi.EFI_SUCCESS, [LAB_ADDRESS])


def test_udp4_port_53_reaches_the_configured_dns_server(machine, lab):
    """bitsnet's own resolver sends to (server, 53): the wire takes it to the server's real port."""
    child = Udp4()
    try:
        assert child.configure(config_data(remote=LAB_ADDRESS, rport=53)) == efi.EFI_SUCCESS
        query = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + \
            dnspeer.encode_name("labserver.example") + struct.pack("!HH", 1, 1)
        child.send(query, destination=None)
        data, source, _ = child.recv()
        assert source == (LAB_ADDRESS, 53)
        assert struct.unpack("!H", data[:2])[0] == 0x1234 and data.endswith(b"\x7f\x00\x00\x01")
    finally:
        child.destroy()


def test_token_without_event_is_polled_through_status(children):
    # EDK2 signals Token.Event only when it is not NULL: a caller may poll Token.Status instead.
    child = children()
    assert child.configure(dns_config()) == efi.EFI_SUCCESS
    token, name = d.EFI_DNS4_COMPLETION_TOKEN(), char16("labserver.example")
    assert child._call("HostNameToIp", name, byref(token)) == efi.EFI_SUCCESS
    deadline = _clock() + WAIT
    while token.Status == efi.EFI_NOT_READY and _clock() < deadline:
        child.poll()
    assert token.Status == efi.EFI_SUCCESS
    assert free_h2a(token.RspData.H2AData) == [LAB_ADDRESS]


def test_only_the_first_server_is_asked(children, lab):
    # EDK2 (docs/edk2.md section 6.2): DnsServerList[0] is the session server; there is no fail-over.
    child = children()
    assert child.configure(dns_config(servers=("127.0.0.9", LAB_ADDRESS))) == efi.EFI_SUCCESS
    status, tok = child.host_name_to_ip("labserver.example")
    assert status == efi.EFI_SUCCESS
    assert tok.wait(child, timeout=0.5) is None  # nobody answers on 127.0.0.9
    assert lab.queries == []
    assert child.cancel(tok) == efi.EFI_SUCCESS and tok.token.Status == efi.EFI_ABORTED
