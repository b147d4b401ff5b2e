"""The simulated node shell: what `rmqc.node` does around the Raft core, without I/O.

It runs the real `RawNode` and follows the Ready contract: send the messages that need no
persistence, persist (which takes a simulated fsync delay), then send the messages that had to wait
for it, apply committed entries to a small key-value state machine, release reads, advance. A crash
throws away everything not yet persisted: the in-flight Ready, the state machine, the core.

Time: ticks arrive at the node's own clock rate (drift); a paused node owes the ticks it missed and
replays them on resume before anything else, as a ticker reading a monotonic clock would. Peer
messages that reach a paused node wait for it, as in its sockets: at most a socket's worth per
sender (SOCKET_MESSAGES; beyond that the sender's queue drops the oldest, as rmqc's peer outbox
does). On resume the node works through that backlog at a cost in virtual time per message and
per entry (STEP_COST_US, ENTRY_COST_US), and what arrives meanwhile queues behind it: a leader
that answers each heartbeat reply of the backlog with another large append makes the backlog
grow instead of shrink, the storm of issue 13.

Client requests: writes are proposed on the leader and acknowledged when applied here; `read` uses
ReadIndex (forwarded by the core when this node follows) and serves once applied >= read index;
`lease` serves on the leader at the commit index the lease allows, or falls back to ReadIndex.

Peer down (`on_peer_down`): what `rmqc.node` does when a peer's port refuses reconnection: if that
peer is our leader, the first other voter in peer order takes over at once (`RawNode.take_over`),
the rest after a grace period if no leader has appeared.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqc.errors import ProposalDropped, RaftError
from rmqc.raft import Config, RawNode, decode_conf_change
from rmqc.raft._types import ConfState, Entry, EntryType, Message

from ._simclient import ClientRequest
from ._simstorage import CrashableStorage

if TYPE_CHECKING:
    from ._simworld import World

# Reads waiting for a read index or for apply, and writes waiting for apply: one per client op in
# flight on this node, so the bound is never reached unless requests leak; past it, new requests
# are refused like an overloaded server would.
REQUESTS_WAITING_MAX = 1024
# Messages from one sender that wait for a paused node: its socket's receive buffer plus the
# sender's bounded queue (the oldest are dropped beyond it, as by rmqc.node._outbox).
SOCKET_MESSAGES = 256
# Virtual time a node spends on one message of a backlog, and per entry it carries (decoding,
# appending): the order of magnitude of rmqc.node in Python.
STEP_COST_US = 50
ENTRY_COST_US = 20


@dataclass(frozen=True, slots=True)
class NodeKnobs:
    tick_us: int = 10_000
    election_tick: int = 10
    heartbeat_tick: int = 1
    lease_drift_ticks: int = 2
    lease_ticks: int | None = None  # None: election_tick
    # rmqc.node's SUCCESSOR_GRACE_MS (150 ms of a 500 ms election timeout), in ticks
    successor_grace_ticks: int = 3
    persist_min_us: int = 100
    persist_max_us: int = 8_000
    snapshot_every_entries: int = 20
    snapshot_keep_entries: int = 2


def encode_put(key: str, value: str, op_id: int) -> bytes:
    return json.dumps({"k": key, "v": value, "op": op_id}, separators=(",", ":")).encode()


class SimNode:
    def __init__(self, world: World, node_id: str, drift: float, knobs: NodeKnobs) -> None:
        self.world = world
        self.id = node_id
        self.knobs = knobs
        self.set_drift(drift)
        self.storage = CrashableStorage()
        self.raw: RawNode | None = None
        self.incarnation = 0
        self.up = False
        self.paused = False
        self.owed_ticks = 0
        self.deferred: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self.backlog: deque[Message] = deque()  # peer messages held while paused, then worked off
        self.crash_mid_next_write = False  # armed by the nemesis
        self._reset_volatile()

    def set_drift(self, drift: float) -> None:
        """Clock rate error: positive drift means slower ticks (a clock that runs late)."""
        self.tick_us = max(1, round(self.knobs.tick_us * (1.0 + drift)))

    def _reset_volatile(self) -> None:
        self.kv: dict[str, str] = {}
        self.applied = 0
        self.conf_state = ConfState()
        self.snapshot_index = 0
        self.ready_in_flight: Any = None
        self.writes_waiting: dict[int, ClientRequest] = {}
        self.reads_waiting_index: dict[bytes, ClientRequest] = {}
        self.reads_waiting_apply: list[tuple[int, ClientRequest]] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def config(self) -> Config:
        k = self.knobs
        return Config(
            id=self.id,
            election_tick=k.election_tick,
            heartbeat_tick=k.heartbeat_tick,
            lease_drift_ticks=k.lease_drift_ticks,
            lease_ticks=k.lease_ticks,
            applied=self.applied,
        )

    def start(self, peers: tuple[str, ...] = ()) -> None:
        """Boot (with `peers` on first start) or restart from what storage holds."""
        self._reset_volatile()
        snapshot = self.storage.snapshot()
        if not snapshot.is_empty:
            self.restore_state(snapshot.data)
            self.applied = self.snapshot_index = snapshot.meta.index
        self.conf_state = self.storage.initial_state()[1]
        self.incarnation += 1
        rng = random.Random(f"{self.world.seed}/{self.id}/{self.incarnation}")
        self.raw = RawNode(self.config(), self.storage, rng, peers=peers)
        if peers:
            self.conf_state = ConfState(voters=tuple(sorted(peers)))
        self.up = True
        self.paused = False
        self.owed_ticks = 0
        self.deferred.clear()
        self.backlog.clear()
        self.world.events.after(self.tick_us, self._tick_timer, self.incarnation)
        self._process_ready()

    def crash(self) -> None:
        """Lose everything not yet persisted; pending client requests never get an answer."""
        self.up = False
        self.raw = None
        lost_before = self.storage.lost_writes
        self.storage.crash()
        if self.storage.lost_writes > lost_before:
            self.world.count("unsynced_writes_lost")
        self._reset_volatile()
        self.deferred.clear()
        self.backlog.clear()

    def _crash_if_same(self, incarnation: int) -> None:
        if self.up and incarnation == self.incarnation and self.world.nemesis.active:
            self.world.nemesis.crash(self)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        if not self.up or not self.paused:
            return
        self.paused = False
        owed, self.owed_ticks = self.owed_ticks, 0
        for _ in range(owed):
            self._tick()
        deferred, self.deferred = self.deferred, []
        for action, args in deferred:
            if self.up:
                action(*args)
        self._work_off_backlog(self.incarnation)

    def _work_off_backlog(self, incarnation: int) -> None:
        """Step the oldest held message, and the next one once its cost in virtual time is spent."""
        if not self.up or incarnation != self.incarnation or self.paused or not self.backlog:
            return
        message = self.backlog.popleft()
        self._step(message)
        cost_us = STEP_COST_US + ENTRY_COST_US * len(message.entries)
        self.world.events.after(cost_us, self._work_off_backlog, incarnation)

    # -- inputs ---------------------------------------------------------------------------------
    def _tick_timer(self, incarnation: int) -> None:
        if not self.up or incarnation != self.incarnation:
            return
        self.world.events.after(self.tick_us, self._tick_timer, incarnation)
        if self.paused:
            self.owed_ticks += 1
            return
        self._tick()

    def _tick(self) -> None:
        assert self.raw is not None
        self.raw.tick()
        self._process_ready()
        self.world.after_step(self)

    def poke(self) -> None:
        """Process what an input from outside the node (the nemesis) produced."""
        self._process_ready()
        self.world.after_step(self)

    def deliver(self, message: Message) -> None:
        if self.up and (self.paused or self.backlog):
            self._hold(message)  # behind what is already waiting: links are FIFO
            return
        self._when_running(self._step, message)

    def _hold(self, message: Message) -> None:
        """Queue a message behind the backlog, at most SOCKET_MESSAGES per sender (oldest dropped)."""
        self.backlog.append(message)
        held = [i for i, waiting in enumerate(self.backlog) if waiting.frm == message.frm]
        if len(held) > SOCKET_MESSAGES:
            del self.backlog[held[0]]
            self.world.count("paused_backlog_dropped")

    def request(self, request: ClientRequest) -> None:
        self._when_running(self._handle_request, request)

    def _when_running(self, action: Callable[..., None], *args: Any) -> None:
        if not self.up:
            return
        if self.paused:
            self.deferred.append((action, args))
            return
        action(*args)

    def on_peer_down(self, peer: str) -> None:
        """`peer`'s links were reset and its port refuses us (whether or not it still runs)."""
        self._when_running(self._peer_down, peer)

    def _peer_down(self, peer: str) -> None:
        assert self.raw is not None
        if self.raw.raft.lead != peer:
            return
        successor = next((n for n in self.world.node_ids if n != peer), None)
        if successor == self.id:
            self.world.trace(f"{self.id}: leader {peer} refused us; taking over")
            self._take_over(peer)
        else:
            grace_us = self.knobs.successor_grace_ticks * self.tick_us
            self.world.events.after(grace_us, self._take_over_if_leaderless, peer, self.incarnation)

    def _take_over_if_leaderless(self, peer: str, incarnation: int) -> None:
        if self.up and incarnation == self.incarnation:
            self._when_running(self._take_over, peer)

    def _take_over(self, peer: str) -> None:
        assert self.raw is not None
        self.raw.take_over(peer)  # ignored by the core if another leader is known meanwhile
        self.world.count("takeovers")
        self._process_ready()
        self.world.after_step(self)

    def _step(self, message: Message) -> None:
        assert self.raw is not None
        try:
            self.raw.step(message)
        except RaftError as exc:
            self.world.trace(f"{self.id} step {message.type.name} from {message.frm}: {exc}")
        self._process_ready()
        self.world.after_step(self)

    # -- client requests ------------------------------------------------------------------------
    def _handle_request(self, request: ClientRequest) -> None:
        assert self.raw is not None
        waiting = len(self.writes_waiting) + len(self.reads_waiting_index) + len(self.reads_waiting_apply)
        if waiting >= REQUESTS_WAITING_MAX:
            self.world.reply(self, request, ok=False, value=None)
            return
        getattr(self, _REQUEST_HANDLERS[request.kind])(request)
        self._process_ready()
        self.world.after_step(self)

    def _handle_write(self, request: ClientRequest) -> None:
        assert self.raw is not None and request.value is not None
        try:
            self.raw.propose(encode_put(request.key, request.value, request.op_id))
        except ProposalDropped:
            self.world.reply(self, request, ok=False, value=None)
            return
        self.writes_waiting[request.op_id] = request

    def _handle_read(self, request: ClientRequest) -> None:
        assert self.raw is not None
        context = f"{self.id}/{request.op_id}".encode()
        try:
            self.raw.read_index(context)
        except RaftError:
            self.world.reply(self, request, ok=False, value=None)
            return
        self.reads_waiting_index[context] = request

    def _handle_lease_read(self, request: ClientRequest) -> None:
        assert self.raw is not None
        if not self.world.is_leader(self):
            self.world.reply(self, request, ok=False, value=None)
            return
        index = self.raw.lease_read()
        if index is None:
            self.world.count("lease_fallbacks")
            self._handle_read(request)  # lease lapsed: fall back to ReadIndex
            return
        self.world.count("lease_reads")
        self._read_at(index, request)

    def _read_at(self, index: int, request: ClientRequest) -> None:
        """Serve once this node has applied `index` (the read index or the lease's commit)."""
        self.reads_waiting_apply.append((index, request))
        self._serve_reads()

    def _serve_reads(self) -> None:
        still = []
        for index, request in self.reads_waiting_apply:
            if index <= self.applied:
                self.serve_read(request)
            else:
                still.append((index, request))
        self.reads_waiting_apply = still

    # -- the Ready loop -------------------------------------------------------------------------
    def _process_ready(self) -> None:
        raw = self.raw
        if raw is None or self.ready_in_flight is not None or not raw.has_ready():
            return
        ready = raw.ready()
        self.ready_in_flight = ready
        self._send_all(ready.messages)
        self.storage.stage(ready.hard_state, ready.entries, ready.snapshot if _has_snapshot(ready) else None)
        if ready.entries or ready.hard_state is not None or _has_snapshot(ready):
            delay = self.world.rng.randint(self.knobs.persist_min_us, self.knobs.persist_max_us)
            self.world.events.after(delay, self._persisted, ready, self.incarnation)
            if self.crash_mid_next_write and ready.entries:
                self.crash_mid_next_write = False
                self.world.events.after(delay // 2, self._crash_if_same, self.incarnation)
        else:
            self._persisted(ready, self.incarnation)

    def _persisted(self, ready: Any, incarnation: int) -> None:
        if not self.up or incarnation != self.incarnation or self.ready_in_flight is not ready:
            return  # crashed meanwhile: this write never became durable
        if self.paused:
            self.deferred.append((self._persisted, (ready, incarnation)))
            return
        assert self.raw is not None
        checker = self.world.checker
        checker.before_save(self.id, self.storage, ready.entries)
        self.storage.flush()
        checker.after_save(self.id, self.storage, ready.entries)
        if _has_snapshot(ready):
            self._install_snapshot(ready.snapshot)
        self._send_all(ready.persist_messages)
        for entry in ready.committed_entries:
            self._apply(entry)
        for read_state in ready.read_states:
            request = self.reads_waiting_index.pop(read_state.context, None)
            if request is not None:
                self._read_at(read_state.index, request)
        self.ready_in_flight = None
        self.raw.advance(ready)
        self._serve_reads()
        self._maybe_snapshot()
        self.world.after_persist(self)
        self._process_ready()
        self.world.after_step(self)

    def _send_all(self, messages: Any) -> None:
        for message in messages:
            self.world.send(message)

    # -- the state machine ----------------------------------------------------------------------
    def _apply(self, entry: Entry) -> None:
        assert self.raw is not None
        if entry.index <= self.applied:
            return
        if entry.type == EntryType.CONF_CHANGE:
            change = decode_conf_change(entry.data)
            self.conf_state = self.raw.apply_conf_change(change)
            self.storage.save_conf_state(self.conf_state)
            self.world.count("conf_changes_applied")
            self.world.trace(f"{self.id} applies {change.type.name} {change.node_id} at {entry.index}")
        else:
            self.apply_normal(entry)
        self.applied = entry.index
        self.world.checker.on_apply(self.id, entry, self.state_fingerprint())

    # -- the state machine's hooks (a controller shell overrides these four) ----------------------
    def apply_normal(self, entry: Entry) -> None:
        if entry.data:
            command = json.loads(entry.data)
            self.kv[command["k"]] = command["v"]
            request = self.writes_waiting.pop(command["op"], None)
            if request is not None:
                self.world.reply(self, request, ok=True, value=None)

    def serve_read(self, request: Any) -> None:
        self.world.reply(self, request, ok=True, value=self.kv.get(request.key))

    def state_fingerprint(self) -> object:
        return tuple(sorted(self.kv.items()))

    def state_data(self) -> bytes:
        return json.dumps(sorted(self.kv.items()), separators=(",", ":")).encode()

    def restore_state(self, data: bytes) -> None:
        self.kv = dict(json.loads(data))

    def _install_snapshot(self, snapshot: Any) -> None:
        self.restore_state(snapshot.data)
        self.applied = self.snapshot_index = snapshot.meta.index
        self.conf_state = snapshot.meta.conf_state
        self.world.checker.on_snapshot_installed(self.id, snapshot.meta.index, snapshot.meta.term,
                                                 self.state_fingerprint())
        self.world.count("snapshots_installed")
        self.world.trace(f"{self.id} installs snapshot at {snapshot.meta.index}")

    def _maybe_snapshot(self) -> None:
        if self.applied - self.snapshot_index < self.knobs.snapshot_every_entries:
            return
        self.storage.create_snapshot(self.applied, self.conf_state, self.state_data())
        self.world.count("snapshots_taken")
        self.snapshot_index = self.applied
        compact_to = self.applied - self.knobs.snapshot_keep_entries
        if compact_to >= self.storage.first_index():
            self.storage.compact(compact_to)


def _has_snapshot(ready: Any) -> bool:
    return ready.snapshot is not None and not ready.snapshot.is_empty


# Handlers by name, so that a test can replace one method with a broken variant.
_REQUEST_HANDLERS = {
    "write": "_handle_write",
    "read": "_handle_read",
    "lease": "_handle_lease_read",
}
