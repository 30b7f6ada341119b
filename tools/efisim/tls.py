"""TlsDxe: EFI_TLS_SERVICE_BINDING_PROTOCOL, EFI_TLS_PROTOCOL and EFI_TLS_CONFIGURATION_PROTOCOL.

Modelled on EDK2's NetworkPkg/TlsDxe (TlsDriver.c, TlsProtocol.c, TlsConfigProtocol.c,
TlsImpl.c) over CryptoPkg's TlsLib (docs/tls.md has each fact with its source):

* The service binding sits on its own handle (TlsDxe is not bound to a NIC); each child carries
  both EFI_TLS_PROTOCOL and EFI_TLS_CONFIGURATION_PROTOCOL.
* SetSessionData/GetSessionData with EDK2's status codes: anything but EfiTlsSessionState once
  the session has started is EFI_NOT_READY; sizes are checked per type; EfiTlsVerifyHost needs
  EFI_TLS_VERIFY_PEER set first (profile ``edk2-2019``: no EfiTlsVerifyHost, EFI_UNSUPPORTED).
* BuildResponsePacket: NULL request in NotStarted gives the ClientHello (state HandShaking), in
  Closing the close_notify, in Error the pending alert, otherwise EFI_NOT_READY; a request is
  fed to the handshake (state DataTransferring when it finishes, EFI_ABORTED when it fails, the
  failure's alert left pending) or, after the handshake, handled as an alert. Output that does
  not fit is EFI_BUFFER_TOO_SMALL with the size needed, and it stays pending: the next call
  ignores its request and returns it (TlsLib TlsDoHandshake's BIO_ctrl_pending test).
* ProcessPacket: only in DataTransferring; the fragments must hold whole application_data
  records (plaintext ones with their Length in host byte order, EDK2 quirk); the result is one
  new fragment table and buffer from pool, which the caller frees; a decryption failure is
  EFI_ABORTED and state EfiTlsSessionError.
* CA certificates (DER or PEM) go to one store for the whole service (the SSL_CTX), as EDK2's
  TlsSetCaCertificate does: a CA given to one child is trusted by every later child.

The TLS engine is the host's OpenSSL through Python 3's ``ssl.MemoryBIO`` + ``SSLObject``
(tools/efisim/tls_engine.py), so the peers are real HTTPS servers on loopback. Python 2.7 has no
MemoryBIO: there each connection's engine runs in a python3 helper process over a pipe; with no
python3 at all the driver is not installed (``available()`` says why) and TLS tests skip. Not modelled: EfiTlsCipherList
(accepted, the engine chooses), server mode, ClientRandom/ServerRandom/KeyMaterial (EFI_UNSUPPORTED
here: Python's ssl does not expose them).
"""

from __future__ import absolute_import

import ctypes
import ssl as _hostssl
import struct
from ctypes import POINTER

from bitsnet import efidefs_tls as T
from efisim import tls_engine, uefi
from efisim.firmware import FIRMWARE, efiapi, pointer_address

S = uefi
PROFILES = ("edk2", "edk2-2019")  # edk2-2019: TlsDxe before EfiTlsVerifyHost (CVE-2019-14553 fix)
_VERSIONS = {0x0301: "TLSv1", 0x0302: "TLSv1_1", 0x0303: "TLSv1_2"}  # ssl.TLSVersion names


def available():
    """(True, "") or (False, why): can the TLS engine run here (in this Python, or in a python3
    helper process for Python 2.7, tls_engine.RemoteEngine)?"""
    if tls_engine.available() or tls_engine.find_python3() is not None:
        return True, ""
    return False, ("Python %s's ssl has no MemoryBIO and no python3 is on PATH for the TLS engine helper "
                   "(BITSNET_PYTHON3)" % ".".join(str(v) for v in __import__("sys").version_info[:2]))


def _engine(child, cas):
    """A TLS connection set up as the child's session data says (TlsLib's TlsNew + settings)."""
    cls = tls_engine.Engine if tls_engine.available() else tls_engine.RemoteEngine
    return cls(bool(child.verify & T.EFI_TLS_VERIFY_PEER), _VERSIONS.get(child.version), child.verify_host,
               list(cas), child.verify_host_flags)


class TlsChild(object):
    """One TLS_INSTANCE: its two protocol interfaces and the session's settings and state."""

    def __init__(self, driver):
        self.driver = driver
        self.handle = FIRMWARE.new_handle()
        self.tls = T.EFI_TLS_PROTOCOL()
        for name, _ in T.EFI_TLS_PROTOCOL._fields_:
            setattr(self.tls, name, driver.functions[name])
        self.config = T.EFI_TLS_CONFIGURATION_PROTOCOL()
        for name, _ in T.EFI_TLS_CONFIGURATION_PROTOCOL._fields_:
            setattr(self.config, name, driver.functions["Config" + name])
        self.state = T.EfiTlsSessionNotStarted
        self.version = None  # type: object   # 0x0303 once EfiTlsVersion set it
        self.end = T.EfiTlsClient  # TlsServiceBindingCreateChild: client by default
        self.verify = T.EFI_TLS_VERIFY_NONE
        self.verify_host = None  # type: object
        self.verify_host_flags = 0  # EFI_TLS_VERIFY_HOST.Flags: OpenSSL's X509_CHECK_FLAG_* (SSL_set_hostflags)
        self.engine = None  # type: object
        self.pending = b""  # the engine's output not yet handed out (the OutBio)


class TlsDriver(object):
    """TlsDxe: the service binding on its own handle, the children, the shared CA store."""

    def __init__(self, machine, profile="edk2"):
        if profile not in PROFILES:
            raise ValueError("tls profile must be one of %s" % ", ".join(PROFILES))
        self.machine = machine
        self.profile = profile
        self.children = {}  # type: dict   # handle -> TlsChild
        self._by_tls = {}  # type: dict
        self._by_config = {}  # type: dict
        self._retired = []  # type: list
        self.cas = []  # type: list   # DER certificates: the service's SSL_CTX store (docs/tls.md section 2.3)
        self.functions = {}
        for name, ftype in T.EFI_TLS_PROTOCOL._fields_:
            self.functions[name] = ftype(getattr(self, "_" + name))
        for name, ftype in T.EFI_TLS_CONFIGURATION_PROTOCOL._fields_:
            self.functions["Config" + name] = ftype(getattr(self, "_Config" + name))
        self.service = T.EFI_TLS_SERVICE_BINDING_PROTOCOL()
        fields = dict(T.EFI_TLS_SERVICE_BINDING_PROTOCOL._fields_)
        self.service.CreateChild = fields["CreateChild"](self._CreateChild)
        self.service.DestroyChild = fields["DestroyChild"](self._DestroyChild)
        self.handle = FIRMWARE.new_handle()
        FIRMWARE.install_protocol(self.handle, T.EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID, ctypes.addressof(self.service))

    def ledger(self):
        with FIRMWARE.lock:
            return {"tls_children": len(self.children)}

    def shutdown(self):
        with FIRMWARE.lock:
            for child in list(self.children.values()):
                self._destroy(child)
            for child, _ in self._retired:
                if child.engine is not None:
                    child.engine.shutdown()
            FIRMWARE.uninstall_protocol(self.handle, T.EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID)

    # ------------------------------------------------------------------ service binding
    @efiapi()
    def _CreateChild(self, this, handle_pointer):
        if not this or not handle_pointer:
            return S.EFI_INVALID_PARAMETER
        with FIRMWARE.lock:
            child = TlsChild(self)
            self.children[child.handle] = child
            self._by_tls[ctypes.addressof(child.tls)] = child
            self._by_config[ctypes.addressof(child.config)] = child
            FIRMWARE.install_protocol(child.handle, T.EFI_TLS_PROTOCOL_GUID, ctypes.addressof(child.tls))
            FIRMWARE.install_protocol(child.handle, T.EFI_TLS_CONFIGURATION_PROTOCOL_GUID,
                                      ctypes.addressof(child.config))
            handle_pointer[0] = child.handle
        return S.EFI_SUCCESS

    @efiapi()
    def _DestroyChild(self, this, handle):
        if not this or not handle:
            return S.EFI_INVALID_PARAMETER
        with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
            child = self.children.get(handle)
            if child is None:
                return S.EFI_UNSUPPORTED  # OpenProtocol(EFI_TLS_PROTOCOL) fails on a foreign handle
            self._destroy(child)
        return S.EFI_SUCCESS

    def _destroy(self, child):
        self.children.pop(child.handle, None)
        self._by_tls.pop(ctypes.addressof(child.tls), None)
        self._by_config.pop(ctypes.addressof(child.config), None)
        FIRMWARE.uninstall_protocol(child.handle, T.EFI_TLS_PROTOCOL_GUID)
        FIRMWARE.uninstall_protocol(child.handle, T.EFI_TLS_CONFIGURATION_PROTOCOL_GUID)
        cell = FIRMWARE.free_handle(child.handle)
        self._retired.append((child, cell))
        del self._retired[:-64]
        engine, child.engine = child.engine, None
        if engine is not None:
            engine.shutdown()

    def _call(self, table, this, body, args):
        with FIRMWARE.lock:
            child = table.get(pointer_address(this))
            if child is None:
                return S.EFI_INVALID_PARAMETER
            with FIRMWARE.at_tpl(uefi.TPL_CALLBACK):
                return body(child, *args)

    # ------------------------------------------------------------------ EFI_TLS_PROTOCOL
    @efiapi()
    def _SetSessionData(self, this, data_type, data, size):
        if not this or not data or not size:
            return S.EFI_INVALID_PARAMETER
        return self._call(self._by_tls, this, self.set_session_data, (data_type, data, size))

    def set_session_data(self, child, data_type, data, size):
        if data_type != T.EfiTlsSessionState and child.state != T.EfiTlsSessionNotStarted:
            return S.EFI_NOT_READY
        raw = ctypes.string_at(data, size)
        if data_type == T.EfiTlsVersion:
            if size != ctypes.sizeof(T.EFI_TLS_VERSION):
                return S.EFI_INVALID_PARAMETER
            version = struct.unpack(">H", raw)[0]
            if version not in _VERSIONS:
                return S.EFI_UNSUPPORTED
            child.version = version
        elif data_type == T.EfiTlsConnectionEnd:
            if size != 4:
                return S.EFI_INVALID_PARAMETER
            child.end = struct.unpack("<I", raw)[0]
        elif data_type == T.EfiTlsCipherList:
            if size % 2:
                return S.EFI_INVALID_PARAMETER
        elif data_type == T.EfiTlsCompressionMethod:
            pass
        elif data_type == T.EfiTlsVerifyMethod:
            if size != 4:
                return S.EFI_INVALID_PARAMETER
            child.verify = struct.unpack("<I", raw)[0]
        elif data_type == T.EfiTlsVerifyHost:
            if self.profile == "edk2-2019":
                return S.EFI_UNSUPPORTED
            if size != ctypes.sizeof(T.EFI_TLS_VERIFY_HOST):
                return S.EFI_INVALID_PARAMETER
            host = T.EFI_TLS_VERIFY_HOST.from_address(data)
            flags = host.Flags
            if flags & T.EFI_TLS_VERIFY_FLAG_ALWAYS_CHECK_SUBJECT and flags & T.EFI_TLS_VERIFY_FLAG_NEVER_CHECK_SUBJECT:
                return S.EFI_INVALID_PARAMETER
            if flags & T.EFI_TLS_VERIFY_FLAG_NO_WILDCARDS and flags & (
                    T.EFI_TLS_VERIFY_FLAG_NO_PARTIAL_WILDCARDS | T.EFI_TLS_VERIFY_FLAG_MULTI_LABEL_WILDCARDS):
                return S.EFI_INVALID_PARAMETER
            if not child.verify & T.EFI_TLS_VERIFY_PEER:
                return S.EFI_INVALID_PARAMETER
            child.verify_host = (host.HostName or b"").decode("ascii", "replace")
            child.verify_host_flags = flags
        elif data_type == T.EfiTlsSessionID:
            if size != 34:
                return S.EFI_INVALID_PARAMETER
        elif data_type == T.EfiTlsSessionState:
            if size != 4:
                return S.EFI_INVALID_PARAMETER
            child.state = struct.unpack("<I", raw)[0]
        elif data_type in (T.EfiTlsClientRandom, T.EfiTlsServerRandom, T.EfiTlsKeyMaterial):
            return S.EFI_ACCESS_DENIED
        else:
            return S.EFI_UNSUPPORTED  # EfiTlsExtensionData included
        return S.EFI_SUCCESS

    @efiapi()
    def _GetSessionData(self, this, data_type, data, size_pointer):
        if not this or not size_pointer or (not data and size_pointer[0]):
            return S.EFI_INVALID_PARAMETER
        return self._call(self._by_tls, this, self.get_session_data, (data_type, data, size_pointer))

    def get_session_data(self, child, data_type, data, size_pointer):
        if child.state == T.EfiTlsSessionNotStarted and data_type in (
                T.EfiTlsSessionID, T.EfiTlsClientRandom, T.EfiTlsServerRandom, T.EfiTlsKeyMaterial):
            return S.EFI_NOT_READY
        if data_type == T.EfiTlsVersion:
            # HTONS (TlsGetVersion): OpenSSL's SSL_version, which is the method's highest version
            # (TLS 1.3 on OVMF) until one is negotiated, whatever EfiTlsVersion set (docs/tls.md section 2.2)
            negotiated = child.engine.version_id() if child.engine is not None else None
            value = struct.pack(">H", negotiated or 0x0304)
        elif data_type == T.EfiTlsConnectionEnd:
            value = struct.pack("<I", child.end)[:1]  # EDK2 writes one byte of the 4-byte enum
            if size_pointer[0] < 4:
                size_pointer[0] = 4
                return S.EFI_BUFFER_TOO_SMALL
        elif data_type == T.EfiTlsCipherList:
            cipher = child.engine.cipher_id() if child.engine is not None else None
            if size_pointer[0] < 2:
                size_pointer[0] = 2
                return S.EFI_BUFFER_TOO_SMALL
            if cipher is None:
                return S.EFI_UNSUPPORTED
            value = struct.pack(">H", cipher)
        elif data_type == T.EfiTlsVerifyMethod:
            value = struct.pack("<I", child.verify)
        elif data_type == T.EfiTlsSessionState:
            value = struct.pack("<I", child.state)
        elif data_type in (T.EfiTlsSessionID, T.EfiTlsClientRandom, T.EfiTlsServerRandom, T.EfiTlsKeyMaterial):
            return S.EFI_UNSUPPORTED  # not exposed by Python's ssl (a simulator limit)
        else:
            return S.EFI_UNSUPPORTED
        if data_type != T.EfiTlsConnectionEnd:
            if size_pointer[0] < len(value):
                size_pointer[0] = len(value)
                return S.EFI_BUFFER_TOO_SMALL
            size_pointer[0] = len(value)
        else:
            size_pointer[0] = 4
        ctypes.memmove(data, value, len(value))
        return S.EFI_SUCCESS

    @efiapi()
    def _BuildResponsePacket(self, this, request, request_size, buffer, size_pointer):
        if not this or not size_pointer or (not request and request_size) or (request and not request_size) \
                or (not buffer and size_pointer[0]):
            return S.EFI_INVALID_PARAMETER
        return self._call(self._by_tls, this, self.build_response,
                          (pointer_address(request), request_size, pointer_address(buffer), size_pointer))

    def build_response(self, child, request, request_size, buffer, size_pointer):
        data = ctypes.string_at(request, request_size) if request else None
        if data is None:
            if child.state == T.EfiTlsSessionNotStarted:
                if not child.pending:
                    child.engine = _engine(child, self.cas)
                    child.pending = child.engine.handshake()[1]
                status = self._emit(child, buffer, size_pointer)
                if status != S.EFI_SUCCESS:
                    return status
                if not size_pointer[0]:
                    return S.EFI_ABORTED
                child.state = T.EfiTlsSessionHandShaking
                return S.EFI_SUCCESS
            if child.state == T.EfiTlsSessionClosing:
                if not child.pending and child.engine is not None:
                    child.pending = child.engine.close()
                status = self._emit(child, buffer, size_pointer)
                if status == S.EFI_SUCCESS and not size_pointer[0]:
                    return S.EFI_ABORTED
                return status
            if child.state == T.EfiTlsSessionError:
                return self._emit(child, buffer, size_pointer)  # TlsHandleAlert: what is pending
            return S.EFI_NOT_READY
        engine = child.engine
        if engine is None:  # a request before the ClientHello: TlsDoHandshake starts the handshake
            child.engine = engine = _engine(child, self.cas)
        if not engine.finished:
            if not child.pending:
                failed, child.pending = engine.handshake(data)
                if failed:
                    return S.EFI_ABORTED  # the alert stays pending (OutBio), state unchanged
            status = self._emit(child, buffer, size_pointer)
            if status == S.EFI_SUCCESS and engine.finished:
                child.state = T.EfiTlsSessionDataTransferring
            return status
        if not child.pending:
            child.pending = engine.alert(data)
        status = self._emit(child, buffer, size_pointer)
        if status not in (S.EFI_SUCCESS, S.EFI_BUFFER_TOO_SMALL):
            child.state = T.EfiTlsSessionError
        return status

    @staticmethod
    def _emit(child, buffer, size_pointer):
        """Hand out the pending output: EFI_BUFFER_TOO_SMALL (it stays pending) or all of it."""
        n = len(child.pending)
        if n > size_pointer[0]:
            size_pointer[0] = n
            return S.EFI_BUFFER_TOO_SMALL
        if n:
            ctypes.memmove(buffer, child.pending, n)
        size_pointer[0] = n
        child.pending = b""
        return S.EFI_SUCCESS

    @efiapi()
    def _ProcessPacket(self, this, table_pointer, count_pointer, mode):
        if not this or not table_pointer or not count_pointer:
            return S.EFI_INVALID_PARAMETER
        return self._call(self._by_tls, this, self.process_packet, (table_pointer, count_pointer, mode))

    def process_packet(self, child, table_pointer, count_pointer, mode):
        if child.state != T.EfiTlsSessionDataTransferring:
            return S.EFI_NOT_READY
        if mode not in (T.EfiTlsEncrypt, T.EfiTlsDecrypt):
            return S.EFI_INVALID_PARAMETER
        table = table_pointer[0]
        data = b"".join(ctypes.string_at(table[i].FragmentBuffer, table[i].FragmentLength)
                        for i in range(count_pointer[0]) if table[i].FragmentLength)
        records = []
        pos = 0
        while pos < len(data):
            if len(data) - pos < T.TLS_RECORD_HEADER_LENGTH:
                return S.EFI_INVALID_PARAMETER
            kind = struct.unpack("B", data[pos:pos + 1])[0]
            if mode == T.EfiTlsEncrypt:  # EDK2 quirk: Length read in host byte order (TlsEncryptPacket)
                length = struct.unpack("<H", data[pos + 3:pos + 5])[0]
                limit = T.TLS_PLAINTEXT_RECORD_MAX_PAYLOAD_LENGTH
            else:
                length = struct.unpack(">H", data[pos + 3:pos + 5])[0]
                limit = T.TLS_CIPHERTEXT_RECORD_MAX_PAYLOAD_LENGTH
            if kind != T.TlsContentTypeApplicationData or length > limit:
                return S.EFI_INVALID_PARAMETER
            if pos + T.TLS_RECORD_HEADER_LENGTH + length > len(data):
                # EDK2 does not check this: TlsEncryptPacket/TlsDecryptPacket read past the end of
                # their copy of the fragments. The simulator refuses, so that the caller's bug shows.
                return S.EFI_INVALID_PARAMETER
            records.append(data[pos:pos + T.TLS_RECORD_HEADER_LENGTH + length])
            pos += T.TLS_RECORD_HEADER_LENGTH + length
        out = []
        for record in records:
            if mode == T.EfiTlsEncrypt:
                out.append(child.engine.encrypt(record[T.TLS_RECORD_HEADER_LENGTH:]))
                continue
            ok, plain, alert = child.engine.decrypt(record)
            if not ok:
                child.state = T.EfiTlsSessionError
                child.pending += alert  # what BuildResponsePacket (NULL) hands out next
                return S.EFI_ABORTED
            out.append(record[:3] + struct.pack("<H", len(plain)) + plain)  # host-order Length (quirk)
        result = b"".join(out)
        buffer = FIRMWARE.allocate(max(len(result), 1))
        if result:
            ctypes.memmove(buffer, result, len(result))
        new_table = FIRMWARE.allocate(ctypes.sizeof(T.EFI_TLS_FRAGMENT_DATA))
        fragment = T.EFI_TLS_FRAGMENT_DATA.from_address(new_table)
        fragment.FragmentLength = len(result)
        fragment.FragmentBuffer = buffer
        table_pointer[0] = ctypes.cast(new_table, POINTER(T.EFI_TLS_FRAGMENT_DATA))
        count_pointer[0] = 1
        return S.EFI_SUCCESS

    # ------------------------------------------------------------------ EFI_TLS_CONFIGURATION_PROTOCOL
    @efiapi()
    def _ConfigSetData(self, this, data_type, data, size):
        if not this or not data or not size:
            return S.EFI_INVALID_PARAMETER
        return self._call(self._by_config, this, self.config_set_data, (data_type, data, size))

    def config_set_data(self, child, data_type, data, size):
        raw = ctypes.string_at(data, size)
        if data_type == T.EfiTlsConfigDataTypeCACertificate:
            der = _certificate(raw)
            if der is None:
                return S.EFI_ABORTED  # neither DER nor PEM (d2i_X509, PEM_read_bio_X509 failed)
            if der not in self.cas:
                self.cas.append(der)  # the SSL_CTX's store, shared by every child
            return S.EFI_SUCCESS
        if data_type == T.EfiTlsConfigDataTypeHostPublicCert:
            return S.EFI_SUCCESS if _certificate(raw) is not None else S.EFI_ABORTED
        if data_type in (T.EfiTlsConfigDataTypeHostPrivateKey, T.EfiTlsConfigDataTypeCertRevocationList):
            return S.EFI_UNSUPPORTED
        return S.EFI_UNSUPPORTED

    @efiapi()
    def _ConfigGetData(self, this, data_type, data, size_pointer):
        if not this or not size_pointer or (not data and size_pointer[0]):
            return S.EFI_INVALID_PARAMETER
        if data_type == T.EfiTlsConfigDataTypeHostPublicCert:
            return S.EFI_NOT_FOUND
        return S.EFI_UNSUPPORTED  # TlsGetCaCertificate, TlsGetHostPrivateKey...: EFI_UNSUPPORTED


def _certificate(raw):
    """DER bytes of the certificate ``raw`` holds (DER or PEM), or None."""
    if raw.lstrip().startswith(b"-----BEGIN"):
        try:
            raw = _hostssl.PEM_cert_to_DER_cert(raw.decode("ascii"))
        except (ValueError, UnicodeError, TypeError):
            return None
    scratch = _hostssl.SSLContext(getattr(_hostssl, "PROTOCOL_TLS_CLIENT", _hostssl.PROTOCOL_SSLv23))
    pem = _hostssl.DER_cert_to_PEM_cert(bytes(raw))  # as PEM text: Python 2.7's DER cadata fails on OpenSSL 3
    try:
        scratch.load_verify_locations(cadata=pem.decode("ascii") if isinstance(pem, bytes) else pem)
    except (_hostssl.SSLError, ValueError, TypeError):
        return None
    return bytes(raw)


def install(machine, profile="edk2"):
    """Install TlsDxe's service binding on its own handle; returns the driver."""
    return TlsDriver(machine, profile)
