"""The OVMF firmware a boot uses: the catalogue of EDK2 generations, fetched from Debian's archive.

    python3 tools/ovmf.py [NAME | CODE,VARS ...]   fetch (once) and print each firmware's two files
    python3 tools/ovmf.py --list                   the catalogue and what is cached

Catalogue   ``GENERATIONS``: one entry per EDK2 generation a user's machine may carry, named by its
            EDK2 release (2020.11 from Debian 11 "bullseye", 2022.11 from 12 "bookworm", 2025.02
            from 13 "trixie", 2026.08 from "sid", where the firmware moved to ``ovmf-generic`` and
            ``ovmf`` became an empty transitional package).  Every one of them ships the plain
            (no Secure Boot) 4 MiB pair ``OVMF_CODE_4M.fd`` + ``OVMF_VARS_4M.fd``; 2020.11 also
            still has the 2 MiB pair, which later releases dropped -- the 4M pair is the one we use
            everywhere (docs/edk2.md section 10).
Resolving   ``resolve(spec)``: None is the machine's own ``ovmf`` package (/usr/share/OVMF, what
            every tool booted before the catalogue existed); a NAME is that generation, taken from
            the machine's own package when it is that version, else fetched; ``CODE,VARS`` is a
            user's pair of files.  A ``Firmware`` says which files, which version and from where.
Fetching    ``fetch(name)``: ``apt-get download`` with an apt configuration of our own (sources
            list, package lists, download cache and an empty dpkg status, all under
            ~/.cache/bitsnet/ovmf/apt/SUITE), so the machine's apt setup and state are never
            touched; the archive's address comes from the machine's own apt sources (the first
            entry that serves a release suite), its key ring from the same entry.  The package is
            unpacked with ``dpkg-deb -x`` into ~/.cache/bitsnet/ovmf/NAME once; later calls find it
            there, and the apt folder, tens of MB of package lists, is removed.  A lock file
            keeps two test processes from fetching the same one at once.
"""

from __future__ import print_function

import argparse
import fcntl
import glob
import os
import pwd
import re
import shutil
import subprocess
import sys

SYSTEM_DIR = "/usr/share/OVMF"
CODE_NAME = "OVMF_CODE_4M.fd"  # plain: no Secure Boot (.secboot/.ms/.snakeoil are the other builds)
VARS_NAME = "OVMF_VARS_4M.fd"  # an empty variable store: no enrolled keys
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                     "bitsnet", "ovmf")
SOURCES = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")) + \
    sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
MIRROR_ENV = "BITSNET_DEBIAN_MIRROR"  # overrides the archive address found in the apt sources


class Generation(object):
    """One catalogue entry: the EDK2 release ``name``, the Debian ``suite`` and ``package`` that
    carry it, ``needs_rng`` (its network stack starts only with an EFI_RNG_PROTOCOL: EDK2 since
    2024, docs/edk2.md section 10) and ``has_tcp6`` (the build includes the IPv6 stack's TCP)."""

    def __init__(self, name, suite, package, needs_rng, has_tcp6):
        self.name = name
        self.suite = suite
        self.package = package
        self.needs_rng = needs_rng
        self.has_tcp6 = has_tcp6

    def __repr__(self):
        return "Generation(%r, %s/%s)" % (self.name, self.suite, self.package)


GENERATIONS = [
    Generation("2020.11", "bullseye", "ovmf", needs_rng=False, has_tcp6=False),
    Generation("2022.11", "bookworm", "ovmf", needs_rng=False, has_tcp6=True),
    Generation("2025.02", "trixie", "ovmf", needs_rng=True, has_tcp6=True),
    Generation("2026.08", "sid", "ovmf-generic", needs_rng=True, has_tcp6=True),
]
BY_NAME = dict((g.name, g) for g in GENERATIONS)
NAMES = [g.name for g in GENERATIONS]


class FirmwareError(Exception):
    """The firmware cannot be found, fetched or unpacked."""


class Firmware(object):
    """The two files QEMU boots (``code`` read-only, ``vars`` the template of the NV store that
    every boot copies), the generation's ``name`` (None for a user's pair), ``version`` (the Debian
    package version, None if unknown) and ``origin`` ("system", "cache" or "user")."""

    def __init__(self, code, vars, name=None, version=None, origin="user"):
        self.code = code
        self.vars = vars
        self.name = name
        self.version = version
        self.origin = origin

    @property
    def generation(self):
        """The catalogue entry (None for a user's pair the catalogue does not name)."""
        if self.name in BY_NAME:
            return BY_NAME[self.name]
        if self.version:
            return BY_NAME.get(self.version.split("-")[0].split("+")[0])
        return None

    @property
    def label(self):
        return self.name or self.version or os.path.dirname(self.code)

    def __repr__(self):
        return "Firmware(%s, %s, %s)" % (self.label, self.code, self.origin)


# ------------------------------------------------------------------------------------------ resolving

def system_version():
    """The machine's own ``ovmf`` package version (None: not installed or no dpkg)."""
    try:
        with open(os.devnull, "wb") as devnull:
            out = subprocess.check_output(["dpkg-query", "-W", "-f", "${Status} ${Version}", "ovmf"],
                                          stderr=devnull)
    except (OSError, subprocess.CalledProcessError):
        return None
    words = out.decode("ascii", "replace").split()
    if len(words) >= 4 and words[2] == "installed":
        return words[3]
    return None


def system():
    """The machine's own OVMF (what the tools boot without ``--ovmf``)."""
    return Firmware(os.path.join(SYSTEM_DIR, CODE_NAME), os.path.join(SYSTEM_DIR, VARS_NAME),
                    version=system_version(), origin="system")


def _upstream(version):
    return re.split(r"[-+~]", version or "", 1)[0]


def resolve(spec=None, install=True):
    """The Firmware for ``spec`` (None, a catalogue NAME, or "CODE,VARS"); fetched on first use
    when ``install``, else FirmwareError when not cached."""
    if spec is None or spec == "system":
        return system()
    if isinstance(spec, Firmware):
        return spec
    if "," in spec:
        code, vars_template = [os.path.abspath(os.path.expanduser(p.strip())) for p in spec.split(",", 1)]
        for path in (code, vars_template):
            if not os.path.isfile(path):
                raise FirmwareError("no firmware file %s" % path)
        return Firmware(code, vars_template, origin="user")
    if spec not in BY_NAME:
        raise FirmwareError("unknown firmware %r: give one of %s, or CODE,VARS (two paths)"
                            % (spec, ", ".join(NAMES)))
    mine = system()
    if _upstream(mine.version) == spec and os.path.isfile(mine.code) and os.path.isfile(mine.vars):
        mine.name = spec
        return mine
    directory = cached(spec)
    if directory is None:
        if not install:
            raise FirmwareError("OVMF %s is not in %s (run tools/ovmf.py %s)" % (spec, CACHE, spec))
        directory = fetch(spec)
    return _from_cache(spec, directory)


def cached(name):
    """The unpacked directory of ``name`` in the cache, or None."""
    directory = os.path.join(CACHE, name)
    if os.path.isfile(os.path.join(directory, "VERSION")):
        return directory
    return None


def _from_cache(name, directory):
    with open(os.path.join(directory, "VERSION")) as handle:
        version = handle.read().strip()
    code = os.path.join(directory, "usr", "share", "OVMF", CODE_NAME)
    vars_template = os.path.join(directory, "usr", "share", "OVMF", VARS_NAME)
    for path in (code, vars_template):
        if not os.path.isfile(path):
            raise FirmwareError("%s: %s is missing (remove the folder to fetch again)" % (directory, path))
    return Firmware(code, vars_template, name=name, version=version, origin="cache")


# ------------------------------------------------------------------------------------------ fetching

def _stanzas(text):
    """deb822 paragraphs of a .sources file as dicts (field names lower-case)."""
    found, current, key = [], {}, None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if current:
                found.append(current)
            current, key = {}, None
        elif line.startswith("#"):
            continue
        elif line[0] in " \t" and key:
            current[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            current[key] = value.strip()
    return found


def apt_entries(paths=None):
    """[(uri, suites, signed_by or None)] for every ``deb`` entry of the machine's apt sources."""
    entries = []
    for path in SOURCES if paths is None else paths:
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError):
            continue
        if path.endswith(".sources"):
            for stanza in _stanzas(text):
                if "deb" not in stanza.get("types", "").split() or stanza.get("enabled", "yes") == "no":
                    continue
                for uri in stanza.get("uris", "").split():
                    entries.append((uri, stanza.get("suites", "").split(), stanza.get("signed-by")))
            continue
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            words, signed = words[1:], None
            if words and words[0].startswith("["):
                options = []
                while words:
                    options.append(words.pop(0))
                    if options[-1].endswith("]"):
                        break
                for option in " ".join(options).strip("[]").split():
                    if option.startswith("signed-by="):
                        signed = option.split("=", 1)[1]
            if len(words) >= 2:
                entries.append((words[0], [words[1]], signed))
    return entries


def mirror(paths=None):
    """(uri, signed_by) of Debian's archive as this machine's apt sources name it: the first
    entry that serves a release suite (a suite name without '-': not -security, -updates...)."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV], None
    for uri, suites, signed in apt_entries(paths):
        if uri.startswith(("http://", "https://")) and any("-" not in s and "/" not in s for s in suites):
            if signed and not signed.startswith("/"):
                signed = None  # an inline key block: apt's default key rings are used instead
            return uri, signed
    raise FirmwareError("no Debian archive in the apt sources (%s); set %s to one"
                        % (", ".join(SOURCES), MIRROR_ENV))


def _apt_options(state):
    """apt's configuration pointed at ``state`` for everything it reads or writes."""
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = "root"
    return ["-o", "Dir::Etc::SourceList=" + os.path.join(state, "sources.list"),
            "-o", "Dir::Etc::SourceParts=" + os.path.join(state, "sources.list.d"),
            "-o", "Dir::Etc::Preferences=" + os.path.join(state, "preferences"),
            "-o", "Dir::Etc::PreferencesParts=" + os.path.join(state, "preferences.d"),
            "-o", "Dir::State::Lists=" + os.path.join(state, "lists"),
            "-o", "Dir::State::status=" + os.path.join(state, "status"),
            "-o", "Dir::Cache=" + os.path.join(state, "cache"),
            "-o", "Debug::NoLocking=1",
            # the download goes into our own folder: apt's unprivileged _apt user cannot write there
            "-o", "APT::Sandbox::User=" + user]


def fetch(name, out=None):
    """Download and unpack generation ``name`` into the cache (once); its directory."""
    generation = BY_NAME[name]
    say = out or (lambda text: print(text, file=sys.stderr))
    if not os.path.isdir(CACHE):
        os.makedirs(CACHE)
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if cached(name):  # another process fetched it while we waited
                return cached(name)
            return _fetch(generation, say)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fetch(generation, say):
    for tool in ("apt-get", "dpkg-deb"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep)):
            raise FirmwareError("fetching OVMF %s needs %s (Debian's apt and dpkg)" % (generation.name, tool))
    uri, signed = mirror()
    state = os.path.join(CACHE, "apt", generation.suite)
    for sub in ("sources.list.d", "preferences.d", "lists/partial", "cache/archives/partial", "download"):
        if not os.path.isdir(os.path.join(state, sub)):
            os.makedirs(os.path.join(state, sub))
    with open(os.path.join(state, "sources.list"), "w") as handle:
        handle.write("deb %s%s %s main\n" % ("[signed-by=%s] " % signed if signed else "", uri, generation.suite))
    with open(os.path.join(state, "status"), "w"):
        pass  # no package is installed, as far as this apt knows
    options = _apt_options(state)
    say("ovmf: fetching OVMF %s (%s from %s %s)" % (generation.name, generation.package, generation.suite, uri))
    download = os.path.join(state, "download")
    for stale in os.listdir(download):
        os.remove(os.path.join(download, stale))
    try:  # apt-get update only warns when the archive cannot be reached; the download then fails
        _apt(["apt-get", "-q"] + options + ["update"], state)
        _apt(["apt-get", "-q"] + options + ["download", generation.package], state, cwd=download)
    except FirmwareError as exc:
        origin = "$" + MIRROR_ENV if os.environ.get(MIRROR_ENV) else "the apt sources"
        raise FirmwareError("%s\n(the archive %s came from %s; set %s to a Debian archive that has %s)"
                            % (exc, uri, origin, MIRROR_ENV, generation.suite))
    debs = [f for f in os.listdir(download) if f.endswith(".deb")]
    if len(debs) != 1:
        raise FirmwareError("apt-get download %s gave %r" % (generation.package, debs))
    deb = os.path.join(download, debs[0])
    version = subprocess.check_output(["dpkg-deb", "-f", deb, "Version"]).decode("ascii").strip()
    if _upstream(version) != generation.name:
        raise FirmwareError("%s in %s is now %s, not %s: the catalogue needs updating (tools/ovmf.py)"
                            % (generation.package, generation.suite, version, generation.name))
    target = os.path.join(CACHE, generation.name)
    partial = target + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.check_call(["dpkg-deb", "-x", deb, partial])
    with open(os.path.join(partial, "VERSION"), "w") as handle:
        handle.write(version + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.rename(partial, target)
    shutil.rmtree(state, ignore_errors=True)  # the package lists (tens of MB) are not needed again
    _from_cache(generation.name, target)  # both files are there
    say("ovmf: OVMF %s is %s, unpacked in %s" % (generation.name, version, target))
    return target


def _apt(command, state, cwd=None):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = proc.communicate()[0].decode("utf-8", "replace")
    if proc.returncode != 0:
        raise FirmwareError("%s failed (exit %d):\n%s" % (" ".join(command[:2] + command[-2:]), proc.returncode,
                                                         output[-2000:]))
    return output


# ------------------------------------------------------------------------------------------ command line

def main(argv=None):
    parser = argparse.ArgumentParser(prog="ovmf.py", description=__doc__.split("\n")[0])
    parser.add_argument("firmware", nargs="*", help="%s, or CODE,VARS (default: the machine's own)"
                        % " ".join(NAMES))
    parser.add_argument("--list", action="store_true", help="the catalogue and what is cached")
    args = parser.parse_args(argv)
    if args.list:
        mine = system()
        print("system   %s (%s)" % (mine.version or "not installed", SYSTEM_DIR))
        for g in GENERATIONS:
            where = cached(g.name)
            print("%-8s %s/%s%s%s" % (g.name, g.suite, g.package, ", needs an RNG" if g.needs_rng else "",
                                      ", cached in " + where if where else ""))
        return 0
    status = 0
    for spec in args.firmware or [None]:
        try:
            firmware = resolve(spec)
        except FirmwareError as exc:
            print("ovmf: %s" % exc, file=sys.stderr)
            status = 1
            continue
        print("%s %s %s %s %s" % (firmware.label, firmware.version, firmware.origin, firmware.code, firmware.vars))
    return status


if __name__ == "__main__":
    sys.exit(main())
