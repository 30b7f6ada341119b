"""Firmware generations on the simulator (docs/edk2.md section 10, docs/simulator.md section 3):
the RNG rule of EDK2 since 2024 and the message bitsnet gives for it, the other causes of "no
network" with their own words (nic.NO_NIC_CAUSES), 2020.11 without TCP6, and the selftest's first
check, "firmware" (bitsnet/fwreport.py), on each -- in process and through tools/efirun.py."""

from __future__ import print_function

import errno

import efi
import pytest

from bitsnet import _socket as bs
from bitsnet import efidefs, entropy, fwreport, ipconfig, nic
from efisim import machine as sim_machine
from efisim import tls as sim_tls
from test_ipconfig import SimulatedApic
from test_selftest import SUMMARY, result_of, selftest, squash
from test_socket_api import net  # noqa: F401  (the fixture)

RNG_WORDS = ("random number generator", "EFI_RNG_PROTOCOL", "CVE-2023-45236/45237", "firmware setup",
             "-device virtio-rng-pci")
NO_RNG = pytest.mark.machine(generation="2025.02")
CHECK_LINE = r"^ ?\d+ (.*?) \.+ (PASS|FAIL|SKIP) [\d.]+ s$"


def names_the_rng(text):
    return all(word in text for word in RNG_WORDS)


def present(guid):
    try:
        return list(efi.locate_handles(guid))
    except efi.EFIException as e:
        assert e.args[0] == efi.EFI_NOT_FOUND
        return []


def boot_services():
    return efi.system_table.BootServices.contents


@pytest.fixture(autouse=True)
def _forget_the_nic():
    """Tests that only look for the NIC submit no token, so conftest's teardown would not reset
    bitsnet.nic: forget the NIC (and the connect attempt) here, before the next machine boots."""
    nic.reset()
    yield
    nic.reset()


# --- the RNG rule (docs/edk2.md section 10.1) ----------------------------------------------------------
@NO_RNG
def test_rng_less_2025_firmware_has_only_snp_and_connect_finds_no_driver(machine):
    snp = present(efidefs.EFI_SIMPLE_NETWORK_PROTOCOL_GUID)
    assert snp == [machine.nic.handle]
    for guid in (efidefs.EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID, efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID,
                 efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID, efidefs.EFI_RNG_PROTOCOL_GUID):
        assert present(guid) == []
    assert boot_services().ConnectController(snp[0], None, None, True) == efi.EFI_NOT_FOUND
    assert present(efidefs.EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID)  # Hash2DxeCrypto does not need the RNG
    assert nic.why_no_nic()[0] == "no-rng"


@NO_RNG
def test_rng_less_firmware_socket_use_names_the_rng(net, capsys):  # noqa: F811
    sock = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
    try:
        with pytest.raises(bs.error) as caught:
            sock.connect(("127.0.0.1", 80))
    finally:
        sock.close()
    assert caught.value.errno == errno.ENETDOWN and names_the_rng(str(caught.value)), str(caught.value)
    with pytest.raises(bs.gaierror) as resolved:
        bs.getaddrinfo("lab.bitsnet.test", 80)
    assert names_the_rng(str(resolved.value)), str(resolved.value)
    with pytest.raises(bs.error) as configured:
        ipconfig.ensure_configured(timeout=1)
    assert configured.value.errno == errno.ENETDOWN and names_the_rng(str(configured.value))
    import bitsnet
    assert bitsnet.interfaces() == []
    # The console hears the connect attempt and its cause once, however often bitsnet looks again.
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("bitsnet: the firmware has not started networking on any NIC;")
    assert "... failed (EFI_NOT_FOUND): this firmware's network stack needs a random number generator" in out[0]


@pytest.mark.machine(generation="2025.02", rng=True)
def test_with_an_rng_the_2025_firmware_works(net):  # noqa: F811
    assert nic.why_no_nic() is None
    assert ipconfig.ensure_configured(timeout=5).address
    assert entropy.rng_algorithms() == ["SP800-90 CTR-256", "raw"]
    assert fwreport.rng() == "present: SP800-90 CTR-256, raw"


def test_without_an_rng_protocol_there_are_no_algorithms(machine):
    assert entropy.rng_algorithms() is None and fwreport.rng() == "none"


# --- every other cause keeps its own words (nic.NO_NIC_CAUSES) -----------------------------------------
def _move(machine, guid, to=None):
    """Take ``guid`` off the NIC handle (onto the handle ``to``, if given)."""
    interface = machine.firmware.handles[machine.nic.handle][guid]
    machine.firmware.uninstall_protocol(machine.nic.handle, guid)
    if to is not None:
        machine.firmware.install_protocol(to, guid, interface)


def _case(cause, words, **options):
    return pytest.param(cause, words, marks=pytest.mark.machine(**options), id=cause)


@pytest.mark.parametrize("cause, words", [
    _case("no-nic-driver", "no NIC driver: no handle carries the Simple Network Protocol", nic_connected=False),
    _case("not-connected", "the network stack did not start on the NIC: 1 Simple Network handle(s) but no"
                           " Managed Network service binding; ConnectController: EFI_NOT_FOUND",
          nic_connected=False, rng=True),
    _case("no-ipv4", "no IPv4 on the NIC: Managed Network but no IP4 Config2"),
    _case("no-hash2", "EDK2's TcpDxe since 2024 needs the Hash2 service binding", generation="2022.11"),
    _case("no-tcp4", "no TCP4 on the NIC: IPv4 is up but the firmware has no TcpDxe", generation="2025.02",
          rng=True),
    _case("apart", "IP4 Config2 and the TCP4 service binding are on different handles"),
])
def test_each_cause_of_no_network_has_its_own_words(machine, cause, words, capsys):
    if cause == "no-nic-driver":
        _move(machine, efidefs.EFI_SIMPLE_NETWORK_PROTOCOL_GUID)
    elif cause == "not-connected":
        machine.firmware.connect_hooks.clear()  # no driver wants the controller
    elif cause == "no-ipv4":
        _move(machine, efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID)
    elif cause in ("no-hash2", "no-tcp4"):
        _move(machine, efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
    else:
        _move(machine, efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID, to=machine.firmware.new_handle())
    with pytest.raises(bs.error) as caught:
        nic.find()
    assert caught.value.errno == errno.ENETDOWN
    assert nic.why_no_nic()[0] == cause
    assert words in str(caught.value) and "random number" not in str(caught.value), str(caught.value)
    out = capsys.readouterr().out  # a connect attempt (if any) names the same cause
    assert out == "" or out.rstrip("\n").endswith(nic.why_no_nic()[1]), out


# --- 2020.11: no TCP6, the 8254 tick (docs/edk2.md sections 10.3, 10.4) ---------------------------------
@pytest.mark.machine(generation="2020.11")
def test_2020_firmware_has_no_tcp6_and_says_eafnosupport(net):  # noqa: F811
    with pytest.raises(bs.error) as caught:
        bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    assert caught.value.errno == errno.EAFNOSUPPORT and "no EFI TCP6 in this firmware" in str(caught.value)
    assert not bs.has_ipv6
    assert present(efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID)
    assert not present(efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID)
    assert net.config.tick_source == "8254"
    lines, problem = fwreport.report()
    assert problem is None
    assert "Hash2 no; DNS4 yes; DNS6 no; TCP6 no; UDP6 no" in lines
    assert lines[0] == "firmware: EDK II, revision 0x10000, UEFI 2.7"


def test_an_explicit_option_beats_the_generation():
    assert sim_machine.MachineConfig(generation="2020.11", ipv6=True).ipv6 is True
    assert sim_machine.MachineConfig(generation="2020.11").ipv6 is False
    assert sim_machine.MachineConfig().generation == "2022.11"
    with pytest.raises(ValueError):
        sim_machine.MachineConfig(generation="2019.02")


# --- what the firmware check reports ------------------------------------------------------------------
@pytest.mark.machine(generation="2026.08", rng=True)
def test_the_system_table_names_the_vendor(machine):
    assert fwreport.vendor() == "Debian distribution of EDK II, revision 0x10000, UEFI 2.7"


@pytest.mark.skipif(not sim_tls.available()[0], reason="no TLS model here: %s" % (sim_tls.available()[1],))
@pytest.mark.parametrize("words", [
    pytest.param("present, checks host names (EfiTlsVerifyHost)", marks=pytest.mark.machine(tls="edk2")),
    pytest.param("present, no EfiTlsVerifyHost (before 2020)", marks=pytest.mark.machine(tls="edk2-2019")),
    pytest.param("none (HTTPS impossible)", marks=pytest.mark.machine(tls=None)),
])
def test_tls_and_its_host_name_check_are_reported(machine, words):
    from bitsnet import tls
    assert fwreport.tls().startswith(words)
    assert tls.live_children() == 0  # the probe's child is destroyed


@pytest.mark.parametrize("running, words", [
    pytest.param(False, "not the local APIC timer (stopped): the 8254 PIT or the HPET",  # OVMF 2020.11 in BITS
                 marks=pytest.mark.machine(timer=True)),
    pytest.param(False, "stopped, as is the local APIC timer (BITS's SMP start-up stops it)",  # 2022.11 on
                 marks=pytest.mark.machine(timer=False)),
    pytest.param(True, "the local APIC timer (it runs)", marks=pytest.mark.machine(timer=True)),
])
def test_tick_source_reads_the_local_apic_and_changes_nothing(machine, running, words, monkeypatch):
    apic = SimulatedApic(machine.firmware, running=running)
    monkeypatch.setattr(ipconfig, "_lapic_access", lambda: apic)
    monkeypatch.setitem(ipconfig._state, "timer_restored", False)
    assert ipconfig.tick_source().startswith(words)
    assert apic.writes == []


def test_tick_source_outside_bits_says_only_whether_it_ticks(machine):
    assert ipconfig.tick_source() == "ticks (its source is not checked outside BITS)"


# --- the selftest through tools/efirun.py ------------------------------------------------------------
def checks(lines):
    import re
    found = []
    for line in lines:
        match = re.match(CHECK_LINE, line)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def test_selftest_on_rng_less_firmware_fails_first_with_the_rng():
    status, lines, err = selftest("--generation", "2025.02", "-m", "bitsnet.selftest", "--timeout", "3")
    report = "\n".join(lines) + "\n" + err
    assert status == 1 and SUMMARY.match(lines[-1]), report
    failed = [title for title, result in checks(lines) if result == "FAIL"]
    assert failed and failed[0] == "firmware" and checks(lines)[0] == ("firmware", "FAIL"), report
    detail = result_of(lines, "firmware")[1]
    assert all(squash(word) in squash(detail) for word in RNG_WORDS), report
    assert "rng:none" in squash(detail) and "hash2yes" in squash(detail), report


def test_selftest_with_an_rng_reports_it_and_passes():
    status, lines, err = selftest("--generation", "2025.02", "--rng", "-m", "bitsnet.selftest", "--timeout", "5")
    report = "\n".join(lines) + "\n" + err
    assert status == 0, report
    result, detail = result_of(lines, "firmware")
    assert result == "PASS" and "rng:present:sp800-90ctr-256,raw" in squash(detail), report
    assert "firmware:debiandistributionofedkii,revision0x10000,uefi2.7" in squash(detail), report
    assert "dns4yes;dns6yes;tcp6yes;udp6yes" in squash(detail), report


def test_selftest_on_2020_firmware_skips_ipv6_with_the_reason():
    status, lines, err = selftest("--generation", "2020.11", "--lab", "-m", "bitsnet.selftest", "--timeout", "5")
    report = "\n".join(lines) + "\n" + err
    assert status == 0, report
    assert result_of(lines, "firmware")[0] == "PASS", report
    result, detail = result_of(lines, "IPv6 address")
    assert result == "SKIP" and "notcp6" in squash(detail) and "eafnosupport" in squash(detail), report
    result, detail = result_of(lines, "TCP echo over IPv6")
    assert result == "SKIP", report
    assert not [title for title, result in checks(lines) if result == "FAIL"], report
