"""`rmqc admin transfer-leader` on real `rmqc serve` processes while a writer registers brokers and
a broker group heartbeats: every transfer is answered once the new leader serves, writes pause for
less than an election timeout, no acknowledged write is lost, the group keeps its master, and the
refusals say what is wrong. Prints the pauses (bench/bench_transfer.py measures 30+)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.launcher import rmqc_argv
from rmqc.remoting import RMQC_TRANSFER_LEADER
from rmqc.testing.cluster import Cluster, replica_info, start_group
from rmqc.testing.writer import WriteLoad

pytestmark = pytest.mark.slow
TRANSFERS = 6
# One election timeout at most (election_tick 10 x 50 ms, randomised up to twice that): a transfer
# must pause writes for less than the election it replaces.
ELECTION_TIMEOUT_MAX_S = 1.0


async def transfer(client: ControllerClient, to: str | None = None) -> tuple[int, str | None, dict]:
    answer = await client.request(RMQC_TRANSFER_LEADER, {"to": to} if to else None)
    return answer.code, answer.remark, orjson.loads(answer.body) if answer.code == 0 else {}


async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process([*rmqc_argv(), *args], capture_stdout=True, capture_stderr=True, check=False)


async def test_transfer_leader_under_load(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, timeout_ms=8000,
                                                                    max_retries=10) as admin:
            await cluster.wait_leader(admin)
            await start_group(nursery, cluster, "broker-a")
            master_before = await replica_info(admin, "broker-a")
            load = WriteLoad(cluster.addresses)
            writing = trio.CancelScope()
            await nursery.start(_cancellable, writing, load.run)
            pauses = []
            for number in range(TRANSFERS):
                leader = cluster.node(await cluster.wait_leader(admin)).node_id
                wanted = None if number % 2 == 0 else next(n.node_id for n in cluster.nodes if n.node_id != leader)
                started = time.perf_counter()
                code, remark, moved = await transfer(admin, wanted)
                answered = time.perf_counter()
                assert code == 0, remark
                assert moved["from"] == leader and moved["to"] != leader and moved["to"] == (wanted or moved["to"])
                assert cluster.node(await cluster.wait_leader(admin)).node_id == moved["to"]
                await load.wait_acks(1, after=answered, timeout_s=10)  # the new leader takes writes
                pauses.append(load.pause_s(started, answered))
            print(f"\nwrite pause per transfer (ms): {[round(p * 1000) for p in pauses]}", file=sys.stderr)
            assert max(pauses) < ELECTION_TIMEOUT_MAX_S, pauses
            await check_refusals(admin, cluster)
            writing.cancel()
            assert await load.lost_writes(admin) == {}
            assert await replica_info(admin, "broker-a") == master_before  # brokers keep their master
            nursery.cancel_scope.cancel()
    finally:
        await cluster.stop()


async def _cancellable(scope: trio.CancelScope, run: Callable[..., Awaitable[None]], *,
                       task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """`run` under `scope`, so the test can stop it alone (the brokers in the nursery keep going)."""
    with scope:
        await run(task_status=task_status)


async def check_refusals(admin: ControllerClient, cluster: Cluster) -> None:
    leader = cluster.node(await cluster.wait_leader(admin)).node_id
    code, remark, _ = await transfer(admin, "n9")
    assert code == 1 and "unknown node id 'n9'" in (remark or ""), remark
    code, _remark, moved = await transfer(admin, leader)
    assert code == 0 and moved["from"] == moved["to"] == leader
    # the command itself, through the followers too (they name the leader; the client goes there)
    follower = next(n.address for n in cluster.nodes if n.node_id != leader)
    done = await cli("admin", "transfer-leader", "-a", follower, "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["body"]["from"] == leader
    refused = await cli("admin", "transfer-leader", "-a", cluster.controllers, "--to", "n9")
    assert refused.returncode == 1 and b"unknown node id" in refused.stderr, refused.stderr
    assert b"name one of the voters" in refused.stderr  # what to do, not "failed internally"
