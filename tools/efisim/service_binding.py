"""EFI_SERVICE_BINDING_PROTOCOL, shared by every simulated network driver (docs/edk2.md section 2.4).

A driver class mixes in ``ServiceBinding`` and provides ``children`` (handle -> child),
``new_child()`` (make, register and install one child; return it) and ``destroy(child)``.
``install_service_binding`` builds the driver's protocol functions once -- every child's
interface points at the same callbacks (``new_interface``) -- and installs the service binding
on the NIC handle; CreateChild/DestroyChild then behave as EDK2's do for TCP4, UDP4 and DNS4.

Memory of destroyed children: EDK2 frees a child's instance (its protocol interface included)
and its handle inside DestroyChild. The simulator keeps the most recent RETIRED_KEEP of them
mapped (``RetiredMemory``), so that a call through a just-destroyed child's interface reaches
the driver, which reports it, instead of crashing the host process -- as firmware.py keeps
recently freed pool mapped and poisoned -- and releases older ones, so that memory after
10 000 connections is back where it started, as on real firmware.
"""

import ctypes

from efisim import uefi
from efisim.firmware import FIRMWARE, efiapi


RETIRED_KEEP = 256  # destroyed children's interfaces and handles stay mapped this long


class RetiredMemory(list):
    """Memory of destroyed children, kept mapped until RETIRED_KEEP newer items follow it.

    A list (drivers ``append`` to it and may trim it themselves with ``del retired[:-n]``)
    that releases its oldest items itself.
    """

    def append(self, item):
        list.append(self, item)
        if len(self) > RETIRED_KEEP:
            del self[:-RETIRED_KEEP]


class ServiceBinding(object):
    """CreateChild/DestroyChild for one protocol on one NIC (see the module docstring)."""

    def install_service_binding(self, binding_class, protocol_class):
        """Build ``self.functions`` for ``protocol_class`` from the driver's ``_<Name>`` methods,
        and install ``binding_class`` on the NIC handle."""
        self.protocol_class = protocol_class
        self._retired = RetiredMemory()  # the driver appends destroyed children's interfaces
        self.functions = {}
        for name, ftype in protocol_class._fields_:
            self.functions[name] = ftype(getattr(self, "_" + name))
        self.service = binding_class()
        fields = dict(binding_class._fields_)
        self.service.CreateChild = fields["CreateChild"](self._CreateChild)
        self.service.DestroyChild = fields["DestroyChild"](self._DestroyChild)
        FIRMWARE.install_protocol(self.nic.handle, binding_class.guid, ctypes.addressof(self.service))

    def uninstall_service_binding(self):
        FIRMWARE.uninstall_protocol(self.nic.handle, type(self.service).guid)

    def new_interface(self):
        """One child's protocol interface: a fresh structure whose slots are the driver's functions."""
        interface = self.protocol_class()
        for name, _ in self.protocol_class._fields_:
            setattr(interface, name, self.functions[name])
        return interface

    def refuse_create(self):
        """Whether CreateChild fails with EFI_OUT_OF_RESOURCES this time (fault hooks)."""
        return False

    @efiapi()
    def _CreateChild(self, this, handle_pointer):
        if not handle_pointer:
            return uefi.EFI_INVALID_PARAMETER
        with FIRMWARE.lock:
            if self.refuse_create():
                return uefi.EFI_OUT_OF_RESOURCES
            # EDK2 (docs/edk2.md section 2.4): always a fresh handle; *ChildHandle is overwritten.
            handle_pointer[0] = self.new_child().handle
        return uefi.EFI_SUCCESS

    @efiapi()
    def _DestroyChild(self, this, handle):
        if not handle:
            return uefi.EFI_INVALID_PARAMETER
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            child = self.children.get(handle)
            if child is None:
                return uefi.EFI_UNSUPPORTED  # not a child of this service
            self.destroy(child)
            if handle not in FIRMWARE.handles:
                # Its last protocol is gone, so the handle no longer exists (firmware.py,
                # uninstall_protocol): release its memory too, after the same quarantine.
                cell = FIRMWARE.free_handle(handle)
                if cell is not None:
                    self._retired.append(cell)
        return uefi.EFI_SUCCESS
