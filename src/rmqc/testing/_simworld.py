"""One simulated run: replicas, network, brokers, admins and nemesis on one event queue, checked as
it goes.

Determinism: all randomness comes from `random.Random` instances seeded from the run's seed and a
purpose name; events are ordered by (time, sequence number); collections are iterated in sorted
order. The same seed therefore replays the same run, event by event."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from rmqc.errors import RmqcError
from rmqc.peerwire import encode_messages
from rmqc.raft import EntryType, Message, MessageType, ProgressState, RaftInvariantError
from rmqc.remoting import RemotingCommand, encode
from rmqc.replica import MembersChanged

from ._simacl import HONEST_ACL, AclKnobs, SimAcl, SimIntruder, acl_on
from ._simadmin import AdminKnobs, SimAdminClient
from ._simbrokers import Answer, BrokerKnobs, Outgoing, SimBrokerClient
from ._simcheck import SafetyChecker
from ._simclock import EventQueue
from ._simcontroller_check import BrokerBelief, ControllerChecker
from ._simhistory import ControllerHistory
from ._simmembers import MembersKnobs, MembersOperator
from ._simnemesis import Nemesis, NemesisKnobs
from ._simnet import LinkFaults, SimNetwork
from ._simreplica import NodeKnobs, Remote, ReplicaSimNode, decode_frame
from ._simstatus import node_view
from ._simstorage import CrashableStorage

# The last lines of what happened, printed with a failing seed; enough to see the faults and
# leader changes that led to it without drowning the reader.
TRACE_LINES_KEPT = 40
VOTE_GRANTS = frozenset({MessageType.VOTE_RESP, MessageType.PRE_VOTE_RESP})
CAMPAIGNS = frozenset({MessageType.VOTE, MessageType.PRE_VOTE})
# A repair must be over once one leader has served this long, with the network healed (liveness).
REPAIR_DEADLINE_US = 300_000


@dataclass(frozen=True, slots=True)
class WallKnobs:
    """The nodes' wall clocks, in every profile. They start within +-spread_us of each other (NTP
    keeps healthy machines that close). On one initial node of every run (`one_always`), and on
    each other node with probability `stepping_p`, the wall clock also runs at a rate of its own
    (within +-max_drift of the monotonic clock's: far more than an NTP slew, to expose code that
    times anything on it) and is stepped 1..max_steps times at random moments of the run (the
    quiet phase too), each time forwards or backwards by min_step_us..max_step_us (ntpd's step,
    an operator's `date -s`). The replica must decide nothing on it: it only stamps commands."""

    spread_us: int = 20_000
    one_always: bool = True
    stepping_p: float = 0.5
    max_drift: float = 0.2
    max_steps: int = 6
    min_step_us: int = 10_000
    max_step_us: int = 2_000_000


@dataclass(frozen=True, slots=True)
class SimKnobs:
    nodes: int = 3
    active_us: int = 1_000_000  # load and faults
    quiet_us: int = 300_000  # network healed, every node and broker up, load still running
    max_drift: float = 0.02  # tick rate of each node within +-2% (lease_drift_ticks covers it)
    drift_extremes: bool = False  # every node at -max_drift or +max_drift (worst case for leases)
    client_delay_min_us: int = 200
    client_delay_max_us: int = 2_000
    faults: LinkFaults = field(default_factory=LinkFaults)
    node: NodeKnobs = field(default_factory=NodeKnobs)
    nemesis: NemesisKnobs = field(default_factory=NemesisKnobs)
    brokers: BrokerKnobs = field(default_factory=BrokerKnobs)
    admins: AdminKnobs = field(default_factory=AdminKnobs)
    members: MembersKnobs | None = None  # an operator adding, promoting, removing, replacing nodes
    wall: WallKnobs = field(default_factory=WallKnobs)
    # RocketMQ ACL on the nodes' remoting port (_simacl; None: off): by default on in a quarter of
    # the seeds of every profile, with signed clients only (the same decisions as with it off, as the
    # gate admits them all); profile "acl": on in every seed, with an intruder
    acl: AclKnobs | None = field(default_factory=lambda: HONEST_ACL)

    @property
    def disk_faults(self) -> bool:
        return bool(self.nemesis.damage_p or self.nemesis.lose_tail_p)


@dataclass(slots=True)
class SeedResult:
    seed: int
    nodes: int
    violations: list[str]
    ops: int
    sim_seconds: float
    trace: list[str]
    history: ControllerHistory
    counts: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations


class World:
    def __init__(self, seed: int, knobs: SimKnobs) -> None:
        self.seed = seed
        self.knobs = knobs
        self.rng = random.Random(f"{seed}/world")
        self.events = EventQueue()
        self.net = SimNetwork(random.Random(f"{seed}/net"), knobs.faults)
        self.checker = SafetyChecker()
        self.trace_lines: deque[str] = deque(maxlen=TRACE_LINES_KEPT)
        self.initial_ids = tuple(f"n{i}" for i in range(knobs.nodes))
        self.node_ids = self.initial_ids  # grows as nodes join; retired ones stay (stopped)
        self._drift_rng = random.Random(f"{seed}/drift")
        self.nodes = {node_id: ReplicaSimNode(self, node_id, self._drift(self._drift_rng), knobs.node)
                      for node_id in self.node_ids}
        self._wall_rng = random.Random(f"{seed}/wall")
        stepping = self._wall_rng.choice(self.node_ids) if knobs.wall.one_always else None
        for node_id in self.node_ids:
            self._set_wall_clock(self.nodes[node_id], stepping=node_id == stepping)
        self.controller_checker = ControllerChecker(violations=self.checker.violations)
        self.controller_history = ControllerHistory()
        self.brokers: dict[str, SimBrokerClient] = {}
        self.admins: dict[str, SimAdminClient] = {}
        self.operators: dict[str, MembersOperator] = {}
        self._make_brokers_and_admins()
        for i in range(knobs.members.count if knobs.members is not None else 0):
            name = f"members{i}"
            assert knobs.members is not None
            self.operators[name] = MembersOperator(name, self, random.Random(f"{seed}/{name}"), knobs.members)
        self.acl = SimAcl(self, knobs.acl) if knobs.acl is not None and acl_on(knobs.acl, seed) else None
        if self.acl is not None:
            self.controller_checker.refused_addresses = self.acl.intruder_addresses
        self.nemesis = Nemesis(self, random.Random(f"{seed}/nemesis"), knobs.nemesis)
        self.last_view: dict[str, tuple[str, int]] = {}
        self.counts: dict[str, int] = {}  # what happened, for the summary (leaders, crashes, ...)
        self.commit_seen: dict[tuple[str, int], int] = {}
        self._highest_sent: dict[tuple[str, str, int], int] = {}  # (leader, follower, term) -> index
        # node -> why: its storage was found damaged and it has not ended its repair yet (the
        # simulator's own knowledge, whatever the node recorded)
        self.damaged: dict[str, str] = {}
        self.leading_since: dict[str, tuple[int, int]] = {}  # node -> (term, virtual time it began leading)
        # nodes some applied membership left out: re-added by id, such a node may stay behind for good
        # when the leader's snapshot predates its re-addition (it refuses a snapshot without itself)
        self.removed_once: set[str] = set()
        self.snapshot_sent_us: dict[str, int] = {}  # node -> when a leader last sent it a snapshot
        self.halted = False  # a node refused the other branch of a permitted fork: the run ends early

    def _make_brokers_and_admins(self) -> None:
        k = self.knobs.brokers
        groups = [f"g{i}" for i in range(k.groups)]
        for group in groups:
            for slot in range(k.replicas):
                broker = SimBrokerClient(group, slot, self.node_ids, random.Random(f"{self.seed}/{group}.{slot}"), k,
                                         self.controller_history, self._running_ids, groups)
                self.brokers[broker.name] = broker
        self.broker_by_address = {broker.address: broker for broker in self.brokers.values()}
        for i in range(self.knobs.admins.count):
            name = f"admin{i}"
            self.admins[name] = SimAdminClient(name, self.initial_ids, groups, k.replicas + 2,
                                               random.Random(f"{self.seed}/{name}"), self.knobs.admins,
                                               self.controller_history)

    def _running_ids(self, group: str) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values()
                      if b.group == group and b.running and b.broker_id is not None)

    def _drift(self, rng: random.Random) -> float:
        if self.knobs.drift_extremes:
            return rng.choice((-self.knobs.max_drift, self.knobs.max_drift))
        return rng.uniform(-self.knobs.max_drift, self.knobs.max_drift)

    def _set_wall_clock(self, node: ReplicaSimNode, stepping: bool = False) -> None:
        """Set `node`'s wall clock apart from the others and, if `stepping` (else with probability
        stepping_p), give it a rate of its own and schedule its steps (WallKnobs)."""
        k, rng = self.knobs.wall, self._wall_rng
        node.step_wall(rng.randint(-k.spread_us, k.spread_us))
        if rng.random() >= k.stepping_p and not stepping:
            return
        node.step_wall(0, rng.uniform(-k.max_drift, k.max_drift))
        end_us = self.knobs.active_us + self.knobs.quiet_us
        for _ in range(rng.randint(1, k.max_steps)):
            step_us = rng.randint(k.min_step_us, k.max_step_us) * rng.choice((-1, 1))
            self.events.at(rng.randint(self.events.now_us, end_us), self._step_wall, node, step_us)

    def _step_wall(self, node: ReplicaSimNode, step_us: int) -> None:
        node.step_wall(step_us)
        self.count("wall_clock_steps")
        self.trace(f"{node.id}'s wall clock steps {step_us / 1000:+.0f} ms")

    # -- membership ------------------------------------------------------------------------------
    @staticmethod
    def address_of(node_id: str) -> str:
        return f"127.0.0.1:{9000 + int(node_id[1:])}"

    def start_joiner(self) -> str:
        """A new node with an empty disk, started with `join`; its id is new (never reused)."""
        node_id = f"n{len(self.node_ids)}"
        node = ReplicaSimNode(self, node_id, self._drift(self._drift_rng), self.knobs.node)
        node.joined = True
        self._set_wall_clock(node)
        self.nodes[node_id] = node
        self.node_ids = (*self.node_ids, node_id)
        node.start()
        self.trace(f"{node_id} starts with an empty disk to join")
        return node_id

    def retire(self, node_id: str) -> None:
        """A node removed from the membership: its process ends for good."""
        node = self.nodes[node_id]
        if node.retired:
            return
        node.retired = True
        if node.up:
            node.crash()
            self.nemesis.tell_refused(node_id)
        self.count("nodes_retired")
        self.trace(f"{node_id} removed from the membership: stopped for good")

    def current_ids(self) -> list[str]:
        return [node_id for node_id in self.node_ids if not self.nodes[node_id].retired]

    def final_voters(self) -> tuple[str, ...]:
        """The voters of the newest membership any running node applied. No membership changes in
        the quiet phase: every committed entry must reach enough of these voters that each of their
        quorums meets a holder. (A joined node whose addition was given up is no member and holds
        nothing: it does not count.)"""
        running = [self.nodes[n] for n in self.current_ids() if self.nodes[n].replica is not None]
        newest = max(running, key=lambda node: node.replica.applied_index if node.replica else 0, default=None)
        return newest.conf_state.voters if newest is not None else self.initial_ids

    # -- services for nodes ----------------------------------------------------------
    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def trace(self, text: str) -> None:
        self.trace_lines.append(f"{self.events.now_us / 1000:9.1f}ms {text}")

    def send(self, message: Message) -> None:
        if message.type in VOTE_GRANTS and not message.reject:
            self._check_member_votes(message)
            if message.frm in self.damaged:
                self.checker.fail(f"{message.frm} grants a {message.type.name} to {message.to} in term "
                                  f"{message.term} while repairing its damaged storage ({self.damaged[message.frm]})")
        elif message.type in CAMPAIGNS and message.frm in self.damaged:
            self.checker.fail(f"{message.frm} campaigns ({message.type.name} in term {message.term}) while "
                              f"repairing its damaged storage ({self.damaged[message.frm]})")
        if message.entries:
            self._count_append(message)
        if message.type is MessageType.SNAP:
            self.snapshot_sent_us[message.to] = self.events.now_us
        payload = encode_messages([message])  # the peer codec's bytes travel, as between real nodes
        for delay in self.net.delays_us(message.frm, message.to):
            self.events.after(delay, self._arrive, message.frm, message.to, payload)

    def _count_append(self, message: Message) -> None:
        """What replication costs: entries sent, and entries sent again to a follower that was sent
        them before in the same term (a catch-up that resends a range in flight shows here, issue 13)."""
        link = (message.frm, message.to, message.term)
        highest = self._highest_sent.get(link, 0)
        again = sum(1 for entry in message.entries if entry.index <= highest)
        self._highest_sent[link] = max(highest, message.entries[-1].index)
        self.counts["append_entries_sent"] = self.counts.get("append_entries_sent", 0) + len(message.entries)
        if again:
            self.counts["append_entries_resent"] = self.counts.get("append_entries_resent", 0) + again

    def _arrive(self, frm: str, to: str, payload: bytes) -> None:
        if self.net.arrived(frm, to) and to in self.nodes:
            self.nodes[to].deliver(frm, payload)

    def client_delay_us(self) -> int:
        return self.rng.randint(self.knobs.client_delay_min_us, self.knobs.client_delay_max_us)

    # -- brokers and admins -----------------------------------------------------------------------
    def _client_step(self, name: str) -> None:
        client = self.brokers.get(name) or self.admins.get(name) or self.operators.get(name) or self._intruder(name)
        self._send_remote(name, client.step(self.events.now_us))
        step_us = self.knobs.brokers.step_us
        self.events.after(step_us, self._client_step, name)

    def _intruder(self, name: str) -> SimIntruder:
        assert self.acl is not None
        return self.acl.intruders[name]

    def _send_remote(self, sender: str, outgoing: list[Outgoing]) -> None:
        for node_id, request in outgoing:
            if self.rng.random() < self.knobs.faults.drop_p:
                continue  # lost on the way: the client times out
            node = self.nodes[node_id]
            if self.acl is not None:
                self.acl.sign(sender, request)
            self.events.after(self.client_delay_us(), node.remote, sender, encode(request))

    def peer_call(self, frm: str, to: str, method: str, *args: object) -> None:
        """A message between two nodes outside Raft (a forward, its answer, a digest): it travels
        the same simulated link as Raft messages, and may be lost, duplicated or cut."""
        for delay in self.net.delays_us(frm, to):
            self.events.after(delay, self._peer_arrive, frm, to, method, args)

    def _peer_arrive(self, frm: str, to: str, method: str, args: tuple[object, ...]) -> None:
        if self.net.arrived(frm, to):
            getattr(self.nodes[to], method)(*args)

    def answer(self, node: ReplicaSimNode, remote: Remote, response: RemotingCommand) -> None:
        hint = node_view(node).leader if node.raw is not None else None
        applied = node.replica.applied_index if node.replica is not None else 0
        answer = Answer(response, node.id, node.incarnation, hint, self.events.now_us, applied)
        if self.rng.random() >= self.knobs.faults.drop_p:
            self.events.after(self.client_delay_us(), self._deliver_answer,
                              remote.sender, remote.request.opaque, answer, encode(response))

    def _deliver_answer(self, sender: str, opaque: int, answer: Answer, frame: bytes) -> None:
        answer = answer._replace(response=decode_frame(frame))  # the client reads the bytes
        now_us = self.events.now_us
        if self.acl is not None and self.acl.on_answer(sender, opaque, answer):
            return
        if sender in self.brokers:
            self._send_remote(sender, self.brokers[sender].on_answer(opaque, answer, now_us))
        elif sender in self.admins:
            self.admins[sender].on_answer(opaque, answer, now_us)
        else:
            self.operators[sender].on_answer(opaque, answer, now_us)

    def notify(self, address: str, command: RemotingCommand) -> int | None:
        """A 1008 from the leader to the broker at `address` (one-way: it may be lost); how long it
        takes to arrive (None: lost, or no broker there)."""
        self.count("notifications")
        broker = self.broker_by_address.get(address)
        if broker is not None and self.rng.random() >= self.knobs.faults.drop_p:
            took_us = self.client_delay_us()
            self.events.after(took_us, self._deliver_notify, broker, encode(command))
            return took_us
        return None

    def _deliver_notify(self, broker: SimBrokerClient, frame: bytes) -> None:
        broker.on_notify(decode_frame(frame), self.events.now_us)

    def is_leader(self, node: ReplicaSimNode) -> bool:
        return node.raw is not None and node_view(node).role == "leader"

    def leader(self) -> ReplicaSimNode | None:
        """The up, unpaused leader with the highest term, if any."""
        best = None
        for node_id in self.node_ids:
            node = self.nodes[node_id]
            if (node.up and not node.paused and self.is_leader(node)
                    and (best is None or node_view(node).term > node_view(best).term)):
                best = node
        return best

    # -- checks ---------------------------------------------------------------------------------
    def on_members_changed(self, node: ReplicaSimNode, change: MembersChanged) -> None:
        """Every node must apply the same membership at the same index (a restarted node replays
        the changes after its snapshot on top of the membership it saved last, so only a node's
        first life is compared; announcements at start name no applied change)."""
        if change.index != 0:
            self.removed_once.update(set(self.node_ids) - set(change.voters) - set(change.learners))
        if node.incarnation > 1 or change.index == 0:
            return
        self.checker.on_membership(node.id, change.index, (change.voters, change.learners,
                                                            tuple(sorted(change.addresses.items()))))

    def after_step(self, node: ReplicaSimNode) -> None:
        if node.raw is None:
            return
        view = node_view(node)
        if view.role == "leader":
            self.checker.observe_leader(node.id, view.term)
        if view.role != "follower" and _applied_own_removal(node):
            self.checker.fail(f"{node.id} is {view.role} in term {view.term} after applying its own removal")
        if view.role != "follower" and node.id in self.damaged:
            self.checker.fail(f"{node.id} is {view.role} in term {view.term} while repairing its damaged "
                              f"storage ({self.damaged[node.id]})")
        previous = self.last_view.get(node.id)
        if previous != (view.role, view.term):
            self.last_view[node.id] = (view.role, view.term)
            if view.role == "leader":
                self.leading_since[node.id] = (view.term, self.events.now_us)
            if view.role in ("leader", "candidate"):
                self.count(f"became_{view.role}")
                self.trace(f"{node.id} becomes {view.role} in term {view.term}")
        key = (node.id, node.incarnation)
        if view.commit < self.commit_seen.get(key, 0):
            self.checker.fail(f"commit went down on {node.id}: {self.commit_seen[key]} -> {view.commit}")
        self.commit_seen[key] = view.commit

    def _check_member_votes(self, grant: Message) -> None:
        """A node that applied its own removal never grants a vote."""
        node = self.nodes.get(grant.frm)
        if node is not None and node.replica is not None and _applied_own_removal(node):
            self.checker.fail(f"{grant.frm} grants a {grant.type.name} to {grant.to} after applying its own removal")

    def _check_one_pending_change(self, leader: ReplicaSimNode) -> None:
        """At most one membership change in the leader's log beyond what it applied."""
        replica = leader.replica
        assert replica is not None
        raw = replica.raw
        applied = max(replica.applied_index, raw.applied)  # the core counts a bootstrap's entries applied
        first, last = applied + 1, raw.last_index()
        if first > last:
            return
        pending = [e.index for e in raw.entries(first, last + 1) if e.type == EntryType.CONF_CHANGE]
        if len(pending) > 1:
            self.checker.fail(f"{leader.id} leads with membership changes {pending} pending at once "
                              f"(applied {applied})")

    # -- storage faults ---------------------------------------------------------------------------
    def damage_storage(self, node: ReplicaSimNode, rng: random.Random) -> None:
        """Detected damage on the stopped `node`'s disk: it restarts repairing what survived."""
        held = self.checker.held_committed(node.storage)
        damage = node.storage.damage(rng)
        if damage is None:
            return
        self.damaged[node.id] = damage.reason
        self.count("disk_damaged_emptied" if damage.emptied else "disk_damaged_prefix_kept")
        kept = "nothing kept" if damage.emptied else f"kept up to {damage.kept_last}"
        self.trace(f"nemesis: {node.id}'s disk is damaged: {damage.reason}; {kept}, repairing")
        self._copies_lost(node, held)

    def lose_tail(self, node: ReplicaSimNode, saves: int) -> None:
        """Undetected loss: the stopped `node`'s last `saves` saves never reached its disk."""
        held = self.checker.held_committed(node.storage)
        before = node.storage.last_index()
        lost = node.storage.lose_tail(saves)
        if not lost:
            return
        self.count("disk_lost_tail")
        self.trace(f"nemesis: {node.id}'s disk silently lost its last {lost} saves "
                   f"(log {before} -> {node.storage.last_index()})")
        self._copies_lost(node, held)

    def _quorums(self) -> tuple[dict[str, CrashableStorage], list[tuple[list[str], int]]]:
        storages = {node_id: self.nodes[node_id].storage for node_id in self.node_ids}
        everyone, voters = self.current_ids(), list(self.final_voters())
        return storages, [(everyone, len(everyone) // 2 + 1), (voters, len(voters) // 2 + 1)]

    def _copies_lost(self, node: ReplicaSimNode, held: set[int]) -> None:
        storages, quorums = self._quorums()
        self._report_forgiven(self.checker.on_copies_lost(node.id, held, storages, quorums, set(self.damaged)))

    def _report_forgiven(self, forgiven: list[int]) -> None:
        if forgiven:
            self.count("committed_below_majority")
            self.trace(f"committed {forgiven[0]}..{forgiven[-1]} now on fewer than a majority of intact "
                       "copies and repairing nodes: their loss is allowed")

    def on_end_repair(self, node: ReplicaSimNode) -> None:
        if self.damaged.pop(node.id, None) is not None:
            self.count("repairs_ended")
            self.trace(f"{node.id} ended its repair")
            storages, quorums = self._quorums()
            self._report_forgiven(self.checker.on_unfenced(node.id, storages, quorums, set(self.damaged)))

    def _check_repairs_ended(self) -> None:
        """Liveness: a damaged node that is up and a member ends its repair once the network is
        healed and, for REPAIR_DEADLINE_US, one leader has served and the node has run. Not
        checked: a node re-added by id after a removal (it refuses a leader's snapshot that
        predates its re-addition and stays behind, repairing or not: pitfall 17)."""
        if not self.damaged:
            return
        leader = self.leader()
        since = self.leading_since.get(leader.id) if leader is not None else None
        now = self.events.now_us
        if leader is None or since is None or since[0] != node_view(leader).term or now - since[1] < REPAIR_DEADLINE_US:
            self.count("repairs_unfinished_without_a_steady_leader")
            return
        leader_raw = leader.raw
        assert leader_raw is not None  # an up leader runs its core (node_view above read it)
        for node_id in sorted(self.damaged):
            node = self.nodes[node_id]
            if not node.up or node.retired or node_id not in leader.conf_state.members:
                continue
            if node_id in self.removed_once or now - node.started_us < REPAIR_DEADLINE_US:
                self.count("repairs_unfinished_unchecked")
                continue
            progress = leader_raw.progress_of(node_id)
            snapshot_sent_us = self.snapshot_sent_us.get(node_id)
            if (progress is not None and progress.state is ProgressState.SNAPSHOT) or \
                    (snapshot_sent_us is not None and now - snapshot_sent_us < REPAIR_DEADLINE_US):
                # a snapshot on its way, lost, or sent again lately: the simulated network reports no
                # lost send (the real transport does), so the leader retries only after
                # SNAPSHOT_REPORT_TIMEOUT_ELECTIONS election timeouts
                self.count("repairs_unfinished_snapshot_in_flight")
                continue
            self.checker.fail(f"liveness: {node_id} is still repairing ({self.damaged[node_id]}) although "
                              f"{leader.id} has led term {since[0]} for {(now - since[1]) // 1000} ms and it has "
                              f"run for {(now - node.started_us) // 1000} ms with the network healed")
            return

    def after_persist(self, node: ReplicaSimNode) -> None:
        if node.raw is not None:
            view = node_view(node)
            if view.role == "leader":
                self.checker.check_leader_log(node.id, view.term, node.storage)
                self._check_one_pending_change(node)

    # -- the run --------------------------------------------------------------------------------
    def run(self) -> SeedResult:
        """The whole seeded run: faults and load, then a quiet phase, then the final checks."""
        self.boot()
        self.run_until(self.knobs.active_us)
        if self.checker.ok and not self.halted:
            self._calm_down()
            self.run_until(self.knobs.active_us + self.knobs.quiet_us)
        return self.finish()

    def boot(self) -> None:
        for node_id in self.node_ids:
            self.nodes[node_id].start()
        intruders = sorted(self.acl.intruders) if self.acl is not None else []
        for name in sorted(self.brokers) + sorted(self.admins) + sorted(self.operators) + intruders:
            self.events.after(self.rng.randrange(self.knobs.brokers.step_us), self._client_step, name)
        self.nemesis.start()

    def run_until(self, until_us: int) -> None:
        """Process events up to virtual time `until_us`, stopping at the first violation."""
        try:
            while self.checker.ok and not self.halted and self.events.run_next(until_us):
                pass
        except RaftInvariantError as exc:
            if self.checker.forked_at is None:
                raise
            # after a permitted loss forked the log, a node holding the lost branch as committed
            # refuses the other (as a real node stops): the run ends there, what it checked stands
            self.halted = True
            self.count("forked_node_refused")
            self.trace(f"after the fork at {self.checker.forked_at} a node refuses the other branch: {exc}")
        except RmqcError as exc:
            # The core refusing to go on (an invariant check, a storage read that cannot be
            # answered) is a finding, reported like a violation with the trace that led to it.
            self.checker.fail(f"core raised {type(exc).__name__}: {exc}")
        self.events.now_us = max(self.events.now_us, until_us)

    def finish(self) -> SeedResult:
        """The end-of-run checks, and the report."""
        if self.checker.ok:
            # a fixed set of nodes (at most one outside the voters): a majority of all of them;
            # nodes that come and go: enough of the voters they settled on that every quorum of
            # those voters meets a holder (so any future leader has the entry). A removal commits
            # in the configuration before it, on nodes that then leave: shrinking 3 voters to 2
            # with one of the two behind leaves a committed entry on one remaining voter, which
            # is all Raft promises (and enough: the other needs its vote to lead).
            if self.operators:
                voters = self.final_voters()
                self.checker.check_durable_majority({n: self.nodes[n].storage for n in voters},
                                                    needed=len(voters) - (len(voters) // 2 + 1) + 1,
                                                    fenced=set(self.damaged))
            else:
                self.checker.check_durable_majority({n: self.nodes[n].storage for n in self.node_ids},
                                                    fenced=set(self.damaged))
        # A permitted loss (the history forked at a committed entry no majority held intact any
        # more) takes the controller's committed stream with it: its checks stop at the fork.
        if self.checker.ok and self.checker.forked_at is None:
            self.controller_checker.finish(self.controller_history, self._beliefs())
        if self.checker.ok and self.knobs.disk_faults and not self.halted:
            self._check_repairs_ended()
        if self.acl is not None:
            self.acl.finish()
        if self.checker.forked_at is not None:
            self.count("committed_lost_forks")
        self._count_controller()
        return SeedResult(
            seed=self.seed,
            nodes=self.knobs.nodes,
            violations=list(self.checker.violations),
            ops=self.controller_history.size(),
            sim_seconds=self.events.now_us / 1e6,
            trace=list(self.trace_lines),
            history=self.controller_history,
            counts=dict(sorted(self.counts.items())),
        )

    def _beliefs(self) -> list[BrokerBelief]:
        return [BrokerBelief(b.name, b.group, b.running, b.running_since_us, b.polled_us, b.broker_id,
                             b.master_id, b.master_epoch)
                for b in self.brokers.values()]

    def _count_controller(self) -> None:
        self.counts["controller_elections"] = self.controller_checker.elections
        self.counts["controller_brokers_checked_at_end"] = self.controller_checker.brokers_checked
        self.counts["controller_broker_requests"] = self.controller_history.requests
        assert self.controller_checker.routes is not None
        self.counts["controller_routes_checked"] = self.controller_checker.routes.routes_checked
        self.counts["controller_notifications"] = self.counts.get("notifications", 0)

    def _calm_down(self) -> None:
        self.nemesis.stop()
        self.nemesis.free_every_disk()
        for operator in self.operators.values():
            # the membership of the final checks is settled: the load commits entries under it
            operator.stop()
        self.net.heal()
        for node_id in self.current_ids():
            node = self.nodes[node_id]
            if not node.up:
                node.start()
            node.resume()
        for name in sorted(self.brokers):
            broker = self.brokers[name]
            if not broker.running:
                broker.restart(self.events.now_us)
        self.trace("quiet phase: network healed, all nodes and brokers up")


def run_seed(seed: int, knobs: SimKnobs | None = None) -> SeedResult:
    return World(seed, knobs or SimKnobs()).run()


def _applied_own_removal(node: ReplicaSimNode) -> bool:
    """The node's applied membership exists and lacks it (not a joining node before its addition)."""
    members = node.conf_state.members
    return bool(members) and node.id not in members
