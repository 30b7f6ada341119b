/*
 * probe.c -- run fwtest scenarios against the real UEFI network protocols and print the trace.
 *
 * A test instrument only (bitsnet itself stays ctypes-only).  Built with gnu-efi into
 * \EFI\BOOT\BOOTX64.EFI by tests/firmware/Makefile.  It reads \FWTEST\SCN.TXT from its own boot
 * disk: scenarios as written in tests/firmware/scenarios/NAME.scn, concatenated by tools/fwtest.py
 * with "scenario NAME" header lines and every $SYMBOL already replaced by its QEMU value.  Each
 * operation line is executed against TCP4 / IP4 Config2 and the trace is written, one line at a
 * time prefixed with "@@ ", straight to the serial port (Serial I/O protocol, so the terminal
 * driver adds no escape sequences).  The trace format is documented in tools/fwtest.py; the
 * Python interpreter of the same language is tools/efisim/scenario.py.  When done, the probe
 * prints "@@ end" and shuts the machine down so QEMU exits.
 */

#include "efiutil.h"

#define MAX_CHILDREN 16
#define MAX_TOKENS 64
#define MAX_WORDS 16
#define RX_MAX 65536

typedef struct {
    BOOLEAN AcceptBroadcast, AcceptPromiscuous, AcceptAnyPort, AllowDuplicatePort;
    UINT8 TypeOfService, TimeToLive;
    BOOLEAN DoNotFragment;
    UINT32 ReceiveTimeout, TransmitTimeout;
    BOOLEAN UseDefaultAddress;
    IP4 StationAddress;
    IP4 SubnetMask;
    UINT16 StationPort;
    IP4 RemoteAddress;
    UINT16 RemotePort;
} UDP4_CONFIG_DATA;

typedef struct { IP4 SourceAddress; UINT16 SourcePort; IP4 DestinationAddress; UINT16 DestinationPort; } UDP4_SESSION;
typedef struct {
    UDP4_SESSION *UdpSessionData; IP4 *GatewayAddress; UINT32 DataLength; UINT32 FragmentCount;
    FRAGMENT_DATA FragmentTable[1];
} UDP4_TRANSMIT_DATA;
typedef struct {
    EFI_TIME TimeStamp; EFI_EVENT RecycleSignal; UDP4_SESSION UdpSession; UINT32 DataLength; UINT32 FragmentCount;
    FRAGMENT_DATA FragmentTable[1];
} UDP4_RECEIVE_DATA;
typedef struct { EFI_EVENT Event; EFI_STATUS Status; VOID *Packet; } UDP4_TOKEN;

typedef struct UDP4 UDP4;
struct UDP4 {
    EFI_STATUS (API *GetModeData)(UDP4 *, UDP4_CONFIG_DATA *, VOID *, VOID *, VOID *);
    EFI_STATUS (API *Configure)(UDP4 *, UDP4_CONFIG_DATA *);
    EFI_STATUS (API *Groups)(UDP4 *, BOOLEAN, IP4 *);
    EFI_STATUS (API *Routes)(UDP4 *, BOOLEAN, IP4 *, IP4 *, IP4 *);
    EFI_STATUS (API *Transmit)(UDP4 *, UDP4_TOKEN *);
    EFI_STATUS (API *Receive)(UDP4 *, UDP4_TOKEN *);
    EFI_STATUS (API *Cancel)(UDP4 *, UDP4_TOKEN *);
    EFI_STATUS (API *Poll)(UDP4 *);
};

typedef struct CFG2 CFG2;
struct CFG2 {
    EFI_STATUS (API *SetData)(CFG2 *, UINT32, UINTN, VOID *);
    EFI_STATUS (API *GetData)(CFG2 *, UINT32, UINTN *, VOID *);
    EFI_STATUS (API *RegisterDataNotify)(CFG2 *, UINT32, EFI_EVENT);
    EFI_STATUS (API *UnregisterDataNotify)(CFG2 *, UINT32, EFI_EVENT);
};

typedef struct {
    CHAR16 Name[32];
    UINT8 IfType;
    UINT32 HwAddressSize;
    UINT8 HwAddress[32];
    IP4 StationAddress;
    IP4 SubnetMask;
    UINT32 RouteTableSize;
    VOID *RouteTable;
} INTERFACE_INFO;

static EFI_GUID Cfg2Guid = {0x5b446ed1, 0xe30b, 0x4faa, {0x87, 0x1a, 0x36, 0x54, 0xec, 0xa3, 0x60, 0x80}};
static EFI_GUID Udp4SbGuid = {0x83f01464, 0x99bd, 0x45e5, {0xb3, 0x83, 0xaf, 0x63, 0x05, 0xd8, 0xe9, 0xe6}};
static EFI_GUID Udp4Guid = {0x3ad9df29, 0x4501, 0x478d, {0xb1, 0xf8, 0x7f, 0x7f, 0xe7, 0x0e, 0x50, 0xf3}};

enum { K_CONNECT, K_LISTEN, K_RX, K_TX, K_CLOSE, K_URX, K_UTX };

typedef struct {
    char name[16];
    EFI_HANDLE handle;
    TCP4 *proto;
    UDP4 *uproto;   /* set for UDP4 children (proto is NULL then) */
    int live;
} CHILD;

typedef struct {
    char name[16];
    int kind;
    int child;
    int live;       /* posted and not yet reported complete */
    int used;
    UINT64 start;   /* TSC at the call */
    union { COMPLETION_TOKEN c; LISTEN_TOKEN l; IO_TOKEN io; CLOSE_TOKEN cl; UDP4_TOKEN u; } tok;
    UDP4_TRANSMIT_DATA utx;
    UDP4_SESSION session;
    RECEIVE_DATA rx;
    TRANSMIT_DATA tx;
    UINT8 *buf;
    UINT32 buflen;
} TOKEN;

static SB *TcpSb;
static SB *UdpSb;
static CFG2 *Cfg2;
static CHILD Children[MAX_CHILDREN];
static TOKEN Tokens[MAX_TOKENS];
static UINT64 TscPerMs = 1000000;
static int LineNo;

/* ---------------------------------------------------------------- output */

static void out_hex8(UINT8 v)
{
    static const char digits[] = "0123456789abcdef";
    char s[3] = {digits[v >> 4], digits[v & 15], 0};
    out_str(s);
}

static void out_ip(IP4 *a)
{
    int i;
    for (i = 0; i < 4; i++) {
        if (i)
            out_str(".");
        out_dec(a->Addr[i]);
    }
}

static const char *status_name(EFI_STATUS s)
{
    switch (s) {
    case EFI_SUCCESS: return "SUCCESS";
    case EFI_LOAD_ERROR: return "LOAD_ERROR";
    case EFI_INVALID_PARAMETER: return "INVALID_PARAMETER";
    case EFI_UNSUPPORTED: return "UNSUPPORTED";
    case EFI_BAD_BUFFER_SIZE: return "BAD_BUFFER_SIZE";
    case EFI_BUFFER_TOO_SMALL: return "BUFFER_TOO_SMALL";
    case EFI_NOT_READY: return "NOT_READY";
    case EFI_DEVICE_ERROR: return "DEVICE_ERROR";
    case EFI_WRITE_PROTECTED: return "WRITE_PROTECTED";
    case EFI_OUT_OF_RESOURCES: return "OUT_OF_RESOURCES";
    case EFI_NOT_FOUND: return "NOT_FOUND";
    case EFI_ACCESS_DENIED: return "ACCESS_DENIED";
    case EFI_NO_MAPPING: return "NO_MAPPING";
    case EFI_TIMEOUT: return "TIMEOUT";
    case EFI_NOT_STARTED: return "NOT_STARTED";
    case EFI_ALREADY_STARTED: return "ALREADY_STARTED";
    case EFI_ABORTED: return "ABORTED";
    case EFI_ICMP_ERROR: return "ICMP_ERROR";
    case EFI_PROTOCOL_ERROR: return "PROTOCOL_ERROR";
    case EFIERR(100): return "NETWORK_UNREACHABLE";
    case EFIERR(101): return "HOST_UNREACHABLE";
    case EFIERR(102): return "PROTOCOL_UNREACHABLE";
    case EFIERR(103): return "PORT_UNREACHABLE";
    case EFIERR(104): return "CONNECTION_FIN";
    case EFIERR(105): return "CONNECTION_RESET";
    case EFIERR(106): return "CONNECTION_REFUSED";
    default: {
        static char hex[20];
        static const char digits[] = "0123456789abcdef";
        int i;
        hex[0] = '0';
        hex[1] = 'x';
        for (i = 0; i < 16; i++)
            hex[2 + i] = digits[(s >> (60 - 4 * i)) & 15];
        hex[18] = 0;
        return hex;
    }
    }
}

/* "@@ L<n> <verb> -> STATUS" without the line end: callers may append " key=value" */
static void out_op(const char *verb, EFI_STATUS s)
{
    out_str("@@ L");
    out_dec(LineNo);
    out_str(" ");
    out_str(verb);
    out_str(" -> ");
    out_str(status_name(s));
}

static void out_note(const char *text)
{
    out_str("@@ L");
    out_dec(LineNo);
    out_str(" ");
    out_str(text);
    out_flush();
}

/* ---------------------------------------------------------------- time */

static void calibrate(void)
{
    UINT64 t0 = rdtsc();
    uefi_call_wrapper(BSp->Stall, 1, 100000);
    TscPerMs = (rdtsc() - t0) / 100;
    if (TscPerMs == 0)
        TscPerMs = 1;
}

static UINT64 ms_since(UINT64 t0)
{
    return (rdtsc() - t0) / TscPerMs;
}

/* ---------------------------------------------------------------- small string helpers */

static int streq(const char *a, const char *b)
{
    while (*a && *a == *b) { a++; b++; }
    return *a == *b;
}

static int starts(const char *s, const char *prefix)
{
    while (*prefix) {
        if (*s++ != *prefix++)
            return 0;
    }
    return 1;
}

static UINT64 num(const char *s)
{
    UINT64 v = 0;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (UINT64)(*s++ - '0');
    return v;
}

/* "a.b.c.d" -> IP4; returns the rest of the string after the address */
static const char *parse_ip(const char *s, IP4 *ip)
{
    int i;
    for (i = 0; i < 4; i++) {
        UINT64 v = 0;
        while (*s >= '0' && *s <= '9')
            v = v * 10 + (UINT64)(*s++ - '0');
        ip->Addr[i] = (UINT8)v;
        if (i < 3 && *s == '.')
            s++;
    }
    return s;
}

static void copy_name(char *dst, const char *src)
{
    int i;
    for (i = 0; i < 15 && src[i]; i++)
        dst[i] = src[i];
    dst[i] = 0;
}

/* ---------------------------------------------------------------- tables */

/* any live child, TCP4 or UDP4 */
static int find_any(const char *name)
{
    int i;
    for (i = 0; i < MAX_CHILDREN; i++)
        if (Children[i].live && streq(Children[i].name, name))
            return i;
    return -1;
}

/* a live TCP4 child */
static int find_child(const char *name)
{
    int i = find_any(name);
    return i >= 0 && !Children[i].uproto ? i : -1;
}

static int new_child_slot(void)
{
    int i;
    for (i = 0; i < MAX_CHILDREN; i++)
        if (!Children[i].live)
            return i;
    return -1;
}

static int find_token(const char *name)
{
    int i;
    for (i = 0; i < MAX_TOKENS; i++)
        if (Tokens[i].used && streq(Tokens[i].name, name))
            return i;
    return -1;
}

static int new_token(const char *name, int kind, int child)
{
    int i;
    TOKEN *t;
    for (i = 0; i < MAX_TOKENS; i++)
        if (!Tokens[i].used)
            break;
    if (i == MAX_TOKENS)
        return -1;
    t = &Tokens[i];
    SetMem(t, sizeof(*t), 0);
    copy_name(t->name, name);
    t->kind = kind;
    t->child = child;
    t->used = 1;
    if (uefi_call_wrapper(BSp->CreateEvent, 5, 0, 0, NULL, NULL, &t->tok.c.Event) != EFI_SUCCESS) {
        t->used = 0;
        return -1;
    }
    t->tok.c.Status = EFI_NOT_READY;
    return i;
}

static void release_tokens(void)
{
    int i;
    for (i = 0; i < MAX_TOKENS; i++) {
        if (!Tokens[i].used)
            continue;
        /* A token still live belongs to a child that was never destroyed: keep its memory. */
        if (Tokens[i].live)
            continue;
        uefi_call_wrapper(BSp->CloseEvent, 1, Tokens[i].tok.c.Event);
        if (Tokens[i].buf)
            FreePool(Tokens[i].buf);
        Tokens[i].used = 0;
    }
}

/* ---------------------------------------------------------------- completions */

static const char *time_class(UINT64 ms)
{
    return ms < 1000 ? "prompt" : "timer";
}

static void report_done(TOKEN *t, const char *klass)
{
    static const char *kinds[] = {"connect", "accept", "receive", "transmit", "close", "udp-receive",
                                  "udp-transmit"};
    out_str("@@ event ");
    out_str(kinds[t->kind]);
    out_str(" ");
    out_str(t->name);
    out_str(" ");
    out_str(status_name(t->tok.c.Status));
    out_str(" ");
    out_str(klass);
    if (t->kind == K_RX && t->tok.c.Status == EFI_SUCCESS) {
        UINT32 n = t->rx.DataLength, i;
        out_str(" len=");
        out_dec(n);
        out_str(" data=");
        for (i = 0; i < n && i < 24; i++)
            out_hex8(t->buf[i]);
    }
    if (t->kind == K_URX && t->tok.c.Status == EFI_SUCCESS && t->tok.u.Packet) {
        UDP4_RECEIVE_DATA *rx = t->tok.u.Packet;
        UINT32 i, n = rx->DataLength;
        UINT8 *data = rx->FragmentCount ? rx->FragmentTable[0].FragmentBuffer : NULL;
        out_str(" len=");
        out_dec(n);
        out_str(" data=");
        for (i = 0; data && i < n && i < 24 && i < rx->FragmentTable[0].FragmentLength; i++)
            out_hex8(data[i]);
        out_str(" from=");
        out_ip(&rx->UdpSession.SourceAddress);
        out_str(":");
        out_dec(rx->UdpSession.SourcePort);
        /* the driver owns RxData: give it back (docs/edk2.md section 4.2) */
        uefi_call_wrapper(BSp->SignalEvent, 1, rx->RecycleSignal);
    }
    if (t->kind == K_LISTEN && t->tok.c.Status == EFI_SUCCESS)
        out_str(t->tok.l.NewChildHandle ? " child=yes" : " child=no");
    out_flush();
}

/* Check every live token once (CheckEvent clears the signal, so each is reported once). */
static void sweep(int sync_pass)
{
    int i;
    for (i = 0; i < MAX_TOKENS; i++) {
        TOKEN *t = &Tokens[i];
        if (!t->used || !t->live)
            continue;
        if (uefi_call_wrapper(BSp->CheckEvent, 1, t->tok.c.Event) == EFI_SUCCESS) {
            t->live = 0;
            report_done(t, sync_pass ? "sync" : time_class(ms_since(t->start)));
        }
    }
}

static void poll_all(void)
{
    int i;
    for (i = 0; i < MAX_CHILDREN; i++) {
        if (!Children[i].live)
            continue;
        if (Children[i].uproto)
            uefi_call_wrapper(Children[i].uproto->Poll, 1, Children[i].uproto);
        else
            uefi_call_wrapper(Children[i].proto->Poll, 1, Children[i].proto);
    }
}

/* Poll and sweep until token `idx` completed (idx < 0: just for `ms`), at most `ms`. */
static int run_for(int idx, UINT64 ms)
{
    UINT64 t0 = rdtsc();
    for (;;) {
        poll_all();
        sweep(0);
        if (idx >= 0 && !Tokens[idx].live)
            return 1;
        if (ms_since(t0) >= ms)
            return idx < 0;
        uefi_call_wrapper(BSp->Stall, 1, 1000);
    }
}

/* After an API call that took token `idx`: record the start, mark it live if the call accepted
   it, and report it as synchronous if it was signalled before the call returned. */
static void after_call(int idx, EFI_STATUS s)
{
    TOKEN *t = &Tokens[idx];
    if (s != EFI_SUCCESS) {
        t->live = 0;
        return;
    }
    t->live = 1;
    sweep(1);
}

/* ---------------------------------------------------------------- operations */

static void fill_option(TCP4_OPTION *o, const char *style)
{
    SetMem(o, sizeof(*o), 0);
    o->ReceiveBufferSize = o->SendBufferSize = 2 * 1024 * 1024;
    o->MaxSynBackLog = 10;
    o->ConnectionTimeout = 75;
    o->DataRetries = 12;
    o->FinTimeout = o->TimeWaitTimeout = 2;
    o->KeepAliveProbes = 8;
    o->KeepAliveTime = 7200;
    o->KeepAliveInterval = 60;
    o->EnableNagle = o->EnableTimeStamp = o->EnableWindowScaling = TRUE;
    if (streq(style, "nonagle"))
        o->EnableNagle = FALSE;
    else if (streq(style, "notimewait"))
        o->TimeWaitTimeout = 0;
    else if (streq(style, "sack"))
        o->EnableSelectiveAck = TRUE;
    else if (streq(style, "zero"))
        SetMem(o, sizeof(*o), 0);
    else if (streq(style, "wild")) {
        /* every number out of range (docs/edk2.md section 3.9: each becomes its default, not clamped) */
        o->ReceiveBufferSize = o->SendBufferSize = 1024;
        o->MaxSynBackLog = 100;
        o->ConnectionTimeout = 5;
        o->DataRetries = 1;
        o->FinTimeout = 9;
        o->TimeWaitTimeout = 1;
        o->KeepAliveProbes = 2;
        o->KeepAliveTime = 60;
        o->KeepAliveInterval = 5;
        o->EnableTimeStamp = FALSE;
    }
}

static void op_configure(int argc, char **argv)
{
    static TCP4_CONFIG_DATA cfg;
    static TCP4_OPTION opt;
    int c = find_child(argv[1]), i;
    EFI_STATUS s;
    if (c < 0) { out_note("error unknown child"); return; }
    if (argc > 2 && streq(argv[2], "null")) {
        s = uefi_call_wrapper(Children[c].proto->Configure, 2, Children[c].proto, NULL);
        out_op("configure", s);
        out_flush();
        sweep(1);
        return;
    }
    SetMem(&cfg, sizeof(cfg), 0);
    cfg.TimeToLive = 64;
    cfg.AccessPoint.UseDefaultAddress = TRUE;
    cfg.AccessPoint.ActiveFlag = argc > 2 && streq(argv[2], "active");
    for (i = 3; i < argc; i++) {
        const char *w = argv[i];
        if (starts(w, "station=")) {
            const char *rest = parse_ip(w + 8, &cfg.AccessPoint.StationAddress);
            cfg.AccessPoint.UseDefaultAddress = FALSE;
            if (*rest == '/')
                parse_ip(rest + 1, &cfg.AccessPoint.SubnetMask);
        } else if (starts(w, "port=")) {
            cfg.AccessPoint.StationPort = (UINT16)num(w + 5);
        } else if (starts(w, "remote=")) {
            const char *rest = parse_ip(w + 7, &cfg.AccessPoint.RemoteAddress);
            if (*rest == ':')
                cfg.AccessPoint.RemotePort = (UINT16)num(rest + 1);
        } else if (starts(w, "option=")) {
            fill_option(&opt, w + 7);
            cfg.ControlOption = &opt;
        }
    }
    s = uefi_call_wrapper(Children[c].proto->Configure, 2, Children[c].proto, &cfg);
    out_op("configure", s);
    out_flush();
}

static const char *State_names[] = {"Closed", "Listen", "SynSent", "SynReceived", "Established", "FinWait1",
                                    "FinWait2", "Closing", "TimeWait", "CloseWait", "LastAck"};

static void op_state(char *name)
{
    int c = find_child(name);
    UINT32 state = 99;
    EFI_STATUS s;
    if (c < 0) { out_note("error unknown child"); return; }
    s = uefi_call_wrapper(Children[c].proto->GetModeData, 6, Children[c].proto, &state, NULL, NULL, NULL, NULL);
    out_op("state", s);
    if (s == EFI_SUCCESS) {
        out_str(" state=");
        out_str(state <= 10 ? State_names[state] : "?");
    }
    out_flush();
}

static void op_mode(char *name)
{
    static TCP4_CONFIG_DATA cfg;
    int c = find_child(name);
    EFI_STATUS s;
    if (c < 0) { out_note("error unknown child"); return; }
    SetMem(&cfg, sizeof(cfg), 0);
    s = uefi_call_wrapper(Children[c].proto->GetModeData, 6, Children[c].proto, NULL, &cfg, NULL, NULL, NULL);
    out_op("mode", s);
    if (s == EFI_SUCCESS) {
        out_str(" station=");
        out_ip(&cfg.AccessPoint.StationAddress);
        out_str(" mask=");
        out_ip(&cfg.AccessPoint.SubnetMask);
        out_str(" port=");
        out_dec(cfg.AccessPoint.StationPort);
        out_str(" remote=");
        out_ip(&cfg.AccessPoint.RemoteAddress);
        out_str(":");
        out_dec(cfg.AccessPoint.RemotePort);
        out_str(cfg.AccessPoint.ActiveFlag ? " active=1" : " active=0");
    }
    out_flush();
}

/* options C: GetModeData with a ControlOption to fill (what the driver kept, docs/edk2.md section 3.9) */
static void op_options(char *name)
{
    static TCP4_CONFIG_DATA cfg;
    static TCP4_OPTION opt;
    int c = find_child(name);
    EFI_STATUS s;
    if (c < 0) { out_note("error unknown child"); return; }
    SetMem(&cfg, sizeof(cfg), 0);
    SetMem(&opt, sizeof(opt), 0xEE);
    cfg.ControlOption = &opt;
    s = uefi_call_wrapper(Children[c].proto->GetModeData, 6, Children[c].proto, NULL, &cfg, NULL, NULL, NULL);
    out_op("options", s);
    if (s == EFI_SUCCESS) {
        out_str(" rcvbuf="); out_dec(opt.ReceiveBufferSize);
        out_str(" sndbuf="); out_dec(opt.SendBufferSize);
        out_str(" backlog="); out_dec(opt.MaxSynBackLog);
        out_str(" conntimeout="); out_dec(opt.ConnectionTimeout);
        out_str(" retries="); out_dec(opt.DataRetries);
        out_str(" fin="); out_dec(opt.FinTimeout);
        out_str(" timewait="); out_dec(opt.TimeWaitTimeout);
        out_str(" kaprobes="); out_dec(opt.KeepAliveProbes);
        out_str(" katime="); out_dec(opt.KeepAliveTime);
        out_str(" kainterval="); out_dec(opt.KeepAliveInterval);
        out_str(" nagle="); out_dec(opt.EnableNagle);
        out_str(" ts="); out_dec(opt.EnableTimeStamp);
        out_str(" ws="); out_dec(opt.EnableWindowScaling);
        out_str(" sack="); out_dec(opt.EnableSelectiveAck);
        out_str(" pmtu="); out_dec(opt.EnablePathMtuDiscovery);
    }
    out_flush();
}

static void op_token_call(int argc, char **argv)
{
    const char *verb = argv[0];
    int c = find_child(argv[1]), idx, kind;
    EFI_STATUS s;
    TOKEN *t;
    if (c < 0 || argc < 3) { out_note("error unknown child or missing token"); return; }
    kind = streq(verb, "connect") ? K_CONNECT : streq(verb, "accept") ? K_LISTEN : streq(verb, "receive") ? K_RX
         : streq(verb, "transmit") ? K_TX : K_CLOSE;
    idx = new_token(argv[2], kind, c);
    if (idx < 0) { out_note("error no token slot"); return; }
    t = &Tokens[idx];
    t->start = rdtsc();
    switch (kind) {
    case K_CONNECT:
        s = uefi_call_wrapper(Children[c].proto->Connect, 2, Children[c].proto, &t->tok.c);
        break;
    case K_LISTEN:
        s = uefi_call_wrapper(Children[c].proto->Accept, 2, Children[c].proto, &t->tok.l);
        break;
    case K_RX:
        t->buflen = argc > 3 ? (UINT32)num(argv[3]) : 1024;
        if (t->buflen > RX_MAX)
            t->buflen = RX_MAX;
        t->buf = AllocateZeroPool(t->buflen ? t->buflen : 1);
        t->rx.DataLength = t->buflen;
        t->rx.FragmentCount = 1;
        t->rx.FragmentTable[0].FragmentLength = t->buflen;
        t->rx.FragmentTable[0].FragmentBuffer = t->buf;
        t->tok.io.Packet = &t->rx;
        s = uefi_call_wrapper(Children[c].proto->Receive, 2, Children[c].proto, &t->tok.io);
        break;
    case K_TX: {
        const char *w = argc > 3 ? argv[3] : "x";
        UINT32 i;
        if (starts(w, "len=")) {
            t->buflen = (UINT32)num(w + 4);
            t->buf = AllocatePool(t->buflen ? t->buflen : 1);
            for (i = 0; i < t->buflen; i++)
                t->buf[i] = (UINT8)('a' + i % 26);
        } else {
            t->buflen = (UINT32)strlena((CHAR8 *)w);
            t->buf = AllocatePool(t->buflen + 1);
            CopyMem(t->buf, (VOID *)w, t->buflen);
        }
        t->tx.Push = TRUE;
        t->tx.DataLength = t->buflen;
        t->tx.FragmentCount = 1;
        t->tx.FragmentTable[0].FragmentLength = t->buflen;
        t->tx.FragmentTable[0].FragmentBuffer = t->buf;
        t->tok.io.Packet = &t->tx;
        s = uefi_call_wrapper(Children[c].proto->Transmit, 2, Children[c].proto, &t->tok.io);
        break;
    }
    default:
        t->tok.cl.AbortOnClose = argc > 3 && streq(argv[3], "abort");
        s = uefi_call_wrapper(Children[c].proto->Close, 2, Children[c].proto, &t->tok.cl);
        break;
    }
    out_op(verb, s);
    out_flush();
    after_call(idx, s);
}

static void op_cancel(int argc, char **argv)
{
    int c = find_any(argv[1]), idx;
    EFI_STATUS s;
    if (c < 0 || argc < 3) { out_note("error unknown child or missing token"); return; }
    if (Children[c].uproto) {
        static UDP4_TOKEN stray;
        UDP4 *u = Children[c].uproto;
        idx = streq(argv[2], "*") ? -1 : find_token(argv[2]);
        s = uefi_call_wrapper(u->Cancel, 2, u, streq(argv[2], "*") ? NULL : idx >= 0 ? &Tokens[idx].tok.u : &stray);
        out_op("udp-cancel", s);
        out_flush();
        sweep(1);
        return;
    }
    if (streq(argv[2], "*")) {
        s = uefi_call_wrapper(Children[c].proto->Cancel, 2, Children[c].proto, NULL);
    } else {
        static COMPLETION_TOKEN stray;
        idx = find_token(argv[2]);
        s = uefi_call_wrapper(Children[c].proto->Cancel, 2, Children[c].proto,
                              idx >= 0 ? &Tokens[idx].tok.c : &stray);
    }
    out_op("cancel", s);
    out_flush();
    sweep(1);
}

/* CreateChild on `sb`, then the child's `guid` interface into a free slot named `name` (a UDP4
 * child when `udp`), traced as `verb`; `missing` is the status traced without a free slot or
 * without the service binding. */
static void add_child(char *name, const char *verb, SB *sb, EFI_GUID *guid, EFI_STATUS missing, int udp)
{
    int c = new_child_slot();
    EFI_STATUS s;
    EFI_HANDLE h = NULL;
    VOID *iface = NULL;
    if (c < 0 || !sb) { out_op(verb, missing); out_flush(); return; }
    s = uefi_call_wrapper(sb->CreateChild, 2, sb, &h);
    if (s == EFI_SUCCESS)
        s = uefi_call_wrapper(BSp->HandleProtocol, 3, h, guid, &iface);
    out_op(verb, s);
    out_flush();
    if (s == EFI_SUCCESS) {
        copy_name(Children[c].name, name);
        Children[c].handle = h;
        Children[c].proto = udp ? NULL : (TCP4 *)iface;
        Children[c].uproto = udp ? (UDP4 *)iface : NULL;
        Children[c].live = 1;
    }
}

static void op_child(char *name)
{
    add_child(name, "child", TcpSb, &Tcp4Guid, EFI_OUT_OF_RESOURCES, 0);
}

/* ---------------------------------------------------------------- UDP4 */

static void op_udp_child(char *name)
{
    add_child(name, "udp-child", UdpSb, &Udp4Guid, EFI_UNSUPPORTED, 1);
}

static int find_udp(const char *name)
{
    int c = find_any(name);
    if (c < 0 || !Children[c].uproto) {
        out_note("error unknown udp child");
        return -1;
    }
    return c;
}

static void op_udp_configure(int argc, char **argv)
{
    static UDP4_CONFIG_DATA cfg;
    int c = find_udp(argv[1]), i;
    EFI_STATUS s;
    UDP4 *u;
    if (c < 0)
        return;
    u = Children[c].uproto;
    if (argc > 2 && streq(argv[2], "null")) {
        s = uefi_call_wrapper(u->Configure, 2, u, NULL);
        out_op("udp-configure", s);
        out_flush();
        sweep(1);
        return;
    }
    SetMem(&cfg, sizeof(cfg), 0);
    cfg.TimeToLive = 64;
    cfg.UseDefaultAddress = TRUE;
    for (i = 2; i < argc; i++) {
        const char *w = argv[i];
        if (starts(w, "station=")) {
            const char *rest = parse_ip(w + 8, &cfg.StationAddress);
            cfg.UseDefaultAddress = FALSE;
            if (*rest == '/')
                parse_ip(rest + 1, &cfg.SubnetMask);
        } else if (starts(w, "port=")) {
            cfg.StationPort = (UINT16)num(w + 5);
        } else if (starts(w, "remote=")) {
            const char *rest = parse_ip(w + 7, &cfg.RemoteAddress);
            if (*rest == ':')
                cfg.RemotePort = (UINT16)num(rest + 1);
        } else if (streq(w, "broadcast")) {
            cfg.AcceptBroadcast = TRUE;
        } else if (starts(w, "ttl=")) {
            cfg.TimeToLive = (UINT8)num(w + 4);
        } else if (starts(w, "tos=")) {
            cfg.TypeOfService = (UINT8)num(w + 4);
        }
    }
    s = uefi_call_wrapper(u->Configure, 2, u, &cfg);
    out_op("udp-configure", s);
    out_flush();
}

static void op_udp_mode(char *name, int header)
{
    static UDP4_CONFIG_DATA cfg;
    int c = find_udp(name);
    EFI_STATUS s;
    if (c < 0)
        return;
    SetMem(&cfg, sizeof(cfg), 0);
    s = uefi_call_wrapper(Children[c].uproto->GetModeData, 5, Children[c].uproto, &cfg, NULL, NULL, NULL);
    out_op("udp-mode", s);
    if (s == EFI_SUCCESS) {
        out_str(" station=");
        out_ip(&cfg.StationAddress);
        out_str(" port=");
        out_dec(cfg.StationPort);
        out_str(" remote=");
        out_ip(&cfg.RemoteAddress);
        out_str(":");
        out_dec(cfg.RemotePort);
        if (header) {
            out_str(" ttl=");
            out_dec(cfg.TimeToLive);
            out_str(" tos=");
            out_dec(cfg.TypeOfService);
        }
    }
    out_flush();
}

/* usend U TOK TEXT|len=N [to=A:P] ; urecv U TOK */
static void op_udp_io(int argc, char **argv)
{
    int c = find_udp(argv[1]), idx, i;
    int send = streq(argv[0], "usend");
    EFI_STATUS s;
    TOKEN *t;
    UDP4 *u;
    if (c < 0 || argc < 3)
        return;
    u = Children[c].uproto;
    idx = new_token(argv[2], send ? K_UTX : K_URX, c);
    if (idx < 0) { out_note("error no token slot"); return; }
    t = &Tokens[idx];
    t->start = rdtsc();
    if (send) {
        const char *w = argc > 3 ? argv[3] : "x";
        UINT32 k;
        if (starts(w, "len=")) {
            t->buflen = (UINT32)num(w + 4);
            t->buf = AllocatePool(t->buflen ? t->buflen : 1);
            for (k = 0; k < t->buflen; k++)
                t->buf[k] = (UINT8)('a' + k % 26);
        } else {
            t->buflen = (UINT32)strlena((CHAR8 *)w);
            t->buf = AllocatePool(t->buflen + 1);
            CopyMem(t->buf, (VOID *)w, t->buflen);
        }
        t->utx.DataLength = t->buflen;
        t->utx.FragmentCount = 1;
        t->utx.FragmentTable[0].FragmentLength = t->buflen;
        t->utx.FragmentTable[0].FragmentBuffer = t->buf;
        for (i = 4; i < argc; i++) {
            if (starts(argv[i], "to=")) {
                const char *rest = parse_ip(argv[i] + 3, &t->session.DestinationAddress);
                if (*rest == ':')
                    t->session.DestinationPort = (UINT16)num(rest + 1);
                t->utx.UdpSessionData = &t->session;
            }
        }
        t->tok.u.Packet = &t->utx;
        s = uefi_call_wrapper(u->Transmit, 2, u, &t->tok.u);
        out_op("udp-transmit", s);
    } else {
        t->tok.u.Packet = NULL;
        s = uefi_call_wrapper(u->Receive, 2, u, &t->tok.u);
        out_op("udp-receive", s);
    }
    out_flush();
    after_call(idx, s);
}

/* adopt NEW TOKEN: the child an Accept token delivered */
static void op_adopt(char *name, char *token)
{
    int c = new_child_slot(), idx = find_token(token);
    EFI_STATUS s = EFI_NOT_FOUND;
    if (c >= 0 && idx >= 0 && Tokens[idx].kind == K_LISTEN && Tokens[idx].tok.l.NewChildHandle) {
        Children[c].handle = Tokens[idx].tok.l.NewChildHandle;
        s = uefi_call_wrapper(BSp->HandleProtocol, 3, Children[c].handle, &Tcp4Guid, (VOID **)&Children[c].proto);
    }
    out_op("adopt", s);
    out_flush();
    if (s == EFI_SUCCESS) {
        copy_name(Children[c].name, name);
        Children[c].live = 1;
    }
}

static void op_destroy(char *name)
{
    int c = find_any(name), i;
    EFI_STATUS s;
    if (c < 0) { out_note("error unknown child"); return; }
    if (Children[c].uproto)
        s = uefi_call_wrapper(UdpSb->DestroyChild, 2, UdpSb, Children[c].handle);
    else
        s = uefi_call_wrapper(TcpSb->DestroyChild, 2, TcpSb, Children[c].handle);
    out_op("destroy", s);
    out_flush();
    sweep(1);
    if (s == EFI_SUCCESS) {
        Children[c].live = 0;
        /* Anything the driver did not signal is gone with the child. */
        for (i = 0; i < MAX_TOKENS; i++)
            if (Tokens[i].used && Tokens[i].child == c)
                Tokens[i].live = 0;
    }
}

static void op_wait(int argc, char **argv)
{
    int idx = find_token(argv[1]);
    UINT64 ms = argc > 2 ? num(argv[2]) : 10000;
    if (idx < 0) { out_note("error unknown token"); return; }
    if (!Tokens[idx].live)
        return; /* already reported */
    if (!run_for(idx, ms)) {
        out_str("@@ L");
        out_dec(LineNo);
        out_str(" wait ");
        out_str(Tokens[idx].name);
        out_str(" -> pending");
        out_flush();
    }
}

static const char *Policy_names[] = {"static", "dhcp"};

/* Notify events registered with RegisterDataNotify (Type-0 events, checked with CheckEvent) */
#define MAX_NOTIFY 8
static struct { char name[16]; EFI_EVENT event; UINT32 type; int used; } Notify[MAX_NOTIFY];

static UINT32 data_type(const char *w)
{
    return streq(w, "info") ? 0 : streq(w, "policy") ? 1 : streq(w, "manual") ? 2 : streq(w, "gateway") ? 3
         : streq(w, "dns") ? 4 : 9;
}

static int find_notify(const char *name)
{
    int i;
    for (i = 0; i < MAX_NOTIFY; i++)
        if (Notify[i].used && streq(Notify[i].name, name))
            return i;
    return -1;
}

static void op_ip4(int argc, char **argv)
{
    static UINT8 buf[1024];
    UINTN size;
    EFI_STATUS s;
    if (!Cfg2) { out_note("error no Ip4Config2"); return; }
    if (streq(argv[1], "info")) {
        INTERFACE_INFO *info = (INTERFACE_INFO *)buf;
        size = argc > 2 ? num(argv[2]) : sizeof(buf);
        SetMem(buf, sizeof(buf), 0);
        s = uefi_call_wrapper(Cfg2->GetData, 4, Cfg2, 0, &size, size ? buf : NULL);
        out_op("ip4-info", s);
        out_str(" size=");
        out_dec(size);
        if (s == EFI_SUCCESS) {
            out_str(" address=");
            out_ip(&info->StationAddress);
            out_str(" mask=");
            out_ip(&info->SubnetMask);
            out_str(" routes=");
            out_dec(info->RouteTableSize);
            out_str(info->RouteTable == (VOID *)(buf + sizeof(INTERFACE_INFO)) ? " table=inline" : " table=other");
        }
        out_flush();
    } else if (streq(argv[1], "policy")) {
        UINT32 policy = 99;
        size = sizeof(policy);
        s = uefi_call_wrapper(Cfg2->GetData, 4, Cfg2, 1, &size, &policy);
        out_op("ip4-policy", s);
        out_str(" policy=");
        out_str(policy < 2 ? Policy_names[policy] : "?");
        out_flush();
    } else if (streq(argv[1], "setpolicy")) {
        UINT32 policy = argc > 2 && streq(argv[2], "dhcp") ? 1 : 0;
        s = uefi_call_wrapper(Cfg2->SetData, 4, Cfg2, 1, sizeof(policy), &policy);
        out_op("ip4-setpolicy", s);
        out_flush();
    } else if (streq(argv[1], "get")) {
        UINT32 type = argc > 2 && streq(argv[2], "manual") ? 2 : argc > 2 && streq(argv[2], "gateway") ? 3 : 4;
        size = sizeof(buf);
        s = uefi_call_wrapper(Cfg2->GetData, 4, Cfg2, type, &size, buf);
        out_op("ip4-get", s);
        if (s == EFI_SUCCESS) {
            UINTN i;
            out_str(" values=");
            for (i = 0; i + 4 <= size && i < 32; i += 4) {
                if (i)
                    out_str(",");
                out_ip((IP4 *)(buf + i));
            }
        }
        out_flush();
    } else if (streq(argv[1], "notify") && argc > 3) {
        /* ip4 notify TYPE NAME */
        int i;
        for (i = 0; i < MAX_NOTIFY && Notify[i].used; i++)
            ;
        if (i == MAX_NOTIFY) { out_note("error no notify slot"); return; }
        uefi_call_wrapper(BSp->CreateEvent, 5, 0, 0, NULL, NULL, &Notify[i].event);
        Notify[i].type = data_type(argv[2]);
        s = uefi_call_wrapper(Cfg2->RegisterDataNotify, 3, Cfg2, Notify[i].type, Notify[i].event);
        out_op("ip4-notify", s);
        out_flush();
        if (s == EFI_SUCCESS) {
            copy_name(Notify[i].name, argv[3]);
            Notify[i].used = 1;
        } else {
            uefi_call_wrapper(BSp->CloseEvent, 1, Notify[i].event);
        }
    } else if (streq(argv[1], "notified") && argc > 2) {
        int i = find_notify(argv[2]);
        if (i < 0) { out_note("error unknown notify event"); return; }
        out_str("@@ L");
        out_dec(LineNo);
        out_str(" ip4-notified -> ");
        out_str(uefi_call_wrapper(BSp->CheckEvent, 1, Notify[i].event) == EFI_SUCCESS ? "yes" : "no");
        out_flush();
    } else if (streq(argv[1], "unnotify") && argc > 2) {
        int i = find_notify(argv[2]);
        if (i < 0) { out_note("error unknown notify event"); return; }
        s = uefi_call_wrapper(Cfg2->UnregisterDataNotify, 3, Cfg2, Notify[i].type, Notify[i].event);
        out_op("ip4-unnotify", s);
        out_flush();
        uefi_call_wrapper(BSp->CloseEvent, 1, Notify[i].event);
        Notify[i].used = 0;
    } else if (streq(argv[1], "waitaddress")) {
        UINT64 ms = argc > 2 ? num(argv[2]) : 20000, t0 = rdtsc();
        INTERFACE_INFO *info = (INTERFACE_INFO *)buf;
        for (;;) {
            size = sizeof(buf);
            s = uefi_call_wrapper(Cfg2->GetData, 4, Cfg2, 0, &size, buf);
            if (s == EFI_SUCCESS && *(UINT32 *)&info->StationAddress != 0)
                break;
            if (ms_since(t0) >= ms)
                break;
            poll_all();
            uefi_call_wrapper(BSp->Stall, 1, 10000);
        }
        out_str("@@ L");
        out_dec(LineNo);
        out_str(" ip4-waitaddress -> ");
        if (s == EFI_SUCCESS && *(UINT32 *)&info->StationAddress != 0) {
            out_str("address=");
            out_ip(&info->StationAddress);
        } else {
            out_str("none");
        }
        out_flush();
    } else {
        out_note("error unknown ip4 operation");
    }
}

/* ---------------------------------------------------------------- driver */

static int split(char *line, char **argv)
{
    int argc = 0;
    while (*line && argc < MAX_WORDS) {
        while (*line == ' ' || *line == '\t')
            *line++ = 0;
        if (!*line || *line == '#')
            break;
        argv[argc++] = line;
        while (*line && *line != ' ' && *line != '\t')
            line++;
    }
    if (*line == '#')
        *line = 0;
    return argc;
}

static void finish_scenario(void)
{
    int i;
    /* Leave nothing behind for the next scenario: children the scenario did not destroy. */
    for (i = 0; i < MAX_CHILDREN; i++) {
        if (Children[i].live) {
            SB *sb = Children[i].uproto ? UdpSb : TcpSb;
            uefi_call_wrapper(sb->DestroyChild, 2, sb, Children[i].handle);
            Children[i].live = 0;
        }
    }
    for (i = 0; i < MAX_TOKENS; i++)
        Tokens[i].live = 0;
    release_tokens();
}

/* --- TLS (docs/tls.md): EFI_TLS_PROTOCOL's contract without a network peer -------- */
typedef struct TLSP TLSP;
struct TLSP {
    EFI_STATUS (API *SetSessionData)(TLSP *, UINT32, VOID *, UINTN);
    EFI_STATUS (API *GetSessionData)(TLSP *, UINT32, VOID *, UINTN *);
    EFI_STATUS (API *BuildResponsePacket)(TLSP *, UINT8 *, UINTN, UINT8 *, UINTN *);
    EFI_STATUS (API *ProcessPacket)(TLSP *, FRAGMENT_DATA **, UINT32 *, UINT32);
};
typedef struct TLSC TLSC;
struct TLSC {
    EFI_STATUS (API *SetData)(TLSC *, UINT32, VOID *, UINTN);
    EFI_STATUS (API *GetData)(TLSC *, UINT32, VOID *, UINTN *);
};
#pragma pack(1)
typedef struct { UINT32 Flags; CHAR8 *HostName; } TLS_VERIFY_HOST;
#pragma pack()

static EFI_GUID TlsSbGuid = {0x952cb795, 0xff36, 0x48cf, {0xa2, 0x49, 0x4d, 0xf4, 0x86, 0xd6, 0xab, 0x8d}};
static EFI_GUID TlsGuid = {0x00ca959f, 0x6cfa, 0x4db1, {0x95, 0xbc, 0xe4, 0x6c, 0x47, 0x51, 0x43, 0x90}};
static EFI_GUID TlsCfgGuid = {0x1682fe44, 0xbd7a, 0x4407, {0xb7, 0xc7, 0xdc, 0xa3, 0x7c, 0xa3, 0x92, 0x2d}};
static SB *TlsSb;
static struct { EFI_HANDLE handle; TLSP *tls; TLSC *cfg; } TlsChild;  /* one TLS child at a time */
static UINT8 TlsOut[16384];
static char TlsHost[64];

static void tls_op(const char *what, const char *detail, EFI_STATUS s)
{
    out_str("@@ L");
    out_dec(LineNo);
    out_str(" tls-");
    out_str(what);
    if (detail) {
        out_str(" ");
        out_str(detail);
    }
    out_str(" -> ");
    out_str(status_name(s));
}

/* tls child | set TYPE [VALUE [FLAGS]] | get TYPE [SIZE] | build SIZE | ca garbage|empty | process encrypt|decrypt
   | destroy.  set TYPE: version A.B, verify N, end N, state N, host NAME [FLAGS], random, ext, badsize. */
static void op_tls(int argc, char **argv)
{
    EFI_STATUS s;
    const char *sub = argv[1];
    if (streq(sub, "child")) {
        TlsChild.handle = NULL;
        TlsChild.tls = NULL;
        TlsChild.cfg = NULL;
        s = TlsSb ? uefi_call_wrapper(TlsSb->CreateChild, 2, TlsSb, &TlsChild.handle) : EFI_UNSUPPORTED;
        if (s == EFI_SUCCESS) {
            uefi_call_wrapper(BSp->HandleProtocol, 3, TlsChild.handle, &TlsGuid, (VOID **)&TlsChild.tls);
            uefi_call_wrapper(BSp->HandleProtocol, 3, TlsChild.handle, &TlsCfgGuid, (VOID **)&TlsChild.cfg);
        }
        tls_op("child", NULL, s);
        out_str(TlsChild.cfg ? " config=yes" : " config=no");
    } else if (!TlsChild.tls) {
        out_note("error no tls child");
        return;
    } else if (streq(sub, "destroy")) {
        s = uefi_call_wrapper(TlsSb->DestroyChild, 2, TlsSb, TlsChild.handle);
        TlsChild.tls = NULL;
        TlsChild.cfg = NULL;
        tls_op("destroy", NULL, s);
    } else if (streq(sub, "set") && argc > 2) {
        const char *type = argv[2];
        UINT32 value = argc > 3 ? (UINT32)num(argv[3]) : 0;
        UINT8 bytes[32];
        TLS_VERIFY_HOST host;
        SetMem(bytes, sizeof(bytes), 0);
        if (streq(type, "version") && argc > 3) {
            bytes[0] = (UINT8)num(argv[3]);
            bytes[1] = (UINT8)num(argv[3] + 2);
            s = uefi_call_wrapper(TlsChild.tls->SetSessionData, 4, TlsChild.tls, 0, bytes, 2);
        } else if (streq(type, "verify") || streq(type, "end") || streq(type, "state")) {
            UINT32 kind = streq(type, "verify") ? 5 : streq(type, "end") ? 1 : 7;
            s = uefi_call_wrapper(TlsChild.tls->SetSessionData, 4, TlsChild.tls, kind, &value, sizeof(value));
        } else if (streq(type, "host") && argc > 3) {
            copy_name(TlsHost, argv[3]);
            host.Flags = argc > 4 ? (UINT32)num(argv[4]) : 0;
            host.HostName = (CHAR8 *)TlsHost;
            s = uefi_call_wrapper(TlsChild.tls->SetSessionData, 4, TlsChild.tls, 11, &host, sizeof(host));
        } else if (streq(type, "random")) {
            s = uefi_call_wrapper(TlsChild.tls->SetSessionData, 4, TlsChild.tls, 8, bytes, 32);
        } else if (streq(type, "ext")) {
            s = uefi_call_wrapper(TlsChild.tls->SetSessionData, 4, TlsChild.tls, 4, bytes, 4);
        } else if (streq(type, "badsize")) {
            s = uefi_call_wrapper(TlsChild.tls->SetSessionData, 4, TlsChild.tls, 5, bytes, 2);
        } else {
            out_note("error unknown tls set");
            return;
        }
        tls_op("set", type, s);
    } else if (streq(sub, "get") && argc > 2) {
        const char *type = argv[2];
        UINT32 kind = streq(type, "version") ? 0 : streq(type, "verify") ? 5 : streq(type, "state") ? 7 : 99;
        UINT8 data[8];
        UINTN size = argc > 3 ? num(argv[3]) : sizeof(data);
        SetMem(data, sizeof(data), 0);
        s = uefi_call_wrapper(TlsChild.tls->GetSessionData, 4, TlsChild.tls, kind, size ? data : NULL, &size);
        tls_op("get", type, s);
        if (s == EFI_BUFFER_TOO_SMALL) {
            out_str(" size=");
            out_dec(size);
        } else if (s == EFI_SUCCESS && kind == 0) {
            out_str(" value=");
            out_dec(data[0]);
            out_str(".");
            out_dec(data[1]);
        } else if (s == EFI_SUCCESS) {
            out_str(" value=");
            out_dec(data[0] | (data[1] << 8) | (data[2] << 16) | ((UINT32)data[3] << 24));
        }
    } else if (streq(sub, "build") && argc > 2) {
        UINTN size = num(argv[2]);
        if (size > sizeof(TlsOut))
            size = sizeof(TlsOut);
        s = uefi_call_wrapper(TlsChild.tls->BuildResponsePacket, 5, TlsChild.tls, NULL, 0, size ? TlsOut : NULL,
                              &size);
        tls_op("build", argv[2], s);
        if (s == EFI_BUFFER_TOO_SMALL)
            out_str(size ? " need>0" : " need=0");
        else if (s == EFI_SUCCESS && size) {
            out_str(" bytes>0 record=");
            out_hex8(TlsOut[0]);
            out_str(" message=");
            out_hex8(TlsOut[5]);
        } else if (s == EFI_SUCCESS)
            out_str(" bytes=0");
    } else if (streq(sub, "ca") && argc > 2) {
        static CHAR8 garbage[] = "not a certificate";
        s = uefi_call_wrapper(TlsChild.cfg->SetData, 4, TlsChild.cfg, 2, garbage,
                              streq(argv[2], "empty") ? 0 : sizeof(garbage));
        tls_op("ca", argv[2], s);
    } else if (streq(sub, "process") && argc > 2) {
        static UINT8 record[6] = {0x17, 0x03, 0x03, 0x01, 0x00, 'x'};
        FRAGMENT_DATA fragment, *table = &fragment;
        UINT32 count = 1;
        fragment.FragmentLength = sizeof(record);
        fragment.FragmentBuffer = record;
        s = uefi_call_wrapper(TlsChild.tls->ProcessPacket, 4, TlsChild.tls, &table, &count,
                              streq(argv[2], "decrypt") ? 1 : 0);
        tls_op("process", argv[2], s);
    } else {
        out_note("error unknown tls operation");
        return;
    }
    out_flush();
}

static void run_line(char *line)
{
    char *argv[MAX_WORDS];
    int argc = split(line, argv);
    if (argc == 0)
        return;
    if (streq(argv[0], "scenario")) {
        finish_scenario();
        out_str("@@ scenario ");
        out_str(argc > 1 ? argv[1] : "?");
        out_flush();
        LineNo = 0;
        return;
    }
    if (streq(argv[0], "child") && argc > 1)
        op_child(argv[1]);
    else if (streq(argv[0], "adopt") && argc > 2)
        op_adopt(argv[1], argv[2]);
    else if (streq(argv[0], "configure") && argc > 2)
        op_configure(argc, argv);
    else if ((streq(argv[0], "connect") || streq(argv[0], "accept") || streq(argv[0], "receive")
              || streq(argv[0], "transmit") || streq(argv[0], "close")) && argc > 2)
        op_token_call(argc, argv);
    else if (streq(argv[0], "cancel") && argc > 2)
        op_cancel(argc, argv);
    else if (streq(argv[0], "poll") && argc > 1) {
        int c = find_any(argv[1]);
        if (c >= 0 && Children[c].uproto) {
            out_op("udp-poll", uefi_call_wrapper(Children[c].uproto->Poll, 1, Children[c].uproto));
            out_flush();
            sweep(1);
        } else if (c >= 0) {
            out_op("poll", uefi_call_wrapper(Children[c].proto->Poll, 1, Children[c].proto));
            out_flush();
            sweep(1);
        }
    } else if (streq(argv[0], "state") && argc > 1)
        op_state(argv[1]);
    else if (streq(argv[0], "mode") && argc > 1)
        op_mode(argv[1]);
    else if (streq(argv[0], "options") && argc > 1)
        op_options(argv[1]);
    else if (streq(argv[0], "udp") && argc > 1)
        op_udp_child(argv[1]);
    else if (streq(argv[0], "uconfigure") && argc > 2)
        op_udp_configure(argc, argv);
    else if (streq(argv[0], "umode") && argc > 1)
        op_udp_mode(argv[1], argc > 2 && streq(argv[2], "ttl"));
    else if ((streq(argv[0], "usend") || streq(argv[0], "urecv")) && argc > 2)
        op_udp_io(argc, argv);
    else if (streq(argv[0], "destroy") && argc > 1)
        op_destroy(argv[1]);
    else if (streq(argv[0], "wait") && argc > 1)
        op_wait(argc, argv);
    else if (streq(argv[0], "settle") && argc > 1)
        run_for(-1, num(argv[1]));
    else if (streq(argv[0], "ip4") && argc > 1)
        op_ip4(argc, argv);
    else if (streq(argv[0], "tls") && argc > 1)
        op_tls(argc, argv);
    else if (streq(argv[0], "host")) {
        /* A request to the runner (it acts on host peers); the scenario waits for the effect. */
        int i;
        out_str("@@ host");
        for (i = 1; i < argc; i++) {
            out_str(" ");
            out_str(argv[i]);
        }
        out_flush();
    } else
        out_note("error unknown operation");
}

static CHAR8 *read_scenarios(EFI_HANDLE image, UINTN *len)
{
    EFI_LOADED_IMAGE *loaded = NULL;
    EFI_FILE_HANDLE root, file;
    EFI_FILE_INFO *info;
    CHAR8 *data;
    UINTN size;
    if (uefi_call_wrapper(BSp->HandleProtocol, 3, image, &LoadedImageProtocol, (VOID **)&loaded) != EFI_SUCCESS)
        return NULL;
    root = LibOpenRoot(loaded->DeviceHandle);
    if (!root)
        return NULL;
    if (uefi_call_wrapper(root->Open, 5, root, &file, L"\\FWTEST\\SCN.TXT", EFI_FILE_MODE_READ, 0) != EFI_SUCCESS)
        return NULL;
    info = LibFileInfo(file);
    if (!info)
        return NULL;
    size = info->FileSize;
    FreePool(info);
    data = AllocateZeroPool(size + 1);
    if (uefi_call_wrapper(file->Read, 3, file, &size, data) != EFI_SUCCESS)
        return NULL;
    uefi_call_wrapper(file->Close, 1, file);
    *len = size;
    return data;
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    CHAR8 *text, *p;
    UINTN len = 0;
    InitializeLib(image, systab);
    BSp = systab->BootServices;
    uefi_call_wrapper(BSp->SetWatchdogTimer, 4, 0, 0, 0, NULL);
    Serial = first_protocol(&SerialGuid);
    calibrate();
    out_str("@@ probe start");
    out_flush();
    TcpSb = first_protocol(&Tcp4SbGuid);
    Cfg2 = first_protocol(&Cfg2Guid);
    UdpSb = first_protocol(&Udp4SbGuid);
    TlsSb = first_protocol(&TlsSbGuid);
    out_str(TcpSb ? "@@ tcp4-service yes" : "@@ tcp4-service no");
    out_flush();
    out_str(Cfg2 ? "@@ ip4config2 yes" : "@@ ip4config2 no");
    out_flush();
    text = read_scenarios(image, &len);
    if (!text) {
        out_str("@@ error cannot read \\FWTEST\\SCN.TXT");
        out_flush();
    } else {
        p = text;
        while (*p) {
            CHAR8 *eol = p;
            while (*eol && *eol != '\n')
                eol++;
            if (*eol)
                *eol++ = 0;
            if (eol - p > 1 && eol[-2] == '\r')
                eol[-2] = 0;
            LineNo++;
            run_line((char *)p);
            p = eol;
        }
        finish_scenario();
    }
    out_str("@@ end");
    out_flush();
    uefi_call_wrapper(RT->ResetSystem, 4, EfiResetShutdown, EFI_SUCCESS, 0, NULL);
    return EFI_SUCCESS;
}
