"""Raw EFI TCP4 helpers for the EFI-level tests: what a BITS script writes by hand.

Only the stand-in ``efi`` module (the names of docs/bits-efi.md section 9) and ``bitsnet.efidefs`` are
used, so every call crosses the simulated firmware's C boundary exactly as a script in BITS
would. ``Tcp4`` wraps one child; ``Token`` one completion token with a Type-0 event (or an
EVT_NOTIFY_SIGNAL event with a notify function) and the buffers the firmware may touch, kept
alive together; ``Token.wait`` polls the event with CheckEvent and calls the child's Poll.
"""

from __future__ import print_function

import ctypes
import time
from ctypes import byref

import efi

import conftest
from bitsnet import efidefs

_clock = getattr(time, "monotonic", time.time)
WAIT = 5.0  # seconds any single completion may take in these tests before it counts as lost
STATION = conftest.STATION  # the machine's address (127.0.0.2 unless tests run in parallel)


def boot_services():
    return efi.system_table.BootServices.contents


def service(binding):
    """The service binding ``binding`` (an efidefs protocol class) on the first handle that
    carries one."""
    handles = efi.locate_handles(binding.guid)
    return binding.from_handle(handles[0])


def tcp4_service():
    """The TCP4 service binding on the first handle that carries one."""
    return service(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL)


def create_event(notify=None, tpl=efi.TPL_CALLBACK, context=None):
    """Type 0 (CheckEvent-able) without ``notify``; EVT_NOTIFY_SIGNAL with an EFI_EVENT_NOTIFY."""
    event = efi.EFI_EVENT()
    if notify is None:
        efi.check_status(boot_services().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(event)))
    else:
        efi.check_status(boot_services().CreateEvent(efi.EVT_NOTIFY_SIGNAL, tpl, notify, context, byref(event)))
    return event.value


def close_event(event):
    efi.check_status(boot_services().CloseEvent(event))


def config_data(station=STATION, mask="255.0.0.0", port=0, remote="0.0.0.0", rport=0, active=True,
                use_default=False, option=None):
    """An EFI_TCP4_CONFIG_DATA (zeroed first, docs/edk2.md section 3.3); ``option``: EFI_TCP4_OPTION or None.
    The option structure is attached as ``_option`` so it lives as long as the config."""
    cfg = efidefs.EFI_TCP4_CONFIG_DATA()
    cfg.TimeToLive = 64
    ap = cfg.AccessPoint
    ap.UseDefaultAddress = use_default
    ap.StationAddress = efidefs.ipv4(station)
    ap.SubnetMask = efidefs.ipv4(mask)
    ap.StationPort = port
    ap.RemoteAddress = efidefs.ipv4(remote)
    ap.RemotePort = rport
    ap.ActiveFlag = active
    if option is not None:
        cfg.ControlOption = ctypes.pointer(option)
        cfg._option = option
    return cfg


def default_option(**fields):
    """EFI_TCP4_OPTION with EDK2's defaults written out, then ``fields`` (docs/edk2.md section 3.9)."""
    option = efidefs.EFI_TCP4_OPTION()
    option.ReceiveBufferSize = option.SendBufferSize = 2 * 1024 * 1024
    option.MaxSynBackLog = 10
    option.ConnectionTimeout = 75
    option.DataRetries = 12
    option.FinTimeout = option.TimeWaitTimeout = 2
    option.KeepAliveProbes = 8
    option.KeepAliveTime = 7200
    option.KeepAliveInterval = 60
    option.EnableNagle = option.EnableTimeStamp = option.EnableWindowScaling = True
    for name, value in fields.items():
        setattr(option, name, value)
    return option


class Token(object):
    """One completion token plus its event and every buffer EFI may touch."""

    def __init__(self, kind, notify=None, event=None):
        self.token = kind()
        self.completion = self._completion()
        self.owns_event = event is None
        self.event = create_event(notify) if event is None else event
        self.completion.Event = self.event
        self.completion.Status = efi.EFI_NOT_READY
        self.notify = notify
        self.keep = []
        self.signalled = False

    def _completion(self):
        if isinstance(self.token, efidefs.EFI_TCP4_COMPLETION_TOKEN):
            return self.token
        return self.token.CompletionToken

    @property
    def status(self):
        return self.completion.Status

    def ref(self):
        return byref(self.token)

    def check(self):
        """CheckEvent once (Type-0 events only); remembers a signal, since CheckEvent clears it."""
        if not self.signalled and boot_services().CheckEvent(self.event) == efi.EFI_SUCCESS:
            self.signalled = True
        return self.signalled

    def wait(self, child=None, timeout=WAIT, poll=True):
        """Wait until signalled, calling ``child``'s Poll between checks; the Status, or None."""
        deadline = _clock() + timeout
        while not self.check():
            if _clock() > deadline:
                return None
            if child is not None and poll:
                child.poll()
            else:
                time.sleep(0.002)
        return self.status

    def close(self):
        if self.owns_event and self.event:
            close_event(self.event)
        self.event = None


def io_token(size=None, data=None, fragments=1, notify=None, event=None, rx=True):
    """An EFI_TCP4_IO_TOKEN with RxData (``size`` bytes in ``fragments`` pieces) or TxData
    (``data``, split into ``fragments``). ``token.buffers`` holds the fragment buffers."""
    tok = Token(efidefs.EFI_TCP4_IO_TOKEN, notify, event)
    if rx:
        sizes = _split(size, fragments)
        packet = efidefs.tcp4_receive_data(fragments)()
        buffers = [ctypes.create_string_buffer(max(n, 1)) for n in sizes]
    else:
        sizes = _split(len(data), fragments)
        packet = efidefs.tcp4_transmit_data(fragments)()
        buffers, offset = [], 0
        for n in sizes:
            buffers.append(ctypes.create_string_buffer(data[offset:offset + n], max(n, 1)))
            offset += n
        packet.Push = True
    packet.DataLength = sum(sizes)
    packet.FragmentCount = fragments
    for i, (n, buf) in enumerate(zip(sizes, buffers)):
        packet.FragmentTable[i].FragmentLength = n
        packet.FragmentTable[i].FragmentBuffer = ctypes.addressof(buf)
    if rx:
        tok.token.Packet.RxData = ctypes.cast(ctypes.pointer(packet), ctypes.POINTER(efidefs.EFI_TCP4_RECEIVE_DATA))
    else:
        tok.token.Packet.TxData = ctypes.cast(ctypes.pointer(packet),
                                              ctypes.POINTER(efidefs.EFI_TCP4_TRANSMIT_DATA))
    tok.packet = packet
    tok.buffers = buffers
    tok.keep.extend([packet, buffers])
    return tok


def received(tok):
    """The bytes a completed receive token delivered (DataLength / FragmentLength as rewritten)."""
    out = b""
    left = tok.packet.DataLength
    for i, buf in enumerate(tok.buffers):
        if left <= 0:
            break
        n = min(tok.packet.FragmentTable[i].FragmentLength, left)
        out += ctypes.string_at(ctypes.addressof(buf), n)
        left -= n
    return out


def _split(total, count):
    base = total // count
    sizes = [base] * count
    sizes[-1] += total - base * count
    return sizes


class Child(object):
    """One child of a network protocol, made with CreateChild on ``sb`` (by default the first
    ``SERVICE_BINDING`` there is) or adopted by ``handle`` (from an Accept); ``proto`` is its
    ``PROTOCOL`` interface. Subclasses name the two efidefs classes."""

    SERVICE_BINDING = None  # type: type
    PROTOCOL = None  # type: type

    def __init__(self, sb=None, handle=None):
        self.sb = sb if sb is not None else service(self.SERVICE_BINDING)
        if handle is None:
            child = efi.EFI_HANDLE()
            efi.check_status(self.sb.CreateChild(byref(self.sb), byref(child)))
            handle = child.value
        self.handle = handle
        self.proto = self.PROTOCOL.from_handle(handle)
        self.tokens = []

    def _call(self, name, *args):
        return getattr(self.proto, name)(byref(self.proto), *args)

    def configure(self, cfg):
        return self._call("Configure", byref(cfg) if cfg is not None else None)


class Tcp4(Child):
    """One TCP4 child made with CreateChild (or adopted from an Accept), and its protocol."""

    SERVICE_BINDING = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL
    PROTOCOL = efidefs.EFI_TCP4_PROTOCOL

    def state(self):
        state = ctypes.c_int(-1)
        efi.check_status(self._call("GetModeData", byref(state), None, None, None, None))
        return state.value

    def mode(self, option=None):
        """(status, EFI_TCP4_CONFIG_DATA) from GetModeData; ``option`` receives ControlOption."""
        cfg = efidefs.EFI_TCP4_CONFIG_DATA()
        if option is not None:
            cfg.ControlOption = ctypes.pointer(option)
        status = self._call("GetModeData", None, byref(cfg), None, None, None)
        return status, cfg

    def routes(self, delete, subnet, mask, gateway):
        return self._call("Routes", delete, byref(efidefs.ipv4(subnet)), byref(efidefs.ipv4(mask)),
                          byref(efidefs.ipv4(gateway)))

    def poll(self):
        return self._call("Poll")

    def _start(self, name, tok):
        self.tokens.append(tok)
        return self._call(name, tok.ref())

    def connect(self, tok=None):
        tok = tok or Token(efidefs.EFI_TCP4_CONNECTION_TOKEN)
        return self._start("Connect", tok), tok

    def accept(self, tok=None):
        tok = tok or Token(efidefs.EFI_TCP4_LISTEN_TOKEN)
        return self._start("Accept", tok), tok

    def transmit(self, data, fragments=1, notify=None, event=None):
        tok = io_token(data=data, fragments=fragments, notify=notify, event=event, rx=False)
        return self._start("Transmit", tok), tok

    def receive(self, size, fragments=1, notify=None, event=None):
        tok = io_token(size=size, fragments=fragments, notify=notify, event=event)
        return self._start("Receive", tok), tok

    def close(self, abort=False, tok=None):
        tok = tok or Token(efidefs.EFI_TCP4_CLOSE_TOKEN)
        tok.token.AbortOnClose = abort
        return self._start("Close", tok), tok

    def cancel(self, tok=None):
        return self._call("Cancel", byref(tok.completion) if tok is not None else None)

    def destroy(self):
        """DestroyChild, then close every event this wrapper made (they are all settled now)."""
        status = self.sb.DestroyChild(byref(self.sb), self.handle)
        for tok in self.tokens:
            tok.close()
        self.tokens = []
        return status

    def recv_all(self, timeout=WAIT, chunk=65536):
        """Receive until EFI_CONNECTION_FIN (either way it is reported); the bytes."""
        out = b""
        deadline = _clock() + timeout
        while _clock() < deadline:
            status, tok = self.receive(chunk)
            if status == efi.EFI_CONNECTION_FIN:
                return out
            assert status == efi.EFI_SUCCESS, efi.efi_status_decode.get(status, status)
            result = tok.wait(self, max(deadline - _clock(), 0.01))
            if result is not None:  # settled: its event can go now
                self.tokens.remove(tok)
                tok.close()
            if result == efi.EFI_CONNECTION_FIN:
                return out
            assert result == efi.EFI_SUCCESS, status_name(result)
            out += received(tok)
        raise AssertionError("no FIN within %.1f s (%d bytes so far)" % (timeout, len(out)))

    def send_all(self, data, timeout=WAIT):
        status, tok = self.transmit(data)
        assert status == efi.EFI_SUCCESS, efi.efi_status_decode.get(status, status)
        assert tok.wait(self, timeout) == efi.EFI_SUCCESS
        return tok


def connect_child(child, cfg):
    """``child`` (TCP4 or TCP6) configured with the active ``cfg``, its Connect completed;
    asserts success."""
    assert child.configure(cfg) == efi.EFI_SUCCESS
    status, tok = child.connect()
    assert status == efi.EFI_SUCCESS
    assert tok.wait(child) == efi.EFI_SUCCESS
    return child


def listen_child(child, cfg):
    """``child`` (TCP4 or TCP6) configured with the passive ``cfg``; (child, its station port)."""
    assert child.configure(cfg) == efi.EFI_SUCCESS
    status, cfg = child.mode()
    assert status == efi.EFI_SUCCESS
    return child, cfg.AccessPoint.StationPort


def connected_child(port, host="127.0.0.1", **options):
    """A configured active child whose Connect to (host, port) completed; asserts success."""
    return connect_child(Tcp4(), config_data(remote=host, rport=port, **options))


def listening_child(port=0, **options):
    """A configured passive child (LISTEN) on STATION:``port``; returns (child, port)."""
    return listen_child(Tcp4(), config_data(port=port, active=False, **options))


def status_name(status):
    return efi.efi_status_decode.get(status, hex(status) if status is not None else "None")
