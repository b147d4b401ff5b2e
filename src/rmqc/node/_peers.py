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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import trio

from rmqc.config import NodeConfig, Peer
from rmqc.errors import BoundExceeded, ProtocolError
from rmqc.peerwire import (
    MAX_CONTROL_FRAMES,
    RAFT_FRAME_BYTES,
    RAFT_FRAME_ENTRIES,
    FrameKind,
    PeerAuthError,
    PeerFrame,
    PeerFrameDecoder,
    PeerOutbox,
    check_senders,
    decode_messages,
    decode_tagged,
    encode_frame,
)
from rmqc.raft import Message

from ._direct_read import DirectReader
from ._peer_auth import PeerSecrets, accept, dial
from ._ratelog import RateLimitedLog
from ._tls import TlsStream, dial_tls, peer_client_context

log = logging.getLogger("rmqc.node.peers")

RECEIVE_CHUNK_BYTES = 256 * 1024
# The reader lets the node's other tasks run after decoding this many bytes of frames in a row.
YIELD_AFTER_BYTES = 256 * 1024
# Reconnect forever to a configured peer (it is a member), but never faster than every 10 ms nor
# slower than every 100 ms (150 with jitter), so a link that comes back (a restarted peer, a healed
# REJECT partition) carries heartbeats again well inside a follower's election timeout (500 ms at
# the least); at a 500 ms cap the wait alone could reach 750 ms. An attempt costs a refused
# connect, or one waiting CONNECT_TIMEOUT_S: there is one at a time.
RECONNECT_MIN_S = 0.010
RECONNECT_MAX_S = 0.100
CONNECT_TIMEOUT_S = 1.0
# A connection that lived this long was healthy: reconnect at once and reset the backoff. One that
# died sooner (e.g. refused at handshake) is retried with backoff so we never spin.
STABLE_CONNECTION_S = 1.0
# A peer that keeps refusing our handshake (another secret, a REJECT rule) is retried ~10 times a
# second: one line per link this often says so, with how many attempts it stands for.
HANDSHAKE_LOG_EVERY_S = 5.0

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


@dataclass(eq=False, slots=True)
class _Link:
    """Everything of the link to one member; a link task holds its own, so a member removed and
    added again gets fresh state while the old task winds down."""

    peer: Peer
    outbox: PeerOutbox
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    wakeup: trio.Event = field(default_factory=trio.Event)
    # set when a peer we cannot reach dials us: it is up again, so our link stops backing off
    back: trio.Event = field(default_factory=trio.Event)
    live: _LiveLink | None = None
    handshake_failures: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log, HANDSHAKE_LOG_EVERY_S))


class PeerLinks:
    """The links of one node: one dialled link per member of the applied membership other than
    itself (the `peers` option until the replica names the membership: `set_members`), and the
    inbound connections of members that proved the peer secret."""

    def __init__(self, config: NodeConfig, handler: PeerHandler, rng: random.Random) -> None:
        self._config = config
        self._handler = handler
        self._rng = rng
        self._secrets = PeerSecrets(config.peer_secret_file)  # raises ConfigError: the node does not start
        self._tls = peer_client_context(config)  # None: peers dial in plain TCP
        self.refused_peers = 0
        self._links: dict[str, _Link] = {}
        # the ids inbound connections are accepted from; None: any id of the group (a node outside
        # the membership does not know it until the leader's appends bring it)
        self._accepted: frozenset[str] | None = None
        self._inbound: dict[str, set[trio.CancelScope]] = {}
        # members this node has no link to that dialled it (it is outside the membership: joining,
        # or removed and being added again): what goes to them is written back on their connection
        self._returns: dict[str, _Link] = {}
        self._nursery: trio.Nursery | None = None
        self.connected: set[str] = set()
        others = {peer.id: peer.address for peer in config.peers if peer.id != config.node_id}
        self.set_members(others, member=not config.join)

    @property
    def members(self) -> dict[str, str]:
        """The members this node keeps links to (id -> host:port), itself excluded."""
        return {peer_id: link.peer.address for peer_id, link in self._links.items()}

    def set_members(self, addresses: Mapping[str, str], *, member: bool = True) -> None:
        """Keep links to exactly the members of `addresses` other than this node: open links to
        added ones, close the links and inbound connections of removed ones (and of a member whose
        address changed, which is dialled again at the new one). A node that is not a `member`
        (joining, or removed and perhaps added again later) dials no one and accepts any id of its
        group: it learns the membership from the leader that dials it, and answers on that link."""
        wanted = {peer_id: _peer_at(peer_id, address) for peer_id, address in addresses.items()
                  if peer_id != self._config.node_id and member}
        for peer_id, link in list(self._links.items()):
            if wanted.get(peer_id) != link.peer:
                self._close(peer_id, link)
        for peer_id, peer in wanted.items():
            if peer_id not in self._links:
                self._open(peer)
        self._accepted = frozenset(wanted) if member else None
        for peer_id in [peer_id for peer_id in self._inbound if not self._accepts(peer_id)]:
            for scope in self._inbound.pop(peer_id):
                scope.cancel()

    def _new_outbox(self) -> PeerOutbox:
        return PeerOutbox(self._config.peer_outbox_messages, MAX_CONTROL_FRAMES,
                          min(RAFT_FRAME_BYTES, self._config.max_peer_frame_bytes // 2), RAFT_FRAME_ENTRIES)

    def _link_to(self, peer_id: str) -> _Link | None:
        """Where traffic for `peer_id` goes: our link to it, else the connection it opened to us."""
        return self._links.get(peer_id) or self._returns.get(peer_id)

    def _open(self, peer: Peer) -> None:
        link = self._links[peer.id] = _Link(peer, self._new_outbox())
        if self._nursery is not None:
            self._nursery.start_soon(self._link, link, name=f"peer-link-{peer.id}")
        log.info("peer %s at %s: link opened", peer.id, peer.address)

    def _close(self, peer_id: str, link: _Link) -> None:
        del self._links[peer_id]
        link.scope.cancel()
        self.connected.discard(peer_id)
        log.info("peer %s at %s: link closed (no longer a member at that address)", peer_id, link.peer.address)

    def _accepts(self, peer_id: str) -> bool:
        return self._accepted is None or peer_id in self._accepted

    def outbox(self, peer_id: str) -> PeerOutbox:
        link = self._link_to(peer_id)
        if link is None:
            raise KeyError(peer_id)
        return link.outbox

    def send_messages(self, messages: list[Message]) -> None:
        """Queue messages and write them at once where the link's socket takes them: the driver
        may save to disk right after this, and appends must be on their way during that save."""
        targets: dict[str, _Link] = {}
        for message in messages:
            link = self._link_to(message.to)
            if link is None:
                # expected outside the membership (a removed node's last replies); a member's bug else
                log.log(logging.DEBUG if self._accepted is None else logging.WARNING,
                        "dropping raft message to unknown peer %s", message.to)
                continue
            link.outbox.put_message(message)
            targets[message.to] = link
        for link in targets.values():
            self._write_now(link)

    def _write_now(self, link: _Link) -> None:
        live = link.live
        if live is None or live.fd < 0 or live.sending or live.rest:
            link.wakeup.set()  # not connected, or bytes ahead of these: the task sends
            return
        data, snapshots = link.outbox.take_batch()
        try:
            data = live.encode(data)
        except trio.BrokenResourceError:  # the TLS session failed: Raft resends what is lost here
            for target in snapshots:
                self._handler.on_snapshot_sent(target, False)
            link.wakeup.set()  # the link's task meets the failure and reconnects
            return
        try:
            written = os.write(live.fd, data)
        except OSError:
            written = 0  # full or broken: the link's task sends it, or meets the error and reconnects
        if written == len(data):
            for target in snapshots:
                self._handler.on_snapshot_sent(target, True)
            return
        live.rest, live.rest_snapshots = data[written:], snapshots
        link.wakeup.set()

    def send_control(self, peer_id: str, kind: FrameKind, payload: bytes) -> bool:
        link = self._link_to(peer_id)
        if link is None or not link.outbox.put_control(kind, payload):
            return False
        link.wakeup.set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for link in self._links.values():
                    nursery.start_soon(self._link, link, name=f"peer-link-{link.peer.id}")
                task_status.started()
                await trio.sleep_forever()  # open for the links of members added later (set_members)
        finally:
            self._nursery = None

    async def _link(self, link: _Link) -> None:
        with link.scope:  # cancelled when the peer leaves the membership (set_members)
            await self._keep_connected(link)

    async def _keep_connected(self, link: _Link) -> None:
        peer = link.peer
        delay_s = RECONNECT_MIN_S
        was_up = False
        while True:
            stream, refused = await self._connect(peer)
            if stream is not None:
                started_s = trio.current_time()
                await self._use_connection(link, stream)
                was_up = True
                self._link_lost(link)
                if trio.current_time() - started_s >= STABLE_CONNECTION_S:
                    delay_s = RECONNECT_MIN_S
                    continue  # probe at once: a refusal now tells us the process is gone
            else:
                if refused and was_up:
                    was_up = False
                    self._handler.on_peer_down(peer.id)
                self._link_lost(link)
            if await self._back_off(link, delay_s * (0.5 + self._rng.random())):
                delay_s = RECONNECT_MIN_S
            else:
                delay_s = min(RECONNECT_MAX_S, delay_s * 2)

    async def _back_off(self, link: _Link, delay_s: float) -> bool:
        """Wait before reconnecting; True when cut short because the peer dialled us (a restarted
        peer is reached at once, not after up to RECONNECT_MAX_S: our votes and acks travel on
        our own link, so a survivor still backing off from the peer's downtime held up the
        peer's election after a leader kill by up to 0.75 s)."""
        with trio.move_on_after(delay_s):
            await link.back.wait()
        back = link.back.is_set()
        if back:
            link.back = trio.Event()
        return back

    def _link_lost(self, link: _Link) -> None:
        if self._links.get(link.peer.id) is link:
            self.connected.discard(link.peer.id)
        link.outbox.clear_raft()
        self._handler.on_peer_unreachable(link.peer.id)

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

    async def _use_connection(self, link: _Link, socket_stream: trio.SocketStream) -> None:
        peer = link.peer
        stream: trio.abc.Stream = socket_stream
        try:
            if self._tls is not None:
                stream = await dial_tls(socket_stream, self._tls)
            rest = await dial(stream, self._config, self._secrets, peer)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_error, peer, self._read_answers(peer, stream, rest),
                                   nursery.cancel_scope)
                nursery.start_soon(self._until_error, peer, self._write_loop(link, stream), nursery.cancel_scope)
        except (PeerAuthError, trio.TooSlowError) as error:
            link.handshake_failures.warning("peer link to %s not established: %s", peer.id,
                                            error or "TLS handshake timed out")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ProtocolError) as error:
            link.handshake_failures.log(logging.INFO, "peer link to %s lost during the handshake: %s", peer.id, error)
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

    async def _write_loop(self, link: _Link, stream: trio.abc.Stream) -> None:
        self.connected.add(link.peer.id)
        log.info("peer link to %s (%s) up", link.peer.id, link.peer.address)
        live = link.live = _live_link(stream)
        try:
            await self._write_outbox(link, live)
        finally:
            link.live = None
            for target in live.rest_snapshots:
                self._handler.on_snapshot_sent(target, False)

    async def _write_outbox(self, link: _Link, live: _LiveLink) -> None:
        outbox = link.outbox
        while True:
            if not live.rest and not len(outbox):
                await link.wakeup.wait()
            link.wakeup = trio.Event()
            if live.rest:
                data, snapshot_targets = live.rest, live.rest_snapshots
                live.rest, live.rest_snapshots = b"", []
            else:
                data, snapshot_targets = outbox.take_batch()
                data = live.encode(data) if data else data
            if not data:
                continue
            live.sending = True
            try:
                await live.transport.send_all(data)
            except BaseException:
                for target in snapshot_targets:
                    self._handler.on_snapshot_sent(target, False)
                raise
            finally:
                live.sending = False
            for target in snapshot_targets:
                self._handler.on_snapshot_sent(target, True)

    async def _read_answers(self, peer: Peer, stream: trio.abc.Stream, rest: bytes) -> None:
        async def reply(kind: FrameKind, payload: bytes) -> None:
            self.send_control(peer.id, kind, payload)

        decoder = PeerFrameDecoder(self._config.max_peer_frame_bytes)
        self._dispatch(decoder.feed(rest), peer.id, reply)
        await read_peer_frames(stream, decoder, peer.id, self._handler, reply)

    async def serve_inbound(self, stream: trio.abc.Stream, first_bytes: bytes, remote: str) -> None:
        """Serve a connection whose first bytes were the peer magic; returns when it closes (or when
        its sender leaves the membership). Nothing it sends is decoded before it has proven the
        peer secret for a member id."""
        try:
            try:
                sender_id, rest = await accept(stream, first_bytes, self._config, self._secrets, self._accepted)
            except (PeerAuthError, ProtocolError) as error:
                self.refused_peers += 1
                log.warning("refusing peer connection from %s: %s", remote, error)
                return
            with trio.CancelScope() as scope:
                self._inbound.setdefault(sender_id, set()).add(scope)
                try:
                    await self._serve_member(stream, sender_id, rest, remote)
                finally:
                    self._inbound.get(sender_id, set()).discard(scope)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except (ProtocolError, BoundExceeded) as error:
            log.warning("closing inbound peer connection from %s: %s", remote, error)

    async def _serve_member(self, stream: trio.abc.Stream, sender_id: str, rest: bytes, remote: str) -> None:
        link = self._links.get(sender_id)
        if link is None:
            await self._serve_without_link(stream, sender_id, rest, remote)
            return
        if sender_id not in self.connected:
            link.back.set()
        send_lock = trio.Lock()

        async def reply(kind: FrameKind, payload: bytes) -> None:
            async with send_lock:
                await stream.send_all(encode_frame(kind, payload))

        await self._read_inbound(stream, sender_id, rest, reply)

    async def _serve_without_link(self, stream: trio.abc.Stream, sender_id: str, rest: bytes, remote: str) -> None:
        """A member we have no link to dialled us (we are joining): everything for it, Raft replies
        too, is written back on this connection by one writer, until we dial it ourselves."""
        host, _colon, port = remote.rpartition(":")
        back = self._returns[sender_id] = _Link(Peer(sender_id, host, int(port) if port.isdigit() else 0),
                                               self._new_outbox())

        async def reply(kind: FrameKind, payload: bytes) -> None:
            if back.outbox.put_control(kind, payload):
                back.wakeup.set()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_error, back.peer, self._write_back(back, stream), nursery.cancel_scope)
                nursery.start_soon(self._until_error, back.peer, self._read_inbound(stream, sender_id, rest, reply),
                                   nursery.cancel_scope)
        finally:
            if self._returns.get(sender_id) is back:
                del self._returns[sender_id]

    async def _write_back(self, back: _Link, stream: trio.abc.Stream) -> None:
        live = back.live = _LiveLink(-1, stream)  # no direct writes: this task is the stream's only writer
        try:
            await self._write_outbox(back, live)
        finally:
            back.live = None

    async def _read_inbound(self, stream: trio.abc.Stream, sender_id: str, rest: bytes, reply: Reply) -> None:
        decoder = PeerFrameDecoder(self._config.max_peer_frame_bytes)
        self._dispatch(decoder.feed(rest), sender_id, reply)
        await read_peer_frames(stream, decoder, sender_id, self._handler, reply)

    def _dispatch(self, frames: list[PeerFrame], sender: str, reply: Reply) -> None:
        dispatch_frames(frames, sender, self._handler, reply)


def _peer_at(peer_id: str, address: str) -> Peer:
    host, _colon, port = address.rpartition(":")
    return Peer(peer_id, host, int(port))


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
    # a plain socket is read straight (rmqc.node._direct_read); TLS through its stream
    fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1
    receive = (DirectReader(fd, RECEIVE_CHUNK_BYTES).read if fd >= 0
               else partial(stream.receive_some, RECEIVE_CHUNK_BYTES))
    while True:
        chunk = await receive()
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
