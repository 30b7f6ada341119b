"""bitsnet.errnos: BITS's errno (GRUB's nine names and numbers) completed so that every error
bitsnet raises has a name, a number no other name has, and a message -- and a host's errno left
as it is. A fake module stands for BITS's errno (docs/errors.md)."""

from __future__ import print_function

import errno
import os
import re
import subprocess
import sys
import types

import pytest

from bitsnet import errnos, errors

# BITS 2079's errno, as measured: GRUB's grub_err_t values; EISDIR and ENOTDIR share 4, and
# errorcode keeps one name per number.
BITS_ERRNO = {"ENOMEM": 3, "EISDIR": 4, "ENOTDIR": 4, "ENOENT": 5, "EINVAL": 10, "ERANGE": 11,
              "ENXIO": 12, "EDOM": 18, "EINTR": 28}
BITS_ERRORCODE = {3: "ENOMEM", 4: "EISDIR", 5: "ENOENT", 10: "EINVAL", 11: "ERANGE", 12: "ENXIO",
                  18: "EDOM", 28: "EINTR"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bits_errno():
    module = types.ModuleType("errno")
    for name, value in BITS_ERRNO.items():
        setattr(module, name, value)
    module.errorcode = dict(BITS_ERRORCODE)
    return module


def names_bitsnet_uses():
    """Every E* name bitsnet's code reads from errno (errno.X, _errno.X, getattr(errno, "X"))."""
    names = set()
    for filename in os.listdir(os.path.join(ROOT, "bitsnet")):
        if filename.endswith(".py"):
            with open(os.path.join(ROOT, "bitsnet", filename)) as source:
                text = source.read()
            names.update(re.findall(r"\berrno\.(E[A-Z0-9]+)\b", text))
            names.update(re.findall(r"getattr\(_?errno, \"(E[A-Z0-9]+)\"", text))
    return names


def test_every_name_bitsnet_uses_is_in_the_table():
    missing = names_bitsnet_uses() - set(name for name, _, _ in errnos.TABLE) - set(a for a, _ in errnos.ALIASES)
    assert not missing, missing


def test_the_table_is_linux_on_a_linux_host():
    for name, value, message in errnos.TABLE:
        if hasattr(errno, name):
            assert getattr(errno, name) == value, name
            assert os.strerror(value) == message, name


def test_bits_errno_is_completed_without_changing_its_nine_names():
    module = bits_errno()
    added = dict(errnos.complete(module))
    for name, value in BITS_ERRNO.items():
        assert getattr(module, name) == value and name not in added  # GRUB's numbers stay
    for name, _value, _message in errnos.TABLE:
        assert isinstance(getattr(module, name), int)
    # Linux's number where it is free, a private one where GRUB's names hold it.
    assert module.ECONNREFUSED == 111 and module.ETIMEDOUT == 110 and module.EBADF == 9
    assert module.EPIPE == 32 and module.EINPROGRESS == 115 and module.EADDRINUSE == 98
    assert module.EIO >= errnos.PRIVATE_BASE  # Linux's 5 is GRUB's ENOENT
    assert module.EAGAIN >= errnos.PRIVATE_BASE  # Linux's 11 is GRUB's ERANGE
    assert module.EWOULDBLOCK == module.EAGAIN and module.ENOTSUP == module.EOPNOTSUPP
    # every name has its own number, and errorcode names it
    values = [getattr(module, name) for name, _, _ in errnos.TABLE if name != "ENOTDIR"]
    assert len(values) == len(set(values))
    for name, _value, _message in errnos.TABLE:
        if name != "ENOTDIR":  # GRUB: EISDIR == ENOTDIR == 4, errorcode[4] is EISDIR
            assert module.errorcode[getattr(module, name)] == name
    assert errnos.complete(module) == []  # idempotent


def test_private_numbers_are_the_same_in_every_boot():
    first, second = bits_errno(), bits_errno()
    errnos.complete(first)
    errnos.complete(second)
    assert first.errorcode == second.errorcode


def test_messages_without_os_strerror():
    module = bits_errno()
    errnos.complete(module)
    assert errnos.strerror(module.ECONNREFUSED, module) == "Connection refused"
    assert errnos.strerror(module.EAGAIN, module) == "Resource temporarily unavailable"
    assert errnos.strerror(module.EINVAL, module) == "Invalid argument"  # GRUB's 10, Linux's text
    assert errnos.strerror(module.EIO, module) == "Input/output error"
    assert errnos.strerror(4242, module) == "Unknown error 4242"


def test_host_errno_is_unchanged():
    # Importing bitsnet added nothing a host's errno already had, and kept every value.
    for name, value, _message in errnos.TABLE:
        if name not in dict(errnos.ADDED):
            assert getattr(errno, name) == value
    assert set(dict(errnos.ADDED)) <= set(["ECANCELED"])  # only what Python 2.7 lacks
    assert errors.strerror(errno.ECONNREFUSED) == os.strerror(errno.ECONNREFUSED)


@pytest.mark.parametrize("name", sorted(set(n for n, _, _ in errnos.TABLE)))
def test_socket_error_for_every_name_reads_clearly(name):
    value = getattr(errno, name)
    exc = errors.socket_error(value, "detail")
    assert exc.errno == value and errno.errorcode[exc.errno] in (name, "ENOTSUP", "EWOULDBLOCK")
    assert exc.strerror == "%s (detail)" % errnos.MESSAGES[name]


def test_every_status_maps_to_a_named_errno():
    for status in list(errors._STATUS_TO_ERRNO) + [op_status for _op, op_status in errors._BY_OPERATION]:
        for op in (None, "connect", "bind", "udp-bind", "send", "recv"):
            assert errors.errno_for(status, op) in errno.errorcode


BITS_IMPORT = """
import os, sys, types
fake = types.ModuleType("errno")
for name, value in %r.items():
    setattr(fake, name, value)
fake.errorcode = %r
sys.modules["errno"] = fake          # BITS's errno: GRUB's nine names
del os.strerror                      # BITS's os has no strerror
import efi
from bitsnet import _socket, select, tcp, udp, dns, ipconfig, nic, events, family, buffers, lapic, errors
import errno
assert errno is fake and errno.ECONNREFUSED == 111 and errno.EAGAIN >= 200
e = errors.socket_error(errors.errno_for(efi.EFI_CONNECTION_RESET, "connect"))
assert e.errno == errno.ECONNREFUSED and errno.errorcode[e.errno] == "ECONNREFUSED", e
e = errors.socket_error(errors.errno_for(efi.EFI_NOT_READY), "EFI_NOT_READY in recv")
print("%%s %%s" %% (errno.errorcode[e.errno], e))
"""


def test_bitsnet_imports_and_raises_named_errors_under_bits_errno():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tools"),
                                                       os.path.join(ROOT, "tools", "efisim", "boot_python")]))
    code = BITS_IMPORT % (BITS_ERRNO, BITS_ERRORCODE)
    out = subprocess.check_output([sys.executable, "-c", code], env=env, cwd=ROOT)
    assert out.decode().strip() == ("EAGAIN [Errno %d] Resource temporarily unavailable (EFI_NOT_READY in recv)"
                                    % dict(errnos.complete(bits_errno()))["EAGAIN"])


# A program at the BITS prompt, in the simulator's model of BITS's Python (errno with GRUB's nine
# names, os without strerror/urandom, empty random: docs/bits-environment.md section 2.4).
AT_THE_PROMPT = """
import errno
import socket
import bitsnet
from bitsnet import entropy
s = socket.socket()
try:
    s.connect(("127.0.0.1", %d))
except socket.error as e:
    print("connect %%s %%s %%s" %% (e.errno == errno.ECONNREFUSED, errno.errorcode[e.errno], e))
s.close()
s = socket.socket()
s.setblocking(False)
try:
    s.recv(1)
except socket.error as e:
    print("recv %%s %%s" %% (errno.errorcode[e.errno], e.errno in (errno.ENOTCONN, errno.EAGAIN)))
s.close()
print("numbers %%d %%d %%d %%d" %% (errno.EINVAL, errno.EAGAIN, errno.EWOULDBLOCK, errno.EIO))
print("entropy %%s %%s %%d" %% (entropy.source(), entropy.strong(), len(entropy.random_bytes(8))))
print("address %%s" %% bitsnet.interfaces()[0]["address"])
"""


def test_a_program_at_the_bits_prompt_reads_named_errors():
    import socket as host_socket
    import conftest
    closed = host_socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nobody listens there now: a connect is refused
    env = dict(os.environ, BITSNET_SIM_PYTHON="bits")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "efirun.py")] + conftest.STATION_ARGS
                            + ["-c", AT_THE_PROMPT % port], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    lines = [line for line in out.decode().splitlines() if not line.startswith("bitsnet: DHCP")]
    assert lines[0] == "connect True ECONNREFUSED [Errno 111] Connection refused"
    assert lines[1] == "recv ENOTCONN True"
    assert lines[2] == "numbers 10 202 202 200"  # GRUB's EINVAL; EAGAIN and EIO private (11, 5 are GRUB's)
    assert lines[3] == "entropy weak mix: the clock False 8"  # no urandom, no RNG, no bits in the model
    assert lines[4] == "address %s" % conftest.STATION
