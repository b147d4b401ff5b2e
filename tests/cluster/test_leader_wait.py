"""Real `rmqc serve` processes: a write that reaches a follower while it knows no leader (the other
two nodes paused with SIGSTOP, so its election timer ran out and its campaigns found no quorum)
waits for one, half an election timeout at most, instead of being refused 2007 at once: it
commits when the others resume within the wait, and is refused once the wait is over."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.launcher import ServeNode
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqc.testing.cluster import CLUSTER, Cluster, wait_until

pytestmark = pytest.mark.slow

# 0.1 s ticks: elections after 1-2 s of silence, a wait of 0.5 s, room for a loaded machine
SLOW_ELECTIONS = ("tick_ms=100", "election_tick=10")
WAIT_S = 0.5


async def paused_all_but_one(cluster: Cluster, client: ControllerClient) -> tuple[list[ServeNode], ServeNode]:
    leader = cluster.node(await cluster.wait_leader(client))
    follower, other = [node for node in cluster.nodes if node is not leader]
    for node in (leader, other):
        node.kill(signal.SIGSTOP)

    async def leaderless() -> bool:
        return (await client.get_metadata(address=follower.address)).ext("controllerLeaderId") is None

    await wait_until(leaderless, 10, f"{follower.node_id} forgetting its leader")
    return [leader, other], follower


def apply_id(name: str) -> dict[str, object]:
    return {"clusterName": CLUSTER, "brokerName": name, "appliedBrokerId": 1, "registerCheckCode": "10.0.0.9:30911;1"}


async def test_a_write_to_a_follower_without_a_leader_waits_and_commits_once_one_is_back(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3, settings=SLOW_ELECTIONS)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=3000, max_retries=0) as client:
            paused, follower = await paused_all_but_one(cluster, client)
            answers: list[RemotingCommand] = []

            async def write() -> None:
                answers.append(await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply_id("held"),
                                                    address=follower.address))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                await trio.sleep(WAIT_S / 5)
                assert answers == []  # held by the follower, not refused
                for node in paused:
                    node.kill(signal.SIGCONT)  # the leader's next heartbeat names it to the follower
            (answer,) = answers
            assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
            after = await client.get_next_broker_id(CLUSTER, "held", address=follower.address)
            assert after.ext("nextBrokerId") == "2"
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()


async def test_a_follower_that_finds_no_leader_within_the_wait_refuses_2007(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3, settings=SLOW_ELECTIONS)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=3000, max_retries=0) as client:
            paused, follower = await paused_all_but_one(cluster, client)
            started = trio.current_time()
            answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply_id("refused"),
                                          address=follower.address)
            waited_s = trio.current_time() - started
            assert answer.code == ResponseCode.CONTROLLER_NOT_LEADER
            assert f"no leader known for {int(WAIT_S * 1000)} ms" in (answer.remark or "")
            assert waited_s >= WAIT_S - 0.05  # the client heard nothing before the wait was over
            for node in paused:
                node.kill(signal.SIGCONT)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()
