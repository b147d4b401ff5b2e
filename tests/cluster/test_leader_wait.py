"""Real `rmqc serve` processes: a write that reaches a follower while it knows no leader (the
other two nodes paused with SIGSTOP, so its election timer ran out and its campaigns found no
quorum) waits for one instead of being refused 2007 at once, and commits when the others resume
(chaos runs found followers bouncing writes for 0.3-0.5 s after every healed link fault)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.remoting import RemotingCommand
from rmqc.testing.cluster import CLUSTER, Cluster, wait_until

pytestmark = pytest.mark.slow


async def test_a_write_to_a_follower_without_a_leader_waits_and_commits_once_one_is_back(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=2000, max_retries=0) as client:
            leader = cluster.node(await cluster.wait_leader(client))
            follower, other = [node for node in cluster.nodes if node is not leader]
            for node in (leader, other):
                node.kill(signal.SIGSTOP)

            async def leaderless() -> bool:
                return (await client.get_metadata(address=follower.address)).ext("controllerLeaderId") is None

            await wait_until(leaderless, 5, f"{follower.node_id} forgetting its leader")
            answers: list[RemotingCommand] = []

            async def write() -> None:
                answers.append(await client.request(1013, {
                    "clusterName": CLUSTER, "brokerName": "waits-for-leader", "appliedBrokerId": 1,
                    "registerCheckCode": "10.0.0.9:30911;1"}, address=follower.address))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                await trio.sleep(0.3)
                assert answers == []  # held by the follower, not refused
                for node in (leader, other):
                    node.kill(signal.SIGCONT)
            (answer,) = answers
            assert answer.code == 0, (answer.code, answer.remark)
            after = await client.get_next_broker_id(CLUSTER, "waits-for-leader", address=follower.address)
            assert after.ext("nextBrokerId") == "2"
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()
