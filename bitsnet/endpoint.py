"""The endpoint interface: what ``select.py`` and the socket layer ask of an endpoint.

An endpoint is the non-blocking half of a socket: ``tcp.TcpEndpoint`` and ``udp.UdpEndpoint``
over an EFI child, ``socketpair.PairEndpoint`` in memory, and ``tls_socket.TlsEndpoint`` (a TCP
endpoint while TLS runs over it). The socket type in
``_socket.py`` adds descriptors, timeouts and blocking on top; ``select.py`` reads readiness
from the predicates below. ``Endpoint`` declares every member they use, once, as
``selectors.BaseSelector`` declares its own: each raises NotImplementedError until a subclass
provides it. (The readiness properties are plain class attributes or properties in the
subclasses; an endpoint kind that has no use for a member says so in its own override.)

Two rules hold for every member:

* Nothing blocks. A call that cannot be served now returns None ("would block"); a caller that
  must wait does so with ``events.wait_until(predicate, deadline, poll=endpoint.progress)``.
* Errors are ``errors.error`` (socket.error) with a Linux errno, raised once; ``take_error``
  reads the pending one (SO_ERROR) without raising it.
"""


def _abstract(name):
    def member(self, *args, **kwargs):
        raise NotImplementedError("%s.%s" % (type(self).__name__, name))
    member.__name__ = name
    return member


def _abstract_property(name, doc):
    return property(_abstract(name), doc=doc)


class Endpoint(object):
    """The interface; see the module docstring. Subclasses: TcpEndpoint, UdpEndpoint,
    socketpair.PairEndpoint and tls_socket.TlsEndpoint."""

    # No instance dict here: TcpEndpoint keeps __slots__ (select() reads every endpoint on every
    # round, and per-instance dicts outgrow the caches with a thousand endpoints).
    __slots__ = ()

    # --- state, read by select.py and the socket layer (properties or class attributes) ---
    listening = _abstract_property("listening", "True while accepting connections (listen() succeeded).")
    connecting = _abstract_property("connecting", "True while a connect is under way (not yet connected "
                                                  "nor failed).")
    connected = _abstract_property("connected", "True while the endpoint may send: a TCP connection is up; "
                                                "a datagram endpoint until it is closed.")
    closed = _abstract_property("closed", "True once close() was called.")
    never_connected = _abstract_property("never_connected", "A stream endpoint that has not connected, "
                                                            "listened nor failed yet (Linux's TCP_CLOSE "
                                                            "before any connect); False for the others.")
    local_address = _abstract_property("local_address", "The (host, port[, ...]) bound, or None.")
    remote_address = _abstract_property("remote_address", "The connected peer's (host, port[, ...]), or None.")
    read_shut = _abstract_property("read_shut", "shutdown(SHUT_RD) was asked: a stream's recv no longer waits "
                                                "(what is queued, else EOF), and select() calls the socket "
                                                "readable (as Linux).")
    plain_stream = _abstract_property("plain_stream", "The socket layer's sendall/recv of bytes with no flags "
                                                      "may take their fast paths: send() as it is, and "
                                                      "recv_blocking() (docs/performance.md section 7). True for "
                                                      "TcpEndpoint only; the others take the generic way.")

    # --- driving the firmware ----------------------------------------------------------------
    def progress(self):
        """Move the stack on: Poll the NIC (through this endpoint's child, if it has one) and
        consume every completion. Called on every round of every wait; cheap when idle."""
        raise NotImplementedError("%s.progress" % type(self).__name__)

    # --- readiness predicates (select/poll); each consumes this endpoint's completions -------
    def can_recv(self):
        """recv/recvfrom will not return None: data, EOF or an error is there."""
        raise NotImplementedError("%s.can_recv" % type(self).__name__)

    def can_send(self):
        """send/sendto will not return None: room to queue, or it would raise."""
        raise NotImplementedError("%s.can_send" % type(self).__name__)

    def acceptable(self):
        """accept() will not return None (a listener only)."""
        raise NotImplementedError("%s.acceptable" % type(self).__name__)

    def has_error(self):
        """An errno is pending (poll's POLLERR); leaves it pending."""
        raise NotImplementedError("%s.has_error" % type(self).__name__)

    def take_error(self):
        """SO_ERROR: the pending errno (0 if none), cleared by reading it."""
        raise NotImplementedError("%s.take_error" % type(self).__name__)

    def hung_up(self):
        """The connection is gone though recv/send have not said so yet (poll's POLLHUP)."""
        raise NotImplementedError("%s.hung_up" % type(self).__name__)

    # --- addresses and connections -----------------------------------------------------------
    def bind(self, address, deadline=None):
        """Reserve the local address. ``deadline`` (here and below): the socket call's, which the
        waits for the address bring-up keep (docs/architecture.md section 6.4)."""
        raise NotImplementedError("%s.bind" % type(self).__name__)

    def listen(self, backlog):
        """Start accepting connections (stream endpoints)."""
        raise NotImplementedError("%s.listen" % type(self).__name__)

    def accept(self):
        """The next accepted connection as an endpoint, or None (would block)."""
        raise NotImplementedError("%s.accept" % type(self).__name__)

    def connect_start(self, address, deadline=None):
        """Start a stream connect; wait for ``connected`` or ``take_error()``."""
        raise NotImplementedError("%s.connect_start" % type(self).__name__)

    def shutdown(self, how):
        """shutdown(SHUT_RD / SHUT_WR / SHUT_RDWR)."""
        raise NotImplementedError("%s.shutdown" % type(self).__name__)

    def close(self, abort=False):
        """Close now (never blocks); ``abort``: reset instead of a graceful close."""
        raise NotImplementedError("%s.close" % type(self).__name__)

    # --- data ----------------------------------------------------------------------------------
    def recv(self, nbytes, peek=False):
        """Up to ``nbytes`` bytes (b"": EOF), or None (would block)."""
        raise NotImplementedError("%s.recv" % type(self).__name__)

    def recv_into(self, buffer, nbytes=None, peek=False):
        """Bytes copied into ``buffer`` (0: EOF), or None (would block)."""
        raise NotImplementedError("%s.recv_into" % type(self).__name__)

    def send(self, data):
        """How many bytes of ``data`` were queued, or None (would block)."""
        raise NotImplementedError("%s.send" % type(self).__name__)

    # --- options -------------------------------------------------------------------------------
    def set_option(self, name, value):
        """Set a named option ("rcvbuf", "sndbuf", "reuseaddr", ...); KeyError if unknown."""
        raise NotImplementedError("%s.set_option" % type(self).__name__)

    def get_option(self, name):
        """The named option's value; KeyError if unknown."""
        raise NotImplementedError("%s.get_option" % type(self).__name__)


class StreamEndpoint(Endpoint):
    """What a stream endpoint adds (TcpEndpoint, socketpair.PairEndpoint): the connect that
    failed, the connect that waits for an address, urgent data."""

    __slots__ = ()

    failed = _abstract_property("failed", "True once a connect failed (its error is pending; a new connect "
                                          "may start over).")

    def connect_later(self, address):
        """Connect as soon as the local address exists (DHCP, SLAAC still running): the caller
        reports EINPROGRESS now; later progress sends the SYN."""
        raise NotImplementedError("%s.connect_later" % type(self).__name__)

    def disconnect(self):
        """connect() itself reported a failed connect: the endpoint becomes a fresh one, as
        Linux's tcp_disconnect leaves the socket (polls POLLOUT|POLLHUP; a new connect starts
        afresh). Nothing otherwise."""
        raise NotImplementedError("%s.disconnect" % type(self).__name__)

    def send_urgent(self, data):
        """send(MSG_OOB): how many bytes were queued as urgent data, or None (would block)."""
        raise NotImplementedError("%s.send_urgent" % type(self).__name__)

    def recv_blocking(self, nbytes, timeout):
        """recv(``nbytes``) of a socket with ``timeout`` (None: blocking; never 0): the bytes,
        b"" at EOF (or after SHUT_RD with nothing queued), the pending error raised, ``errors.timeout`` when it runs
        out. Asked only where ``plain_stream`` is True."""
        raise NotImplementedError("%s.recv_blocking" % type(self).__name__)


class DatagramEndpoint(Endpoint):
    """What a datagram endpoint adds (UdpEndpoint): addressed sends and receives."""

    __slots__ = ()

    def connect(self, address, deadline=None):
        """Set the default peer (datagrams from others are dropped; send() goes there)."""
        raise NotImplementedError("%s.connect" % type(self).__name__)

    def disconnect(self):
        """connect(AF_UNSPEC): forget the default peer."""
        raise NotImplementedError("%s.disconnect" % type(self).__name__)

    def sendto(self, data, address=None, deadline=None):
        """Queue one datagram to ``address`` (None: the connected peer), or None (would block)."""
        raise NotImplementedError("%s.sendto" % type(self).__name__)

    def recvfrom(self, bufsize, peek=False):
        """(data, address) of the next datagram, or None (would block)."""
        raise NotImplementedError("%s.recvfrom" % type(self).__name__)

    def recvfrom_into(self, buffer, nbytes=None, peek=False):
        """(bytes copied into ``buffer``, address), or None (would block)."""
        raise NotImplementedError("%s.recvfrom_into" % type(self).__name__)

    def pending(self):
        """Datagrams queued (FIONREAD-like count)."""
        raise NotImplementedError("%s.pending" % type(self).__name__)
