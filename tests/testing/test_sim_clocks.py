"""The simulator's wall clocks (stepped and drifting apart from the monotonic ones, in every profile)
and a paused node's bounded backlog (what each peer's outbox holds)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmqc.peerwire import encode_messages
from rmqc.raft._types import Message, MessageType
from rmqc.testing._simreplica import WALL_EPOCH_MS
from rmqc.testing._simworld import WallKnobs, World
from rmqc.testing.sim import PROFILES, SimKnobs, nodes_for_seed, run_seed

NO_STEPS = WallKnobs(spread_us=0, one_always=False, stepping_p=0.0)


def test_a_wall_clock_steps_and_drifts_apart_from_the_monotonic_clock() -> None:
    world = World(0, replace(SimKnobs(), wall=NO_STEPS))
    node = world.nodes["n0"]
    assert (node.local_ms(), node.wall_ms()) == (0, WALL_EPOCH_MS)
    node.step_wall(-1_500_000, 0.5)  # 1.5 s back, then 1.5 wall ms per monotonic ms
    world.events.now_us = 100_000 * (1 + node.drift)  # 100 ms of the node's monotonic clock
    assert node.local_ms() == 100
    assert node.wall_ms() == WALL_EPOCH_MS - 1_500 + 150
    node.set_drift(0.3)  # the nemesis skews the monotonic clock: the wall clock stays continuous
    assert node.wall_ms() == WALL_EPOCH_MS - 1_500 + 150


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_steps_the_wall_clocks_of_some_nodes_in_every_seed(profile: str) -> None:
    for seed in range(10):
        world = World(seed, replace(PROFILES[profile], nodes=nodes_for_seed(seed, None)))
        walls = [node.wall_ms() for node in world.nodes.values()]
        assert max(walls) - min(walls) <= 2 * world.knobs.wall.spread_us // 1000 and min(walls) > WALL_EPOCH_MS - 50
        assert any(node.wall_drift != 0 for node in world.nodes.values()), (profile, seed)
        world.run_until(world.knobs.active_us + world.knobs.quiet_us)
        assert world.counts.get("wall_clock_steps", 0) > 0, (profile, seed)
        assert any(abs(node.wall_ms() - WALL_EPOCH_MS - node.local_ms()) > 10 for node in world.nodes.values())


def test_the_replica_decides_nothing_on_the_wall_clock() -> None:
    """Wall clocks stepped and drifting or not, a seed makes the same decisions (the wall clock is
    only stamped into commands): the same elections, requests, notifications and faults."""
    for seed in (3, 4):
        stepped = run_seed(seed, replace(PROFILES["default"], nodes=nodes_for_seed(seed, None)))
        steady = run_seed(seed, replace(PROFILES["default"], nodes=nodes_for_seed(seed, None), wall=NO_STEPS))
        assert stepped.ok and steady.ok
        assert stepped.counts.pop("wall_clock_steps") > 0 and "wall_clock_steps" not in steady.counts
        assert stepped.counts == steady.counts and stepped.ops == steady.ops


def test_a_paused_node_holds_what_each_peer_outbox_holds() -> None:
    knobs = replace(SimKnobs(), node=replace(SimKnobs().node, peer_outbox_messages=3))
    world = World(0, knobs)
    node = world.nodes["n1"]
    node.start()
    node.pause()
    for i in range(5):
        node.deliver("n0", encode_messages([Message(MessageType.HEARTBEAT, to="n1", frm="n0", term=1, commit=i)]))
    node.deliver("n2", encode_messages([Message(MessageType.HEARTBEAT, to="n1", frm="n2", term=1)]))
    # the oldest two of n0's are pushed out of n0's outbox, n2's is not touched
    assert [held.dropped for held in node.deferred] == [True, True, False, False, False, False]
    assert world.counts["paused_backlog_dropped"] == 2
    node.resume()
    assert node.deferred == [] and not node.paused
