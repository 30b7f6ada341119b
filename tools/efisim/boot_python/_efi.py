"""Stand-in for BITS's C module ``_efi``: the system table, the image handle and the event hook.

bits-2070 and later have a C notify function, ``_c_event_callback``, that hands the event
pointer to ``Py_AddPendingCall`` (ignoring a full queue, a known defect we reproduce) and one
Python callable, set with ``_set_event_callback``, that receives it at a safe point
(docs/bits-efi.md section 10). Here the notify function is a ctypes callback
that calls the real ``Py_AddPendingCall`` of this interpreter, so the callable runs on the main
thread between bytecodes exactly as in BITS. One difference: an exception raised by the
callable is reported on stderr by ctypes instead of propagating into the interrupted code.
"""

import ctypes

from efisim import uefi
from efisim.firmware import FIRMWARE

_system_table = ctypes.addressof(FIRMWARE.system_table)
_image_handle = FIRMWARE.image_handle

_PENDING_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_add_pending_call = ctypes.pythonapi.Py_AddPendingCall
_add_pending_call.argtypes = [_PENDING_CALL, ctypes.c_void_p]
_add_pending_call.restype = ctypes.c_int
_event_callback = [None]


def _run_pending(event):
    callback = _event_callback[0]
    if callback is not None:
        callback(event or 0)
    return 0


def _notify(event, context):
    _add_pending_call(_pending_function, event)  # return value ignored, as in bits-2079


_pending_function = _PENDING_CALL(_run_pending)
_notify_function = uefi.EFI_EVENT_NOTIFY(_notify)
_c_event_callback = ctypes.cast(_notify_function, ctypes.c_void_p).value


def _set_event_callback(callback):
    _event_callback[0] = callback
