/* _bitsnet_trampoline: an EFI notify function -> Py_AddPendingCall (see bitsnet/events.py). notify() may
 * interrupt anything at TPL_CALLBACK, so it only queues pending(Context), which the main thread runs between
 * bytecodes to call the dispatcher with int(Context). A full queue (31 calls) drops it: overflow() counts those. */
#include <Python.h>
#include <stdint.h>
#if defined(GRUB_MACHINE_EFI) && defined(__x86_64__)
#define BITSNET_EFIAPI __attribute__((ms_abi)) /* UEFI x64 calling convention, inside BITS */
#else
#define BITSNET_EFIAPI /* IA32 UEFI and the host simulator: the C default */
#endif
static PyObject *dispatcher;     /* set_dispatcher(callable), owned */
static volatile long overflowed; /* notifications dropped since the last overflow() */

static int pending(void *context) /* main thread, GIL held */
{
    PyObject *callable = dispatcher, *result;
    if (callable == NULL)
        return 0;
    Py_INCREF(callable); /* the dispatcher may replace itself */
    if ((result = PyObject_CallFunction(callable, "k", (unsigned long)(uintptr_t)context)) == NULL)
        PyErr_WriteUnraisable(callable); /* never raise into the interrupted code */
    Py_XDECREF(result);
    Py_DECREF(callable);
    return 0;
}

static void BITSNET_EFIAPI notify(void *event, void *context) /* any thread, TPL_CALLBACK, no GIL */
{
    if ((void)event, Py_AddPendingCall(pending, context) < 0)
        __sync_fetch_and_add(&overflowed, 1);
}
static PyObject *set_dispatcher(PyObject *self, PyObject *callable) /* -> the previous one, or None */
{
    PyObject *previous = dispatcher ? dispatcher : (Py_INCREF(Py_None), Py_None);
    if (!PyCallable_Check(callable))
        return PyErr_Format(PyExc_TypeError, "set_dispatcher() argument must be callable");
    Py_INCREF(callable);
    dispatcher = callable;
    return (void)self, previous;
}
static PyObject *overflow(PyObject *self, PyObject *unused)
{
    return (void)self, (void)unused, PyLong_FromLong(__sync_lock_test_and_set(&overflowed, 0));
}

static PyMethodDef methods[] = {{"set_dispatcher", set_dispatcher, METH_O, "set_dispatcher(f) -> previous"},
                                {"overflow", overflow, METH_NOARGS, "dropped notifications since last call"},
                                {NULL, NULL, 0, NULL}};
static PyObject *add_notify(PyObject *m) /* notify_function: notify's address, an int */
{
    if (m && PyModule_AddObject(m, "notify_function", PyLong_FromVoidPtr((void *)notify)) < 0)
        Py_CLEAR(m);
    return m;
}
#if PY_MAJOR_VERSION >= 3
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bitsnet_trampoline", NULL, -1, methods, NULL, 0, 0, 0};
PyMODINIT_FUNC PyInit__bitsnet_trampoline(void) { return add_notify(PyModule_Create(&module)); }
#else
PyMODINIT_FUNC init_bitsnet_trampoline(void) { add_notify(Py_InitModule("_bitsnet_trampoline", methods)); }
#endif
