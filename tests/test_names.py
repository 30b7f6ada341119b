"""Names, as a user would try them: urllib by host name and gethostbyname at the
simulated boot prompt, with the firmware's DNS4 and without it (bitsnet's own resolver over
UDP4), the DNS server being the one DHCP handed out (tools/lab.py's, through efirun --lab)."""

from __future__ import print_function

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EFIRUN = os.path.join(ROOT, "tools", "efirun.py")

SCRIPT = """
from __future__ import print_function
import os, socket
try:
    from urllib.request import urlopen
except ImportError:
    from urllib2 import urlopen
port = os.environ["BITSNET_LAB"].split(":")[1]
print(socket.gethostbyname("lab.bitsnet.test"))
body = urlopen("http://lab.bitsnet.test:%s/lab.json" % port, timeout=20).read()
print(b'"tcp_echo"' in body)
try:
    socket.gethostbyname("nowhere.bitsnet.test")
except socket.gaierror as exc:
    print("gaierror", exc.args[0] == socket.EAI_NONAME)
"""


@pytest.mark.parametrize("dns4", [True, False], ids=["firmware-dns4", "own-resolver"])
def test_urlopen_by_host_name(dns4):
    command = [sys.executable, EFIRUN, "--lab", "--ledger"] + ([] if dns4 else ["--no-dns4"]) + ["-c", SCRIPT]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    out, err = out.decode("ascii", "replace"), err.decode("ascii", "replace")
    assert proc.returncode == 0, out + err
    assert out.split()[-4:] == ["127.0.0.1", "True", "gaierror", "True"], out + err  # after DHCP progress
    ledger = [line for line in err.splitlines() if line.startswith("efirun ledger:")]
    assert ledger and all(item.endswith("=0") for item in ledger[0].split()[2:]), err
