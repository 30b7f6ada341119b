"""UEFI network definitions that BITS's ``efi`` module lacks: structures, enums and GUIDs.

Everything is named exactly as in the UEFI specification (and MdePkg/Include/Protocol/*.h of
tianocore/edk2), so a reader holding the spec can find every structure and field. It is pure
data, built on the base types of ``efi``; the only behaviour is a few constructors.

This module is the one name to import (``from bitsnet import efidefs``); the definitions live
in three files, one kind of knowledge each, and every name is re-exported here:

  efidefs_common   GUIDs (GUID_NAMES); addresses EFI_IPv4_ADDRESS, EFI_IPv6_ADDRESS, EFI_MAC_ADDRESS
                   and ipv4(), ipv4_text(), ipv6(), ipv6_bytes(); EFI_SERVICE_BINDING_PROTOCOL and
                   one subclass per network service; MNP/SNP mode data; EFI_TIME
  efidefs_ip4      IP4 mode data; EFI_TCP4_* and Tcp4State*; EFI_IP4_CONFIG2_* (data types,
                   policies); EFI_UDP4_*; EFI_DNS4_*; tcp4_*_data(n), udp4_*_data(n),
                   fragment_table(address, n)
  efidefs_ip6      IP6 mode data; EFI_TCP6_* and Tcp6State*; EFI_UDP6_*; EFI_IP6_CONFIG_*
                   (Ip6ConfigDataType*, Ip6ConfigPolicy*); EFI_DNS6_*; tcp6_*_data(n), udp6_*_data(n)
  efidefs_tls      EFI_TLS_* (imported on its own by the TLS modules, not re-exported here)

Layout rules that matter (docs/edk2.md section 1.2): IPv4/IPv6 addresses are byte
arrays with alignment 1 -- that is what puts EFI_TCP4_ACCESS_POINT.StationPort at offset 10 --
and port numbers in configuration and session structures are host byte order. UINTN and
pointers take the native size, so the same classes describe x64 and IA32 firmware.
tests/test_efi_layout.py pins every size and offset against docs/edk2.md sections 3.1 and 4.1.

The spec declares fragment tables as one-element arrays followed by more elements in the same
allocation; ``tcp4_receive_data(n)`` and ``tcp4_transmit_data(n)`` build the n-element variant
with an identical prefix, to be passed where the spec type is expected (via ``ctypes.cast``).
"""

# The names below are imported to be re-exported (hence the noqa), written out so that grep finds
# every one. Each statement stays short: BITS's compiler crashes on a statement whose bytecode
# reaches 255 bytes (tests/test_bits_lint.py), which a single import of ~40 names would.

# What this module's namespace held before the split, for code that reads the base types here
import ctypes  # noqa: F401
import uuid  # noqa: F401
from ctypes import POINTER, Structure, Union, c_void_p  # noqa: F401

import efi  # noqa: F401
from efi import BOOLEAN, UINT8, UINT16, UINT32, UINTN, EFI_EVENT, EFI_HANDLE, EFI_STATUS  # noqa: F401

# GUIDs
from bitsnet.efidefs_common import (  # noqa: F401
    EFI_SIMPLE_NETWORK_PROTOCOL_GUID, EFI_MANAGED_NETWORK_SERVICE_BINDING_PROTOCOL_GUID,
    EFI_MANAGED_NETWORK_PROTOCOL_GUID, EFI_IP4_SERVICE_BINDING_PROTOCOL_GUID, EFI_IP4_PROTOCOL_GUID,
    EFI_IP4_CONFIG2_PROTOCOL_GUID, EFI_TCP4_SERVICE_BINDING_PROTOCOL_GUID, EFI_TCP4_PROTOCOL_GUID,
    EFI_UDP4_SERVICE_BINDING_PROTOCOL_GUID, EFI_UDP4_PROTOCOL_GUID, EFI_DNS4_SERVICE_BINDING_PROTOCOL_GUID,
    EFI_DNS4_PROTOCOL_GUID, EFI_DHCP4_SERVICE_BINDING_PROTOCOL_GUID, EFI_DHCP4_PROTOCOL_GUID,
    EFI_IP6_SERVICE_BINDING_PROTOCOL_GUID, EFI_IP6_PROTOCOL_GUID, EFI_IP6_CONFIG_PROTOCOL_GUID,
    EFI_TCP6_SERVICE_BINDING_PROTOCOL_GUID, EFI_TCP6_PROTOCOL_GUID, EFI_UDP6_SERVICE_BINDING_PROTOCOL_GUID,
    EFI_UDP6_PROTOCOL_GUID, EFI_DNS6_SERVICE_BINDING_PROTOCOL_GUID, EFI_DNS6_PROTOCOL_GUID, GUID_NAMES)
from bitsnet.efidefs_common import EFI_HASH2_SERVICE_BINDING_PROTOCOL_GUID, EFI_RNG_PROTOCOL_GUID  # noqa: F401

# addresses, service binding, the layers below IP, EFI_TIME
from bitsnet.efidefs_common import (  # noqa: F401
    EFI_IPv4_ADDRESS, EFI_IPv6_ADDRESS, EFI_IP_ADDRESS, EFI_MAC_ADDRESS, ipv4, ipv4_text, ipv6, ipv6_bytes,
    EFI_SERVICE_BINDING_PROTOCOL, EFI_TCP4_SERVICE_BINDING_PROTOCOL, EFI_UDP4_SERVICE_BINDING_PROTOCOL,
    EFI_DNS4_SERVICE_BINDING_PROTOCOL, EFI_TCP6_SERVICE_BINDING_PROTOCOL, EFI_UDP6_SERVICE_BINDING_PROTOCOL,
    EFI_DNS6_SERVICE_BINDING_PROTOCOL, EFI_MANAGED_NETWORK_CONFIG_DATA, MAX_MCAST_FILTER_CNT,
    EFI_SIMPLE_NETWORK_MODE, EFI_TIME)

# IP4 mode data, TCP4
from bitsnet.efidefs_ip4 import (  # noqa: F401
    EFI_IP4_CONFIG_DATA, EFI_IP4_ROUTE_TABLE, EFI_IP4_ICMP_TYPE, EFI_IP4_MODE_DATA, EFI_TCP4_ACCESS_POINT,
    EFI_TCP4_OPTION, EFI_TCP4_CONFIG_DATA, EFI_TCP4_COMPLETION_TOKEN, EFI_TCP4_CONNECTION_TOKEN,
    EFI_TCP4_LISTEN_TOKEN, EFI_TCP4_FRAGMENT_DATA, EFI_TCP4_RECEIVE_DATA, EFI_TCP4_TRANSMIT_DATA,
    EFI_TCP4_PACKET, EFI_TCP4_IO_TOKEN, EFI_TCP4_CLOSE_TOKEN, EFI_TCP4_PROTOCOL)

# EFI_TCP4_CONNECTION_STATE
from bitsnet.efidefs_ip4 import (  # noqa: F401
    Tcp4StateClosed, Tcp4StateListen, Tcp4StateSynSent, Tcp4StateSynReceived, Tcp4StateEstablished,
    Tcp4StateFinWait1, Tcp4StateFinWait2, Tcp4StateClosing, Tcp4StateTimeWait, Tcp4StateCloseWait,
    Tcp4StateLastAck, TCP4_STATE_NAMES)

# IP4 Config2
from bitsnet.efidefs_ip4 import (  # noqa: F401
    Ip4Config2DataTypeInterfaceInfo, Ip4Config2DataTypePolicy, Ip4Config2DataTypeManualAddress,
    Ip4Config2DataTypeGateway, Ip4Config2DataTypeDnsServer, Ip4Config2DataTypeMaximum, Ip4Config2PolicyStatic,
    Ip4Config2PolicyDhcp, Ip4Config2PolicyMax, EFI_IP4_CONFIG2_POLICY, EFI_IP4_CONFIG2_INTERFACE_ID_MAXLEN,
    EFI_IP4_CONFIG2_INTERFACE_INFO, EFI_IP4_CONFIG2_MANUAL_ADDRESS, EFI_IP4_CONFIG2_PROTOCOL)

# UDP4, DNS4
from bitsnet.efidefs_ip4 import (  # noqa: F401
    EFI_UDP4_CONFIG_DATA, EFI_UDP4_SESSION_DATA, EFI_UDP4_FRAGMENT_DATA, EFI_UDP4_TRANSMIT_DATA,
    EFI_UDP4_RECEIVE_DATA, EFI_UDP4_PACKET, EFI_UDP4_COMPLETION_TOKEN, EFI_UDP4_PROTOCOL, EFI_DNS4_CONFIG_DATA,
    EFI_DNS4_CACHE_ENTRY, EFI_DNS4_MODE_DATA, DNS_HOST_TO_ADDR_DATA, DNS_ADDR_TO_HOST_DATA, DNS_RESOURCE_RECORD,
    DNS_GENERAL_LOOKUP_DATA, EFI_DNS4_RSP_DATA, EFI_DNS4_COMPLETION_TOKEN, EFI_DNS4_PROTOCOL)

# fragment tables
from bitsnet.efidefs_ip4 import (  # noqa: F401
    tcp4_receive_data, tcp4_transmit_data, udp4_transmit_data, udp4_receive_data, fragment_table)

# IP6 mode data, TCP6
from bitsnet.efidefs_ip6 import (  # noqa: F401
    EFI_IP6_CONFIG_DATA, EFI_IP6_ADDRESS_INFO, EFI_IP6_ROUTE_TABLE, EFI_IP6_NEIGHBOR_CACHE, EFI_IP6_ICMP_TYPE,
    EFI_IP6_MODE_DATA, EFI_TCP6_ACCESS_POINT, EFI_TCP6_OPTION, EFI_TCP6_CONFIG_DATA, EFI_TCP6_COMPLETION_TOKEN,
    EFI_TCP6_CONNECTION_TOKEN, EFI_TCP6_LISTEN_TOKEN, EFI_TCP6_FRAGMENT_DATA, EFI_TCP6_RECEIVE_DATA,
    EFI_TCP6_TRANSMIT_DATA, EFI_TCP6_PACKET, EFI_TCP6_IO_TOKEN, EFI_TCP6_CLOSE_TOKEN, EFI_TCP6_PROTOCOL)

# EFI_TCP6_CONNECTION_STATE
from bitsnet.efidefs_ip6 import (  # noqa: F401
    Tcp6StateClosed, Tcp6StateListen, Tcp6StateSynSent, Tcp6StateSynReceived, Tcp6StateEstablished,
    Tcp6StateFinWait1, Tcp6StateFinWait2, Tcp6StateClosing, Tcp6StateTimeWait, Tcp6StateCloseWait,
    Tcp6StateLastAck, TCP6_STATE_NAMES)

# UDP6
from bitsnet.efidefs_ip6 import (  # noqa: F401
    EFI_UDP6_CONFIG_DATA, EFI_UDP6_SESSION_DATA, EFI_UDP6_FRAGMENT_DATA, EFI_UDP6_TRANSMIT_DATA,
    EFI_UDP6_RECEIVE_DATA, EFI_UDP6_PACKET, EFI_UDP6_COMPLETION_TOKEN, EFI_UDP6_PROTOCOL)

# IP6 Config
from bitsnet.efidefs_ip6 import (  # noqa: F401
    Ip6ConfigDataTypeInterfaceInfo, Ip6ConfigDataTypeAltInterfaceId, Ip6ConfigDataTypePolicy,
    Ip6ConfigDataTypeDupAddrDetectTransmits, Ip6ConfigDataTypeManualAddress, Ip6ConfigDataTypeGateway,
    Ip6ConfigDataTypeDnsServer, Ip6ConfigDataTypeMaximum, Ip6ConfigPolicyManual, Ip6ConfigPolicyAutomatic,
    EFI_IP6_CONFIG_POLICY, EFI_IP6_CONFIG_INTERFACE_INFO, EFI_IP6_CONFIG_INTERFACE_ID,
    EFI_IP6_CONFIG_DUP_ADDR_DETECT_TRANSMITS, EFI_IP6_CONFIG_MANUAL_ADDRESS, EFI_IP6_CONFIG_PROTOCOL)

# DNS6
from bitsnet.efidefs_ip6 import (  # noqa: F401
    EFI_DNS6_CONFIG_DATA, EFI_DNS6_CACHE_ENTRY, EFI_DNS6_MODE_DATA, DNS6_HOST_TO_ADDR_DATA,
    DNS6_ADDR_TO_HOST_DATA, DNS6_RESOURCE_RECORD, DNS6_GENERAL_LOOKUP_DATA, EFI_DNS6_RSP_DATA,
    EFI_DNS6_COMPLETION_TOKEN, EFI_DNS6_PROTOCOL)

# fragment tables
from bitsnet.efidefs_ip6 import (  # noqa: F401
    tcp6_receive_data, tcp6_transmit_data, udp6_transmit_data, udp6_receive_data)
