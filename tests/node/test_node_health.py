"""The health endpoints (/livez, /readyz on the metrics port), `rmqc admin health` and the `ready`
column of `rmqc status`, on real `rmqc serve` processes: a healthy cluster is ready; a node cut
off from the others (they are SIGSTOPped) is not ready (no leader) but live; `exclude` leaves a
check out; a follower with a full disk is not ready (disk_full); a node whose fsync hangs (the
storage fault hook's `stall`) fails /livez's `writes` while its event loop runs and its disk
answers, and is live again once the fsync returns."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio
from test_node_disk_faults import WRITES_PER_ROUND, acknowledged, apply_id, status_of, write_round

from rmqc.client import ControllerClient
from rmqc.launcher import rmqc_argv, serve_nodes
from rmqc.replica import LIVENESS_CHECKS, READINESS_CHECKS
from rmqc.testing.cluster import Cluster, NodeProcess, free_ports, wait_until
from rmqc.testing.disk import SmallDisk, small_disk

pytestmark = pytest.mark.slow
ALL_CHECKS = [*LIVENESS_CHECKS, *READINESS_CHECKS]


def get(node: NodeProcess, path: str) -> tuple[int, str]:
    """HTTP GET on the node's metrics port: (status, body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def probe(node: NodeProcess, path: str) -> tuple[int, str]:
    return await trio.to_thread.run_sync(get, node, path)


def with_metrics(nodes: list[NodeProcess]) -> list[NodeProcess]:
    for node, port in zip(nodes, free_ports(len(nodes)), strict=True):
        node.metrics_port = port
    return nodes


async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process([*rmqc_argv(), *args], capture_stdout=True, capture_stderr=True, check=False)


async def ready(node: NodeProcess) -> bool:
    return (await probe(node, "/readyz"))[0] == 200


async def test_a_node_cut_off_from_the_others_is_live_but_not_ready(tmp_path: Path) -> None:
    cluster = Cluster(with_metrics(serve_nodes(tmp_path, free_ports(3))))
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=5000) as client:
            leader = await cluster.wait_leader(client)
            for node in cluster.nodes:
                await wait_until(lambda node=node: ready(node), 10, f"{node.node_id} ready")
            status, body = await probe(cluster.nodes[0], "/readyz?verbose")
            assert status == 200 and body.splitlines() == [*(f"[+]{name} ok" for name in ALL_CHECKS),
                                                           "readyz check passed"]
            assert await probe(cluster.nodes[0], "/livez") == (200, "ok\n")
            assert (await probe(cluster.nodes[0], "/metrics"))[1].startswith("# HELP")

            everyone = ";".join(cluster.addresses)
            result = await cli("admin", "health", "-a", everyone, "--json")
            assert result.returncode == 0, result.stderr
            reports = orjson.loads(result.stdout)
            assert [report["ready"] for report in reports] == [True] * 3
            assert [check["check"] for check in reports[0]["checks"]] == ALL_CHECKS
            table = await cli("status", "-a", everyone)
            assert table.returncode == 0 and "ready" in table.stdout.decode(), table.stdout

            cut_off = next(node for node in cluster.nodes if node.address != leader)
            others = [node for node in cluster.nodes if node is not cut_off]
            for node in others:
                node.kill(signal.SIGSTOP)
            try:
                async def not_ready() -> bool:
                    return (await probe(cut_off, "/readyz"))[0] == 503

                await wait_until(not_ready, 10, f"{cut_off.node_id} not ready once cut off")
                status, body = await probe(cut_off, "/readyz")
                assert status == 503 and "[-]leader failed: no leader known" in body, body
                assert body.endswith("readyz check failed\n")
                assert await probe(cut_off, "/livez") == (200, "ok\n")  # not a reason to restart it
                status, body = await probe(cut_off, "/readyz?exclude=leader&verbose")
                assert status == 200 and "[+]leader excluded: ok" in body, body
                assert (await probe(cut_off, "/readyz/leader"))[0] == 503
                assert (await probe(cut_off, "/readyz/voter"))[0] == 200
                assert (await probe(cut_off, "/readyz/nosuch"))[0] == 404

                result = await cli("admin", "health", "-a", cut_off.address)
                assert result.returncode == 1, result.stdout
                out = result.stdout.decode()
                assert "not ready" in out and "[-]leader failed" in out, out
                assert "not ready: " + cut_off.node_id in result.stderr.decode()
                excluded = await cli("admin", "health", "-a", cut_off.address, "--exclude", "leader", "--json")
                assert excluded.returncode == 0, excluded.stderr
                assert orjson.loads(excluded.stdout)[0]["ready"] is True
            finally:
                for node in others:
                    node.kill(signal.SIGCONT)
            for node in cluster.nodes:
                await wait_until(lambda node=node: ready(node), 20, f"{node.node_id} ready again")
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()


@contextlib.contextmanager
def nodes_on_small_disks(tmp_path: Path, size: int, *, hook: bool = False) -> Iterator[tuple[Cluster, list[SmallDisk]]]:
    with contextlib.ExitStack() as stack:
        disks = [stack.enter_context(small_disk(tmp_path / f"disk{i}", size_mb=4, hook=hook)) for i in range(size)]
        nodes = with_metrics(serve_nodes(tmp_path, free_ports(size)))
        for node, disk in zip(nodes, disks, strict=True):
            node.data_dir = disk.root / node.node_id
            node.env = disk.env
        yield Cluster(nodes), disks


async def test_a_follower_with_a_full_disk_is_not_ready_until_space_returns(tmp_path: Path) -> None:
    with nodes_on_small_disks(tmp_path, 3) as (cluster, disks):
        await cluster.start()
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=10_000, max_retries=3) as client:
                leader = await cluster.wait_leader(client)
                follower = next(node for node in cluster.nodes if node.address != leader)
                await wait_until(lambda: ready(follower), 10, f"{follower.node_id} ready")
                disks[cluster.nodes.index(follower)].fill()

                async def alarmed() -> bool:
                    await write_round(client, [f"w-{trio.current_time():.4f}-{i}" for i in range(WRITES_PER_ROUND)])
                    return bool((await status_of(client, follower.address))["alarms"])

                await wait_until(alarmed, 60, f"{follower.node_id} raising the disk-full alarm")
                await wait_until(lambda: trio.to_thread.run_sync(lambda: "[-]disk_full failed" in get(
                    follower, "/readyz")[1]), 5, "the disk_full check failing")
                status, body = await probe(follower, "/readyz")
                assert status == 503 and "[-]disk_full failed: alarm raised: no space left" in body, body
                assert await probe(follower, "/livez") == (200, "ok\n")
                # the leader is ready: its disk has room
                assert await ready(cluster.node(leader))

                disks[cluster.nodes.index(follower)].free()
                await wait_until(lambda: ready(follower), 30, f"{follower.node_id} ready once space was freed")
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()


async def test_a_hung_fsync_fails_livez_writes_while_the_loop_goes_on(tmp_path: Path) -> None:
    with nodes_on_small_disks(tmp_path, 1, hook=True) as (cluster, (disk,)):
        await cluster.start()
        node = cluster.nodes[0]
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=30_000, max_retries=0) as client:
                await cluster.wait_leader(client)
                await wait_until(lambda: ready(node), 10, "the node ready")
                answers: list[object] = []

                async def write() -> None:
                    answers.append(await apply_id(client, "held"))

                disk.fail_writes("stall")  # the next commit (its fsync) hangs, in the saver's thread
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write)

                    async def writes_failed() -> bool:
                        return (await probe(node, "/livez"))[0] == 503

                    await wait_until(writes_failed, 15, "/livez failing while the fsync hangs")
                    _status, body = await probe(node, "/livez")
                    assert "[-]writes failed: a write to" in body and "has been under way for" in body, body
                    assert "[+]loop ok" in body, body  # the event loop is not held by the write any more
                    assert "[+]disk ok" in body, body  # the filesystem itself answers
                    assert (await probe(node, "/livez/disk"))[0] == 200
                    assert (await probe(node, "/readyz"))[0] == 503  # a node whose writes hang is not ready
                    assert not answers  # the write waits for its save

                    disk.free()  # the fsync returns
                    await wait_until(lambda: trio.to_thread.run_sync(lambda: get(node, "/livez")[0] == 200), 10,
                                     "/livez passing again")
                assert acknowledged({"held": answers[0]}) == {"held"}  # type: ignore[dict-item]
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()
