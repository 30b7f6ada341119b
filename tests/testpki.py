"""A test PKI made with the ``openssl`` command: certificate authorities, certificate requests,
and certificates they sign, as files in one directory (``NAME.key``, ``NAME.csr``, ``NAME.pem``).

test_ssl.py makes its PKI for the simulator's TLS (servers on 127.0.0.1) and
test_ssl_realbits.py one for the firmware's TlsDxe (a server at 10.0.2.2); both with this.
RSA 2048 and SHA-256 throughout: what every TLS stack in the tests accepts.
"""

from __future__ import print_function

import os
import shutil
import subprocess
import sys

if sys.version_info[0] == 2:
    from distutils.spawn import find_executable as _which  # type: ignore
else:
    _which = shutil.which

OPENSSL = _which("openssl")
RSA = ["-newkey", "rsa:2048", "-nodes", "-sha256"]

# `openssl ca` settings: every name in the request's subject is taken as given, the request's
# extensions (subjectAltName) are copied into the certificate, and one subject may be certified
# more than once.
CA_CONFIG = """[ ca ]
default_ca = CA_default
[ CA_default ]
dir = .
database = index.txt
new_certs_dir = .
certificate = ca.pem
private_key = ca.key
serial = serial
default_md = sha256
policy = policy_any
copy_extensions = copy
unique_subject = no
email_in_dn = no
[ policy_any ]
commonName = supplied
"""


def run(args, cwd, timeout=None):
    """``openssl ARGS`` in ``cwd``, its output discarded; CalledProcessError if it fails."""
    options = {} if timeout is None else {"timeout": timeout}  # 2.7's check_call has no timeout
    with open(os.devnull, "wb") as null:
        subprocess.check_call([OPENSSL] + list(args), cwd=cwd, stdout=null, stderr=null, **options)


# Other keys for the signature tests (test_x509verify.py, test_ssl_realbits.py): openssl req's
# key options, and the digest each is used with.
KEYS = {
    "rsa2048": (["-newkey", "rsa:2048", "-nodes"], "sha256"),
    "rsa4096": (["-newkey", "rsa:4096", "-nodes"], "sha384"),
    "p256": (["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"], "sha256"),
    "p384": (["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-nodes"], "sha384"),
}


def make_ca(d, name, subject, key_usage=True, timeout=None, key=None):
    """A self-signed CA certificate ``NAME.pem`` (3 days) with its key ``NAME.key``; ``key`` a
    name from KEYS (default: RSA 2048, SHA-256)."""
    usage = ["-addext", "keyUsage=critical,keyCertSign,cRLSign"] if key_usage else []
    options = RSA if key is None else KEYS[key][0] + ["-" + KEYS[key][1]]
    run(["req", "-x509"] + options + ["-keyout", name + ".key", "-out", name + ".pem", "-days", "3",
                                  "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE"] + usage,
        d, timeout)


def make_request(d, name, common_name, san, timeout=None):
    """A key ``NAME.key`` and a certificate request ``NAME.csr`` for CN ``common_name`` and the
    subjectAltName ``san`` (``DNS:a,IP:b``)."""
    run(["req"] + RSA + ["-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + common_name,
                         "-addext", "subjectAltName=" + san], d, timeout)


def start_ca_database(d, serial):
    """The files ``openssl ca`` keeps its state in; certificates are numbered from ``serial``."""
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write(CA_CONFIG)
    with open(os.path.join(d, "index.txt"), "w") as f:
        f.write("")
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("%d\n" % serial)


def sign(d, name, ca, dates, timeout=None):
    """``NAME.pem``: the request ``NAME.csr`` signed by the CA ``ca``; ``dates`` are openssl's
    validity options (``["-days", "2"]`` or ``["-startdate", ..., "-enddate", ...]``)."""
    run(["ca", "-batch", "-config", "ca.cnf", "-notext", "-cert", ca + ".pem", "-keyfile", ca + ".key",
         "-in", name + ".csr", "-out", name + ".pem"] + list(dates), d, timeout)
