"""The pipeline over a history made by a real `rmqc serve`: brokers register, a master is elected,
the master's process dies and the controller elects its replica; the node is stopped, its log is
exported with `rmqc log export` (a separate process, as an operator runs it) and analysed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.pipeline import run_pipeline
from rmqc.testing.cluster import CLUSTER, RMQC, Cluster, FakeBroker, wait_until

pytestmark = pytest.mark.slow
GROUP = "broker-x"


async def make_history(cluster: Cluster) -> None:
    """Two replicas, the first elected and both in sync; then the master crashes. The node stops
    while the new master still runs: its brokers' later disconnects would be further elections."""
    async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses) as admin:
        master, replica = FakeBroker(GROUP, cluster.addresses), FakeBroker(GROUP, cluster.addresses)
        for broker in (master, replica):
            await nursery.start(broker.run)
            await broker.register()
        assert master.client is not None
        elected = await master.client.elect_master(CLUSTER, GROUP, master.broker_id)
        assert elected.code == 0, elected.remark
        epoch = int(elected.ext("masterEpoch"))

        async def in_sync() -> bool:
            assert master.client is not None
            answer = await master.client.alter_sync_state_set(
                GROUP, master.broker_id, epoch, [master.broker_id, replica.broker_id], 1)
            return answer.code == 0  # 2006 until the replica's heartbeat has arrived

        await wait_until(in_sync, 10, "sync state set {1, 2}")
        master.crash()

        async def replica_promoted() -> bool:
            answer = await admin.get_replica_info(GROUP)
            return answer.ext("masterBrokerId") == str(replica.broker_id)

        await wait_until(replica_promoted, 15, "the replica elected after the master crashed")
        await cluster.stop()
        nursery.cancel_scope.cancel()


async def test_history_exported_from_a_real_node_is_analysed(spark, tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 1)
    await cluster.start()
    try:
        await make_history(cluster)
    finally:
        await cluster.stop()
    export = tmp_path / "history.jsonl"
    done = subprocess.run([RMQC, "log", "export", str(cluster.nodes[0].data_dir), "--out", str(export),
                           "--cluster", "real"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [orjson.loads(line) for line in export.read_text().splitlines()]
    elections = [row for row in rows if row["command"] == "elect_master" and row["result"] == "ok"]
    assert [row["trigger"] for row in elections] == ["broker", "controller"], elections

    summary = run_pipeline(spark, [export], tmp_path / "out")
    assert summary.violation_total == 0, summary.violations
    assert (summary.controller_clusters, summary.groups, summary.elections) == (1, 1, 2)
    assert summary.failovers.count == 1
    assert summary.failovers.max_ms is not None and summary.failovers.max_ms >= 0
    assert Path(summary.report_path).exists()
