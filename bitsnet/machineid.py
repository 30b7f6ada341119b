"""bitsnet.machineid: who this machine is, for a lab -- SMBIOS identity and a run id.

    from bitsnet import machineid
    machineid.identity()
    # {"uuid": "4c4c4544-...", "serial": "SN-0001", "product": "Standard PC (Q35 + ICH9, 2009)",
    #  "run": "20261206T011724Z-3f9a", "machine": "4c4c4544-..."}

The SMBIOS System Information structure (type 1) carries the system UUID, the serial number and
the product name; BITS's ``smbios`` module parses the tables (``smbios.SMBIOS()``, whose
``structures`` hold that structure with ``uuid`` and the string indexes ``product_name`` and
``serial_number``, read through ``getstr``). Where a value is missing -- no ``smbios`` module (a
host, the simulator without a stand-in), no SMBIOS table, a string index 0, the UUID all zeros
("not present, settable") or all ones ("not present", SMBIOS 3.x section 7.2.1) -- it is
``UNKNOWN``. ``machine`` is the best single name: the UUID, else the serial number, else the
product, else ``UNKNOWN``; ``bitsnet.netconsole``'s syslog mode uses it as HOSTNAME.

The run id names one boot: the real-time clock in UTC ("YYYYMMDDTHHMMSSZ") and 16 random bits
(``bitsnet.entropy``: two machines started in the same second differ), made once per boot and
the same for every later call, so all of a boot's uploads share it; ``set_run`` replaces it
(a plan that names its own run).

Nothing here raises: a parser that fails gives ``UNKNOWN`` for what it could not read.
"""

from __future__ import absolute_import

import binascii
import sys

UNKNOWN = "unknown"
_ABSENT_UUIDS = ("00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff")
_state = {"run": None, "smbios": None}  # type: dict


def _text(value):
    """A native str (on 2.7 a byte string, as BITS's smbios gives and its console wants), or None."""
    if value is None:
        return None
    if isinstance(value, bytes) and sys.version_info[0] > 2:
        value = value.decode("utf-8", "replace")
    elif not isinstance(value, (bytes, str)):
        value = value.encode("utf-8")  # unicode on 2.7
    value = value.strip().strip("\x00").strip()
    return value or None


def _system_information():
    """BITS's SMBIOS type 1 structure, or None."""
    import smbios  # BITS's, in /boot/python
    tables = smbios.SMBIOS()
    if tables is None:
        return None
    for structure in getattr(tables, "structures", ()) or ():
        if getattr(structure, "smbios_structure_type", getattr(structure, "type", None)) == 1:
            return structure
    return None


def _smbios_values():
    """{"uuid", "serial", "product"}: text, or None where SMBIOS does not say."""
    values = {"uuid": None, "serial": None, "product": None}  # type: dict
    try:
        info = _system_information()
    except Exception:  # no smbios module here, or its parser failed
        return values
    if info is None:
        return values
    for key, field in (("serial", "serial_number"), ("product", "product_name")):
        try:
            index = getattr(info, field, 0)
            if index:
                values[key] = _text(info.getstr(index))
        except Exception:
            pass
    machine_uuid = getattr(info, "uuid", None)
    if machine_uuid is not None:
        text = str(machine_uuid).lower()  # native str on both
        values["uuid"] = None if text in _ABSENT_UUIDS else text
    return values


def _new_run():
    stamp = "run"
    try:
        import time
        stamp = "%04d%02d%02dT%02d%02d%02dZ" % tuple(time.gmtime()[:6])  # BITS: the RTC, in UTC
    except Exception:
        pass
    try:
        from bitsnet import entropy
        suffix = str(binascii.hexlify(entropy.random_bytes(2)).decode("ascii"))
    except Exception:
        suffix = "0000"
    return "%s-%s" % (stamp, suffix)


def run_id():
    """This boot's run id (made at the first call)."""
    if _state["run"] is None:
        _state["run"] = _new_run()
    return _state["run"]


def set_run(run):
    """Use ``run`` as this boot's run id from now on."""
    _state["run"] = str(run)


def identity(refresh=False):
    """{"uuid", "serial", "product", "run", "machine"} (text; ``UNKNOWN`` where not known). SMBIOS
    is read once; ``refresh`` reads it again."""
    if _state["smbios"] is None or refresh:
        _state["smbios"] = _smbios_values()
    values = _state["smbios"]
    out = dict((key, values[key] or UNKNOWN) for key in ("uuid", "serial", "product"))
    out["run"] = run_id()
    out["machine"] = values["uuid"] or values["serial"] or values["product"] or UNKNOWN
    return out

