"""What EDK2's IP4 Config2 and IP6 Config share: data-notify registration, SetData's front end.

Both protocols (docs/edk2.md sections 5.1-5.3) keep, per data item, a status (EFI_NOT_FOUND while unset,
EFI_NOT_READY while an asynchronous set runs) and a list of events signalled when the item
changes. The drivers subclass ConfigDriver and supply the per-family parts as class attributes
and the ``setters()`` table; everything here is written once for both.
"""

from efisim import uefi


class ConfigDriver(object):
    """Base of Ip4Config2Driver and Ip6ConfigDriver (``self.firmware`` and ``self.status`` are theirs)."""

    DATA_TYPE_MAXIMUM = 0  # Ip4Config2DataTypeMaximum / Ip6ConfigDataTypeMaximum
    LEDGER_KEY = ""  # the ledger's name for registered notify events
    SIGNAL_UNCHANGED = True  # SetData with the data already in force still signals (IP4 Config2)

    def __init__(self):
        self.notify = dict((data_type, []) for data_type in range(self.DATA_TYPE_MAXIMUM))  # type: dict

    def setters(self):
        """{data type: setter(size, data) -> status}; missing types are read-only."""
        return {}

    def _signal(self, data_type):
        for event in list(self.notify[data_type]):
            self.firmware.signal(event)  # a closed-but-registered event is recorded as a crash

    # ------------------------------------------------------------------ SetData
    def _SetData(self, this, data_type, size, data):
        # EfiIp4Config2SetData / EfiIp6ConfigSetData: parameter checks, then the item's own
        # SetData at TPL_CALLBACK.
        if not this or (not data) != (size == 0):
            return uefi.EFI_INVALID_PARAMETER
        if not 0 <= data_type < self.DATA_TYPE_MAXIMUM:
            return uefi.EFI_UNSUPPORTED
        with self.firmware.at_tpl(uefi.TPL_CALLBACK):
            if self.status[data_type] == uefi.EFI_NOT_READY:
                return uefi.EFI_ACCESS_DENIED  # an asynchronous set of this item is on the way
            setter = self.setters().get(data_type)
            if setter is None:
                return uefi.EFI_WRITE_PROTECTED  # InterfaceInfo is read-only
            status = setter(size, data or 0)
            if status == uefi.EFI_ABORTED:  # the same data as before: nothing changes
                if not self.SIGNAL_UNCHANGED:
                    return uefi.EFI_SUCCESS
                status = uefi.EFI_SUCCESS
            if status == uefi.EFI_SUCCESS:
                self._signal(data_type)
            return status

    # ------------------------------------------------------------------ notify registration
    def _RegisterDataNotify(self, this, data_type, event):
        if not this or not event:
            return uefi.EFI_INVALID_PARAMETER
        if not 0 <= data_type < self.DATA_TYPE_MAXIMUM:
            return uefi.EFI_UNSUPPORTED
        with self.firmware.at_tpl(uefi.TPL_CALLBACK):
            if event in self.notify[data_type]:
                return uefi.EFI_ACCESS_DENIED
            self.notify[data_type].append(event)
            return uefi.EFI_SUCCESS

    def _UnregisterDataNotify(self, this, data_type, event):
        if not this or not event:
            return uefi.EFI_INVALID_PARAMETER
        if not 0 <= data_type < self.DATA_TYPE_MAXIMUM:
            return uefi.EFI_NOT_FOUND
        with self.firmware.at_tpl(uefi.TPL_CALLBACK):
            if event not in self.notify[data_type]:
                return uefi.EFI_NOT_FOUND
            self.notify[data_type].remove(event)
            return uefi.EFI_SUCCESS

    def ledger(self):
        """Notify events still registered: an application that registers must unregister."""
        return {self.LEDGER_KEY: sum(len(events) for events in self.notify.values())}
