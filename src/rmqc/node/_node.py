"""One controller node: a Trio nursery around the pure parts.

Tasks (all in the node's nursery, all cancelled together on shutdown):
- driver: the only task that touches the RawNode. Each loop it takes every input that arrived
  (ticks, peer messages, proposals from all connections: ONE propose_batch = group commit), then
  handles Ready in the order Raft requires: send what may go early, persist (one LMDB transaction
  + fsync, in the driver: no thread hop), send what had to wait, apply committed entries, complete
  waiting requests (callbacks, no task each), snapshot every N entries, advance.
- ticker: one tick every tick_ms.
- peer links, the listening server, the notifier (1008 fan-out).
- liveness: expiry by deadline; on the leader, dead masters become one batch of election commands.
- digests: a follower forwards its coalesced heartbeat digest to the leader every digest_interval_ms.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import trio

from rmqc.controller import ControllerConfig, ControllerProcessor, NodeInfo, NoReply, Propose, Reply, RequestContext
from rmqc.errors import CompactedError, ProposalDropped, RmqcError, SnapshotOutOfDateError
from rmqc.fsm import ApplyResult, Command, ControllerState, Origin, decode_commands, encode_commands
from rmqc.liveness import BrokerKey, Digest, HeartbeatTable, MassExpiry, StallMeter
from rmqc.raft import Config as RaftConfig
from rmqc.raft import RawNode, decode_conf_change
from rmqc.raft._types import ConfState, Entry, EntryType, Message, MessageType
from rmqc.remoting import (
    LEADER_ONLY_REQUESTS,
    READ_REQUESTS,
    FrameDecoder,
    dumps_properties,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode,
    make_response,
)
from rmqc.storage import (
    FAULT_FILE_ENV,
    LmdbStorage,
    NodeIdentity,
    StorageFullError,
    StorageWriteFailed,
    acquire_node_lock,
    claim_identity,
    open_verified,
)

from ._alarms import DISK_FULL, DISK_FULL_RETRY_MS, DiskFullAlarm
from ._audit import FORWARD_CHANNEL, origin_of, with_origin
from ._clock import monotonic_ms, wall_ms
from ._config import NodeConfig, java_properties_of
from ._notifier import Notifier
from ._operations import OPERATION_REQUESTS, Operations
from ._peer_codec import FrameKind, PeerProtocolError, encode_tagged
from ._peers import PeerLinks, Reply as PeerReply
from ._metrics import KEEP_CURRENT_MASTER, NodeMetrics
from ._reads import ReadPath
from ._server import Channel, Respond, Server
from ._tls import notify_client_context
from ._status import RMQC_NODE_STATUS, handle_status_request

log = logging.getLogger("rmqc.node")

# Requests waiting to enter the log. Beyond this a request is answered SYSTEM_BUSY at once: the
# group commit already batches everything waiting, so a longer queue only adds latency.
MAX_PENDING_PROPOSALS = 65_536
# Requests proposed and not yet answered (each also holds a connection's in-flight slot).
MAX_WAITERS = 262_144
COMMIT_TIMEOUT_REMARK = "java.util.concurrent.TimeoutException: commit wait"
# Peer messages waiting for the driver; Raft tolerates loss, so beyond this they are dropped.
MAX_INBOUND_MESSAGES = 65_536
# Requests forwarded to the leader and not yet answered.
MAX_FORWARDS_IN_FLIGHT = 16_384
# One pass of the driver steps at most this many peer messages, or messages carrying this many
# entries, before it persists, sends and lets the node's other tasks run: a peer's backlog (a
# resumed node's, a catch-up) is worked off in slices, never in one stall (issue 13).
FEED_MESSAGES = 512
FEED_ENTRIES = 4096
# A save (one LMDB transaction + fsync) slower than this is logged: the node answers nothing meanwhile.
SLOW_PERSIST_S = 0.1
# Entries a node's compaction deletes per transaction: each holds the storage's writer lock, which
# the driver's next save waits for; 1,000 take about 1 ms (bench/bench_snapshot_stall.py).
NODE_SWEEP_BATCH_ENTRIES = 1_000
# Keep this many entries behind a snapshot so a briefly lagging follower catches up from the log.
COMPACTION_LAG_ENTRIES = 1_000
_UNREACHABLE = MessageType.UNREACHABLE
_SNAP_STATUS = MessageType.SNAP_STATUS
# The grace period of design.md: the scan for masters that are simply missing from this node's
# liveness table waits until the node has collected heartbeats for one (default) heartbeat timeout,
# so a controller restart or failover never causes mass broker failovers. Masters whose heartbeats
# this node saw expire, or whose connection closed, are acted on at once.
LIVENESS_GRACE_MS = 10_000
NOT_LEADER_REMARK = "The controller is not in leader state"
# One-way requests the reader of a connection serves inline (no task, no request context): their
# handling never awaits. 904 is the hot path: about one per broker per second per node.
INLINE_ONEWAY_REQUESTS = frozenset({RequestCode.BROKER_HEARTBEAT})
# After a leader's process is gone, how long the other survivors give its designated successor to
# win before campaigning themselves (far below an election timeout, far above a vote round trip).
SUCCESSOR_GRACE_MS = 150
# The exit status of a node stopped by a failed write or fsync (sysexits.h EX_IOERR).
EXIT_STORAGE_FAILED = 74
STALL_WARNING_S = 1.0  # a loop stall this long is logged as a warning (shorter ones at debug)


def stop_process_now(message: str) -> NoReturn:
    """A write or fsync failed (not for lack of space): end the process at once, before anything
    else can run. No retry (the kernel may have dropped the pages it had accepted: PostgreSQL's
    fsyncgate), no acknowledgement, no `finally` that writes: a restart recovers from what is
    durable, or refuses with `rmqc log verify`'s finding."""
    log.critical("%s", message)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(EXIT_STORAGE_FAILED)


class RequestFailed(RmqcError):
    """A request could not be completed (not committed in time, leadership lost, node stopping)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


OnApplied = Callable[[list[ApplyResult] | None, "RequestFailed | None"], None]


@dataclass(slots=True)
class _Waiter:
    """A request waiting for its entry to be applied; `on_done` runs exactly once, in the driver
    (results) or wherever it fails (error), and never awaits: no task per waiting request."""

    commands: list[Command]
    deadline_s: float
    on_done: OnApplied
    results: list[ApplyResult] | None = None
    error: RequestFailed | None = None
    finished: bool = False
    index: int = 0
    term: int = 0

    def finish(self, results: list[ApplyResult] | None, error: RequestFailed | None = None) -> None:
        if not self.finished:
            self.finished = True
            self.results, self.error = results, error
            self.on_done(results, error)


class ControllerNode:
    def __init__(self, config: NodeConfig, *, rng: random.Random | None = None,
                 stop_now: Callable[[str], None] = stop_process_now) -> None:
        self.config = config
        self._stop_now = stop_now  # on a failed write or fsync
        self._rng = rng or random.Random()
        self.state = ControllerState()
        self.liveness = HeartbeatTable()
        self.processor = ControllerProcessor(self._controller_config(), self.state, self.liveness)
        self.links = PeerLinks(config, self, self._rng)
        self.notifier = Notifier(notify_client_context(self.config))
        self.server = Server(config, self, self.links)
        self.node_metrics = NodeMetrics()  # Prometheus series of this node (own registry)
        self.storage: LmdbStorage | None = None
        self.raw: RawNode | None = None
        self.leader_id: str | None = None
        self.term = 0
        self.applied_index = 0
        self.serving_as_leader = False  # leader AND an entry of its own term is applied
        self.became_leader_ms = 0
        self.listen_address = config.listen_address
        self._conf_state = ConfState()
        self._snapshot_index = 0
        self._snapshot_in_flight = False  # at most one snapshot write at a time (_take_snapshot)
        self._wakeup = trio.Event()
        self._ticks = 0
        self._inbound: deque[Message] = deque()
        self._inbound_dropped = 0
        self._proposals: list[_Waiter] = []
        self._waiting: dict[int, _Waiter] = {}
        self._by_deadline: deque[_Waiter] = deque()  # every waiter, oldest first (one timeout for all)
        self._forwards: dict[int, _ForwardSlot] = {}
        self._forward_tags = itertools.count(1)
        self._closed_channels: list[BrokerKey] = []
        self._stopping = False
        self.started = trio.Event()
        self._started_ms = monotonic_ms()
        self._liveness_wakeup = trio.Event()
        self._digest_due = trio.Event()  # set when the heartbeat table changed since the last digest
        self._digest_now = trio.Event()  # set when the next digest carries a close: no coalescing
        self.liveness_rounds = 0  # wake-ups of the liveness loop: deadlines, closes, scans
        self.stalls = StallMeter()  # how long this node could not look (forgiven to the brokers)
        self.mass_expiry = MassExpiry()
        self._ticked_s = 0.0  # when the ticker last ran (trio's monotonic clock; set by run)
        self._elections_in_flight = 0
        self.reads = ReadPath(self, self._rng)  # reads at every node and level: _reads.py
        self.operations = Operations(self)  # transfer-leader, snapshot save: _operations.py
        self._node_info_cache: tuple[str | None, NodeInfo] | None = None  # (leader_id, info)
        self._unsaved_hard_state: Any = None  # a commit-only HardState waiting for the next write
        self._sole_voter = False  # the only voter of the group: campaigns without a timeout
        self.disk_full: DiskFullAlarm | None = None  # raised by a write that found no space

    def _controller_config(self) -> ControllerConfig:
        return ControllerConfig.from_properties(dumps_properties(java_properties_of(self.config)))

    # ----- lifecycle -----

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        self._started_ms = monotonic_ms()
        self._ticked_s = trio.current_time()  # a node may be built outside Trio (tests, tools)
        lock = acquire_node_lock(self.config.data_dir)
        try:
            claim_identity(self.config.data_dir, NodeIdentity(self.config.node_id, self.config.group))
            self.storage = await trio.to_thread.run_sync(open_verified, self.config.data_dir)
            if self.storage.fault_hook is not None:
                log.warning("%s: the TEST-ONLY storage fault hook is on (%s=%s): never in production",
                            self.config.node_id, FAULT_FILE_ENV, self.storage.fault_hook.control)
            try:
                self._open_raft()
                await self._serve(task_status)
            finally:
                self._fail_everything("node stopping")
                self._save_unsaved_commit()
                self.storage.close()
        finally:
            lock.release()

    def _save_unsaved_commit(self) -> None:
        """On the way out, the commit index still waiting to ride with the next write is saved, so a
        stopped node's log (and `rmqc log export`) covers everything it saw committed. Synchronous:
        this runs under cancellation, and no other save is in flight once the driver has ended."""
        assert self.storage is not None
        if self._unsaved_hard_state is not None:
            try:
                self.storage.save(self._unsaved_hard_state, [], None)
            except StorageFullError as error:  # Raft learns the commit index again on restart
                log.warning("%s: commit index not saved on the way out: %s", self.config.node_id, error)
            except StorageWriteFailed as error:
                self._storage_failed(error)
            self._unsaved_hard_state = None

    def _open_raft(self) -> None:
        assert self.storage is not None
        hard_state, conf_state = self.storage.initial_state()
        snapshot = self.storage.snapshot()
        if not snapshot.is_empty:
            self.state.restore(snapshot.data)
            self._snapshot_index = snapshot.meta.index
        self.applied_index = snapshot.meta.index
        self.term = hard_state.term
        bootstrap = () if conf_state.voters else self.config.peer_ids
        self._set_conf_state(conf_state if conf_state.voters else ConfState(voters=self.config.peer_ids))
        raft_config = RaftConfig(
            id=self.config.node_id,
            election_tick=self.config.election_tick,
            heartbeat_tick=self.config.heartbeat_tick,
            pre_vote=True,
            check_quorum=True,
            lease_drift_ticks=self.config.lease_drift_ticks,
            lease_ticks=self.config.lease_ticks,
            max_entries_per_msg=self.config.max_entries_per_append,
            max_inflight_msgs=self.config.max_appends_in_flight,
            applied=snapshot.meta.index,
        )
        self.raw = RawNode(raft_config, self.storage, self._rng, peers=bootstrap)
        log.info("%s: term %d, snapshot at %d, log %d..%d", self.config.node_id, hard_state.term,
                 snapshot.meta.index, self.storage.first_index(), self.storage.last_index())

    async def _serve(self, task_status: trio.TaskStatus[str]) -> None:
        peer = self.config.self_peer
        listeners = await trio.open_tcp_listeners(peer.port, host=peer.host)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._driver, name="driver")
            nursery.start_soon(self._ticker, name="ticker")
            await nursery.start(self.links.run)
            await nursery.start(self.notifier.run)
            nursery.start_soon(self._liveness_loop, name="liveness")
            nursery.start_soon(self._digest_loop, name="digests")
            nursery.start_soon(self.server.serve, listeners, name="server")
            self.started.set()
            task_status.started(self.listen_address)

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking work, fail what waits, and give the answers `grace_s` to be written."""
        self._fail_everything("node stopping")
        with trio.move_on_after(grace_s):
            while self.server.requests_in_flight:
                await trio.sleep(0.01)

    def quiescent(self) -> bool:
        """Nothing is waiting to be decided, proposed or committed (tests wait on this)."""
        return not (self._closed_channels or self._proposals or self._waiting or self._elections_in_flight
                    or self._wakeup.is_set() or self._liveness_wakeup.is_set())

    def metrics(self) -> dict[str, float]:
        return {
            "is_leader": float(self.serving_as_leader),
            "term": float(self.term),
            "applied_index": float(self.applied_index),
            "live_brokers": float(len(self.liveness)),
            "broker_groups": float(len(self.state)),
            "open_connections": float(self.server.open_connections),
            "notifications_sent": float(self.notifier.sent),
        }

    def _fail_everything(self, why: str) -> None:
        self._stopping = True
        error = RequestFailed(ResponseCode.SYSTEM_ERROR, why)
        for waiter in [*self._proposals, *self._waiting.values()]:
            waiter.finish(None, error)
        self._proposals.clear()
        self._waiting.clear()
        self.reads.fail_all(why)

    # ----- inputs -----

    def _wake(self) -> None:
        self._wakeup.set()

    async def _ticker(self) -> None:
        interval_s = self.config.tick_ms / 1000
        deadline = trio.current_time()
        while True:
            deadline += interval_s
            await trio.sleep_until(deadline)
            self._note_stall(deadline)
            self._ticked_s = trio.current_time()
            if trio.current_time() - deadline > 10 * interval_s:
                deadline = trio.current_time()  # we were stalled; don't fire a burst of ticks
            self._ticks += 1
            self._wake()

    def on_raft_messages(self, sender: str, messages: list[Message]) -> None:
        for message in messages:
            if len(self._inbound) >= MAX_INBOUND_MESSAGES:
                self._inbound.popleft()
                self._inbound_dropped += 1
            self._inbound.append(message)
        self.reads.heard_from(sender)
        self._wake()

    def on_peer_unreachable(self, peer_id: str) -> None:
        self._inbound.append(Message(type=_UNREACHABLE, to=self.config.node_id, frm=peer_id))
        self._wake()

    def on_peer_down(self, peer_id: str) -> None:
        """The leader's port refuses us: its process is probably gone. Waiting for the election
        timeout would cost two timeouts: the first candidate's pre-vote is refused by the other
        follower, which still counts the dead leader's lease. Instead ONE designated survivor (the
        first in peer order) takes over at once (RawNode.take_over): voters grant although they
        heard the leader lately, every vote rule stays (up-to-date log, one vote per term), and
        the winner commits nothing until the lease the old leader may still hold has run out,
        because "refused" is no proof of death (a REJECT firewall rule, a middlebox's resets, a
        listener closed before the process stops serving). If it cannot win, the timeout runs."""
        if peer_id != self.leader_id:
            return
        self._abandon_forwards()
        if self._successor_of(peer_id) == self.config.node_id:
            log.info("%s: leader %s is down; campaigning at once as its successor", self.config.node_id, peer_id)
            self._take_over_from(peer_id)
        else:
            # the successor may be unable to win (e.g. restarted with a shorter log): if no leader
            # has appeared after a grace period, the others try too, instead of an election timeout
            self._nursery.start_soon(self._take_over_if_still_leaderless, peer_id)

    def _take_over_from(self, dead_leader: str) -> None:
        self._inbound.append(Message(type=MessageType.TIMEOUT_NOW, to=self.config.node_id, frm=dead_leader))
        self._wake()

    async def _take_over_if_still_leaderless(self, dead_leader: str) -> None:
        await trio.sleep(SUCCESSOR_GRACE_MS / 1000)
        if self.leader_id in (None, dead_leader):
            log.info("%s: no leader %d ms after %s went down; campaigning", self.config.node_id,
                     SUCCESSOR_GRACE_MS, dead_leader)
            self._take_over_from(dead_leader)

    def _successor_of(self, peer_id: str) -> str | None:
        return next((node_id for node_id in self.config.peer_ids if node_id != peer_id), None)

    def on_snapshot_sent(self, peer_id: str, ok: bool) -> None:
        self._inbound.append(Message(type=_SNAP_STATUS, to=self.config.node_id, frm=peer_id, reject=not ok))
        self._wake()

    async def propose(self, commands: list[Command]) -> list[ApplyResult]:
        """Enter commands into the log as one entry; returns their apply results once committed."""
        done = trio.Event()
        waiter = self._enqueue(commands, lambda _results, _error: done.set())
        await done.wait()
        if waiter.error is not None:
            raise waiter.error
        assert waiter.results is not None
        return waiter.results

    def _enqueue(self, commands: list[Command], on_done: OnApplied) -> _Waiter:
        """Queue commands for the next append; `on_done` runs once applied, failed or timed out."""
        if len(self._proposals) >= MAX_PENDING_PROPOSALS or len(self._by_deadline) >= MAX_WAITERS:
            raise RequestFailed(ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while")
        if self._stopping:
            raise RequestFailed(ResponseCode.SYSTEM_ERROR, "node stopping")
        if self.disk_full is not None:  # it could not be persisted: refused before it enters the log
            self.disk_full.refused_writes += 1
            raise RequestFailed(ResponseCode.SYSTEM_ERROR, self.disk_full.remark)
        deadline_s = trio.current_time() + self.config.request_timeout_ms / 1000
        waiter = _Waiter(commands, deadline_s, on_done)
        self._proposals.append(waiter)
        self._by_deadline.append(waiter)
        self._wake()
        return waiter

    def _expire_waiters(self) -> None:
        """Fail the requests whose commit did not come within the request timeout (the driver calls
        this every loop; its ticks wake it at least every tick_ms)."""
        queue = self._by_deadline
        if not queue:
            return
        now_s = trio.current_time()
        while queue and (queue[0].finished or queue[0].deadline_s <= now_s):
            waiter = queue.popleft()
            if not waiter.finished:
                self._waiting.pop(waiter.index, None)
                waiter.finish(None, RequestFailed(ResponseCode.SYSTEM_ERROR, COMMIT_TIMEOUT_REMARK))

    # ----- the driver -----

    async def _driver(self) -> None:
        raw = self.raw
        assert raw is not None
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            self._feed(raw)
            while raw.has_ready():
                ready = raw.ready()
                if not await self._handle_ready(raw, ready):
                    # the disk is full: the core offers the same Ready again; the next wake-up (a
                    # tick at the latest) sends what needs no write and tries the write when due
                    self._apply_entries(raw, raw.not_persisted(ready))
                    break
                raw.advance(ready)
                # everything that arrived while we persisted (ticks and peer messages too, or a
                # busy leader would starve its heartbeats) goes into the next Ready: group commit
                self._wakeup = trio.Event()
                self._feed(raw)
                if raw.has_ready():
                    # a run of Readies (a backlog, a catch-up): the peer readers, the server and the
                    # ticker run between two of them, or they would starve (issue 13)
                    await trio.lowlevel.checkpoint()

    def _feed(self, raw: RawNode) -> None:
        ticks, self._ticks = self._ticks, 0
        for _ in range(min(ticks, self.config.election_tick)):
            raw.tick()
        if ticks:
            self.reads.on_ticks_fed(raw.raft.ticks)
        self._step_inbound(raw)
        if self._sole_voter and self.leader_id is None:
            # no one to wait for, so no election timeout before serving: a restarted single-node
            # controller serves once its log is applied (the core refuses before, pitfall 3)
            raw.campaign()
        self.reads.flush(raw)
        self.operations.feed(raw)
        self._expire_waiters()
        self._look_for_space()
        self._feed_proposals(raw)

    def _step_inbound(self, raw: RawNode) -> None:
        """Step one slice of the waiting peer messages (FEED_MESSAGES, FEED_ENTRIES); the rest
        wait for the next pass, which is due at once."""
        messages = entries = 0
        while self._inbound and messages < FEED_MESSAGES and entries < FEED_ENTRIES:
            message = self._inbound.popleft()
            self._step(raw, message)
            messages += 1
            entries += len(message.entries)
        if self._inbound:
            self._wake()

    def raft_term(self) -> int:
        return self.term

    def _step(self, raw: RawNode, message: Message) -> None:
        if message.type == _UNREACHABLE:
            raw.report_unreachable(message.frm)
        elif message.type == _SNAP_STATUS:
            raw.report_snapshot(message.frm, ok=not message.reject)
        elif message.type == MessageType.TIMEOUT_NOW and message.term == 0:
            raw.take_over(message.frm)  # on_peer_down; the core ignores it if another leader is known
        else:
            try:
                raw.step(message)
            except RmqcError as error:
                log.debug("step %s from %s: %s", message.type.name, message.frm, error)

    def _feed_proposals(self, raw: RawNode) -> None:
        if not self._proposals:
            return
        waiting = [waiter for waiter in self._proposals if not waiter.finished]
        if self.config.group_commit or not self.serving_as_leader:
            batch, self._proposals = waiting, []
        elif self._waiting:
            self._proposals = waiting  # single queue: the next request waits for this one's apply
            return
        else:
            batch, self._proposals = waiting[:1], waiting[1:]
        if not batch:
            return
        if not self.serving_as_leader:
            for waiter in batch:
                waiter.finish(None, RequestFailed(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK))
            return
        try:
            raw.propose_batch([encode_commands(waiter.commands) for waiter in batch])
        except ProposalDropped as error:
            for waiter in batch:
                waiter.finish(None, RequestFailed(ResponseCode.SYSTEM_BUSY, f"proposal dropped: {error}"))
            return
        self.node_metrics.observe_append(len(batch))
        first_index = raw.status().last_index - len(batch) + 1
        for offset, waiter in enumerate(batch):
            waiter.index, waiter.term = first_index + offset, self.term
            self._waiting[waiter.index] = waiter

    async def _handle_ready(self, raw: RawNode, ready: Any) -> bool:
        """Everything a Ready asks for, in the order Raft requires; False when its write found the
        disk full: then only its early messages and read states were used (they need no write of
        ours), and nothing that depends on the write was done (no ack sent, nothing applied)."""
        if ready.soft_state is not None:
            self._on_soft_state(ready.soft_state)
        if ready.hard_state is not None:
            self._on_term(ready.hard_state.term)
        self.links.send_messages(list(ready.messages))
        snapshot = ready.snapshot if ready.snapshot is not None and not ready.snapshot.is_empty else None
        # A Ready that only moves the commit index (no entries, term or vote: must_sync is False)
        # carries entries already durable on a quorum: apply them, and so answer the waiting
        # requests, before writing the new commit index instead of after its fsync.
        apply_first = not ready.must_sync and not ready.entries and snapshot is None
        if apply_first:
            self._apply_committed(raw, ready)
            # Nor does the new commit index need an fsync of its own (etcd's MustSync): it rides
            # with the next write. A restart may then find a lower commit index, which Raft learns
            # again; _take_snapshot writes it first so it never lags a snapshot.
            if ready.hard_state is not None:
                self._unsaved_hard_state = ready.hard_state
        elif not self._persist(ready.hard_state, list(ready.entries), snapshot):
            self.reads.on_read_states(ready.read_states)
            return False
        if snapshot is not None:
            self._install_snapshot(snapshot)
        self.links.send_messages(list(ready.persist_messages))
        if not apply_first:
            self._apply_committed(raw, ready)
        if (self.applied_index - self._snapshot_index >= self.config.snapshot_every_entries
                and self.disk_full is None  # a snapshot needs space: taken once writes succeed again
                and not self._snapshot_in_flight):
            self._take_snapshot()
        return True

    def _persist(self, hard_state: Any, entries: list[Entry], snapshot: Any) -> bool:
        """One LMDB transaction + fsync; carries a commit index not yet saved. False: the disk is
        full (nothing was written; tried again once _look_for_space finds room). A write that
        fails for another reason stops the process."""
        hard_state = hard_state or self._unsaved_hard_state
        if hard_state is None and not entries and snapshot is None:
            return True
        assert self.storage is not None
        if self.disk_full is not None:  # until _look_for_space finds room again
            return False
        persist_started_s = trio.current_time()
        # In the driver itself, not a worker thread: the leader sent its appends before this save,
        # so followers persist meanwhile, and a thread hand-off costs two cross-thread wake-ups per
        # write (on two busy cores, each may wait for a time slice) for no overlap worth having.
        try:
            self.storage.save(hard_state, entries, snapshot)
        except StorageFullError as error:
            self._raise_disk_full(error)
            return False
        except StorageWriteFailed as error:
            self._storage_failed(error)
        self._unsaved_hard_state = None
        persist_s = trio.current_time() - persist_started_s
        self.node_metrics.observe_fsync(persist_s)
        if persist_s >= SLOW_PERSIST_S:
            # the whole node waits for this save (it runs in the driver): say so, or a silent node
            # under disk contention looks like a bug in the node
            log.warning("%s: saving %d entries took %.0f ms", self.config.node_id, len(entries), persist_s * 1000)
        return True

    def _look_for_space(self) -> None:
        """While the disk-full alarm is raised, every DISK_FULL_RETRY_MS: is there room for a write
        again? Needed because a refused write never reaches the disk, so when the write that
        failed is not offered again (a snapshot), nothing else would ever find out."""
        alarm = self.disk_full
        if alarm is None or not alarm.retry_due(monotonic_ms()):
            return
        assert self.storage is not None
        try:
            if alarm.needed_bytes is None:
                self.storage.ensure_space()
            else:
                self.storage.ensure_space(alarm.needed_bytes)
        except StorageFullError as error:
            self._raise_disk_full(error)
            return
        except StorageWriteFailed as error:
            self._storage_failed(error)
        self._clear_disk_full()

    def _raise_disk_full(self, error: StorageFullError) -> None:
        now_ms = monotonic_ms()
        if self.disk_full is None:
            self.disk_full = DiskFullAlarm(self.config.node_id, str(self.config.data_dir), str(error), now_ms,
                                           wall_ms(), now_ms)
            log.error("%s: ALARM disk full: %s. Writes are refused (nothing acknowledged is lost), reads and "
                      "heartbeats are served, the write is tried again every %d ms and writes resume by "
                      "themselves once space is freed", self.config.node_id, error, DISK_FULL_RETRY_MS)
            self.node_metrics.set_alarm(DISK_FULL, True)
            self._refuse_queued_proposals(self.disk_full)
        if error.needed_bytes is not None:  # the largest write that found no room: look for that much
            self.disk_full.needed_bytes = max(self.disk_full.needed_bytes or 0, error.needed_bytes)
        self.disk_full.next_retry_mono_ms = now_ms + DISK_FULL_RETRY_MS

    def _clear_disk_full(self) -> None:
        assert self.disk_full is not None
        alarm, self.disk_full = self.disk_full, None
        log.warning("%s: disk space is back after %d ms (%d writes refused meanwhile): writes resume",
                    self.config.node_id, monotonic_ms() - alarm.raised_mono_ms, alarm.refused_writes)
        self.node_metrics.set_alarm(DISK_FULL, False)

    def _refuse_queued_proposals(self, alarm: DiskFullAlarm) -> None:
        """Requests queued but not yet in the log can never be persisted now: refuse them at once
        (those already in the log wait for their commit: space may come back in time)."""
        error = RequestFailed(ResponseCode.SYSTEM_ERROR, alarm.remark)
        alarm.refused_writes += len(self._proposals)
        for waiter in self._proposals:
            waiter.finish(None, error)
        self._proposals.clear()

    def _storage_failed(self, error: StorageWriteFailed) -> NoReturn:
        """Stop at once (`stop_process_now`); should an injected `stop_now` return, the error still
        ends the driver: nothing after the failed write runs."""
        self._stop_now(
            f"{self.config.node_id}: STOPPING: {error}. It is never retried (the kernel may have dropped what "
            f"it had accepted) and nothing after it is acknowledged. Fix the disk, then restart: the node "
            f"recovers from what is durable, or refuses to start; `rmqc log verify {self.config.data_dir}` "
            f"names what is wrong")
        raise error

    def _apply_committed(self, raw: RawNode, ready: Any) -> None:
        self._apply_entries(raw, ready.committed_entries)
        self.reads.on_read_states(ready.read_states)

    def _apply_entries(self, raw: RawNode, entries: Any) -> None:
        applied_before = self.applied_index
        for entry in entries:
            self._apply_entry(raw, entry)
        if self.applied_index != applied_before:
            self.reads.on_applied()
            self.operations.on_applied(entries[-1].term)

    def _on_soft_state(self, soft_state: Any) -> None:
        leader = soft_state.leader or None
        if leader != self.leader_id:
            log.info("%s: leader is now %s", self.config.node_id, leader)
        was_leader = self.leader_id == self.config.node_id
        if leader != self.leader_id:
            self.reads.on_leader_change()
        self.leader_id = leader
        self._abandon_forwards(except_to=leader)
        is_leader = leader == self.config.node_id
        if is_leader and not was_leader:
            self.became_leader_ms = monotonic_ms()
            self.serving_as_leader = False
        if not is_leader:
            self._lose_leadership()

    def _on_term(self, term: int) -> None:
        if term != self.term:
            self.term = term

    def _abandon_forwards(self, except_to: str | None = None) -> None:
        """Requests forwarded to a leader that is no longer ours will never be answered."""
        for slot in self._forwards.values():
            if slot.leader_id != except_to and not slot.done.is_set():
                slot.abandoned = True
                slot.done.set()

    def _lose_leadership(self) -> None:
        self.serving_as_leader = False
        if self._waiting:
            # Entries proposed in our term may still commit under the next leader, but we can no
            # longer tell the client: answer like Java does when the append is cancelled.
            error = RequestFailed(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
            for waiter in self._waiting.values():
                waiter.finish(None, error)
            self._waiting.clear()

    def _install_snapshot(self, snapshot: Any) -> None:
        self.state.restore(snapshot.data)
        self.applied_index = snapshot.meta.index
        self._snapshot_index = snapshot.meta.index
        self._set_conf_state(snapshot.meta.conf_state)
        log.info("%s: installed snapshot at %d", self.config.node_id, snapshot.meta.index)

    def _apply_entry(self, raw: RawNode, entry: Entry) -> None:
        if entry.index <= self.applied_index:
            return
        if entry.type == EntryType.CONF_CHANGE:
            self._apply_conf_change(raw, entry)
            results: list[ApplyResult] = []
        else:
            results = self._apply_commands(entry)
        self.applied_index = entry.index
        waiter = self._waiting.pop(entry.index, None)
        if waiter is not None:
            if waiter.term == entry.term:
                waiter.finish(results)
            else:
                waiter.finish(None, RequestFailed(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK))
        if self.leader_id == self.config.node_id:
            if entry.term == self.term and not self.serving_as_leader:
                self.serving_as_leader = True
                log.info("%s: serving as leader of term %d from index %d", self.config.node_id,
                         self.term, entry.index)
            self._after_apply_on_leader(results)

    def _apply_commands(self, entry: Entry) -> list[ApplyResult]:
        if not entry.data:
            return []  # a leader's no-op
        return self.state.apply_all(decode_commands(entry.data))

    def _set_conf_state(self, conf_state: ConfState) -> None:
        self._conf_state = conf_state
        self._sole_voter = set(conf_state.voters) == {self.config.node_id}

    def _apply_conf_change(self, raw: RawNode, entry: Entry) -> None:
        change = decode_conf_change(entry.data)
        self._set_conf_state(raw.apply_conf_change(change))
        assert self.storage is not None
        try:
            self.storage.save_conf_state(self._conf_state)
        except (StorageFullError, StorageWriteFailed) as error:
            # mid-apply there is no going back; a restart applies the entry again from the log
            self._storage_failed(StorageWriteFailed(f"saving the membership in {self.config.data_dir}: {error}"))

    def _after_apply_on_leader(self, results: list[ApplyResult]) -> None:
        """Leader only: 1008 for successful elections, and Java's retries of failed ones."""
        if not results:
            return
        now = monotonic_ms()
        self.node_metrics.count_elections(results)
        for result in results:
            for address, command in self.processor.notifications_for(result, now):
                self.notifier.submit(address, command)
        retries = self.processor.election_retries(results, now, wall_ms())
        if retries:
            self._elections_in_flight += 1
            self._nursery.start_soon(self._propose_elections, retries)

    def _take_snapshot(self) -> None:
        """Capture the applied state now, write it in the background (_write_snapshot). The driver
        must not wait for the write: on a loaded disk it took seconds, with no Ready handled (no
        heartbeats sent, no request answered) and the leadership lost (docs/chaos.md)."""
        assert self.storage is not None
        if not self._persist(None, [], None):  # the commit index first: it must not lag the snapshot
            return
        # No await from here to start_soon: the data is the applied state at exactly this index.
        index, data = self.applied_index, self.state.snapshot()
        compact_to = index - min(COMPACTION_LAG_ENTRIES, self.config.snapshot_every_entries // 2)
        self._snapshot_in_flight = True
        self._nursery.start_soon(self._write_snapshot, index, self._conf_state, data, compact_to)

    async def _write_snapshot(self, index: int, conf_state: ConfState, data: bytes, compact_to: int) -> None:
        """create_snapshot + compaction in worker threads, while the driver goes on. Each of their
        transactions holds the storage's writer lock, which a save of the driver (in the event
        loop's thread) then waits for: so the sweep is one short transaction per thread call, and
        between two calls the driver's save takes the lock (a threading lock is not fair: a thread
        sweeping in a loop could retake it first every time). A snapshot from the leader installed
        meanwhile supersedes this one."""
        storage = self.storage
        assert storage is not None

        def write() -> None:
            storage.create_snapshot(index, conf_state, data)
            if compact_to > storage.first_index():
                storage.compact(compact_to, sweep=False)

        try:
            await trio.to_thread.run_sync(write)
            while await trio.to_thread.run_sync(storage.sweep_batch, NODE_SWEEP_BATCH_ENTRIES):
                pass
        except (SnapshotOutOfDateError, CompactedError) as error:  # the leader's snapshot is newer
            log.info("%s: snapshot at %d superseded: %s", self.config.node_id, index, error)
            return
        except StorageFullError as error:
            self._raise_disk_full(error)
            return
        except StorageWriteFailed as error:
            self._storage_failed(error)
        finally:
            self._snapshot_in_flight = False
        self._snapshot_index = max(self._snapshot_index, index)
        log.info("%s: snapshot at %d (%d bytes)", self.config.node_id, index, len(data))

    # ----- requests -----

    async def handle_request(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """Answer one remoting request; never raises (a bug becomes SYSTEM_ERROR, as in Java)."""
        started_s = trio.current_time()
        try:
            response = await self._handle(request, channel, forwarded=False)
        except RequestFailed as failure:
            response = make_response(request, failure.code, failure.remark)
        except Exception as error:  # noqa: BLE001 - Java answers any handler exception with code 1
            log.exception("request %s failed", request.code)
            response = make_response(request, ResponseCode.SYSTEM_ERROR, f"{error!r}")
        self.node_metrics.observe_request(request.code, None if response is None else response.code,
                                          trio.current_time() - started_s)
        return response

    def handle_oneway_now(self, request: RemotingCommand, channel: Channel) -> bool:
        """Serve a one-way request of INLINE_ONEWAY_REQUESTS synchronously; False: not one of them
        (the server then gives it a task). A one-way request is never answered (spec 1.3)."""
        if request.code not in INLINE_ONEWAY_REQUESTS:
            return False
        timed = self.node_metrics.oneway_timing_due(request.code)
        started_s = trio.current_time() if timed else 0.0
        self._liveness_changed()
        try:
            outcome = self.processor.handle_heartbeat(request, monotonic_ms(), channel.id or None)
        except Exception:  # noqa: BLE001 - same contract as handle_request: a bug never kills the reader
            log.exception("request %s failed", request.code)
        else:
            if isinstance(outcome, Propose):
                self._nursery.start_soon(self._propose_oneway, outcome)
        if timed:
            self.node_metrics.observe_oneway(request.code, trio.current_time() - started_s)
        return True

    def serve_now(self, request: RemotingCommand, channel: Channel, respond: Respond) -> bool:
        """Take a request without a task (True): `respond` runs once, at once or from the driver
        when the read is confirmed or the entry applied. False: the status and operator requests
        (_operations.py) and a write that only the leader may decide, on a follower (forwarded),
        need a task (`handle_request`)."""
        if request.code == RMQC_NODE_STATUS or request.code in OPERATION_REQUESTS or self._forwarded_from_here(request):
            return False
        started_s = trio.current_time()

        def answer(response: RemotingCommand | None) -> None:
            code = None if response is None else response.code
            self.node_metrics.observe_request(request.code, code, trio.current_time() - started_s)
            respond(response)

        self._decide(request, channel, answer)
        return True

    def _decide(self, request: RemotingCommand, channel: Channel, respond: Respond) -> None:
        """The one path of every request this node decides itself: reads through the read path,
        the rest through the processor, proposals answered once applied. Never raises."""
        try:
            if request.code in READ_REQUESTS:
                self.reads.serve_with(request, channel, respond)
                return
            if request.code == RequestCode.BROKER_HEARTBEAT:
                self._liveness_changed()  # a two-way 904
            origin = origin_of(request, channel, self.config)
            outcome = self.processor.handle(request, self._context(channel, origin=origin))
            if isinstance(outcome, Propose):
                self.propose_and_answer(request, outcome, respond)
            else:
                respond(self._reply_of(outcome))
        except Exception as error:  # noqa: BLE001 - Java answers any handler exception with code 1
            log.exception("request %s failed", request.code)
            respond(make_response(request, ResponseCode.SYSTEM_ERROR, f"{error!r}"))

    async def _decided(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """`_decide`, awaited (forwarded requests and the task path)."""
        done = trio.Event()
        answers: list[RemotingCommand | None] = []

        def respond(response: RemotingCommand | None) -> None:
            answers.append(response)
            done.set()

        self._decide(request, channel, respond)
        await done.wait()
        return answers[0]

    def propose_and_answer(self, request: RemotingCommand, outcome: Propose, answer: Respond) -> None:
        """Propose the outcome's commands; `answer` gets its response once applied (or the failure)."""
        try:
            self._enqueue(list(outcome.commands),
                          lambda results, error: answer(_finish_proposal(request, outcome, results, error)))
        except RequestFailed as failure:
            answer(make_response(request, failure.code, failure.remark))

    async def _propose_oneway(self, outcome: Propose) -> None:
        try:
            await self.propose(list(outcome.commands))
        except RequestFailed as failure:
            log.info("one-way request not committed: %s", failure.remark)

    async def _handle(self, request: RemotingCommand, channel: Channel, forwarded: bool) -> RemotingCommand | None:
        if request.code == RMQC_NODE_STATUS:
            return handle_status_request(self, request)  # rmqc's private diagnostic (rmqc status)
        if request.code in OPERATION_REQUESTS:
            return await self.operations.handle(request)
        if self._forwarded_from_here(request):
            if forwarded or not self.config.forward_writes or not self._leader_reachable():
                return make_response(request, ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
            return await self._forward(with_origin(request, origin_of(request, channel, self.config)))
        return await self._decided(request, channel)

    def _forwarded_from_here(self, request: RemotingCommand) -> bool:
        """Java's leader-only requests that only the leader can decide. Reads among them (1004,
        1006, 1012) are served by every node through the read path instead (design.md "Read path")."""
        return (request.code in LEADER_ONLY_REQUESTS and request.code not in READ_REQUESTS
                and not self.serving_as_leader)

    def _reply_of(self, outcome: Reply | NoReply) -> RemotingCommand | None:
        if isinstance(outcome, NoReply):
            return None
        if outcome.response.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
            # decided without a proposal; elections that reach the log are counted at apply
            self.node_metrics.count_election(KEEP_CURRENT_MASTER)
        return outcome.response

    def _context(self, channel: Channel, read_allowed: bool = False, origin: Origin | None = None) -> RequestContext:
        return RequestContext(
            now_ms=monotonic_ms(),
            channel_id=channel.id if channel.id else None,
            is_leader=self.leader_id == self.config.node_id,
            leader_ready=self.serving_as_leader,
            node=self._node_info(),
            read_allowed=read_allowed,
            wall_ms=wall_ms(),
            origin=origin,
        )

    def _node_info(self) -> NodeInfo:
        """This node as requests see it; rebuilt only when the leader changes (the peers come from
        the static configuration), not for every request."""
        cached = self._node_info_cache
        if cached is not None and cached[0] == self.leader_id:
            return cached[1]
        leader = self.config.peer(self.leader_id) if self.leader_id else None
        node = NodeInfo(
            group=self.config.group,
            self_id=self.config.node_id,
            leader_id=leader.id if leader else None,
            leader_address=leader.address if leader else None,
            peers=tuple((peer.id, peer.address) for peer in self.config.peers),
        )
        self._node_info_cache = (self.leader_id, node)
        return node

    def on_channel_closed(self, channel: Channel) -> None:
        keys = self.liveness.on_channel_closed(channel.id, monotonic_ms())
        if keys:
            self._closed_channels.extend(keys)
            self._liveness_wakeup.set()
            self._liveness_changed()
            self._digest_now.set()

    # ----- forwarding (follower -> leader) -----

    def _leader_reachable(self) -> bool:
        return self.leader_id is not None and self.leader_id != self.config.node_id

    async def _forward(self, request: RemotingCommand) -> RemotingCommand | None:
        if len(self._forwards) >= MAX_FORWARDS_IN_FLIGHT:
            raise RequestFailed(ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while")
        assert self.leader_id is not None
        tag = next(self._forward_tags)
        slot = _ForwardSlot(self.leader_id)
        if not request.is_oneway:
            self._forwards[tag] = slot
        try:
            if not self.links.send_control(self.leader_id, FrameKind.FORWARD_REQUEST, encode_tagged(tag, encode(request))):
                raise RequestFailed(ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while")
            if request.is_oneway:
                return None
            with trio.move_on_after(self.config.request_timeout_ms / 1000):
                await slot.done.wait()
        finally:
            self._forwards.pop(tag, None)
        if slot.abandoned:
            # the leader we forwarded to is gone; the client retries after finding the new one
            raise RequestFailed(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        if slot.response is None:
            raise RequestFailed(ResponseCode.SYSTEM_ERROR, "java.util.concurrent.TimeoutException: forwarded to leader")
        slot.response.opaque = request.opaque
        return slot.response

    def on_forward_request(self, sender: str, tag: int, frame: bytes, reply: PeerReply) -> None:
        self._nursery.start_soon(self._serve_forwarded, tag, frame, reply)

    async def _serve_forwarded(self, tag: int, frame: bytes, reply: PeerReply) -> None:
        try:
            (request,) = FrameDecoder(self.config.max_frame_bytes).feed(frame)
        except (RmqcError, ValueError) as error:
            log.warning("bad forwarded request: %s", error)
            return
        try:
            response = await self._handle(request, FORWARD_CHANNEL, forwarded=True)
        except RequestFailed as failure:
            response = make_response(request, failure.code, failure.remark)
        except Exception as error:  # noqa: BLE001 - same contract as handle_request
            log.exception("forwarded request %s failed", request.code)
            response = make_response(request, ResponseCode.SYSTEM_ERROR, f"{error!r}")
        if response is not None and not request.is_oneway:
            with trio.move_on_after(self.config.request_timeout_ms / 1000):
                try:
                    await reply(FrameKind.FORWARD_RESPONSE, encode_tagged(tag, encode(response)))
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

    def on_forward_response(self, sender: str, tag: int, frame: bytes) -> None:
        slot = self._forwards.get(tag)
        if slot is None:
            return
        try:
            (slot.response,) = FrameDecoder(self.config.max_frame_bytes).feed(frame)
        except (RmqcError, ValueError) as error:
            raise PeerProtocolError(f"bad forwarded response: {error}") from error
        slot.done.set()

    # ----- liveness -----

    def on_digest(self, sender: str, payload: bytes) -> None:
        inactive = self.liveness.merge_digest(Digest.from_bytes(payload), monotonic_ms())
        if inactive:
            self._closed_channels.extend(inactive)
            self._liveness_wakeup.set()

    def _liveness_changed(self) -> None:
        """A heartbeat or a close changed this node's table: a digest is due (no polling while idle)."""
        if not self._digest_due.is_set():
            self._digest_due.set()

    async def _digest_loop(self) -> None:
        while True:
            await self._digest_due.wait()
            with trio.move_on_after(self.config.digest_interval_ms / 1000):  # coalesce heartbeats...
                await self._digest_now.wait()  # ...but a closed connection (a failover) goes at once
            # reset before taking: later changes make the next digest
            self._digest_due, self._digest_now = trio.Event(), trio.Event()
            if self.leader_id is None or self.leader_id == self.config.node_id:
                continue
            digest = self.liveness.take_digest(monotonic_ms())
            if digest:
                self.links.send_control(self.leader_id, FrameKind.DIGEST, digest.to_bytes())

    async def _liveness_loop(self) -> None:
        """Expiry by deadline on every node; on the leader, dead masters become elections. Every
        time here is monotonic (the heartbeat table's too); the wall clock only stamps commands."""
        next_scan_ms = monotonic_ms() + self.config.scan_inactive_master_interval_ms
        while True:
            with trio.move_on_after(self._next_liveness_check_s(next_scan_ms)):
                await self._liveness_wakeup.wait()
            self._liveness_wakeup = trio.Event()
            self.liveness_rounds += 1
            # Before anything expires: if even the ticker has not run for a while, this process
            # was not running (and read no heartbeat); that time is forgiven to every broker.
            self._note_stall(self._ticked_s + self.config.tick_ms / 1000)
            now = monotonic_ms()
            expired = self.liveness.expire(now)
            closed, self._closed_channels = self._closed_channels, []
            scan_due = now >= next_scan_ms
            if scan_due:  # on every node: a follower that kept an old scan time would spin here
                next_scan_ms = now + self.config.scan_inactive_master_interval_ms
            if not self.serving_as_leader:
                continue
            stamp_ms = wall_ms()
            commands = self._elections_for(now, expired, closed, stamp_ms)
            if scan_due and now - self._started_ms >= LIVENESS_GRACE_MS:
                commands += self.processor.inactive_master_scan(now, stamp_ms)
            if commands:
                # one entry for every election of this round; it waits for its commit in its own
                # task so that expiry keeps its pace
                self._elections_in_flight += 1
                self._nursery.start_soon(self._propose_elections, _one_per_group(commands))

    def _elections_for(self, now: int, expired: list[BrokerKey], closed: list[BrokerKey],
                       stamp_ms: int) -> list[Command]:
        """A closed connection is a death seen, acted on at once; masters expired by deadline are
        too, unless many expire together (MassExpiry: then groups whose replicas are silent as
        well wait for the scan)."""
        now_s = trio.current_time()
        masters = self.processor.masters_among(expired)
        self.mass_expiry.note(masters, now_s)
        guarded = self.mass_expiry.suspect(now_s)
        commands = self.processor.elections_due(now, closed, stamp_ms)
        due = self.processor.elections_due(now, expired, stamp_ms, wait_if_replicas_silent=guarded)
        if guarded and len(due) < masters:  # only the guard leaves an expired master without an election
            self.mass_expiry.deferred += masters - len(due)
            log.warning("%s: %d masters expired within %.0f s; groups with no live replica wait for the "
                        "inactive-master scan (%d deferred so far)", self.config.node_id,
                        self.mass_expiry.masters, self.mass_expiry.window_s, self.mass_expiry.deferred)
        return commands + due

    def _note_stall(self, due_s: float) -> None:
        """A timed task due at `due_s` (monotonic) runs now: forgive any stall it reveals."""
        stalled_s = self.stalls.observe(due_s, trio.current_time())
        if stalled_s:
            self.liveness.forgive(round(stalled_s * 1000))
            # short stalls are routine on a busy machine (hundreds an hour): counted, not shouted
            log.log(logging.WARNING if stalled_s >= STALL_WARNING_S else logging.DEBUG,
                    "%s: event loop stalled %.0f ms; not counted against brokers' heartbeat deadlines",
                    self.config.node_id, stalled_s * 1000)

    def _next_liveness_check_s(self, next_scan_ms: int) -> float:
        now = monotonic_ms()
        soonest_ms = next_scan_ms
        deadline = self.liveness.next_deadline_ms()
        if deadline is not None:
            soonest_ms = min(soonest_ms, deadline + 1)
        return max(0.0, (soonest_ms - now) / 1000)

    async def _propose_elections(self, commands: list[Command]) -> None:
        try:
            await self.propose(commands)
        except RequestFailed as failure:
            log.info("controller-triggered elections not committed: %s", failure.remark)
        finally:
            self._elections_in_flight -= 1


def _finish_proposal(request: RemotingCommand, outcome: Propose, results: list[ApplyResult] | None,
                     error: RequestFailed | None) -> RemotingCommand:
    if error is not None:
        return make_response(request, error.code, error.remark)
    assert results is not None
    try:
        return outcome.finish(results)
    except Exception as failure:  # noqa: BLE001 - same contract as handle_request
        log.exception("request %s failed after apply", request.code)
        return make_response(request, ResponseCode.SYSTEM_ERROR, f"{failure!r}")


def _one_per_group(commands: list[Command]) -> list[Command]:
    seen: set[str] = set()
    unique = []
    for command in commands:
        name = getattr(command, "broker_name", None)
        if name in seen:
            continue
        seen.add(name)
        unique.append(command)
    return unique


@dataclass(slots=True)
class _ForwardSlot:
    leader_id: str | None
    done: trio.Event = field(default_factory=trio.Event)
    response: RemotingCommand | None = None
    abandoned: bool = False
