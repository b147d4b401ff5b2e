"""The operator requests on three in-process ControllerNodes over real TCP: a leader that took over
from a vanished one refuses to transfer while it waits out the old leader's lease (issue 19) and
says so, then transfers once it serves; a snapshot is answered by any node at its applied index."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
from node_helpers import wait_until
from test_node_three_in_process import three_configs

from rmqc.client import ControllerClient
from rmqc.node import ControllerNode
from rmqc.remoting import RMQC_SNAPSHOT_SAVE, RMQC_TRANSFER_LEADER, ResponseCode
from rmqc.storage import decode_snapshot_file


async def run_in_scope(node: ControllerNode, scope: trio.CancelScope, *,
                       task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    with scope:
        await node.run(task_status=task_status)


async def test_takeover_leader_refuses_to_transfer_until_its_lease_wait_is_over(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        nodes = [ControllerNode(config) for config in three_configs(tmp_path)]
        scopes = [trio.CancelScope() for _ in nodes]
        for node, scope in zip(nodes, scopes, strict=True):
            await nursery.start(run_in_scope, node, scope)
        await wait_until(lambda: sum(node.replica.serving_as_leader for node in nodes) == 1, 10, "one leader")
        old = next(index for index, node in enumerate(nodes) if node.replica.serving_as_leader)
        scopes[old].cancel()  # its port closes: a survivor takes over at once, then waits out the lease
        survivors = [node for index, node in enumerate(nodes) if index != old]

        def waiting_leader() -> ControllerNode | None:
            return next((node for node in survivors if node.replica.raw is not None
                         and node.replica.leader_id == node.config.node_id
                         and node.replica.raw.commit_blocked_until_tick), None)

        await wait_until(lambda: waiting_leader() is not None, 10, "a takeover leader in its lease wait")
        leader = waiting_leader()
        assert leader is not None
        address = leader.config.listen_address
        async with ControllerClient([address], max_retries=0) as client:
            refused = await client.request(RMQC_TRANSFER_LEADER, None, address=address)
            assert refused.code == ResponseCode.SYSTEM_ERROR
            assert "refuses to transfer until that lease has run out" in (refused.remark or ""), refused.remark
            await wait_until(lambda: leader.replica.serving_as_leader, 10, "the wait to end")
            other = next(node for node in survivors if node is not leader).config.node_id
            moved = await client.request(RMQC_TRANSFER_LEADER, {"to": other}, address=address)
            assert moved.code == 0, moved.remark
            assert orjson.loads(moved.body)["to"] == other
            # any node, here the follower it now is, answers a snapshot of its applied state once it
            # has applied everything committed before the request, with the membership applied with it
            committed = max(node.replica.applied_index for node in survivors)
            saved = await client.request(RMQC_SNAPSHOT_SAVE, None, address=address)
            assert saved.code == 0, saved.remark
            snapshot = decode_snapshot_file(saved.body)
            assert snapshot.meta.index == int(saved.ext("index")) and snapshot.meta.index >= committed > 3
            assert snapshot.meta.conf_state.voters == ("n0", "n1", "n2")
        nursery.cancel_scope.cancel()
