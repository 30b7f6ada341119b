"""AF_INET6 through bitsnet._socket on the simulator's TCP6/UDP6 (station ::1), against real
peers on the host's [::1]: TCP client and server, UDP, address tuples, IPV6_V6ONLY, getaddrinfo
across families (literals, AAAA through tests/dnspeer.py, AF_UNSPEC order), create_connection's
fallback, the firmware without IPv6 (EAFNOSUPPORT, IPv4-only answers), interfaces(); and the
standard library over IPv6 (urllib against http.server on http://[::1]:PORT/) under efirun.

In-process tests run the machine with ipv6_delay=0: SLAAC (which bitsnet switches on, as EDK2's
HTTP boot does) completes at once; the efirun tests keep the default delay, which bitsnet waits
out, and one test has no router at all."""

from __future__ import print_function

import errno
import socket as host
import threading

import pytest

from bitsnet import _socket as bs
from dnspeer import DnsPeer
from test_socket_api import net  # noqa: F401  (the fixture)
from test_stdlib import EfiRun, _kill_leftover_runs  # noqa: F401  (the autouse fixture)

TIMEOUT = 5.0
V6 = pytest.mark.machine(ipv6_delay=0)

try:
    host.socket(host.AF_INET6, host.SOCK_STREAM).close()
    HOST_V6 = True
except (OSError, host.error):
    HOST_V6 = False
pytestmark = pytest.mark.skipif(not HOST_V6, reason="the host has no IPv6 loopback")


@pytest.fixture(autouse=True)
def _forget_the_nic():
    """A test that only asks the NIC (has TCP6? interfaces()) submits no EFI token, so conftest's
    teardown -- which runs for tests that used bitsnet's event machinery -- does not reset
    bitsnet.nic; its cached NIC would outlive the machine and a later test without a machine
    would call into freed firmware memory. Forget it here."""
    yield
    from bitsnet import nic
    nic.reset()


def host_listener():
    sock = host.socket(host.AF_INET6, host.SOCK_STREAM)
    sock.setsockopt(host.SOL_SOCKET, host.SO_REUSEADDR, 1)
    sock.bind(("::1", 0))
    sock.listen(5)
    sock.settimeout(TIMEOUT)
    return sock


@V6
def test_tcp_client_talks_to_a_host_server_on_v6_loopback(net):  # noqa: F811
    server = host_listener()
    s = bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    try:
        s.connect(("::1", server.getsockname()[1]))
        conn, peer = server.accept()
        assert peer[0] == "::1" and peer[1] == s.getsockname()[1]
        assert s.getpeername() == ("::1", server.getsockname()[1], 0, 0)
        assert s.getsockname()[0] == "::1" and len(s.getsockname()) == 4
        s.sendall(b"ping6" * 1000)
        got = b""
        conn.settimeout(TIMEOUT)
        while len(got) < 5000:
            got += conn.recv(65536)
        assert got == b"ping6" * 1000
        conn.sendall(b"pong6")
        assert s.recv(100) == b"pong6"
        conn.close()
        assert s.recv(100) == b""
        assert s.family == bs.AF_INET6
    finally:
        s.close()
        server.close()


@V6
def test_tcp_server_accepts_a_host_client(net):  # noqa: F811
    listener = bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    listener.settimeout(TIMEOUT)
    client = host.socket(host.AF_INET6, host.SOCK_STREAM)
    client.settimeout(TIMEOUT)
    try:
        listener.bind(("", 0))
        listener.listen(5)
        host_, port = listener.getsockname()[:2]
        assert host_ == "::" and port
        assert listener.getsockopt(bs.IPPROTO_IPV6, bs.IPV6_V6ONLY) == 1
        client.connect(("::1", port))
        conn, address = listener.accept()
        try:
            assert address == ("::1", client.getsockname()[1], 0, 0)
            client.sendall(b"hello over tcp6")
            conn.settimeout(TIMEOUT)
            assert conn.recv(100) == b"hello over tcp6"
            conn.sendall(b"reply")
            assert client.recv(100) == b"reply"
        finally:
            conn.close()
    finally:
        client.close()
        listener.close()


@V6
def test_v6only_is_always_on_and_zero_is_refused(net):  # noqa: F811
    s = bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    v4 = bs.socket(bs.AF_INET, bs.SOCK_STREAM)
    try:
        s.setsockopt(bs.IPPROTO_IPV6, bs.IPV6_V6ONLY, 1)
        assert s.getsockopt(bs.IPPROTO_IPV6, bs.IPV6_V6ONLY) == 1
        with pytest.raises(bs.error) as info:
            s.setsockopt(bs.IPPROTO_IPV6, bs.IPV6_V6ONLY, 0)
        assert info.value.errno == errno.EOPNOTSUPP
        with pytest.raises(bs.error) as info:
            v4.setsockopt(bs.IPPROTO_IPV6, bs.IPV6_V6ONLY, 1)
        assert info.value.errno == errno.ENOPROTOOPT
    finally:
        s.close()
        v4.close()


@V6
def test_address_tuples_are_checked_as_cpython_checks_them(net):  # noqa: F811
    s = bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    try:
        with pytest.raises(TypeError):
            s.connect("::1")
        with pytest.raises(TypeError):
            s.connect(("::1",))
        with pytest.raises(OverflowError):
            s.connect(("::1", 80, 1 << 20))
        with pytest.raises(OverflowError):
            s.connect(("::1", 70000))
        with pytest.raises(bs.gaierror):
            s.connect(("1.2.3.4", 80))  # an IPv4 literal is no AF_INET6 address (EAI_ADDRFAMILY)
    finally:
        s.close()


@V6
def test_udp_over_v6(net):  # noqa: F811
    peer = host.socket(host.AF_INET6, host.SOCK_DGRAM)
    peer.bind(("::1", 0))
    peer.settimeout(TIMEOUT)
    s = bs.socket(bs.AF_INET6, bs.SOCK_DGRAM)
    s.settimeout(TIMEOUT)
    try:
        s.sendto(b"datagram6", peer.getsockname()[:2])
        data, source = peer.recvfrom(100)
        assert data == b"datagram6" and source[1] == s.getsockname()[1]
        peer.sendto(b"answer6", source)
        assert s.recvfrom(100) == (b"answer6", ("::1", peer.getsockname()[1], 0, 0))
        s.connect(("::1", peer.getsockname()[1], 0, 0))
        s.send(b"connected6")
        assert peer.recvfrom(100)[0] == b"connected6"
    finally:
        s.close()
        peer.close()


def test_getaddrinfo_literals_without_firmware():
    assert bs.getaddrinfo("::1", 80, 0, bs.SOCK_STREAM) == [
        (bs.AF_INET6, bs.SOCK_STREAM, bs.IPPROTO_TCP, "", ("::1", 80, 0, 0))]
    assert bs.getaddrinfo("FE80::1%3", 80, bs.AF_INET6, bs.SOCK_DGRAM)[0][4] == ("fe80::1", 80, 0, 3)
    assert bs.getaddrinfo("1.2.3.4", 80, bs.AF_INET6, bs.SOCK_STREAM, 0, bs.AI_V4MAPPED)[0][4] == \
        ("::ffff:1.2.3.4", 80, 0, 0)
    assert bs.getaddrinfo("localhost", 80, bs.AF_INET6, bs.SOCK_STREAM)[0][4] == ("::1", 80, 0, 0)
    for args in (("::1", 80, bs.AF_INET), ("1.2.3.4", 80, bs.AF_INET6)):
        with pytest.raises(bs.gaierror) as info:
            bs.getaddrinfo(*args)
        assert info.value.args[0] == host.EAI_ADDRFAMILY == bs.EAI_ADDRFAMILY
    # (not a scoped literal: Python 2.7's getaddrinfo writes the interface name into the host)
    for args in (("::1", 80, 0, bs.SOCK_STREAM), ("::ffff:1.2.3.4", 80, bs.AF_INET6, bs.SOCK_STREAM),
                 ("2001:DB8::0:1", 80, 0, bs.SOCK_DGRAM)):
        assert [r[:3] + r[4:] for r in bs.getaddrinfo(*args)] == [r[:3] + r[4:] for r in host.getaddrinfo(*args)]


def test_getnameinfo_takes_v6_addresses():
    flags = bs.NI_NUMERICHOST | bs.NI_NUMERICSERV
    assert bs.getnameinfo(("::1", 80, 0, 0), flags) == host.getnameinfo(("::1", 80, 0, 0), flags)
    assert bs.getnameinfo(("2001:DB8::1", 443), bs.NI_NUMERICHOST) == ("2001:db8::1", "https")
    assert bs.getnameinfo(("fe80::1", 80, 0, 2), flags) == ("fe80::1%2", "80")
    with pytest.raises(bs.error):
        bs.getnameinfo(("1.2.3.4", 80, 0, 0), flags)  # CPython: "IPv4 sockaddr must be 2 tuple"


NAMES = {"dual.test": [("A", "127.0.0.1"), ("AAAA", "::1")], "v6only.test": [("AAAA", "::1")],
         "v4only.test": [("A", "127.0.0.1")], "alias6.test": [("CNAME", "v6only.test")]}


@V6
def test_aaaa_resolution_and_dual_stack_order(net):  # noqa: F811
    from bitsnet import dns
    with DnsPeer(NAMES) as peer:
        dns.set_servers(["127.0.0.1"], use_dns4=False)
        dns.DNS_PORT, saved = peer.port, dns.DNS_PORT
        try:
            assert dns.lookup("v6only.test", dns.TYPE_AAAA).addresses == ["::1"]
            assert dns.lookup("alias6.test", dns.TYPE_AAAA) == dns.Answer("v6only.test", ["alias6.test"], ["::1"])
            both = bs.getaddrinfo("dual.test", 80, 0, bs.SOCK_STREAM)
            assert [r[4] for r in both] == [("::1", 80, 0, 0), ("127.0.0.1", 80)]  # IPv6 first
            assert [r[4] for r in bs.getaddrinfo("dual.test", 80, bs.AF_INET, bs.SOCK_STREAM)] == [("127.0.0.1", 80)]
            assert [r[4] for r in bs.getaddrinfo("dual.test", 80, bs.AF_INET6, bs.SOCK_STREAM)] == [
                ("::1", 80, 0, 0)]
            assert [r[0] for r in bs.getaddrinfo("v4only.test", 80, 0, bs.SOCK_STREAM)] == [bs.AF_INET]
            assert [r[0] for r in bs.getaddrinfo("v6only.test", 80, 0, bs.SOCK_STREAM)] == [bs.AF_INET6]
            with pytest.raises(bs.gaierror):
                bs.getaddrinfo("v4only.test", 80, bs.AF_INET6)
            with pytest.raises(bs.gaierror) as info:
                bs.getaddrinfo("nowhere.test", 80)
            assert info.value.args[0] == bs.EAI_NONAME
            assert ("v6only.test", dns.TYPE_AAAA) in peer.queries
        finally:
            dns.DNS_PORT = saved


def serve_once(sock, reply):
    def run():
        try:
            conn, _ = sock.accept()
            conn.sendall(reply)
            conn.close()
        except (OSError, host.error):
            pass
    thread = threading.Thread(target=run)
    thread.daemon = True
    thread.start()
    return thread


@V6
def test_create_connection_falls_back_from_v6_to_v4(net):  # noqa: F811
    """dual.test has ::1 and 127.0.0.1; only IPv4 listens: the IPv6 attempt is refused, the
    IPv4 one connects, as CPython's create_connection does on any OS."""
    import socket as stdlib_socket
    from bitsnet import dns
    v4 = host.socket(host.AF_INET, host.SOCK_STREAM)
    v4.bind(("127.0.0.1", 0))
    v4.listen(1)
    v4.settimeout(TIMEOUT)
    port = v4.getsockname()[1]
    thread = serve_once(v4, b"via ipv4")
    created = []

    def create_connection(address):
        # socket.create_connection's loop over getaddrinfo, on bitsnet's socket type
        err = None
        for af, kind, proto, _, sockaddr in bs.getaddrinfo(address[0], address[1], 0, bs.SOCK_STREAM):
            sock = bs.socket(af, kind, proto)
            created.append(af)
            try:
                sock.settimeout(TIMEOUT)
                sock.connect(sockaddr)
                return sock
            except bs.error as exc:
                err = exc
                sock.close()
        raise err

    with DnsPeer(NAMES) as peer:
        dns.set_servers(["127.0.0.1"], use_dns4=False)
        dns.DNS_PORT, saved = peer.port, dns.DNS_PORT
        try:
            sock = create_connection(("dual.test", port))
            try:
                assert sock.recv(100) == b"via ipv4"
            finally:
                sock.close()
        finally:
            dns.DNS_PORT = saved
            thread.join(TIMEOUT)
            v4.close()
    assert created == [bs.AF_INET6, bs.AF_INET]
    assert stdlib_socket.create_connection  # the real one is exercised under efirun below


@pytest.mark.machine(ipv6=False)
def test_without_tcp6_af_inet6_is_not_supported(net):  # noqa: F811
    with pytest.raises(bs.error) as info:
        bs.socket(bs.AF_INET6, bs.SOCK_STREAM)
    assert info.value.errno == errno.EAFNOSUPPORT
    with pytest.raises(bs.error) as info:
        bs.socket(bs.AF_INET6, bs.SOCK_DGRAM)
    assert info.value.errno == errno.EAFNOSUPPORT
    assert not bs.has_ipv6
    assert [r[0] for r in bs.getaddrinfo(None, 80, 0, bs.SOCK_STREAM, 0, bs.AI_PASSIVE)] == [bs.AF_INET]
    import bitsnet
    assert all(nic["ipv6"] == [] for nic in bitsnet.interfaces())


@pytest.mark.machine(ipv6_delay=None)
def test_no_router_means_no_global_address_and_a_clear_error(net):  # noqa: F811
    from bitsnet import ipconfig
    with pytest.raises(bs.error) as info:
        ipconfig.ensure_configured6(timeout=0.3)
    assert info.value.errno == errno.EADDRNOTAVAIL and "IPv6" in str(info.value)
    assert all(a.startswith("fe80::") for a in ipconfig.current6().addresses)  # link-local only


@V6
def test_interfaces_report_ipv6_addresses(net):  # noqa: F811
    import bitsnet
    from bitsnet import ipconfig
    ipconfig.ensure_configured6()
    (nic,) = bitsnet.interfaces()
    addresses = dict(nic["ipv6"])
    assert "::1" in addresses and any(a.startswith("fe80::") for a in addresses), nic


FIRMWARE_SERVER = r"""
import socket, sys
try:
    from http.server import HTTPServer, BaseHTTPRequestHandler
except ImportError:
    from BaseHTTPServer import HTTPServer, BaseHTTPRequestHandler

class Server(HTTPServer):
    address_family = socket.AF_INET6

class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello over ipv6 from %s" % (self.client_address[0],)).encode("ascii")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

class DualStack(Server):
    # what http.server's DualStackServer (python -m http.server) does: ask for IPv4 too, and
    # carry on if that cannot be had
    def server_bind(self):
        try:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        except Exception:
            pass
        return Server.server_bind(self)

server = DualStack(("::", 0), Hello)
print("HAS_IPV6 %s" % socket.has_ipv6)
print("DUALSTACK %s" % getattr(socket, "has_dualstack_ipv6", lambda: False)())
print("READY %d" % server.server_address[1])
sys.stdout.flush()
for _ in range(int(sys.argv[1])):
    server.handle_request()
server.server_close()
print("DONE")
"""

FIRMWARE_CLIENT = r"""
import socket, sys
try:
    from urllib.request import urlopen
except ImportError:
    from urllib2 import urlopen
port, udp_port = int(sys.argv[1]), int(sys.argv[2])
print("BODY %s" % urlopen("http://[::1]:%d/index" % port, timeout=10).read().decode("ascii"))
c = socket.create_connection(("::1", port), timeout=10)
print("PEER %s %d" % c.getpeername()[:2])
c.close()
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.settimeout(10)
u.sendto(b"udp6 ping", ("::1", udp_port))
data, source = u.recvfrom(100)
print("UDP %s %s %d" % (data.decode("ascii"), source[0], len(source)))
u.close()
print("DONE")
"""


def write_script(tmpdir, name, text):
    path = tmpdir.join(name)
    path.write(text)
    return str(path)


def test_stdlib_http_server_in_firmware_over_v6(tmpdir):
    """BaseHTTPServer / http.server with address_family AF_INET6 on [::] in the firmware, bound
    as DualStackServer binds (IPV6_V6ONLY 0 refused, ignored); the host's urllib fetches
    http://[::1]:PORT/."""
    try:
        from urllib.request import urlopen
    except ImportError:
        from urllib2 import urlopen
    run = EfiRun(write_script(tmpdir, "server6.py", FIRMWARE_SERVER), [2])
    assert run.expect("HAS_IPV6 ") == ["True"]
    assert run.expect("DUALSTACK ") == ["False"]  # TCP4 and TCP6 are separate EFI stacks
    port = int(run.expect("READY ")[0])
    for _ in range(2):
        assert urlopen("http://[::1]:%d/" % port, timeout=10).read() == b"hello over ipv6 from ::1"
    run.expect("DONE")
    run.finish()


def test_stdlib_urllib_and_udp_from_firmware_over_v6(tmpdir):
    """urllib2 / urllib.request to http://[::1]:PORT/ on the host, socket.create_connection by
    IPv6 literal, and a UDP exchange with a host peer on [::1]."""
    try:
        from http.server import HTTPServer, BaseHTTPRequestHandler
    except ImportError:
        from BaseHTTPServer import HTTPServer, BaseHTTPRequestHandler

    class Server(HTTPServer):
        address_family = host.AF_INET6

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"host page " + self.path.encode("ascii")
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = Server(("::1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    udp = host.socket(host.AF_INET6, host.SOCK_DGRAM)
    udp.bind(("::1", 0))
    udp.settimeout(20)

    def echo():
        try:
            data, source = udp.recvfrom(100)
            udp.sendto(data.upper(), source)
        except (OSError, host.error):
            pass
    echo_thread = threading.Thread(target=echo)
    echo_thread.daemon = True
    echo_thread.start()
    try:
        run = EfiRun(write_script(tmpdir, "client6.py", FIRMWARE_CLIENT), [server.server_address[1],
                                                                             udp.getsockname()[1]])
        assert run.expect("BODY ") == ["host", "page", "/index"]
        assert run.expect("PEER ") == ["::1", str(server.server_address[1])]
        assert run.expect("UDP ") == ["UDP6", "PING", "::1", "4"]
        run.expect("DONE")
        stderr = run.finish()
        ledger = [line for line in stderr.splitlines() if line.startswith("efirun ledger:")]
        assert not ledger or all(item.endswith("=0") for item in ledger[0].split()[2:]), stderr
    finally:
        server.shutdown()
        server.server_close()
        udp.close()


SCENARIOS = r"""
import select, socket, sys
try:
    import socketserver
except ImportError:
    import SocketServer as socketserver

class TcpEcho(socketserver.StreamRequestHandler):
    def handle(self):
        for line in iter(self.rfile.readline, b""):
            self.wfile.write(line.upper())

class UdpEcho(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(data.upper(), self.client_address)

class Tcp6(socketserver.TCPServer):
    address_family = socket.AF_INET6
    allow_reuse_address = True

class Udp6(socketserver.UDPServer):
    address_family = socket.AF_INET6

count = int(sys.argv[1])
server = Tcp6(("::", 0), TcpEcho)
print("READY_TCP %d" % server.server_address[1]); sys.stdout.flush()
for _ in range(count):
    server.handle_request()
server.server_close()

server = Udp6(("::", 0), UdpEcho)
print("READY_UDP %d" % server.server_address[1]); sys.stdout.flush()
for _ in range(count):
    server.handle_request()
server.server_close()

listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
listener.bind(("::", 0))
listener.listen(5)
print("READY_SELECT %d" % listener.getsockname()[1]); sys.stdout.flush()
clients, served = [], 0
while served < count or clients:
    readable, _, _ = select.select([listener] + clients, [], [], 10)
    if not readable:
        break
    for sock in readable:
        if sock is listener:
            clients.append(listener.accept()[0])
            clients[-1].sendall(b"+")  # "you are in": the host sends once all are
            served += 1
            continue
        data = sock.recv(4096)
        if data:
            for other in clients:
                other.sendall(data)
        else:
            clients.remove(sock)
            sock.close()
listener.close()
print("DONE")
"""


def test_stdlib_servers_in_firmware_over_v6(tmpdir):
    """The TCP and UDP issues' server scenarios over IPv6: SocketServer TCP and UDP servers
    with address_family AF_INET6, and a select() chat server on [::], host clients on [::1]."""
    count = 2
    run = EfiRun(write_script(tmpdir, "scenarios6.py", SCENARIOS), [count])
    port = int(run.expect("READY_TCP ")[0])
    for n in range(count):
        client = host.create_connection(("::1", port), timeout=10)
        f = client.makefile("rwb")
        f.write(b"line %d over tcp6\n" % n)
        f.flush()
        assert f.readline() == b"LINE %d OVER TCP6\n" % n
        f.close()
        client.close()
    port = int(run.expect("READY_UDP ")[0])
    udp = host.socket(host.AF_INET6, host.SOCK_DGRAM)
    udp.settimeout(10)
    try:
        for n in range(count):
            udp.sendto(b"datagram %d" % n, ("::1", port))
            data, source = udp.recvfrom(100)
            assert data == b"DATAGRAM %d" % n and source[:2] == ("::1", port)
    finally:
        udp.close()
    port = int(run.expect("READY_SELECT ")[0])
    clients = [host.create_connection(("::1", port), timeout=10) for _ in range(count)]
    try:
        for client in clients:
            assert client.recv(1) == b"+"  # accepted: the message below reaches every client
        clients[0].sendall(b"hello all")
        for client in clients:
            got = b""
            while len(got) < len(b"hello all"):
                chunk = client.recv(100)
                assert chunk, "the firmware closed; its stderr:\n" + "".join(run.stderr)
                got += chunk
            assert got == b"hello all"
    finally:
        for client in clients:
            client.close()
    run.expect("DONE")
    run.finish()
