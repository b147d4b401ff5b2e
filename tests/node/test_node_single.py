"""One ControllerNode in-process over real TCP on 127.0.0.1: the spec 13.1 trace with a real client,
1008 to a fake broker, restart from disk, snapshots, and graceful shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from node_helpers import free_ports, wait_until

from rmqc.client import ControllerClient
from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode
from rmqc.remoting import FrameDecoder, RemotingCommand, loads_fastjson
from rmqc.storage import LmdbStorage

CLUSTER = "C"


def single_config(tmp_path: Path, **changes: object) -> NodeConfig:
    (port,) = free_ports(1)
    return NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0"), **changes)


async def start(nursery: trio.Nursery, config: NodeConfig) -> ControllerNode:
    node = ControllerNode(config)
    await nursery.start(node.run)
    await wait_until(lambda: node.replica.serving_as_leader, what="single node serving as leader")
    return node


class FakeBroker:
    """A broker's listen port: records every frame a controller sends it (1008 notifications)."""

    def __init__(self) -> None:
        self.received: list[RemotingCommand] = []
        self.address = ""

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                self.received.extend(decoder.feed(data))


async def register(client: ControllerClient, name: str, address: str) -> int:
    next_id = int((await client.get_next_broker_id(CLUSTER, name)).ext("nextBrokerId"))
    applied = await client.apply_broker_id(CLUSTER, name, next_id, f"{address};1700000000000")
    assert applied.code == 0, applied.remark
    registered = await client.register_broker(CLUSTER, name, next_id, address)
    assert registered.code == 0, registered.remark
    return next_id


async def test_happy_path_failover_and_1008_over_tcp(tmp_path: Path) -> None:
    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        broker_a, broker_b = FakeBroker(), FakeBroker()
        await nursery.start(broker_a.serve)
        await nursery.start(broker_b.serve)
        address = config.listen_address
        async with ControllerClient([address]) as client_b:
            async with ControllerClient([address]) as client_a:
                metadata = await client_a.get_metadata()
                assert metadata.ext("controllerLeaderAddress") == address
                assert metadata.ext("isLeader") == "true"
                assert metadata.ext("peers") == f"n0:{address};"
                assert await register(client_a, "broker-a", broker_a.address) == 1
                await client_a.heartbeat(CLUSTER, "broker-a", 1, broker_a.address)
                elected = await client_a.elect_master(CLUSTER, "broker-a", 1)
                assert (elected.code, elected.ext("masterBrokerId"), elected.ext("masterEpoch")) == (0, "1", "1")
                assert await register(client_b, "broker-a", broker_b.address) == 2
                await client_b.heartbeat(CLUSTER, "broker-a", 2, broker_b.address)
                await wait_until(lambda: len(node.replica.liveness.table) == 2, what="two live brokers")
                altered = await client_a.alter_sync_state_set("broker-a", 1, 1, [1, 2], 1)
                assert (altered.code, altered.ext("newSyncStateSetEpoch")) == (0, "2")
            # client_a closed: broker 1's heartbeat connection is gone, so it is inactive at once
            await wait_until(lambda: any(c.code == 1008 and c.ext("masterBrokerId") == "2"
                                         for c in broker_b.received), what="1008 naming master 2 at broker b")
            info = await client_b.get_replica_info("broker-a")
            assert (info.ext("masterBrokerId"), info.ext("masterEpoch")) == ("2", "2")
            assert loads_fastjson(info.body) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
            notification = next(c for c in broker_b.received if c.code == 1008)
            assert notification.is_oneway
            assert loads_fastjson(notification.body)["syncStateSet"] == [2]
        nursery.cancel_scope.cancel()


async def test_state_survives_restart_and_snapshots_compact_the_log(tmp_path: Path) -> None:
    config = single_config(tmp_path, snapshot_every_entries=8)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with ControllerClient([config.listen_address]) as client:
            for number in range(12):
                await register(client, f"broker-{number}", f"10.0.0.{number}:30911")
        assert node.replica.applied_index > 12
        nursery.cancel_scope.cancel()
    with LmdbStorage(config.data_dir) as storage:
        assert storage.snapshot().meta.index >= 8
        assert storage.first_index() > 1  # compacted behind the snapshot
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with ControllerClient([config.listen_address]) as client:
            for number in range(12):
                answer = await client.get_next_broker_id(CLUSTER, f"broker-{number}")
                assert answer.ext("nextBrokerId") == "2"
        assert len(node.replica.state) == 12
        nursery.cancel_scope.cancel()


async def test_unknown_code_one_way_and_not_supported(tmp_path: Path) -> None:
    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        await start(nursery, config)
        async with ControllerClient([config.listen_address]) as client:
            answer = await client.request(1007, address=config.listen_address)
            assert answer is not None and answer.code == 3
            assert await client.heartbeat(CLUSTER, "b", 1, "127.0.0.1:1") is None
            two_way = await client.heartbeat(CLUSTER, "b", 1, "127.0.0.1:1", oneway=False)
            assert two_way is not None and (two_way.code, two_way.remark) == (0, "Heart beat success")
        nursery.cancel_scope.cancel()


async def test_status_request_and_metrics_are_wired(tmp_path: Path) -> None:
    import orjson

    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with ControllerClient([config.listen_address]) as client:
            await register(client, "broker-s", "10.0.0.7:30911")
            answer = await client.request(60001, {"groupNames": "true"}, address=config.listen_address)
            assert answer is not None and answer.code == 0
            status = orjson.loads(answer.body)
            assert (status["nodeId"], status["servingAsLeader"], status["groupNames"]) == ("n0", True, ["broker-s"])
            assert status["applied"] == node.replica.applied_index
        exposition = node.node_metrics.exposition().decode()
        assert 'request="CONTROLLER_APPLY_BROKER_ID"' in exposition
        fsyncs = next(line for line in exposition.splitlines() if line.startswith("rmqc_fsync_seconds_count"))
        assert float(fsyncs.split()[-1]) >= 2  # the leader's no-op and the registration
        busy = next(line for line in exposition.splitlines() if line.startswith("rmqc_event_loop_busy_seconds_total"))
        assert float(busy.split()[-1]) > 0  # the node's LoopLoad instrument is on its loop
        nursery.cancel_scope.cancel()


async def test_elections_are_counted_by_result_including_a_kept_master(tmp_path: Path) -> None:
    """A 1002 that finds the live master kept (2011) is decided without a proposal; it still
    counts as `keep_current_master` next to the `new_master_elected` of the first election."""
    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with ControllerClient([config.listen_address]) as client:
            assert await register(client, "broker-k", "10.0.0.1:30911") == 1
            await client.heartbeat(CLUSTER, "broker-k", 1, "10.0.0.1:30911")
            await wait_until(lambda: len(node.replica.liveness.table) == 1, what="one live broker")
            assert (await client.elect_master(CLUSTER, "broker-k", 1)).code == 0
            assert (await client.elect_master(CLUSTER, "broker-k", 1)).code == 2011
        registry = node.node_metrics.registry
        for result in ("new_master_elected", "keep_current_master"):
            assert registry.get_sample_value("rmqc_elections_total", {"result": result}) == 1, result
        nursery.cancel_scope.cancel()


async def test_a_stopped_node_has_saved_the_commit_index_of_everything_it_answered(tmp_path: Path) -> None:
    """Commit-only Readies skip their fsync (the commit index rides with the next write); stopping
    the node must still leave the last answered write inside the saved commit index."""
    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with ControllerClient([config.listen_address]) as client:
            await register(client, "broker-s", "10.0.0.9:30911")
        answered_through = node.replica.applied_index
        nursery.cancel_scope.cancel()
    with LmdbStorage(config.data_dir) as storage:
        hard_state, _ = storage.initial_state()
        assert hard_state.commit >= answered_through


async def test_a_single_node_serves_without_waiting_an_election_timeout(tmp_path: Path) -> None:
    """The only voter campaigns as it starts, first start and restart alike: with a 5-10 s
    election timeout it still serves at once."""
    config = single_config(tmp_path, tick_ms=10, election_tick=500)
    for _life in range(2):
        async with trio.open_nursery() as nursery:
            started_s = trio.current_time()
            node = ControllerNode(config)
            await nursery.start(node.run)
            # awaited within this iteration, so the lambda always sees this life's node
            await wait_until(lambda: node.replica.serving_as_leader, timeout_s=10, what="serving")  # noqa: B023
            assert trio.current_time() - started_s < 2.0  # far below the 5 s election timeout
            nursery.cancel_scope.cancel()


async def test_without_group_commit_one_request_at_a_time_enters_the_log(tmp_path: Path) -> None:
    """group_commit=false (with one entry per append and one append in flight): the single-queue
    shape of the Java controller, which the benchmarks compare against. Concurrent writes all
    succeed, each appended alone; with group commit the same burst shares appends."""
    for group_commit in (False, True):
        config = single_config(tmp_path / str(group_commit), group_commit=group_commit,
                               max_entries_per_append=1, max_appends_in_flight=1)
        async with trio.open_nursery() as nursery:
            node = await start(nursery, config)
            answers: list[int] = []
            async with ControllerClient([config.listen_address], max_in_flight=64) as client:

                async def write(i: int) -> None:
                    answer = await client.request(1013, {"clusterName": "C", "brokerName": f"b{i}",
                                                         "appliedBrokerId": 1, "registerCheckCode": f"10.0.0.{i}:1;1"})
                    answers.append(answer.code)  # noqa: B023 (every write ends in this iteration's nursery)

                async with trio.open_nursery() as writers:
                    for i in range(40):
                        writers.start_soon(write, i)
            registry = node.node_metrics.registry
            appends = registry.get_sample_value("rmqc_proposals_per_append_count")
            proposals = registry.get_sample_value("rmqc_proposals_per_append_sum")
            assert answers == [0] * 40
            assert proposals == 40
            assert (appends == proposals) is (not group_commit), (group_commit, appends, proposals)
            nursery.cancel_scope.cancel()


async def test_a_pass_that_fails_in_a_request_task_stops_the_node(tmp_path: Path) -> None:
    """A lone request's pass runs in the connection's task (rmqc.replica.Runner); a failure
    there must stop the node as one in the driver task would, not end only that connection."""
    config = single_config(tmp_path)
    with pytest.raises(ExceptionGroup) as caught:
        async with trio.open_nursery() as nursery:
            node = await start(nursery, config)

            def failing_pass() -> bool:
                raise RuntimeError("the pass failed")

            hand_over = node.replica.client_request

            def request_then_failing_passes(*args: object) -> None:
                # the first pass after this is the request's own (made right after it returns)
                node.replica.drive = failing_pass
                hand_over(*args)

            node.replica.client_request = request_then_failing_passes
            inline_before = node.runner.passes_inline
            async with ControllerClient([config.listen_address], max_retries=0) as client:
                with trio.fail_after(10):  # the node stops; the nursery cancels this request
                    await client.request(1013, {"clusterName": "C", "brokerName": "b", "appliedBrokerId": 1,
                                                "registerCheckCode": "10.0.0.1:1;1"})
    assert caught.group_contains(RuntimeError, match="the pass failed", depth=None)
    assert node.runner.passes_inline == inline_before + 1  # the request's own task made the pass
