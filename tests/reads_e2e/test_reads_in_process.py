"""Three ControllerNodes in one Trio run, linked through fault-injecting proxies: every level on the
leader and on a follower, batching of read-index requests, a cut-off follower that refuses
linearizable reads with a clear error (never stale data), and a broken follower (serving without
waiting for its read index) whose stale answer the linearizability checker catches."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from rmqc.chaos._tcp_proxy import ProxyMesh
from rmqc.client import ControllerClient
from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode
from rmqc.replica._reads import ReadPath
from rmqc.testing import check_history

sys.path.insert(0, str(Path(__file__).parent.parent / "node"))
from node_helpers import free_ports, wait_until
from reads_helpers import History, make_group

REQUEST_TIMEOUT_MS = 1000


async def start_cluster(nursery: trio.Nursery, tmp_path: Path, seed: int) -> tuple[ProxyMesh, list[ControllerNode]]:
    ports = free_ports(3)
    mesh = ProxyMesh({f"n{i}": port for i, port in enumerate(ports)})
    await nursery.start(mesh.run)
    nodes = []
    for i in range(3):
        config = NodeConfig(node_id=f"n{i}", peers=parse_peers(mesh.peers_for(f"n{i}")),
                            data_dir=str(tmp_path / f"n{i}"), request_timeout_ms=REQUEST_TIMEOUT_MS,
                            scan_inactive_master_interval_ms=10**9)
        node = ControllerNode(config, rng=random.Random(seed + i))
        await nursery.start(node.run)
        nodes.append(node)
    await wait_until(lambda: sum(n.replica.serving_as_leader for n in nodes) == 1
                     and all(n.replica.leader_id for n in nodes),
                     timeout_s=15, what="one leader")
    return mesh, nodes


def split(nodes: list[ControllerNode]) -> tuple[ControllerNode, list[ControllerNode]]:
    leader = next(node for node in nodes if node.replica.serving_as_leader)
    return leader, [node for node in nodes if node is not leader]


@pytest.fixture
def seed() -> int:
    value = random.randrange(1 << 30)
    print(f"seed {value}")  # shown on failure
    return value


async def test_every_level_on_leader_and_follower(tmp_path: Path, seed: int) -> None:
    async with trio.open_nursery() as nursery:
        _, nodes = await start_cluster(nursery, tmp_path, seed)
        leader, (follower, _) = split(nodes)
        history = History()
        async with ControllerClient([leader.listen_address], timeout_ms=3000) as client:
            await make_group(client, "g", "10.0.0.1:1")
            await history.write_until_committed(client, "w", "g", "10.0.0.1:2", node=leader.listen_address)
            for node in (leader, follower):
                for level in ("linearizable", "lease", "stale"):
                    answer = await history.read(client, "r", "g", node.listen_address, level)
                    assert answer is not None and answer[0] == 0, answer
                    if level != "stale":  # after a completed write, never the old value
                        assert history.ops[-1].value == "10.0.0.1:2", (node.config.node_id, level)
                    else:
                        assert int(answer[1]["appliedIndex"]) > 0 and int(answer[1]["appliedAgeMs"]) >= 0
            bad = await history.read(client, "r", "g", follower.listen_address, "sometimes")
            assert bad is not None and bad[0] == 1 and "is not one of" in bad[1]["remark"]
        assert leader.replica.reads.lease_reads >= 1  # the lease served on the leader, no read index
        assert follower.replica.reads.lease_reads == 0  # a follower's lease read is a ReadIndex read
        assert all(result.ok for result in check_history(history.ops, initial="10.0.0.1:1")), seed
        nursery.cancel_scope.cancel()


async def test_follower_batches_concurrent_reads(tmp_path: Path, seed: int) -> None:
    async with trio.open_nursery() as nursery:
        _, nodes = await start_cluster(nursery, tmp_path, seed)
        leader, (follower, _) = split(nodes)
        async with ControllerClient([leader.listen_address], timeout_ms=5000, max_in_flight=1024) as client:
            await make_group(client, "g", "10.0.0.1:1")
            history = History()
            before = follower.replica.reads.batches_sent
            async with trio.open_nursery() as readers:
                for i in range(200):
                    readers.start_soon(history.read, client, f"r{i}", "g", follower.listen_address, "linearizable")
            reads = [op for op in history.ops if op.kind == "read"]
            assert len(reads) == 200 and {op.value for op in reads} == {"10.0.0.1:1"}
            assert follower.replica.reads.batches_sent - before < 100, "one read-index context per batch, not per read"
        nursery.cancel_scope.cancel()


async def test_cut_off_follower_refuses_linearizable_reads(tmp_path: Path, seed: int) -> None:
    async with trio.open_nursery() as nursery:
        mesh, nodes = await start_cluster(nursery, tmp_path, seed)
        leader, (follower, _) = split(nodes)
        history = History()
        async with ControllerClient([leader.listen_address], timeout_ms=5000) as client:
            await make_group(client, "g", "10.0.0.1:1")
            await wait_until(lambda: follower.replica.applied_index == leader.replica.applied_index,
                             what="follower caught up")
            mesh.isolate(follower.config.node_id)
            await history.write_until_committed(client, "w", "g", "10.0.0.1:2", node=leader.listen_address)
            for level in ("linearizable", "lease"):
                started = trio.current_time()
                answer = await history.read(client, "r", "g", follower.listen_address, level)
                assert answer is not None and answer[0] == 1, answer
                expected = f"read index not confirmed within {REQUEST_TIMEOUT_MS} ms: no leader reachable"
                assert expected in answer[1]["remark"]
                assert trio.current_time() - started < 3 * REQUEST_TIMEOUT_MS / 1000
            stale = await history.read(client, "r", "g", follower.listen_address, "stale")
            assert stale is not None and stale[0] == 0 and history.ops[-1].value == "10.0.0.1:1"
            mesh.heal_all()
            answer = await history.read(client, "r", "g", follower.listen_address, "linearizable")
            assert answer is not None and answer[0] == 0 and history.ops[-1].value == "10.0.0.1:2"
        checked = check_history(history.of_levels("linearizable", "lease"), initial="10.0.0.1:1")
        assert all(result.ok for result in checked), seed
        nursery.cancel_scope.cancel()


async def test_checker_catches_follower_that_skips_the_read_index(tmp_path: Path, seed: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def serve_without_read_index(self: ReadPath, level: str, then: Callable[[str | None], None]) -> None:
        then(None)  # the bug: local state is served as if it were confirmed

    async with trio.open_nursery() as nursery:
        mesh, nodes = await start_cluster(nursery, tmp_path, seed)
        leader, (follower, _) = split(nodes)
        history = History()
        async with ControllerClient([leader.listen_address], timeout_ms=5000) as client:
            await make_group(client, "g", "10.0.0.1:1")
            await wait_until(lambda: follower.replica.applied_index == leader.replica.applied_index,
                             what="follower caught up")
            monkeypatch.setattr(ReadPath, "_confirm", serve_without_read_index)
            mesh.isolate(follower.config.node_id)
            await history.write_until_committed(client, "w", "g", "10.0.0.1:2", node=leader.listen_address)
            answer = await history.read(client, "r", "g", follower.listen_address, "linearizable")
            assert answer is not None and answer[0] == 0
        (result,) = check_history(history.of_levels("linearizable"), initial="10.0.0.1:1")
        assert not result.ok, f"the checker missed a stale linearizable read (seed {seed})"
        assert "10.0.0.1:1" in result.witness or result.witness
        nursery.cancel_scope.cancel()


async def test_reads_beyond_the_bound_are_refused_busy(tmp_path: Path, seed: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rmqc.replica._reads.MAX_READS_AWAITING_INDEX", 2)
    async with trio.open_nursery() as nursery:
        mesh, nodes = await start_cluster(nursery, tmp_path, seed)
        leader, (follower, _) = split(nodes)
        history = History()
        answers: list[tuple[int, dict[str, str]] | None] = []
        async with ControllerClient([leader.listen_address], timeout_ms=5000) as client:
            await make_group(client, "g", "10.0.0.1:1")
            mesh.isolate(follower.config.node_id)  # nothing is confirmed: the reads pile up

            async def read() -> None:
                answers.append(await history.read(client, "r", "g", follower.listen_address, "linearizable"))

            async with trio.open_nursery() as readers:
                for _ in range(3):
                    readers.start_soon(read)
        codes = sorted(answer[0] for answer in answers if answer is not None)
        assert codes == [1, 1, 2], answers  # two time out waiting, the third is refused at once
        busy = next(answer for answer in answers if answer is not None and answer[0] == 2)
        assert "reads await a read index (max 2)" in busy[1]["remark"]
        nursery.cancel_scope.cancel()
