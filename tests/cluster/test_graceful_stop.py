"""The graceful stop on real `rmqc serve` processes under a writer registering brokers: SIGTERM on
the leader hands the leadership to the most up-to-date voter before the process exits, no write is
answered with an error (the writes sent meanwhile are held, then forwarded to the new leader), the
process stops within its bound, and writes pause for less than an election timeout; a follower
just stops. With a follower paused (SIGSTOP: silent and behind), the handover goes to the other."""

from __future__ import annotations

import re
import signal
import sys
import time
from pathlib import Path

import pytest
import trio
from test_leader_transfer import ELECTION_TIMEOUT_MAX_S, _cancellable

from rmqc.client import ControllerClient
from rmqc.testing.cluster import Cluster, NodeProcess, wait_until
from rmqc.testing.writer import WriteLoad

pytestmark = pytest.mark.slow
# Two election timeouts (at most, for the handover) + the drain (1 s) + the shutdown grace (0.5 s).
STOP_BOUND_S = 2 * 0.5 + 0.05 + 1.0 + 0.5
HANDOVER = re.compile(r"stopping: handing the leadership to (\w+), the most up-to-date voter")


async def acked_after(load: WriteLoad, moment: float) -> bool:
    return bool(load.ack_times) and load.ack_times[-1] > moment


async def stop(node: NodeProcess) -> tuple[float, float]:
    """SIGTERM; (when sent, when the process had exited), perf_counter times."""
    started = time.perf_counter()
    node.kill(signal.SIGTERM)
    assert await node.wait_exit() == 0, node.log_tail()
    return started, time.perf_counter()


async def test_sigterm_on_the_leader_hands_over_and_fails_no_request(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, timeout_ms=8000,
                                                                    max_retries=10) as admin:
            leader = cluster.node(await cluster.wait_leader(admin))
            load = WriteLoad(cluster.addresses)
            writing = trio.CancelScope()
            await nursery.start(_cancellable, writing, load.run)

            follower = next(node for node in cluster.nodes if node is not leader)
            started, exited = await stop(follower)  # a follower just stops
            assert exited - started < STOP_BOUND_S
            assert "handing the leadership" not in follower.log_tail(50)
            await follower.start()

            moment = time.perf_counter()
            await wait_until(lambda: acked_after(load, moment), 10, "writes going on")
            started, exited = await stop(leader)
            print(f"\nleader stopped in {(exited - started) * 1000:.0f} ms", file=sys.stderr)
            assert exited - started < STOP_BOUND_S, exited - started
            new_leader = cluster.node(await cluster.wait_leader(admin))
            chosen = HANDOVER.search(leader.log_tail(100))
            assert chosen is not None, leader.log_tail(100)
            assert new_leader.node_id == chosen[1] and new_leader is not leader
            assert f"leadership handed to {new_leader.node_id} in" in leader.log_tail(100)
            await wait_until(lambda: acked_after(load, exited), 10, "a write acknowledged by the new leader")
            pause = load.pause_s(started, exited)
            print(f"write pause while the leader stopped: {pause * 1000:.0f} ms", file=sys.stderr)
            assert load.failures_between(started, time.perf_counter()) == []  # no request answered with an error
            assert pause < ELECTION_TIMEOUT_MAX_S, pause
            writing.cancel()
            await leader.start()
            assert await load.lost_writes(admin) == {}
            nursery.cancel_scope.cancel()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()


async def test_the_handover_skips_a_paused_follower(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, timeout_ms=8000,
                                                                    max_retries=10) as admin:
            leader = cluster.node(await cluster.wait_leader(admin))
            paused, other = (node for node in cluster.nodes if node is not leader)
            load = WriteLoad(cluster.addresses)
            writing = trio.CancelScope()
            await nursery.start(_cancellable, writing, load.run)
            paused.kill(signal.SIGSTOP)
            try:
                moment = time.perf_counter()
                await wait_until(lambda: acked_after(load, moment), 10, "writes going on without the paused node")
                await stop(leader)
            finally:
                paused.kill(signal.SIGCONT)
            chosen = HANDOVER.search(leader.log_tail(100))
            assert chosen is not None and chosen[1] == other.node_id, leader.log_tail(100)
            matches = dict(re.findall(r"(n\d) at (\d+)", leader.log_tail(100).split("most up-to-date voter")[-1]))
            assert int(matches[paused.node_id]) < int(matches[other.node_id]), matches  # it was behind
            assert await cluster.wait_leader(admin) == other.address
            writing.cancel()
            nursery.cancel_scope.cancel()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()
