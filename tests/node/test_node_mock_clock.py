"""Node logic on Trio's MockClock (autojump): the node's one clock is `trio.current_time()`, so
elections, leases and heartbeat expiry take seconds of virtual time and milliseconds of wall time.
The nodes still talk over real loopback sockets and write real LMDB files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing
from node_helpers import wait_until
from test_node_single import CLUSTER, register, single_config, start
from test_node_three_in_process import start_three, three_configs

import rmqc.node._saver as saver_module
from rmqc.client import ControllerClient
from rmqc.node import ControllerNode

HEARTBEAT_TIMEOUT_MS = 60_000  # a minute of virtual time
WALL_BOUND_S = 10.0  # on a loaded 2-core machine; each case takes well under a second alone


@pytest.fixture(autouse=True)
def saves_waited_for_in_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every save waited for with the event loop blocked, however long the fsync takes. A save left
    to the saver thread (after 50 ms of wall time) leaves every task asleep, and the autojump clock
    then runs virtual time on from timer to timer for as long as the thread writes: one slow fsync
    (a full CI run) became 8 virtual seconds and a master replaced 69 s after its 60 s timeout.
    Blocked in the loop, a save costs no virtual time, as the logic under test assumes."""
    monkeypatch.setattr(saver_module, "SAVE_PATIENCE_S", 3600.0)


async def test_a_silent_master_is_replaced_after_its_heartbeat_timeout(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    wall_started = time.monotonic()
    async with trio.open_nursery() as nursery:
        node = await start(nursery, single_config(tmp_path))
        async with ControllerClient([node.listen_address]) as client:
            master, replica = "10.0.0.1:1", "10.0.0.2:1"
            assert await register(client, "g", master) == 1
            await client.heartbeat(CLUSTER, "g", 1, master, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
            assert (await client.elect_master(CLUSTER, "g", 1)).code == 0
            assert await register(client, "g", replica) == 2
            await client.heartbeat(CLUSTER, "g", 2, replica, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
            assert (await client.alter_sync_state_set("g", 1, 1, [1, 2], 1)).code == 0
            silent_since = trio.current_time()

            def master_id() -> int | None:
                group = node.replica.state.group("g")
                return None if group is None else group.master_id

            while master_id() == 1:  # broker 2 heartbeats every second; broker 1 is silent
                await client.heartbeat(CLUSTER, "g", 2, replica, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
                await trio.sleep(1.0)
            took_s = trio.current_time() - silent_since
            # here, before the client's connection closes: that closing fails broker 2 over too
            assert master_id() == 2
        nursery.cancel_scope.cancel()
    # expired by deadline: not before the timeout, and not a scan interval after it
    assert HEARTBEAT_TIMEOUT_MS / 1000 <= took_s <= HEARTBEAT_TIMEOUT_MS / 1000 + 2
    assert time.monotonic() - wall_started < WALL_BOUND_S


async def test_a_killed_leader_is_replaced_in_virtual_time(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    wall_started = time.monotonic()
    configs = three_configs(tmp_path)
    async with trio.open_nursery() as nursery:
        scopes = [trio.CancelScope() for _ in configs]
        nodes = [ControllerNode(config) for config in configs]
        for scope, node in zip(scopes, nodes, strict=True):
            await nursery.start(run_in, scope, node)
        await wait_until(lambda: sum(node.replica.serving_as_leader for node in nodes) == 1, 10, "a leader")
        old = next(index for index, node in enumerate(nodes) if node.replica.serving_as_leader)
        killed_at = trio.current_time()
        scopes[old].cancel()  # its port closes: the survivors notice and one takes over
        survivors = [node for index, node in enumerate(nodes) if index != old]
        await wait_until(lambda: any(node.replica.serving_as_leader for node in survivors), 10, "a new leader")
        took_s = trio.current_time() - killed_at
        nursery.cancel_scope.cancel()
    # The port refuses at once (virtual time), a survivor takes over and commits after waiting out
    # the lease the old leader may hold: lease_ticks + 1 ticks at most (150-200 ms by default, the
    # documented figure), plus one tick for the tick boundary; the poll adds 5 ms.
    tick_s = configs[0].tick_ms / 1000
    assert took_s <= (configs[0].lease_ticks + 2) * tick_s + 0.005, took_s
    assert time.monotonic() - wall_started < WALL_BOUND_S



IDLE_S = 60.0


async def test_idle_nodes_wake_their_timer_rarely_and_keep_their_leader(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """Issue 21: no timer wake-up per tick while idle. Over a virtual idle minute a follower's
    timer wakes about once per election timeout (heartbeats feed its ticks; 10-19 ticks, less the
    ticks since the last heartbeat), the leader's at its idle heartbeats (every
    idle_heartbeat_tick) and CheckQuorum; before, every node woke on each of the 1,200 ticks.
    The leader and its term do not change meanwhile."""
    wall_started = time.monotonic()
    configs = three_configs(tmp_path)
    ticks = int(IDLE_S * 1000 / configs[0].tick_ms)
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, configs)
        await trio.sleep(configs[0].election_tick * configs[0].tick_ms / 1000)  # the lease is no longer wanted
        term = leader.replica.term
        wakeups = {node.config.node_id: count_advance_time(node) for node in (leader, *followers)}
        await trio.sleep(IDLE_S)  # the measured idle window itself
        nursery.cancel_scope.cancel()
    assert leader.replica.serving_as_leader and leader.replica.term == term
    assert all(node.replica.leader_id == leader.config.node_id for node in followers)
    # its idle heartbeats and its CheckQuorum every election timeout
    idle_heartbeat_tick, election_tick = configs[0].idle_heartbeat_tick, configs[0].election_tick
    assert wakeups[leader.config.node_id][0] <= ticks / idle_heartbeat_tick + ticks / election_tick
    for follower in followers:  # at the timeout counted from the last heartbeat before the previous wake-up
        assert wakeups[follower.config.node_id][0] <= ticks / (election_tick - idle_heartbeat_tick)
    assert time.monotonic() - wall_started < WALL_BOUND_S


def count_advance_time(node: ControllerNode) -> list[int]:
    """A one-item list counting the node's calls of replica.advance_time from now on (its timer)."""
    replica, calls = node.replica, [0]
    advance_time = replica.advance_time

    def counted() -> None:
        calls[0] += 1
        advance_time()

    replica.advance_time = counted  # type: ignore[method-assign]
    return calls


async def run_in(scope: trio.CancelScope, node: ControllerNode,
                 *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Run a node whose process can be "killed" (its scope cancelled: its port closes at once)."""
    with scope:
        await node.run(task_status=task_status)
