"""The TLS engine behind the simulated TlsDxe (tools/efisim/tls.py): the host's OpenSSL over
memory BIOs, one connection per ``Engine`` -- what CryptoPkg's TlsLib is to EDK2's TlsDxe.

Python 3's ``ssl.MemoryBIO`` + ``SSLObject`` do the work. Python 2.7's ssl has neither, so a
simulator running on 2.7 gets ``RemoteEngine``: the same methods, carried out by this file run
as a Python 3 helper process (``python3 tls_engine.py``), one per connection, over a pipe:

  request  op (1 byte) + length (4 bytes, big-endian) + payload
  reply    flags (1 byte) + length + payload
  ops      I init (payload: repr of a dict: verify, version, hostname, flags, cas as hex), H handshake,
           A alert, E encrypt, D decrypt, C close, X cipher id, V version, Q quit
  flags    1 failed, 2 finished (H); 1 failed (D)

``find_python3()`` says where the helper's interpreter is (BITSNET_PYTHON3, else python3 on
PATH), or None: then the 2.7 simulator has no TlsDxe and the TLS tests skip.
"""

from __future__ import absolute_import

import os
import ssl
import struct
import subprocess
import sys

PLAIN_MAX = 16384
_X509_V_FLAG_PARTIAL_CHAIN, _X509_V_FLAG_NO_CHECK_TIME = 0x80000, 0x200000  # OpenSSL's x509_vfy.h


class Engine(object):
    """One client connection (TlsLib's TLS_CONNECTION); raises nothing from the TLS itself."""

    def __init__(self, verify, version, hostname, cas, host_flags=0):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
        if version and hasattr(ssl, "TLSVersion"):
            context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, version)
        elif version:  # Python 3.6: no TLSVersion; the OP_NO_* options pin it
            others = [v for v in ("TLSv1", "TLSv1_1", "TLSv1_2", "TLSv1_3") if v != version]
            for name in others:
                context.options |= getattr(ssl, "OP_NO_" + name, 0)
        # EDK2 quirk: as TlsNew sets on the store (docs/tls.md section 2.6): an intermediate given as a CA
        # ends a chain (X509_V_FLAG_PARTIAL_CHAIN), and validity periods are not checked
        # (X509_V_FLAG_NO_CHECK_TIME); raw values, Python 3.6's ssl names neither.
        context.verify_flags |= _X509_V_FLAG_PARTIAL_CHAIN | _X509_V_FLAG_NO_CHECK_TIME
        for der in cas:  # as PEM: DER cadata fails on older Pythons built against OpenSSL 3
            context.load_verify_locations(cadata=ssl.DER_cert_to_PEM_cert(der))
        # The host name to check after the handshake (see handshake), where the host's ssl cannot
        # check it as the firmware's OpenSSL would: Python 3.6 (no check during the handshake), and
        # flags without NO_PARTIAL_WILDCARDS, which CPython always sets and EDK2 passes as given.
        self.check_later = None
        self.host_flags = host_flags
        if hostname is not None and verify:
            context.check_hostname = True
            if not hasattr(context, "hostname_checks_common_name") or not host_flags & _NO_PARTIAL_WILDCARDS:
                context.check_hostname = False
                self.check_later = hostname
        else:
            hostname = None
        self.context = context
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=False, server_hostname=hostname)
        self.finished = False

    def handshake(self, data=b""):
        """(failed, output): feed ``data`` and step the handshake (TlsDoHandshake)."""
        if data:
            self.incoming.write(data)
        failed = False
        try:
            self.obj.do_handshake()
            self.finished = True
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLError, ValueError):
            failed = True  # the alert OpenSSL built is in outgoing
        if self.finished and self.check_later is not None:
            # Checked here after the handshake, in Python; EDK2's OpenSSL checks
            # during it and answers bad_certificate (docs/tls.md section 3.3): play that alert instead
            if not check_host(self.obj.getpeercert(), self.check_later, self.host_flags):
                self.outgoing.read()
                self.finished = False
                return True, b"\x15\x03\x03\x00\x02\x02\x2a"
            self.check_later = None
        return failed, self.outgoing.read()

    def alert(self, data):
        """TlsHandleAlert: SSL_read over the record, whatever it says; the output."""
        if data:
            self.incoming.write(data)
        try:
            self.obj.read(32768)
        except (ssl.SSLError, ValueError):
            pass
        return self.outgoing.read()

    def encrypt(self, payload):
        self.obj.write(payload)
        return self.outgoing.read()

    def decrypt(self, record):
        """(ok, plaintext, output): ok False when the record does not decrypt."""
        self.incoming.write(record)
        out = []
        while True:
            try:
                piece = self.obj.read(PLAIN_MAX)
            except ssl.SSLWantReadError:
                break
            except (ssl.SSLError, ValueError):
                return False, b"", self.outgoing.read()
            if not piece:
                break
            out.append(piece)
        return True, b"".join(out), self.outgoing.read()

    def close(self):
        try:
            self.obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        return self.outgoing.read()

    def cipher_id(self):
        cipher = self.obj.cipher()
        if not cipher:
            return None
        for entry in self.context.get_ciphers():
            if entry.get("name") == cipher[0]:
                return entry["id"] & 0xFFFF
        return None

    def version_id(self):
        """The negotiated version as EFI_TLS_VERSION's two bytes (0x0303), or None before it."""
        return _VERSION_IDS.get(self.obj.version()) if self.finished else None

    def shutdown(self):
        pass


_NO_WILDCARDS, _NO_PARTIAL_WILDCARDS, _MULTI_LABEL_WILDCARDS, _NEVER_CHECK_SUBJECT = 0x02, 0x04, 0x08, 0x20


def _ip(text):
    import ipaddress
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _wildcard_match(pattern, hostname, flags):
    """OpenSSL's X509_check_host for one DNS name (crypto/x509/v3_utl.c): a '*' only in the
    left-most label, with at least two labels after it, matching within one label (several with
    MULTI_LABEL_WILDCARDS); "f*" or "*f" partial wildcards unless NO_PARTIAL_WILDCARDS; none in
    an IDNA ("xn--") label."""
    pattern, hostname = pattern.lower().rstrip("."), hostname.lower().rstrip(".")
    if "*" not in pattern or flags & _NO_WILDCARDS:
        return pattern == hostname
    label, _, rest = pattern.partition(".")
    if pattern.count("*") != 1 or "*" not in label or rest.count(".") < 1 or label.startswith("xn--"):
        return False
    if label != "*" and flags & _NO_PARTIAL_WILDCARDS:
        return False
    prefix, _, suffix = label.partition("*")
    if not hostname.endswith("." + rest):
        return False
    head = hostname[:-len(rest) - 1]
    if not head or ("." in head and not flags & _MULTI_LABEL_WILDCARDS) or head.startswith("xn--"):
        return False
    return len(head) >= len(prefix) + len(suffix) and head.startswith(prefix) and head.endswith(suffix)


def check_host(cert, hostname, flags):
    """Whether ``cert`` (getpeercert()'s dict) is for ``hostname`` as the firmware's OpenSSL
    decides with these EFI_TLS_VERIFY_FLAG_* flags (the same values as X509_CHECK_FLAG_*): an IP
    address only against IP address entries; a name against the DNS entries, or the commonName
    when there are none."""
    names = cert.get("subjectAltName", ())
    address = _ip(hostname)
    if address is not None:
        return any(kind == "IP Address" and _ip(value) == address for kind, value in names)
    dns = [value for kind, value in names if kind == "DNS"]
    if dns:
        return any(_wildcard_match(value, hostname, flags) for value in dns)
    if flags & _NEVER_CHECK_SUBJECT:
        return False
    return any(_wildcard_match(value, hostname, flags) for rdn in cert.get("subject", ()) for key, value in rdn
               if key == "commonName")


_VERSION_IDS = {"TLSv1": 0x0301, "TLSv1.1": 0x0302, "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


def available():
    """Whether this Python can run ``Engine`` itself."""
    return hasattr(ssl, "MemoryBIO")


def find_python3():
    path = os.environ.get("BITSNET_PYTHON3")
    if path:
        return path
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, "python3")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _read_exactly(stream, n):
    data = b""
    while len(data) < n:
        piece = stream.read(n - len(data))
        if not piece:
            raise EOFError("the TLS engine helper went away")
        data += piece
    return data


class RemoteEngine(object):
    """``Engine``'s methods, run by a Python 3 helper process (for a 2.7 simulator)."""

    def __init__(self, verify, version, hostname, cas, host_flags=0):
        python = find_python3()
        if python is None:
            raise RuntimeError("no python3 for the TLS engine helper (set BITSNET_PYTHON3)")
        self.proc = subprocess.Popen([python, os.path.abspath(__file__.replace(".pyc", ".py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self.finished = False
        config = {"verify": bool(verify), "version": version, "hostname": hostname, "flags": int(host_flags),
                  "cas": [bytearray(der).hex() if hasattr(bytearray, "hex") else _hex(der) for der in cas]}
        self._ask(b"I", repr(config).encode("ascii"))

    def _ask(self, op, payload=b""):
        self.proc.stdin.write(op + struct.pack(">I", len(payload)) + payload)
        self.proc.stdin.flush()
        head = _read_exactly(self.proc.stdout, 5)
        flags, n = struct.unpack(">BI", head)
        return flags, _read_exactly(self.proc.stdout, n)

    def handshake(self, data=b""):
        flags, out = self._ask(b"H", data or b"")
        if flags & 2:
            self.finished = True
        return bool(flags & 1), out

    def alert(self, data):
        return self._ask(b"A", data)[1]

    def encrypt(self, payload):
        return self._ask(b"E", payload)[1]

    def decrypt(self, record):
        flags, payload = self._ask(b"D", record)
        if flags & 1:
            return False, b"", payload
        n = struct.unpack(">I", payload[:4])[0]
        return True, payload[4:4 + n], payload[4 + n:]

    def close(self):
        return self._ask(b"C")[1]

    def cipher_id(self):
        payload = self._ask(b"X")[1]
        return struct.unpack(">H", payload)[0] if payload else None

    def version_id(self):
        payload = self._ask(b"V")[1]
        return struct.unpack(">H", payload)[0] if payload else None

    def shutdown(self):
        if self.proc.poll() is None:
            try:
                self._ask(b"Q")
            except (EOFError, IOError, OSError):
                pass
            try:
                self.proc.stdin.close()
            except (IOError, OSError):
                pass
            self.proc.wait()
        self.proc.stdout.close()


def _hex(data):
    import binascii
    return binascii.hexlify(bytes(data)).decode("ascii")


def serve(stdin, stdout):
    """The helper's loop: one Engine, requests until Q or end of input."""
    import ast
    engine = None
    while True:
        head = stdin.read(5)
        if len(head) < 5:
            return
        op, n = head[:1], struct.unpack(">I", head[1:])[0]
        payload = _read_exactly(stdin, n)
        flags, out = 0, b""
        if op == b"I":
            config = ast.literal_eval(payload.decode("ascii"))
            engine = Engine(config["verify"], config["version"], config["hostname"],
                            [bytes.fromhex(h) for h in config["cas"]], config["flags"])
        elif op == b"H":
            failed, out = engine.handshake(payload)
            flags = (1 if failed else 0) | (2 if engine.finished else 0)
        elif op == b"A":
            out = engine.alert(payload)
        elif op == b"E":
            out = engine.encrypt(payload)
        elif op == b"D":
            ok, plain, alert = engine.decrypt(payload)
            flags, out = (0, struct.pack(">I", len(plain)) + plain + alert) if ok else (1, alert)
        elif op == b"C":
            out = engine.close()
        elif op == b"X":
            cipher = engine.cipher_id()
            out = struct.pack(">H", cipher) if cipher is not None else b""
        elif op == b"V":
            version = engine.version_id()
            out = struct.pack(">H", version) if version is not None else b""
        stdout.write(struct.pack(">BI", flags, len(out)) + out)
        stdout.flush()
        if op == b"Q":
            return


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
