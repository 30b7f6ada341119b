"""Models EDK2 NetworkPkg/Udp6Dxe (Udp6Main.c, Udp6Impl.c): EFI_UDP6_SERVICE_BINDING_PROTOCOL and EFI_UDP6_PROTOCOL.

Udp6Dxe is Udp4Dxe for IPv6 (docs/edk2.md section 4.2: "Udp6 is parallel"), and so is the model: ``Udp6Driver``
is udp4.Udp4Driver with the IPv6 address family (nic.IPV6: host AF_INET6 sockets on ::1), its own
children, ledger and ephemeral-port counter, and the entry points whose structures differ:

* Configure: EFI_UDP6_CONFIG_DATA has no UseDefaultAddress, SubnetMask or broadcast flags. An
  all-zero StationAddress lets IP6 choose -- EFI_NO_MAPPING until the NIC has a usable address
  (ip6config.py), the instance then stays no-mapping until Configure is called again, as UDP4's
  does (docs/edk2.md section 3.7); an explicit StationAddress must be one of the NIC's addresses and a non-zero
  RemoteAddress a valid unicast one, else EFI_INVALID_PARAMETER. Reconfiguring a configured
  instance may change only TrafficClass, HopLimit, ReceiveTimeout and TransmitTimeout.
* Transmit: EFI_UDP6_TRANSMIT_DATA has no GatewayAddress; session data may override only the
  destination (Udp6.h), and a zero session DestinationAddress falls back to the configured one.
* Groups: IPv6 multicast (ff00::/8). There is no Routes slot (docs/edk2.md section 4.1).
* GetModeData: EFI_IP6_MODE_DATA, whose AddressList is a pool allocation the caller frees.

Receiving, RecycleSignal, receive timeouts, ICMP errors (IPV6_RECVERR on the host socket),
ports, Cancel and Poll are udp4's engine unchanged. There is no broadcast in IPv6. As in tcp6.py,
a datagram to the machine itself is recognised by its port on ::1 (tcp4_tcb.addressed_to_self).
"""

from __future__ import print_function

from bitsnet import efidefs
from efisim import uefi
from efisim.nic import IPV6
from efisim.tcp6 import fill_ip6_mode, valid_unicast
from efisim.firmware import pointer_address
from efisim.udp4 import Udp4Driver, _Transmit

S = uefi  # status codes

UDP6_MAX_DATA_SIZE = 65535 - 8  # the IPv6 payload length field minus the UDP header
IP6_FRAGMENT_PAYLOAD = 1448  # 1500 - 40 (IPv6 header) - 8 (fragment header), a multiple of 8
EFI_IP_PROTO_UDP = 17


class Udp6Driver(Udp4Driver):
    """Udp6Dxe on one NIC (see the module docstring)."""

    SERVICE_BINDING = efidefs.EFI_UDP6_SERVICE_BINDING_PROTOCOL
    PROTOCOL = efidefs.EFI_UDP6_PROTOCOL
    CONFIG_DATA = efidefs.EFI_UDP6_CONFIG_DATA
    LEDGER_PREFIX = "udp6"
    ETHER_TYPE = 0x86DD
    FRAGMENT_PAYLOAD = IP6_FRAGMENT_PAYLOAD
    family = IPV6
    receive_data = staticmethod(efidefs.udp6_receive_data)
    # EDK2 quirk (no loopback, as udp4.UNRESOLVED_DELAY): a datagram to the machine itself waits
    # for a neighbour advertisement that never comes; Ip6Nd gives up after IP6_MAX_MULTICAST_SOLICIT
    # (3) solicitations one RetransTimer (1 s) apart and fails the frame with EFI_NO_MAPPING. Read
    # from Ip6Dxe, not measured: the fwtest probe has no UDP6.
    UNRESOLVED_DELAY = 3.0

    def default_address(self):
        return self.nic.ip6.usable()

    # ------------------------------------------------------------------ Configure
    def configure(self, child, config):
        if not config:
            # As UDP4 (docs/edk2.md section 4.2): Configure(NULL) on an unconfigured instance is a no-op.
            if child.configured:
                self.unconfigure(child)
            return S.EFI_SUCCESS
        cfg = config.contents
        station, remote = IPV6.text(cfg.StationAddress), IPV6.text(cfg.RemoteAddress)
        if station != IPV6.any and not valid_unicast(station):
            return S.EFI_INVALID_PARAMETER
        if remote != IPV6.any and not valid_unicast(remote):
            return S.EFI_INVALID_PARAMETER
        if child.configured:
            if not self.reconfigurable(child.config, cfg):
                return S.EFI_ALREADY_STARTED
            for name in ("TrafficClass", "HopLimit", "ReceiveTimeout", "TransmitTimeout"):
                setattr(child.config, name, getattr(cfg, name))
            return S.EFI_SUCCESS
        ip6 = self.nic.ip6
        if station == IPV6.any:
            chosen = ip6.usable()
            if chosen is None:
                # Facts 3.7: IP6 has no usable source address yet -> EFI_NO_MAPPING; the instance
                # is no-mapping (not configured) until Configure is called again.
                child.no_mapping = True
                return S.EFI_NO_MAPPING
            station = chosen  # Udp6Configure saves the station address IP6 selected
        elif not ip6.has(station):
            return S.EFI_INVALID_PARAMETER  # not one of the configured addresses (Udp6.h)
        return self.apply_config(child, cfg, station, "0.0.0.0", remote)

    @staticmethod
    def store_station(config, station, mask, port):
        config.StationAddress = IPV6.struct(station)
        config.StationPort = port

    @staticmethod
    def reconfigurable(old, new):
        """Udp6IsReconfigurable: only the IP-level parameters may change."""
        for name in ("AcceptAnyPort", "AcceptPromiscuous", "AllowDuplicatePort"):
            if bool(getattr(old, name)) != bool(getattr(new, name)):
                return False
        if not new.AcceptAnyPort and new.StationPort != old.StationPort:
            return False  # the stored port is the one really bound (see udp4)
        if not new.AcceptPromiscuous and IPV6.text(new.StationAddress) not in (IPV6.any,
                                                                                IPV6.text(old.StationAddress)):
            return False
        if IPV6.text(new.RemoteAddress) != IPV6.text(old.RemoteAddress):
            return False
        if IPV6.text(new.RemoteAddress) != IPV6.any and new.RemotePort != old.RemotePort:
            return False
        return True

    @staticmethod
    def multicast(address):
        return address.lower().startswith("ff")

    def route(self, child, destination):
        """Every destination is on-link here (see tcp6.Tcp6Driver.route)."""
        return destination

    # ------------------------------------------------------------------ Transmit
    def validate_tx(self, child, completion):
        """Udp6ValidateTxToken: (status, _Transmit or None)."""
        if not completion.Event or not completion.Packet.TxData:
            return S.EFI_INVALID_PARAMETER, None
        tx_address = pointer_address(completion.Packet.TxData)
        head = efidefs.EFI_UDP6_TRANSMIT_DATA.from_address(tx_address)
        if head.FragmentCount == 0:
            return S.EFI_INVALID_PARAMETER, None
        fragments = self.read_fragments(
            efidefs.udp6_transmit_data(head.FragmentCount).from_address(tx_address).FragmentTable, head.DataLength)
        if fragments is None:
            return S.EFI_INVALID_PARAMETER, None
        destination, dport = child.remote, child.rport
        if head.UdpSessionData:
            session = head.UdpSessionData.contents
            if session.DestinationPort == 0 and child.rport == 0:
                return S.EFI_INVALID_PARAMETER, None
            session_destination = IPV6.text(session.DestinationAddress)
            if session_destination == IPV6.any and child.remote == IPV6.any:
                return S.EFI_INVALID_PARAMETER, None
            # Only the destination can be overridden per datagram (Udp6.h).
            if session_destination != IPV6.any:
                destination = session_destination
            if session.DestinationPort:
                dport = session.DestinationPort
        elif child.remote == IPV6.any:
            return S.EFI_INVALID_PARAMETER, None  # no destination anywhere
        if head.DataLength > UDP6_MAX_DATA_SIZE:
            return S.EFI_BAD_BUFFER_SIZE, None
        return S.EFI_SUCCESS, _Transmit(0, fragments, child.station, child.port, destination, dport)

    # ------------------------------------------------------------------ GetModeData
    def fill_ip_mode(self, child, mode):
        fill_ip6_mode(self.nic, mode, child.configured, child.no_mapping, EFI_IP_PROTO_UDP, child.station,
                      child.remote, (child.config.TrafficClass, child.config.HopLimit))


def install(machine):
    """Install EFI_UDP6_SERVICE_BINDING_PROTOCOL on the NIC handle; returns the driver."""
    return Udp6Driver(machine)
