/*
 * bench.c -- the C ceiling for tools/fwbench.py: bulk receive, bulk send, 1-byte round trips and
 * connections per second, straight on EFI_TCP4 with no Python in the way.
 *
 * A test instrument only, built with gnu-efi beside probe.c (tests/firmware/Makefile, target
 * bench.efi).  Two ways to run it: booted as \EFI\BOOT\BOOTX64.EFI, it reads its one line of
 * configuration from \FWBENCH\CFG.TXT and powers the machine off when done; started from BITS's
 * Python (LoadImage from memory + StartImage, tests/scripts/fwbench_guest.py section c) the line
 * is its LoadOptions (ASCII) and it returns to BITS -- so the C figures come from the same boot,
 * moments before the Python ones (the host is shared: minutes apart, the noise is 2x).  The line:
 *     PORT SIZE SENDSIZE ROUNDTRIPS CONNECTIONS REPEAT RECEIVES [HTTPPORT KEEPALIVE PERCONN BODY]
 * PORT is tools/bench.py's peer on 10.0.2.2 (QEMU's host alias): 'S'+u64 sends that many bytes
 * and closes, 'K'+u64 reads that many and answers 'k', 'E' echoes, 'C' echoes one byte and
 * closes.  HTTPPORT is its HTTP server: KEEPALIVE requests GET /small/BODY on one connection
 * (what httplib does with a keep-alive HTTPConnection), PERCONN requests each on a connection of
 * its own, closed gracefully after the response (what urllib2.urlopen does).  Each figure is printed as "@@ fig NAME VALUE" (bytes/s or per-second counts, from the
 * TSC calibrated against Stall), REPEAT times; then "@@ end" and the machine powers off.
 *
 * The receive loop is what EDK2 rewards: RECEIVES (default 8) Receives of 64 KiB outstanding,
 * Poll (EDK2 moves one frame per Poll), then every completed token consumed in posting order
 * (several can complete in one Poll) and posted again at once.
 */

#define EFIUTIL_SERIAL_ONLY  /* no serial port: the figures are dropped (only the serial port is read) */
#include "efiutil.h"

#define CHUNK 65536
#define MAX_RX 16
#define MAX_TX 4
#define HOST0 10
#define HOST1 0
#define HOST2 2
#define HOST3 2

typedef struct {
    IO_TOKEN tok;
    RECEIVE_DATA rx;
    TRANSMIT_DATA tx;
    UINT8 *buf;
} IO;

typedef struct { EFI_HANDLE handle; TCP4 *p; CLOSE_TOKEN close; int closing; } CONN;

static SB *TcpSb;
static UINT64 TscPerSec = 1000000000;
static IO Rx[MAX_RX], Tx[MAX_TX];
static COMPLETION_TOKEN ConnectTok;
static TCP4_OPTION Option;
static UINT16 Port, HttpPort;
static UINT64 Failures;
static UINT64 Polls;  /* every Poll, for the per-exchange counts (docs/performance.md) */

/* ---------------------------------------------------------------- output */
static void note(const char *what, UINT64 value)
{
    out_str("@@ ");
    out_str(what);
    out_str(" ");
    out_dec(value);
    out_flush();
}

static void calibrate(void)
{
    UINT64 t0 = rdtsc();
    uefi_call_wrapper(BSp->Stall, 1, 200000);
    TscPerSec = (rdtsc() - t0) * 5;
    if (!TscPerSec)
        TscPerSec = 1;
}

/* per-second figure of `count` things done since TSC t0 */
static UINT64 per_second(UINT64 count, UINT64 t0)
{
    UINT64 ticks = rdtsc() - t0;
    if (!ticks)
        ticks = 1;
    return (UINT64)((count * (double)TscPerSec) / ticks);
}

static void fig(const char *name, UINT64 value)
{
    out_str("@@ fig ");
    out_str(name);
    out_str(" ");
    out_dec(value);
    out_flush();
}

static UINT64 parse(char **s)
{
    UINT64 v = 0;
    while (**s == ' ')
        (*s)++;
    while (**s >= '0' && **s <= '9')
        v = v * 10 + (UINT64)(*(*s)++ - '0');
    return v;
}

static int FromOptions;

static CHAR8 *read_config(EFI_HANDLE image)
{
    EFI_LOADED_IMAGE *loaded = NULL;
    EFI_FILE_HANDLE root, file;
    CHAR8 *data;
    UINTN size = 255;
    if (uefi_call_wrapper(BSp->HandleProtocol, 3, image, &LoadedImageProtocol, (VOID **)&loaded) != EFI_SUCCESS)
        return NULL;
    if (loaded->LoadOptionsSize > 0 && loaded->LoadOptions) {
        UINTN n = loaded->LoadOptionsSize < size ? loaded->LoadOptionsSize : size;
        data = AllocateZeroPool(size + 1);
        CopyMem(data, loaded->LoadOptions, n);
        FromOptions = 1;
        return data;
    }
    root = LibOpenRoot(loaded->DeviceHandle);
    if (!root || uefi_call_wrapper(root->Open, 5, root, &file, L"\\FWBENCH\\CFG.TXT", EFI_FILE_MODE_READ, 0) != EFI_SUCCESS)
        return NULL;
    data = AllocateZeroPool(size + 1);
    if (uefi_call_wrapper(file->Read, 3, file, &size, data) != EFI_SUCCESS)
        return NULL;
    uefi_call_wrapper(file->Close, 1, file);
    return data;
}

/* ---------------------------------------------------------------- TCP4 helpers */
static void new_event(COMPLETION_TOKEN *c)
{
    uefi_call_wrapper(BSp->CreateEvent, 5, 0, 0, NULL, NULL, &c->Event);
}

static int done(COMPLETION_TOKEN *c)
{
    return uefi_call_wrapper(BSp->CheckEvent, 1, c->Event) == EFI_SUCCESS;
}

/* Poll until `c` completed (at most 30 s); its Status */
static EFI_STATUS wait(CONN *k, COMPLETION_TOKEN *c)
{
    UINT64 t0 = rdtsc();
    while (!done(c)) {
        uefi_call_wrapper(k->p->Poll, 1, k->p);
        Polls++;
        if (rdtsc() - t0 > 30 * TscPerSec) {
            Failures++;
            note("timeout", 0);
            return EFI_TIMEOUT;
        }
    }
    return c->Status;
}

/* a connected child to `port`; 0 on failure.  Configure is retried while DHCP brings the address up. */
static int open_conn_to(CONN *k, UINT16 port)
{
    static TCP4_CONFIG_DATA cfg;
    EFI_STATUS s;
    UINT64 t0 = rdtsc();
    SetMem(k, sizeof(*k), 0);
    if (uefi_call_wrapper(TcpSb->CreateChild, 2, TcpSb, &k->handle) != EFI_SUCCESS)
        return 0;
    uefi_call_wrapper(BSp->HandleProtocol, 3, k->handle, &Tcp4Guid, (VOID **)&k->p);
    SetMem(&cfg, sizeof(cfg), 0);
    cfg.TimeToLive = 64;
    cfg.AccessPoint.UseDefaultAddress = TRUE;
    cfg.AccessPoint.RemoteAddress.Addr[0] = HOST0;
    cfg.AccessPoint.RemoteAddress.Addr[1] = HOST1;
    cfg.AccessPoint.RemoteAddress.Addr[2] = HOST2;
    cfg.AccessPoint.RemoteAddress.Addr[3] = HOST3;
    cfg.AccessPoint.RemotePort = port;
    cfg.AccessPoint.ActiveFlag = TRUE;
    cfg.ControlOption = &Option;
    while ((s = uefi_call_wrapper(k->p->Configure, 2, k->p, &cfg)) == EFI_NO_MAPPING && rdtsc() - t0 < 30 * TscPerSec)
        uefi_call_wrapper(BSp->Stall, 1, 10000);
    if (s != EFI_SUCCESS) {
        note("configure-failed", s & 0xff);
        return 0;
    }
    done(&ConnectTok);
    ConnectTok.Status = EFI_NOT_READY;
    if (uefi_call_wrapper(k->p->Connect, 2, k->p, &ConnectTok) != EFI_SUCCESS || wait(k, &ConnectTok) != EFI_SUCCESS) {
        note("connect-failed", 0);
        return 0;
    }
    return 1;
}

static int open_conn(CONN *k)
{
    return open_conn_to(k, Port);
}

static void destroy(CONN *k)
{
    uefi_call_wrapper(TcpSb->DestroyChild, 2, TcpSb, k->handle);
}

static void abort_conn(CONN *k)
{
    k->close.AbortOnClose = TRUE;
    k->close.CompletionToken.Status = EFI_NOT_READY;
    new_event(&k->close.CompletionToken);
    if (uefi_call_wrapper(k->p->Close, 2, k->p, &k->close) == EFI_SUCCESS)
        wait(k, &k->close.CompletionToken);
    uefi_call_wrapper(BSp->CloseEvent, 1, k->close.CompletionToken.Event);
    destroy(k);
}

/* A token's event may still be signalled from an earlier child's teardown (DestroyChild aborts
   what is outstanding): CheckEvent clears that before the token is posted again. */
static EFI_STATUS post_rx(CONN *k, IO *io, UINT32 size)
{
    done(&io->tok.CompletionToken);
    io->rx.DataLength = io->rx.FragmentTable[0].FragmentLength = size;
    io->rx.FragmentCount = 1;
    io->rx.FragmentTable[0].FragmentBuffer = io->buf;
    io->tok.Packet = &io->rx;
    io->tok.CompletionToken.Status = EFI_NOT_READY;
    return uefi_call_wrapper(k->p->Receive, 2, k->p, &io->tok);
}

static EFI_STATUS post_tx(CONN *k, IO *io, UINT8 *data, UINT32 size)
{
    done(&io->tok.CompletionToken);
    io->tx.Push = TRUE;
    io->tx.DataLength = io->tx.FragmentTable[0].FragmentLength = size;
    io->tx.FragmentCount = 1;
    io->tx.FragmentTable[0].FragmentBuffer = data;
    io->tok.Packet = &io->tx;
    io->tok.CompletionToken.Status = EFI_NOT_READY;
    return uefi_call_wrapper(k->p->Transmit, 2, k->p, &io->tok);
}

static int send_wait(CONN *k, UINT8 *data, UINT32 size)
{
    return post_tx(k, &Tx[0], data, size) == EFI_SUCCESS && wait(k, &Tx[0].tok.CompletionToken) == EFI_SUCCESS;
}

/* one Receive of up to `size`, waited for; bytes (0 at FIN or error) */
static UINT32 recv_wait(CONN *k, UINT32 size)
{
    if (post_rx(k, &Rx[0], size) != EFI_SUCCESS || wait(k, &Rx[0].tok.CompletionToken) != EFI_SUCCESS)
        return 0;
    return Rx[0].rx.DataLength;
}

static void header(UINT8 *h, char command, UINT64 size)
{
    int i;
    h[0] = (UINT8)command;
    for (i = 0; i < 8; i++)
        h[1 + i] = (UINT8)(size >> (56 - 8 * i));
}

/* ---------------------------------------------------------------- the figures */
static void bulk_recv(UINT64 size, int receives)
{
    CONN k;
    UINT8 h[9];
    UINT64 got = 0, t0, polls = 0;
    int head = 0, i, live = 0, fin = 0;
    if (!open_conn(&k))
        return;
    t0 = rdtsc();  /* from the request on, as the Python figures */
    header(h, 'S', size);
    if (!send_wait(&k, h, 9)) { Failures++; return; }
    for (i = 0; i < receives; i++)
        if (post_rx(&k, &Rx[i], CHUNK) == EFI_SUCCESS)
            live++;
    while (live && !fin) {
        uefi_call_wrapper(k.p->Poll, 1, k.p);
        polls++;
        /* completions in posting order: EDK2 fills the oldest Receive first */
        while (live && done(&Rx[head].tok.CompletionToken)) {
            IO *io = &Rx[head];
            if (io->tok.CompletionToken.Status != EFI_SUCCESS) {
                fin = 1;
                break;
            }
            got += io->rx.DataLength;
            if (got >= size) {
                fin = 1;
                break;
            }
            if (post_rx(&k, io, CHUNK) != EFI_SUCCESS)
                live--;
            head = (head + 1) % receives;
        }
    }
    fig("bulk_recv", per_second(got, t0));
    note("bulk_recv_polls_per_64k", polls * CHUNK / (got ? got : 1));
    if (got != size) {
        Failures++;
        note("bulk_recv_short", got);
    }
    abort_conn(&k);
}

static void bulk_send(UINT64 size)
{
    CONN k;
    UINT8 h[9];
    UINT64 left = size, t0;
    int i, next = 0;
    int busy[MAX_TX] = {0};
    if (!open_conn(&k))
        return;
    t0 = rdtsc();
    header(h, 'K', size);
    if (!send_wait(&k, h, 9)) { Failures++; return; }
    /* MAX_TX Transmits of 64 KiB in flight, as bitsnet keeps them */
    while (left) {
        IO *io = &Tx[next];
        if (busy[next]) {
            while (!done(&io->tok.CompletionToken))
                uefi_call_wrapper(k.p->Poll, 1, k.p);
            busy[next] = 0;
        }
        UINT32 n = left < CHUNK ? (UINT32)left : CHUNK;
        if (post_tx(&k, io, io->buf, n) != EFI_SUCCESS) { Failures++; return; }
        busy[next] = 1;
        left -= n;
        next = (next + 1) % MAX_TX;
    }
    for (i = 0; i < MAX_TX; i++)
        if (busy[i])
            wait(&k, &Tx[i].tok.CompletionToken);
    if (recv_wait(&k, 16) != 1)
        Failures++;
    fig("bulk_send", per_second(size, t0));
    abort_conn(&k);
}

static void round_trips(UINT64 count)
{
    CONN k;
    UINT8 x = 'x';
    UINT64 i, t0;
    if (!open_conn(&k))
        return;
    if (!send_wait(&k, (UINT8 *)"E", 1)) { Failures++; return; }
    t0 = rdtsc();
    Polls = 0;
    for (i = 0; i < count; i++) {
        if (!send_wait(&k, &x, 1) || recv_wait(&k, 16) != 1) {
            Failures++;
            break;
        }
    }
    fig("round_trips", per_second(i, t0));
    note("round_trips_polls_x100", i ? Polls * 100 / i : 0);
    abort_conn(&k);
}

/* connect, one byte each way, graceful Close; children destroyed when their Close completes */
#define MAX_CONNS 64
static CONN Conns[MAX_CONNS];

static int reap(int n)
{
    int i, left = 0;
    for (i = 0; i < n; i++) {
        if (!Conns[i].closing)
            continue;
        if (done(&Conns[i].close.CompletionToken)) {
            uefi_call_wrapper(BSp->CloseEvent, 1, Conns[i].close.CompletionToken.Event);
            destroy(&Conns[i]);
            Conns[i].closing = 0;
        } else {
            uefi_call_wrapper(Conns[i].p->Poll, 1, Conns[i].p);
            Polls++;
            left++;
        }
    }
    return left;
}

static void connections(UINT64 count)
{
    UINT64 i, t0 = rdtsc();
    Polls = 0;
    if (count > MAX_CONNS)
        count = MAX_CONNS;
    for (i = 0; i < count; i++) {
        CONN *k = &Conns[i];
        if (!open_conn(k) || !send_wait(k, (UINT8 *)"Cx", 2) || recv_wait(k, 16) != 1) {
            Failures++;
            break;
        }
        k->close.AbortOnClose = FALSE;
        k->close.CompletionToken.Status = EFI_NOT_READY;
        new_event(&k->close.CompletionToken);
        uefi_call_wrapper(k->p->Close, 2, k->p, &k->close);
        k->closing = 1;
        reap((int)i + 1);
    }
    /* timed up to the last Close posted: the graceful closes finish in the background (the
       last one's TIME_WAIT alone is 2 s), as with bitsnet's reaper and BITS's own close() */
    fig("connections", per_second(i, t0));
    note("connections_polls_x100", i ? Polls * 100 / i : 0);
    while (reap((int)count) && rdtsc() - t0 < 60 * TscPerSec)
        ;
}

/* ---------------------------------------------------------------- HTTP, as the labs talk */
static UINT8 HttpBuf[4096];

/* one GET /small/BODY on `k` (Connection: close if `last`), its response read whole (headers
   up to the blank line, then BODY bytes: the peer sends Content-Length BODY); 1 on success */
static int http_exchange(CONN *k, UINT64 body, int last)
{
    static char request[160];
    char *r = request;
    const char *parts[] = {"GET /small/", 0, " HTTP/1.1\r\nHost: 10.0.2.2\r\nAccept-Encoding: identity\r\n", 0};
    char digits[24];
    int n = 0, i;
    UINT64 v = body, got = 0, head = 0;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (i = 0; parts[0][i]; i++) *r++ = parts[0][i];
    while (n) *r++ = digits[--n];
    for (i = 0; parts[2][i]; i++) *r++ = parts[2][i];
    if (last) {
        const char *c = "Connection: close\r\n";
        while (*c) *r++ = *c++;
    }
    *r++ = '\r';
    *r++ = '\n';
    if (!send_wait(k, (UINT8 *)request, (UINT32)(r - request)))
        return 0;
    for (;;) {
        UINT32 len;
        if (post_rx(k, &Rx[0], CHUNK) != EFI_SUCCESS || wait(k, &Rx[0].tok.CompletionToken) != EFI_SUCCESS)
            return 0;
        len = Rx[0].rx.DataLength;
        if (!head) {  /* the headers end at the first blank line (they come in the first segment) */
            UINT64 j;
            UINT32 keep = len < sizeof(HttpBuf) ? len : sizeof(HttpBuf);
            CopyMem(HttpBuf, Rx[0].buf, keep);
            for (j = 0; j + 3 < keep; j++)
                if (HttpBuf[j] == '\r' && HttpBuf[j + 1] == '\n' && HttpBuf[j + 2] == '\r' && HttpBuf[j + 3] == '\n') {
                    head = j + 4;
                    break;
                }
            if (!head)
                return 0;
        }
        got += len;
        if (got >= head + body)
            return got == head + body;
    }
}

static void http_keepalive(UINT64 count, UINT64 body)
{
    CONN k;
    UINT64 i, t0;
    if (!open_conn_to(&k, HttpPort))
        return;
    if (!http_exchange(&k, body, 0)) {  /* the first one is not timed, as httplib's first request */
        Failures++;
        abort_conn(&k);
        return;
    }
    Polls = 0;
    t0 = rdtsc();
    for (i = 0; i < count; i++)
        if (!http_exchange(&k, body, 0)) {
            Failures++;
            break;
        }
    fig("http_keepalive", per_second(i, t0));
    note("http_keepalive_polls_x100", i ? Polls * 100 / i : 0);
    abort_conn(&k);
}

/* a connection per request, closed gracefully after the response (urllib2.urlopen) */
static void http_conns(UINT64 count, UINT64 body)
{
    UINT64 i, t0 = rdtsc();
    Polls = 0;
    if (count > MAX_CONNS)
        count = MAX_CONNS;
    for (i = 0; i < count; i++) {
        CONN *k = &Conns[i];
        if (!open_conn_to(k, HttpPort) || !http_exchange(k, body, 1)) {
            Failures++;
            break;
        }
        k->close.AbortOnClose = FALSE;
        k->close.CompletionToken.Status = EFI_NOT_READY;
        new_event(&k->close.CompletionToken);
        uefi_call_wrapper(k->p->Close, 2, k->p, &k->close);
        k->closing = 1;
        reap((int)i + 1);
    }
    fig("http_conns", per_second(i, t0));
    note("http_conns_polls_x100", i ? Polls * 100 / i : 0);
    while (reap((int)count) && rdtsc() - t0 < 60 * TscPerSec)
        ;
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    CHAR8 *cfg;
    char *p;
    UINT64 size, send_size, trips, conns, repeat, receives, r, keepalive, perconn, body;
    int i;
    InitializeLib(image, systab);
    BSp = systab->BootServices;
    uefi_call_wrapper(BSp->SetWatchdogTimer, 4, 0, 0, 0, NULL);
    Serial = first_protocol(&SerialGuid);
    calibrate();
    out_str("@@ bench start");
    out_flush();
    TcpSb = first_protocol(&Tcp4SbGuid);
    cfg = read_config(image);
    if (!TcpSb || !cfg) {
        out_str(TcpSb ? "@@ error no \\FWBENCH\\CFG.TXT" : "@@ error no TCP4 service");
        out_flush();
    } else {
        p = (char *)cfg;
        Port = (UINT16)parse(&p);
        size = parse(&p);
        send_size = parse(&p);
        trips = parse(&p);
        conns = parse(&p);
        repeat = parse(&p);
        receives = parse(&p);
        HttpPort = (UINT16)parse(&p);
        keepalive = parse(&p);
        perconn = parse(&p);
        body = parse(&p);
        if (receives < 1 || receives > MAX_RX)
            receives = 8;
        /* the options bitsnet configures (tcp.py): 256 KiB buffers, Nagle off, timestamps, scaling */
        Option.ReceiveBufferSize = Option.SendBufferSize = 256 * 1024;
        Option.MaxSynBackLog = 10;
        Option.ConnectionTimeout = 75;
        Option.DataRetries = 12;
        Option.FinTimeout = Option.TimeWaitTimeout = 2;
        Option.KeepAliveProbes = 8;
        Option.KeepAliveTime = 7200;
        Option.KeepAliveInterval = 60;
        Option.EnableNagle = FALSE;
        Option.EnableTimeStamp = Option.EnableWindowScaling = TRUE;
        for (i = 0; i < MAX_RX; i++) {
            Rx[i].buf = AllocatePool(CHUNK);
            new_event(&Rx[i].tok.CompletionToken);
        }
        for (i = 0; i < MAX_TX; i++) {
            Tx[i].buf = AllocatePool(CHUNK);
            SetMem(Tx[i].buf, CHUNK, 'b');
            new_event(&Tx[i].tok.CompletionToken);
        }
        new_event(&ConnectTok);
        note("tsc_per_sec", TscPerSec);
        {   /* DHCP first (Configure answers NO_MAPPING until the address is there): not timed */
            CONN warm;
            if (open_conn(&warm))
                abort_conn(&warm);
        }
        for (r = 0; r < repeat; r++) {
            if (size)
                bulk_recv(size, (int)receives);
            if (send_size)
                bulk_send(send_size);
            if (trips)
                round_trips(trips);
            if (conns)
                connections(conns);
            if (HttpPort && keepalive)
                http_keepalive(keepalive, body);
            if (HttpPort && perconn)
                http_conns(perconn, body);
        }
        note("failures", Failures);
        if (FromOptions) {  /* BITS goes on: give back what it would otherwise lose */
            for (i = 0; i < MAX_RX; i++) {
                uefi_call_wrapper(BSp->CloseEvent, 1, Rx[i].tok.CompletionToken.Event);
                FreePool(Rx[i].buf);
            }
            for (i = 0; i < MAX_TX; i++) {
                uefi_call_wrapper(BSp->CloseEvent, 1, Tx[i].tok.CompletionToken.Event);
                FreePool(Tx[i].buf);
            }
            uefi_call_wrapper(BSp->CloseEvent, 1, ConnectTok.Event);
        }
    }
    out_str("@@ end");
    out_flush();
    if (FromOptions)
        return EFI_SUCCESS;  /* back to BITS */
    uefi_call_wrapper(RT->ResetSystem, 4, EfiResetShutdown, EFI_SUCCESS, 0, NULL);
    return EFI_SUCCESS;
}
