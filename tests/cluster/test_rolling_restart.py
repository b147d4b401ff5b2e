"""The rolling restart of docs/operations.md on real `rmqc serve` processes under load: followers
first, then the leader after `transfer-leader`, one at a time, each back and caught up before the
next. Writes (a writer registering brokers) pause for less than one election timeout per restart,
no acknowledged write is lost, and the heartbeating broker group keeps its master."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import orjson
import pytest
import trio
from test_leader_transfer import ELECTION_TIMEOUT_MAX_S, _cancellable

from rmqc.client import ControllerClient
from rmqc.remoting import RMQC_NODE_STATUS, RMQC_TRANSFER_LEADER
from rmqc.testing.cluster import Cluster, NodeProcess, replica_info, start_group, wait_until
from rmqc.testing.writer import WriteLoad

pytestmark = pytest.mark.slow
CATCH_UP_S = 30.0


async def status_of(client: ControllerClient, address: str) -> dict:
    answer = await client.request(RMQC_NODE_STATUS, None, address=address)
    return orjson.loads(answer.body)


async def caught_up(client: ControllerClient, node: NodeProcess, leader: str) -> None:
    """`node` follows `leader` and has applied what the leader had committed when we looked."""
    target = (await status_of(client, leader))["commit"]

    async def following() -> bool:
        status = await status_of(client, node.address)
        return status["role"] == "follower" and status["leaderAddress"] == leader and status["applied"] >= target

    await wait_until(following, CATCH_UP_S, f"{node.node_id} to follow {leader} up to index {target}", interval_s=0.02)


async def restart(node: NodeProcess) -> None:
    node.kill(signal.SIGTERM)
    assert await node.wait_exit() == 0, node.log_tail()
    await node.start()


async def test_rolling_restart_under_load(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, timeout_ms=8000,
                                                                    max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            await start_group(nursery, cluster, "broker-a")
            master_before = await replica_info(admin, "broker-a")
            load = WriteLoad(cluster.addresses)
            writing = trio.CancelScope()
            await nursery.start(_cancellable, writing, load.run)
            order = [n for n in cluster.nodes if n.address != leader] + [cluster.node(leader)]
            pauses = []
            for node in order:
                started = time.perf_counter()
                if node.address == leader:  # the leader last, after handing its role over
                    moved = await admin.request(RMQC_TRANSFER_LEADER)
                    assert moved.code == 0, moved.remark
                    leader = cluster.node(orjson.loads(moved.body)["to"]).address
                await restart(node)
                await caught_up(admin, node, leader)
                done = time.perf_counter()
                await load.wait_acks(1, after=done, timeout_s=10)
                pauses.append(load.pause_s(started, done))
            print(f"\nwrite pause per restart (ms): {[round(p * 1000) for p in pauses]}", file=sys.stderr)
            assert max(pauses) < ELECTION_TIMEOUT_MAX_S, pauses
            writing.cancel()
            assert await load.lost_writes(admin) == {}
            assert await replica_info(admin, "broker-a") == master_before  # the brokers kept their master
            nursery.cancel_scope.cancel()
    finally:
        await cluster.stop()
