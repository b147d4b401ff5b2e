"""The simulated node that runs the replica that ships (`rmqc.replica.Replica`): the same decision
logic as `rmqc serve` (driver, group commit, read path, forwarding, liveness and its elections,
dead-leader takeover, notifier), with the simulator's network, disk, clock and faults around it.

- Clock: one per node, virtual time scaled by the node's drift (positive drift: a slow clock);
  `set_drift` keeps it continuous. The wall clock is another one, read off the monotonic one: it
  starts near WALL_EPOCH_MS (each node's a few ms from the others', as NTP keeps them), and on some
  nodes runs at a rate of its own and is stepped forwards and backwards (`step_wall`, scheduled by
  the world: WallKnobs), as NTP or an operator steps a real one. A replica that decides a deadline
  on it is caught (mutant "deadlines-on-wall-clock").
- Disk (`_simstorage`): a save ends inside `drive()` and is durable at once; an armed crash
  (`crash_mid_next_write`) raises from inside `save`, so the actions emitted before it are
  performed and nothing after. The next drive pass waits for the fsync's simulated duration
  (NodeKnobs.persist_*). With NodeKnobs.background_save_p (profile "disks"), a save is instead left
  to the background as `rmqc serve`'s saver leaves a slow one (`_SimSaver`): it is written when its
  duration is over (up to several election timeouts: a stalled disk), unless the node crashed
  first (then it never was), and `save_finished` reports it.
- Time: `advance_time()` runs at `next_wakeup_ms()`; a paused node runs nothing and finds on
  resume that its clock jumped (the replica forgives the stall); inputs that reached it wait, those
  from a peer as much as that peer's link holds (a real peer's outbox: at most
  NodeKnobs.peer_outbox_messages Raft messages, the oldest dropped, and MAX_CONTROL_FRAMES
  forwards, answers and digests, newer ones refused).
- Driving: the replica's `Runner` (rmqc.replica._runner), the scheduler `rmqc serve` runs too,
  takes every input, decides when a pass runs (at once in the input's turn, or scheduled: a
  scheduled pass comes DRIVE_COST_US later, plus the last save's fsync) and drains the outbox at
  the same named points.
- Outputs: the actions are performed in order: Raft messages and digests and forwards travel the
  simulated network, answers and 1008s the client links. What
  travels is bytes, as between real processes: Raft messages in the peer codec's frames (decoded
  by the receiver as its peer reader does, a stale append without its entries), forwards in their
  tagged frames, requests, answers and 1008s in remoting frames; 1008s wait in the node's
  PendingNotifications (one per broker address, a newer masterEpoch replacing an older one), as
  in its notifier. Nothing is shared between nodes by reference.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqc.config import NodeConfig, parse_peers
from rmqc.errors import SnapshotOutOfDateError
from rmqc.fsm import ApplyResult
from rmqc.peerwire import MAX_CONTROL_FRAMES, decode_messages, decode_tagged, encode_tagged
from rmqc.raft import ConfState, Entry, EntryType, HardState, RawNode, Snapshot
from rmqc.remoting import FrameDecoder, RemotingCommand, encode
from rmqc.replica import PendingNotifications, Replica, Runner
from rmqc.replica._io import (
    Answer,
    ForwardRequest,
    MembersChanged,
    Notify,
    SendDigest,
    SendRaft,
    SnapshotOutcome,
    StopProcess,
    WriteSnapshot,
)
from rmqc.storage import StorageFullError, StorageWriteFailed

from ._simnet import PEER_OUTBOX_MESSAGES
from ._simstorage import CrashableStorage, PowerCut

if TYPE_CHECKING:
    from ._simworld import World

# rmqc serve's defaults, which the simulator's knobs start from
_NODE_DEFAULTS = NodeConfig()
# Virtual time one driver pass costs besides its fsync (Python's order of magnitude).
DRIVE_COST_US = 50
# Where the wall clocks start (ms since the Unix epoch, late 2026): far from the monotonic clocks,
# which start at 0, so code that mixes the two clocks shows.
WALL_EPOCH_MS = 1_790_000_000_000


@dataclass(frozen=True, slots=True)
class NodeKnobs:
    tick_ms: int = 10  # rmqc serve ticks every 50 ms: a seed's short virtual time sees more ticks
    election_tick: int = _NODE_DEFAULTS.election_tick
    heartbeat_tick: int = _NODE_DEFAULTS.heartbeat_tick
    idle_heartbeat_tick: int = _NODE_DEFAULTS.idle_heartbeat_tick
    lease_drift_ticks: int = 2  # rmqc serve's is 1: the simulated clocks drift (profile lease-drift: 7)
    lease_ticks: int | None = None  # None: election_tick
    persist_min_us: int = 100  # the simulated duration of one fsync: the driver's next pass waits it out
    persist_max_us: int = 8_000
    snapshot_every_entries: int = 20
    # How long a snapshot write takes after the replica asks for it (rmqc serve encodes it in steps
    # between other work, then writes it). Profile "corruption" makes it long enough for a disk to
    # fill meanwhile (the DISK_FULL outcome); elsewhere a drive step, as before it existed.
    snapshot_write_us: int = DRIVE_COST_US
    # The share of saves left to the background (rmqc serve leaves there a save slower than its
    # patience), and how long one takes then: up to several election timeouts, a stalled disk.
    background_save_p: float = 0.0
    background_save_min_us: int = 1_000
    background_save_max_us: int = 400_000
    # rmqc serve's `peer_outbox_messages` (its default): how many Raft messages from one peer wait
    # for this node while it is paused (the sockets' kernel buffers, which hold some more on a real
    # node, are not modelled: a smaller backlog only drops more, which Raft tolerates)
    peer_outbox_messages: int = PEER_OUTBOX_MESSAGES


@dataclass(slots=True)
class Held:
    """An input that reached a paused node: run when it resumes, unless its sender's outbox dropped
    it meanwhile (a newer message took its place)."""

    action: Callable[..., None]
    args: tuple[Any, ...] = ()
    dropped: bool = False


@dataclass(frozen=True, slots=True)
class Remote:
    """A remoting request from `sender` (a broker or admin), waiting on a node."""

    sender: str
    request: RemotingCommand


# What the simulator runs differently from `rmqc serve`'s defaults, and why; every other field is
# NodeConfig's own default, so a default changed there reaches the simulator too.
SIM_GROUP = "sim"
SIM_DATA_DIR = "/nonexistent/sim"  # only named in messages: the simulated disk has no path
SIM_SCALE: dict[str, int] = {
    # scaled down to the simulator's 10 ms ticks and a seed's second or so of virtual time, so that
    # a catch-up takes several appends, a window fills, and timeouts and scans happen within a seed
    "max_entries_per_append": 64,
    "max_appends_in_flight": 16,
    "request_timeout_ms": 150,
    "digest_interval_ms": 10,
    "scan_inactive_master_interval_ms": 100,
}


def sim_node_config(node_id: str, addresses: Mapping[str, str], knobs: NodeKnobs,
                    join_addresses: Sequence[str] = ()) -> NodeConfig:
    """The configuration a simulated node's replica runs with: `rmqc serve`'s (NodeConfig, checked
    as a node's is), with the simulator's knobs and scale. `addresses`: the members it starts with
    (id -> host:port); `join_addresses`: the members a joining node asks (none: it bootstraps)."""
    config = NodeConfig(
        node_id=node_id, peers=parse_peers([f"{peer_id}-{address}" for peer_id, address in addresses.items()]),
        join_address=";".join(join_addresses), group=SIM_GROUP, data_dir=SIM_DATA_DIR,
        tick_ms=knobs.tick_ms, election_tick=knobs.election_tick, heartbeat_tick=knobs.heartbeat_tick,
        idle_heartbeat_tick=knobs.idle_heartbeat_tick, lease_drift_ticks=knobs.lease_drift_ticks,
        lease_ticks=knobs.lease_ticks or knobs.election_tick, snapshot_every_entries=knobs.snapshot_every_entries,
    )
    return config.with_changes(**SIM_SCALE)


class SimClock:
    def __init__(self, node: ReplicaSimNode) -> None:
        self._node = node

    def monotonic_ms(self) -> int:
        return self._node.local_ms()

    def wall_ms(self) -> int:
        return self._node.wall_ms()


class ReplicaSimNode:
    def __init__(self, world: World, node_id: str, drift: float, knobs: NodeKnobs) -> None:
        self.world = world
        self.id = node_id
        self.knobs = knobs
        self.storage = CrashableStorage(self)
        self.storage.remember_saves = world.knobs.nemesis.lose_tail_p > 0
        self.replica: Replica | None = None
        self.incarnation = 0
        self.started_us = 0  # virtual time of the last start
        self.up = False
        self.paused = False
        self.saved = False
        self.deferred: list[Held] = []
        # (sender, is a Raft message) -> what of `deferred` came from that peer's link
        self._held_from: dict[tuple[str, bool], deque[Held]] = {}
        self.runner = Runner(self._perform_action, self._schedule_pass, self._failed)
        self.notifications = PendingNotifications()
        self._notifying: set[str] = set()  # broker addresses a 1008 is being sent to
        self._wakeup_us: int | None = None
        self._clock_base_us = 0
        self._clock_base_local_us = 0.0
        self.drift = drift
        # the wall clock (the machine's: it survives restarts): wall_us = base + local_us * rate
        self._wall_base_us = float(WALL_EPOCH_MS * 1000)
        self._wall_base_local_us = 0.0
        self.wall_drift = 0.0  # its rate against the monotonic clock, less one
        self.joined = False  # started empty to join a running group (`join`), not one of the initial nodes
        self.retired = False  # removed from the membership and stopped for good

    # -- the clock ---------------------------------------------------------------------------------
    def set_drift(self, drift: float) -> None:
        now_us = self.world.events.now_us
        self._clock_base_local_us = self._local_us(now_us)
        self._clock_base_us = now_us
        self.drift = drift

    def _local_us(self, now_us: int) -> float:
        return self._clock_base_local_us + (now_us - self._clock_base_us) / (1.0 + self.drift)

    def local_ms(self) -> int:
        return int(self._local_us(self.world.events.now_us) // 1000)

    def _virtual_us(self, local_ms: int) -> int:
        return self._clock_base_us + int((local_ms * 1000 - self._clock_base_local_us) * (1.0 + self.drift)) + 1

    def _wall_us(self, local_us: float) -> float:
        return self._wall_base_us + (local_us - self._wall_base_local_us) * (1.0 + self.wall_drift)

    def wall_ms(self) -> int:
        return int(self._wall_us(self._local_us(self.world.events.now_us)) // 1000)

    def step_wall(self, step_us: int, wall_drift: float | None = None) -> None:
        """Step the wall clock by `step_us` (negative: backwards) and let it run at `wall_drift`
        from now on (None: its current rate); the monotonic clock is untouched."""
        local_us = self._local_us(self.world.events.now_us)
        self._wall_base_us = self._wall_us(local_us) + step_us
        self._wall_base_local_us = local_us
        if wall_drift is not None:
            self.wall_drift = wall_drift

    # -- what the world and the nemesis see ------------------------------------------------------
    @property
    def raw(self) -> RawNode | None:
        return self.replica.raw if self.replica is not None else None

    @property
    def conf_state(self) -> ConfState:
        return self.replica.conf_state if self.replica is not None else ConfState()

    @property
    def crash_mid_next_write(self) -> bool:
        return self.storage.arm_crash

    @crash_mid_next_write.setter
    def crash_mid_next_write(self, armed: bool) -> None:
        self.storage.arm_crash = armed

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start (or restart) from this node's disk: an initial node with the initial members as
        `peers`, a joined one with `join` and only itself (it learns the rest from the leader)."""
        self.incarnation += 1
        world = self.world
        ids = (self.id,) if self.joined else world.initial_ids
        config = sim_node_config(self.id, {node_id: world.address_of(node_id) for node_id in ids}, self.knobs,
                                 [world.address_of(node_id) for node_id in world.initial_ids] if self.joined else ())
        rng = random.Random(f"{self.world.seed}/{self.id}/{self.incarnation}")
        runner = self.runner = Runner(self._perform_action, self._schedule_pass, self._failed)
        self.notifications = PendingNotifications()  # the notifier's: a process's, lost in a crash
        self._notifying = set()
        self.up, self.paused, self.saved = True, False, False
        self.started_us = self.world.events.now_us
        self.deferred.clear()
        self._held_from.clear()
        self._wakeup_us = None
        self.replica = Replica(config, self.storage, SimClock(self), rng, runner.outbox,
                               observer=_AlarmCounter(self.world), saver=_SimSaver(self), wake=runner.wake,
                               flush=runner.flush)
        runner.attach(self.replica)
        self._observe_applies(self.replica)
        self._after_call()

    def _observe_applies(self, replica: Replica) -> None:
        """Every applied entry reaches `proposals.applied` (index, term, results): the checkers
        see the apply there (the replica has no apply observer of its own)."""
        applied = replica.proposals.applied
        world, node_id = self.world, self.id

        def observe(index: int, term: int, results: list[ApplyResult]) -> None:
            storages = ({other: node.storage for other, node in world.nodes.items()}
                        if replica.disk.alarm is not None else None)  # its disk-full alarm is raised
            world.checker.check_applied_durable(node_id, self.storage, index, term, storages,
                                                replica.conf_state.voters)
            world.checker.on_apply(node_id, Entry(index, term, EntryType.NORMAL, b""), replica.state.snapshot())
            if world.checker.forked_at is None:  # a permitted loss forked the committed stream: see World.finish
                world.controller_checker.on_apply(index, results, world.events.now_us)
            applied(index, term, results)

        replica.proposals.applied = observe  # type: ignore[method-assign]

    # -- the disk's watcher: the checkers see every write ---------------------------------------------
    def before_save(self, storage: CrashableStorage, entries: Sequence[Entry]) -> None:
        self.world.checker.before_save(self.id, storage, entries)

    def after_save(self, storage: CrashableStorage, entries: Sequence[Entry], snapshot: Snapshot | None) -> None:
        checker = self.world.checker
        checker.after_save(self.id, storage, entries)
        self.saved = True
        if snapshot is not None and not snapshot.is_empty:
            self.world.count("snapshots_installed")
            checker.on_snapshot_installed(self.id, snapshot.meta.index, snapshot.meta.term, snapshot.data)

    def on_end_repair(self, storage: CrashableStorage) -> None:
        self.world.on_end_repair(self)

    def crash(self) -> None:
        self.up = False
        self.replica = None
        self.storage.arm_crash = False
        self.deferred.clear()
        self._held_from.clear()
        self.runner.stop()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        if not self.up or not self.paused:
            return
        self.paused = False
        deferred, self.deferred = self.deferred, []
        self._held_from.clear()
        self._call(self.runner.timer)
        for held in deferred:
            if self.up and not held.dropped:
                held.action(*held.args)

    def poke(self) -> None:
        """The nemesis called the core directly: let the driver take what it produced."""
        if self.replica is not None:
            self._run(self.replica.wake_driver)

    # -- inputs --------------------------------------------------------------------------------------
    def deliver(self, sender: str, payload: bytes) -> None:
        """Raft messages as the peer codec sent them, decoded when the node reads them (an append
        of a stale term without its entries, as a node's peer reader does)."""
        self._from_peer(sender, True, lambda: self._run(self._raft_messages, sender, payload))

    def _raft_messages(self, sender: str, payload: bytes) -> None:
        replica = self.replica
        assert replica is not None
        replica.raft_messages(sender, decode_messages(payload, stale_below=replica.term))

    def on_peer_down(self, peer: str) -> None:
        self._when_running(lambda: self._run(self.replica.peer_down, peer))  # type: ignore[union-attr]

    def remote(self, sender: str, frame: bytes) -> None:
        self._when_running(self._remote, sender, frame)

    def _remote(self, sender: str, frame: bytes) -> None:
        replica = self.replica
        assert replica is not None
        remote = Remote(sender, decode_frame(frame))
        origin = None
        if self.world.acl is not None:  # the node's ACL gate first (_simacl): refusals end here
            origin = self.world.acl.admit(self, remote)
            if origin is None:
                return
        channel = hash(remote.sender) & 0x7FFFFFFF or 1
        if not self._run(replica.heartbeat, remote.request, channel):
            self._call(self.runner.request, replica.client_request, remote.request, channel, ("client", remote),
                       origin)

    def forwarded(self, sender: str, payload: bytes) -> None:
        tag, frame = decode_tagged(payload)
        self._from_peer(sender, False, lambda: self._call(
            self.runner.request, self.replica.forwarded_request,  # type: ignore[union-attr]
            sender, decode_frame(frame), ("forward", sender, tag)))

    def forwarded_answer(self, sender: str, payload: bytes) -> None:
        tag, frame = decode_tagged(payload)
        self._from_peer(sender, False, lambda: self._run(self.replica.forwarded_response,  # type: ignore[union-attr]
                                                         tag, decode_frame(frame)))

    def digest(self, sender: str, payload: bytes) -> None:
        self._from_peer(sender, False, lambda: self._run(self.replica.digest, sender, payload))  # type: ignore[union-attr]

    def _when_running(self, action: Callable[..., None], *args: Any) -> None:
        if not self.up:
            return
        if self.paused:
            self.deferred.append(Held(action, args))
            return
        action(*args)

    def _from_peer(self, sender: str, raft: bool, action: Callable[[], None]) -> None:
        """An input from a peer's link. While this node is paused it waits, as much of it as the
        sender's peer outbox holds: Raft messages beyond the bound push out the oldest one (Raft
        resends), control frames beyond MAX_CONTROL_FRAMES are refused (a real sender answers the
        client SYSTEM_BUSY; here the client times out)."""
        if not (self.up and self.paused):
            self._when_running(action)
            return
        queue = self._held_from.setdefault((sender, raft), deque())
        if raft and len(queue) >= self.knobs.peer_outbox_messages:
            queue.popleft().dropped = True
            self.world.count("paused_backlog_dropped")
        elif not raft and len(queue) >= MAX_CONTROL_FRAMES:
            self.world.count("paused_control_refused")
            return
        held = Held(action)
        queue.append(held)
        self.deferred.append(held)

    def _run(self, method: Callable[..., Any], *args: Any) -> Any:
        """One input of the replica, through the runner."""
        return self._call(self.runner.input, method, *args)

    def _call(self, runner_method: Callable[..., Any], *args: Any) -> Any:
        """A call of the runner (an input, the timer, a scheduled pass), then the checks and the
        next wake-up, unless it crashed the node."""
        incarnation = self.incarnation
        result = runner_method(*args)
        if self.up and incarnation == self.incarnation:
            self._after_call()
        return result

    # -- time and the driver -----------------------------------------------------------------------
    def _on_wakeup(self, incarnation: int, when_us: int) -> None:
        if not self.up or incarnation != self.incarnation or self._wakeup_us != when_us:
            return
        self._wakeup_us = None
        if self.paused:
            return  # resume() advances the time
        self._call(self.runner.timer)

    def _schedule_pass(self) -> None:
        """The runner's scheduled pass: after a drive step's cost, and the fsync of a save just made."""
        cost = DRIVE_COST_US
        if self.saved:
            cost += self.world.rng.randint(self.knobs.persist_min_us, self.knobs.persist_max_us)
        self.world.events.after(cost, self._drive, self.incarnation)

    def _drive(self, incarnation: int) -> None:
        if not self.up or incarnation != self.incarnation:
            return
        if self.paused:
            self.deferred.append(Held(self._call, (self.runner.run_pass,)))
            return
        self._call(self.runner.run_pass)

    def _failed(self, error: Exception) -> None:
        """A call into the replica raised: a power cut inside a save crashes the node (the actions
        emitted before it were performed, nothing after); a failed write stopped it (its
        StopProcess, performed, brought it down)."""
        if isinstance(error, PowerCut):
            self._power_cut(error)
        elif isinstance(error, StorageWriteFailed):
            self.world.count("stopped_by_failed_write")
        else:
            raise error

    def _power_cut(self, crash: PowerCut) -> None:
        self.world.trace(f"{self.id}: {crash}")
        self.world.nemesis.crash(self)

    def save_later(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None,
                   duration_us: int) -> None:
        self.world.count("saves_in_background")
        if duration_us > self.knobs.election_tick * self.knobs.tick_ms * 1000:
            self.world.count("saves_longer_than_an_election_timeout")
        self.world.events.after(duration_us, self._save_written, self.incarnation, (hard_state, entries, snapshot))

    def _save_written(self, incarnation: int, save: tuple[HardState | None, list[Entry], Snapshot | None]) -> None:
        """The background save's duration is over: it reaches the disk now (a node that crashed
        meanwhile never wrote it; a paused one writes it when it resumes, as its saver thread would)."""
        if self.up and incarnation == self.incarnation:
            self._when_running(self._finish_save, *save)

    def _finish_save(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None) -> None:
        replica = self.replica
        assert replica is not None
        outcome: Exception | None = None
        try:
            self.storage.save(hard_state, entries, snapshot)
        except PowerCut as crash:
            self._power_cut(crash)
            return
        except (StorageFullError, StorageWriteFailed) as error:
            outcome = error
        self._run(replica.save_finished, outcome)

    def _after_call(self) -> None:
        replica = self.replica
        assert replica is not None
        self.world.after_step(self)
        if self.saved:
            self.saved = False
            self.world.after_persist(self)
        # the wake-up is due when the replica's own clock reads next_wakeup_ms: from its reading now,
        # that many ms of this node's monotonic time on (the same instant while the replica reads
        # the monotonic clock, as it must; a replica reading the wall clock sleeps on it like this)
        due_local_ms = replica.next_wakeup_ms() - replica.now_ms() + self.local_ms()
        when_us = max(self._virtual_us(due_local_ms), self.world.events.now_us + 1)
        if self._wakeup_us is None or when_us < self._wakeup_us:
            self._wakeup_us = when_us
            self.world.events.at(when_us, self._on_wakeup, self.incarnation, when_us)

    # -- outputs -------------------------------------------------------------------------------------
    def _perform_action(self, action: Any) -> None:
        if self.up:
            _PERFORM[type(action)](self, action)

    def _send_raft(self, action: SendRaft) -> None:
        for message in action.messages:
            self.world.send(message)

    def _answer(self, action: Answer) -> None:
        token: Hashable = action.token
        kind = token[0]  # type: ignore[index]
        if kind == "client":
            if action.response is not None:
                self.world.answer(self, token[1], action.response)  # type: ignore[index]
        elif action.response is not None:
            sender, tag = token[1], token[2]  # type: ignore[index]
            self.world.peer_call(self.id, sender, "forwarded_answer", self.id,
                                 encode_tagged(tag, encode(action.response)))

    def _forward(self, action: ForwardRequest) -> None:
        self.world.peer_call(self.id, action.leader, "forwarded", self.id,
                             encode_tagged(action.tag, encode(action.request)))

    def _digest(self, action: SendDigest) -> None:
        self.world.peer_call(self.id, action.leader, "digest", self.id, action.payload)

    def _notify(self, action: Notify) -> None:
        """As the node's notifier: at most one 1008 waits per broker address while one is being
        sent to it, a newer masterEpoch replacing an older one still waiting (PendingNotifications);
        the sender takes the one waiting once its send is over."""
        if self.notifications.offer(action.address, action.command) and action.address not in self._notifying:
            self._send_notification(self.incarnation, action.address)

    def _send_notification(self, incarnation: int, address: str) -> None:
        if not self.up or incarnation != self.incarnation:
            return
        command = self.notifications.pop(address)
        if command is None:
            self._notifying.discard(address)
            return
        self._notifying.add(address)
        took_us = self.world.notify(address, command)
        if took_us is None:  # lost on the way: the sender is free at once
            self._send_notification(incarnation, address)
        else:
            self.world.events.after(took_us, self._send_notification, incarnation, address)

    def _write_snapshot(self, action: WriteSnapshot) -> None:
        self.world.events.after(self.knobs.snapshot_write_us, self._snapshot_now, self.incarnation, action)

    def _snapshot_now(self, incarnation: int, action: WriteSnapshot) -> None:
        if not self.up or incarnation != self.incarnation:
            return
        try:
            self.storage.create_snapshot(action.index, action.conf_state, action.state.encode())
        except (SnapshotOutOfDateError, StorageFullError, StorageWriteFailed) as error:
            # bound now: the name `error` is gone after the except block, the call may be deferred
            failed = (action.index, _SNAPSHOT_OUTCOMES[type(error)], error)
            self.world.count(f"snapshots_{failed[1].value}")
            # FAILED stops the node (the replica raises StorageWriteFailed after its StopProcess)
            self._when_running(lambda: self._run(self.replica.snapshot_written, *failed))  # type: ignore[union-attr]
            return
        self.world.count("snapshots_taken")
        if action.compact_to > self.storage.first_index():
            self.storage.compact(action.compact_to)
        self._when_running(lambda: self._run(self.replica.snapshot_written, action.index,  # type: ignore[union-attr]
                                             SnapshotOutcome.OK))

    def _members_changed(self, action: MembersChanged) -> None:
        self.world.on_members_changed(self, action)

    def _stop(self, action: StopProcess) -> None:
        self.world.trace(f"{self.id} stops: {action.reason}")
        self.world.nemesis.crash(self)


def decode_frame(frame: bytes) -> RemotingCommand:
    """The one remoting command of `frame`, decoded as a node's server or a client decodes it."""
    (command,) = FrameDecoder(_NODE_DEFAULTS.max_frame_bytes).feed(frame)
    return command


class _SimSaver:
    """The replica's Saver in the simulator: a save ends inside the driver's pass, or (with
    NodeKnobs.background_save_p) is left to the background for a random duration."""

    def __init__(self, node: ReplicaSimNode) -> None:
        self._node = node

    def save(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None) -> bool:
        node, knobs = self._node, self._node.knobs
        rng = node.world.rng
        if knobs.background_save_p <= 0 or rng.random() >= knobs.background_save_p:
            node.storage.save(hard_state, entries, snapshot)
            return True
        node.save_later(hard_state, entries, snapshot,
                        rng.randint(knobs.background_save_min_us, knobs.background_save_max_us))
        return False


class _AlarmCounter:
    """The replica's observer in the simulator: counts alarms raised and cleared (the rest of the
    node's metrics mean nothing in virtual time)."""

    def __init__(self, world: World) -> None:
        self._world = world

    def set_alarm(self, name: str, raised: bool) -> None:
        self._world.count(f"alarm_{name}_{'raised' if raised else 'cleared'}")

    def observe_append(self, proposals: int) -> None: ...
    def observe_fsync(self, seconds: float) -> None: ...
    def count_read_index_round(self) -> None: ...
    def count_elections(self, results: object) -> None: ...
    def count_election(self, outcome: str) -> None: ...
    def observe_detection(self, seconds: float) -> None: ...
    def observe_failover_step(self, step: str, seconds: float) -> None: ...


_SNAPSHOT_OUTCOMES = {SnapshotOutOfDateError: SnapshotOutcome.SUPERSEDED, StorageFullError: SnapshotOutcome.DISK_FULL,
                      StorageWriteFailed: SnapshotOutcome.FAILED}

_PERFORM: dict[type, Callable[[ReplicaSimNode, Any], None]] = {
    SendRaft: ReplicaSimNode._send_raft,
    Answer: ReplicaSimNode._answer,
    ForwardRequest: ReplicaSimNode._forward,
    SendDigest: ReplicaSimNode._digest,
    Notify: ReplicaSimNode._notify,
    WriteSnapshot: ReplicaSimNode._write_snapshot,
    StopProcess: ReplicaSimNode._stop,
    MembersChanged: ReplicaSimNode._members_changed,
}
