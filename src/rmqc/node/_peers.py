"""Peer links over Trio: one outbound connection per peer, inbound connections from the shared port.

Each node dials every other node and writes its own traffic (Raft messages, forwarded requests,
digests) on that outbound connection; what comes back on it is only answers to forwarded requests.
An inbound connection (accepted on the broker port after the `RMQP` handshake) carries the other
node's traffic to us, and we write answers to its forwarded requests back on it. Which links exist,
when one is dialled again and what it writes next are rmqc.peerwire's decisions; here are the
sockets, the tasks and the waiting.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from functools import partial

import trio

from rmqc.config import NodeConfig, Peer
from rmqc.errors import BoundExceeded, ProtocolError
from rmqc.peerwire import (
    RECONNECT_MAX_S,
    RECONNECT_MIN_S,
    STABLE_CONNECTION_S,
    FrameKind,
    LinkTable,
    LinkWrites,
    PeerAuthError,
    PeerFrameDecoder,
    PeerHandler,
    PeerOutbox,
    Reconnection,
    Reply,
    dispatch_frames,
    dispatch_in_slices,
    encode_frame,
    is_refusal,
    link_outbox,
    report_snapshots,
    return_address,
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
CONNECT_TIMEOUT_S = 1.0
# A peer that keeps refusing our handshake (another secret, a REJECT rule) is retried ~10 times a
# second: one line per link this often says so, with how many attempts it stands for.
HANDSHAKE_LOG_EVERY_S = 5.0


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
    live: LinkWrites[trio.abc.Stream] | None = None
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
        self._table: LinkTable[_Link, trio.CancelScope] = LinkTable(config.node_id)
        self._nursery: trio.Nursery | None = None
        others = {peer.id: peer.address for peer in config.peers if peer.id != config.node_id}
        self.set_members(others, member=not config.join)

    @property
    def connected(self) -> set[str]:
        """The peers whose dialled link is up."""
        return self._table.connected

    @property
    def members(self) -> dict[str, str]:
        """The members this node keeps links to (id -> host:port), itself excluded."""
        return self._table.members

    def set_members(self, addresses: Mapping[str, str], *, member: bool = True) -> None:
        """Keep links to exactly the members of `addresses` other than this node, and inbound
        connections from exactly the peers accepted (LinkTable.set_members)."""
        opened, closed, cut = self._table.set_members(addresses, member, self._new_link)
        for link in closed:
            link.scope.cancel()
            log.info("peer %s at %s: link closed (no longer a member at that address)", link.peer.id, link.peer.address)
        for link in opened:
            if self._nursery is not None:
                self._nursery.start_soon(self._link, link, name=f"peer-link-{link.peer.id}")
            log.info("peer %s at %s: link opened", link.peer.id, link.peer.address)
        for scope in cut:
            scope.cancel()

    def _new_link(self, peer_id: str, host: str, port: int) -> _Link:
        return _Link(Peer(peer_id, host, port),
                     link_outbox(self._config.peer_outbox_messages, self._config.max_peer_frame_bytes))

    def send_messages(self, messages: list[Message]) -> None:
        """Queue messages and write them at once where the link's socket takes them: the driver
        may save to disk right after this, and appends must be on their way during that save."""
        queued, unknown = self._table.queue(messages)
        for message in unknown:
            # expected outside the membership (a removed node's last replies); a member's bug else
            log.log(logging.DEBUG if self._table.accepted is None else logging.WARNING,
                    "dropping raft message to unknown peer %s", message.to)
        for link in queued:
            self._write_now(link)

    def _write_now(self, link: _Link) -> None:
        live = link.live
        if live is None or not live.may_write_directly():
            link.wakeup.set()  # not connected, or bytes ahead of these: the task sends
            return
        data, snapshots = link.outbox.take_batch()
        try:
            data = live.encode(data)
        except trio.BrokenResourceError:  # the TLS session failed: Raft resends what is lost here
            report_snapshots(self._handler, snapshots, False)
            link.wakeup.set()  # the link's task meets the failure and reconnects
            return
        try:
            written = os.write(live.fd, data)
        except OSError:
            written = 0  # full or broken: the link's task sends it, or meets the error and reconnects
        if live.wrote_directly(data, written, snapshots):
            report_snapshots(self._handler, snapshots, True)
        else:
            link.wakeup.set()

    def send_control(self, peer_id: str, kind: FrameKind, payload: bytes) -> bool:
        link = self._table.link_to(peer_id)
        if link is None or not link.outbox.put_control(kind, payload):
            return False
        link.wakeup.set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for link in self._table.dialled:
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
        reconnection = Reconnection(min_s=RECONNECT_MIN_S, max_s=RECONNECT_MAX_S, stable_s=STABLE_CONNECTION_S,
                                    random=self._rng.random)
        while True:
            stream, refused = await self._connect(peer)
            if stream is not None:
                started_s = trio.current_time()
                await self._use_connection(link, stream)
                self._link_lost(link)
                if reconnection.connection_lost(trio.current_time() - started_s):
                    continue  # probe at once: a refusal now tells us the process is gone
            else:
                if reconnection.connect_failed(refused):
                    self._handler.on_peer_down(peer.id)
                self._link_lost(link)
            reconnection.waited(cut_short=await self._back_off(link, reconnection.wait_s()))

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
        self._table.link_lost(link)
        self._handler.on_peer_unreachable(link.peer.id)

    async def _connect(self, peer: Peer) -> tuple[trio.SocketStream | None, bool]:
        """A connected stream, or None and whether the peer's port actively refused us."""
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                stream = await trio.open_tcp_stream(peer.host, peer.port)
        except (OSError, trio.TooSlowError) as error:
            log.debug("peer %s at %s unreachable: %s", peer.id, peer.address, error)
            return None, is_refusal(error)
        stream.setsockopt(*_NODELAY)
        return stream, False

    async def _use_connection(self, link: _Link, socket_stream: trio.SocketStream) -> None:
        peer = link.peer
        stream: trio.abc.Stream = socket_stream
        try:
            if self._tls is not None:
                stream = await dial_tls(socket_stream, self._tls)
            rest = await dial(stream, self._config, self._secrets, peer)

            async def reply(kind: FrameKind, payload: bytes) -> None:
                self.send_control(peer.id, kind, payload)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_error, peer, self._read_frames(stream, peer.id, rest, reply),
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
        self._table.link_up(link)
        log.info("peer link to %s (%s) up", link.peer.id, link.peer.address)
        await self._write_outbox(link, _live_link(stream))

    async def _write_outbox(self, link: _Link, writes: LinkWrites[trio.abc.Stream]) -> None:
        link.live = writes
        try:
            await self._send_outbox(link, writes)
        finally:
            link.live = None
            report_snapshots(self._handler, writes.rest_snapshots, False)

    async def _send_outbox(self, link: _Link, writes: LinkWrites[trio.abc.Stream]) -> None:
        while True:
            if writes.idle(link.outbox):
                await link.wakeup.wait()
            link.wakeup = trio.Event()
            data, snapshot_targets = writes.take_next(link.outbox)
            if not data:
                continue
            writes.sending = True
            try:
                await writes.transport.send_all(data)
            except BaseException:
                report_snapshots(self._handler, snapshot_targets, False)
                raise
            finally:
                writes.sending = False
            report_snapshots(self._handler, snapshot_targets, True)

    async def serve_inbound(self, stream: trio.abc.Stream, first_bytes: bytes, remote: str) -> None:
        """Serve a connection whose first bytes were the peer magic; returns when it closes (or when
        its sender leaves the membership). Nothing it sends is decoded before it has proven the
        peer secret for a member id."""
        try:
            try:
                sender_id, rest = await accept(stream, first_bytes, self._config, self._secrets, self._table.accepted)
            except (PeerAuthError, ProtocolError) as error:
                self.refused_peers += 1
                log.warning("refusing peer connection from %s: %s", remote, error)
                return
            with trio.CancelScope() as scope:
                self._table.add_inbound(sender_id, scope)
                try:
                    await self._serve_member(stream, sender_id, rest, remote)
                finally:
                    self._table.drop_inbound(sender_id, scope)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except (ProtocolError, BoundExceeded) as error:
            log.warning("closing inbound peer connection from %s: %s", remote, error)

    async def _serve_member(self, stream: trio.abc.Stream, sender_id: str, rest: bytes, remote: str) -> None:
        link = self._table.dialled_to(sender_id)
        if link is None:
            await self._serve_without_link(stream, sender_id, rest, remote)
            return
        if sender_id not in self.connected:
            link.back.set()
        send_lock = trio.Lock()

        async def reply(kind: FrameKind, payload: bytes) -> None:
            async with send_lock:
                await stream.send_all(encode_frame(kind, payload))

        await self._read_frames(stream, sender_id, rest, reply)

    async def _serve_without_link(self, stream: trio.abc.Stream, sender_id: str, rest: bytes, remote: str) -> None:
        """A member we have no link to dialled us (we are joining): everything for it, Raft replies
        too, is written back on this connection by one writer, until we dial it ourselves."""
        back = self._new_link(sender_id, *return_address(remote))
        self._table.add_return(back)

        async def reply(kind: FrameKind, payload: bytes) -> None:
            if back.outbox.put_control(kind, payload):
                back.wakeup.set()

        try:
            async with trio.open_nursery() as nursery:
                # no direct writes (fd -1): the task is this stream's only writer
                nursery.start_soon(self._until_error, back.peer, self._write_outbox(back, LinkWrites(-1, stream)),
                                   nursery.cancel_scope)
                nursery.start_soon(self._until_error, back.peer, self._read_frames(stream, sender_id, rest, reply),
                                   nursery.cancel_scope)
        finally:
            self._table.drop_return(back)

    async def _read_frames(self, stream: trio.abc.Stream, sender_id: str, rest: bytes, reply: Reply) -> None:
        decoder = PeerFrameDecoder(self._config.max_peer_frame_bytes)
        dispatch_frames(decoder.feed(rest), sender_id, self._handler, reply)
        # a plain socket is read straight (rmqc.node._direct_read); TLS through its stream
        fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        receive = (DirectReader(fd, RECEIVE_CHUNK_BYTES).read if fd >= 0
                   else partial(stream.receive_some, RECEIVE_CHUNK_BYTES))
        while chunk := await receive():
            for _pause in dispatch_in_slices(decoder.feed(chunk), sender_id, self._handler, reply, YIELD_AFTER_BYTES):
                await trio.lowlevel.checkpoint()


def _live_link(stream: trio.abc.Stream) -> LinkWrites[trio.abc.Stream]:
    if isinstance(stream, TlsStream):
        return LinkWrites(stream.fd, stream.transport, stream.encrypt)
    return LinkWrites(stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1, stream)


_NODELAY = (6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY, on: Raft messages are latency-bound, not bulk

