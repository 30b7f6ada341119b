"""The Python environment of BITS, given to the program that ``tools/efirun.py`` runs.

In BITS, Python 2.7 runs inside GRUB: ``errno`` has nine names with GRUB's values, ``os``,
``time``, ``random``, ``signal`` and ``tempfile`` are BITS's own small modules, there are no
threads, the standard library is a subset (``lib.zip``), ``sys.path`` is ``/boot/python`` and
its ``lib.zip``, and ``sys.stdout`` is a Tee with only ``write`` and ``flush``
(docs/bits-environment.md sections 2-5 and 8). The simulator runs the program in the same
interpreter as itself -- the firmware model, its threads, the lab's servers -- and those need
the host's real modules. So this module does not change what is imported; it changes what the
PROGRAM gets when it imports:

* ``builtins.__import__`` is wrapped. Each import is judged by the module that executes it
  (the ``globals`` passed to ``__import__``): the "program side" is the program's ``__main__``,
  ``bitsnet`` and its submodules, and modules whose file lies in the program's directories
  (PYTHONPATH entries, which play extra ``/boot/python`` content). On Python 2.7, a module first
  imported while a program-side import runs (``socket.py``, ``SocketServer.py``, ...) is program
  side too, for good: a per-thread depth counter marks the program-side import in progress, and
  the modules that appeared in ``sys.modules`` meanwhile are remembered; a standard module the
  host had loaded already and that holds a host module BITS replaces (``logging`` holds ``time``)
  is loaded again as the program's private copy, outside ``sys.modules``. On Python 3 only the
  program's direct imports are judged (the 3.x standard library's own imports -- ``http.client``
  needs ``email``, ``socket`` needs ``selectors`` -- are not BITS's business). Any other
  ``__main__`` namespace than the host's own (``bitsnet.launch`` makes one) is the program's.
  Everything else, the simulator included, is the host side and imports as usual. bitsnet
  modules the simulator loaded for itself are dropped from ``sys.modules`` at activation, so the
  program's bitsnet is loaded under the model.
* A program-side import of ``os``, ``time``, ``errno``, ``random``, ``signal`` or ``tempfile``
  gets the stand-in (``tools/efisim/bits_python/``, ``errno`` built here); ``sys.modules`` keeps
  the host's. ``thread``/``threading``/``_thread`` fail (Python 2.7's ``dummy_threading`` works,
  as in BITS). Any other name must be one BITS has (``tools/efisim/bits_modules.txt``: the
  built-in C modules, ``lib.zip``, ``/boot/python``; on Python 3 under their 3.x names) or come
  from ``/boot/python`` here (``efi``, ``_efi``, ``_bitsnet_trampoline``, ``bitsnet``, PYTHONPATH
  modules); otherwise ``ImportError("No module named X")``. BITS modules the simulator has no
  stand-in for (``bits``, ``acpi``, ``pci``...) fail the same way, with a note saying so.
* ``sys.path`` loses ``''`` and the script's directory, ``sys.stdout``/``sys.stderr`` become a
  Tee (``write``/``flush`` only) over the real streams, and SIGINT raises what Ctrl-C on BITS's
  serial console raises: ``KeyError((0, u'\\x03', 0))``. The builtins ``site`` adds (``exit``,
  ``quit``...) are gone, ``open()`` refuses to write for the program, and the ``idna`` codec
  and ``uuid.uuid1``/``uuid4`` refuse the program (BITS lacks ``stringprep`` and randomness).

``BitsEnvironment(...).activate()`` does all this, ``deactivate()`` undoes it. The program's
``__main__`` namespace is registered with ``add_program_namespace``.
"""

from __future__ import print_function

import os
import signal
import sys
import threading
import types

try:
    from typing import Optional  # noqa: F401  (type comments)
except ImportError:
    pass
try:
    import builtins  # type: ignore
except ImportError:  # Python 2
    import __builtin__ as builtins  # type: ignore

PY2 = sys.version_info[0] == 2
HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN_DIR = os.path.join(HERE, "bits_python")
MODULE_LIST = os.path.join(HERE, "bits_modules.txt")

# errno in BITS: GRUB error codes under POSIX names, and only these (docs/bits-environment.md section 3).
ERRNO = (("ENOMEM", 3), ("EISDIR", 4), ("ENOTDIR", 4), ("ENOENT", 5), ("EINVAL", 10), ("ERANGE", 11),
         ("ENXIO", 12), ("EDOM", 18), ("EINTR", 28))
STANDINS = ("os", "time", "random", "signal", "tempfile")  # files in bits_python/
# Modules of the simulator itself that play BITS's (/boot/python, built-in): they and what they
# import are always the host side.
SIMULATOR_MODULES = ("efi", "_efi", "_bitsnet_trampoline", "efisim")
# BITS's /boot/python modules that the simulator does provide (the rest raise ImportError).
MODELLED_BOOT = ("efi", "_socket", "select") + STANDINS
THREAD_MODULES = ("thread", "_thread", "threading", "_threading_local")
# Python 2.7: host modules BITS replaces; a standard module the host loaded that holds one of them
# (logging holds time, SocketServer threading) is loaded again for the program ("private copy").
REPLACED = ("os", "posix", "time", "errno", "random", "signal", "tempfile", "thread", "threading")
# ... except these, which the program shares with the simulator (efi's GUIDs are uuid.UUIDs, its
# structures ctypes') or which only read files for tracebacks.
NO_COPY = ("uuid", "ctypes", "encodings", "codecs", "sys", "__builtin__", "exceptions", "types", "abc",
           "_weakrefset", "weakref", "warnings", "copy_reg", "linecache", "traceback", "posixpath",
           "genericpath", "stat", "__future__", "struct", "collections", "functools", "_abcoll",
           "socket", "select", "_socket")  # bitsnet.install() rebuilds socket users from sys.modules
SOCKET_FAMILY = ("_socket", "select", "socket", "selectors")
_MISSING = object()
SITE_BUILTINS = ("exit", "quit", "copyright", "credits", "license")  # what site.py adds; BITS has no site

# Python 2 names (BITS's) -> the Python 3 modules that took their place. Names missing here keep
# their name; names mapped to () have no 3.x counterpart the program may use (StringIO and
# cStringIO became io, which BITS does not have).
PY3_NAMES = {
    "__builtin__": ("builtins",), "exceptions": (), "strop": (), "cStringIO": (), "StringIO": (),
    "BaseHTTPServer": ("http", "http.server"), "httplib": ("http", "http.client"),
    "SocketServer": ("socketserver",), "urllib2": ("urllib", "urllib.request", "urllib.error"),
    "urlparse": ("urllib", "urllib.parse"), "ConfigParser": ("configparser",), "copy_reg": ("copyreg",),
    "repr": ("reprlib",), "_abcoll": ("collections.abc",), "dummy_thread": ("_dummy_thread",),
    "urllib": ("urllib", "urllib.parse", "urllib.request", "urllib.error", "urllib.response"),
    "_sha": ("_sha1",), "mimetools": (), "rfc822": (), "UserDict": (),
    "imp": ("imp", "importlib", "importlib.util", "importlib.machinery", "importlib.abc"),  # 3.12 drops imp
}


def read_module_list(path=MODULE_LIST):
    """{"builtin": set, "libzip": set, "boot": set} from bits_modules.txt."""
    sections = {}  # type: dict
    current = None
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8").strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                current = sections.setdefault(line[1:-1], set())
            elif current is not None:
                current.add(line)
    return sections


def allowed_names(sections, py2=PY2):
    """The module names a program may import: BITS's, under this Python's names."""
    names = set()
    for section in ("builtin", "libzip", "boot"):
        names.update(sections.get(section, ()))
    if not py2:
        renamed = set()
        for name in names:
            renamed.update(PY3_NAMES.get(name, (name,)))
        names = renamed
        names.add("selectors")  # 3.x's socket machinery; bitsnet.install() provides it
    else:
        names.add("_dummy_threading")  # the name dummy_threading gives its own threading copy
    names.difference_update(THREAD_MODULES)
    return names


def make_errno():
    """A module with exactly BITS's errno names and errorcode (one name per value, as in C)."""
    module = types.ModuleType("errno", "GRUB error codes under the POSIX names BITS defines.")
    errorcode = {}
    for name, value in ERRNO:
        setattr(module, name, value)
        errorcode.setdefault(value, name)
    errorcode[4] = "EISDIR"  # measured in BITS: EISDIR, not ENOTDIR, keeps the shared value
    module.errorcode = errorcode
    return module


def no_module(name, note=""):
    """The ImportError BITS raises for a module it does not have."""
    message = "No module named %s%s" % (name, note)
    if PY2:
        return ImportError(message)
    return ModuleNotFoundError(message, name=name)  # noqa: F821 (3.6+)


class Tee(object):
    """BITS's sys.stdout/sys.stderr: write() and flush() only (no encoding, fileno, isatty)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, data):
        if not PY2 and isinstance(data, (bytes, bytearray)):
            # BITS's Tee takes byte strings (Python 2's str); on 3.x they go to the real buffer.
            buffer = getattr(self._stream, "buffer", None)
            if buffer is not None:
                self._stream.flush()
                buffer.write(data)
                return
            data = bytes(data).decode("latin-1")
        self._stream.write(data)

    def flush(self):
        self._stream.flush()


def _keyboard_interrupt(signum, frame):
    """Ctrl-C as BITS reports it from a serial console: an unhandled key notification."""
    raise KeyError((0, u"\x03", 0 if not PY2 else long(0)))  # noqa: F821 (long: Python 2)


class BitsEnvironment(object):
    """The import wrapper and the rest; see the module docstring."""

    def __init__(self, boot_dirs=(), script_dir=None):
        """``boot_dirs``: directories whose modules play extra /boot/python content (PYTHONPATH);
        ``script_dir``: the script's directory. Modules from either are the program's."""
        self.boot_dirs = [os.path.abspath(d) for d in boot_dirs if d]
        self.program_dirs = [os.path.join(d, "") for d in self.boot_dirs]
        if script_dir:
            self.program_dirs.append(os.path.join(os.path.abspath(script_dir), ""))
        self.sections = read_module_list()
        self.allowed = allowed_names(self.sections)
        self.boot_names = set(self.sections.get("boot", ()))
        self.standins = {}  # type: dict  # name -> module object
        self._standin_ids = set()  # type: set  # ids of the stand-ins' namespaces (host side)
        self._program_ids = {}  # type: dict  # id(namespace) -> module, kept alive so ids stay unique
        self._copies = {}  # type: dict  # Python 2.7: name -> the program's private copy of a host module
        self._cache = {}  # type: dict  # name -> (module returned, sys.modules entry then, _generation())
        self._relative_cache = {}  # type: dict  # (package, name) -> bool (Python 2.7)
        self._local = threading.local()
        self._real_import = None
        self._saved = None  # type: Optional[tuple]
        self._held = []  # type: list  # the simulator's bitsnet modules, out of sys.modules
        self._host_main = None  # type: Optional[int]  # id of the host's own __main__ namespace
        self._idna_saved = None  # type: Optional[tuple]  # (encodings._cache, its "idna" entry before)
        self._builtins_saved = {}  # type: dict  # builtins taken away or replaced for the run
        self._uuid_saved = {}  # type: dict  # uuid.uuid1/uuid4 as they were
        self._load_standins()

    # ----------------------------------------------------------------------------- stand-ins
    def _load_standins(self):
        self.standins["errno"] = make_errno()
        for name in STANDINS:
            path = os.path.join(STANDIN_DIR, name + ".py")
            module = types.ModuleType(name)
            module.__file__ = path
            self._standin_ids.add(id(module.__dict__))
            with open(path, "rb") as f:
                source = f.read()
            exec(compile(source, path, "exec"), module.__dict__)
            self.standins[name] = module

    def add_program_namespace(self, namespace, module=None):
        """Mark a namespace (the program's __main__) as program side."""
        self._program_ids[id(namespace)] = module if module is not None else namespace

    # ----------------------------------------------------------------------------- activation
    def activate(self, script_dir=None):
        """Install the wrapper, the Tee and the SIGINT handler; fix up sys.path.

        bitsnet modules the simulator loaded (it uses ``bitsnet.efidefs``) are taken out of
        ``sys.modules`` (and kept alive): the program's ``import bitsnet`` loads its own, under
        this model, as BITS would load it from /boot/python."""
        if self._real_import is not None:
            return
        for name in list(sys.modules):
            if name == "bitsnet" or name.startswith("bitsnet."):
                self._held.append(sys.modules.pop(name))
        host_main = sys.modules.get("__main__")
        self._host_main = id(getattr(host_main, "__dict__", None))
        self._real_import = builtins.__import__
        builtins.__import__ = self._import
        try:
            saved_sigint = signal.signal(signal.SIGINT, _keyboard_interrupt)
        except ValueError:  # not the main thread: no Ctrl-C model
            saved_sigint = None
        self._saved = (sys.stdout, sys.stderr, saved_sigint)
        sys.stdout, sys.stderr = Tee(sys.stdout), Tee(sys.stderr)
        drop = set([""])
        if script_dir:
            drop.add(os.path.abspath(script_dir))
        sys.path[:] = [p for p in sys.path if p not in drop and os.path.abspath(p) not in drop]
        self._guard_idna()
        self._patch_builtins()

    def _patch_builtins(self):
        """No ``exit``/``quit``/``copyright``/``credits``/``license`` (BITS runs without ``site``),
        and a read-only ``open()`` for the program (GRUB's files cannot be written)."""
        saved = {}
        for name in SITE_BUILTINS:
            if hasattr(builtins, name):
                saved[name] = getattr(builtins, name)
                delattr(builtins, name)
        real_open = saved["open"] = builtins.open
        env = self

        def open(file, mode="r", *args, **kw):  # noqa: A001 (the builtin's own name)
            if ("w" in mode or "a" in mode or "+" in mode or "x" in mode) and \
                    env.program_side(sys._getframe(1).f_globals):
                # BITS quirk: GRUB's open is read-only; BITS raises IOError [Errno 0] (section 8.4).
                raise IOError(0, "Error", file)
            return real_open(file, mode, *args, **kw)

        builtins.open = open
        self._builtins_saved = saved
        self._guard_uuid()

    def _guard_uuid(self):
        """``uuid`` is shared with the simulator's efi (GUIDs are uuid.UUIDs), so the program gets
        the host's module; but in BITS ``uuid4()``/``uuid1()`` fail for want of random numbers
        (no os.urandom, an empty random): for program-side callers they fail here too."""
        import uuid

        def guarded(function):
            def call(*args, **kw):
                if self.program_side(sys._getframe(1).f_globals):
                    raise AttributeError("'module' object has no attribute 'randrange'")
                return function(*args, **kw)
            return call

        for name in ("uuid1", "uuid4"):
            self._uuid_saved[name] = getattr(uuid, name)
            setattr(uuid, name, guarded(getattr(uuid, name)))

    def _guard_idna(self):
        """BITS has no idna codec (its encodings.idna needs stringprep, which lib.zip lacks): for the
        program, ``u"x".encode("idna")`` raises ``LookupError: unknown encoding: idna``.

        The codec registry is shared, so the entry the encodings package returns for "idna" is
        replaced by one whose encode/decode refuse program-side callers and serve the host's
        (Python 3.10+ also clears the registry's cache; on older 3.x an idna lookup the host made
        before the program started stays cached, and the program then has the codec).
        """
        import codecs
        import encodings
        import encodings.idna as real
        info = real.getregentry()

        def guarded(function):
            def call(*args, **kw):
                if self.program_side(sys._getframe(1).f_globals):
                    raise LookupError("unknown encoding: idna")
                return function(*args, **kw)
            return call

        cache = getattr(encodings, "_cache", None)
        if not isinstance(cache, dict):
            return
        self._idna_saved = (cache, cache.get("idna", _MISSING))
        cache["idna"] = codecs.CodecInfo(
            name="idna", encode=guarded(info.encode), decode=guarded(info.decode),
            incrementalencoder=info.incrementalencoder, incrementaldecoder=info.incrementaldecoder,
            streamwriter=info.streamwriter, streamreader=info.streamreader)
        unregister = getattr(codecs, "unregister", None)
        if unregister is not None:  # 3.10+: unregistering clears the registry's cache
            def nothing(name):
                return None
            codecs.register(nothing)
            unregister(nothing)

    def deactivate(self):
        """Put back the real __import__, streams and SIGINT handler (sys.path stays)."""
        if self._real_import is not None:
            builtins.__import__ = self._real_import
            self._real_import = None
        if self._saved is None:
            return
        stdout, stderr, saved_sigint = self._saved
        self._saved = None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        sys.stdout, sys.stderr = stdout, stderr
        if self._idna_saved is not None:
            cache, entry = self._idna_saved
            self._idna_saved = None
            if entry is _MISSING:
                cache.pop("idna", None)
            else:
                cache["idna"] = entry
        if saved_sigint is not None:
            signal.signal(signal.SIGINT, saved_sigint)
        for name, value in self._builtins_saved.items():
            setattr(builtins, name, value)
        self._builtins_saved = {}
        uuid = sys.modules.get("uuid")
        for name, value in self._uuid_saved.items():
            setattr(uuid, name, value)
        self._uuid_saved = {}

    # ----------------------------------------------------------------------------- judging
    def _depth(self):
        return getattr(self._local, "depth", 0)

    def program_side(self, globals_):
        """Whether an import executed with these globals is the program's."""
        if not isinstance(globals_, dict):
            return PY2 and self._depth() > 0
        gid = id(globals_)
        if gid in self._program_ids:
            return True
        if gid in self._standin_ids:
            return False
        name = globals_.get("__name__")
        if not isinstance(name, str):
            return False
        top = name.partition(".")[0]
        if top == "bitsnet":
            return True
        if top in SIMULATOR_MODULES:
            return False
        if name == "__main__" and gid != self._host_main:
            return True  # a __main__ the program made (bitsnet.launch runs modules in one)
        filename = globals_.get("__file__")
        if isinstance(filename, str) and self.program_dirs:
            filename = os.path.abspath(filename)
            if [d for d in self.program_dirs if filename.startswith(d)]:
                return True
        if PY2 and self._depth() > 0:
            # A module being loaded by the program's import right now, or host code that the
            # import called into (a module that was there before the import started).
            return name not in getattr(self._local, "before", ())
        return False

    def _relative(self, globals_, name, level):
        """Python 2's implicit relative import: does ``name`` resolve inside the importer's package?"""
        if not PY2 or level != -1 or not isinstance(globals_, dict):
            return False
        package = globals_.get("__package__")
        if not package:
            modname = globals_.get("__name__") or ""
            package = modname if "__path__" in globals_ else modname.rpartition(".")[0]
        if not package:
            return False
        first = name.partition(".")[0]
        key = package + "." + first
        if key in sys.modules:  # a module, or None: Python 2's mark for "not a submodule"
            return sys.modules[key] is not None
        cached = self._relative_cache.get(key)
        if cached is None:
            cached = False
            pkg = sys.modules.get(package)
            for directory in getattr(pkg, "__path__", None) or ():
                base = os.path.join(directory, first)
                if os.path.isfile(base + ".py") or os.path.isfile(base + ".pyc") or os.path.isdir(base):
                    cached = True
            self._relative_cache[key] = cached
        return cached

    def _in_boot_dirs(self, top):
        for directory in self.boot_dirs:
            base = os.path.join(directory, top)
            if os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py")):
                return True
        return False

    @staticmethod
    def _program_finder_has(name):
        """Whether a finder the program put on ``sys.meta_path`` finds ``name``'s top-level
        package (BITS's Python honours ``sys.meta_path`` as any 2.7 does; the import itself then
        finds the submodules)."""
        name = name.partition(".")[0]
        for finder in list(sys.meta_path):
            if not str(getattr(type(finder), "__module__", "")).startswith(("bitsnet.", "__main__")):
                continue
            find = getattr(finder, "find_module", None) if PY2 else getattr(finder, "find_spec", None)
            if find is not None and find(name, None) is not None:
                return True
        return False

    def refusal(self, name):
        """None if the program may import ``name``, else the ImportError to raise."""
        top = name.partition(".")[0]
        if top in ("thread", "_thread"):
            return no_module("thread")
        if top in ("threading", "_threading_local"):
            dummy = sys.modules.get("dummy_thread")
            if PY2 and dummy is not None and sys.modules.get("thread") is dummy:
                return None  # dummy_threading builds its threading over dummy_thread, as in BITS
            return no_module("thread" if PY2 else "_thread")
        if top == "bitsnet" or top in SIMULATOR_MODULES[:3]:
            return None
        if str(getattr(sys.modules.get(name), "__name__", "")).startswith("bitsnet."):
            return None  # bitsnet.install() put it there (ssl: bitsnet.ssl), as it does in BITS
        if top in self.boot_names and top not in MODELLED_BOOT:
            if self._in_boot_dirs(top):
                return None  # a stand-in on PYTHONPATH plays BITS's module (tests/fixtures/bits_fake)
            return no_module(name, " (BITS has it in /boot/python; the simulator does not)")
        if name in self.allowed and name != "encodings.idna":
            return None
        if top not in self.allowed and self._in_boot_dirs(top):
            return None  # /boot/python content given on PYTHONPATH
        if self._program_finder_has(name):
            return None  # the program's own importer (a zip in memory: bitsnet.zipmemory) has it
        if name == "encodings.idna":
            return no_module("stringprep")  # lib.zip has encodings/idna.pyc, but not what it imports
        if not PY2 and top == "encodings":
            return None  # the 3.x codecs differ from 2.7's; BITS has the whole package
        return no_module(name.rpartition(".")[2] if PY2 else name)

    # ----------------------------------------------------------------------------- the wrapper
    def _import(self, name, globals=None, locals=None, fromlist=(), level=0 if not PY2 else -1):
        real = self._real_import
        judged = globals
        if judged is None:  # __import__("x") called by hand: judge by the caller
            judged = sys._getframe(1).f_globals
        if level > 0 or not name or not self.program_side(judged) or self._relative(judged, name, level):
            if level <= 0 and name.partition(".")[0] in SIMULATOR_MODULES:
                return self._host_import(name, globals, locals, fromlist, level)
            return real(name, globals, locals, fromlist, level)
        top = name.partition(".")[0]
        if top in self.standins:
            return self._standin(name, fromlist)
        cached = self._cached(name, fromlist)
        if cached is not None:
            return cached
        error = self.refusal(name)
        if error is not None:
            raise error
        if top in SIMULATOR_MODULES:
            return self._host_import(name, globals, locals, fromlist, level)
        if fromlist:
            self._check_fromlist(name, globals, locals, fromlist, level)
        if not PY2:
            result = real(name, globals, locals, fromlist, level)
        else:
            result = self._private_copy(name)
            if result is None:
                result = self._program_import(name, globals, locals, fromlist, level)
        if fromlist or "." not in name:
            self._cache[name] = (result, sys.modules.get(name), self._generation())
        return result

    # ----------------------------------------------------------------------------- the fast path
    def _generation(self):
        """Changes when bitsnet.install() replaces the socket modules (copies may go stale)."""
        return tuple(id(sys.modules.get(name)) for name in SOCKET_FAMILY)

    def _cached(self, name, fromlist):
        """What the last program-side import of ``name`` gave, if nothing has changed since: a
        function-level ``import socket`` in a busy loop must not pay for the checks each time."""
        entry = self._cache.get(name)
        if entry is None:
            return None
        module, source, generation = entry
        if sys.modules.get(name) is not source or generation != self._generation():
            del self._cache[name]
            return None
        if fromlist:
            for item in fromlist:
                if item == "*":
                    continue
                value = getattr(module, item, None)
                if value is None or getattr(value, "__name__", None) == name + "." + item:
                    return None  # missing, or a submodule: the slow path checks it
        elif "." in name:
            return None
        return module

    # ----------------------------------------------------------------------------- Python 2.7 copies
    def _private_copy(self, name):
        """The program's own copy of host-loaded standard module ``name``, or None to import as usual.

        A module the host loaded before holds the host's os/time/threading...; BITS's program
        would have it built over BITS's. So it is loaded again under the model, kept out of
        ``sys.modules`` (the host keeps its own), and handed to every later program-side import.
        A copy holding a socket module that bitsnet.install() has since replaced is rebuilt.
        """
        if "." in name or name in NO_COPY or name not in self.allowed:
            return None
        copy = self._copies.get(name)
        if copy is not None and self._current(copy, set()):
            return copy
        host = sys.modules.get(name)
        if host is None or id(getattr(host, "__dict__", None)) in self._program_ids:
            return None
        if copy is None and not self._host_dependent(host, set()):
            return None
        del sys.modules[name]
        try:
            self._program_import(name, {"__name__": "__main__"}, None, None, -1)
            fresh = sys.modules.get(name)
        finally:
            sys.modules[name] = host
        if fresh is None or fresh is host:
            return None
        self._copies[name] = fresh
        self._program_ids[id(fresh.__dict__)] = fresh
        return fresh

    def _host_dependent(self, module, seen):
        """Whether ``module`` holds (directly or through another standard module) a REPLACED module."""
        seen.add(id(module))
        for value in list(vars(module).values()):
            if not isinstance(value, types.ModuleType) or id(value) in seen:
                continue
            name = getattr(value, "__name__", "")
            if name in REPLACED and value is sys.modules.get(name):
                return True
            if name in self.allowed and name not in NO_COPY and "." not in name and value is sys.modules.get(name) \
                    and self._host_dependent(value, seen):
                return True
        return False

    def _current(self, copy, seen):
        """False if ``copy`` holds a socket module that is no longer the one in use."""
        seen.add(id(copy))
        for value in list(vars(copy).values()):
            if not isinstance(value, types.ModuleType) or id(value) in seen:
                continue
            name = getattr(value, "__name__", "")
            if name in SOCKET_FAMILY and name in sys.modules and value is not sys.modules[name]:
                return False
            if self._copies.get(name) is value and not self._current(value, seen):
                return False
        return True

    def _host_import(self, name, globals_, locals_, fromlist, level):
        """An import of the simulator's own modules: whatever they import is the host's."""
        depth = self._depth()
        self._local.depth = 0
        try:
            return self._real_import(name, globals_, locals_, fromlist, level)
        finally:
            self._local.depth = depth

    def _program_import(self, name, globals_, locals_, fromlist, level):
        """Python 2: import, and remember the modules loaded meanwhile as the program's."""
        depth = self._depth()
        if depth == 0:
            self._local.before = set(sys.modules)
        self._local.depth = depth + 1
        try:
            return self._real_import(name, globals_, locals_, fromlist, level)
        finally:
            self._local.depth = depth
            if depth == 0:
                before = self._local.before
                self._local.before = ()
                for new in set(sys.modules) - before:
                    module = sys.modules.get(new)
                    namespace = getattr(module, "__dict__", None)
                    if isinstance(namespace, dict):
                        self._program_ids[id(namespace)] = module

    def _standin(self, name, fromlist):
        module = self.standins[name.partition(".")[0]]
        if name in ("os.path",) and fromlist:
            return module.path
        if "." in name and name != "os.path":
            raise no_module(name.rpartition(".")[2] if PY2 else name)
        return module

    def _check_fromlist(self, name, globals_, locals_, fromlist, level):
        """``from package import sub``: a submodule BITS lacks is not imported either."""
        if name not in sys.modules:
            return
        module = sys.modules[name]
        if not hasattr(module, "__path__"):
            return
        for item in fromlist:
            if item == "*":
                continue
            value = getattr(module, item, None)
            if value is not None and getattr(value, "__name__", None) != name + "." + item:
                continue  # an attribute, not a submodule
            if self.refusal(name + "." + item) is not None:
                raise ImportError("cannot import name %s" % item)
