"""One TLS client session over the firmware's EFI_TLS_PROTOCOL: the EFI child and the records.

The firmware (EDK2's TlsDxe, on OpenSSL) does all the cryptography; this module only moves TLS
records between it and a TCP socket, following the contract EDK2's own HTTPS boot relies on
(docs/tls.md, section numbers below):

  ``service_handle()``   the handle carrying EFI_TLS_SERVICE_BINDING_PROTOCOL, or None (1.1)
  ``TlsChild``           one child: CreateChild, SetSessionData/SetData to configure it (2),
                         BuildResponsePacket for the handshake and alerts (3), ProcessPacket
                         for application data (4), DestroyChild; ``live_children()`` counts them
  ``TlsSession``         the record pump: handshake(), read(), write(), close_notify() over a
                         transport with ``recv(n)`` and ``send(data)``
  ``TlsFailure``         what goes wrong, with a ``kind`` that ssl.py turns into SSLError classes

Blocking is the transport's business: a transport that raises ``WouldBlock`` (non-blocking
socket) leaves the session where it was, and the call can be repeated (ssl.py's
SSLWantReadError / SSLWantWriteError).
"""

import ctypes
import struct

import efi

from bitsnet import efidefs_tls as T
from bitsnet.errors import status_name  # the one status -> name table

HEADER = T.TLS_RECORD_HEADER_LENGTH
PLAIN_MAX = T.TLS_PLAINTEXT_RECORD_MAX_PAYLOAD_LENGTH
RECORDS_PER_CALL = 4  # plaintext records handed to one ProcessPacket(EfiTlsEncrypt)
FIRST_BUFFER = 4096  # BuildResponsePacket's first buffer; EFI_BUFFER_TOO_SMALL says the size
# The most of the server's plaintext handshake kept (for its Certificate message): OpenSSL's own
# bound on a certificate list is 100 KiB (SSL_MAX_CERT_LIST_DEFAULT), the rest of a server's flight
# is small. EDK2 quirk: the firmware bounds nothing (its OpenSSL skips HelloRequest records during a
# handshake, so a server can send them forever); a server sending more is cut off here
# (docs/tls.md section 3.5).
HANDSHAKE_MAX = 128 * 1024

# RFC 5246 7.2 AlertDescription: the ones a failed handshake produces, for the error message.
ALERTS = {
    0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 22: "record_overflow",
    40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
    44: "certificate_revoked", 45: "certificate_expired", 46: "certificate_unknown",
    47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied", 50: "decode_error",
    51: "decrypt_error", 70: "protocol_version", 71: "insufficient_security", 80: "internal_error",
    90: "user_canceled", 112: "unrecognized_name",
}
CERTIFICATE_ALERTS = (42, 43, 44, 45, 46, 48)  # the firmware's verification failed
ALERT_REASONS = {
    42: "bad certificate", 43: "unsupported certificate", 44: "certificate revoked",
    45: "certificate has expired", 46: "certificate unknown (hostname mismatch or unusable)",
    48: "unable to get local issuer certificate (unknown CA)",
}

_live = {}  # type: dict   # child handle -> TlsChild, until DestroyChild


class TlsFailure(Exception):
    """kind: "unavailable", "config", "verify", "alert", "eof", "protocol", "firmware"."""

    def __init__(self, kind, message, status=None, alert=None):
        Exception.__init__(self, message)
        self.kind = kind
        self.status = status
        self.alert = alert


class WouldBlock(Exception):
    """Raised by a non-blocking transport; ``writing`` tells which direction waits."""

    def __init__(self, writing=False):
        Exception.__init__(self, "would block")
        self.writing = writing


def service_handle():
    """The TLS service binding's handle (TlsDxe installs one, on its own handle, docs/tls.md section 1.1)."""
    try:
        handles = list(efi.locate_handles(T.EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID))
    except efi.EFIException:
        return None
    return handles[0] if handles else None


def live_children():
    """How many TLS children bitsnet made are not destroyed yet (leak checks)."""
    return len(_live)


def _free_pool(address):
    efi.system_table.BootServices.contents.FreePool(ctypes.c_void_p(address))


class TlsChild(object):
    """One EFI_TLS_PROTOCOL + EFI_TLS_CONFIGURATION_PROTOCOL child of the TLS service binding."""

    def __init__(self):
        handle = service_handle()
        if handle is None:
            raise TlsFailure("unavailable", "the firmware has no EFI_TLS_SERVICE_BINDING_PROTOCOL "
                             "(no TlsDxe: EDK2 built without NETWORK_TLS_ENABLE); HTTPS is not possible")
        self.binding = T.EFI_TLS_SERVICE_BINDING_PROTOCOL.from_address(
            efi.get_protocol(handle, T.EFI_TLS_SERVICE_BINDING_PROTOCOL_GUID))
        child = efi.EFI_HANDLE()
        status = self.binding.CreateChild(ctypes.byref(self.binding), ctypes.byref(child))
        if status != efi.EFI_SUCCESS or not child.value:
            raise TlsFailure("firmware", "TLS CreateChild: %s" % status_name(status), status)
        self.handle = child.value
        _live[self.handle] = self
        try:
            self.tls = T.EFI_TLS_PROTOCOL.from_handle(self.handle)
            self.config = T.EFI_TLS_CONFIGURATION_PROTOCOL.from_handle(self.handle)
        except efi.EFIException:
            self.destroy()
            raise TlsFailure("firmware", "the TLS child has no EFI_TLS_PROTOCOL/EFI_TLS_CONFIGURATION_PROTOCOL")

    def destroy(self):
        """DestroyChild (idempotent)."""
        handle, self.handle = self.handle, None
        if handle is not None and _live.pop(handle, None) is not None:
            self.binding.DestroyChild(ctypes.byref(self.binding), handle)

    # -- session data (docs/tls.md section 2)
    def set_session_data(self, data_type, value):
        """SetSessionData with a ctypes object; returns the status."""
        return self.tls.SetSessionData(ctypes.byref(self.tls), data_type, ctypes.byref(value),
                                       ctypes.sizeof(value))

    def must_set(self, data_type, value):
        status = self.set_session_data(data_type, value)
        if status != efi.EFI_SUCCESS:
            raise TlsFailure("config", "EFI_TLS_PROTOCOL.SetSessionData(%s): %s" % (
                T.SESSION_DATA_NAMES[data_type], status_name(status)), status)

    def state(self):
        value = efi.UINT32(T.EfiTlsSessionError)
        size = efi.UINTN(ctypes.sizeof(value))
        status = self.tls.GetSessionData(ctypes.byref(self.tls), T.EfiTlsSessionState, ctypes.byref(value),
                                         ctypes.byref(size))
        if status != efi.EFI_SUCCESS:
            raise TlsFailure("firmware", "GetSessionData(EfiTlsSessionState): %s" % status_name(status), status)
        return value.value

    def set_state(self, state):
        return self.set_session_data(T.EfiTlsSessionState, efi.UINT32(state))

    def add_ca(self, der):
        """SetData(EfiTlsConfigDataTypeCACertificate): one DER certificate (docs/tls.md section 2.3)."""
        buf = ctypes.create_string_buffer(der, len(der))
        status = self.config.SetData(ctypes.byref(self.config), T.EfiTlsConfigDataTypeCACertificate, buf, len(der))
        if status != efi.EFI_SUCCESS:
            raise TlsFailure("config", "EFI_TLS_CONFIGURATION_PROTOCOL.SetData(EfiTlsConfigDataTypeCACertificate):"
                             " %s (the firmware could not parse the certificate)" % status_name(status), status)

    def set_verify_host(self, hostname, flags=T.EFI_TLS_VERIFY_FLAG_NO_PARTIAL_WILDCARDS):
        """SetSessionData(EfiTlsVerifyHost); False if this TlsDxe predates it (docs/tls.md section 2.4).
        EDK2 quirk: the flags go to OpenSSL's SSL_set_hostflags as they are, and with NONE OpenSSL takes
        partial wildcards ("f*.example.com"); bitsnet refuses them, as CPython does (docs/tls.md section 2.4)."""
        name = ctypes.create_string_buffer(hostname.encode("ascii") if not isinstance(hostname, bytes)
                                           else hostname)
        host = T.EFI_TLS_VERIFY_HOST()
        host.Flags = flags
        host.HostName = ctypes.cast(name, ctypes.c_char_p)
        status = self.set_session_data(T.EfiTlsVerifyHost, host)
        if status == efi.EFI_UNSUPPORTED:
            return False
        if status != efi.EFI_SUCCESS:
            raise TlsFailure("config", "SetSessionData(EfiTlsVerifyHost): %s" % status_name(status), status)
        return True

    # -- BuildResponsePacket (docs/tls.md section 3)
    def build_response(self, record=None):
        """(status, bytes to send). On EFI_BUFFER_TOO_SMALL the call is repeated with the same
        request and the size asked for: the firmware has already taken the request in (3.2)."""
        request = ctypes.create_string_buffer(record, len(record)) if record else None
        size = efi.UINTN(FIRST_BUFFER)
        for _ in range(3):
            out = ctypes.create_string_buffer(max(size.value, 1))
            status = self.tls.BuildResponsePacket(ctypes.byref(self.tls), request, len(record) if record else 0,
                                                  out, ctypes.byref(size))
            if status == efi.EFI_BUFFER_TOO_SMALL:
                continue
            if status != efi.EFI_SUCCESS:
                return status, b""
            return status, out.raw[:size.value]
        return efi.EFI_BUFFER_TOO_SMALL, b""

    # -- ProcessPacket (docs/tls.md section 4)
    def process(self, data, mode):
        """ProcessPacket over one fragment holding ``data`` (whole records); returns the records
        it gives back. The firmware allocates a new fragment table and buffer (4.2): freed here."""
        buf = ctypes.create_string_buffer(data, len(data))
        table = (T.EFI_TLS_FRAGMENT_DATA * 1)()
        table[0].FragmentLength = len(data)
        table[0].FragmentBuffer = ctypes.addressof(buf)
        pointer = ctypes.cast(table, ctypes.POINTER(T.EFI_TLS_FRAGMENT_DATA))
        count = efi.UINT32(1)
        status = self.tls.ProcessPacket(ctypes.byref(self.tls), ctypes.byref(pointer), ctypes.byref(count), mode)
        if status != efi.EFI_SUCCESS:
            return status, b""
        new_table = ctypes.cast(pointer, ctypes.c_void_p).value
        pieces = []
        for i in range(count.value):
            fragment = pointer[i]
            pieces.append(ctypes.string_at(fragment.FragmentBuffer, fragment.FragmentLength)
                          if fragment.FragmentLength else b"")
        if new_table != ctypes.addressof(table):
            for i in range(count.value):
                address = pointer[i].FragmentBuffer
                if address and address != ctypes.addressof(buf):
                    _free_pool(address)
            _free_pool(new_table)
        return status, b"".join(pieces)


# --- records ---------------------------------------------------------------------------------
def record_length(data, offset=0):
    """The wire length of the record starting at ``offset`` (network byte order), or None."""
    if len(data) - offset < HEADER:
        return None
    return HEADER + struct.unpack(">H", bytes(data[offset + 3:offset + 5]))[0]


def plaintext_records(data, version=(3, 3)):
    """``data`` cut into application_data records for ProcessPacket(EfiTlsEncrypt). EDK2 quirk:
    the Length of a plaintext record header is in host byte order, little-endian on x86
    (TlsImpl.c TlsEncryptPacket reads it without NTOHS; HttpDxe writes it so; docs/tls.md section 4.3)."""
    out = []
    for start in range(0, len(data), PLAIN_MAX):
        piece = data[start:start + PLAIN_MAX]
        out.append(struct.pack("<BBBH", T.TlsContentTypeApplicationData, version[0], version[1], len(piece)))
        out.append(piece)
    return b"".join(out)


def plaintext_payloads(data):
    """The payloads of ProcessPacket(EfiTlsDecrypt)'s output: records whose header Length is in
    host byte order (EDK2 quirk, TlsDecryptPacket; docs/tls.md section 4.3). A firmware that wrote it in
    network order is recognised by the lengths adding up."""
    for fmt in ("<H", ">H"):
        payloads, offset, ok = [], 0, True
        while offset < len(data):
            if len(data) - offset < HEADER:
                ok = False
                break
            n = struct.unpack(fmt, bytes(data[offset + 3:offset + 5]))[0]
            if offset + HEADER + n > len(data):
                ok = False
                break
            payloads.append(bytes(data[offset + HEADER:offset + HEADER + n]))
            offset += HEADER + n
        if ok:
            return b"".join(payloads)
    raise TlsFailure("firmware", "ProcessPacket(EfiTlsDecrypt) returned malformed records")


class TlsSession(object):
    """The record pump of one connection (see the module docstring)."""

    def __init__(self, child, transport):
        self.child = child
        self.transport = transport
        self.inbuf = bytearray()  # received, not yet handed to the firmware
        self.outbuf = b""  # records to send, not yet taken by the transport
        self.plain = b""  # decrypted, not yet read
        self.started = False
        self.established = False
        self.eof = False  # close_notify or TCP EOF seen
        self.handshake_messages = bytearray()  # the server's plaintext handshake (TLS 1.2)
        self.server_ccs = False  # the server's ChangeCipherSpec seen: its handshake is encrypted now
        self.sent_alert = None
        self.verify_host_name = None  # the name given with EfiTlsVerifyHost (for the error message)

    # -- transport
    def flush(self):
        while self.outbuf:
            n = self.transport.send(self.outbuf)
            self.outbuf = self.outbuf[n:]

    def queue(self, data):
        if data:
            self.outbuf += data

    def _fill(self):
        """Read more from the transport; TlsFailure("eof") at the end of the stream."""
        data = self.transport.recv(32768)
        if not data:
            raise TlsFailure("eof", "EOF occurred in violation of protocol")
        self.inbuf += data

    def next_record(self):
        """One whole record from the transport (blocks or raises WouldBlock)."""
        while True:
            n = record_length(self.inbuf)
            if n is not None and len(self.inbuf) >= n:
                record = bytes(self.inbuf[:n])
                del self.inbuf[:n]
                if _byte(record, 0) not in (20, 21, 22, 23) or _byte(record, 1) != 3:
                    raise TlsFailure("protocol", "the peer does not speak TLS (record type %d, version %d.%d)"
                                     % (_byte(record, 0), _byte(record, 1), _byte(record, 2)))
                return record
            self._fill()

    # -- handshake (docs/tls.md section 3.1)
    def handshake(self):
        if not self.started:
            status, hello = self.child.build_response()
            if status != efi.EFI_SUCCESS or not hello:
                raise TlsFailure("firmware", "BuildResponsePacket (ClientHello): %s" % status_name(status), status)
            self.started = True
            self.queue(hello)
        self.flush()
        while not self.established:
            record = self.next_record()
            kind = _byte(record, 0)
            self._observe(kind, record)
            status, reply = self.child.build_response(record)
            if status != efi.EFI_SUCCESS:
                self._fail_handshake(status, kind, record)
            self.queue(reply)
            self.flush()
            state = self.child.state()
            if state == T.EfiTlsSessionDataTransferring:
                self.established = True
            elif state == T.EfiTlsSessionError:
                self._fail_handshake(efi.EFI_ABORTED, kind, record)

    def _observe(self, kind, record):
        """Keep the server's plaintext handshake messages (TLS 1.2: its Certificate is readable)."""
        if kind == T.TlsContentTypeChangeCipherSpec:
            self.server_ccs = True
        elif kind == T.TlsContentTypeHandshake and not self.server_ccs:
            if len(self.handshake_messages) + len(record) - HEADER > HANDSHAKE_MAX:
                raise TlsFailure("protocol", "the server's handshake messages exceed %d bytes (excessive message "
                                 "size)" % HANDSHAKE_MAX)
            self.handshake_messages += record[HEADER:]

    def _fail_handshake(self, status, kind, record):
        """The firmware refused: say why, from the server's alert or from the alert the firmware
        built for the server (docs/tls.md section 3.3), and send that alert as a polite client does."""
        if kind == T.TlsContentTypeAlert and len(record) >= HEADER + 2:
            alert = _byte(record, HEADER + 1)
            raise TlsFailure("alert", "the server sent alert %d (%s)" % (alert, ALERTS.get(alert, "?")),
                             status, alert)
        alert = None
        if self.child.set_state(T.EfiTlsSessionError) == efi.EFI_SUCCESS:
            got, out = self.child.build_response()
            if got == efi.EFI_SUCCESS and out:
                if _byte(out, 0) == T.TlsContentTypeAlert and len(out) >= HEADER + 2:
                    alert = _byte(out, HEADER + 1)
                self.queue(out)
                try:
                    self.flush()
                except Exception:
                    pass
        self.sent_alert = alert
        if alert in CERTIFICATE_ALERTS:
            reason = ALERT_REASONS[alert]
            if alert in (42, 46) and self.verify_host_name:
                # EDK2 quirk: OVMF's OpenSSL reports a host-name mismatch as bad_certificate (docs/tls.md
                # section 3.3)
                reason = "the certificate is not valid for %r, or is otherwise unusable" % (self.verify_host_name,)
            raise TlsFailure("verify", "certificate verify failed: %s (the firmware's TLS sent alert %d %s)"
                             % (reason, alert, ALERTS[alert]), status, alert)
        raise TlsFailure("protocol", "handshake failed: EFI_TLS_PROTOCOL.BuildResponsePacket returned %s%s"
                         % (status_name(status), "" if alert is None else " (alert %d %s)" % (
                             alert, ALERTS.get(alert, "?"))), status, alert)

    # -- application data (docs/tls.md section 4)
    def write(self, data):
        """Encrypt and queue ``data``; sends what the transport takes. Returns len(data)."""
        chunk = PLAIN_MAX * RECORDS_PER_CALL
        for start in range(0, len(data), chunk):
            status, records = self.child.process(plaintext_records(data[start:start + chunk]), T.EfiTlsEncrypt)
            if status != efi.EFI_SUCCESS:
                raise TlsFailure("firmware", "ProcessPacket(EfiTlsEncrypt): %s" % status_name(status), status)
            self.queue(records)
        self.flush()
        return len(data)

    def read_more(self):
        """Take in one record: application data is decrypted into ``plain``; an alert or a
        handshake message goes to BuildResponsePacket (HttpsSupport.c HttpsReceive, 4.4)."""
        if self.eof:
            return
        try:
            record = self.next_record()
        except TlsFailure as failure:
            if failure.kind == "eof":
                self.eof = True  # a ragged EOF (no close_notify): read() returns b'', as CPython's default
                return
            raise
        kind = _byte(record, 0)
        if kind == T.TlsContentTypeApplicationData:
            status, out = self.child.process(record, T.EfiTlsDecrypt)
            if status != efi.EFI_SUCCESS:
                self._fail_data(status)
            self.plain += plaintext_payloads(out)
            return
        status, reply = self.child.build_response(record)
        self.queue(reply)
        try:
            self.flush()
        except Exception:
            pass
        if kind == T.TlsContentTypeAlert:
            self.eof = True  # close_notify (a fatal alert ends the stream as well, 4.4)

    def _fail_data(self, status):
        got, out = self.child.build_response()  # the firmware is in EfiTlsSessionError: its alert
        if got == efi.EFI_SUCCESS and out:
            self.queue(out)
            try:
                self.flush()
            except Exception:
                pass
        raise TlsFailure("protocol", "decryption failed or bad record mac (ProcessPacket(EfiTlsDecrypt): %s)"
                         % status_name(status), status)

    def pending(self):
        return len(self.plain)

    def buffered_record(self):
        """Whether a whole record is already received (select() must call this readable)."""
        n = record_length(self.inbuf)
        return n is not None and len(self.inbuf) >= n

    def close_notify(self):
        """Closing state, BuildResponsePacket(NULL) gives close_notify (docs/tls.md section 3.4); queued."""
        if not self.established or self.child.set_state(T.EfiTlsSessionClosing) != efi.EFI_SUCCESS:
            return
        status, out = self.child.build_response()
        if status == efi.EFI_SUCCESS:
            self.queue(out)


def _byte(data, i):
    value = data[i]
    return value if isinstance(value, int) else ord(value)
