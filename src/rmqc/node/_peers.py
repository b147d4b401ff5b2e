"""Peer links over Trio: one outbound connection per peer, inbound connections from the shared port.

Each node dials every other node and writes its own traffic (Raft messages, forwarded requests,
digests) on that outbound connection; what comes back on it is only answers to forwarded requests.
An inbound connection (accepted on the broker port after the `RMQP` handshake) carries the other
node's traffic to us, and we write answers to its forwarded requests back on it.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from rmqc.errors import BoundExceeded, ProtocolError
from rmqc.raft._types import Message

from ._config import NodeConfig, Peer
from ._outbox import PeerOutbox
from ._peer_auth import PeerAuthError, PeerSecrets, accept, check_senders, dial
from ._peer_codec import (
    FrameKind,
    PeerFrame,
    PeerFrameDecoder,
    decode_messages,
    decode_tagged,
    encode_frame,
)
from ._tls import TlsStream, dial_tls, peer_client_context

log = logging.getLogger("rmqc.node.peers")

RECEIVE_CHUNK_BYTES = 256 * 1024
# Raft messages are batched into frames of at most this many bytes and entries (a message larger
# than that, e.g. a snapshot, goes alone): the receiver decodes a frame in one go, so a frame must
# stay a few milliseconds of work whatever the sender has queued.
RAFT_FRAME_BYTES = 512 * 1024
RAFT_FRAME_ENTRIES = 4096
# The reader lets the node's other tasks run after decoding this many bytes of frames in a row.
YIELD_AFTER_BYTES = 256 * 1024
# Control frames per peer: forwarded requests are additionally bounded by the node's pending-request
# bound; this only stops a stalled link from growing without limit.
MAX_CONTROL_FRAMES = 8192
# Reconnect forever to a configured peer (it is a member), but never faster than every 10 ms nor
# slower than every 500 ms, so a restarted peer is reached again well inside an election timeout.
RECONNECT_MIN_S = 0.010
RECONNECT_MAX_S = 0.500
CONNECT_TIMEOUT_S = 1.0
# A connection that lived this long was healthy: reconnect at once and reset the backoff. One that
# died sooner (e.g. refused at handshake) is retried with backoff so we never spin.
STABLE_CONNECTION_S = 1.0

Reply = Callable[[FrameKind, bytes], Awaitable[None]]


class PeerHandler(Protocol):
    """What the node does with peer traffic. Called from link tasks; must not block for long."""

    def on_raft_messages(self, sender: str, messages: list[Message]) -> None: ...

    def raft_term(self) -> int:
        """The node's current term: appends of older terms are decoded without their entries."""
        ...

    def on_forward_request(self, sender: str, tag: int, frame: bytes, reply: Reply) -> None: ...

    def on_forward_response(self, sender: str, tag: int, frame: bytes) -> None: ...

    def on_digest(self, sender: str, payload: bytes) -> None: ...

    def on_peer_unreachable(self, peer_id: str) -> None: ...

    def on_peer_down(self, peer_id: str) -> None:
        """The peer's connection was lost and its port now refuses connections: its process is
        gone (not merely slow or partitioned)."""
        ...

    def on_snapshot_sent(self, peer_id: str, ok: bool) -> None: ...


def _unchanged(data: bytes) -> bytes:
    return data


@dataclass(slots=True)
class _LiveLink:
    """The writing side of a connected link: bytes for the socket are `encode(batch)` (encrypted
    under TLS, as they are made, so in order), written straight to `fd` or sent through
    `transport`. `rest` is what the socket did not take from a direct write; it goes out first,
    from the link's task, before anything else of this peer."""

    fd: int  # -1: a stream without a socket of its own (tests); everything goes through the task
    transport: trio.abc.Stream
    encode: Callable[[bytes], bytes] = _unchanged
    sending: bool = False  # the link's task is inside send_all: nothing may be written around it
    rest: bytes = b""
    rest_snapshots: list[str] = field(default_factory=list)


class PeerLinks:
    def __init__(self, config: NodeConfig, handler: PeerHandler, rng: random.Random) -> None:
        self._config = config
        self._handler = handler
        self._rng = rng
        self._secrets = PeerSecrets(config.peer_secret_file)  # raises ConfigError: the node does not start
        self._tls = peer_client_context(config)  # None: peers dial in plain TCP
        self.refused_peers = 0
        self._peers = [peer for peer in config.peers if peer.id != config.node_id]
        self._outboxes = {
            peer.id: PeerOutbox(config.peer_outbox_messages, MAX_CONTROL_FRAMES,
                                min(RAFT_FRAME_BYTES, config.max_peer_frame_bytes // 2), RAFT_FRAME_ENTRIES)
            for peer in self._peers
        }
        self._wakeups = {peer.id: trio.Event() for peer in self._peers}
        # set when a peer we cannot reach dials us: it is up again, so our link stops backing off
        self._peer_back = {peer.id: trio.Event() for peer in self._peers}
        self._live: dict[str, _LiveLink] = {}
        self.connected: set[str] = set()

    def outbox(self, peer_id: str) -> PeerOutbox:
        return self._outboxes[peer_id]

    def send_messages(self, messages: list[Message]) -> None:
        """Queue messages and write them at once where the link's socket takes them: the driver
        may save to disk right after this, and appends must be on their way during that save."""
        targets = set()
        for message in messages:
            outbox = self._outboxes.get(message.to)
            if outbox is None:
                log.warning("dropping raft message to unknown peer %s", message.to)
                continue
            outbox.put_message(message)
            targets.add(message.to)
        for peer_id in targets:
            self._write_now(peer_id)

    def _write_now(self, peer_id: str) -> None:
        link = self._live.get(peer_id)
        if link is None or link.fd < 0 or link.sending or link.rest:
            self._wakeups[peer_id].set()  # not connected, or bytes ahead of these: the task sends
            return
        data, snapshots = self._outboxes[peer_id].take_batch()
        try:
            data = link.encode(data)
        except trio.BrokenResourceError:  # the TLS session failed: Raft resends what is lost here
            for target in snapshots:
                self._handler.on_snapshot_sent(target, False)
            self._wakeups[peer_id].set()  # the link's task meets the failure and reconnects
            return
        try:
            written = os.write(link.fd, data)
        except OSError:
            written = 0  # full or broken: the link's task sends it, or meets the error and reconnects
        if written == len(data):
            for target in snapshots:
                self._handler.on_snapshot_sent(target, True)
            return
        link.rest, link.rest_snapshots = data[written:], snapshots
        self._wakeups[peer_id].set()

    def send_control(self, peer_id: str, kind: FrameKind, payload: bytes) -> bool:
        outbox = self._outboxes.get(peer_id)
        if outbox is None or not outbox.put_control(kind, payload):
            return False
        self._wakeups[peer_id].set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for peer in self._peers:
                nursery.start_soon(self._link, peer, name=f"peer-link-{peer.id}")
            task_status.started()

    async def _link(self, peer: Peer) -> None:
        delay_s = RECONNECT_MIN_S
        was_up = False
        while True:
            stream, refused = await self._connect(peer)
            if stream is not None:
                started_s = trio.current_time()
                await self._use_connection(peer, stream)
                was_up = True
                self._link_lost(peer)
                if trio.current_time() - started_s >= STABLE_CONNECTION_S:
                    delay_s = RECONNECT_MIN_S
                    continue  # probe at once: a refusal now tells us the process is gone
            else:
                if refused and was_up:
                    was_up = False
                    self._handler.on_peer_down(peer.id)
                self._link_lost(peer)
            if await self._back_off(peer, delay_s * (0.5 + self._rng.random())):
                delay_s = RECONNECT_MIN_S
            else:
                delay_s = min(RECONNECT_MAX_S, delay_s * 2)

    async def _back_off(self, peer: Peer, delay_s: float) -> bool:
        """Wait before reconnecting; True when cut short because the peer dialled us (a restarted
        peer is reached at once, not after up to RECONNECT_MAX_S: our votes and acks travel on
        our own link, so a survivor still backing off from the peer's downtime held up the
        peer's election after a leader kill by up to 0.75 s)."""
        with trio.move_on_after(delay_s):
            await self._peer_back[peer.id].wait()
        back = self._peer_back[peer.id].is_set()
        if back:
            self._peer_back[peer.id] = trio.Event()
        return back

    def _link_lost(self, peer: Peer) -> None:
        self.connected.discard(peer.id)
        self._outboxes[peer.id].clear_raft()
        self._handler.on_peer_unreachable(peer.id)

    async def _connect(self, peer: Peer) -> tuple[trio.SocketStream | None, bool]:
        """A connected stream, or None and whether the peer's port actively refused us."""
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                stream = await trio.open_tcp_stream(peer.host, peer.port)
        except (OSError, trio.TooSlowError) as error:
            log.debug("peer %s at %s unreachable: %s", peer.id, peer.address, error)
            return None, _is_refusal(error)
        stream.setsockopt(*_NODELAY)
        return stream, False

    async def _use_connection(self, peer: Peer, socket_stream: trio.SocketStream) -> None:
        stream: trio.abc.Stream = socket_stream
        try:
            if self._tls is not None:
                stream = await dial_tls(socket_stream, self._tls)
            rest = await dial(stream, self._config, self._secrets, peer)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_error, peer, self._read_answers(peer, stream, rest),
                                   nursery.cancel_scope)
                nursery.start_soon(self._until_error, peer, self._write_loop(peer, stream), nursery.cancel_scope)
        except (PeerAuthError, trio.TooSlowError) as error:
            log.warning("peer link to %s not established: %s", peer.id, error or "TLS handshake timed out")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ProtocolError) as error:
            log.info("peer link to %s lost during the handshake: %s", peer.id, error)
        finally:
            await trio.aclose_forcefully(stream)

    async def _until_error(self, peer: Peer, work: Awaitable[None], scope: trio.CancelScope) -> None:
        """Run one half of a link; when either half ends or fails, the whole connection is closed."""
        try:
            await work
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            log.info("peer link to %s lost: %s", peer.id, error)
        except (ProtocolError, BoundExceeded) as error:
            log.warning("peer link to %s closed: %s", peer.id, error)
        finally:
            scope.cancel()

    async def _write_loop(self, peer: Peer, stream: trio.abc.Stream) -> None:
        self.connected.add(peer.id)
        log.info("peer link to %s (%s) up", peer.id, peer.address)
        link = self._live[peer.id] = _live_link(stream)
        try:
            await self._write_outbox(peer, stream, link)
        finally:
            del self._live[peer.id]
            for target in link.rest_snapshots:
                self._handler.on_snapshot_sent(target, False)

    async def _write_outbox(self, peer: Peer, stream: trio.abc.Stream, link: _LiveLink) -> None:
        outbox = self._outboxes[peer.id]
        while True:
            if not link.rest and not len(outbox):
                await self._wakeups[peer.id].wait()
            self._wakeups[peer.id] = trio.Event()
            if link.rest:
                data, snapshot_targets = link.rest, link.rest_snapshots
                link.rest, link.rest_snapshots = b"", []
            else:
                data, snapshot_targets = outbox.take_batch()
                data = link.encode(data) if data else data
            if not data:
                continue
            link.sending = True
            try:
                await link.transport.send_all(data)
            except BaseException:
                for target in snapshot_targets:
                    self._handler.on_snapshot_sent(target, False)
                raise
            finally:
                link.sending = False
            for target in snapshot_targets:
                self._handler.on_snapshot_sent(target, True)

    async def _read_answers(self, peer: Peer, stream: trio.abc.Stream, rest: bytes) -> None:
        async def reply(kind: FrameKind, payload: bytes) -> None:
            self.send_control(peer.id, kind, payload)

        decoder = PeerFrameDecoder(self._config.max_peer_frame_bytes)
        self._dispatch(decoder.feed(rest), peer.id, reply)
        await read_peer_frames(stream, decoder, peer.id, self._handler, reply)

    async def serve_inbound(self, stream: trio.abc.Stream, first_bytes: bytes, remote: str) -> None:
        """Serve a connection whose first bytes were the peer magic; returns when it closes. Nothing
        it sends is decoded before it has proven the peer secret for a member id."""
        try:
            try:
                sender_id, rest = await accept(stream, first_bytes, self._config, self._secrets)
            except (PeerAuthError, ProtocolError) as error:
                self.refused_peers += 1
                log.warning("refusing peer connection from %s: %s", remote, error)
                return
            if sender_id not in self.connected and sender_id in self._peer_back:
                self._peer_back[sender_id].set()
            send_lock = trio.Lock()

            async def reply(kind: FrameKind, payload: bytes) -> None:
                async with send_lock:
                    await stream.send_all(encode_frame(kind, payload))

            decoder = PeerFrameDecoder(self._config.max_peer_frame_bytes)
            self._dispatch(decoder.feed(rest), sender_id, reply)
            await read_peer_frames(stream, decoder, sender_id, self._handler, reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except (ProtocolError, BoundExceeded) as error:
            log.warning("closing inbound peer connection from %s: %s", remote, error)

    def _dispatch(self, frames: list[PeerFrame], sender: str, reply: Reply) -> None:
        dispatch_frames(frames, sender, self._handler, reply)


def _live_link(stream: trio.abc.Stream) -> _LiveLink:
    if isinstance(stream, TlsStream):
        return _LiveLink(stream.fd, stream.transport, stream.encrypt)
    return _LiveLink(stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1, stream)


def _is_refusal(error: BaseException) -> bool:
    """open_tcp_stream wraps per-address failures; a refusal on every address means no listener."""
    if isinstance(error, ConnectionRefusedError):
        return True
    causes = getattr(error.__cause__, "exceptions", None)
    if not causes:
        return False
    return all(isinstance(cause, ConnectionRefusedError) for cause in causes)


_NODELAY = (6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY, on: Raft messages are latency-bound, not bulk


async def read_peer_frames(
    stream: trio.abc.Stream, decoder: PeerFrameDecoder, sender: str, handler: PeerHandler, reply: Reply
) -> None:
    while True:
        chunk = await stream.receive_some(RECEIVE_CHUNK_BYTES)
        if not chunk:
            return
        since_yield = 0
        for frame in decoder.feed(chunk):
            dispatch_frame(frame, sender, handler, reply)
            since_yield += len(frame.payload)
            if since_yield >= YIELD_AFTER_BYTES:
                # a chunk of many frames (a peer's backlog after a pause): the node's other tasks
                # (the driver, heartbeats, client answers) run in between
                await trio.lowlevel.checkpoint()
                since_yield = 0


def dispatch_frames(frames: list[PeerFrame], sender: str, handler: PeerHandler, reply: Reply) -> None:
    for frame in frames:
        dispatch_frame(frame, sender, handler, reply)


def dispatch_frame(frame: PeerFrame, sender: str, handler: PeerHandler, reply: Reply) -> None:
    if frame.kind == FrameKind.RAFT:
        handler.on_raft_messages(sender, check_senders(decode_messages(frame.payload, handler.raft_term()), sender))
    elif frame.kind == FrameKind.FORWARD_REQUEST:
        tag, data = decode_tagged(frame.payload)
        handler.on_forward_request(sender, tag, data, reply)
    elif frame.kind == FrameKind.FORWARD_RESPONSE:
        tag, data = decode_tagged(frame.payload)
        handler.on_forward_response(sender, tag, data)
    else:
        handler.on_digest(sender, frame.payload)
