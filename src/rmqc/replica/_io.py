"""The contract of the sans-IO replica: what goes in, what comes out, what it is given.

A `Replica` (rmqc.replica._replica) is the whole decision logic of one controller node. It never
awaits, never reads a clock of its own, starts no thread and opens no socket. Its shell (the Trio
node in rmqc.node, or the simulator in rmqc.testing) gives it:

- a config (`ReplicaConfig`: the fields of rmqc.config.NodeConfig it reads);
- a storage (`ReplicaStorage`: the synchronous Raft storage with `save` / `save_conf_state`, as
  LmdbStorage and the simulator's CrashableStorage have), and optionally a `Saver` through which
  the driver saves each Ready. The default saves inside `drive()` (`SaveNow`: one transaction +
  fsync). A shell's saver may instead leave a slow save to run on in the background (False from
  `Saver.save`): the driver then keeps the core fed and sends what needs no write (heartbeats,
  appends, vote requests), so a stalled disk holds the node's writes, never its leadership or its
  answers; `save_finished(error)` ends that Ready. A crash raised from inside `save` propagates out
  of `drive()`, and the outbox then holds exactly the actions emitted before it;
- ONE clock (`Clock`: `monotonic_ms()` for every deadline, lease, age and scan; `wall_ms()` only
  stamped into commands);
- a `random.Random` (the only randomness: election timeouts, read-index nonces);
- an outbox (`Outbox`: anything with `append(action)`). Actions are appended IN THE ORDER they
  happen. The simulator passes a list and drains it after every input; the Trio shell passes an
  object that performs each action as it is appended (so a leader's appends leave before its own
  fsync, as the Ready contract allows, and answers are written as soon as they are decided).

Construction:

    Replica(config, storage, clock, rng, outbox, *, controller_config=ControllerConfig(),
            observer=None, wake=None, rearm=None)

`wake()` is called when `drive()` becomes due, `rearm()` when `next_wakeup_ms()` moved earlier
(both optional: a simulator may simply call `drive()` while `drive_due` and read `next_wakeup_ms()`
after every input).

Inputs (methods of Replica; none blocks, none awaits):
- `advance_time()`: the clock moved; do everything now due (Raft ticks, expiry of waiting requests,
  reads and forwards, heartbeat deadlines and dead-master elections, digests, the successor grace
  of a dead-leader takeover, the disk-full retry). `next_wakeup_ms()` says when it is next needed.
- `drive()`: one pass of the driver (feed every input that arrived into the Raft core, group
  commit, then one Ready: send early, persist, send the rest, apply, answer, snapshot, advance).
  Returns True when another pass is due at once (a run of Readies: the shell yields in between).
  `drive_due` is True whenever a pass is wanted; the `wake` hook is called when it becomes so.
- `raft_messages(sender, messages)`, `peer_unreachable(peer)`, `peer_down(peer)` (the leader's
  port refuses us), `snapshot_sent(peer, ok)`.
- `client_request(request, channel_id, token)`: any request of a remoting connection; exactly one
  `Answer(token, response)` follows (response None for a one-way request or no reply), now or later.
- `heartbeat(request, channel_id) -> bool`: a one-way 904 served inline (False: not a 904).
- `enqueue(commands, on_done)`: commands of the shell's own (tests, tools) for the next append.
- `connection_closed(channel_id)`.
- `forwarded_request(sender, request, token)`: a request a follower forwarded to us; answered by
  `Answer(token, ...)` like a client request (the shell sends it back), never forwarded again.
- `forwarded_response(tag, response)`, `forward_not_sent(tag)`: for our own `ForwardRequest(tag)`.
- `digest(sender, payload)`: a follower's coalesced heartbeat digest.
- `snapshot_written(index, outcome, error=None)`: the result of a `WriteSnapshot` action (`error`:
  the storage's exception for SUPERSEDED, DISK_FULL and FAILED).
- `save_finished(error)`: a save the `Saver` left to the background ended (error None, or the
  StorageFullError / StorageWriteFailed it raised).
- `stop(why)`: fail everything waiting; `close()`: save a commit index still unsaved (on the way out).

Outputs: the action dataclasses below. `status()` returns a `ReplicaStatus` (a frozen snapshot)
for `rmqc status`, the metrics and the CLI; nothing outside reaches into the core.

Hooks for the simulator's mutants (`--mutant`, rmqc.testing.sim.MUTANTS), each one small method:
- `rmqc.replica._driver.Driver._persist_then_apply(self, ready, snapshot) -> bool`: the Ready
  ordering "persist, install the snapshot, send what had to wait, apply and answer" (False: the
  disk is full, nothing applied). `apply-before-persist` replaces it to apply and answer first.
- `rmqc.replica._reads.ReadPath._read_index_reached(self, index) -> bool`: a read whose read index
  is known may be served (applied >= index). `stale-read-as-linearizable` replaces it with True.
- `rmqc.replica._membership.Membership._refuse_if_pending(self)` (with the core's
  `RaftCore.conf_change_pending`): one membership change at a time. `two-pending-changes` disables
  both.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rmqc._hot import hot_record
from rmqc.fsm import StateCapture
from rmqc.raft import ConfState, Entry, HardState, Message, Snapshot, Storage
from rmqc.remoting import RemotingCommand

__all__ = [
    "Action", "Answer", "Clock", "ForwardRequest", "MembersChanged", "Notify", "Observer", "Outbox", "PeerLag",
    "ReplicaConfig", "ReplicaStatus", "ReplicaStorage", "SaveNow", "Saver", "SendDigest", "SendRaft",
    "SnapshotOutcome", "StopProcess", "WriteSnapshot",
]


class Clock(Protocol):
    def monotonic_ms(self) -> int:
        """Milliseconds that never step: only differences mean anything."""

    def wall_ms(self) -> int:
        """Milliseconds since the epoch, as Java stamps them; only stamped into commands."""


class PeerInfo(Protocol):
    """A peer of the configuration (read-only: frozen configs and computed addresses satisfy it)."""

    @property
    def id(self) -> str: ...

    @property
    def address(self) -> str: ...


class ReplicaConfig(Protocol):
    """The fields of rmqc.config.NodeConfig the replica reads (read-only, so a frozen config satisfies it;
    `data_dir` is only named in messages, a str in NodeConfig and a Path in the simulator)."""

    @property
    def node_id(self) -> str: ...

    @property
    def group(self) -> str: ...

    @property
    def data_dir(self) -> str | Path: ...

    @property
    def tick_ms(self) -> int: ...

    @property
    def election_tick(self) -> int: ...

    @property
    def heartbeat_tick(self) -> int: ...

    @property
    def idle_heartbeat_tick(self) -> int: ...

    @property
    def lease_drift_ticks(self) -> int: ...

    @property
    def lease_ticks(self) -> int: ...

    @property
    def max_entries_per_append(self) -> int: ...

    @property
    def max_appends_in_flight(self) -> int: ...

    @property
    def request_timeout_ms(self) -> int: ...

    @property
    def digest_interval_ms(self) -> int: ...

    @property
    def scan_inactive_master_interval_ms(self) -> int: ...

    @property
    def group_commit(self) -> bool: ...

    @property
    def forward_writes(self) -> bool: ...

    @property
    def snapshot_every_entries(self) -> int: ...

    @property
    def default_consistency(self) -> str: ...

    @property
    def max_frame_bytes(self) -> int: ...

    @property
    def peers(self) -> Sequence[PeerInfo]: ...

    @property
    def peer_ids(self) -> tuple[str, ...]: ...

    @property
    def listen_address(self) -> str: ...

    @property
    def join(self) -> bool:
        """Start as a new member joining a running group: with an empty storage, do not bootstrap
        `peers`; wait for the leader to add us (empty membership, never campaign). Ignored once the
        storage holds anything (a restarted member needs no flag)."""

    def peer(self, node_id: str) -> PeerInfo | None: ...


# rmqc.raft's Storage (it has `save` and `save_conf_state`): LmdbStorage, the simulator's storage.
# `save` raises StorageFullError (nothing written) or StorageWriteFailed (the process stops).
ReplicaStorage = Storage


class Saver(Protocol):
    """Where the driver saves each Ready: `storage.save` now, or on in the background."""

    def save(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None) -> bool:
        """One atomic, durable write, as `storage.save`. True: written now (or raised what
        `storage.save` raises: StorageFullError, StorageWriteFailed). False: the write goes on in
        the background and the shell calls `Replica.save_finished(error)` once it ends; the driver
        asks for no other save meanwhile."""


class SaveNow:
    """The default Saver: every save ends inside `drive()`."""

    def __init__(self, storage: ReplicaStorage) -> None:
        self._storage = storage

    def save(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None) -> bool:
        self._storage.save(hard_state, entries, snapshot)
        return True


class Observer(Protocol):
    """Where the replica reports figures (rmqc.metrics.NodeMetrics; the default ignores them)."""

    def observe_append(self, proposals: int) -> None: ...
    def observe_fsync(self, seconds: float) -> None: ...
    def count_read_index_round(self) -> None: ...
    def count_elections(self, results: Any) -> None: ...
    def count_election(self, outcome: str) -> None: ...
    def set_alarm(self, name: str, raised: bool) -> None: ...
    def observe_detection(self, seconds: float) -> None: ...
    def observe_failover_step(self, step: str, seconds: float) -> None: ...


class Outbox(Protocol):
    def append(self, action: Action, /) -> None: ...


# ----- actions (outputs), in the order the replica emits them -----

@hot_record
class SendRaft:
    """Raft messages to send; each names its peer in `.to` (one Ready's messages go together)."""

    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    """A leader-only request this follower sends to the leader, `tag` naming it. The answer comes
    back as `forwarded_response(tag, ...)`; if the shell cannot send it: `forward_not_sent(tag)`."""

    leader: str
    tag: int
    request: RemotingCommand


@dataclass(frozen=True, slots=True)
class SendDigest:
    """A follower's coalesced heartbeat digest (rmqc.liveness.Digest bytes) for the leader."""

    leader: str
    payload: bytes


@hot_record
class Answer:
    """The one answer to the request given with `token` (None: nothing to write, the slot is free)."""

    token: Hashable
    response: RemotingCommand | None


@dataclass(frozen=True, slots=True)
class Notify:
    """NOTIFY_BROKER_ROLE_CHANGED (1008) one-way to a broker; the transport keeps at most one waiting
    per address, a newer masterEpoch superseding an older one (rmqc.replica.PendingNotifications)."""

    address: str
    command: RemotingCommand


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    """Encode the applied state at `index` (captured then: `state`, encoded in steps), write it and
    compact the log up to `compact_to` (off the driver: it may take long); report with
    `snapshot_written(index, outcome, error)`."""

    index: int
    conf_state: ConfState
    state: StateCapture
    compact_to: int


@dataclass(frozen=True, slots=True)
class StopProcess:
    """A write or fsync failed (not for lack of space): end the process now, acknowledge nothing
    more (rmqc.node.stop_process_now). The replica raises StorageWriteFailed right after."""

    reason: str


@dataclass(frozen=True, slots=True)
class MembersChanged:
    """The applied membership as of log index `index`: emitted once at start and whenever it
    changes (a conf change applied, a snapshot installed). `addresses` has every member whose
    address is known (voters and learners, this node too) with its `host:port`. The shell keeps
    peer links to exactly the members other than itself. A node that finds itself in neither
    `voters` nor `learners` is not a member (a joining node before its addition reached it, or a
    removed node): it never campaigns and idles; the shell logs it once."""

    index: int
    addresses: dict[str, str]
    voters: tuple[str, ...]
    learners: tuple[str, ...]


Action = (SendRaft | ForwardRequest | SendDigest | Answer | Notify | WriteSnapshot | StopProcess
          | MembersChanged)


class SnapshotOutcome(enum.Enum):
    OK = "ok"
    SUPERSEDED = "superseded"  # a newer snapshot (from the leader) was installed meanwhile
    DISK_FULL = "disk_full"  # error: the StorageFullError (its `needed_bytes` when known)
    FAILED = "failed"  # the write or fsync failed: the replica stops the process


# ----- the published status -----

@dataclass(frozen=True, slots=True)
class PeerLag:
    match: int
    next: int
    lag: int
    state: str
    active: bool


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """What one replica knows about itself, as of the call (rmqc status, metrics, CLI)."""

    node_id: str
    role: str  # "follower", "candidate", "pre_candidate", "leader", "learner"...
    leader: str | None
    term: int
    commit: int
    applied: int
    last_index: int
    serving: bool  # leader AND an entry of its own term applied: it decides writes
    voters: tuple[str, ...]
    learners: tuple[str, ...]
    transferring_to: str | None
    pending_conf_change: dict[str, Any] | None
    peers: dict[str, PeerLag]  # the leader's view of each peer's replication (empty elsewhere)
    broker_groups: int
    live_brokers: int
    alarms: tuple[dict[str, Any], ...]
    counters: dict[str, float] = field(default_factory=dict)  # reads, waits, stalls, notifications...
    members: dict[str, str] = field(default_factory=dict)  # the applied address book: id -> host:port
    leader_commit: int = 0  # the highest commit index a leader's appends and heartbeats carried to us
