"""Three ControllerNodes in one Trio run over real TCP: writes through a follower are forwarded,
reads on a follower are linearizable through ReadIndex (or stale on request), heartbeats sent only
to a follower reach the leader as digests, and forward_writes=false answers 2007 like Java."""

from __future__ import annotations

from pathlib import Path

import trio
from node_helpers import free_ports, wait_until

from rmqc.client import ControllerClient
from rmqc.config import NodeConfig, parse_peers
from rmqc.liveness import BrokerKey
from rmqc.node import ControllerNode
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode

CLUSTER = "C"


def three_configs(tmp_path: Path, **changes: object) -> list[NodeConfig]:
    ports = free_ports(3)
    peers = parse_peers(";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports)))
    return [NodeConfig(node_id=f"n{i}", peers=peers, data_dir=str(tmp_path / f"n{i}"), **changes)
            for i in range(3)]


async def start_three(nursery: trio.Nursery, configs: list[NodeConfig]) -> tuple[ControllerNode, list[ControllerNode]]:
    nodes = [ControllerNode(config) for config in configs]
    for node in nodes:
        await nursery.start(node.run)
    await wait_until(lambda: sum(node.replica.serving_as_leader for node in nodes) == 1
                     and all(node.replica.leader_id for node in nodes), timeout_s=10, what="one leader")
    leader = next(node for node in nodes if node.replica.serving_as_leader)
    return leader, [node for node in nodes if node is not leader]


async def test_follower_forwards_writes_and_serves_linearizable_reads(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, three_configs(tmp_path))
        follower = followers[0].config.listen_address
        async with ControllerClient([follower]) as client:
            answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": CLUSTER, "brokerName": "broker-a", "appliedBrokerId": 1,
                "registerCheckCode": "10.0.0.1:30911;1"}, address=follower)
            assert answer is not None and answer.code == 0, answer.remark  # forwarded to the leader
            assert leader.replica.state.group("broker-a") is not None
            # a linearizable read on the follower sees the write at once (ReadIndex, then apply)
            read = await client.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                        {"clusterName": CLUSTER, "brokerName": "broker-a"}, address=follower)
            assert read is not None and read.ext("nextBrokerId") == "2"
            assert followers[0].replica.state.group("broker-a") is not None  # served from its own state
            stale = await client.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                         {"clusterName": CLUSTER, "brokerName": "nobody", "consistency": "stale"},
                                         address=follower)
            assert stale is not None and stale.ext("nextBrokerId") == "1"
            metadata = await client.get_metadata(address=follower)
            assert metadata.ext("controllerLeaderAddress") == leader.config.listen_address
            assert metadata.ext("isLeader") == "false"
        nursery.cancel_scope.cancel()


async def test_heartbeats_to_a_follower_reach_the_leader(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, three_configs(tmp_path))
        follower = followers[1].config.listen_address
        async with ControllerClient([follower]) as client:
            await client.heartbeat(CLUSTER, "broker-z", 3, "10.0.0.9:30911", address=follower, epoch=4)
            key = BrokerKey(CLUSTER, "broker-z", 3)
            await wait_until(lambda: leader.replica.liveness.table.live_info(key) is not None,
                             what="digest at the leader")
            info = leader.replica.liveness.table.live_info(key)
            assert info is not None and info.epoch == 4
        nursery.cancel_scope.cancel()


async def test_forward_writes_off_answers_2007_on_followers(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        _, followers = await start_three(nursery, three_configs(tmp_path, forward_writes=False))
        follower = followers[0].config.listen_address
        async with ControllerClient([follower], max_retries=0) as client:
            answer = await client.request(RequestCode.CONTROLLER_ELECT_MASTER, {
                "clusterName": CLUSTER, "brokerName": "broker-a", "brokerId": 1, "designateElect": False,
                "invokeTime": 1}, address=follower)
            assert answer is not None
            assert (answer.code, answer.remark) == (2007, "The controller is not in leader state")
        nursery.cancel_scope.cancel()


async def test_idle_followers_wake_only_for_scans_and_deadlines(tmp_path: Path) -> None:
    """A follower once kept its first inactive-master scan time forever and, after that time, its
    liveness loop woke again at once, every round: an idle follower burned a third of a CPU."""
    scan_ms = 50
    async with trio.open_nursery() as nursery:
        _leader, followers = await start_three(nursery,
                                               three_configs(tmp_path, scan_inactive_master_interval_ms=scan_ms))
        await wait_until(lambda: all(f.replica.liveness.rounds >= 2 for f in followers), what="scans on followers")
        before = [f.replica.liveness.rounds for f in followers]
        window_s = 0.5
        await trio.sleep(window_s)  # the measured window itself: rounds counted over a fixed time
        rounds = [f.replica.liveness.rounds - b for f, b in zip(followers, before, strict=True)]
        # one scan per interval (plus slack for a late wake-up), never a busy loop
        assert all(r <= window_s * 1000 / scan_ms + 3 for r in rounds), rounds
        nursery.cancel_scope.cancel()


async def test_a_write_that_cannot_commit_times_out_and_the_leader_forgets_it(tmp_path: Path) -> None:
    """With both followers gone the entry can never commit: the request is answered with Java's
    commit-wait timeout after request_timeout_ms (before check-quorum ends the leadership), and
    the leader keeps nothing of it."""
    configs = three_configs(tmp_path, request_timeout_ms=300)
    nodes = [ControllerNode(config) for config in configs]
    scopes = [trio.CancelScope() for _ in nodes]

    async def run(node: ControllerNode, scope: trio.CancelScope,
                  task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await node.run(task_status=task_status)

    async with trio.open_nursery() as nursery:
        for node, scope in zip(nodes, scopes, strict=True):
            await nursery.start(run, node, scope)
        await wait_until(lambda: sum(node.replica.serving_as_leader for node in nodes) == 1,
                         timeout_s=10, what="a leader")
        leader = next(node for node in nodes if node.replica.serving_as_leader)
        for node, scope in zip(nodes, scopes, strict=True):
            if node is not leader:
                scope.cancel()
        async with ControllerClient([leader.config.listen_address], max_retries=0) as client:
            started_s = trio.current_time()
            answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": CLUSTER, "brokerName": "broker-x", "appliedBrokerId": 1,
                "registerCheckCode": "10.0.0.9:30911;1"})
            waited_s = trio.current_time() - started_s
        assert answer is not None and answer.code == 1 and "TimeoutException" in (answer.remark or ""), answer
        assert waited_s >= 0.3
        assert not leader.replica.proposals
        assert leader.replica.state.group("broker-x") is None
        nursery.cancel_scope.cancel()


async def test_shutdown_fails_waiting_requests(tmp_path: Path) -> None:
    """A write waits for a commit that cannot come (both followers gone); shutting the leader down
    answers it at once with the stop's error instead of leaving it to its request timeout (30 s
    here), and the shutdown returns as soon as that answer is written, well within its grace."""
    # an election timeout of 2-4 s: CheckQuorum cannot end the leadership (and fail the write on
    # its own) in the few ms between the write's arrival and the shutdown
    configs = three_configs(tmp_path, tick_ms=10, election_tick=200, request_timeout_ms=30_000)
    nodes = [ControllerNode(config) for config in configs]
    scopes = [trio.CancelScope() for _ in nodes]

    async def run(node: ControllerNode, scope: trio.CancelScope,
                  task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await node.run(task_status=task_status)

    answers: list[tuple[RemotingCommand | None, float]] = []
    async with trio.open_nursery() as nursery:
        for node, scope in zip(nodes, scopes, strict=True):
            await nursery.start(run, node, scope)
        await wait_until(lambda: sum(node.replica.serving_as_leader for node in nodes) == 1,
                         timeout_s=20, what="a leader")
        leader = next(node for node in nodes if node.replica.serving_as_leader)
        for node, scope in zip(nodes, scopes, strict=True):
            if node is not leader:
                scope.cancel()
        async with ControllerClient([leader.config.listen_address], max_retries=0, timeout_ms=30_000) as client:

            async def write() -> None:
                answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                    "clusterName": CLUSTER, "brokerName": "broker-z", "appliedBrokerId": 1,
                    "registerCheckCode": "10.0.0.8:30911;1"})
                answers.append((answer, trio.current_time()))

            nursery.start_soon(write)
            await wait_until(lambda: leader.server.requests_in_flight == 1 and leader.replica.proposals,
                             what="the write waiting for its commit")
            stopping_at = trio.current_time()
            await leader.shutdown(grace_s=5.0)
            shutdown_s = trio.current_time() - stopping_at
            assert leader.server.requests_in_flight == 0 and not leader.replica.proposals
            await wait_until(lambda: bool(answers), what="the write's answer")
        (answer, answered_at), = answers
        assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR, answer
        assert answer.remark == "node stopping"
        assert answered_at - stopping_at < 1.0 and shutdown_s < 1.0, (answered_at - stopping_at, shutdown_s)
        nursery.cancel_scope.cancel()


async def test_when_the_successor_cannot_win_another_survivor_takes_over_quickly(tmp_path: Path) -> None:
    """A killed leader's designated successor (first in peer order) campaigns at once; here it was
    restarted from an older log and must lose. The other survivor then campaigns after a short
    grace period instead of an election timeout (2-4 s here)."""
    configs = three_configs(tmp_path, tick_ms=10, election_tick=200)
    by_id = {config.node_id: config for config in configs}
    scopes: dict[str, trio.CancelScope] = {}
    nodes: dict[str, ControllerNode] = {}

    async def run(node_id: str, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            scopes[node_id] = scope
            nodes[node_id] = ControllerNode(by_id[node_id])
            await nodes[node_id].run(task_status=task_status)

    async with trio.open_nursery() as nursery:
        for node_id in by_id:
            await nursery.start(run, node_id)
        await wait_until(lambda: sum(n.replica.serving_as_leader for n in nodes.values()) == 1,
                         timeout_s=20, what="a leader")
        leader = next(n for n in nodes.values() if n.replica.serving_as_leader)
        successor = next(node_id for node_id in by_id if node_id != leader.config.node_id)
        other = next(node_id for node_id in by_id if node_id not in (leader.config.node_id, successor))
        scopes[successor].cancel()
        async with ControllerClient([leader.config.listen_address], max_retries=0) as client:
            answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": CLUSTER, "brokerName": "broker-y", "appliedBrokerId": 1,
                "registerCheckCode": "10.0.0.7:30911;1"})
        assert answer is not None and answer.code == 0  # committed by the leader and `other` alone
        await nursery.start(run, successor)  # back, with the shorter log
        await wait_until(lambda: nodes[other].replica.leader_id == leader.config.node_id,
                         what="other follows the leader")
        scopes[leader.config.node_id].cancel()
        killed_s = trio.current_time()
        await wait_until(lambda: nodes[other].replica.serving_as_leader, timeout_s=10, what="a new leader")
        assert trio.current_time() - killed_s < 1.5, "waited for an election timeout"
        nursery.cancel_scope.cancel()


def fsyncs(node: ControllerNode) -> float:
    exposition = node.node_metrics.exposition().decode()
    return float(next(line for line in exposition.splitlines()
                      if line.startswith("rmqc_fsync_seconds_count")).split()[-1])


async def apply_broker_id(client: ControllerClient, address: str, name: str) -> None:
    answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
        "clusterName": CLUSTER, "brokerName": name, "appliedBrokerId": 1,
        "registerCheckCode": f"10.0.0.1:30911;{name}"}, address=address)
    assert answer is not None and answer.code == 0, answer.remark


async def test_a_lone_write_is_driven_in_its_tasks_and_writes_arriving_together_share_passes(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, three_configs(tmp_path))
        address = leader.config.listen_address
        async with ControllerClient([address], max_in_flight=64) as client:
            before = [node.runner.passes_inline for node in (leader, *followers)]
            for i in range(10):
                await apply_broker_id(client, address, f"lone-{i}")
            after = [node.runner.passes_inline for node in (leader, *followers)]
            # each lone request, and its followers' answers, passed in the task that read it
            assert after[0] - before[0] >= 10
            # each append too, on at least the follower whose answer committed it
            assert max(after[1] - before[1], after[2] - before[2]) >= 10
            # 64 writes at once: one is alone when it arrives, the others wait for the driver
            # task and share its passes (group commit), not a save each
            saves_before = fsyncs(leader)
            async with trio.open_nursery() as writers:
                for i in range(64):
                    writers.start_soon(apply_broker_id, client, address, f"together-{i}")
            assert fsyncs(leader) - saves_before < 32
            # 8 clients one write after another: their requests come back in waves after the
            # answers, and the first of a wave waits for the others instead of a pass of its own
            inline_before = leader.runner.passes_inline

            async def writer(index: int) -> None:
                for j in range(10):
                    await apply_broker_id(client, address, f"wave-{index}-{j}")

            async with trio.open_nursery() as writers:
                for index in range(8):
                    writers.start_soon(writer, index)
            assert leader.runner.passes_inline - inline_before < 20  # of 80 writes
        nursery.cancel_scope.cancel()
