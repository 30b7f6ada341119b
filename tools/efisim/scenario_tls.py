"""The scenario language's ``tls`` verbs for the simulator, as tests/firmware/probe.c's
``op_tls`` runs them on OVMF, with the same trace lines:

  tls child                          CreateChild on the TLS service binding; " config=yes|no"
  tls set TYPE [VALUE [FLAGS]]       SetSessionData: version A.B, verify N, end N, state N,
                                     host NAME [FLAGS] (EfiTlsVerifyHost), random (ClientRandom,
                                     32 bytes), ext (ExtensionData), badsize (VerifyMethod, 2 bytes)
  tls get TYPE [SIZE]                GetSessionData: version, verify, state; " size=N" or " value=..."
  tls build SIZE                     BuildResponsePacket(NULL, 0): " need>0", " bytes>0 record=XX
                                     message=XX" or " bytes=0"
  tls ca garbage|empty               SetData(EfiTlsConfigDataTypeCACertificate) with no certificate
  tls process encrypt|decrypt        ProcessPacket with one 6-byte application_data record
  tls destroy                        DestroyChild

One TLS child at a time, as in the probe.
"""

import ctypes
from ctypes import byref

import efi
from bitsnet import efidefs_tls as T

_GET = {"version": T.EfiTlsVersion, "verify": T.EfiTlsVerifyMethod, "state": T.EfiTlsSessionState}
_SET = {"verify": T.EfiTlsVerifyMethod, "end": T.EfiTlsConnectionEnd, "state": T.EfiTlsSessionState}


def _num(text):
    digits = ""
    for ch in text:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits or "0")


class TlsVerbs(object):
    def __init__(self, interpreter):
        self.interp = interpreter
        self.sb = None
        try:
            handles = efi.locate_handles(T.EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID)
            if handles:
                self.sb = T.EFI_TLS_SERVICE_BINDING_PROTOCOL.from_handle(handles[0])
        except Exception:  # no TlsDxe on this machine
            self.sb = None
        self.handle = None
        self.tls = None
        self.cfg = None
        self.out = (ctypes.c_uint8 * 16384)()

    def op(self, what, detail, status, extra=""):
        from efisim.scenario import status_name
        self.interp.out("@@ L%d tls-%s%s -> %s%s" % (self.interp.line, what, " " + detail if detail else "",
                                                    status_name(status), extra))

    def run(self, words):
        sub = words[1]
        if sub == "child":
            self.tls = self.cfg = None
            handle = efi.EFI_HANDLE()
            status = self.sb.CreateChild(byref(self.sb), byref(handle)) if self.sb else efi.EFI_UNSUPPORTED
            if status == efi.EFI_SUCCESS:
                self.handle = handle.value
                self.tls = T.EFI_TLS_PROTOCOL.from_handle(self.handle)
                self.cfg = T.EFI_TLS_CONFIGURATION_PROTOCOL.from_handle(self.handle)
            self.op("child", None, status, " config=yes" if self.cfg is not None else " config=no")
            return
        if self.tls is None:
            self.interp.note("error no tls child")
            return
        handler = getattr(self, "do_" + sub, None)
        if handler is None or (sub != "destroy" and len(words) < 3):
            self.interp.note("error unknown tls operation")
            return
        handler(words)

    def do_destroy(self, words):
        status = self.sb.DestroyChild(byref(self.sb), self.handle)
        self.tls = self.cfg = None
        self.op("destroy", None, status)

    def do_set(self, words):
        kind, tls = words[2], self.tls
        data = (ctypes.c_uint8 * 32)()
        if kind == "version" and len(words) > 3:
            data[0], data[1] = _num(words[3]), _num(words[3][2:])
            status = tls.SetSessionData(byref(tls), T.EfiTlsVersion, data, 2)
        elif kind in _SET:
            value = efi.UINT32(_num(words[3]) if len(words) > 3 else 0)
            status = tls.SetSessionData(byref(tls), _SET[kind], byref(value), 4)
        elif kind == "host" and len(words) > 3:
            self.name = ctypes.create_string_buffer(words[3][:15].encode("ascii"))
            host = T.EFI_TLS_VERIFY_HOST()
            host.Flags = _num(words[4]) if len(words) > 4 else 0
            host.HostName = ctypes.cast(self.name, ctypes.c_char_p)
            status = tls.SetSessionData(byref(tls), T.EfiTlsVerifyHost, byref(host), ctypes.sizeof(host))
        elif kind == "random":
            status = tls.SetSessionData(byref(tls), T.EfiTlsClientRandom, data, 32)
        elif kind == "ext":
            status = tls.SetSessionData(byref(tls), T.EfiTlsExtensionData, data, 4)
        elif kind == "badsize":
            status = tls.SetSessionData(byref(tls), T.EfiTlsVerifyMethod, data, 2)
        else:
            self.interp.note("error unknown tls set")
            return
        self.op("set", kind, status)

    def do_get(self, words):
        kind, tls = words[2], self.tls
        data = (ctypes.c_uint8 * 8)()
        size = efi.UINTN(_num(words[3]) if len(words) > 3 else 8)
        status = tls.GetSessionData(byref(tls), _GET.get(kind, 99), data if size.value else None, byref(size))
        extra = ""
        if status == efi.EFI_BUFFER_TOO_SMALL:
            extra = " size=%d" % size.value
        elif status == efi.EFI_SUCCESS and kind == "version":
            extra = " value=%d.%d" % (data[0], data[1])
        elif status == efi.EFI_SUCCESS:
            extra = " value=%d" % (data[0] | data[1] << 8 | data[2] << 16 | data[3] << 24)
        self.op("get", kind, status, extra)

    def do_build(self, words):
        tls = self.tls
        size = efi.UINTN(min(_num(words[2]), len(self.out)))
        status = tls.BuildResponsePacket(byref(tls), None, 0, self.out if size.value else None, byref(size))
        extra = ""
        if status == efi.EFI_BUFFER_TOO_SMALL:
            extra = " need>0" if size.value else " need=0"
        elif status == efi.EFI_SUCCESS and size.value:
            extra = " bytes>0 record=%02x message=%02x" % (self.out[0], self.out[5])
        elif status == efi.EFI_SUCCESS:
            extra = " bytes=0"
        self.op("build", words[2], status, extra)

    def do_ca(self, words):
        garbage = ctypes.create_string_buffer(b"not a certificate")  # 18 bytes with the NUL, as in C
        size = 0 if words[2] == "empty" else ctypes.sizeof(garbage)
        self.op("ca", words[2], self.cfg.SetData(byref(self.cfg), T.EfiTlsConfigDataTypeCACertificate, garbage,
                                                   size))

    def do_process(self, words):
        tls = self.tls
        record = ctypes.create_string_buffer(b"\x17\x03\x03\x01\x00x", 6)
        table = (T.EFI_TLS_FRAGMENT_DATA * 1)()
        table[0].FragmentLength = 6
        table[0].FragmentBuffer = ctypes.addressof(record)
        pointer = ctypes.cast(table, ctypes.POINTER(T.EFI_TLS_FRAGMENT_DATA))
        count = efi.UINT32(1)
        mode = T.EfiTlsDecrypt if words[2] == "decrypt" else T.EfiTlsEncrypt
        self.op("process", words[2], tls.ProcessPacket(byref(tls), byref(pointer), byref(count), mode))
