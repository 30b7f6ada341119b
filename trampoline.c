/* _bitsnet_trampoline: an EFI event notify function that hands the event to Python safely.
 *
 * Contract.  `notify` is an EFI_EVENT_NOTIFY.  The firmware calls it at the event's TPL
 * (TPL_CALLBACK for bitsnet's events) from whatever it interrupted: the middle of a bytecode,
 * a ctypes call, or (simulator only) the timer thread.  So it touches no Python object and
 * takes no lock of ours; it only calls Py_AddPendingCall(pending, Context), which CPython
 * documents as callable without the GIL.  The main thread later runs `pending` between two
 * bytecodes; it calls the dispatcher (set_dispatcher) with int(Context).  A dispatcher that
 * raises is reported by PyErr_WriteUnraisable, never raised into the interrupted code.
 * Overflow.  CPython's pending-call ring has 32 slots and holds 31 calls (2.7 to 3.11).
 * When it is full the notification is dropped and counted; overflow() returns and resets
 * the count, and the caller rescans its tokens (bitsnet/events.py, Rule 3).
 * Python API: notify_function (int: the address of notify), set_dispatcher(callable) ->
 * previous dispatcher or None, overflow() -> int.
 * Into a BITS tree: copy this file to rc/python/trampoline.c; add
 * `efi = contrib/python/trampoline.c;` to the python module in rc/python/Makefile.core.def;
 * in rc/python/config.c, under #ifdef GRUB_MACHINE_EFI, declare `extern void
 * init_bitsnet_trampoline(void);` and add `{"_bitsnet_trampoline", init_bitsnet_trampoline},`
 * to _PyImport_Inittab.  On a host, tools/efisim/trampoline_build.py builds it.
 */
#include <Python.h>
#include <stdint.h>

#undef EFIAPI
#if defined(GRUB_MACHINE_EFI) && defined(__x86_64__)
#define EFIAPI __attribute__((ms_abi))  /* UEFI x64 calling convention inside BITS */
#else
#define EFIAPI                          /* IA32 UEFI, and the host simulator: the C default */
#endif
#if PY_MAJOR_VERSION >= 3
#define PyInt_FromLong PyLong_FromLong
#endif

static PyObject *dispatcher;      /* owned reference, or NULL before set_dispatcher */
static volatile long overflowed;  /* notifications dropped since the last overflow() */

static int pending(void *context)  /* main thread, GIL held, between two bytecodes */
{
    PyObject *callable = dispatcher, *result;
    if (callable == NULL)
        return 0;
    Py_INCREF(callable);  /* the dispatcher may replace itself */
    result = PyObject_CallFunction(callable, "k", (unsigned long)(uintptr_t)context);
    if (result == NULL)
        PyErr_WriteUnraisable(callable);
    Py_XDECREF(result);
    Py_DECREF(callable);
    return 0;
}

static void EFIAPI notify(void *event, void *context)  /* any thread, event's TPL, no GIL */
{
    (void)event;
    if (Py_AddPendingCall(pending, context) < 0)
        __sync_fetch_and_add(&overflowed, 1);
}

static PyObject *set_dispatcher(PyObject *self, PyObject *callable)
{
    PyObject *previous = dispatcher;
    (void)self;
    if (!PyCallable_Check(callable))
        return PyErr_Format(PyExc_TypeError, "set_dispatcher() argument must be callable");
    Py_INCREF(callable);
    dispatcher = callable;
    if (previous == NULL)
        Py_RETURN_NONE;
    return previous;  /* our reference passes to the caller */
}

static PyObject *overflow(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyInt_FromLong(__sync_lock_test_and_set(&overflowed, 0));
}

static PyMethodDef methods[] = {
    {"set_dispatcher", set_dispatcher, METH_O, "set_dispatcher(callable) -> previous dispatcher or None"},
    {"overflow", overflow, METH_NOARGS, "overflow() -> notifications dropped since the last call"},
    {NULL, NULL, 0, NULL}
};

#if PY_MAJOR_VERSION >= 3
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bitsnet_trampoline", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit__bitsnet_trampoline(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObject(m, "notify_function", PyLong_FromVoidPtr((void *)notify)) < 0)
        Py_CLEAR(m);
    return m;
}
#else
PyMODINIT_FUNC init_bitsnet_trampoline(void)
{
    PyObject *m = Py_InitModule("_bitsnet_trampoline", methods);
    if (m)
        PyModule_AddObject(m, "notify_function", PyLong_FromVoidPtr((void *)notify));
}
#endif
