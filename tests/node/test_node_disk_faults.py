"""A full disk and a failing write on real `rmqc serve` processes.

The disks are small tmpfs (full disk) and ext4 (turned read-only by the kernel under the running
node) filesystems the test mounts when it may (root: CI), else the storage layer's test-only fault
hook (rmqc.testing.disk); EIO always comes from the hook. Checked: a full disk refuses writes with a
clear remark and raises an alarm (status, metrics, log) while reads and heartbeats are served; no
acknowledged write is lost; writes resume by themselves once space is freed; a leader keeps its
role; a follower with a full disk stops acknowledging and the others carry on; a failed write
stops the process at once with a message naming the data directory, and a restart recovers or
refuses with `rmqc log verify`'s finding.
"""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.fsm import ApplyBrokerId, decode_commands
from rmqc.launcher import serve_nodes
from rmqc.raft import EntryType
from rmqc.remoting import RMQC_NODE_STATUS, RemotingCommand
from rmqc.storage import LmdbStorage
from rmqc.testing.cluster import CLUSTER, Cluster, free_ports, wait_until
from rmqc.testing.disk import EXT4, TMPFS, SmallDisk, small_disk

pytestmark = pytest.mark.slow
DISK_FULL_REMARK = "the controller's disk is full"
EXIT_STORAGE_FAILED = 74
WRITES_PER_ROUND = 32
# Writes sent after the disk filled before one must be refused: LMDB first reuses the free pages
# its file already has, which a 4 MiB filesystem bounds far below this.
MAX_WRITES_UNTIL_REFUSED = 20_000
# How long a leader with a full disk is watched keeping its role: three election timeouts or more.
HELD_FULL_MS = 3000


@contextlib.contextmanager
def cluster_on_small_disks(tmp_path: Path, size: int, *, hook: bool = False, fs: str = TMPFS,
                           metrics: bool = False) -> Iterator[tuple[Cluster, list[SmallDisk]]]:
    """`size` nodes, each with its data directory on a small disk of its own."""
    with contextlib.ExitStack() as stack:
        disks = [stack.enter_context(small_disk(tmp_path / f"disk{i}", size_mb=4, fs=fs, hook=hook))
                 for i in range(size)]
        ports = free_ports(size + 1)  # one more: the metrics port of a single node
        nodes = serve_nodes(tmp_path, ports[:size], metrics_base_port=ports[size] if metrics else None)
        for node, disk in zip(nodes, disks, strict=True):
            node.data_dir = disk.root / node.node_id
            node.env = disk.env
        yield Cluster(nodes), disks


async def status_of(client: ControllerClient, address: str) -> dict:
    answer = await client.request(RMQC_NODE_STATUS, None, address=address)
    assert answer.code == 0, answer.remark
    return orjson.loads(answer.body or b"{}")


def alarm_metric(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    line = next(line for line in text.splitlines() if line.startswith('rmqc_alarm{alarm="disk_full"}'))
    return float(line.split()[-1])


async def apply_id(client: ControllerClient, name: str) -> RemotingCommand | None:
    """1013 for the first id of a new group: one write. None when the connection failed."""
    try:
        return await client.apply_broker_id(CLUSTER, name, 1, f"10.0.0.1:30911;{name}")
    except ClientError:
        return None


async def write_round(client: ControllerClient, names: list[str]) -> dict[str, RemotingCommand | None]:
    answers: dict[str, RemotingCommand | None] = {}

    async def one(name: str) -> None:
        answers[name] = await apply_id(client, name)

    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(one, name)
    return answers


def acknowledged(answers: dict[str, RemotingCommand | None]) -> set[str]:
    return {name for name, answer in answers.items() if answer is not None and answer.code == 0}


def applied_ids_in_log(data_dir: Path) -> set[str]:
    with LmdbStorage(data_dir, readonly=True) as storage:
        assert storage.verify().ok
        return {command.broker_name for entry in storage.iter_entries()
                if entry.type is EntryType.NORMAL and entry.data
                for command in decode_commands(entry.data) if isinstance(command, ApplyBrokerId)}


async def fill_until_refused(client: ControllerClient, disk: SmallDisk, acked: set[str]) -> str:
    """Fill the disk, then write until a write is refused; returns the refusal's remark."""
    disk.fill()
    sent = 0
    while sent < MAX_WRITES_UNTIL_REFUSED:
        names = [f"full-{sent + i:06d}" for i in range(WRITES_PER_ROUND)]
        sent += len(names)
        answers = await write_round(client, names)
        acked |= acknowledged(answers)
        refused = [a for a in answers.values()
                   if a is not None and a.code == 1 and DISK_FULL_REMARK in (a.remark or "")]
        if refused:
            return refused[0].remark or ""
    raise AssertionError(f"{sent} writes after the disk filled, none refused")


async def test_a_full_disk_refuses_writes_serves_reads_raises_the_alarm_and_resumes(tmp_path: Path) -> None:
    with cluster_on_small_disks(tmp_path, 1, metrics=True) as (cluster, (disk,)):
        await cluster.start()
        node = cluster.nodes[0]
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=10_000, max_retries=0) as client:
                await cluster.wait_leader(client)
                acked = acknowledged(await write_round(client, [f"before-{i:03d}" for i in range(50)]))
                assert len(acked) == 50

                remark = await fill_until_refused(client, disk, acked)
                assert f"in {node.data_dir}" in remark and "reads and heartbeats are served" in remark
                status = await status_of(client, node.address)
                [alarm] = status["alarms"]
                assert alarm["alarm"] == "disk_full" and alarm["refusedWrites"] >= 1
                assert status["role"] == "leader" and status["servingAsLeader"]
                assert node.metrics_port is not None and alarm_metric(node.metrics_port) == 1.0
                assert "ALARM disk full" in node.log_tail(200)
                # reads and heartbeats are still served, at every consistency level
                for name in sorted(acked)[:5]:
                    answer = await client.get_next_broker_id(CLUSTER, name)
                    assert answer.code == 0 and answer.ext("nextBrokerId") == "2", name
                beat = await client.heartbeat(CLUSTER, "before-000", 1, "10.0.0.1:30911", oneway=False)
                assert beat.code == 0

                disk.free()

                async def writes_resumed() -> bool:
                    answers = await write_round(client, [f"after-{trio.current_time():.3f}"])
                    acked.update(acknowledged(answers))
                    return bool(acknowledged(answers))

                await wait_until(writes_resumed, 10, "a write accepted once space was freed")
                assert (await status_of(client, node.address))["alarms"] == []
                assert alarm_metric(node.metrics_port) == 0.0
                assert "disk space is back" in node.log_tail(200)
            await cluster.stop()
            assert acked <= applied_ids_in_log(node.data_dir)  # nothing acknowledged was lost
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()


async def test_a_follower_with_a_full_disk_stops_acknowledging_and_the_others_carry_on(tmp_path: Path) -> None:
    with cluster_on_small_disks(tmp_path, 3) as (cluster, disks):
        await cluster.start()
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=10_000, max_retries=3) as client:
                leader = await cluster.wait_leader(client)
                follower = next(node for node in cluster.nodes if node.address != leader)
                disk = disks[cluster.nodes.index(follower)]
                acked = acknowledged(await write_round(client, [f"before-{i:03d}" for i in range(20)]))
                disk.fill()

                async def follower_alarmed() -> bool:
                    acked.update(acknowledged(await write_round(client, [f"w-{trio.current_time():.4f}-{i}"
                                                                         for i in range(WRITES_PER_ROUND)])))
                    return bool((await status_of(client, follower.address))["alarms"])

                await wait_until(follower_alarmed, 60, f"{follower.node_id} raising the disk-full alarm")
                # the others carry on: writes are acknowledged, the follower's match stops moving
                before = len(acked)
                acked |= acknowledged(await write_round(client, [f"during-{i:03d}" for i in range(50)]))
                assert len(acked) == before + 50
                leader_status = await status_of(client, leader)
                assert leader_status["alarms"] == [] and leader_status["peers"][follower.node_id]["lag"] > 0
                assert "ALARM disk full" in follower.log_tail(200)

                disk.free()

                async def follower_caught_up() -> bool:
                    status = await status_of(client, leader)
                    return status["peers"][follower.node_id]["lag"] == 0 and not (
                        await status_of(client, follower.address))["alarms"]

                await wait_until(follower_caught_up, 20, f"{follower.node_id} catching up once space was freed")
            await cluster.stop()
            for node in cluster.nodes:
                assert acked <= applied_ids_in_log(node.data_dir), node.node_id
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()


async def test_a_leader_with_a_full_disk_keeps_its_role_and_refuses_writes_until_space_returns(
        tmp_path: Path) -> None:
    with cluster_on_small_disks(tmp_path, 3) as (cluster, disks):
        await cluster.start()
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=10_000, max_retries=3) as client:
                leader = await cluster.wait_leader(client)
                node = cluster.node(leader)
                disk = disks[cluster.nodes.index(node)]
                acked = acknowledged(await write_round(client, [f"before-{i:03d}" for i in range(20)]))
                term = (await status_of(client, leader))["term"]
                remark = await fill_until_refused(client, disk, acked)
                assert f"node {node.node_id} cannot write its log" in remark
                # a write sent to a follower is forwarded to the leader, and refused there too
                follower = next(other for other in cluster.nodes if other is not node)
                answer = await client.request(1013, {"clusterName": CLUSTER, "brokerName": "via-follower",
                                                     "appliedBrokerId": 1, "registerCheckCode": "x;1"},
                                              address=follower.address)
                assert answer.code == 1 and DISK_FULL_REMARK in (answer.remark or "")
                async def full_for_a_while() -> bool:  # several election timeouts (0.5-1 s each)
                    return (await status_of(client, leader))["alarms"][0]["forMs"] >= HELD_FULL_MS

                await wait_until(full_for_a_while, 10, f"the alarm raised for {HELD_FULL_MS} ms")
                for other in cluster.nodes:  # the role held: heartbeats need no write
                    status = await status_of(client, other.address)
                    assert (status["leader"], status["term"]) == (node.node_id, term), other.node_id
                    assert bool(status["alarms"]) == (other is node), other.node_id

                disk.free()

                async def writes_resumed() -> bool:
                    answers = await write_round(client, [f"after-{trio.current_time():.3f}"])
                    acked.update(acknowledged(answers))
                    return bool(acknowledged(answers))

                await wait_until(writes_resumed, 10, "a write accepted once space was freed")
            await cluster.stop()
            for each in cluster.nodes:
                assert acked <= applied_ids_in_log(each.data_dir), each.node_id
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()


@pytest.mark.parametrize("fault", ["eio", "erofs"])
async def test_a_failing_write_stops_the_node_at_once_and_a_restart_recovers(tmp_path: Path, fault: str) -> None:
    # EIO from the fault hook; read-only from the kernel itself where an ext4 disk can be mounted
    with cluster_on_small_disks(tmp_path, 1, hook=fault == "eio", fs=EXT4) as (cluster, (disk,)):
        await cluster.start()
        node = cluster.nodes[0]
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=5000, max_retries=0) as client:
                await cluster.wait_leader(client)
                acked = acknowledged(await write_round(client, [f"before-{i:03d}" for i in range(20)]))
                assert len(acked) == 20
                disk.fail_writes(fault)
                answers = await write_round(client, [f"failed-{i:03d}" for i in range(5)])
                assert acknowledged(answers) == set()  # never acknowledged
            assert await node.wait_exit(10) == EXIT_STORAGE_FAILED
            log_text = node.log_tail(20)
            assert "STOPPING" in log_text and f"data directory {node.data_dir}" in log_text
            assert {"eio": "Input/output error", "erofs": "Read-only file system"}[fault] in log_text

            disk.repair()  # the disk is fixed; the restart recovers from what is durable
            await node.start()
            async with ControllerClient(cluster.addresses, timeout_ms=5000, max_retries=3) as client:
                await cluster.wait_leader(client)
                for name in sorted(acked):
                    assert (await client.get_next_broker_id(CLUSTER, name)).ext("nextBrokerId") == "2", name
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()


async def test_a_restart_on_a_damaged_log_refuses_with_the_verify_finding(tmp_path: Path) -> None:
    with cluster_on_small_disks(tmp_path, 1, hook=True) as (cluster, _disks):
        await cluster.start()
        node = cluster.nodes[0]
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=5000, max_retries=0) as client:
                await cluster.wait_leader(client)
                assert len(acknowledged(await write_round(client, [f"group-{i:03d}" for i in range(20)]))) == 20
            await cluster.stop()
            data_file = node.data_dir / "data.mdb"
            raw = bytearray(data_file.read_bytes())
            at = raw.find(b"group-007")
            while at >= 0:  # every copy: stale ones may sit in unused page space
                raw[at + 3] ^= 0x20
                at = raw.find(b"group-007", at + 1)
            data_file.write_bytes(bytes(raw))
            node.spawn()
            assert await node.wait_exit(30) == 1
            assert "refusing to serve from a damaged log; `rmqc log verify" in node.log_tail(5)
            assert "entry checksum mismatch" in node.log_tail(5)
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()
