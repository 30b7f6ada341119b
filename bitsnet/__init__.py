"""bitsnet: the standard socket and select modules for Python in UEFI firmware.

``install()``       make ``import socket`` / ``import select`` (and everything built on them:
                    httplib, urllib2, SocketServer, selectors...) use bitsnet
``configure(...)``  give the NIC a static address instead of DHCP (``ipconfig.configure``), or
                    ``configure(dns=[...])``: only the DNS servers
``interfaces()``    what the network interfaces look like (``ipconfig.interfaces``); starts DHCP
                    (without waiting) if the NIC has no address yet

Importing this package touches no firmware: the NIC is found and DHCP runs when the first
socket needs an address (or when ``configure``/``interfaces`` is called). It completes the
``errno`` module first (``bitsnet.errnos``: BITS's has only GRUB's nine names).
"""

from __future__ import absolute_import

import sys
import types

# First of all: complete the errno module (BITS's has 9 GRUB names and no network codes), so
# that every bitsnet module, and user code after ``import socket``, may use errno.E* names.
from bitsnet import errnos  # noqa: F401

__version__ = "0.1.0"

# Modules that never get purged by install(): bitsnet and BITS's own, the interpreter's
# machinery, and host-side modules whose users need the real OS select/socket (subprocess pipes,
# logging handlers already created). In BITS none of these use the network. A host program that
# must keep more (a test harness, a firmware simulator) declares it in the package itself:
# ``__bitsnet_keep__ = True`` at the top of the package (see install()).
_KEEP_PREFIXES = ("bitsnet", "efi", "_efi", "_bitsnet_trampoline", "sys", "builtins",
                  "__builtin__", "__main__", "os", "io", "_io", "importlib", "encodings", "codecs",
                  "threading", "subprocess", "multiprocessing", "concurrent", "logging", "_ssl",
                  "runpy", "ctypes", "warnings", "weakref", "gc", "site", "abc", "types", "functools",
                  "collections", "enum", "errno", "signal")
# ``ssl`` is not kept: one imported before install() builds its SSLSocket on the C socket class,
# so it is rebuilt on bitsnet's like any other module on top of ``socket`` (the C ``_ssl`` stays).
# Always replaced (if imported): the modules whose whole job is sockets.
_SOCKET_MODULES = ("socket", "selectors")
_RETIRED = []  # type: list   # modules taken out of sys.modules by install(), kept alive
_HOST_SOCKET = []  # type: list   # the interpreter's C _socket, if it had one (bitsnet.hostssl's socket pairs)


def _kept(name):
    top = name.split(".", 1)[0]
    if top in _KEEP_PREFIXES:
        return True
    try:
        return getattr(sys.modules.get(top), "__bitsnet_keep__", False) is True
    except Exception:  # a lazy module object may raise anything from getattr
        return False


def _dependants(replaced):
    """Every imported module that refers, directly or through another such module, to one of
    the ``replaced`` module objects or to a class/function defined in one of them. (A package
    whose submodule is purged stays: re-importing the submodule sets its attribute again.)"""
    doomed = {}  # name -> module
    bad_modules = dict((id(m), name) for name, m in replaced.items() if m is not None)
    bad_names = set(replaced)
    changed = True
    while changed:
        changed = False
        for name, module in list(sys.modules.items()):
            if module is None or name in doomed or name in replaced or _kept(name):
                continue
            if name.rpartition(".")[0] in doomed:
                # A package re-imported afresh expects to load its submodules afresh too
                # (asyncio/__init__.py reads the attributes that loading them sets).
                doomed[name] = module
                bad_modules[id(module)] = name
                bad_names.add(name)
                changed = True
                continue
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            own = name + "."
            for value in list(namespace.values()):
                if isinstance(value, types.ModuleType) and getattr(value, "__name__", "").startswith(own):
                    continue  # a package's own submodule is not something it depends on
                try:
                    origin = getattr(value, "__module__", None)
                except Exception:
                    origin = None
                if id(value) in bad_modules or (isinstance(origin, str) and origin in bad_names):
                    doomed[name] = module
                    bad_modules[id(module)] = name
                    bad_names.add(name)
                    changed = True
                    break
    return doomed


def install():
    """Make ``_socket`` and ``select`` resolve to bitsnet's; idempotent.

    If ``socket``, ``selectors``, ``select`` or modules built on them (socketserver, http.client,
    urllib.request, asyncio...) were imported before, they are taken out of ``sys.modules``
    (found by what they refer to), so the next import builds them afresh on bitsnet; ``socket``
    and ``selectors`` are imported again at once. Modules that hold the OS's select for their
    own pipes (``subprocess``) are left alone, and so is every module of a top-level package
    that sets ``__bitsnet_keep__ = True`` (a test harness or simulator that runs on the host's
    sockets declares itself so). References a program already holds
    (``from socket import socket``) cannot be updated: call ``install()`` first.
    """
    from bitsnet import _socket as bitsnet_socket
    from bitsnet import select as bitsnet_select
    if sys.modules.get("_socket") is bitsnet_socket and sys.modules.get("select") is bitsnet_select:
        return
    # The C _ssl module, on first import, reads the C _socket's CAPI capsule, which bitsnet's
    # _socket cannot have (and TLS cannot run over a Python socket anyway). Load it now against the real _socket if
    # there is one (a host; BITS has no _ssl), so that socket.py's "import _ssl" finds it ready; otherwise make it a
    # clean ImportError.
    if "_ssl" not in sys.modules:
        if getattr(sys.modules.get("_socket"), "CAPI", None) is not None:
            try:
                import _ssl  # noqa: F401
            except ImportError:
                pass
        if "_ssl" not in sys.modules:
            sys.modules["_ssl"] = None  # type: ignore[assignment]
    replaced = dict((name, sys.modules.get(name)) for name in ("_socket", "select") + _SOCKET_MODULES)
    if getattr(replaced["_socket"], "CAPI", None) is not None:
        _HOST_SOCKET[:] = [replaced["_socket"]]
    doomed = _dependants(replaced)
    for name in list(replaced) + list(doomed):
        module = sys.modules.pop(name, None)
        if module is not None:
            # Python 2 clears a module's globals to None when the module object dies, which
            # would break functions the program still holds (SocketServer.TCPServer.__init__).
            _RETIRED.append(module)
    sys.modules["_socket"] = bitsnet_socket
    sys.modules["select"] = bitsnet_select
    try:
        # has_ipv6 (see _socket): one LocateHandle, before socket.py copies the value below.
        bitsnet_socket._probe_ipv6()
    except Exception:
        bitsnet_socket.has_ipv6 = False  # no firmware to ask (a host without efi): stays False
    for name in _SOCKET_MODULES:
        if replaced.get(name) is not None:
            __import__(name)
    if sys.version_info[0] == 2:  # makefile()/urllib2 reads that copy each byte once (its docstring)
        from bitsnet import fileobject
        fileobject.install()
    _complete_os()
    _install_ssl()


def _complete_os():
    """BITS quirk: BITS's ``os`` has no ``unlink`` (docs/bits-environment.md section 4), and
    Python 2's ``urllib.URLopener.__init__`` keeps ``os.unlink`` (to delete the temporary files
    ``urlretrieve`` makes), so ``urllib.urlopen`` failed before it connected. ``os`` gets an
    ``unlink`` that raises ENOSYS: GRUB's file systems delete nothing."""
    import os
    if hasattr(os, "unlink"):
        return

    def unlink(path):
        """unlink(path): GRUB cannot delete files; always OSError(ENOSYS) (added by bitsnet)."""
        import errno
        raise OSError(errno.ENOSYS, "Function not implemented (GRUB deletes no files)", path)
    os.unlink = unlink


def _install_ssl():
    """``ssl`` is bitsnet.ssl (TLS through the firmware's EFI_TLS_PROTOCOL, docs/tls.md) where
    the interpreter has none -- BITS, or the simulator's model of it. An interpreter with its own
    (a host) keeps it, taught to wrap bitsnet sockets (bitsnet.hostssl): HTTPS works through
    bitsnet either way."""
    if getattr(sys.modules.get("ssl"), "__name__", None) == "bitsnet.ssl":
        return
    try:
        import ssl  # (judged as the program's import under the simulator's BITS model)
    except ImportError:
        ssl = None
    if ssl is not None:
        if _HOST_SOCKET and getattr(ssl, "SSLContext", None) is not None:
            from bitsnet import hostssl
            hostssl.patch(ssl, _HOST_SOCKET[0])
        return
    from bitsnet import ssl as bitsnet_ssl
    if sys.modules.get("ssl") is not None:
        _RETIRED.append(sys.modules["ssl"])
    sys.modules["ssl"] = bitsnet_ssl


def installed():
    """Whether ``install()`` is in effect."""
    module = sys.modules.get("_socket")
    return module is not None and module.__name__ == "bitsnet._socket"


def configure(address=None, netmask=None, gateway=None, dns=()):
    """Static IPv4 configuration for the default NIC (instead of DHCP). ``configure(dns=[...])``
    alone sets only the DNS servers and keeps the address, DHCP's included."""
    from bitsnet import ipconfig
    return ipconfig.configure(address, netmask, gateway, dns)


def interfaces():
    """A list of dicts {name, mac, address, netmask, gateway, dns, ipv6}, one per NIC; ipv6 is
    a list of (address, prefix length) from IP6 Config, empty when the firmware has no IPv6.

    If the default NIC has no address yet, this starts DHCP on it and returns at once (address
    None): call it again until the address shows. Raises error(EIO) if the firmware timer does
    not tick (DHCP could not finish; see ``ipconfig.check_timer``)."""
    from bitsnet import ipconfig
    return ipconfig.interfaces(start=True)
