"""Randomised runs on the in-memory network with safety checks after every tick.

Faults: isolation, lossy links, restarts; operations: proposals, membership changes, transfers,
snapshots with compaction, ReadIndex and lease reads. Checks: one leader per term, identical applied
prefixes, and every read index covering everything committed anywhere when the read was issued.
Deterministic: each seed is replayable and printed on failure.
"""

from __future__ import annotations

import random

import pytest

from rmqc.errors import ProposalDropped
from rmqc.raft import ConfChange, ConfChangeType, ReadIndexDropped, Role

from .raftnet import Network


class Checker:
    def __init__(self, net: Network) -> None:
        self.net = net
        self.leaders_by_term: dict[int, str] = {}
        self.read_floor: dict[tuple[str, bytes], int] = {}

    def max_commit(self) -> int:
        return max(n.raft.log.committed for n in self.net.nodes.values())

    def check(self) -> None:
        net = self.net
        for node_id, node in net.nodes.items():
            if node.raft.role is Role.LEADER:
                seen = self.leaders_by_term.setdefault(node.raft.term, node_id)
                assert seen == node_id, f"two leaders in term {node.raft.term}\n{net.describe()}"
        seqs = [[(e.index, e.term, e.data) for e in net.applied[i]] for i in net.ids]
        longest = max(seqs, key=len)
        for seq in seqs:
            if seq and longest and seq[0][0] == longest[0][0]:
                assert seq == longest[: len(seq)], f"applied logs diverge\n{net.describe()}"
        for node_id, states in net.read_states.items():
            for state in states:
                floor = self.read_floor.pop((node_id, state.context), None)
                if floor is not None:
                    assert state.index >= floor, f"stale read index on {node_id}\n{net.describe()}"


def random_step(net: Network, checker: Checker, rng: random.Random, step: int) -> None:
    ids = net.ids
    roll = rng.random()
    if roll < 0.04:
        net.recover()
        net.isolate(rng.choice(ids))
    elif roll < 0.07:
        net.recover()
    elif roll < 0.10:
        net.drop(rng.choice(ids), rng.choice(ids), 0.5)
    elif roll < 0.12:
        net.restart(rng.choice(ids))
    leader = net.leader()
    if leader is None:
        return
    node = net.nodes[leader]
    action = rng.random()
    try:
        if action < 0.45:
            node.propose(f"{step}".encode())
        elif action < 0.50:
            node.propose_conf_change(ConfChange(
                rng.choice([ConfChangeType.ADD_LEARNER, ConfChangeType.ADD_VOTER]),
                rng.choice(ids)))
        elif action < 0.52:
            node.transfer_leader(rng.choice(ids))
        elif action < 0.60:
            reader = rng.choice(ids)
            ctx = f"r{step}".encode()
            checker.read_floor[(reader, ctx)] = checker.max_commit()
            net.nodes[reader].read_index(ctx)
        elif action < 0.65:
            index = node.lease_read()
            if index is not None:
                assert index >= checker.max_commit(), f"stale lease read\n{net.describe()}"
        elif action < 0.68:
            storage = net.storages[leader]
            applied = node.status().applied
            if applied > storage.snapshot().meta.index:
                storage.create_snapshot(applied, node.conf_state, b"")
                storage.compact(applied)
    except (ProposalDropped, ReadIndexDropped):
        pass  # refusals the API documents (no leader, a transfer, a pending change...); an invariant error fails


def run_random(seed: int, n_nodes: int, steps: int, chaos: bool = False) -> Network:
    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(1, n_nodes + 1)]
    net = Network(ids, seed=seed, max_size_per_msg=200, max_inflight_msgs=4)
    if chaos:  # duplicated and reordered messages
        net.duplicate_probability = 0.1
        net.reorder = True
    checker = Checker(net)
    for step in range(steps):
        random_step(net, checker, rng, step)
        net.tick()
        checker.check()
    return net


@pytest.mark.parametrize("seed", range(20))
def test_random_three_nodes(seed: int) -> None:
    net = run_random(seed, 3, 300)
    net.recover()
    net.tick_until(lambda: net.leader() is not None, 100)


@pytest.mark.parametrize("seed", range(10))
def test_random_five_nodes(seed: int) -> None:
    run_random(seed, 5, 300)


@pytest.mark.parametrize("seed", range(10))
def test_random_with_duplication_and_reordering(seed: int) -> None:
    run_random(seed, 3 + 2 * (seed % 2), 300, chaos=True)
