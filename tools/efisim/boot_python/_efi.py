"""Stand-in for BITS's C module ``_efi``: the system table, the image handle and the event hook.

bits-2070 and later have a C notify function, ``_c_event_callback``, that hands the event
pointer to ``Py_AddPendingCall`` (ignoring a full queue, a known defect we reproduce) and one
Python callable, set with ``_set_event_callback``, that receives it at a safe point
(docs/bits-efi.md section 10). Here the notify function is a ctypes callback
that calls the real ``Py_AddPendingCall`` of this interpreter, so the callable runs on the main
thread between bytecodes exactly as in BITS. An exception the callable raises propagates into
the interrupted code, as BITS's ``call_callback`` makes it do by returning -1 with the
exception set. A ctypes callback cannot return with an exception set (ctypes prints it), and
an asynchronous exception (``PyThreadState_SetAsyncExc``) would go off inside the callback
itself, so the exception is raised by a tracer set on the interrupted frames, at their next
opcode (Python 3.7+) or line (2.7, where a loop's backward jump is a line event): a little later
than in BITS at most.
"""

import ctypes
import sys

from efisim import uefi
from efisim.firmware import FIRMWARE

_system_table = ctypes.addressof(FIRMWARE.system_table)
_image_handle = FIRMWARE.image_handle

_PENDING_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_add_pending_call = ctypes.pythonapi.Py_AddPendingCall
_add_pending_call.argtypes = [_PENDING_CALL, ctypes.c_void_p]
_add_pending_call.restype = ctypes.c_int
_event_callback = [None]


def _raise_in_program(exc, frame):
    """Raise ``exc`` in the interrupted code (``frame`` or one of its callers) at its next line
    (or next opcode, where Python can trace those: a one-line ``while True: pass`` has no
    line events on 3.x). Only those frames are traced -- the global trace function traces no
    other frame, so the next pending call is not hit -- and only until it has raised (CPython
    drops a trace function that raises); the frames' own tracers are cleared first."""
    chain = []

    def raiser(where, event, arg):
        if event not in ("line", "opcode"):
            return raiser
        for traced in chain:
            traced.f_trace = None
        del chain[:]
        raise exc

    def no_other_frames(where, event, arg):
        return None
    while frame is not None:
        frame.f_trace = raiser
        if hasattr(frame, "f_trace_opcodes"):
            frame.f_trace_opcodes = True
        chain.append(frame)
        frame = frame.f_back
    sys.settrace(no_other_frames)


def _run_pending(event):
    callback = _event_callback[0]
    if callback is not None:
        try:
            callback(event or 0)
        except BaseException as exc:  # BITS: into the interrupted code (docs/bits-efi.md section 10)
            _raise_in_program(exc, sys._getframe(1))
    return 0


def _notify(event, context):
    _add_pending_call(_pending_function, event)  # return value ignored, as in bits-2079


_pending_function = _PENDING_CALL(_run_pending)
_notify_function = uefi.EFI_EVENT_NOTIFY(_notify)
_c_event_callback = ctypes.cast(_notify_function, ctypes.c_void_p).value


def _set_event_callback(callback):
    _event_callback[0] = callback
