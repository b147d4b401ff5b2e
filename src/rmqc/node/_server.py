"""The one listening port: accepts connections, tells peers from brokers, serves remoting requests.

What a new connection is (peer, remoting, TLS around either) is rmqc.remoting.classify_opening's
decision, and each remoting connection's bounds, back-pressure and idle deadline are those of a
sans-IO rmqc.remoting.RemotingConnection: this module moves the bytes. Remoting requests on one
connection run concurrently and are answered as they complete (the client matches answers by
opaque); malformed input closes that connection with a logged reason and nothing else.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import trio

from rmqc.acl import Allowed
from rmqc.config import NodeConfig
from rmqc.errors import BoundExceeded, ProtocolError, RmqcError
from rmqc.peerwire import PEER_MAGIC
from rmqc.remoting import (
    IdleTimeout,
    Opening,
    RemotingCommand,
    RemotingConnection,
    classify_opening,
    encode,
    first_bytes_timeout_s,
)

from ._acl import AclGate, host_of
from ._admission import ConnectionAdmission
from ._direct_read import DirectReader
from ._peers import PeerLinks
from ._ratelog import RateLimitedLog
from ._tls import TlsStream, accept_tls, server_context

log = logging.getLogger("rmqc.node.server")

RECEIVE_CHUNK_BYTES = 64 * 1024
# A client that does not read its answers may block our writes; give up on it after this long.
SEND_TIMEOUT_S = 10.0
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_S = 0.1
REFUSAL_LOG_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class Channel:
    """One broker-side connection; liveness ties heartbeats to it so a close is noticed at once."""

    id: int
    remote: str


Respond = Callable[[RemotingCommand | None], None]


class RequestHandler(Protocol):
    """What the port does with the requests it reads: each is taken without a task of its own (no
    task, lock or scheduler round trip per request: the hot path of every request)."""

    def handle_oneway_now(self, request: RemotingCommand, channel: Channel) -> bool:
        """Serve a one-way request at once (True: heartbeats), or leave it to `serve_now` (False)."""
        ...

    def serve_now(self, request: RemotingCommand, channel: Channel, respond: Respond) -> None:
        """Take `request`; `respond(answer)` runs exactly once (None: no answer), now or later."""
        ...

    def on_channel_closed(self, channel: Channel) -> None: ...


class Server:
    def __init__(self, config: NodeConfig, handler: RequestHandler, peers: PeerLinks) -> None:
        self._config = config
        self.handler = handler
        self._peers = peers
        # None: every request is served as it comes (acl_enabled is off, as RocketMQ's default)
        self.acl = AclGate(config) if config.acl_enabled else None
        self._channel_ids = itertools.count(1)
        self._admission = ConnectionAdmission(config)
        self._refusal_log = RateLimitedLog(log, REFUSAL_LOG_EVERY_S)
        self.refused_connections = 0
        self.idle_closed = 0
        self.tls_refused = 0  # failed TLS handshakes, plain connections while tls_mode is enforcing
        self._tls = server_context(config)  # ConfigError (unreadable certificate): the node does not start
        self.protocol_errors = 0
        self.requests_in_flight = 0
        # Connections not read until their client reads its answers (back-pressure, _wait_to_start_request)
        self.connections_waiting_for_reader = 0
        # A graceful stop (ControllerNode.stop_gracefully): no new request is read from any
        # remoting connection; those in flight are still answered. The connections end with the node.
        self.draining = False
        self.idle_timeout_s = config.idle_timeout_ms / 1000
        self._first_bytes_timeout_s = first_bytes_timeout_s(self.idle_timeout_s)

    @property
    def open_connections(self) -> int:
        return self._admission.open

    def refusals(self) -> dict[str, int]:
        """Running totals by reason (the labels of the rmqc_refusals metric)."""
        totals = {"peer_auth": self._peers.refused_peers, "connection_limit": self.refused_connections,
                  "idle_timeout": self.idle_closed, "tls": self.tls_refused}
        if self.acl is not None:
            totals.update({f"acl_{name.lower()}": count for name, count in self.acl.refused.items()})
        return totals

    async def serve(self, listeners: list[trio.SocketListener]) -> None:
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept_loop, listener, nursery)

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as error:
                    if error.errno not in ACCEPT_CAPACITY_ERRNOS:
                        raise
                    # out of file descriptors or memory: keep serving the open connections and
                    # try again shortly, as trio.serve_listeners does
                    log.error("accept failed (%s); retrying in %.1f s", error, ACCEPT_RETRY_S)
                    await trio.sleep(ACCEPT_RETRY_S)
                    continue
                remote = _remote_of(stream)
                refusal = self._admission.admit(host_of(remote))
                if refusal is not None:
                    self.refused_connections += 1
                    self._refusal_log.warning("refusing connection from %s: %s", remote, refusal)
                    await trio.aclose_forcefully(stream)
                    continue
                nursery.start_soon(self._serve_connection, stream, remote)

    async def _serve_connection(self, stream: trio.SocketStream, remote: str) -> None:
        try:
            first = await _receive_at_least(stream, len(PEER_MAGIC), self._first_bytes_timeout_s)
            if first is None:
                return
            opening = classify_opening(first, PEER_MAGIC, self._config.tls_mode)
            served: trio.SocketStream | TlsStream = stream
            if opening is Opening.PLAIN_REFUSED:
                self.tls_refused += 1
                self._refusal_log.warning("refusing plain connection from %s: tls_mode is enforcing", remote)
                return
            if opening is Opening.TLS:
                opened = await self._open_tls(stream, first, remote)
                if opened is None:
                    return
                served, first = opened
                opening = classify_opening(first, PEER_MAGIC)
            if opening is Opening.PEER:
                await self._peers.serve_inbound(served, first, remote)
            else:
                await self._serve_remoting(served, first, remote)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self._admission.release(host_of(remote))
            await trio.aclose_forcefully(stream)

    async def _open_tls(self, stream: trio.SocketStream, first: bytes,
                        remote: str) -> tuple[TlsStream, bytes] | None:
        """The TLS stream of a connection that opened with a handshake record, and its first
        plaintext bytes; None for a failed handshake or a silent client."""
        assert self._tls is not None  # classify_opening says TLS only when tls_mode is not disabled
        try:
            tls = await accept_tls(stream, first, self._tls)
        except (trio.BrokenResourceError, trio.TooSlowError) as error:
            self.tls_refused += 1
            self._refusal_log.warning("refusing connection from %s: TLS handshake failed: %s", remote,
                                      error.__cause__ or error)
            return None
        inner = await _receive_at_least(tls, len(PEER_MAGIC), self._first_bytes_timeout_s)
        return None if inner is None else (tls, inner)

    async def _serve_remoting(self, stream: trio.SocketStream | TlsStream, first: bytes, remote: str) -> None:
        channel = Channel(next(self._channel_ids), remote)
        connection = _RemotingConnection(stream, channel, self._config.max_frame_bytes, self)
        try:
            error = await connection.run(first)
            if error is not None:
                self.protocol_errors += 1
                self.idle_closed += isinstance(error, IdleTimeout)
                log.warning("closing connection %s from %s: %s", channel.id, channel.remote, error)
        finally:
            self.handler.on_channel_closed(channel)


class _RemotingConnection:
    """One broker connection's socket; its decisions are `self._connection`'s (RemotingConnection).
    Answers are written straight to the non-blocking socket when nothing is queued before them (no
    task, lock or scheduler round trip per answer: the hot path of every request); what the socket
    cannot take at once is queued and sent, in order, by one drain task."""

    def __init__(self, stream: trio.SocketStream | TlsStream, channel: Channel, max_frame_bytes: int,
                 server: Server) -> None:
        self._server = server
        # Plain TCP and TLS alike are read and written on the socket itself (the fast path); TLS
        # decrypts what was read and encrypts what is written, in this task. Queued answers are
        # bytes for the socket (ciphertext under TLS) and leave through the transport, in order.
        self._tls = stream if isinstance(stream, TlsStream) else None
        self._transport = stream.transport if isinstance(stream, TlsStream) else stream
        self._fd = self._transport.socket.fileno()
        self._reader = DirectReader(self._fd, RECEIVE_CHUNK_BYTES, self._wait_readable)
        self._channel = channel
        self._connection = RemotingConnection(max_frame_bytes, server.idle_timeout_s, trio.current_time())
        # set when the connection may let a stopped reader read on (a request done, the queue sent)
        self._resume = trio.Event()
        self._broken = False
        self._nursery: trio.Nursery | None = None
        self._host = host_of(channel.remote)

    async def run(self, first: bytes) -> RmqcError | None:
        """Serve until the client closes; returns the protocol error that made us close, if any."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                await self._read_loop(first)
            except (ProtocolError, BoundExceeded) as error:
                return error
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return None
            finally:
                # the client is gone (or sent garbage): answers that come later have no reader
                self._broken = True
                nursery.cancel_scope.cancel()
        return None

    async def _read_loop(self, data: bytes | bytearray) -> None:
        server, connection, handler = self._server, self._connection, self._server.handler
        while data and not self._broken:
            for command in connection.receive(data):  # each served as decoded, as Java does
                if server.draining:
                    await trio.sleep_forever()  # until the node's end cancels us; answers still go out
                if command.is_response:
                    log.debug("ignoring response opaque=%s on server connection", command.opaque)
                    continue
                if server.acl is not None and not self._admitted(server.acl, command):
                    continue
                if command.is_oneway and handler.handle_oneway_now(command, self._channel):
                    continue
                if not connection.try_start_request():
                    await self._wait_to_start_request()
                server.requests_in_flight += 1
                handler.serve_now(command, self._channel, self._respond_callback(command))
            data = await self._receive()
        if not self._broken:
            connection.receive_eof()

    def _admitted(self, acl: AclGate, command: RemotingCommand) -> bool:
        """Whether the ACL lets `command` through; a refused two-way request is answered here."""
        decision = acl.check(command, self._host)
        if isinstance(decision, Allowed):
            return True
        if decision is not None:
            self._write(encode(decision))
        return False

    async def _receive(self) -> bytes | bytearray:
        """The next bytes from the client (b"" at its end), read straight from the non-blocking
        socket (rmqc.node._direct_read)."""
        while True:
            data = await self._reader.read()
            if self._tls is None or not data:
                return data
            plain = self._tls.decrypt(data)
            if plain or self._tls.closed_by_peer:
                return plain  # b"" after close_notify: the end, as a closed socket
            # an incomplete record: read on (the frame deadline still holds in _wait_readable)

    async def _wait_readable(self) -> None:
        """Wait for bytes, but not past the connection's frame deadline (idle_timeout_ms)."""
        # a CancelScope itself, not move_on_at (a generator context manager around one): this
        # runs before every request a connection reads
        with trio.CancelScope(deadline=self._connection.frame_deadline(trio.current_time())):
            await trio.lowlevel.wait_readable(self._fd)
            return
        raise self._connection.idle_error()

    def _respond_callback(self, request: RemotingCommand) -> Respond:
        def respond(response: RemotingCommand | None) -> None:
            self._server.requests_in_flight -= 1
            if self._connection.request_done():
                self._resume.set()
            if response is not None and not request.is_oneway:
                self._write(encode(response))
        return respond

    def _write(self, frame: bytes) -> None:
        """Write now if the socket takes it and nothing is queued before it; else queue it, in order,
        for the drain task."""
        if self._broken:
            return
        if self._tls is not None:
            try:
                frame = self._tls.encrypt(frame)  # now, in the order the answers are written
            except trio.BrokenResourceError as error:  # the TLS session failed: as a broken socket
                self._fail(error)
                return
        if not self._connection.sending:
            try:
                written = os.write(self._fd, frame)
            except BlockingIOError:
                written = 0
            except OSError as error:
                self._fail(error)
                return
            if written == len(frame):
                return
            frame = frame[written:]
        if self._connection.queue_unsent(frame):
            assert self._nursery is not None
            self._nursery.start_soon(self._drain)

    async def _drain(self) -> None:
        try:
            while (unsent := self._connection.first_unsent()) is not None:
                with trio.fail_after(SEND_TIMEOUT_S):
                    await self._transport.send_all(unsent)
                self._connection.unsent_taken()
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError) as error:
            self._fail(error)
        finally:
            self._resume.set()

    async def _wait_to_start_request(self) -> None:
        """Back-pressure: a client that does not read its answers, or has too many requests in
        flight, gets no more requests read until it has read them or one is answered."""
        connection = self._connection
        if connection.answers_unread:
            self._server.connections_waiting_for_reader += 1
            try:
                while connection.answers_unread:
                    await self._wait_for_resume()
            finally:
                self._server.connections_waiting_for_reader -= 1
        while connection.requests_at_bound:
            await self._wait_for_resume()
        connection.start_request()

    async def _wait_for_resume(self) -> None:
        self._resume = trio.Event()
        await self._resume.wait()

    def _fail(self, error: BaseException) -> None:
        log.info("cannot answer on connection %s: %s", self._channel.id, error)
        self._broken = True
        self._connection.drop_unsent()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()


async def _receive_at_least(stream: trio.abc.Stream, count: int, timeout_s: float) -> bytes | None:
    data = b""
    with trio.move_on_after(timeout_s):
        while len(data) < count:
            chunk = await stream.receive_some(RECEIVE_CHUNK_BYTES)
            if not chunk:
                return None
            data += chunk
        return data
    return None


def _remote_of(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"
