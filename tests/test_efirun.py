"""tools/efirun.py: runs code "at the BITS boot prompt" of a simulated machine -- its command
line, __main__ semantics, exit codes, and that each machine option really changes the machine."""

from __future__ import print_function

import json
import os
import re
import sys
import textwrap

import processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "scripts")
BOOT_PYTHON = os.path.join(ROOT, "tools", "efisim", "boot_python")
MODEL_ENV = "BITSNET_SIM_PYTHON"  # "bits": BITS's Python for the program (tools/efisim/bitsenv.py)
RUN_TIMEOUT = 60.0

# Brings DHCP up with raw Ip4Config2 calls (tests/scripts/raw_http_get.py's helpers), waits
# WAIT seconds, and prints the station address InterfaceInfo shows.
DHCP_PROBE = textwrap.dedent("""
    import sys, time
    import raw_http_get as r
    nic = r.find_nic()
    c = r.EFI_IP4_CONFIG2_PROTOCOL.from_handle(nic)
    if r.interface_info(c)[0] == "0.0.0.0":
        r.set_policy(c, r.Ip4Config2PolicyDhcp)
    deadline = time.time() + float(sys.argv[1])
    while time.time() < deadline and r.interface_info(c)[0] == "0.0.0.0":
        time.sleep(0.02)
    print(r.interface_info(c)[0])
""")


def run_efirun(args, timeout=RUN_TIMEOUT, env=None):
    """(exit status, stdout text, stderr text) of ``python tools/efirun.py ARGS``."""
    status, out, err = processes.run_efirun(args, timeout, env=dict(os.environ, **(env or {})))
    return status, out.decode("utf-8", "replace"), err


def probe_address(*options, **kw):
    wait = kw.get("wait", 1.5)
    status, out, err = run_efirun(list(options) + ["-c", DHCP_PROBE, str(wait)],
                                  env={"PYTHONPATH": SCRIPTS})
    assert status == 0, err
    return out.strip()


# ----------------------------------------------------------------------------- command line
def test_help_lists_every_option():
    status, out, err = run_efirun(["--help"])
    assert status == 0
    for option in ("--address", "--gateway", "--static", "--dhcp-delay", "--no-dhcp", "--dns-server",
                   "--no-dns4", "--firmware", "--seed", "--nic-disconnected", "--timer-stopped", "--faults",
                   "--no-install", "--no-trampoline", "--ledger", "--lab", "--host-stdlib", "-m MODULE", "-c CODE",
                   "SCRIPT"):
        assert option in out, option
    assert "sys.platform" in out  # documents that it is not faked


def test_nothing_to_run_is_a_usage_error():
    status, out, err = run_efirun([])
    assert status == 2 and "nothing to run" in err


def test_bad_options_are_usage_errors():
    for args in (["--firmware", "phoenix", "-c", "pass"], ["--address", "10.0.2.15/24", "-c", "pass"],
                 ["--faults", "no_such_fault", "-c", "pass"], ["--seed", "x", "-c", "pass"]):
        status, out, err = run_efirun(args)
        assert status == 2, args


def test_c_mode_argv_and_options_after_code_belong_to_the_program():
    status, out, err = run_efirun(["-c", "import sys; print(sys.argv); print(__name__)", "a", "--ledger", "-m"])
    assert status == 0, err
    assert out.splitlines() == ["['-c', 'a', '--ledger', '-m']", "__main__"]
    assert "efirun ledger" not in err


def test_script_mode_main_argv_and_path(tmpdir):
    script = tmpdir.join("show.py")
    script.write(textwrap.dedent("""
        import os, sys
        import efi
        print(__name__)
        print(sys.argv)
        print(sys.path[0])
        print(sys.path[1])
        print(os.path.dirname(os.path.abspath(efi.__file__)))
        print(sys.platform)
    """))
    status, out, err = run_efirun(["--no-trampoline", "--host-stdlib", str(script), "x", "-c", "y"])
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "__main__"
    assert lines[1] == repr([str(script), "x", "-c", "y"])
    assert lines[2] == BOOT_PYTHON  # BITS's /boot/python comes first
    assert lines[3] == str(tmpdir)  # then the script's directory, as Python sets it
    assert lines[4] == BOOT_PYTHON  # `import efi` is the stand-in
    assert lines[5] == sys.platform  # not faked
    # BITS's Python (the default): no script directory on sys.path (docs/bits-environment.md section 8.1)
    status, out, err = run_efirun(["--no-trampoline", str(script), "x", "-c", "y"], env={MODEL_ENV: "bits"})
    assert status == 0, err
    lines = out.splitlines()
    assert lines[:3] == ["__main__", repr([str(script), "x", "-c", "y"]), BOOT_PYTHON]
    assert lines[3] == ROOT and lines[4:] == [BOOT_PYTHON, sys.platform]


def test_code_does_not_inherit_efiruns_future_imports(tmpdir):
    # efirun.py has "from __future__ import print_function"; the program must not get it (BITS's
    # py '...' runs 2.7 code with the print statement).
    code = "print('x', 1)" if sys.version_info[0] >= 3 else "print 'x', 1"
    script = tmpdir.join("old_print.py")
    script.write(code + "\n")
    for args in (["-c", code], [str(script)], ["--host-stdlib", "-c", code]):
        status, out, err = run_efirun(["--no-install"] + args)
        assert (status, out.strip()) == (0, "x 1"), (args, err)


def test_m_mode_runs_a_module_as_main(tmpdir):
    tmpdir.join("efirun_probe_mod.py").write("import sys\nprint(__name__)\nprint(sys.argv)\n")
    status, out, err = run_efirun(["-m", "efirun_probe_mod", "p", "q"], env={"PYTHONPATH": str(tmpdir)})
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "__main__"
    assert lines[1].endswith("efirun_probe_mod.py', 'p', 'q']")


def test_double_dash_ends_options(tmpdir):
    script = tmpdir.join("--odd.py")
    script.write("print('ran')\n")
    status, out, err = run_efirun(["--", str(script)])
    assert (status, out.strip()) == (0, "ran"), err


def test_exit_codes():
    assert run_efirun(["-c", "import sys; sys.exit(7)"])[0] == 7
    assert run_efirun(["-c", "import sys; sys.exit()"])[0] == 0
    status, out, err = run_efirun(["-c", "import sys; sys.exit('bye')"])
    assert status == 1 and "bye" in err
    status, out, err = run_efirun(["-c", "raise ValueError('boom')"])
    assert status == 1 and "ValueError: boom" in err and "Traceback" in err


def test_ledger_line(tmpdir):
    status, out, err = run_efirun(["--ledger", "-c", "pass"])
    assert status == 0
    line = [x for x in err.splitlines() if x.startswith("efirun ledger: ")]
    assert line and line[0].startswith("efirun ledger: events=0 pool=0 ") and "crashes=0" in line[0]
    leak = "import efi, ctypes\nev = efi.EFI_EVENT()\n" \
           "efi.system_table.BootServices.contents.CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, ctypes.byref(ev))\n"
    status, out, err = run_efirun(["--ledger", "-c", leak])
    assert status == 0 and "efirun ledger: events=1 pool=0" in err, err


def test_install_and_trampoline_steps():
    code = "from __future__ import print_function\n" \
           "import sys, socket; print(socket.socket.__module__ == 'socket', '_bitsnet_trampoline' in sys.modules, " \
           "getattr(sys.modules.get('_socket'), '__name__', None))"
    status, out, err = run_efirun(["--no-install", "--no-trampoline", "-c", code])
    assert (status, out.strip()) == (0, "True False _socket"), err
    status, out, err = run_efirun(["-c", code])
    assert status == 0, err
    assert out.strip() == "True True bitsnet._socket", err  # bitsnet.install() ran; trampoline built


# ----------------------------------------------------------------------------- machine options
def test_dhcp_brings_up_the_default_address():
    assert probe_address("--dhcp-delay", "0.1") == "127.0.0.2"


def test_address_option():
    assert probe_address("--address", "127.0.0.9/16", "--gateway", "127.0.0.1") == "127.0.0.9"


def test_no_dhcp_never_finishes():
    assert probe_address("--no-dhcp", "--dhcp-delay", "0.1", wait=1.0) == "0.0.0.0"


def test_no_dhcp_fault_never_finishes():
    assert probe_address("--faults", "no_dhcp", "--dhcp-delay", "0.1", wait=1.0) == "0.0.0.0"


def test_dhcp_delay_is_honoured():
    assert probe_address("--dhcp-delay", "3", wait=0.5) == "0.0.0.0"


def test_timer_stopped_means_no_dhcp():
    assert probe_address("--timer-stopped", "--dhcp-delay", "0.1", wait=1.0) == "0.0.0.0"


def test_static_address_is_there_at_boot():
    assert probe_address("--static", "--address", "127.0.0.5/8", wait=0) == "127.0.0.5"


def test_nic_disconnected_requires_connect_controller():
    code = textwrap.dedent("""
        import efi, raw_http_get as r
        try:
            efi.locate_handles(r.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
            print("connected")
        except efi.EFIException as e:
            print(efi.efi_status_decode[e.args[0]])
        snp = efi.locate_handles(r.EFI_SIMPLE_NETWORK_PROTOCOL_GUID)
        print(efi.system_table.BootServices.contents.ConnectController(snp[0], None, None, True))
        print(list(efi.locate_handles(r.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)) == [snp[0]])
    """)
    status, out, err = run_efirun(["--nic-disconnected", "-c", code], env={"PYTHONPATH": SCRIPTS})
    assert status == 0, err
    assert out.split() == ["EFI_NOT_FOUND", "0", "True"]
    status, out, err = run_efirun(["-c", code], env={"PYTHONPATH": SCRIPTS})
    assert out.split()[0] == "connected", err


def test_options_reach_the_machine_config():
    # Inspection only: the program peeks at the simulator to see what efirun configured (which
    # BITS's Python would refuse: efisim is not a BITS module; so --host-stdlib).
    code = textwrap.dedent("""
        from __future__ import print_function
        from efisim import machine
        m = machine.current()
        c = m.config
        print(c.firmware, c.seed, c.dns4, sorted(m.nic.dns_ports.items()), m.faults.rx_piece)
    """)
    status, out, err = run_efirun(["--host-stdlib", "--firmware", "edk2-2015", "--seed", "42", "--no-dns4",
                                   "--dns-server", "127.0.0.1:5353", "--dns-server", "127.0.0.3:53",
                                   "--faults", "rx_piece=100", "-c", code])
    assert status == 0, err
    assert out.strip() == "edk2-2015 42 False [('127.0.0.1', 5353), ('127.0.0.3', 53)] 100"


def test_option_value_forms():
    # "--opt=value" and argparse's abbreviations must not make the splitter take a value for SCRIPT.
    code = "from efisim import machine; print(machine.current().nic.ip4.address)"
    for args in (["--address=127.0.0.4/8"], ["--addr", "127.0.0.4/8"], ["--address", "127.0.0.4/8"]):
        status, out, err = run_efirun(args + ["--static", "--host-stdlib", "-c", code])
        assert (status, out.strip()) == (0, "127.0.0.4"), (args, err)


# ----------------------------------------------------------------------------- --lab
# Runs in the simulated machine: fetches /lab.json from BITSNET_LAB through bitsnet (so DHCP,
# TCP connect, send, receive and FIN work against the lab) and records what it saw in argv[1].
# It peeks at the simulator and writes JSON, so it runs on the host's Python (--host-stdlib).
LAB_PROBE = textwrap.dedent("""
    import json, os, socket, sys
    from efisim import machine
    host, port = os.environ["BITSNET_LAB"].split(":")
    conn = socket.create_connection((host, int(port)), 10)
    conn.sendall(b"GET /lab.json HTTP/1.0\\r\\n\\r\\n")
    reply = b""
    while True:
        data = conn.recv(65536)
        if not data:
            break
        reply += data
    conn.close()
    m = machine.current()
    seen = {"lab": os.environ["BITSNET_LAB"], "info": json.loads(reply.split(b"\\r\\n\\r\\n", 1)[1].decode("ascii")),
            "dns_servers": m.config.dns_servers, "dns_ports": sorted(m.nic.dns_ports.items()),
            "socket": socket.socket.__module__, "peer_is_bitsnet": type(conn).__module__}
    with open(sys.argv[1], "w") as f:
        json.dump(seen, f)
""")

# Calls efirun.main() in-process, then checks from the outside that the lab stopped and the
# environment is as before. The host's socket module is taken before bitsnet.install() runs.
LAB_STOP_CHECK = textwrap.dedent("""
    from __future__ import print_function
    import json, os, socket, sys
    tools, code, seen_file = sys.argv[1:4]  # main() sets sys.argv for the program, as Python does
    sys.path.insert(0, tools)
    import efirun
    status = efirun.main(["--lab", "--host-stdlib", "-c", code, seen_file])
    seen = json.load(open(seen_file))
    host, port = seen["lab"].split(":")
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.settimeout(5)
    try:
        probe.connect((host, int(port)))
        stopped = False
    except socket.error:
        stopped = True
    probe.close()
    print(status, "BITSNET_LAB" in os.environ, stopped)
""")


def test_lab_serves_the_machine_and_dhcp_hands_out_its_dns(tmpdir):
    seen_file = str(tmpdir.join("seen.json"))
    status, out, err = run_efirun(["--lab", "--host-stdlib", "--dns-server", "127.0.0.3:5353", "-c", LAB_PROBE,
                                   seen_file])
    assert status == 0, err
    line = [x for x in err.splitlines() if x.startswith("efirun: lab on ")]
    assert line, err
    ports = [int(p) for p in re.findall(r"(?:http|echo|dns) (\d+)", line[0])]
    http, echo, dns = ports
    with open(seen_file) as f:
        seen = json.load(f)
    assert seen["lab"] == "127.0.0.1:%d" % http
    assert (seen["info"]["tcp_echo"], seen["info"]["dns"]) == (echo, dns)  # the lab answered, through bitsnet
    assert seen["dns_servers"] == ["127.0.0.3:5353", "127.0.0.1:%d" % dns]  # --dns-server first, then the lab
    assert seen["dns_ports"] == [["127.0.0.1", dns], ["127.0.0.3", 5353]]
    assert seen["peer_is_bitsnet"] == "socket" and seen["socket"] == "socket"


def test_lab_stops_and_environment_is_restored_in_process(tmpdir):
    seen_file = str(tmpdir.join("seen.json"))
    status, out, err = processes.run([sys.executable, "-c", LAB_STOP_CHECK, os.path.join(ROOT, "tools"), LAB_PROBE,
                                      seen_file], RUN_TIMEOUT,
                                     env=dict((k, v) for k, v in os.environ.items() if k != "BITSNET_LAB"))
    assert status == 0, err.decode("utf-8", "replace")
    assert out.decode("ascii").split()[-3:] == ["0", "False", "True"], err.decode("utf-8", "replace")


def test_lab_and_a_dns_server_on_its_address_is_a_usage_error():
    status, out, err = run_efirun(["--lab", "--dns-server", "127.0.0.1:5353", "-c", "pass"])
    assert status == 2 and "--lab serves DNS on 127.0.0.1" in err, err
    assert "efirun: lab on" not in err  # refused before anything started
