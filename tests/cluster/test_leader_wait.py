"""Real `rmqc serve` processes: the leader is killed with SIGKILL; the survivor that takes over
names itself leader in its 1005 answer at once, but commits nothing until the old leader's lease
has run out (150-200 ms). A write sent to it in that time, as a broker that just polled 1005
sends one, waits and commits instead of being refused 2007 (which a broker would retry only at its
next metadata refresh, 10 s later)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.remoting import RequestCode, ResponseCode
from rmqc.testing.cluster import CLUSTER, Cluster

pytestmark = pytest.mark.slow


async def test_a_write_to_the_new_leader_before_it_serves_waits_and_commits(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=3000, max_retries=0) as client:
            old = cluster.node(await cluster.wait_leader(client))
            survivors = [node for node in cluster.nodes if node is not old]
            old.kill(signal.SIGKILL)
            with trio.fail_after(5):
                while True:  # what a broker's metadata poll does, as fast as it can
                    named = [node for node in survivors
                             if (await client.get_metadata(address=node.address)).ext("isLeader") == "true"]
                    if named:
                        break
            answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": CLUSTER, "brokerName": "right-after-failover", "appliedBrokerId": 1,
                "registerCheckCode": "10.0.0.9:30911;1"}, address=named[0].address)
            assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
            await old.wait_exit()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()
