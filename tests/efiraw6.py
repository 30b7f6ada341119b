"""Raw EFI TCP6, UDP6 and IP6 Config helpers for the EFI-level IPv6 tests (efiraw.py's IPv6 half).

``Tcp6`` is efiraw.Tcp4 with the TCP6 structures (the token layouts are the same, but each
protocol's function pointers are typed with its own structures, so the tokens must be TCP6 ones);
``Udp6`` wraps a UDP6 child; ``Ip6Config`` the NIC's EFI_IP6_CONFIG_PROTOCOL. Addresses are text
here and packed with the host's inet_pton, which a BITS script would do with bitsnet's own.
"""

from __future__ import print_function

import ctypes
import socket
import time
from ctypes import byref

import efi

import efiraw
from bitsnet import efidefs
from efiraw import Token, boot_services

_clock = getattr(time, "monotonic", time.time)
WAIT = efiraw.WAIT


def ip6(text):
    """EFI_IPv6_ADDRESS of ``text`` ("" or None: ::)."""
    return efidefs.ipv6(socket.inet_pton(socket.AF_INET6, text or "::"))


def ip6_text(address):
    return socket.inet_ntop(socket.AF_INET6, efidefs.ipv6_bytes(address))


def service(guid, cls):
    handles = efi.locate_handles(guid)
    return cls.from_handle(handles[0])


# --- TCP6 ------------------------------------------------------------------------------------
def tcp6_config(station="", port=0, remote="", rport=0, active=True, option=None):
    """An EFI_TCP6_CONFIG_DATA, zeroed first; ``option``: EFI_TCP6_OPTION or None."""
    cfg = efidefs.EFI_TCP6_CONFIG_DATA()
    cfg.HopLimit = 64
    ap = cfg.AccessPoint
    ap.StationAddress = ip6(station)
    ap.StationPort = port
    ap.RemoteAddress = ip6(remote)
    ap.RemotePort = rport
    ap.ActiveFlag = active
    if option is not None:
        cfg.ControlOption = ctypes.pointer(option)
        cfg._option = option
    return cfg


def tcp6_io_token(size=None, data=None, rx=True):
    tok = Token(efidefs.EFI_TCP6_IO_TOKEN)
    if rx:
        packet = efidefs.tcp6_receive_data(1)()
        buf = ctypes.create_string_buffer(size)
        packet.DataLength = size
    else:
        packet = efidefs.tcp6_transmit_data(1)()
        buf = ctypes.create_string_buffer(data, len(data))
        packet.DataLength = len(data)
        packet.Push = True
    packet.FragmentCount = 1
    packet.FragmentTable[0].FragmentLength = packet.DataLength
    packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
    if rx:
        tok.token.Packet.RxData = ctypes.cast(ctypes.pointer(packet), ctypes.POINTER(efidefs.EFI_TCP6_RECEIVE_DATA))
    else:
        tok.token.Packet.TxData = ctypes.cast(ctypes.pointer(packet), ctypes.POINTER(efidefs.EFI_TCP6_TRANSMIT_DATA))
    tok.packet = packet
    tok.buffers = [buf]
    tok.keep.extend([packet, buf])
    return tok


class Tcp6(efiraw.Tcp4):
    """One TCP6 child (CreateChild, or adopted from an Accept)."""

    SERVICE_BINDING = efidefs.EFI_TCP6_SERVICE_BINDING_PROTOCOL
    PROTOCOL = efidefs.EFI_TCP6_PROTOCOL

    def mode(self, option=None, ip_mode=None):
        cfg = efidefs.EFI_TCP6_CONFIG_DATA()
        if option is not None:
            cfg.ControlOption = ctypes.pointer(option)
        status = self._call("GetModeData", None, byref(cfg), byref(ip_mode) if ip_mode is not None else None,
                            None, None)
        return status, cfg

    def routes(self, *args):
        raise AttributeError("EFI_TCP6_PROTOCOL has no Routes()")

    def connect(self, tok=None):
        tok = tok or Token(efidefs.EFI_TCP6_CONNECTION_TOKEN)
        return self._start("Connect", tok), tok

    def accept(self, tok=None):
        tok = tok or Token(efidefs.EFI_TCP6_LISTEN_TOKEN)
        return self._start("Accept", tok), tok

    def transmit(self, data, fragments=1, notify=None, event=None):
        tok = tcp6_io_token(data=data, rx=False)
        return self._start("Transmit", tok), tok

    def receive(self, size, fragments=1, notify=None, event=None):
        tok = tcp6_io_token(size=size)
        return self._start("Receive", tok), tok

    def close(self, abort=False, tok=None):
        tok = tok or Token(efidefs.EFI_TCP6_CLOSE_TOKEN)
        tok.token.AbortOnClose = abort
        return self._start("Close", tok), tok


def connected6(port, **options):
    """A configured active child whose Connect to ([::1], port) completed; asserts success."""
    return efiraw.connect_child(Tcp6(), tcp6_config(remote="::1", rport=port, **options))


def listening6(port=0, **options):
    """A configured passive child (LISTEN) on ``port``; returns (child, port)."""
    return efiraw.listen_child(Tcp6(), tcp6_config(port=port, active=False, **options))


# --- UDP6 ------------------------------------------------------------------------------------
class UdpToken(Token):
    """An EFI_UDP6_COMPLETION_TOKEN: Event and Status are its own first fields."""

    def _completion(self):
        return self.token


def udp6_config(station="", port=0, remote="", rport=0, **flags):
    cfg = efidefs.EFI_UDP6_CONFIG_DATA()
    cfg.HopLimit = 64
    cfg.StationAddress = ip6(station)
    cfg.StationPort = port
    cfg.RemoteAddress = ip6(remote)
    cfg.RemotePort = rport
    for name, value in flags.items():
        setattr(cfg, name, value)
    return cfg


class Udp6(efiraw.Child):
    """One UDP6 child and its protocol."""

    SERVICE_BINDING = efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL
    PROTOCOL = efidefs.EFI_UDP6_PROTOCOL

    def mode(self):
        cfg = efidefs.EFI_UDP6_CONFIG_DATA()
        return self._call("GetModeData", byref(cfg), None, None, None), cfg

    def poll(self):
        return self._call("Poll")

    def transmit(self, data, host=None, port=0):
        """Transmit ``data`` (to ``host``/``port`` through session data when given)."""
        tok = UdpToken(efidefs.EFI_UDP6_COMPLETION_TOKEN)
        tx = efidefs.udp6_transmit_data(1)()
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        tx.DataLength = len(data)
        tx.FragmentCount = 1
        tx.FragmentTable[0].FragmentLength = len(data)
        tx.FragmentTable[0].FragmentBuffer = ctypes.addressof(buf)
        tok.keep.extend([tx, buf])
        if host is not None:
            session = efidefs.EFI_UDP6_SESSION_DATA()
            session.DestinationAddress = ip6(host)
            session.DestinationPort = port
            tx.UdpSessionData = ctypes.pointer(session)
            tok.keep.append(session)
        tok.token.Packet.TxData = ctypes.cast(ctypes.pointer(tx), ctypes.POINTER(efidefs.EFI_UDP6_TRANSMIT_DATA))
        self.tokens.append(tok)
        return self._call("Transmit", tok.ref()), tok

    def receive(self):
        tok = UdpToken(efidefs.EFI_UDP6_COMPLETION_TOKEN)
        self.tokens.append(tok)
        return self._call("Receive", tok.ref()), tok

    def cancel(self, tok=None):
        return self._call("Cancel", tok.ref() if tok is not None else None)

    def destroy(self):
        status = self.sb.DestroyChild(byref(self.sb), self.handle)
        for tok in self.tokens:
            tok.close()
        self.tokens = []
        return status


def take_datagram(tok):
    """(payload, source, source port, destination, destination port) of a completed receive
    token; the datagram is recycled (RecycleSignal) before returning."""
    rx_address = ctypes.cast(tok.token.Packet.RxData, ctypes.c_void_p).value
    head = efidefs.EFI_UDP6_RECEIVE_DATA.from_address(rx_address)
    rx = efidefs.udp6_receive_data(head.FragmentCount).from_address(rx_address)
    data = b"".join(ctypes.string_at(f.FragmentBuffer, f.FragmentLength) for f in rx.FragmentTable)
    session = rx.UdpSession
    out = (data, ip6_text(session.SourceAddress), session.SourcePort, ip6_text(session.DestinationAddress),
           session.DestinationPort)
    efi.check_status(boot_services().SignalEvent(rx.RecycleSignal))
    return out


# --- IP6 Config --------------------------------------------------------------------------------
class Ip6Config(object):
    """The NIC's EFI_IP6_CONFIG_PROTOCOL."""

    def __init__(self):
        self.proto = service(efidefs.EFI_IP6_CONFIG_PROTOCOL_GUID, efidefs.EFI_IP6_CONFIG_PROTOCOL)

    def set(self, data_type, data=None, size=None):
        if data is None:
            return self.proto.SetData(byref(self.proto), data_type, 0, None)
        return self.proto.SetData(byref(self.proto), data_type, ctypes.sizeof(data) if size is None else size,
                                  byref(data))

    def get_raw(self, data_type, size=4096):
        """(status, bytes, buffer) of GetData with a ``size``-byte buffer."""
        buf = ctypes.create_string_buffer(max(size, 1))
        n = efi.UINTN(size)
        status = self.proto.GetData(byref(self.proto), data_type, byref(n), buf if size else None)
        return status, buf.raw[:n.value] if status == efi.EFI_SUCCESS else n.value, buf

    def policy(self):
        status, raw, _ = self.get_raw(efidefs.Ip6ConfigDataTypePolicy)
        assert status == efi.EFI_SUCCESS
        return ctypes.c_uint32.from_buffer_copy(raw).value

    def set_policy(self, policy):
        return self.set(efidefs.Ip6ConfigDataTypePolicy, ctypes.c_uint32(policy))

    def addresses(self):
        """[(text, prefix length)] from InterfaceInfo."""
        status, _, buf = self.get_raw(efidefs.Ip6ConfigDataTypeInterfaceInfo)
        assert status == efi.EFI_SUCCESS, status
        info = efidefs.EFI_IP6_CONFIG_INTERFACE_INFO.from_buffer(buf)
        return [(ip6_text(info.AddressInfo[i].Address), info.AddressInfo[i].PrefixLength)
                for i in range(info.AddressInfoCount)]

    def wait_for(self, address, timeout=WAIT):
        deadline = _clock() + timeout
        while _clock() < deadline:
            if any(a == address for a, _ in self.addresses()):
                return True
            time.sleep(0.01)
        return False

    def register(self, data_type, event):
        return self.proto.RegisterDataNotify(byref(self.proto), data_type, event)

    def unregister(self, data_type, event):
        return self.proto.UnregisterDataNotify(byref(self.proto), data_type, event)


def manual_address(text, prefix=128, anycast=False):
    entry = efidefs.EFI_IP6_CONFIG_MANUAL_ADDRESS()
    entry.Address = ip6(text)
    entry.PrefixLength = prefix
    entry.IsAnycast = anycast
    return entry
