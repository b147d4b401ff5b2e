"""The one listening port: accepts connections, tells peers from brokers, serves remoting requests.

A connection whose first four bytes are the peer magic goes to the peer links; anything else is a
RocketMQ remoting stream. Remoting requests on one connection run concurrently and are answered as
they complete (the client matches answers by opaque); malformed input closes that connection with
a logged reason and nothing else.
"""

from __future__ import annotations

import errno
import itertools
import logging
from dataclasses import dataclass
from typing import Protocol

import trio

from rmqc.errors import BoundExceeded, ProtocolError, RmqcError
from rmqc.remoting import FrameDecoder, RemotingCommand, encode

from ._config import PEER_MAGIC, NodeConfig
from ._peers import PeerLinks

log = logging.getLogger("rmqc.node.server")

RECEIVE_CHUNK_BYTES = 64 * 1024
# Requests of one connection handled at once; at the bound we stop reading that connection, which
# pushes back on the client through TCP instead of queueing without limit.
MAX_IN_FLIGHT_PER_CONNECTION = 1024
# A client that does not read its answers may block our writes; give up on it after this long.
SEND_TIMEOUT_S = 10.0
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_S = 0.1
# Bytes that must arrive before we can tell a peer from a broker; a silent client is dropped after.
FIRST_BYTES_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Channel:
    """One broker-side connection; liveness ties heartbeats to it so a close is noticed at once."""

    id: int
    remote: str


class RequestHandler(Protocol):
    async def handle_request(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None: ...

    def on_channel_closed(self, channel: Channel) -> None: ...


def _never_inline(_request: RemotingCommand, _channel: Channel) -> bool:
    return False


class Server:
    def __init__(self, config: NodeConfig, handler: RequestHandler, peers: PeerLinks) -> None:
        self._config = config
        self._handler = handler
        # Optional fast path of a handler: `handle_oneway_now(request, channel) -> bool` serves a
        # one-way request synchronously (True) so the reader needs no task for it (heartbeats).
        self.handle_oneway_now = getattr(handler, "handle_oneway_now", _never_inline)
        self._peers = peers
        self._channel_ids = itertools.count(1)
        self.open_connections = 0
        self.refused_connections = 0
        self.protocol_errors = 0
        self.requests_in_flight = 0

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
                if self.open_connections >= self._config.max_connections:
                    self.refused_connections += 1
                    log.warning("refusing connection: %d open (max_connections)", self.open_connections)
                    await trio.aclose_forcefully(stream)
                    continue
                self.open_connections += 1
                nursery.start_soon(self._serve_connection, stream)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            first = await _receive_at_least(stream, len(PEER_MAGIC))
            if first is None:
                return
            if first[: len(PEER_MAGIC)] == PEER_MAGIC:
                await self._peers.serve_inbound(stream, first)
            else:
                await self._serve_remoting(stream, first)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.open_connections -= 1
            await trio.aclose_forcefully(stream)

    async def _serve_remoting(self, stream: trio.SocketStream, first: bytes) -> None:
        channel = Channel(next(self._channel_ids), _remote_of(stream))
        connection = _RemotingConnection(stream, channel, self._handler, self._config.max_frame_bytes, self)
        try:
            error = await connection.run(first)
            if error is not None:
                self.protocol_errors += 1
                log.warning("closing connection %s from %s: %s", channel.id, channel.remote, error)
        finally:
            self._handler.on_channel_closed(channel)


class _RemotingConnection:
    def __init__(self, stream: trio.SocketStream, channel: Channel, handler: RequestHandler,
                 max_frame_bytes: int, server: Server) -> None:
        self._server = server
        self._stream = stream
        self._channel = channel
        self._handler = handler
        self._decoder = FrameDecoder(max_frame_bytes)
        self._send_lock = trio.Lock()
        self._in_flight = trio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION)
        self._broken = False

    async def run(self, first: bytes) -> RmqcError | None:
        """Serve until the client closes; returns the protocol error that made us close, if any."""
        async with trio.open_nursery() as nursery:
            try:
                await self._read_loop(first, nursery)
            except (ProtocolError, BoundExceeded) as error:
                return error
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return None
            finally:
                # the client is gone (or sent garbage): answers still being computed have no reader
                nursery.cancel_scope.cancel()
        return None

    async def _read_loop(self, data: bytes, nursery: trio.Nursery) -> None:
        while data and not self._broken:
            for command in self._decoder.feed(data):
                if command.is_response:
                    log.debug("ignoring response opaque=%s on server connection", command.opaque)
                    continue
                if command.is_oneway and self._server.handle_oneway_now(command, self._channel):
                    continue
                await self._in_flight.acquire()
                nursery.start_soon(self._answer, command)
            data = await self._stream.receive_some(RECEIVE_CHUNK_BYTES)
        if not self._broken:
            self._decoder.eof()

    async def _answer(self, request: RemotingCommand) -> None:
        self._server.requests_in_flight += 1
        try:
            response = await self._handler.handle_request(request, self._channel)
            if response is not None and not request.is_oneway:
                await self._send(encode(response))
        finally:
            self._server.requests_in_flight -= 1
            self._in_flight.release()

    async def _send(self, frame: bytes) -> None:
        try:
            async with self._send_lock:
                with trio.fail_after(SEND_TIMEOUT_S):
                    await self._stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError) as error:
            log.info("cannot answer on connection %s: %s", self._channel.id, error)
            self._broken = True
            await trio.aclose_forcefully(self._stream)


async def _receive_at_least(stream: trio.SocketStream, count: int) -> bytes | None:
    data = b""
    with trio.move_on_after(FIRST_BYTES_TIMEOUT_S):
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
