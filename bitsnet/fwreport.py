"""What this firmware offers bitsnet, in a few lines: the selftest's "firmware" check.

``report()``  (lines, problem). ``lines`` are what a user comparing two machines needs: the
              firmware vendor and revision (system table), EFI_RNG_PROTOCOL and its algorithms,
              the Hash2 service binding, DNS4/DNS6, TCP6/UDP6, TLS and whether it checks host
              names (EfiTlsVerifyHost), the event path bitsnet chose, the timer tick's source and
              bitsnet's own random source. ``problem`` is set when the firmware itself keeps the
              network stack from starting -- no random number generator on EDK2 since 2024
              (docs/edk2.md section 10.1) -- and is then the first thing a user must fix.

Reads only, except that it connects the NICs (as the first socket would, ``nic.find_all``)
and makes and destroys one TLS child to ask about EfiTlsVerifyHost.
"""

import ctypes

import efi

from bitsnet import efidefs, entropy, events, ipconfig, nic

VENDOR_MAX = 80  # CHAR16s read of FirmwareVendor at most

# (name, GUID) of the optional services reported as present or absent, in that order
OPTIONAL = [
    ("Hash2", efidefs.EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID),
    ("DNS4", efidefs.EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID),
    ("DNS6", efidefs.EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID),
    ("TCP6", efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID),
    ("UDP6", efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID),
]


def _present(guid):
    try:
        return bool(len(efi.locate_handles(guid)))
    except efi.EFIException:
        return False


def vendor():
    # type: () -> str
    """'EDK II, revision 0x10000, UEFI 2.7' from the system table.

    FirmwareVendor is read through its address as UINT16s: BITS declares it c_wchar_p, and a
    host's c_wchar is 4 bytes (the simulator)."""
    table = efi.system_table
    base = ctypes.addressof(table)
    address = ctypes.c_void_p.from_address(base + type(table).FirmwareVendor.offset).value
    chars = []
    if address:
        for c in (ctypes.c_uint16 * VENDOR_MAX).from_address(address):
            if not c:
                break
            chars.append(chr(c) if 32 <= c < 127 else "?")
    revision = table.Hdr.Revision
    minor = revision & 0xFFFF
    uefi = "%d.%d%s" % (revision >> 16, minor // 10, ".%d" % (minor % 10) if minor % 10 else "")
    return "%s, revision 0x%x, UEFI %s" % ("".join(chars) or "(none)", table.FirmwareRevision, uefi)


def rng():
    # type: () -> str
    algorithms = entropy.rng_algorithms()
    if algorithms is None:
        return "none"
    return "present: %s" % (", ".join(algorithms) or "no algorithms")


def tls():
    # type: () -> str
    """TLS present, and whether SetSessionData(EfiTlsVerifyHost) works (docs/tls.md section 2.4)."""
    from bitsnet import tls as tls_child
    from bitsnet import efidefs_tls as T
    if tls_child.service_handle() is None:
        return "none (HTTPS impossible)"
    try:
        child = tls_child.TlsChild()
    except tls_child.TlsFailure as failure:
        return "present, but no child: %s" % failure
    try:
        child.must_set(T.EfiTlsVerifyMethod, efi.UINT32(T.EFI_TLS_VERIFY_PEER))
        verifies = child.set_verify_host(b"localhost")
    except tls_child.TlsFailure as failure:
        return "present; EfiTlsVerifyHost: %s" % failure
    finally:
        child.destroy()
    if verifies:
        return "present, checks host names (EfiTlsVerifyHost)"
    return "present, no EfiTlsVerifyHost (before 2020): bitsnet checks host names itself"


def report():
    """(lines, problem): see the module docstring."""
    lines = ["firmware: %s" % vendor(), "RNG: %s" % rng()]
    lines.append("; ".join("%s %s" % (name, "yes" if _present(guid) else "no") for name, guid in OPTIONAL))
    lines.append("TLS: %s" % tls())
    lines.append("events: %s; timer tick: %s" % (events.mode(), ipconfig.tick_source()))
    lines.append("bitsnet's random numbers: %s" % entropy.source())
    problem = None
    if not nic.find_all():
        cause = nic.why_no_nic()
        if cause is not None and cause[0] == "no-rng":
            problem = cause[1]
    return lines, problem
