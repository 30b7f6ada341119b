"""The simulated TlsDxe against the contract docs/tls.md describes, at the EFI level (through
bitsnet.tls's TlsChild, the code that runs in BITS): status codes, session states, the
record-in/records-out handshake with EFI_BUFFER_TOO_SMALL, ProcessPacket's reallocated fragment
table and host-order plaintext headers, alerts after a failure. Section numbers are docs/tls.md's.
"""

from __future__ import print_function

import ctypes
import struct

import pytest

import efi
from efisim import tls as simtls
from test_ssl import OPENSSL, HttpsPeer, _connect, make_pki

ENGINE, NO_ENGINE = simtls.available()
pytestmark = pytest.mark.skipif(not ENGINE, reason=NO_ENGINE or "no TLS engine")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if not OPENSSL:
        pytest.skip("the openssl command is needed to make the test CA")
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def _modules():
    from bitsnet import efidefs_tls as T
    from bitsnet import tls
    return T, tls


def _u32(value):
    return efi.UINT32(value)


def _configured(T, tls, verify=True, ca=None):
    child = tls.TlsChild()
    version = T.EFI_TLS_VERSION()
    version.Major, version.Minor = 3, 3
    child.must_set(T.EfiTlsVersion, version)
    child.must_set(T.EfiTlsVerifyMethod, _u32(T.EFI_TLS_VERIFY_PEER if verify else T.EFI_TLS_VERIFY_NONE))
    if ca is not None:
        child.add_ca(ca)
    return child


def _raw_build(child, request, size):
    """BuildResponsePacket with a buffer of ``size``: (status, needed or produced size, bytes)."""
    req = ctypes.create_string_buffer(request, len(request)) if request else None
    out = ctypes.create_string_buffer(max(size, 1))
    n = efi.UINTN(size)
    status = child.tls.BuildResponsePacket(ctypes.byref(child.tls), req, len(request) if request else 0,
                                           out if size else None, ctypes.byref(n))
    return status, n.value, out.raw[:n.value]


def test_service_binding_and_child(machine):  # 1.1, 1.2
    T, tls = _modules()
    handle = tls.service_handle()
    assert handle is not None and handle != machine.nic.handle
    child = tls.TlsChild()
    assert tls.live_children() == 1 and machine.firmware.ledger()["tls_children"] == 1
    assert efi.get_protocol(child.handle, T.EFI_TLS_CONFIGURATION_PROTOCOL_GUID)
    child.destroy()
    assert tls.live_children() == 0 and machine.firmware.ledger()["tls_children"] == 0


@pytest.mark.machine(tls=None)
def test_no_tlsdxe(machine):
    _, tls = _modules()
    assert tls.service_handle() is None
    with pytest.raises(tls.TlsFailure) as info:
        tls.TlsChild()
    assert info.value.kind == "unavailable"


def test_set_session_data_rules(machine):  # 2.1, 2.4
    T, tls = _modules()
    child = tls.TlsChild()
    try:
        assert child.set_session_data(T.EfiTlsVerifyMethod, efi.UINT16(1)) == efi.EFI_INVALID_PARAMETER  # size
        assert child.set_session_data(T.EfiTlsClientRandom, (ctypes.c_uint8 * 32)()) == efi.EFI_ACCESS_DENIED
        assert child.set_session_data(T.EfiTlsExtensionData, (ctypes.c_uint8 * 4)()) == efi.EFI_UNSUPPORTED
        version = T.EFI_TLS_VERSION()
        version.Major, version.Minor = 3, 9
        assert child.set_session_data(T.EfiTlsVersion, version) == efi.EFI_UNSUPPORTED
        host = T.EFI_TLS_VERIFY_HOST()
        host.HostName = b"localhost"
        assert ctypes.sizeof(host) == 4 + ctypes.sizeof(ctypes.c_void_p)  # #pragma pack (1)
        # EfiTlsVerifyHost needs EFI_TLS_VERIFY_PEER first (TlsSetSessionData asks GetSessionData)
        assert child.set_session_data(T.EfiTlsVerifyHost, host) == efi.EFI_INVALID_PARAMETER
        child.must_set(T.EfiTlsVerifyMethod, _u32(T.EFI_TLS_VERIFY_PEER))
        host.Flags = T.EFI_TLS_VERIFY_FLAG_ALWAYS_CHECK_SUBJECT | T.EFI_TLS_VERIFY_FLAG_NEVER_CHECK_SUBJECT
        assert child.set_session_data(T.EfiTlsVerifyHost, host) == efi.EFI_INVALID_PARAMETER
        host.Flags = T.EFI_TLS_VERIFY_FLAG_NONE
        assert child.set_session_data(T.EfiTlsVerifyHost, host) == efi.EFI_SUCCESS
        status, _ = child.build_response()  # the ClientHello: the session has started
        assert status == efi.EFI_SUCCESS and child.state() == T.EfiTlsSessionHandShaking
        assert child.set_session_data(T.EfiTlsVerifyMethod, _u32(0)) == efi.EFI_NOT_READY
        assert child.set_state(T.EfiTlsSessionHandShaking) == efi.EFI_SUCCESS  # the state is always settable
    finally:
        child.destroy()


@pytest.mark.machine(tls="edk2-2019")
def test_old_tlsdxe_has_no_verify_host(machine):  # 2.4
    T, tls = _modules()
    child = tls.TlsChild()
    try:
        child.must_set(T.EfiTlsVerifyMethod, _u32(T.EFI_TLS_VERIFY_PEER))
        assert child.set_verify_host(b"localhost") is False  # EFI_UNSUPPORTED
    finally:
        child.destroy()


def test_bad_ca_certificate_is_aborted(machine):  # 2.3
    _, tls = _modules()
    child = tls.TlsChild()
    try:
        with pytest.raises(tls.TlsFailure) as info:
            child.add_ca(b"\x30\x03\x02\x01\x01 not a certificate")
        assert info.value.status == efi.EFI_ABORTED
    finally:
        child.destroy()


def test_client_hello_buffer_too_small_then_not_ready(machine):  # 3.1, 3.2, 3.4
    T, tls = _modules()
    child = _configured(T, tls, verify=False)
    try:
        status, needed, _ = _raw_build(child, None, 0)
        assert status == efi.EFI_BUFFER_TOO_SMALL and needed > 40
        assert child.state() == T.EfiTlsSessionNotStarted  # only a ClientHello handed out starts it
        status, got, hello = _raw_build(child, None, needed)
        assert status == efi.EFI_SUCCESS and got == needed
        assert hello[:1] == b"\x16" and hello[5:6] == b"\x01"  # handshake record, ClientHello
        assert child.state() == T.EfiTlsSessionHandShaking
        assert _raw_build(child, None, 4096)[0] == efi.EFI_NOT_READY  # NULL while handshaking
        assert child.process(b"\x17\x03\x03\x01\x00x", T.EfiTlsEncrypt)[0] == efi.EFI_NOT_READY  # 4.1
    finally:
        child.destroy()


def _handshaken(T, tls, pki, peer):
    """A TlsSession over a bitsnet socket to ``peer``, its handshake done."""
    import os
    with open(os.path.join(pki, "ca.pem")) as f:
        from bitsnet import ssl as bssl
        der = bssl.PEM_cert_to_DER_cert(f.read())
    child = _configured(T, tls, ca=der)
    sock = _connect(peer.port)
    session = tls.TlsSession(child, sock)
    session.handshake()
    return child, sock, session


def test_process_packet_contract(machine, pki):  # 4.1, 4.2, 4.3, 3.3
    T, tls = _modules()
    with HttpsPeer(pki, "good", {"a": b"0123456789" * 3000}) as peer:
        child, sock, session = _handshaken(T, tls, pki, peer)
        try:
            assert child.state() == T.EfiTlsSessionDataTransferring
            assert _raw_build(child, None, 4096)[0] == efi.EFI_NOT_READY
            # not application data, and a plaintext Length over 16384 (host byte order): refused
            assert child.process(b"\x16\x03\x03\x01\x00x", T.EfiTlsEncrypt)[0] == efi.EFI_INVALID_PARAMETER
            big = struct.pack("<BBBH", 23, 3, 3, 16385) + b"x" * 16385
            assert child.process(big, T.EfiTlsEncrypt)[0] == efi.EFI_INVALID_PARAMETER
            # in network byte order, 5 bytes would read as 1280: not whole records either
            assert child.process(struct.pack(">BBBH", 23, 3, 3, 5) + b"hello", T.EfiTlsEncrypt)[0] \
                == efi.EFI_INVALID_PARAMETER
            pool_before = machine.firmware.ledger()["pool"]
            request = b"GET /a HTTP/1.0\r\nHost: localhost\r\n\r\n"
            status, records = child.process(tls.plaintext_records(request), T.EfiTlsEncrypt)
            assert status == efi.EFI_SUCCESS and records[:3] == b"\x17\x03\x03"
            assert tls.record_length(records) == len(records)  # one ciphertext record, network order
            assert machine.firmware.ledger()["pool"] == pool_before  # the new table and buffer were freed
            sock.sendall(records)
            record = session.next_record()
            status, plain = child.process(record, T.EfiTlsDecrypt)
            assert status == efi.EFI_SUCCESS
            length = struct.unpack("<H", plain[3:5])[0]  # host byte order (quirk, 4.3)
            assert plain[:3] == b"\x17\x03\x03" and length == len(plain) - 5
            assert plain[5:].startswith(b"HTTP/1.0 200")
            # a record that does not decrypt: EFI_ABORTED, state Error, an alert is pending
            forged = record[:5] + b"\x00" * (len(record) - 5)
            assert child.process(forged, T.EfiTlsDecrypt)[0] == efi.EFI_ABORTED
            assert child.state() == T.EfiTlsSessionError
            status, alert = child.build_response()
            assert status == efi.EFI_SUCCESS and alert[:1] == b"\x15"
        finally:
            sock.close()
            child.destroy()


def test_close_notify(machine, pki):  # 3.4
    T, tls = _modules()
    with HttpsPeer(pki, "good", {}) as peer:
        child, sock, session = _handshaken(T, tls, pki, peer)
        try:
            assert child.set_state(T.EfiTlsSessionClosing) == efi.EFI_SUCCESS
            status, out = child.build_response()
            assert status == efi.EFI_SUCCESS and out[:1] == b"\x15"  # an (encrypted) alert record
        finally:
            sock.close()
            child.destroy()
