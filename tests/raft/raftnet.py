"""A deterministic in-memory network of RawNodes for unit tests (etcd raft_test.go's `network`).

`stabilize()` plays every node's Ready loop (persist -> send -> apply -> advance) and delivers
messages breadth-first until nothing moves. Faults: `cut(a, b)`, `isolate(a)`, `drop(frm, to, p)`,
`ignore(type)`, `recover()`, and a `hook` that may veto any message.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace

from rmqc.raft import (
    Config,
    ConfState,
    Entry,
    EntryType,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    RawNode,
    ReadState,
    Role,
    decode_conf_change,
)

# A test that does not settle within this many delivery rounds has a livelock, not a slow network.
MAX_ROUNDS = 10_000


class Network:
    def __init__(
        self,
        ids: Iterable[str],
        seed: int = 0,
        *,
        voters: Iterable[str] | None = None,
        storages: dict[str, MemoryStorage] | None = None,
        **config: object,
    ) -> None:
        self.ids = list(ids)
        self.seed = seed
        self.rng = random.Random(seed)
        self.config = config
        bootstrap = list(voters) if voters is not None else self.ids
        self.storages: dict[str, MemoryStorage] = {}
        self.nodes: dict[str, RawNode] = {}
        self.applied: dict[str, list[Entry]] = {}
        self.read_states: dict[str, list[ReadState]] = {}
        self.snapshots_applied: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        for node_id in self.ids:
            self.storages[node_id] = (storages or {}).get(node_id) or MemoryStorage()
            self.applied[node_id] = []
            self.read_states[node_id] = []
            self._start(node_id, bootstrap)
            # The app persists the bootstrap membership so a restart finds it in storage.
            self.storages[node_id].save_conf_state(self.nodes[node_id].conf_state)
        self.cuts: set[tuple[str, str]] = set()
        self.drops: dict[tuple[str, str], float] = {}
        self.ignored: set[MessageType] = set()
        # The hook sees every message about to be delivered; it returns the message to deliver
        # (possibly changed) or None to drop it.
        self.hook: Callable[[Message], Message | None] | None = None
        self.queue: deque[Message] = deque()
        self.delivered: list[Message] = []
        self.duplicate_probability = 0.0
        self.reorder = False  # shuffle each delivery round (seeded)

    # -- nodes ---------------------------------------------------------------------------------
    def make_config(self, node_id: str) -> Config:
        return Config(id=node_id, **self.config)  # type: ignore[arg-type]

    def _start(self, node_id: str, peers: Iterable[str] = ()) -> None:
        self.starts[node_id] = self.starts.get(node_id, 0) + 1
        rng = random.Random(f"{self.seed}/{node_id}/{self.starts[node_id]}")
        self.nodes[node_id] = RawNode(
            self.make_config(node_id), self.storages[node_id], rng, tuple(peers)
        )

    def restart(self, node_id: str) -> None:
        """Crash and restart from storage: persisted state survives, volatile state is lost, and
        the state machine is rebuilt by replaying the log (applied starts at the snapshot)."""
        self.queue = deque(m for m in self.queue if m.to != node_id)
        self.applied[node_id] = []
        self._start(node_id)

    def add_node(self, node_id: str) -> None:
        """A brand-new empty node that will learn its configuration from the leader."""
        self.ids.append(node_id)
        self.storages[node_id] = MemoryStorage()
        self.applied[node_id] = []
        self.read_states[node_id] = []
        self._start(node_id)

    def node(self, node_id: str) -> RawNode:
        return self.nodes[node_id]

    def leader(self) -> str | None:
        leaders = [i for i, n in self.nodes.items() if n.raft.role is Role.LEADER]
        top = max((self.nodes[i].raft.term for i in leaders), default=0)
        current = [i for i in leaders if self.nodes[i].raft.term == top]
        return current[0] if current else None

    # -- faults --------------------------------------------------------------------------------
    def cut(self, a: str, b: str) -> None:
        self.cuts |= {(a, b), (b, a)}

    def cut_one_way(self, frm: str, to: str) -> None:
        self.cuts.add((frm, to))

    def isolate(self, a: str) -> None:
        for other in self.ids:
            if other != a:
                self.cut(a, other)

    def drop(self, frm: str, to: str, probability: float) -> None:
        self.drops[(frm, to)] = probability

    def ignore(self, msg_type: MessageType) -> None:
        self.ignored.add(msg_type)

    def recover(self) -> None:
        self.cuts.clear()
        self.drops.clear()
        self.ignored.clear()
        self.hook = None

    def _filter(self, m: Message) -> Message | None:
        if m.to not in self.nodes or (m.frm, m.to) in self.cuts or m.type in self.ignored:
            return None
        p = self.drops.get((m.frm, m.to), 0.0)
        if p and self.rng.random() < p:
            return None
        return m if self.hook is None else self.hook(m)

    # -- the application's Ready loop ------------------------------------------------------------
    def process_ready(self, node_id: str) -> list[Message]:
        node = self.nodes[node_id]
        out: list[Message] = []
        while node.has_ready():
            rd = node.ready()
            self.storages[node_id].save(rd.hard_state, rd.entries, rd.snapshot)
            out.extend(rd.messages)
            out.extend(rd.persist_messages)
            if rd.snapshot is not None:
                self.applied[node_id] = []
                self.snapshots_applied[node_id] = rd.snapshot.meta.index
            for entry in rd.committed_entries:
                self._apply(node_id, entry)
            self.read_states[node_id].extend(rd.read_states)
            node.advance(rd)
        return out

    def _apply(self, node_id: str, entry: Entry) -> None:
        self.applied[node_id].append(entry)
        if entry.type is EntryType.CONF_CHANGE:
            cs = self.nodes[node_id].apply_conf_change(decode_conf_change(entry.data))
            self.storages[node_id].save_conf_state(cs)

    def collect(self) -> None:
        for node_id in list(self.nodes):
            self.queue.extend(self.process_ready(node_id))

    def deliver_one_round(self) -> bool:
        batch = list(self.queue)
        self.queue.clear()
        if self.duplicate_probability:
            batch += [m for m in batch if self.rng.random() < self.duplicate_probability]
        if self.reorder:
            self.rng.shuffle(batch)
        for original in batch:
            m = self._filter(original)
            if m is not None:
                self.delivered.append(m)
                self.nodes[m.to].step(m)
        return bool(batch)

    def stabilize(self) -> None:
        for _ in range(MAX_ROUNDS):
            self.collect()
            if not self.queue:
                return
            self.deliver_one_round()
        raise AssertionError(f"network did not settle in {MAX_ROUNDS} rounds (seed {self.seed})")

    def send(self, *msgs: Message) -> None:
        self.queue.extend(msgs)
        self.stabilize()

    # -- conveniences ----------------------------------------------------------------------------
    def tick(self, node_ids: Iterable[str] | None = None, ticks: int = 1) -> None:
        for _ in range(ticks):
            for node_id in list(node_ids if node_ids is not None else self.nodes):
                self.nodes[node_id].tick()
            self.stabilize()

    def tick_until(self, predicate: Callable[[], bool], max_ticks: int) -> int:
        """Tick everyone until predicate holds; returns ticks used. Bounded: fails, never hangs."""
        for used in range(max_ticks + 1):
            if predicate():
                return used
            self.tick()
        raise AssertionError(f"condition not reached within {max_ticks} ticks (seed {self.seed})")

    def unstick(self) -> None:
        """As if long had passed since every restart: restarted nodes refuse votes for an
        election timeout, and their grants make a leader wait for a lease (they may have acked
        one before crashing), which scripted tests skip."""
        for node in self.nodes.values():
            node.raft.leader_contact_elapsed = node.raft.config.election_tick
            node.raft.lease_age = 2 * node.raft.config.election_tick

    def elect(self, node_id: str) -> None:
        self.nodes[node_id].campaign()
        self.stabilize()
        assert self.nodes[node_id].raft.role is Role.LEADER, self.describe()

    def propose(self, node_id: str, data: bytes) -> None:
        self.nodes[node_id].propose(data)
        self.stabilize()

    def payloads(self, node_id: str) -> list[bytes]:
        return [e.data for e in self.applied[node_id] if e.type is EntryType.NORMAL and e.data]

    def describe(self) -> str:
        rows = []
        for node_id, node in self.nodes.items():
            s = node.status()
            rows.append(
                f"{node_id}: {s.role.value} term={s.term} lead={s.leader} commit={s.commit} "
                f"applied={s.applied} last={s.last_index}"
            )
        return f"seed={self.seed}\n" + "\n".join(rows)


def elected(ids: list[str], leader: str = "n1", seed: int = 0, **config: object) -> Network:
    """A network of `ids` in which `leader` won an election and everything settled."""
    net = Network(ids, seed=seed, **config)
    net.elect(leader)
    return net


def preloaded(
    terms: list[int], term: int = 0, vote: str | None = None, commit: int = 0,
    voters: Iterable[str] = (),
) -> MemoryStorage:
    """A storage whose log holds one entry per element of `terms` (index i+1 has terms[i])."""
    storage = MemoryStorage()
    storage.save(
        HardState(max([term, *terms]), vote, commit),
        [Entry(i + 1, t) for i, t in enumerate(terms)],
    )
    if voters:
        storage.save_conf_state(ConfState(voters=tuple(voters)))
    return storage


def single(node_id: str = "n1", peers: Iterable[str] = ("n1", "n2", "n3"),
           storage: MemoryStorage | None = None, **config: object) -> tuple[RawNode, MemoryStorage]:
    """One RawNode outside any network, for message-level tests."""
    storage = storage or MemoryStorage()
    node = RawNode(Config(id=node_id, **config), storage, random.Random(node_id), tuple(peers))  # type: ignore[arg-type]
    drain(node, storage)  # persist the bootstrap
    storage.save_conf_state(node.conf_state)
    return node, storage


def drain(node: RawNode, storage: MemoryStorage) -> list[Message]:
    """Play the Ready loop for one node (persist, collect messages, apply conf changes, advance)."""
    out: list[Message] = []
    while node.has_ready():
        rd = node.ready()
        storage.save(rd.hard_state, rd.entries, rd.snapshot)
        out.extend(rd.messages + rd.persist_messages)
        for entry in rd.committed_entries:
            if entry.type is EntryType.CONF_CHANGE:
                storage.save_conf_state(node.apply_conf_change(decode_conf_change(entry.data)))
        node.advance(rd)
    return out


def msg(kind: MessageType, frm: str, to: str, term: int, **fields: object) -> Message:
    return Message(kind, to, frm, term=term, **fields)  # type: ignore[arg-type]


def with_term(m: Message, term: int) -> Message:
    return replace(m, term=term)
