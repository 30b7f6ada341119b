"""A TCP connection's life as bitsnet sees it: the states, the events that move them, and what
each state means for select() -- one table each, read by ``tcp.TcpEndpoint``.

The states are RFC 793's, spelled as EDK2's ``EFI_TCP4_CONNECTION_STATE`` spells them
(``Tcp4StateSynSent`` -> ``SYN_SENT = "SynSent"``; docs/edk2.md sections 3.1 and 3.5), as far as
bitsnet can observe them through the API -- it sees tokens complete, not segments:

* SynReceived is never seen: EDK2 hands an accepted connection over in Established.
* FinWait2 is not told from FinWait1, nor TimeWait from Closing: bitsnet only sees its Close
  token complete, when the child is back in Closed (docs/edk2.md section 3.3 Close).

Four states are bitsnet's own, each for something a socket must answer that RFC 793 folds into
Closed: ``Bound`` (bind() configured the child passively, which EDK2 reports as Listen),
``Failed`` (the connect failed; its error is pending and a new connect may start over),
``Reset`` (an established connection was lost -- RST, timeout, abort, a firmware error;
buffered data is still returned) and ``Destroyed`` (DestroyChild: the child is gone).

::

                     bind               listen
          Closed -----------> Bound -----------> Listen    (and Closed --listen--> Listen)
            |  |                |
            |  | connect        | connect
            |  `------------> SynSent --refused, timeout--> Failed --disconnect--> Closed
            |                   |
            | accepted          | established
            v                   v
          Established <---------'
            |
            +--fin--> CloseWait --close--> LastAck
            | close
            v
          FinWait1 --fin--> Closing

          Established, CloseWait, FinWait1, Closing, LastAck, Reset --reset--> Reset
          every state --destroy--> Destroyed

What stays outside the machine, because it is orthogonal to the connection's life: SHUT_RD (the
user's, kept in Python: ``_rd_shut``), SHUT_WR asked before the connection is up
(``_wr_shut``: applied as ``close`` once it is), and the user's close() of the socket
(``_user_closed``: the background close then runs the machine on).
"""

# --- states (docs/edk2.md section 3.5) ----------------------------------------------------------
CLOSED = "Closed"  # nothing configured for a peer yet (a fresh endpoint)
BOUND = "Bound"  # bitsnet's own: bind() configured the child passively (EDK2 says Listen)
LISTEN = "Listen"  # listen(): Accepts outstanding
SYN_SENT = "SynSent"  # the SYN went out -- or connect_later waits for the address to send it
ESTABLISHED = "Established"  # connected; an accepted connection starts here
CLOSE_WAIT = "CloseWait"  # the peer's FIN came (a Receive ended with EFI_CONNECTION_FIN)
FIN_WAIT_1 = "FinWait1"  # our close: Close(graceful) once the queued data is out (and FinWait2)
CLOSING = "Closing"  # the peer's FIN after our close (and TimeWait: not told apart)
LAST_ACK = "LastAck"  # our close after the peer's FIN
RESET = "Reset"  # bitsnet's own: the connection was lost; EDK2 says Closed
FAILED = "Failed"  # bitsnet's own: the connect failed; its error is pending
DESTROYED = "Destroyed"  # bitsnet's own: DestroyChild (the user closed, or the close finished)

STATES = (CLOSED, BOUND, LISTEN, SYN_SENT, ESTABLISHED, CLOSE_WAIT, FIN_WAIT_1, CLOSING, LAST_ACK, RESET, FAILED,
          DESTROYED)
# A connection whose child may still exchange segments with the peer.
SYNCHRONIZED = (ESTABLISHED, CLOSE_WAIT, FIN_WAIT_1, CLOSING, LAST_ACK)
# connect() succeeded once (getpeername works, connect says EISCONN), whatever happened since.
CONNECTED = SYNCHRONIZED + (RESET,)
# The peer's FIN came: recv returns b"" once the buffer is empty.
FIN_RECEIVED = (CLOSE_WAIT, CLOSING, LAST_ACK)
# Our close is under way: Close(graceful) once the send queue is empty; send raises EPIPE.
FIN_WANTED = (FIN_WAIT_1, CLOSING, LAST_ACK)
# send() may queue data.
MAY_SEND = (ESTABLISHED, CLOSE_WAIT)
# recv raises ENOTCONN.
NOT_CONNECTED = (CLOSED, BOUND, LISTEN, FAILED)

# --- events and transitions ---------------------------------------------------------------------
# (state, event) -> state. Every transition the endpoint makes is here; a missing entry is a bug,
# raised at lookup (``next_state``). The events:
#   bind, listen, connect   the user's calls (connect: the SYN goes out, or waits for the address)
#   accepted                an Accept completed: EDK2's child becomes an endpoint
#   established, refused    the Connect token completed: EFI_SUCCESS, or an error (RST, ICMP...)
#   timeout                 bitsnet's own connect timer ran out (EDK2's is >= 60 s)
#   disconnect              a failed connect is forgotten (Configure(NULL)), as Linux's tcp_disconnect:
#                           when connect() reported it, or a new connect starts (a port the user
#                           bound by number is then bound again: bind)
#   fin                     a Receive ended with EFI_CONNECTION_FIN (docs/edk2.md section 3.6)
#   close                   shutdown(SHUT_WR) or a graceful close(): our FIN after the queued data
#   reset                   the connection is lost: RST, an error, EFI_ABORTED, our abort
#   destroy                 DestroyChild
TRANSITIONS = {
    (CLOSED, "bind"): BOUND,
    (CLOSED, "listen"): LISTEN,
    (BOUND, "listen"): LISTEN,
    (CLOSED, "connect"): SYN_SENT,
    (BOUND, "connect"): SYN_SENT,
    (CLOSED, "accepted"): ESTABLISHED,
    (SYN_SENT, "established"): ESTABLISHED,
    (SYN_SENT, "refused"): FAILED,
    (SYN_SENT, "timeout"): FAILED,
    (FAILED, "disconnect"): CLOSED,
    (ESTABLISHED, "fin"): CLOSE_WAIT,
    (FIN_WAIT_1, "fin"): CLOSING,
    (ESTABLISHED, "close"): FIN_WAIT_1,
    (CLOSE_WAIT, "close"): LAST_ACK,
    # A second close (shutdown then close(), shutdown twice) changes nothing.
    (FIN_WAIT_1, "close"): FIN_WAIT_1,
    (CLOSING, "close"): CLOSING,
    (LAST_ACK, "close"): LAST_ACK,
    (RESET, "close"): RESET,
    # News that comes after the connection is lost or the child destroyed (an orphaned token
    # completing late, docs/architecture.md section 3) changes nothing.
    (RESET, "fin"): RESET,
    (DESTROYED, "fin"): DESTROYED,
    (DESTROYED, "reset"): DESTROYED,
}
for _state in CONNECTED:
    TRANSITIONS[(_state, "reset")] = RESET
for _state in STATES:
    TRANSITIONS[(_state, "destroy")] = DESTROYED
del _state


def next_state(state, event):
    # type: (str, str) -> str
    """The state ``event`` leads to from ``state``; AssertionError if the table has no such entry."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise AssertionError("TcpEndpoint: no transition from %s on %r" % (state, event))


# --- readiness per state (select/poll: can_recv, can_send, hung_up) ----------------------------
# True or False: the answer in that state. None: it depends on the buffers --
#   can_recv: received data, SHUT_RD, a pending error, an accepted connection (Listen), or our
#             Close under way with no Receive outstanding (FinWait1: nothing more can come);
#   can_send: a pending error (send raises it), or room in the send buffer.
# A state in which recv or send would raise at once is ready: the call answers without waiting.
# The user's close() makes every state readable and writable (EBADF), outside this table.
#   state          can_recv  can_send  hung_up   recv with an empty buffer
READINESS = {
    CLOSED: (True, True, False),  # ENOTCONN; send: EPIPE
    BOUND: (True, True, False),  # ENOTCONN; send: EPIPE
    LISTEN: (None, True, False),  # ENOTCONN; accept: an accepted connection or the error
    SYN_SENT: (False, False, False),  # would block
    ESTABLISHED: (None, None, False),  # would block
    CLOSE_WAIT: (True, None, False),  # b"" (the peer's FIN)
    FIN_WAIT_1: (None, True, False),  # would block while the Receive is out (no half-close), then b""
    CLOSING: (True, True, False),  # b""
    LAST_ACK: (True, True, False),  # b""
    RESET: (True, True, True),  # the error once (ECONNRESET...), then b""
    FAILED: (True, True, True),  # the error once, then ENOTCONN
    DESTROYED: (True, True, False),
}
