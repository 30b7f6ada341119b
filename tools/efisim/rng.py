"""EFI_RNG_PROTOCOL (UEFI specification, "Random Number Generator Protocol"), optional.

Debian's OVMF has none (measured: LocateProtocol and LocateHandle answer EFI_NOT_FOUND), so a
simulated machine has it only with ``MachineConfig(rng=True)``. Then one handle carries the
protocol, as EDK2's RngDxe installs it, backed by the host's ``os.urandom``:

  GetInfo(This, *RNGAlgorithmListSize, RNGAlgorithmList)
      the two algorithms RngDxe reports (SP800-90 CTR-256 first: the default); a list too
      small gets EFI_BUFFER_TOO_SMALL and the size needed; NULL pointers EFI_INVALID_PARAMETER.
  GetRNG(This, RNGAlgorithm, RNGValueLength, RNGValue)
      RNGAlgorithm NULL means the default; an algorithm not in the list is EFI_UNSUPPORTED;
      RNGValue NULL or a length of 0 is EFI_INVALID_PARAMETER.

``calls`` counts the GetRNG calls, and ``fail`` (a status) makes every GetRNG answer it, for
tests of a protocol that fails (EDK2's RngDxe answers EFI_NOT_READY when the hardware has no
entropy yet).
"""

import ctypes
import os
import uuid
from ctypes import POINTER, Structure, c_void_p

from efisim import uefi
from efisim.firmware import FIRMWARE, efiapi

EFI_RNG_PROTOCOL_GUID = uuid.UUID("3152bca5-eade-433d-862e-c01cdc291f44")
EFI_RNG_ALGORITHM_SP800_90_CTR_256_GUID = uuid.UUID("44f0de6e-4d8c-4045-a8c7-4dd168856b9e")
EFI_RNG_ALGORITHM_RAW = uuid.UUID("e43176d7-b6e8-4827-b784-7ffdc4b68561")
ALGORITHMS = (EFI_RNG_ALGORITHM_SP800_90_CTR_256_GUID, EFI_RNG_ALGORITHM_RAW)


class EFI_RNG_PROTOCOL(Structure):
    pass


EFI_RNG_PROTOCOL._fields_ = [
    ("GetInfo", uefi.FUNC(POINTER(EFI_RNG_PROTOCOL), POINTER(uefi.UINTN), POINTER(uefi.EFI_GUID))),
    ("GetRNG", uefi.FUNC(POINTER(EFI_RNG_PROTOCOL), POINTER(uefi.EFI_GUID), uefi.UINTN, c_void_p)),
]


class Rng(object):
    """The protocol instance on its own handle."""

    def __init__(self):
        self.calls = 0
        self.fail = None  # an EFI status every GetRNG answers, or None
        self.interface = EFI_RNG_PROTOCOL()
        self._functions = [EFI_RNG_PROTOCOL._fields_[0][1](self._GetInfo),
                           EFI_RNG_PROTOCOL._fields_[1][1](self._GetRNG)]
        self.interface.GetInfo, self.interface.GetRNG = self._functions
        self.handle = FIRMWARE.new_handle()
        FIRMWARE.install_protocol(self.handle, EFI_RNG_PROTOCOL_GUID, ctypes.addressof(self.interface))

    @efiapi()
    def _GetInfo(self, this, size, algorithms):
        if not this or not size:
            return uefi.EFI_INVALID_PARAMETER
        needed = len(ALGORITHMS) * ctypes.sizeof(uefi.EFI_GUID)
        if size[0] < needed:
            size[0] = needed
            return uefi.EFI_BUFFER_TOO_SMALL
        if not algorithms:
            return uefi.EFI_INVALID_PARAMETER
        for i, algorithm in enumerate(ALGORITHMS):
            algorithms[i] = uefi.EFI_GUID(algorithm)
        size[0] = needed
        return uefi.EFI_SUCCESS

    @efiapi()
    def _GetRNG(self, this, algorithm, length, value):
        self.calls += 1
        if not this or not value or not length:
            return uefi.EFI_INVALID_PARAMETER
        if algorithm and algorithm.contents.uuid not in ALGORITHMS:
            return uefi.EFI_UNSUPPORTED
        if self.fail is not None:
            return self.fail
        ctypes.memmove(value, os.urandom(length), length)
        return uefi.EFI_SUCCESS

    def shutdown(self):
        FIRMWARE.uninstall_protocol(self.handle, EFI_RNG_PROTOCOL_GUID)


def install():
    return Rng()
