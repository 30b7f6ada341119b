"""Run fwtest scenarios on the simulator and write the same trace tests/firmware/probe.c writes on OVMF.

The scenario language (tests/firmware/scenarios/*.scn) has one EFI operation per line; words are
separated by blanks and ``#`` starts a comment.  ``$SYMBOL`` words are replaced by the runner
(tools/fwtest.py) before either interpreter sees them.  Operations and the trace lines they make
("@@ " prefix; ``L<n>`` is the line number inside the scenario file):

  child C                      CreateChild on the TCP4 service binding      L<n> child -> STATUS
  adopt C TOK                  the child an Accept token delivered           L<n> adopt -> STATUS
  configure C null             Configure(NULL)                               L<n> configure -> STATUS
  configure C active|passive [station=A/M] [port=P] [remote=A:P] [option=default|nonagle|notimewait|sack|zero|wild]
                               Configure; UseDefaultAddress unless station= is given
  connect|accept C TOK         Connect / Accept with a new token TOK
  receive C TOK N              Receive into one N-byte fragment
  transmit C TOK TEXT|len=N    Transmit TEXT, or N bytes of a-z
  close C TOK [abort]          Close (graceful unless "abort")
  cancel C TOK|*               Cancel(token) / Cancel(NULL)              L<n> cancel -> STATUS
  poll C / state C / mode C    Poll / GetModeData(State) / GetModeData(ConfigData)
  options C                    GetModeData(ConfigData) with a ControlOption: the options in force
  destroy C                    DestroyChild
  wait TOK [MS]                Poll every child until TOK completes (default 10000 ms)
                               -> nothing more, or "L<n> wait TOK -> pending" at the deadline
  settle MS                    Poll every child for MS milliseconds
  ip4 info [SIZE] | policy | setpolicy static|dhcp | get manual|gateway|dns | waitaddress [MS]
  ip4 notify TYPE EV | notified EV | unnotify EV    RegisterDataNotify (TYPE info|policy|manual|gateway|
                               dns) with a Type-0 event / CheckEvent on it / UnregisterDataNotify
  host VERB ARGS...            ask the runner to act on a host peer ("@@ host VERB ARGS")
  udp U                        CreateChild on the UDP4 service binding      L<n> udp-child -> STATUS
  uconfigure U null | [station=A/M] [port=P] [remote=A:P] [broadcast] [ttl=N] [tos=N]
                               (TimeToLive 64 unless ttl=)                L<n> udp-configure -> STATUS
  umode U [ttl]                GetModeData(ConfigData); "ttl": TimeToLive and TypeOfService too
  usend U TOK TEXT|len=N [to=A:P]   Transmit (to=: UdpSessionData)        L<n> udp-transmit -> STATUS
  urecv U TOK                  Receive; the completion shows len, data and from=A:P, then RxData is
                               recycled (SignalEvent(RecycleSignal))
  cancel / poll / destroy / wait work on UDP4 children too (udp-cancel, udp-poll)

Token completions are written when observed, in the order observed (several found by one check after a
call: in token creation order):
  event KIND TOK STATUS CLASS [len=N data=HEX] [child=yes]       KIND: connect|accept|receive|transmit|close
CLASS is the coarse timing class: ``sync`` (signalled before the call that took the token returned; on
the simulator the call and that check run holding FIRMWARE.lock, so the simulator's own threads -- its
timer and host-socket I/O -- cannot complete a token in between, as nothing can on real firmware),
``prompt`` (within 1 s of the call) or ``timer`` (later).  Every live token is checked with
CheckEvent after each call and on every polling round, exactly like the probe.
"""

from __future__ import print_function

import ctypes
import time
from ctypes import byref

import efi

from bitsnet import efidefs
from efisim.firmware import FIRMWARE

_clock = getattr(time, "monotonic", time.time)

STATE_NAMES = ["Closed", "Listen", "SynSent", "SynReceived", "Established", "FinWait1", "FinWait2", "Closing",
               "TimeWait", "CloseWait", "LastAck"]
RX_MAX = 65536


def status_name(status):
    """The probe's spelling: the EFI_ name without its prefix, else 0x%016x."""
    name = efi.efi_status_decode.get(status)
    if name and name.startswith("EFI_"):
        return name[4:]
    return "0x%016x" % status


def _bs():
    return efi.system_table.BootServices.contents


class _Token(object):
    def __init__(self, name, kind, child):
        self.name = name
        self.kind = kind
        self.child = child
        self.live = False
        self.start = _clock()
        self.buffer = None
        self.packet = None
        self.token = {"connect": efidefs.EFI_TCP4_CONNECTION_TOKEN, "accept": efidefs.EFI_TCP4_LISTEN_TOKEN,
                      "receive": efidefs.EFI_TCP4_IO_TOKEN, "transmit": efidefs.EFI_TCP4_IO_TOKEN,
                      "close": efidefs.EFI_TCP4_CLOSE_TOKEN, "udp-receive": efidefs.EFI_UDP4_COMPLETION_TOKEN,
                      "udp-transmit": efidefs.EFI_UDP4_COMPLETION_TOKEN}[kind]()
        # A UDP4 completion token is its own completion part (Event, Status, Packet)
        self.completion = self.token if kind.startswith("udp") else self.token.CompletionToken
        self.session = None
        event = efi.EFI_EVENT()
        efi.check_status(_bs().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(event)))
        self.event = event.value
        self.completion.Event = self.event
        self.completion.Status = efi.EFI_NOT_READY

    def close_event(self):
        if self.event:
            _bs().CloseEvent(self.event)
            self.event = None


class Interpreter(object):
    """Runs scenario text on the booted simulated machine; ``out(line)`` receives each trace line."""

    def __init__(self, out, host=None):
        self.out = out
        self.host = host  # host(words): act on a host peer for "host ..." lines
        self.children = {}  # name -> (handle, protocol): TCP4 and UDP4 children
        self.udp_children = set()  # the names in ``children`` that are UDP4 children
        self.tokens = []  # every token made in the current scenario, in creation order
        self.notify = {}  # name -> (data type, event) registered with RegisterDataNotify
        self.line = 0
        handles = efi.locate_handles(efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID)
        self.sb = efidefs.EFI_TCP4_SERVICE_BINDING_PROTOCOL.from_handle(handles[0])
        try:
            handles = efi.locate_handles(efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID)
            self.udp_sb = efidefs.EFI_UDP4_SERVICE_BINDING_PROTOCOL.from_handle(handles[0]) if handles else None
        except Exception:  # no UDP4 service binding on this machine
            self.udp_sb = None
        handles = efi.locate_handles(efidefs.EFI_IP4_CONFIG2_PROTOCOL_GUID)
        self.cfg2 = efidefs.EFI_IP4_CONFIG2_PROTOCOL.from_handle(handles[0])

    # -- output
    def op(self, verb, status, extra=""):
        self.out("@@ L%d %s -> %s%s" % (self.line, verb, status_name(status), extra))

    def note(self, text):
        self.out("@@ L%d %s" % (self.line, text))

    # -- tokens
    def _find_token(self, name):
        for tok in reversed(self.tokens):
            if tok.name == name:
                return tok
        return None

    def _report(self, tok, klass):
        text = "@@ event %s %s %s %s" % (tok.kind, tok.name, status_name(tok.completion.Status), klass)
        if tok.kind == "receive" and tok.completion.Status == efi.EFI_SUCCESS:
            n = tok.packet.DataLength
            data = ctypes.string_at(ctypes.addressof(tok.buffer), min(n, 24))
            text += " len=%d data=%s" % (n, "".join("%02x" % c for c in bytearray(data)))
        if tok.kind == "udp-receive" and tok.completion.Status == efi.EFI_SUCCESS and tok.token.Packet.RxData:
            rx = tok.token.Packet.RxData.contents
            n = rx.DataLength
            data = b""
            if rx.FragmentCount:
                fragment = efidefs.udp4_receive_data(rx.FragmentCount).from_address(
                    ctypes.addressof(rx)).FragmentTable[0]
                data = ctypes.string_at(fragment.FragmentBuffer, min(n, 24, fragment.FragmentLength))
            session = rx.UdpSession
            text += " len=%d data=%s from=%s:%d" % (n, "".join("%02x" % c for c in bytearray(data)),
                                                     efidefs.ipv4_text(session.SourceAddress), session.SourcePort)
            _bs().SignalEvent(rx.RecycleSignal)  # the driver owns RxData: give it back (docs/edk2.md section 4.2)
        if tok.kind == "accept" and tok.completion.Status == efi.EFI_SUCCESS:
            text += " child=yes" if tok.token.NewChildHandle else " child=no"
        self.out(text)

    def sweep(self, sync_pass):
        for tok in self.tokens:
            if tok.live and _bs().CheckEvent(tok.event) == efi.EFI_SUCCESS:
                tok.live = False
                if sync_pass:
                    klass = "sync"
                else:
                    klass = "prompt" if _clock() - tok.start < 1.0 else "timer"
                self._report(tok, klass)

    def poll_all(self):
        for _, proto in list(self.children.values()):
            proto.Poll(byref(proto))

    def run_for(self, tok, ms):
        deadline = _clock() + ms / 1000.0
        while True:
            self.poll_all()
            self.sweep(False)
            if tok is not None and not tok.live:
                return True
            if _clock() >= deadline:
                return tok is None
            time.sleep(0.001)

    # -- operations
    def do_child(self, words):
        child = efi.EFI_HANDLE()
        status = self.sb.CreateChild(byref(self.sb), byref(child))
        if status == efi.EFI_SUCCESS:
            self.children[words[1]] = (child.value, efidefs.EFI_TCP4_PROTOCOL.from_handle(child.value))
        self.op("child", status)

    def do_adopt(self, words):
        tok = self._find_token(words[2])
        status = efi.EFI_NOT_FOUND
        if tok is not None and tok.kind == "accept" and tok.token.NewChildHandle:
            handle = tok.token.NewChildHandle
            self.children[words[1]] = (handle, efidefs.EFI_TCP4_PROTOCOL.from_handle(handle))
            status = efi.EFI_SUCCESS
        self.op("adopt", status)

    def _child(self, name):
        """A TCP4 child's protocol (UDP4 children are not accepted by the TCP verbs, as in the probe)."""
        if name not in self.children or name in self.udp_children:
            self.note("error unknown child")
            return None
        return self.children[name][1]

    def _configure_null(self, proto, verb):
        """Configure(NULL) on a TCP4 or UDP4 child, traced as ``verb``, then what it completed."""
        with FIRMWARE.lock:
            self.op(verb, proto.Configure(byref(proto), None))
            self.sweep(True)

    def do_configure(self, words):
        proto = self._child(words[1])
        if proto is None:
            return
        if words[2] == "null":
            return self._configure_null(proto, "configure")
        cfg = efidefs.EFI_TCP4_CONFIG_DATA()
        cfg.TimeToLive = 64
        ap = cfg.AccessPoint
        ap.UseDefaultAddress = True
        ap.ActiveFlag = words[2] == "active"
        option = None
        for word in words[3:]:
            key, _, value = word.partition("=")
            if _endpoint_word(ap, key, value):
                continue
            if key == "option":
                option = _option(value)
                cfg.ControlOption = ctypes.pointer(option)
        self.op("configure", proto.Configure(byref(proto), byref(cfg)))

    def do_state(self, words):
        proto = self._child(words[1])
        if proto is None:
            return
        state = ctypes.c_int(99)
        status = proto.GetModeData(byref(proto), byref(state), None, None, None, None)
        extra = ""
        if status == efi.EFI_SUCCESS:
            extra = " state=" + (STATE_NAMES[state.value] if 0 <= state.value <= 10 else "?")
        self.op("state", status, extra)

    def do_mode(self, words):
        proto = self._child(words[1])
        if proto is None:
            return
        cfg = efidefs.EFI_TCP4_CONFIG_DATA()
        status = proto.GetModeData(byref(proto), None, byref(cfg), None, None, None)
        extra = ""
        if status == efi.EFI_SUCCESS:
            ap = cfg.AccessPoint
            extra = " station=%s mask=%s port=%d remote=%s:%d active=%d" % (
                efidefs.ipv4_text(ap.StationAddress), efidefs.ipv4_text(ap.SubnetMask), ap.StationPort,
                efidefs.ipv4_text(ap.RemoteAddress), ap.RemotePort, 1 if ap.ActiveFlag else 0)
        self.op("mode", status, extra)

    def do_options(self, words):
        proto = self._child(words[1])
        if proto is None:
            return
        cfg = efidefs.EFI_TCP4_CONFIG_DATA()
        option = efidefs.EFI_TCP4_OPTION()
        ctypes.memset(ctypes.addressof(option), 0xEE, ctypes.sizeof(option))
        cfg.ControlOption = ctypes.pointer(option)
        status = proto.GetModeData(byref(proto), None, byref(cfg), None, None, None)
        extra = ""
        if status == efi.EFI_SUCCESS:
            fields = [("rcvbuf", "ReceiveBufferSize"), ("sndbuf", "SendBufferSize"), ("backlog", "MaxSynBackLog"),
                      ("conntimeout", "ConnectionTimeout"), ("retries", "DataRetries"), ("fin", "FinTimeout"),
                      ("timewait", "TimeWaitTimeout"), ("kaprobes", "KeepAliveProbes"), ("katime", "KeepAliveTime"),
                      ("kainterval", "KeepAliveInterval"), ("nagle", "EnableNagle"), ("ts", "EnableTimeStamp"),
                      ("ws", "EnableWindowScaling"), ("sack", "EnableSelectiveAck"),
                      ("pmtu", "EnablePathMtuDiscovery")]
            extra = "".join(" %s=%d" % (short, int(getattr(option, field))) for short, field in fields)
        self.op("options", status, extra)

    def do_token_call(self, words):
        verb = words[0]
        proto = self._child(words[1])
        if proto is None or len(words) < 3:
            return
        tok = _Token(words[2], verb, words[1])
        self.tokens.append(tok)
        if verb == "receive":
            size = min(int(words[3]) if len(words) > 3 else 1024, RX_MAX)
            tok.buffer = ctypes.create_string_buffer(max(size, 1))
            tok.packet = efidefs.tcp4_receive_data(1)()
            tok.packet.DataLength = size
            tok.packet.FragmentCount = 1
            tok.packet.FragmentTable[0].FragmentLength = size
            tok.packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(tok.buffer)
            tok.token.Packet.RxData = ctypes.cast(ctypes.pointer(tok.packet),
                                                  ctypes.POINTER(efidefs.EFI_TCP4_RECEIVE_DATA))
        elif verb == "transmit":
            word = words[3] if len(words) > 3 else "x"
            if word.startswith("len="):
                count = int(word[4:])
                data = bytes(bytearray(ord("a") + i % 26 for i in range(count)))
            else:
                data = word.encode("ascii")
            tok.buffer = ctypes.create_string_buffer(data, max(len(data), 1))
            tok.packet = efidefs.tcp4_transmit_data(1)()
            tok.packet.Push = True
            tok.packet.DataLength = len(data)
            tok.packet.FragmentCount = 1
            tok.packet.FragmentTable[0].FragmentLength = len(data)
            tok.packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(tok.buffer)
            tok.token.Packet.TxData = ctypes.cast(ctypes.pointer(tok.packet),
                                                  ctypes.POINTER(efidefs.EFI_TCP4_TRANSMIT_DATA))
        elif verb == "close":
            tok.token.AbortOnClose = len(words) > 3 and words[3] == "abort"
        function = {"connect": proto.Connect, "accept": proto.Accept, "receive": proto.Receive,
                    "transmit": proto.Transmit, "close": proto.Close}[verb]
        tok.start = _clock()
        with FIRMWARE.lock:  # see _sync below
            status = function(byref(proto), byref(tok.token))
            self.op(verb, status)
            if status == efi.EFI_SUCCESS:
                tok.live = True
                self.sweep(True)

    def do_cancel(self, words):
        if words[1] in self.udp_children:
            self._udp_cancel(words)
            return
        proto = self._child(words[1])
        if proto is None:
            return
        tok = None if words[2] == "*" else self._find_token(words[2])
        stray = efidefs.EFI_TCP4_COMPLETION_TOKEN()
        with FIRMWARE.lock:
            if words[2] == "*":
                status = proto.Cancel(byref(proto), None)
            else:
                status = proto.Cancel(byref(proto), byref(tok.completion if tok is not None else stray))
            self.op("cancel", status)
            self.sweep(True)

    def do_poll(self, words):
        if words[1] in self.udp_children:
            proto = self.children[words[1]][1]
            with FIRMWARE.lock:
                self.op("udp-poll", proto.Poll(byref(proto)))
                self.sweep(True)
            return
        proto = self._child(words[1])
        if proto is not None:
            with FIRMWARE.lock:
                self.op("poll", proto.Poll(byref(proto)))
                self.sweep(True)

    def do_destroy(self, words):
        if words[1] not in self.udp_children and self._child(words[1]) is None:
            return
        handle = self.children[words[1]][0]
        sb = self.udp_sb if words[1] in self.udp_children else self.sb
        with FIRMWARE.lock:
            status = sb.DestroyChild(byref(sb), handle)
            self.op("destroy", status)
            self.sweep(True)
        if status == efi.EFI_SUCCESS:
            del self.children[words[1]]
            self.udp_children.discard(words[1])
            for tok in self.tokens:
                if tok.child == words[1]:
                    tok.live = False

    def do_wait(self, words):
        tok = self._find_token(words[1])
        if tok is None:
            self.note("error unknown token")
            return
        if not tok.live:
            return
        ms = int(words[2]) if len(words) > 2 else 10000
        if not self.run_for(tok, ms):
            self.note("wait %s -> pending" % tok.name)

    def do_settle(self, words):
        self.run_for(None, int(words[1]))

    def do_ip4(self, words):
        cfg2 = self.cfg2
        what = words[1]
        buf = ctypes.create_string_buffer(1024)
        if what == "info":
            size = efi.UINTN(int(words[2]) if len(words) > 2 else 1024)
            status = cfg2.GetData(byref(cfg2), efidefs.Ip4Config2DataTypeInterfaceInfo, byref(size),
                                  ctypes.addressof(buf) if size.value else None)
            extra = " size=%d" % size.value
            if status == efi.EFI_SUCCESS:
                info = efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO.from_buffer(buf)
                table = ctypes.cast(info.RouteTable, ctypes.c_void_p).value
                inline = table == ctypes.addressof(buf) + ctypes.sizeof(efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO)
                extra += " address=%s mask=%s routes=%d table=%s" % (
                    efidefs.ipv4_text(info.StationAddress), efidefs.ipv4_text(info.SubnetMask),
                    info.RouteTableSize, "inline" if inline else "other")
            self.op("ip4-info", status, extra)
        elif what == "policy":
            policy = ctypes.c_uint32(99)
            size = efi.UINTN(4)
            status = cfg2.GetData(byref(cfg2), efidefs.Ip4Config2DataTypePolicy, byref(size),
                                  ctypes.addressof(policy))
            self.op("ip4-policy", status, " policy=" + {0: "static", 1: "dhcp"}.get(policy.value, "?"))
        elif what == "setpolicy":
            policy = ctypes.c_uint32(1 if len(words) > 2 and words[2] == "dhcp" else 0)
            status = cfg2.SetData(byref(cfg2), efidefs.Ip4Config2DataTypePolicy, 4, ctypes.addressof(policy))
            self.op("ip4-setpolicy", status)
        elif what == "get":
            kind = words[2] if len(words) > 2 else "dns"
            data_type = {"manual": 2, "gateway": 3}.get(kind, 4)
            size = efi.UINTN(1024)
            status = cfg2.GetData(byref(cfg2), data_type, byref(size), ctypes.addressof(buf))
            extra = ""
            if status == efi.EFI_SUCCESS:
                raw = bytearray(buf.raw[:min(size.value, 32)])
                extra = " values=" + ",".join("%d.%d.%d.%d" % tuple(raw[i:i + 4])
                                              for i in range(0, len(raw) - 3, 4))
            self.op("ip4-get", status, extra)
        elif what == "notify" and len(words) > 3:
            data_type = _DATA_TYPES.get(words[2], 9)
            event = efi.EFI_EVENT()
            efi.check_status(_bs().CreateEvent(0, 0, efi.EFI_EVENT_NOTIFY(), None, byref(event)))
            status = cfg2.RegisterDataNotify(byref(cfg2), data_type, event.value)
            self.op("ip4-notify", status)
            if status == efi.EFI_SUCCESS:
                self.notify[words[3]] = (data_type, event.value)
            else:
                _bs().CloseEvent(event.value)
        elif what == "notified" and len(words) > 2:
            if words[2] not in self.notify:
                self.note("error unknown notify event")
                return
            signalled = _bs().CheckEvent(self.notify[words[2]][1]) == efi.EFI_SUCCESS
            self.out("@@ L%d ip4-notified -> %s" % (self.line, "yes" if signalled else "no"))
        elif what == "unnotify" and len(words) > 2:
            if words[2] not in self.notify:
                self.note("error unknown notify event")
                return
            data_type, event = self.notify.pop(words[2])
            self.op("ip4-unnotify", cfg2.UnregisterDataNotify(byref(cfg2), data_type, event))
            _bs().CloseEvent(event)
        elif what == "waitaddress":
            ms = int(words[2]) if len(words) > 2 else 20000
            deadline = _clock() + ms / 1000.0
            address = None
            while True:
                size = efi.UINTN(1024)
                status = cfg2.GetData(byref(cfg2), efidefs.Ip4Config2DataTypeInterfaceInfo, byref(size),
                                      ctypes.addressof(buf))
                if status == efi.EFI_SUCCESS:
                    info = efidefs.EFI_IP4_CONFIG2_INTERFACE_INFO.from_buffer(buf)
                    if efidefs.ipv4_text(info.StationAddress) != "0.0.0.0":
                        address = efidefs.ipv4_text(info.StationAddress)
                        break
                if _clock() >= deadline:
                    break
                self.poll_all()
                time.sleep(0.01)
            self.out("@@ L%d ip4-waitaddress -> %s" % (self.line, "address=" + address if address else "none"))
        else:
            self.note("error unknown ip4 operation")

    # -- UDP4 (the probe's op_udp_*)
    def do_udp(self, words):
        child = efi.EFI_HANDLE()
        if self.udp_sb is None:
            self.op("udp-child", efi.EFI_UNSUPPORTED)
            return
        status = self.udp_sb.CreateChild(byref(self.udp_sb), byref(child))
        if status == efi.EFI_SUCCESS:
            self.children[words[1]] = (child.value, efidefs.EFI_UDP4_PROTOCOL.from_handle(child.value))
            self.udp_children.add(words[1])
        self.op("udp-child", status)

    def _udp(self, name):
        if name not in self.udp_children:
            self.note("error unknown udp child")
            return None
        return self.children[name][1]

    def do_uconfigure(self, words):
        proto = self._udp(words[1])
        if proto is None:
            return
        if words[2] == "null":
            return self._configure_null(proto, "udp-configure")
        cfg = efidefs.EFI_UDP4_CONFIG_DATA()
        cfg.TimeToLive = 64
        cfg.UseDefaultAddress = True
        for word in words[2:]:
            key, _, value = word.partition("=")
            if _endpoint_word(cfg, key, value):
                continue
            if word == "broadcast":
                cfg.AcceptBroadcast = True
            elif key == "ttl":
                cfg.TimeToLive = int(value)
            elif key == "tos":
                cfg.TypeOfService = int(value)
        self.op("udp-configure", proto.Configure(byref(proto), byref(cfg)))

    def do_umode(self, words):
        proto = self._udp(words[1])
        if proto is None:
            return
        cfg = efidefs.EFI_UDP4_CONFIG_DATA()
        status = proto.GetModeData(byref(proto), byref(cfg), None, None, None)
        extra = ""
        if status == efi.EFI_SUCCESS:
            extra = " station=%s port=%d remote=%s:%d" % (efidefs.ipv4_text(cfg.StationAddress), cfg.StationPort,
                                                          efidefs.ipv4_text(cfg.RemoteAddress), cfg.RemotePort)
            if words[2:3] == ["ttl"]:
                extra += " ttl=%d tos=%d" % (cfg.TimeToLive, cfg.TypeOfService)
        self.op("udp-mode", status, extra)

    def do_uio(self, words):
        proto = self._udp(words[1])
        if proto is None or len(words) < 3:
            return
        send = words[0] == "usend"
        tok = _Token(words[2], "udp-transmit" if send else "udp-receive", words[1])
        self.tokens.append(tok)
        if send:
            word = words[3] if len(words) > 3 else "x"
            if word.startswith("len="):
                count = int(word[4:])
                data = bytes(bytearray(ord("a") + i % 26 for i in range(count)))
            else:
                data = word.encode("ascii")
            tok.buffer = ctypes.create_string_buffer(data, max(len(data), 1))
            tok.packet = efidefs.udp4_transmit_data(1)()
            tok.packet.DataLength = len(data)
            tok.packet.FragmentCount = 1
            tok.packet.FragmentTable[0].FragmentLength = len(data)
            tok.packet.FragmentTable[0].FragmentBuffer = ctypes.addressof(tok.buffer)
            for extra in words[4:]:
                if extra.startswith("to="):
                    address, _, port = extra[3:].partition(":")
                    tok.session = efidefs.EFI_UDP4_SESSION_DATA()
                    tok.session.DestinationAddress = efidefs.ipv4(address)
                    tok.session.DestinationPort = int(port or 0)
                    tok.packet.UdpSessionData = ctypes.pointer(tok.session)
            tok.token.Packet.TxData = ctypes.cast(ctypes.pointer(tok.packet),
                                                  ctypes.POINTER(efidefs.EFI_UDP4_TRANSMIT_DATA))
            function, verb = proto.Transmit, "udp-transmit"
        else:
            function, verb = proto.Receive, "udp-receive"
        tok.start = _clock()
        with FIRMWARE.lock:
            status = function(byref(proto), byref(tok.token))
            self.op(verb, status)
            if status == efi.EFI_SUCCESS:
                tok.live = True
                self.sweep(True)

    def _udp_cancel(self, words):
        proto = self.children[words[1]][1]
        tok = None if words[2] == "*" else self._find_token(words[2])
        stray = efidefs.EFI_UDP4_COMPLETION_TOKEN()
        with FIRMWARE.lock:
            if words[2] == "*":
                status = proto.Cancel(byref(proto), None)
            else:
                status = proto.Cancel(byref(proto), byref(tok.token if tok is not None else stray))
            self.op("udp-cancel", status)
            self.sweep(True)

    def do_tls(self, words):
        """TLS verbs, as probe.c's op_tls: efisim.scenario_tls."""
        from efisim import scenario_tls
        if not hasattr(self, "tls"):
            self.tls = scenario_tls.TlsVerbs(self)
        self.tls.run(words)

    def do_host(self, words):
        self.out("@@ host " + " ".join(words[1:]))
        if self.host is not None:
            self.host(words[1:])

    # -- driver
    def finish_scenario(self):
        """Destroy what the scenario left behind and close its events (as the probe does)."""
        for name, (handle, _) in list(self.children.items()):
            sb = self.udp_sb if name in self.udp_children else self.sb
            sb.DestroyChild(byref(sb), handle)
        self.children.clear()
        self.udp_children.clear()
        for tok in self.tokens:
            tok.live = False
            tok.close_event()
        self.tokens = []

    def run_line(self, text):
        words = text.split("#", 1)[0].split()
        if not words:
            return
        verb = words[0]
        if verb == "scenario":
            self.finish_scenario()
            self.out("@@ scenario " + (words[1] if len(words) > 1 else "?"))
            self.line = 0
            return
        handler = {"child": self.do_child, "adopt": self.do_adopt, "configure": self.do_configure,
                   "connect": self.do_token_call, "accept": self.do_token_call, "receive": self.do_token_call,
                   "transmit": self.do_token_call, "close": self.do_token_call, "cancel": self.do_cancel,
                   "poll": self.do_poll, "state": self.do_state, "mode": self.do_mode, "options": self.do_options,
                   "destroy": self.do_destroy, "wait": self.do_wait, "settle": self.do_settle,
                   "ip4": self.do_ip4, "host": self.do_host, "udp": self.do_udp, "uconfigure": self.do_uconfigure,
                   "umode": self.do_umode, "usend": self.do_uio, "urecv": self.do_uio,
                   "tls": self.do_tls}.get(verb)
        if handler is None or (verb != "host" and len(words) < 2):
            self.note("error unknown operation")
            return
        handler(words)

    def run_text(self, text):
        """Run a whole SCN.TXT (scenario headers plus scenario lines); the line numbering restarts at
        each header, counting the lines that follow it, exactly as the probe counts."""
        self.out("@@ probe start")
        for raw in text.splitlines():
            self.line += 1
            self.run_line(raw)
        self.finish_scenario()
        self.out("@@ end")


_DATA_TYPES = {"info": 0, "policy": 1, "manual": 2, "gateway": 3, "dns": 4}


def _endpoint_word(target, key, value):
    """Applies a ``station=ADDR[/MASK]``, ``port=N`` or ``remote=ADDR[:PORT]`` word to a TCP4
    access point or a UDP4 config data (the specification gives both the same field names);
    False for any other word."""
    if key == "station":
        address, _, mask = value.partition("/")
        target.UseDefaultAddress = False
        target.StationAddress = efidefs.ipv4(address)
        target.SubnetMask = efidefs.ipv4(mask or "0.0.0.0")
    elif key == "port":
        target.StationPort = int(value)
    elif key == "remote":
        address, _, port = value.partition(":")
        target.RemoteAddress = efidefs.ipv4(address)
        target.RemotePort = int(port or 0)
    else:
        return False
    return True


def _option(style):
    option = efidefs.EFI_TCP4_OPTION()
    if style == "zero":
        return option
    option.ReceiveBufferSize = option.SendBufferSize = 2 * 1024 * 1024
    option.MaxSynBackLog = 10
    option.ConnectionTimeout = 75
    option.DataRetries = 12
    option.FinTimeout = option.TimeWaitTimeout = 2
    option.KeepAliveProbes = 8
    option.KeepAliveTime = 7200
    option.KeepAliveInterval = 60
    option.EnableNagle = option.EnableTimeStamp = option.EnableWindowScaling = True
    if style == "nonagle":
        option.EnableNagle = False
    elif style == "notimewait":
        option.TimeWaitTimeout = 0
    elif style == "sack":
        option.EnableSelectiveAck = True
    elif style == "wild":  # every number out of range (docs/edk2.md section 3.9: each becomes its default)
        option.ReceiveBufferSize = option.SendBufferSize = 1024
        option.MaxSynBackLog = 100
        option.ConnectionTimeout = 5
        option.DataRetries = 1
        option.FinTimeout = 9
        option.TimeWaitTimeout = 1
        option.KeepAliveProbes = 2
        option.KeepAliveTime = 60
        option.KeepAliveInterval = 5
        option.EnableTimeStamp = False
    return option
