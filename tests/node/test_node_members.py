"""Membership changes on ControllerNodes in one Trio run over real TCP (the fast check; the
real-process ones are in tests/cluster/test_members.py): a node started with --join and an empty
data directory is added as a learner and catches up, is promoted, a voter is removed and idles,
and the new member restarted on its data directory with neither join nor peers is a member again."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
from node_helpers import free_ports, wait_until
from test_node_three_in_process import CLUSTER, start_three, three_configs

from rmqc.client import ControllerClient, members_of
from rmqc.config import NodeConfig
from rmqc.node import ControllerNode
from rmqc.remoting import RequestCode


def joiner_config(tmp_path: Path, join: str) -> NodeConfig:
    (port,) = free_ports(1)
    return NodeConfig(node_id="n3", peers=(), listen=f"127.0.0.1:{port}", join_address=join,
                      data_dir=str(tmp_path / "n3"))


async def register(client: ControllerClient, broker_id: int) -> None:
    answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
        "clusterName": CLUSTER, "brokerName": "broker-a", "appliedBrokerId": broker_id,
        "registerCheckCode": f"10.0.0.{broker_id}:30911;1"})
    assert answer is not None and answer.code == 0, answer.remark


async def test_join_promote_remove_and_restart_without_join(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, three_configs(tmp_path))
        addresses = [leader.config.listen_address, *(node.config.listen_address for node in followers)]
        async with ControllerClient(addresses, timeout_ms=8000, max_retries=5) as client:
            await register(client, 1)
            config = joiner_config(tmp_path, followers[0].config.listen_address)  # any member will do
            joiner = ControllerNode(config)
            await nursery.start(joiner.run)
            await wait_until(lambda: joiner.is_member and joiner.replica.applied_index >= leader.replica.applied_index,
                             timeout_s=10, what="n3 added and caught up")
            assert joiner.replica.state.group("broker-a") is not None  # the state came with the log
            rows = {row["id"]: row for row in members_of(await client.list_members())}
            assert rows["n3"]["role"] == "learner" and rows["n3"]["address"] == config.listen_address

            promoted = await client.promote_member("n3")
            assert promoted.code == 0, promoted.remark
            assert "n3" in orjson.loads(promoted.body)["voters"]
            removed_node = followers[1]
            removed = await client.remove_member(removed_node.config.node_id)
            assert removed.code == 0, removed.remark
            await wait_until(lambda: not removed_node.is_member, what="the removed node sees its removal")
            assert removed_node.config.node_id not in leader.links.members  # its link is closed
            assert removed_node.links.members == {}  # and it dials no one (nor is refused over and over)
            await register(client, 2)  # n0, n1, n3 commit without n2

        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:  # n3 alone on its data directory: a member, no join
        restarted = ControllerNode(config.with_changes(join_address=""))
        await nursery.start(restarted.run)
        await wait_until(lambda: restarted.is_member, what="n3's stored membership")
        assert set(restarted.members) == {leader.config.node_id, followers[0].config.node_id, "n3"}
        assert restarted.config.node_id in restarted.replica.status().voters
        nursery.cancel_scope.cancel()
