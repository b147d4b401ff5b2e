"""Randomised runs on the in-memory network with safety checks after every tick.

Deterministic: each seed is replayable and printed on failure.
"""

from __future__ import annotations

import random

import pytest

from rmqc.errors import ProposalDropped
from rmqc.raft import Role

from .raftnet import Network


def check_safety(net: Network, leaders_by_term: dict[int, str]) -> None:
    for node_id, node in net.nodes.items():
        if node.raft.role is Role.LEADER:
            seen = leaders_by_term.setdefault(node.raft.term, node_id)
            assert seen == node_id, f"two leaders in term {node.raft.term}\n{net.describe()}"
    # State-machine safety: applied sequences are prefixes of each other.
    seqs = [[(e.index, e.term, e.data) for e in net.applied[i]] for i in net.ids]
    longest = max(seqs, key=len)
    for seq in seqs:
        assert seq == longest[: len(seq)], f"applied logs diverge\n{net.describe()}"


def run_random(seed: int, n_nodes: int, steps: int) -> Network:
    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(1, n_nodes + 1)]
    net = Network(ids, seed=seed, max_size_per_msg=200, max_inflight_msgs=4)
    leaders: dict[int, str] = {}
    for step in range(steps):
        roll = rng.random()
        if roll < 0.05:
            net.recover()
            net.isolate(rng.choice(ids))
        elif roll < 0.08:
            net.recover()
        elif roll < 0.12:
            net.drop(rng.choice(ids), rng.choice(ids), 0.5)
        leader = net.leader()
        if leader is not None and rng.random() < 0.5:
            try:
                net.nodes[leader].propose(f"{seed}-{step}".encode())
            except ProposalDropped:
                pass
        net.tick()
        check_safety(net, leaders)
    return net


@pytest.mark.parametrize("seed", range(20))
def test_random_three_nodes(seed: int) -> None:
    net = run_random(seed, 3, 300)
    net.recover()
    net.tick_until(lambda: net.leader() is not None, 100)


@pytest.mark.parametrize("seed", range(10))
def test_random_five_nodes(seed: int) -> None:
    run_random(seed, 5, 300)
