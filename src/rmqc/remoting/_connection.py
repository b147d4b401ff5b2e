"""One server-side remoting connection's decisions, sans-IO in the manner of h11.

The Trio shell (rmqc.node._server) moves the bytes and tells the connection what happened: bytes
received, the client's end, a request started or answered, answer bytes the socket could not take
at once and those it took since. The connection says what to do: the commands to handle, whether to
read on or wait (too many requests in flight, too many answer bytes the client has not read), what
to send next, by when the next frame must arrive, and the named error to close with. No sockets, no
clocks: the shell passes the time in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from rmqc.errors import BoundExceeded
from rmqc.remoting._command import RemotingCommand
from rmqc.remoting._frames import FrameDecoder

__all__ = [
    "MAX_IN_FLIGHT_PER_CONNECTION",
    "MAX_UNSENT_BYTES_PER_CONNECTION",
    "IdleTimeout",
    "RemotingConnection",
    "RequestsInFlightExceeded",
]

# Requests of one connection handled at once; at the bound we stop reading that connection, which
# pushes back on the client through TCP instead of queueing without limit.
MAX_IN_FLIGHT_PER_CONNECTION = 1024
# Answers written but not yet taken by the socket; beyond this we stop reading that connection's
# requests until the client reads (back-pressure through TCP instead of an unbounded queue).
MAX_UNSENT_BYTES_PER_CONNECTION = 4 * 1024 * 1024


class IdleTimeout(BoundExceeded):
    """A remoting connection completed no frame within idle_timeout_ms (silent, or slowloris)."""


class RequestsInFlightExceeded(BoundExceeded):
    """A request was started while MAX_IN_FLIGHT_PER_CONNECTION were in flight (a shell that did not
    wait for `requests_at_bound` to clear)."""


class RemotingConnection:
    """Framing, the in-flight and unsent-bytes bounds, and the idle deadline of one connection.

    Reading: `receive(data)` yields the commands `data` completes (RemotingProtocolError on bad
    input, FrameTooLarge past `max_frame_bytes`), `receive_eof()` raises if the client stopped
    inside a frame. A request is counted in flight by `try_start_request()` when neither bound
    stops reading; else the shell waits while `answers_unread`, then while `requests_at_bound`, and
    calls `start_request()`; `request_done()` says when a slot freed lets it read on. Writing: an
    answer goes straight to the socket unless `sending` (answers are queued before it); what the
    socket does not take is `queue_unsent`, sent in order from `first_unsent()` and `unsent_taken()`.
    The calls of every request are one each (`try_start_request`, `request_done`, `sending` an
    attribute): this is the hot path of every request.
    """

    def __init__(self, max_frame_bytes: int, idle_timeout_s: float, now: float) -> None:
        self._decoder = FrameDecoder(max_frame_bytes)
        self._idle_timeout_s = idle_timeout_s
        self._frame_deadline = now + idle_timeout_s
        self._decoded_at_deadline = 0  # the decoder's decoded_bytes when the deadline was last set
        self._in_flight = 0
        self._unsent: deque[bytes] = deque()  # answer bytes the socket has not taken yet, in order
        self._unsent_bytes = 0
        # Answer bytes are queued: a new answer goes behind them, not straight to the socket.
        self.sending = False

    def receive(self, data: bytes | bytearray) -> Iterator[RemotingCommand]:
        """The commands `data` completes, each decoded as it is asked for (FrameDecoder.iter_feed:
        iterate to the end before the next call)."""
        return self._decoder.iter_feed(data)

    def receive_eof(self) -> None:
        """The client closed: RemotingProtocolError if it stopped inside a frame."""
        self._decoder.eof()

    def frame_deadline(self, now: float) -> float:
        """The time by which the next frame must be complete: `now` + idle_timeout_ms if one was
        completed since the last call, else the deadline already set, so a client that sends
        nothing, or a byte now and then without finishing a frame (slowloris), loses its connection.
        Asked only when the reader is about to wait: a frame completes without any clock read."""
        decoded = self._decoder.decoded_bytes
        if decoded != self._decoded_at_deadline:
            self._decoded_at_deadline = decoded
            self._frame_deadline = now + self._idle_timeout_s
        return self._frame_deadline

    def idle_error(self) -> IdleTimeout:
        """The error to close with once the frame deadline passed."""
        return IdleTimeout(f"no complete frame within {self._idle_timeout_s * 1000:.0f} ms (idle_timeout_ms)")

    @property
    def answers_unread(self) -> bool:
        """More answer bytes wait for the socket than MAX_UNSENT_BYTES_PER_CONNECTION: read no request
        until the client has read them all (the queue is empty) or the connection failed."""
        return self._unsent_bytes > MAX_UNSENT_BYTES_PER_CONNECTION

    @property
    def requests_at_bound(self) -> bool:
        """MAX_IN_FLIGHT_PER_CONNECTION requests are in flight: read no request until one is done."""
        return self._in_flight >= MAX_IN_FLIGHT_PER_CONNECTION

    def try_start_request(self) -> bool:
        """Count a request in flight, True, unless `answers_unread` or `requests_at_bound` stops
        reading (False: the shell waits for them in that order, then calls `start_request`)."""
        if self._unsent_bytes > MAX_UNSENT_BYTES_PER_CONNECTION or self._in_flight >= MAX_IN_FLIGHT_PER_CONNECTION:
            return False
        self._in_flight += 1
        return True

    def start_request(self) -> None:
        """Count a request in flight after waiting (the answers the client had not read are not
        looked at again: it read them all, or the connection failed)."""
        if self._in_flight >= MAX_IN_FLIGHT_PER_CONNECTION:
            raise RequestsInFlightExceeded(f"{self._in_flight} requests in flight on one connection "
                                           f"(MAX_IN_FLIGHT_PER_CONNECTION {MAX_IN_FLIGHT_PER_CONNECTION})")
        self._in_flight += 1

    def request_done(self) -> bool:
        """A request was answered (or dropped); True when this frees the slot a reader stopped at
        the bound waits for."""
        self._in_flight -= 1
        return self._in_flight == MAX_IN_FLIGHT_PER_CONNECTION - 1

    def queue_unsent(self, data: bytes) -> bool:
        """Keep `data` until the socket takes it; True when the queue was empty (start sending it)."""
        self._unsent.append(data)
        self._unsent_bytes += len(data)
        self.sending = True
        return len(self._unsent) == 1

    def first_unsent(self) -> bytes | None:
        """The bytes to send next, None when the socket took everything."""
        return self._unsent[0] if self._unsent else None

    def unsent_taken(self) -> None:
        """The socket took all of `first_unsent()`."""
        self._unsent_bytes -= len(self._unsent.popleft())
        self.sending = bool(self._unsent)

    def drop_unsent(self) -> None:
        """The connection failed: nothing more will be sent, and nothing is left for the client to read."""
        self._unsent.clear()
        self._unsent_bytes = 0
        self.sending = False
