"""The fault schedule of one simulated run: every few hundred milliseconds of virtual time it picks
one fault from a weighted table and applies it. Faults: symmetric partitions, isolating the
leader, one-way link cuts, cutting the leader off REJECT-style (its links reset and refused while
it lives and serves clients), healing, crashes (with a restart later), pauses, leadership
transfers and single-server membership changes (remove a voter, add it back as a learner, promote
it).

Corruption faults (NemesisKnobs.damage_p, lose_tail_p; profile "corruption"): each restart of a
crashed node may first find its disk damaged (detected: the node restarts as `rmqc serve --repair`
would, `CrashableStorage.damage`) or short of its last few saves (undetected: it restarts normally,
`CrashableStorage.lose_tail`). Detected damage hits at most a minority of the nodes at once (a node
counts until it ended its repair): with a majority repairing no leader could ever be elected again,
which is the operator's problem, not the protocol's. Their choices come from a random.Random of
their own, so runs without them are the same as before they existed."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmqc.errors import RaftError
from rmqc.raft import ConfChange, ConfChangeType

if TYPE_CHECKING:
    from ._simbrokers import SimBrokerClient
    from ._simreplica import ReplicaSimNode
    from ._simworld import World


@dataclass(frozen=True, slots=True)
class NemesisKnobs:
    interval_min_us: int = 30_000
    interval_max_us: int = 250_000
    down_min_us: int = 20_000
    down_max_us: int = 800_000
    pause_min_us: int = 20_000
    pause_max_us: int = 300_000
    # how long after a REJECT cut each peer finds its reconnection refused (rmqc.node reconnects
    # after 5-15 ms of its 500 ms election timeout; the simulator's timeout is 100 ms)
    refused_after_max_us: int = 3_000
    weights: dict[str, int] = field(
        default_factory=lambda: {
            "heal": 4,
            "partition": 2,
            "isolate_leader": 2,
            "refuse_leader": 2,
            "cut_one_way": 2,
            "crash": 2,
            "crash_leader": 1,
            "crash_mid_fsync": 1,
            "pause": 2,
            "pause_leader": 1,
            "transfer": 2,
            "reconfigure": 2,
            "skew_clocks": 1,
        }
    )
    # Faults of the simulated brokers, in runs that have them (the controller load): a broker
    # process dies (no heartbeats, answers lost) and restarts later with its id.
    broker_weights: dict[str, int] = field(default_factory=lambda: {"crash_broker": 3})
    # Corruption faults, drawn at each restart of a crashed node (0: none, the default).
    damage_p: float = 0.0  # the restart finds damage that storage detects: the node repairs
    lose_tail_p: float = 0.0  # the restart finds the last 1..lose_tail_max_saves saves silently gone
    lose_tail_max_saves: int = 3


class Nemesis:
    def __init__(self, world: World, rng: random.Random, knobs: NemesisKnobs) -> None:
        self.world = world
        self.rng = rng
        self.knobs = knobs
        self.active = True
        weights = dict(knobs.weights)
        if world.brokers:
            weights.update(knobs.broker_weights)
        names = sorted(name for name, weight in weights.items() if weight > 0)
        self.actions: list[Callable[[], None]] = [getattr(self, f"_{name}") for name in names]
        self.weights = [weights[name] for name in names]
        self.disk_rng = random.Random(f"{world.seed}/disk")

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        self.active = False

    def _schedule(self) -> None:
        delay = self.rng.randint(self.knobs.interval_min_us, self.knobs.interval_max_us)
        self.world.events.after(delay, self._act)

    def _act(self) -> None:
        if not self.active or not self.actions:
            return
        action = self.rng.choices(self.actions, weights=self.weights)[0]
        self.world.count(f"nemesis{action.__name__}")
        action()
        self._schedule()

    # -- the faults -----------------------------------------------------------------------------
    def _heal(self) -> None:
        self.world.net.heal()
        self.world.trace("nemesis: heal network")

    def _partition(self) -> None:
        ids = list(self.world.node_ids)
        self.rng.shuffle(ids)
        cut = self.rng.randint(1, len(ids) // 2)
        groups = [sorted(ids[:cut]), sorted(ids[cut:])]
        self.world.net.partition(groups)
        self.world.trace(f"nemesis: partition {groups[0]} | {groups[1]}")

    def _isolate_leader(self) -> None:
        leader = self.world.leader()
        if leader is None:
            return
        self.world.net.isolate(leader.id, self.world.node_ids)
        self.world.trace(f"nemesis: isolate leader {leader.id}")

    def _refuse_leader(self) -> None:
        """A REJECT firewall rule around the leader: no message passes either way, and every other
        node finds the leader's port refusing it, as after a SIGKILL; the leader lives on and
        clients still reach it (a client port outside the rule)."""
        leader = self.world.leader()
        if leader is None:
            return
        self.world.net.isolate(leader.id, self.world.node_ids)
        self.world.trace(f"nemesis: cut leader {leader.id} off REJECT-style (links refused)")
        self.tell_refused(leader.id)

    def _cut_one_way(self) -> None:
        frm, to = self.rng.sample(list(self.world.node_ids), 2)
        self.world.net.cut_one_way(frm, to)
        self.world.trace(f"nemesis: cut {frm}->{to}")

    def _crash(self) -> None:
        self._crash_node(self._pick_up_node())

    def _crash_mid_fsync(self) -> None:
        """Arm a node to crash between its next log write and that write's fsync."""
        node = self._pick_up_node()
        if node is not None:
            node.crash_mid_next_write = True
            self.world.trace(f"nemesis: {node.id} will crash during its next fsync")

    def _fill_disk(self) -> None:
        """A node's disk is full for a while: its writes are refused until space is freed. Half the
        time the node is one writing a snapshot, if any is (the largest write a node makes, and
        the likeliest to find the disk full)."""
        writing = [node for node in self.world.nodes.values()
                   if node.up and node.replica is not None and node.replica.driver.snapshot_in_flight]
        node = self.rng.choice(writing) if writing and self.rng.random() < 0.5 else self._pick_up_node()
        if node is None or node.storage.full:
            return
        node.storage.full = True
        full_for = self.rng.randint(self.knobs.down_min_us, self.knobs.down_max_us)
        self.world.events.after(full_for, self._free_disk, node)
        self.world.trace(f"nemesis: {node.id}'s disk is full for {full_for // 1000} ms")

    def _free_disk(self, node: ReplicaSimNode) -> None:
        if node.storage.full:
            node.storage.full = False
            self.world.trace(f"nemesis: space freed on {node.id}'s disk")

    def free_every_disk(self) -> None:
        """The quiet phase: no disk stays full."""
        for node in self.world.nodes.values():
            self._free_disk(node)

    def _fail_write(self) -> None:
        """A node's next log write fails (EIO): it stops, and restarts later."""
        node = self._pick_up_node()
        if node is not None:
            node.storage.fail_next_write = True
            self.world.trace(f"nemesis: {node.id}'s next log write will fail")

    def _crash_leader(self) -> None:
        self._crash_node(self.world.leader())

    def _crash_node(self, node: ReplicaSimNode | None) -> None:
        if node is not None:
            self.crash(node)

    def crash(self, node: ReplicaSimNode) -> None:
        """Crash `node` now and restart it after a random downtime."""
        if not node.up:
            return
        node.crash()
        down = self.rng.randint(self.knobs.down_min_us, self.knobs.down_max_us)
        self.world.events.after(down, self._restart, node)
        self.world.trace(f"nemesis: crash {node.id} for {down // 1000} ms")
        self.tell_refused(node.id)  # a dead process's port refuses reconnections

    def tell_refused(self, node_id: str) -> None:
        for other in self.world.node_ids:
            if other != node_id:
                delay = self.rng.randint(0, self.knobs.refused_after_max_us)
                self.world.events.after(delay, self.world.nodes[other].on_peer_down, node_id)

    def _restart(self, node: ReplicaSimNode) -> None:
        if not node.up and not node.retired:
            self._disk_fault(node)
            node.start()
            self.world.trace(f"{node.id} restarts")

    def _disk_fault(self, node: ReplicaSimNode) -> None:
        """What the restarting node finds on its disk: maybe damage, maybe a lost tail."""
        knobs = self.knobs
        if not (knobs.damage_p or knobs.lose_tail_p) or not self.active:
            return  # (nor in the quiet phase: a restart then is a crash's left-over, the disk is sound)
        roll = self.disk_rng.random()
        if roll < knobs.damage_p:
            repairing = {node_id for node_id in self.world.damaged if not self.world.nodes[node_id].retired}
            if len(repairing | {node.id}) <= (len(self.world.current_ids()) - 1) // 2:
                self.world.damage_storage(node, self.disk_rng)
        elif roll < knobs.damage_p + knobs.lose_tail_p:
            self.world.lose_tail(node, self.disk_rng.randint(1, knobs.lose_tail_max_saves))

    def _pause(self) -> None:
        self._pause_node(self._pick_up_node())

    def _pause_leader(self) -> None:
        self._pause_node(self.world.leader())

    def _pause_node(self, node: ReplicaSimNode | None) -> None:
        if node is None or node.paused:
            return
        node.pause()
        pause = self.rng.randint(self.knobs.pause_min_us, self.knobs.pause_max_us)
        self.world.events.after(pause, node.resume)
        self.world.trace(f"nemesis: pause {node.id} for {pause // 1000} ms")

    def _skew_clocks(self) -> None:
        """Worst case for leases: the leader's clock runs slowest, every other node's fastest."""
        leader = self.world.leader()
        if leader is None:
            return
        for node_id in self.world.node_ids:
            drift = self.world.knobs.max_drift if node_id == leader.id else -self.world.knobs.max_drift
            self.world.nodes[node_id].set_drift(drift)
        self.world.trace(f"nemesis: skew clocks, leader {leader.id} slowest")

    def _transfer(self) -> None:
        leader = self.world.leader()
        if leader is None or leader.raw is None:
            return
        voters = [v for v in leader.conf_state.voters if v != leader.id]
        if not voters:
            return
        target = self.rng.choice(sorted(voters))
        leader.raw.transfer_leader(target)
        self.world.trace(f"nemesis: transfer leadership {leader.id} -> {target}")
        leader.poke()

    def _reconfigure(self) -> None:
        leader = self.world.leader()
        if leader is None or leader.raw is None:
            return
        change = self._next_change(leader)
        if change is None:
            return
        try:
            leader.raw.propose_conf_change(change)
        except RaftError as exc:
            self.world.trace(f"nemesis: {change.type.name} {change.node_id} refused: {exc}")
            return
        self.world.trace(f"nemesis: propose {change.type.name} {change.node_id} on {leader.id}")
        leader.poke()

    def _next_change(self, leader: ReplicaSimNode) -> ConfChange | None:
        conf = leader.conf_state
        outside = sorted(set(self.world.node_ids) - set(conf.voters) - set(conf.learners))
        if conf.learners:
            return ConfChange(ConfChangeType.ADD_VOTER, self.rng.choice(sorted(conf.learners)))
        if outside:
            kind = self.rng.choice((ConfChangeType.ADD_LEARNER, ConfChangeType.ADD_VOTER))
            return ConfChange(kind, self.rng.choice(outside))
        if len(conf.voters) < len(self.world.node_ids):
            return None
        return ConfChange(ConfChangeType.REMOVE_NODE, self.rng.choice(sorted(conf.voters)))

    def _crash_broker(self) -> None:
        running = [self.world.brokers[name] for name in sorted(self.world.brokers) if self.world.brokers[name].running]
        if not running:
            return
        broker = self.rng.choice(running)
        broker.crash()
        down = self.rng.randint(self.knobs.down_min_us, self.knobs.down_max_us)
        self.world.events.after(down, self._restart_broker, broker)
        self.world.trace(f"nemesis: crash broker {broker.name} (id {broker.broker_id}) for {down // 1000} ms")

    def _restart_broker(self, broker: SimBrokerClient) -> None:
        if not broker.running:
            broker.restart(self.world.events.now_us)
            self.world.trace(f"broker {broker.name} restarts")

    def _pick_up_node(self) -> ReplicaSimNode | None:
        up = [node for node in self.world.nodes.values() if node.up]
        return self.rng.choice(up) if up else None
