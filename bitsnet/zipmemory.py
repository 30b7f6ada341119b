"""bitsnet.zipmemory: a zip archive held in memory, read and imported from without any file.

A lab ships a program of several modules as one ``.zip`` with a ``__main__.py`` (as CPython's
``python app.zip`` runs it). BITS can neither write the archive anywhere -- it has no writable
disk -- nor read it from memory: its built-in ``zipimport`` takes only a path it opens itself,
and its library has no ``zipfile`` (docs/bits-environment.md section 2.2). So this module
reads the archive format itself (APPNOTE.TXT: the end record, the central directory, local
headers; members stored or deflated, which ``zlib`` undoes) and imports ``.py`` members with an
importer on ``sys.meta_path``:

``ZipArchive(data, name)``   ``names()``, ``read(member)``; ``ValueError`` (one line) for what
                             is not a zip this module can read (encrypted, ZIP64, other methods)
``MemoryImporter(archive)``  finds and loads the archive's modules and packages, for Python 2.7
                             (``find_module``/``load_module``) and 3 (``find_spec``/``exec_module``);
                             ``install()`` puts it first on ``sys.meta_path``, ``uninstall()``
                             takes it and the modules it loaded out again

A module's ``__file__`` is ``NAME/member`` (``NAME``: the URL it came from) and ``get_source``
serves tracebacks their source lines. Compiled members (``.pyc``) are ignored: their format is
tied to one interpreter version. Data before the archive (a shebang line, as zipapps have) is
allowed, as CPython's zipimport allows it.
"""

import struct
import sys
import zlib

END_SIGNATURE = b"PK\x05\x06"  # end of central directory record
CENTRAL_SIGNATURE = b"PK\x01\x02"
LOCAL_SIGNATURE = b"PK\x03\x04"
END_SIZE = 22
CENTRAL_SIZE = 46
LOCAL_SIZE = 30
MAX_COMMENT = 0xFFFF  # the end record's comment length is 16 bits: search that far back
STORED, DEFLATED = 0, 8
FLAG_ENCRYPTED = 0x1
ZIP64_MARK = 0xFFFFFFFF  # a 32-bit field that says "see the ZIP64 extra field"


def is_zip(data):
    """Whether ``data`` looks like a zip archive (a local header first, or an empty archive)."""
    return data[:4] in (LOCAL_SIGNATURE, END_SIGNATURE) or (
        data.find(LOCAL_SIGNATURE, 0, 4096) > 0 and data.rfind(END_SIGNATURE) > 0)


class ZipArchive(object):
    """The members of a zip archive in ``data`` (bytes); ``name`` is what messages call it."""

    def __init__(self, data, name="<zip>"):
        self.data = data
        self.name = name
        self.members = {}  # type: dict   # member name -> (method, flags, csize, usize, crc, local offset)
        self._read_directory()

    def _fail(self, why):
        raise ValueError("%s: %s" % (self.name, why))

    def _read_directory(self):
        data = self.data
        end = data.rfind(END_SIGNATURE, max(0, len(data) - END_SIZE - MAX_COMMENT))
        if end < 0 or end + END_SIZE > len(data):
            self._fail("not a zip archive (no end of central directory record)")
        fields = struct.unpack("<4sHHHHIIH", data[end:end + END_SIZE])
        count, size, offset = fields[4], fields[5], fields[6]
        if fields[1] or fields[2]:
            self._fail("multi-disk archives are not supported")
        if ZIP64_MARK in (size, offset) or count == 0xFFFF:
            self._fail("ZIP64 archives are not supported")
        start = end - size  # where the directory really is: data may precede the archive
        if start < 0:
            self._fail("truncated (central directory out of range)")
        self.shift = start - offset
        position = start
        for _ in range(count):
            if data[position:position + 4] != CENTRAL_SIGNATURE:
                self._fail("damaged central directory at byte %d" % position)
            entry = struct.unpack("<4sHHHHHHIIIHHHHHII", data[position:position + CENTRAL_SIZE])
            flags, method, crc, csize, usize = entry[3], entry[4], entry[7], entry[8], entry[9]
            name_length, extra_length, comment_length, local = entry[10], entry[11], entry[12], entry[16]
            raw_name = data[position + CENTRAL_SIZE:position + CENTRAL_SIZE + name_length]
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            if ZIP64_MARK in (csize, usize, local):
                self._fail("%s: ZIP64 members are not supported" % name)
            self.members[name] = (method, flags, csize, usize, crc, local + self.shift)
            position += CENTRAL_SIZE + name_length + extra_length + comment_length

    def names(self):
        return sorted(self.members)

    def __contains__(self, member):
        return member in self.members

    def read(self, member):
        """The member's bytes, checked against its CRC-32; KeyError if absent, ValueError if unreadable."""
        method, flags, csize, usize, crc, local = self.members[member]
        if flags & FLAG_ENCRYPTED:
            self._fail("%s is encrypted" % member)
        header = self.data[local:local + LOCAL_SIZE]
        if len(header) < LOCAL_SIZE or header[:4] != LOCAL_SIGNATURE:
            self._fail("%s: damaged local header" % member)
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        start = local + LOCAL_SIZE + name_length + extra_length
        raw = self.data[start:start + csize]
        if len(raw) != csize:
            self._fail("%s: truncated" % member)
        if method == STORED:
            content = raw
        elif method == DEFLATED:
            try:
                content = zlib.decompress(raw, -15)  # raw deflate: no zlib header in a zip
            except zlib.error as exc:
                self._fail("%s: %s" % (member, exc))
        else:
            self._fail("%s: compression method %d is not supported (stored or deflate only)" % (member, method))
        if len(content) != usize or zlib.crc32(content) & 0xFFFFFFFF != crc:
            self._fail("%s: CRC or size mismatch" % member)
        return content


class MemoryImporter(object):
    """Imports the ``.py`` modules and packages of a ZipArchive (see the module docstring)."""

    def __init__(self, archive):
        self.archive = archive
        self.loaded = []  # type: list   # names of the modules this importer created

    # ---- where a module is
    def _member(self, fullname):
        """(member, is_package) of ``fullname``, or (None, False)."""
        path = fullname.replace(".", "/")
        if path + "/__init__.py" in self.archive:
            return path + "/__init__.py", True
        if path + ".py" in self.archive:
            return path + ".py", False
        return None, False

    def _ours(self, fullname):
        """A top-level name, or a submodule of a package this importer loaded."""
        parent = fullname.rpartition(".")[0]
        if not parent:
            return True
        module = sys.modules.get(parent)
        return module is not None and getattr(module, "__loader__", None) is self

    def _filename(self, member):
        return "%s/%s" % (self.archive.name, member)

    # ---- PEP 302 (Python 2.7)
    def find_module(self, fullname, path=None):
        if self._ours(fullname) and self._member(fullname)[0] is not None:
            return self
        return None

    def load_module(self, fullname):
        if fullname in sys.modules:
            return sys.modules[fullname]
        module = type(sys)(fullname)
        member, package = self._member(fullname)
        self._prepare(module, member, package)
        sys.modules[fullname] = module
        try:
            self._execute(module, member)
        except BaseException:
            sys.modules.pop(fullname, None)
            raise
        return sys.modules[fullname]

    # ---- PEP 451 (Python 3)
    def find_spec(self, fullname, path=None, target=None):
        if not self._ours(fullname):
            return None
        member, package = self._member(fullname)
        if member is None:
            return None
        import importlib.util
        spec = importlib.util.spec_from_loader(fullname, self, origin=self._filename(member), is_package=package)
        if package:
            spec.submodule_search_locations = [self._filename(member.rpartition("/")[0])]
        spec.has_location = True
        return spec

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        member, package = self._member(module.__name__)
        self._prepare(module, member, package)
        self._execute(module, member)

    # ---- shared
    def _prepare(self, module, member, package):
        module.__file__ = self._filename(member)
        module.__loader__ = self
        if package:
            module.__path__ = [self._filename(member.rpartition("/")[0])]
            module.__package__ = module.__name__
        else:
            module.__package__ = module.__name__.rpartition(".")[0]

    def _execute(self, module, member):
        if module.__name__ not in self.loaded:
            self.loaded.append(module.__name__)
        exec(self.get_code(module.__name__), module.__dict__)

    def get_code(self, fullname):
        member, _ = self._member(fullname)
        if member is None:
            raise ImportError("No module named %s in %s" % (fullname, self.archive.name))
        return compile(self.archive.read(member), self._filename(member), "exec", 0, True)

    def get_source(self, fullname):
        member, _ = self._member(fullname)
        if member is None:
            return None
        source = self.archive.read(member)
        return source.decode("utf-8", "replace") if sys.version_info[0] >= 3 else source

    def is_package(self, fullname):
        return self._member(fullname)[1]

    def get_filename(self, fullname):
        member, _ = self._member(fullname)
        return self._filename(member) if member else None

    # ---- on and off
    def install(self):
        sys.meta_path.insert(0, self)
        return self

    def uninstall(self):
        """Off ``sys.meta_path``, and the modules it loaded out of ``sys.modules``: the next
        archive may bring modules of the same names."""
        while self in sys.meta_path:
            sys.meta_path.remove(self)
        prefixes = tuple(name + "." for name in self.loaded)
        for name, module in list(sys.modules.items()):
            if getattr(module, "__loader__", None) is self:
                del sys.modules[name]
            elif module is None and name.startswith(prefixes):
                del sys.modules[name]  # 2.7's mark of a failed implicit relative import in our package
        del self.loaded[:]
