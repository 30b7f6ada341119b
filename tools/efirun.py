#!/usr/bin/env python
"""Run a Python script, module or command "at the BITS boot prompt" of a simulated machine.

    python tools/efirun.py [OPTIONS] (SCRIPT | -m MODULE | -c CODE) [ARGS...]

What the code sees is what it would see in BITS: ``import efi`` gives the stand-in of BITS's
``efi`` module (``tools/efisim/boot_python`` plays ``/boot/python``, first on ``sys.path``),
``efi.system_table`` is the simulated firmware's, and a NIC with EDK2's network drivers is
there to be used. Order of events:

1. ``sys.path`` gets ``tools/efisim/boot_python``, the repository root (for ``bitsnet``) and
   ``tools`` (for ``efisim``) in front (and, with ``--host-stdlib`` only, the script's directory
   or ``''`` as Python itself would put them).
2. The machine boots (``efisim.machine.boot``) with the options below.
3. BITS's Python is put in place for the program (``bitsenv.BitsEnvironment.activate``; not
   with ``--host-stdlib``): see below.
4. ``efisim.trampoline_build.ensure_trampoline()`` compiles/loads ``_bitsnet_trampoline``
   (unless ``--no-trampoline``), so bitsnet picks the trampoline mode, as in a BITS build
   that has it compiled in.
5. ``bitsnet.install()`` puts bitsnet's ``_socket``/``select`` in place (unless
   ``--no-install``), as BITS's startup would.
6. The code runs as ``__main__`` with ``sys.argv`` set as Python itself would set it;
   ``SystemExit`` is honoured and the exit code is the script's (an uncaught exception prints
   its traceback and exits 1).
7. bitsnet's own cleanup runs if bitsnet was used (graceful closes finish, pooled events are
   closed), BITS's Python is taken away again, the ledger is printed with ``--ledger`` (and the
   faults that fired with ``--faults``), and the machine shuts down.

With ``--lab``, before step 2 the peer servers of ``tools/lab.py`` (HTTP, TCP and UDP echo,
DNS) start in this process on 127.0.0.1 with free ports; the machine's DHCP hands out the
lab's DNS server, ``BITSNET_LAB=127.0.0.1:<http port>`` is put in the environment (the
default ``--peer`` of ``bitsnet.selftest``), one line ``efirun: lab on ...`` goes to stderr,
and the lab stops after step 7. So ``efirun.py --lab -m bitsnet.selftest`` needs nothing else.

BITS's Python (docs/bits-environment.md, ``tools/efisim/bitsenv.py``): by default the program
gets BITS's environment instead of the host's complete Python: BITS's ``errno`` (nine names,
GRUB's values), ``os``, ``time``, ``random``, ``signal`` and ``tempfile``; only the modules BITS
has (``ImportError`` for the rest, ``threading`` included); ``sys.path`` without ``''`` and the
script's directory (a script cannot import the modules beside it; directories on ``PYTHONPATH``
play extra ``/boot/python`` content); a ``sys.stdout``/``sys.stderr`` with only ``write`` and
``flush``; and Ctrl-C raising ``KeyError((0, u'\x03', 0))`` as on BITS's serial console. The
simulator itself keeps the host's Python. ``--host-stdlib`` (or ``BITSNET_SIM_PYTHON=host`` in
the environment) runs the program on the host's complete Python instead: for programs that
inspect the simulator (``import efisim``) or need what BITS lacks (``json``, ``threading``,
``asyncio``...).

``sys.platform`` is deliberately NOT faked: it stays the host's (``linux``), while in BITS it
is ``"BITS-EFI"``. Faking it would send the standard library down code paths for a platform it
does not know; code that must tell BITS from the host should test for the ``efi`` module.
"""

from __future__ import print_function

import argparse
import os
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BOOT_PYTHON = os.path.join(HERE, "efisim", "boot_python")
CLEANUP_TIMEOUT = 10.0  # seconds for bitsnet's background graceful closes (TIME_WAIT is 2 s, docs/edk2.md section 3.3)
LAB_HOST = "127.0.0.1"
LAB_ENV = "BITSNET_LAB"  # HOST:PORT of the lab's HTTP server; bitsnet.selftest's default --peer
MODEL_ENV = "BITSNET_SIM_PYTHON"  # "bits": the program gets BITS's Python environment; "host": the host's
MODEL_DEFAULT = "bits"

EPILOG = """\
The machine: one NIC (eth0) with IP4 Config2 (policy Static, no address, until DHCP is
started), TCP4, and UDP4/DNS4 when those drivers exist. DHCP hands out --address with
--gateway as router and --dns-server as DNS option. All traffic is on the host loopback.

--lab: the peers of tools/lab.py (HTTP, TCP+UDP echo, DNS) run in this process on 127.0.0.1;
DHCP hands out their DNS server (after any --dns-server), BITSNET_LAB=127.0.0.1:<http port> is
set for the program (bitsnet.selftest's default --peer). Main job:
    python3 tools/efirun.py --lab -m bitsnet.selftest

BITS's Python (the default): the program gets BITS's environment (BITS's errno/os/time/random,
only BITS's modules, no threads, no script directory on sys.path -- PYTHONPATH directories play
/boot/python --, stdout with only write/flush, Ctrl-C raising KeyError; docs/bits-environment.md).
--host-stdlib (or BITSNET_SIM_PYTHON=host) runs it on the host's complete Python instead.

sys.platform is NOT faked (it stays the host's; BITS says "BITS-EFI"): test for the efi
module instead.

Exit status: the script's own (SystemExit honoured); 1 for an uncaught exception; 2 for a
usage error.
"""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="efirun.py",
        usage="%(prog)s [OPTIONS] (SCRIPT | -m MODULE | -c CODE) [ARGS...]",
        description="Run Python code at the BITS boot prompt of a simulated UEFI machine.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group("what to run (the first of these ends the options)")
    what.add_argument("-m", dest="module", metavar="MODULE", help="run library module MODULE as a script")
    what.add_argument("-c", dest="code", metavar="CODE", help="run the program passed in as a string")
    what.add_argument("argv", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                      help="the script file and its arguments")
    net = parser.add_argument_group("the machine")
    net.add_argument("--address", metavar="A.B.C.D/N", default="127.0.0.2/8",
                     help="address DHCP hands out, or the static address (loopback only; default %(default)s)")
    net.add_argument("--gateway", metavar="A.B.C.D", default="127.0.0.1", help="router (default %(default)s)")
    net.add_argument("--static", action="store_true",
                     help="address preconfigured at boot (policy Static + ManualAddress + Gateway + DnsServer)")
    net.add_argument("--dhcp-delay", type=float, metavar="SECONDS", default=None,
                     help="seconds from DHCP start to lease (default 0.3; OVMF on QEMU takes about 4)")
    net.add_argument("--no-dhcp", action="store_true",
                     help="the DHCP server never answers (EDK2 gives up after about 60 s, configures nothing)")
    net.add_argument("--dns-server", action="append", metavar="HOST:PORT", default=[],
                     help="DNS server handed out by DHCP (repeatable); DHCP carries the host, PORT is where "
                          "the simulated server really listens")
    net.add_argument("--no-dns4", action="store_true",
                     help="no EFI_DNS4_PROTOCOL (as on most vendor firmware and default OVMF)")
    net.add_argument("--no-ipv6", action="store_true",
                     help="no IP6 Config, TCP6 or UDP6 (firmware built without NETWORK_IP6_ENABLE)")
    net.add_argument("--ipv6-delay", type=float, metavar="SECONDS", default=None,
                     help="seconds SLAAC (policy Automatic) or DAD (a manual address) takes until ::1 is usable "
                          "(default 0.3)")
    net.add_argument("--ipv6-policy", default="manual", metavar="POLICY", choices=("manual", "automatic", "static"),
                     help="IP6 Config at boot: manual (EDK2's default: link-local only), automatic (SLAAC gives "
                          "::1), static (manual address ::1 already set)")
    net.add_argument("--ipv6-dns-server", action="append", metavar="[::1]:PORT", default=[],
                     help="IPv6 DNS server the router advertises (repeatable; IP6 Config DnsServer under "
                          "--ipv6-policy automatic or static); PORT is where the simulated server listens")
    net.add_argument("--firmware", default="edk2", metavar="PROFILE",
                     help="edk2 (current NetworkPkg, default) or edk2-2015 (the stack BITS was tested on)")
    net.add_argument("--no-tls", action="store_true",
                     help="no TlsDxe: no EFI_TLS_SERVICE_BINDING_PROTOCOL (firmware without NETWORK_TLS_ENABLE)")
    net.add_argument("--tls", default="edk2", metavar="PROFILE", choices=("edk2", "edk2-2019"),
                     help="TlsDxe: edk2 (default) or edk2-2019 (before EfiTlsVerifyHost; docs/tls.md section 2.4)")
    net.add_argument("--generation", default="2022.11", metavar="YYYY.MM",
                     choices=("2020.11", "2022.11", "2025.02", "2026.08"),
                     help="which of Debian's OVMF builds the firmware behaves as (docs/simulator.md section 3): 2020.11"
                          " (no IPv6), 2022.11 (default), 2025.02 or 2026.08 (no network stack without --rng)")
    net.add_argument("--rng", action="store_true",
                     help="an EFI_RNG_PROTOCOL (what -device virtio-rng-pci gives OVMF); EDK2 since 2024 needs it")
    net.add_argument("--seed", type=int, default=0, metavar="N", help="seed for the fault injector")
    net.add_argument("--nic-disconnected", action="store_true",
                     help="NIC not connected: only SNP until ConnectController (docs/edk2.md section 2.4)")
    net.add_argument("--timer-stopped", action="store_true",
                     help="the firmware timer tick is stopped: no background processing, no DHCP")
    net.add_argument("--faults", default="", metavar="SPEC",
                     help="fault plan (tools/efisim/faults.py): mixed, delay=0.05,rx_piece=1, burst=200, ...; "
                          "at exit one line 'efirun faults injected: [(NAME, COUNT), ...]' goes to stderr")
    run = parser.add_argument_group("the run")
    run.add_argument("--lab", action="store_true",
                     help="start tools/lab.py's peers (HTTP, TCP+UDP echo, DNS) on 127.0.0.1 for the run; "
                          "DHCP hands out its DNS server and BITSNET_LAB=HOST:PORT names its HTTP server")
    run.add_argument("--no-trampoline", action="store_true",
                     help="do not build/load _bitsnet_trampoline (bitsnet then uses the _efi hook)")
    run.add_argument("--no-install", action="store_true", help="do not call bitsnet.install()")
    run.add_argument("--host-stdlib", action="store_true",
                     help="run the program on the host's complete Python (every stdlib module, real os/time/"
                          "errno, threads) instead of BITS's environment (tools/efisim/bitsenv.py)")
    run.add_argument("--ledger", action="store_true",
                     help="at exit print the firmware ledger to stderr as one line: "
                          "'efirun ledger: events=0 pool=0 ...'")
    return parser


# Options that take a value: the splitter below must skip their value.
_VALUE_OPTIONS = ("--address", "--gateway", "--dhcp-delay", "--dns-server", "--firmware", "--seed", "--faults",
                  "--ipv6-delay", "--ipv6-policy", "--ipv6-dns-server", "--tls", "--generation")


def split_command_line(args):
    """Split ``args`` into (efirun options, program args) as Python's own command line does.

    Option parsing stops at the script name or at ``-m MODULE`` / ``-c CODE``: everything after
    belongs to the program, even if it looks like an option of ours.
    """
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return args[:i], args[i + 1:]
        if arg in ("-m", "-c"):
            return args[:i + 2], args[i + 2:]
        if arg[:2] in ("-m", "-c") and not arg.startswith("--"):
            return args[:i] + [arg[:2], arg[2:]], args[i + 1:]
        if not arg.startswith("-") or arg == "-":
            return args[:i], args[i:]
        if "=" not in arg and len(arg) > 2 and [o for o in _VALUE_OPTIONS if o.startswith(arg)]:
            i += 2  # a value option, perhaps abbreviated as argparse allows: skip its value
            continue
        i += 1
    return args, []


def machine_options(opts):
    options = dict(address=opts.address, gateway=opts.gateway, static=opts.static, dhcp=not opts.no_dhcp,
                   dns_servers=list(opts.dns_server), dns4=not opts.no_dns4, firmware=opts.firmware,
                   seed=opts.seed, timer=not opts.timer_stopped, nic_connected=not opts.nic_disconnected)
    if opts.dhcp_delay is not None:
        options["dhcp_delay"] = opts.dhcp_delay
    options.update(generation=opts.generation, rng=opts.rng, ipv6_policy=opts.ipv6_policy,
                   ipv6_dns_servers=list(opts.ipv6_dns_server))
    if opts.no_ipv6:
        options["ipv6"] = False  # otherwise the generation decides
    if opts.ipv6_delay is not None:
        options["ipv6_delay"] = opts.ipv6_delay
    if opts.faults:
        options["faults"] = opts.faults
    options["tls"] = None if opts.no_tls else opts.tls
    return options


def set_import_path(first):
    """BITS's /boot/python first (here boot_python), then the tree, then ``first`` (script dir;
    None under the BITS model, where sys.path has neither the script's directory nor '')."""
    for path in (ROOT, HERE, BOOT_PYTHON):
        while path in sys.path:
            sys.path.remove(path)
    sys.path[:0] = [BOOT_PYTHON, ROOT, HERE]
    if first is not None:
        # Python puts the script's directory (or '' for -m/-c) first; so do we, after BITS's path.
        sys.path.insert(1, first)


def bits_model_wanted(opts):
    """Whether the program gets BITS's Python environment (tools/efisim/bitsenv.py)."""
    if opts.host_stdlib:
        return False
    return (os.environ.get(MODEL_ENV) or MODEL_DEFAULT) == "bits"


def make_bits_environment(script_dir):
    """The BITS model for this run: PYTHONPATH directories play extra /boot/python content."""
    from efisim import bitsenv
    extra = [d for d in os.environ.get("PYTHONPATH", "").split(os.pathsep) if d]
    extra = [d for d in extra if os.path.abspath(d) not in (ROOT, HERE, BOOT_PYTHON)]
    env = bitsenv.BitsEnvironment(boot_dirs=extra, script_dir=script_dir)
    return env


def start_lab():
    """Start ``tools/lab.py``'s servers on loopback (free ports); returns the running Lab.

    Imported from this file's directory whatever ``sys.path`` holds, so that a script's own
    ``lab.py`` cannot stand in for it.
    """
    sys.path.insert(0, HERE)
    try:
        import lab as labmodule
    finally:
        sys.path.remove(HERE)
    return labmodule.Lab(host=LAB_HOST, port=0).start()


class _Environment(object):
    """Set environment variables for the run and put back what was there before."""

    def __init__(self):
        self._saved = {}  # type: dict

    def set(self, name, value):
        if name not in self._saved:
            self._saved[name] = os.environ.get(name)
        os.environ[name] = value

    def restore(self):
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved.clear()


def prepare_runtime(opts):
    """Steps 4 and 5 of the module docstring: the trampoline, then bitsnet.install()."""
    if not opts.no_trampoline:
        try:
            from efisim import trampoline_build
        except ImportError as exc:
            print("efirun: warning: no trampoline builder (%s); bitsnet will use the _efi hook" % exc,
                  file=sys.stderr)
        else:
            try:
                trampoline_build.ensure_trampoline()
            except RuntimeError as exc:
                print("efirun: warning: %s; bitsnet will use the _efi hook" % exc, file=sys.stderr)
    if not opts.no_install:
        try:
            import bitsnet
        except ImportError:
            return
        if hasattr(bitsnet, "install"):
            bitsnet.install()


def run_program(opts, program_args, bitsenv=None):
    """Run the code as ``__main__``; return the exit status."""
    try:
        if bitsenv is not None:
            run_bits_main(opts, program_args, bitsenv)
        elif opts.code is not None:
            sys.argv[:] = ["-c"] + program_args
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            saved = sys.modules.get("__main__")
            sys.modules["__main__"] = main
            try:
                exec(compile(opts.code, "<string>", "exec", 0, True), main.__dict__)
            finally:
                if saved is not None:
                    sys.modules["__main__"] = saved
        elif opts.module is not None:
            import runpy
            sys.argv[:] = [opts.module] + program_args
            runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
        else:
            import runpy
            sys.argv[:] = program_args
            runpy.run_path(program_args[0], run_name="__main__")
    except SystemExit as exc:
        return exit_status(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException as exc:
        traceback.print_exc()
        if bitsenv is not None and isinstance(exc, ImportError):
            print("efirun: the program runs under BITS's Python, which has only BITS's modules "
                  "(docs/bits-environment.md section 2); --host-stdlib runs it on the host's", file=sys.stderr)
        return 1
    return 0


def run_bits_main(opts, program_args, bitsenv):
    """Run the program in a fresh ``__main__`` that the BITS model knows as the program's.

    The code is found as Python finds it (``-m`` through runpy's own lookup, run on the host
    side: BITS itself has no runpy), then executed here, in a namespace registered with the model.
    """
    main = types.ModuleType("__main__")
    namespace = main.__dict__
    namespace["__builtins__"] = __builtins__
    if opts.code is not None:
        sys.argv[:] = ["-c"] + program_args
        code = compile(opts.code, "<string>", "exec", 0, True)  # no __future__ of ours
    elif opts.module is not None:
        import runpy
        details = runpy._get_module_details(opts.module)  # type: ignore[attr-defined]
        code = details[2]
        filename = code.co_filename
        if len(details) == 3:  # Python 3: (name, spec, code)
            spec = details[1]
            namespace.update(__spec__=spec, __loader__=spec.loader, __package__=spec.parent)
            filename = spec.origin or filename
        else:  # Python 2: (name, loader, code, filename)
            namespace.update(__loader__=details[1], __package__=details[0].rpartition(".")[0] or None)
            filename = details[3] or filename
        namespace["__file__"] = filename
        sys.argv[:] = [filename] + program_args
    else:
        filename = program_args[0]
        sys.argv[:] = program_args
        with open(filename, "rb") as f:
            source = f.read()
        code = compile(source, filename, "exec", 0, True)
        namespace["__file__"] = filename
    bitsenv.add_program_namespace(namespace, main)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, namespace)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def exit_status(code):
    """What the interpreter would exit with for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def cleanup_bitsnet():
    """What bitsnet does at interpreter exit: let graceful closes finish, close pooled events.

    Only if the program used bitsnet; failures here are reported, not raised.
    """
    tcp = sys.modules.get("bitsnet.tcp")
    events = sys.modules.get("bitsnet.events")
    try:
        if tcp is not None and hasattr(tcp, "close_all"):
            tcp.close_all(CLEANUP_TIMEOUT)
        if events is not None and hasattr(events, "shutdown"):
            events.shutdown()
    except Exception:
        print("efirun: bitsnet cleanup failed:", file=sys.stderr)
        traceback.print_exc()


def ledger_line(firmware):
    counts = firmware.ledger()
    names = ["events", "pool"] + sorted(k for k in counts if k not in ("events", "pool"))
    parts = ["%s=%d" % (name, counts.get(name, 0)) for name in names]
    parts.append("crashes=%d" % len(firmware.crashes))
    return "efirun ledger: " + " ".join(parts)


def main(args=None):
    args = list(sys.argv[1:] if args is None else args)
    parser = build_parser()
    own, program_args = split_command_line(args)
    opts = parser.parse_args(own)
    if opts.argv:  # only reachable when argparse itself saw the script (e.g. after "--")
        program_args = opts.argv + program_args
    if opts.code is None and opts.module is None and not program_args:
        parser.error("nothing to run: give SCRIPT, -m MODULE or -c CODE")
    if opts.code is not None and opts.module is not None:
        parser.error("give only one of -m MODULE and -c CODE")

    script_dir = None
    if opts.code is None and opts.module is None:
        script_dir = os.path.dirname(os.path.abspath(program_args[0]))
    if bits_model_wanted(opts):
        set_import_path(None)
        bitsenv = make_bits_environment(script_dir)
    else:
        set_import_path(script_dir if script_dir is not None else "")
        bitsenv = None
    from efisim import machine as efimachine
    options = machine_options(opts)
    try:
        efimachine.MachineConfig(**options)  # usage errors before anything starts
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    if opts.lab and [s for s in opts.dns_server if s.partition(":")[0] == LAB_HOST]:
        # The simulated NIC maps each DNS server address to one host port (ip4config2 dns_ports).
        parser.error("--lab serves DNS on %s itself: give --dns-server on another loopback address" % LAB_HOST)
    lab, environment = None, _Environment()
    # bitsnet.install() takes socket-using modules (SocketServer, the lab's own...) out of
    # sys.modules; on Python 2 a module that is freed has its globals set to None, which would
    # break the lab's server threads still running their code. Holding every module until the
    # lab has stopped keeps them intact (what a BITS program runs is unaffected).
    held_modules = dict(sys.modules)
    try:
        if opts.lab:
            lab = start_lab()
            held_modules.update(sys.modules)
            options["dns_servers"] = options["dns_servers"] + ["%s:%d" % (LAB_HOST, lab.dns_port)]
            environment.set(LAB_ENV, "%s:%d" % (LAB_HOST, lab.port))
            print("efirun: %s" % lab.describe(), file=sys.stderr)
            sys.stderr.flush()
        return boot_and_run(efimachine.boot(efimachine.MachineConfig(**options)), opts, program_args, bitsenv)
    finally:
        if lab is not None:
            lab.stop()
        if bitsenv is not None:
            bitsenv.deactivate()
        environment.restore()
        held_modules.clear()


def boot_and_run(booted, opts, program_args, bitsenv=None):
    """Steps 3 to 7 on the booted machine; returns the exit status."""
    status = 1
    try:
        import efi  # noqa: F401  (BITS has it loaded before any program runs)
        if bitsenv is not None:
            bitsenv.activate(script_dir=None if opts.code is not None or opts.module is not None
                             else os.path.dirname(os.path.abspath(program_args[0])))
        try:
            prepare_runtime(opts)
            status = run_program(opts, program_args, bitsenv)
            cleanup_bitsnet()
        finally:
            if bitsenv is not None:
                bitsenv.deactivate()
    finally:
        try:
            sys.stdout.flush()
        except Exception:
            pass
        if booted.firmware.crashes:
            print("efirun: firmware faults:\n" + "\n".join(booted.firmware.crashes), file=sys.stderr)
        if opts.ledger:
            print(ledger_line(booted.firmware), file=sys.stderr)
        if opts.faults:
            # What fired, for tests (a program under BITS's Python cannot import efisim to ask).
            injected = getattr(getattr(booted, "faults", None), "injected", {})
            print("efirun faults injected: %s" % sorted(injected.items()), file=sys.stderr)
        booted.shutdown()
    return status


if __name__ == "__main__":
    sys.exit(main())
