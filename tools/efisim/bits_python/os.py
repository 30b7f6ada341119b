"""os as BITS has it: a small module over the GRUB environment and GRUB's file system.

docs/bits-environment.md section 4. The public names are BITS's, no more: no strerror, urandom,
getpid, fd I/O, remove/rename/mkdir, linesep. ``environ`` is not a dict: it reads and writes
the environment (here the host process's, in BITS GRUB's) and cannot be iterated.
``getcwd()`` is always ``'/'``; ``stat`` reports only the type and the size.
"""

import os as _host_os
import posixpath as _host_posixpath
import stat as _host_stat
import sys  # noqa: F401  (BITS's os has os.sys)
import types as _types

name = "posix"
curdir = "."
pardir = ".."
extsep = "."
sep = "/"
pathsep = ":"
defpath = ":/bin:/usr/bin"
altsep = None
devnull = "/dev/null"
error = OSError


def _make_path():
    """lib.zip's posixpath minus what GRUB cannot do, with abspath relative to getcwd() == '/'."""
    module = _types.ModuleType("posixpath", _host_posixpath.__doc__)
    module.__dict__.update((k, v) for k, v in vars(_host_posixpath).items() if not k.startswith("__"))
    for gone in ("samefile", "sameopenfile", "samestat", "ismount"):
        module.__dict__.pop(gone, None)
    module.expanduser = lambda path: path

    def abspath(path):
        return _host_posixpath.normpath(_host_posixpath.join("/", path))

    module.abspath = abspath
    return module


path = _make_path()


def _get_exports_list(module):
    """The public names of ``module`` (the stdlib's socket.py calls this, as on any os)."""
    try:
        return list(module.__all__)
    except AttributeError:
        return [n for n in dir(module) if n[0] != "_"]


def getcwd():
    return "/"


def getcwdu():
    return u"/"


def listdir(directory):
    return _host_os.listdir(directory)


class stat_result(tuple):
    """What BITS's stat returns: mode and size; every other field is 0 (GRUB has no more)."""

    __slots__ = ()
    _fields = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime",
               "st_ctime")

    def __new__(cls, fields):
        return tuple.__new__(cls, tuple(fields))

    def __repr__(self):
        return "stat_result(%s)" % ", ".join("%s=%r" % pair for pair in zip(self._fields, self))

    st_mode = property(lambda self: self[0])
    st_ino = property(lambda self: self[1])
    st_dev = property(lambda self: self[2])
    st_nlink = property(lambda self: self[3])
    st_uid = property(lambda self: self[4])
    st_gid = property(lambda self: self[5])
    st_size = property(lambda self: self[6])
    st_atime = property(lambda self: self[7])
    st_mtime = property(lambda self: self[8])
    st_ctime = property(lambda self: self[9])


def stat(filename):
    host = _host_os.stat(filename)
    if _host_stat.S_ISDIR(host.st_mode):
        mode, size = _host_stat.S_IFDIR | 0o777, 0
    else:
        mode, size = _host_stat.S_IFREG | 0o777, host.st_size
    return stat_result((mode, 0, 0, 0, 0, 0, size, 0, 0, 0))


lstat = stat


def getenv(key, default=None):
    return _host_os.environ.get(key, default)


def putenv(key, value):
    _host_os.environ[key] = value


def unsetenv(key):
    _host_os.environ.pop(key, None)


class _Environ(object):
    """The environment as a mapping that is not a dict and has no __iter__ (as in BITS)."""

    def __getitem__(self, key):
        if not isinstance(key, str):
            raise TypeError("must be string, not %s" % type(key).__name__)
        try:
            return _host_os.environ[key]
        except KeyError:
            raise KeyError()

    def __setitem__(self, key, value):
        putenv(key, value)

    def __delitem__(self, key):
        if key not in _host_os.environ:
            raise KeyError()
        unsetenv(key)

    def __contains__(self, key):
        return key in _host_os.environ

    def has_key(self, key):
        return key in self

    def get(self, key, default=None):
        return getenv(key, default)

    def keys(self):
        return list(_host_os.environ.keys())

    def items(self):
        return list(_host_os.environ.items())

    def values(self):
        return list(_host_os.environ.values())

    def update(self, other=(), **kw):
        pairs = other.items() if hasattr(other, "items") else other
        for key, value in list(pairs) + list(kw.items()):
            self[key] = value

    def copy(self):
        return dict(self.items())

    def clear(self):
        for key in self.keys():
            unsetenv(key)

    def __repr__(self):
        return repr(self.copy())


environ = _Environ()
