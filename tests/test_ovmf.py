"""tools/ovmf.py (the firmware catalogue) and the machine options of tools/qemu_vm.py's command line,
without booting anything: where the archive address comes from, how a spec resolves, what QEMU gets.
The boots on every generation are tests/test_fwmatrix.py."""

from __future__ import print_function

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bitsrun  # noqa: E402
import ovmf  # noqa: E402
import qemu_vm  # noqa: E402

MIRROR = "http://mirror.invalid/debian"


def _write(path, text):
    with open(str(path), "w") as handle:
        handle.write(text)
    return str(path)


def test_catalogue_names_and_needs():
    assert ovmf.NAMES == ["2020.11", "2022.11", "2025.02", "2026.08"]
    assert [g.suite for g in ovmf.GENERATIONS] == ["bullseye", "bookworm", "trixie", "sid"]
    assert ovmf.BY_NAME["2026.08"].package == "ovmf-generic"  # sid's ovmf is an empty transitional package
    assert [g.name for g in ovmf.GENERATIONS if g.needs_rng] == ["2025.02", "2026.08"]
    assert [g.name for g in ovmf.GENERATIONS if not g.has_tcp6] == ["2020.11"]


def test_mirror_from_a_deb822_sources_file(tmp_path):
    path = _write(tmp_path / "debian.sources", (
        "Types: deb\n# a comment\nURIs: %s-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src\nURIs: http://src.invalid/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n") % (MIRROR, MIRROR))
    assert ovmf.mirror([path]) == (MIRROR, "/usr/share/keyrings/debian-archive-keyring.gpg")


def test_mirror_from_a_one_line_sources_list(tmp_path):
    path = _write(tmp_path / "sources.list", (
        "# deb http://old.invalid/debian buster main\n"
        "deb [arch=amd64 signed-by=/k.gpg] %s/ bookworm main contrib\n") % MIRROR)
    assert ovmf.apt_entries([path]) == [(MIRROR + "/", ["bookworm"], "/k.gpg")]
    assert ovmf.mirror([path]) == (MIRROR + "/", "/k.gpg")


def test_no_archive_in_the_sources_says_how_to_give_one(tmp_path, monkeypatch):
    monkeypatch.delenv(ovmf.MIRROR_ENV, raising=False)
    path = _write(tmp_path / "sources.list", "deb %s bookworm-security main\n" % MIRROR)
    with pytest.raises(ovmf.FirmwareError) as raised:
        ovmf.mirror([path])
    assert ovmf.MIRROR_ENV in str(raised.value)
    monkeypatch.setenv(ovmf.MIRROR_ENV, MIRROR)
    assert ovmf.mirror([path]) == (MIRROR, None)


def test_apt_options_keep_the_machine_s_apt_untouched(tmp_path):
    options = ovmf._apt_options(str(tmp_path))
    values = dict(o.split("=", 1) for o in options if o != "-o")
    for key in ("Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State::Lists", "Dir::State::status",
                "Dir::Cache", "Dir::Etc::Preferences", "Dir::Etc::PreferencesParts"):
        assert values[key].startswith(str(tmp_path)), key


def test_resolve_a_pair_of_files_and_errors(tmp_path):
    code, vars_template = _write(tmp_path / "C.fd", "c"), _write(tmp_path / "V.fd", "v")
    firmware = ovmf.resolve("%s,%s" % (code, vars_template))
    assert (firmware.code, firmware.vars, firmware.origin, firmware.name) == (code, vars_template, "user", None)
    with pytest.raises(ovmf.FirmwareError):
        ovmf.resolve("%s,%s" % (code, tmp_path / "missing.fd"))
    with pytest.raises(ovmf.FirmwareError) as raised:
        ovmf.resolve("2019.02")
    assert "2020.11" in str(raised.value)
    assert ovmf.resolve(None).origin == "system" and ovmf.resolve(None).code == qemu_vm.OVMF_CODE


def test_resolve_a_cached_generation_without_fetching(tmp_path, monkeypatch):
    monkeypatch.setattr(ovmf, "CACHE", str(tmp_path))
    monkeypatch.setattr(ovmf, "system_version", lambda: "2022.11-6")
    with pytest.raises(ovmf.FirmwareError) as raised:
        ovmf.resolve("2020.11", install=False)
    assert "tools/ovmf.py 2020.11" in str(raised.value)
    folder = tmp_path / "2020.11" / "usr" / "share" / "OVMF"
    os.makedirs(str(folder))
    _write(folder / ovmf.CODE_NAME, "c")
    _write(folder / ovmf.VARS_NAME, "v")
    _write(tmp_path / "2020.11" / "VERSION", "2020.11-2+deb11u2\n")
    firmware = ovmf.resolve("2020.11", install=False)
    assert (firmware.version, firmware.origin, firmware.generation.suite) == ("2020.11-2+deb11u2", "cache", "bullseye")
    assert firmware.code == str(folder / ovmf.CODE_NAME)


def test_qemu_command_takes_firmware_nic_and_rng(tmp_path):
    firmware = ovmf.Firmware(str(tmp_path / "C.fd"), str(tmp_path / "V.fd"))
    command = qemu_vm.qemu_command("disk.img", "vars.fd", firmware=firmware, nic="e1000", rng=True)
    text = " ".join(command)
    assert "readonly=on,file=%s" % firmware.code in text
    assert "-device e1000,netdev=n0,bootindex=2" in text
    assert command[-2:] == ["-device", "virtio-rng-pci"]
    plain = " ".join(qemu_vm.qemu_command("disk.img", "vars.fd"))
    assert "virtio-net-pci,netdev=n0,bootindex=2" in plain and "rng" not in plain
    assert "-device rtl8139,netdev=n0" in " ".join(qemu_vm.qemu_command("d", "v", nic="rtl8139"))
    assert "-device virtio-net-pci,romfile=,netdev=n0" in " ".join(qemu_vm.qemu_command("d", "v", nic="virtio-net-dxe"))
    with pytest.raises(ValueError):
        qemu_vm.qemu_command("d", "v", nic="ne2k")


def test_fresh_vars_copies_the_firmware_s_template(tmp_path):
    template = _write(tmp_path / "V.fd", "template")
    work = tmp_path / "work"
    os.makedirs(str(work))
    path = qemu_vm.fresh_vars(str(work), ovmf.Firmware(str(tmp_path / "C.fd"), template))
    with open(path) as handle:
        assert handle.read() == "template"


def test_bitsrun_command_line_passes_machine_options_through():
    options, program, rest = bitsrun._split_argv(["--ovmf", "2025.02", "--nic", "e1000", "--rng", "-c", "x", "a"])
    assert options == ["--ovmf", "2025.02", "--nic", "e1000", "--rng"] and program == ("-c", "x") and rest == ["a"]
    with pytest.raises(bitsrun.ImageError) as raised:  # before anything is looked for or booted
        bitsrun.run(code="pass", nic="ne2k")
    assert "virtio-net, e1000, rtl8139, virtio-net-dxe" in str(raised.value)


# --- CI on a fresh machine: the BITS build's Debian packages (tools/bits_build.py) -------------------
def test_bits_build_installs_the_packages_of_missing_tools(monkeypatch):
    import bits_build
    installed = set(["gcc", "make", "objcopy"])
    calls = []

    def which(name):
        return "/usr/bin/" + name if name in installed or name not in dict(bits_build.BUILD_TOOLS) else None

    def apt_install(packages, tool="qemu_vm"):
        calls.append(list(packages))
        installed.update(t for t, p in bits_build.BUILD_TOOLS if p in packages)
        return 0
    monkeypatch.setattr(bits_build, "_which", which)
    monkeypatch.setattr(bits_build, "find_python2", lambda: "/usr/bin/python2.7")
    monkeypatch.setattr(qemu_vm, "apt_install", apt_install)
    with pytest.raises(bits_build.MissingDependency):  # not allowed to install: says what to install
        bits_build.ensure_dependencies(install=False)
    assert calls == []
    assert bits_build.ensure_dependencies(install=True) == "/usr/bin/python2.7"
    assert calls == [sorted(set(p for t, p in bits_build.BUILD_TOOLS if t not in ("gcc", "make", "objcopy")))]
    assert "build-essential" not in calls[0] and "bison" in calls[0]
