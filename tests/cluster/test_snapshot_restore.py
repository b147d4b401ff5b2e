"""Online backup and restore on real processes: `rmqc admin snapshot save` while a writer registers
brokers on a 3-node cluster; the file holds exactly the source's committed state at its index
(the leader's log replayed to that index); `rmqc log verify FILE` checks it and names damage;
`rmqc log restore` builds a fresh single-node group and a fresh 3-node group from it, which serve
the same state (every broker group, as 1006 answers it) and take new writes after it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from rmqc import fsm
from rmqc.client import ControllerClient
from rmqc.controller._bodies import replicas_info_body
from rmqc.launcher import ServeCluster, rmqc_argv, serve_nodes
from rmqc.raft import EntryType
from rmqc.remoting import loads_fastjson
from rmqc.storage import LmdbStorage, read_identity, read_snapshot_file
from rmqc.testing.cluster import Cluster, free_ports
from rmqc.testing.writer import CLUSTER as WRITER_CLUSTER, WriteLoad

pytestmark = pytest.mark.slow


def rmqc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*rmqc_argv(), *args], capture_output=True, text=True, timeout=120, check=False)


def replayed_state(data_dir: Path, index: int) -> fsm.ControllerState:
    """The state a node's own log holds at `index`: its snapshot, then its entries up to there."""
    state = fsm.ControllerState()
    with LmdbStorage(data_dir, readonly=True) as storage:
        snapshot = storage.snapshot()
        assert snapshot.meta.index <= index, "the source compacted past the saved index"
        if not snapshot.is_empty:
            state.restore(snapshot.data)
        for entry in storage.iter_entries(snapshot.meta.index + 1, index + 1):
            if entry.type == EntryType.NORMAL and entry.data:
                state.apply_all(fsm.decode_commands(entry.data))
    return state


def table_of(state: fsm.ControllerState) -> dict[str, Any]:
    """Every group as 1006 answers it, without liveness (no broker heartbeats a restored group)."""
    return _without_alive(loads_fastjson(replicas_info_body(list(state.groups()), lambda _g, _i: False)))


def _without_alive(document: dict[str, Any]) -> dict[str, Any]:
    table = document["replicasInfoTable"]
    for info in table.values():
        for replica in info["inSyncReplicas"] + info["notInSyncReplicas"]:
            replica.pop("alive")
    return table


async def served_table(addresses: Sequence[str], names: list[str]) -> dict[str, Any]:
    async with ControllerClient(addresses, timeout_ms=5000, max_retries=10) as client:
        answer = await client.get_sync_state_data(names)
        assert answer.code == 0, answer.remark
        return _without_alive(loads_fastjson(answer.body))


async def save_under_load(tmp_path: Path) -> tuple[Path, Path, int]:
    """(the snapshot file, the data directory of the node that answered, its index)."""
    source = Cluster.create(tmp_path / "source", 3, settings=("snapshot_every_entries=1000000",))
    await source.start()
    try:
        async with trio.open_nursery() as nursery:
            load = WriteLoad(source.addresses)
            await nursery.start(load.run)
            await load.wait_acks(200, timeout_s=30)
            leader = source.node(await source.wait_leader())
            file = tmp_path / "backup.snap"
            saved = await trio.to_thread.run_sync(rmqc, "admin", "snapshot", "save", str(file), "-a",
                                                  source.controllers, "--json")
            assert saved.returncode == 0, saved.stderr
            await load.wait_acks(100, after=time.perf_counter(), timeout_s=30)  # the writes go on after the save
            nursery.cancel_scope.cancel()
        summary = orjson.loads(saved.stdout)
        assert summary["nodeId"] == leader.node_id and summary["voters"] == ["n0", "n1", "n2"]
        return file, leader.data_dir, summary["index"]
    finally:
        await source.stop()


async def test_save_under_load_and_restore_into_new_groups(tmp_path: Path) -> None:
    file, source_dir, index = await save_under_load(tmp_path)
    snapshot = read_snapshot_file(file)
    assert snapshot.meta.index == index
    expected = fsm.ControllerState()
    expected.restore(snapshot.data)
    assert table_of(expected) == table_of(replayed_state(source_dir, index))  # consistent at one index
    assert len(expected) >= 4

    verified = rmqc("log", "verify", str(file))
    assert verified.returncode == 0 and f"ok: snapshot at index {index}" in verified.stdout, verified.stdout
    for size in (1, 3):
        await restore_and_serve(tmp_path / f"restored-{size}", file, size, expected)


async def restore_and_serve(root: Path, file: Path, size: int, expected: fsm.ControllerState) -> None:
    cluster = ServeCluster(serve_nodes(root, free_ports(size)))
    for node in cluster.nodes:
        restored = rmqc("log", "restore", str(file), "--data-dir", str(node.data_dir), "--id", node.node_id,
                        "--peers", node.peers)
        assert restored.returncode == 0, restored.stderr
        assert read_identity(node.data_dir).node_id == node.node_id  # node.json, as serve writes it
    await cluster.start_async()
    try:
        await cluster.wait_leader()
        names = sorted(group.broker_name for group in expected.groups())
        assert await served_table(cluster.addresses, names) == table_of(expected)
        async with ControllerClient(cluster.addresses, timeout_ms=5000, max_retries=10) as client:
            group = next(g for g in expected.groups() if g.cluster_name == WRITER_CLUSTER)
            applied = await client.apply_broker_id(WRITER_CLUSTER, group.broker_name, group.next_broker_id,
                                                   f"10.9.9.9:10911;{1_800_000_000_000}")
            assert applied.code == 0, applied.remark  # the new group takes writes after the snapshot
    finally:
        await cluster.stop_async()
