/*
 * efiutil.h -- what the firmware test instruments (probe.c, bench.c) share: the EFI_TCP4_PROTOCOL
 * and service-binding declarations as the UEFI specification lays them out (gnu-efi has none),
 * the serial-port line output, the TSC and the protocol lookup.
 *
 * A header of static definitions for one translation unit each: tests/firmware/Makefile builds
 * every instrument from one .c file.  Output goes one line at a time to the Serial I/O protocol
 * (so the terminal driver adds no escape sequences); without a serial port it goes to ConOut,
 * unless the instrument defines EFIUTIL_SERIAL_ONLY before including this header.
 */
#ifndef EFIUTIL_H
#define EFIUTIL_H

#include <efi.h>
#include <efilib.h>

#define API __attribute__((ms_abi))

/* ---------------------------------------------------------------- EFI_TCP4_PROTOCOL */

typedef struct { UINT8 Addr[4]; } IP4;

typedef struct {
    BOOLEAN UseDefaultAddress;
    IP4 StationAddress;
    IP4 SubnetMask;
    UINT16 StationPort;
    IP4 RemoteAddress;
    UINT16 RemotePort;
    BOOLEAN ActiveFlag;
} TCP4_ACCESS_POINT;

typedef struct {
    UINT32 ReceiveBufferSize, SendBufferSize, MaxSynBackLog, ConnectionTimeout, DataRetries;
    UINT32 FinTimeout, TimeWaitTimeout, KeepAliveProbes, KeepAliveTime, KeepAliveInterval;
    BOOLEAN EnableNagle, EnableTimeStamp, EnableWindowScaling, EnableSelectiveAck, EnablePathMtuDiscovery;
} TCP4_OPTION;

typedef struct {
    UINT8 TypeOfService;
    UINT8 TimeToLive;
    TCP4_ACCESS_POINT AccessPoint;
    TCP4_OPTION *ControlOption;
} TCP4_CONFIG_DATA;

typedef struct { EFI_EVENT Event; EFI_STATUS Status; } COMPLETION_TOKEN;
typedef struct { COMPLETION_TOKEN CompletionToken; EFI_HANDLE NewChildHandle; } LISTEN_TOKEN;
typedef struct { UINT32 FragmentLength; VOID *FragmentBuffer; } FRAGMENT_DATA;
typedef struct {
    BOOLEAN UrgentFlag; UINT32 DataLength; UINT32 FragmentCount; FRAGMENT_DATA FragmentTable[1];
} RECEIVE_DATA;
typedef struct {
    BOOLEAN Push; BOOLEAN Urgent; UINT32 DataLength; UINT32 FragmentCount; FRAGMENT_DATA FragmentTable[1];
} TRANSMIT_DATA;
typedef struct { COMPLETION_TOKEN CompletionToken; VOID *Packet; } IO_TOKEN;
typedef struct { COMPLETION_TOKEN CompletionToken; BOOLEAN AbortOnClose; } CLOSE_TOKEN;

typedef struct TCP4 TCP4;
struct TCP4 {
    EFI_STATUS (API *GetModeData)(TCP4 *, UINT32 *, TCP4_CONFIG_DATA *, VOID *, VOID *, VOID *);
    EFI_STATUS (API *Configure)(TCP4 *, TCP4_CONFIG_DATA *);
    EFI_STATUS (API *Routes)(TCP4 *, BOOLEAN, IP4 *, IP4 *, IP4 *);
    EFI_STATUS (API *Connect)(TCP4 *, COMPLETION_TOKEN *);
    EFI_STATUS (API *Accept)(TCP4 *, LISTEN_TOKEN *);
    EFI_STATUS (API *Transmit)(TCP4 *, IO_TOKEN *);
    EFI_STATUS (API *Receive)(TCP4 *, IO_TOKEN *);
    EFI_STATUS (API *Close)(TCP4 *, CLOSE_TOKEN *);
    EFI_STATUS (API *Cancel)(TCP4 *, COMPLETION_TOKEN *);
    EFI_STATUS (API *Poll)(TCP4 *);
};

/* EFI_SERVICE_BINDING_PROTOCOL: the same two functions for every network protocol */
typedef struct SB SB;
struct SB {
    EFI_STATUS (API *CreateChild)(SB *, EFI_HANDLE *);
    EFI_STATUS (API *DestroyChild)(SB *, EFI_HANDLE);
};

static EFI_GUID Tcp4SbGuid = {0x00720665, 0x67eb, 0x4a99, {0xba, 0xf7, 0xd3, 0xc3, 0x3a, 0x1c, 0x7c, 0xc9}};
static EFI_GUID Tcp4Guid = {0x65530bc7, 0xa359, 0x410f, {0xb0, 0x10, 0x5a, 0xad, 0xc7, 0xec, 0x2b, 0x62}};
static EFI_GUID SerialGuid = {0xbb25cf6f, 0xf1d4, 0x11d2, {0x9a, 0x0c, 0x00, 0x90, 0x27, 0x3f, 0xc1, 0xfd}};

static EFI_BOOT_SERVICES *BSp;
static EFI_SERIAL_IO_PROTOCOL *Serial;

/* ---------------------------------------------------------------- output */

static char OutBuf[512];
static int OutLen;

/* Ends the line being built and writes it out. */
static void out_flush(void)
{
    UINTN n;
    char *p = OutBuf;
    OutBuf[OutLen++] = '\r';
    OutBuf[OutLen++] = '\n';
    while (OutLen > 0) {
        n = OutLen;
        if (Serial) {
            if (uefi_call_wrapper(Serial->Write, 3, Serial, &n, p) != EFI_SUCCESS)
                break;
        } else {
#ifdef EFIUTIL_SERIAL_ONLY
            break;
#else
            CHAR16 wide[2] = {0, 0};
            UINTN i;
            for (i = 0; i < n; i++) {
                wide[0] = (CHAR16)(unsigned char)p[i];
                uefi_call_wrapper(ST->ConOut->OutputString, 2, ST->ConOut, wide);
            }
#endif
        }
        p += n;
        OutLen -= n;
    }
    OutLen = 0;
}

static void out_str(const char *s)
{
    while (*s && OutLen < (int)sizeof(OutBuf) - 3)
        OutBuf[OutLen++] = *s++;
}

static void out_dec(UINT64 v)
{
    char tmp[24];
    int i = 0;
    do { tmp[i++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (i > 0 && OutLen < (int)sizeof(OutBuf) - 3)
        OutBuf[OutLen++] = tmp[--i];
}

/* ---------------------------------------------------------------- time and lookup */

static inline UINT64 rdtsc(void)
{
    UINT32 lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((UINT64)hi << 32) | lo;
}

/* The interface of `guid` on the first handle that has it; NULL if none does. */
static VOID *first_protocol(EFI_GUID *guid)
{
    EFI_HANDLE *handles = NULL;
    UINTN count = 0;
    VOID *iface = NULL;
    if (LibLocateHandle(ByProtocol, guid, NULL, &count, &handles) != EFI_SUCCESS || count == 0)
        return NULL;
    uefi_call_wrapper(BSp->HandleProtocol, 3, handles[0], guid, &iface);
    FreePool(handles);
    return iface;
}

#endif
