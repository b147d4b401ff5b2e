"""The pipeline over a history made by a real `rmqc serve`: brokers register, a master is elected,
the master hangs (heartbeats stop, connections open) and the controller elects its replica after
the heartbeat timeout; the node is stopped, its log is exported with `rmqc log export` (a separate
process, as an operator runs it) and analysed. The test knows when the master fell silent, so it
checks the failover's duration against that."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
import trio
from chart_reading import data_pixels

from rmqc.pipeline import _report, run_pipeline
from rmqc.testing.cluster import HEARTBEAT_TIMEOUT_MS, RMQC, Cluster, start_group, wait_until

pytestmark = pytest.mark.slow
GROUP = "broker-x"


async def make_history(cluster: Cluster) -> Timing:
    """Two replicas, the first elected and both in sync; then the master hangs. The node stops
    while the new master still runs: its brokers' later disconnects would be further elections."""
    async with trio.open_nursery() as nursery:
        master, replica = await start_group(nursery, cluster, GROUP)
        master.hang()
        hung_ms = wall_ms()
        assert master.last_heartbeat_ms is not None

        def promotions() -> list[int]:  # when the replica was told it is master (1008)
            told = zip(replica.notifications(), replica.notified_ms, strict=True)
            return [ms for note, ms in told if note.ext("masterBrokerId") == str(replica.broker_id)]

        async def replica_promoted() -> bool:
            return bool(promotions())

        await wait_until(replica_promoted, 15, "the replica told it is master (1008)")
        await cluster.stop()
        nursery.cancel_scope.cancel()
    return Timing(master.last_heartbeat_ms, hung_ms, promotions()[0])


@dataclass(frozen=True)
class Timing:
    last_heartbeat_sent_ms: int
    hung_ms: int
    notified_ms: int


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_history_exported_from_a_real_node_is_analysed(spark, tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 1)
    await cluster.start()
    try:
        timing = await make_history(cluster)
    finally:
        await cluster.stop()
    export = tmp_path / "history.jsonl"
    done = subprocess.run([RMQC, "log", "export", str(cluster.nodes[0].data_dir), "--out", str(export)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [orjson.loads(line) for line in export.read_text().splitlines()]
    # labelled as the node recorded itself, whatever its directory is called
    assert {(row["controller_cluster"], row["node_id"]) for row in rows} == {("rmqc", "n0")}
    elections = [row for row in rows if row["command"] == "elect_master" and row["result"] == "ok"]
    assert [row["trigger"] for row in elections] == ["broker", "controller"], elections
    failover = elections[1]
    # the master was last heard from at its last heartbeat (one interval, 0.5 s, at most before it
    # hung), noticed a heartbeat timeout later
    assert timing.last_heartbeat_sent_ms - 600 <= failover["master_last_alive_ms"] <= timing.hung_ms
    assert failover["liveness_lost_ms"] - failover["master_last_alive_ms"] >= HEARTBEAT_TIMEOUT_MS

    summary = run_pipeline(spark, [export], tmp_path / "out")
    assert summary.violation_total == 0, summary.violations
    assert (summary.controller_clusters, summary.groups, summary.elections) == (1, 1, 2)
    assert summary.failovers.count == 1
    (row,) = pq.read_table(tmp_path / "out" / "failovers").to_pylist()
    assert row["duration_ms"] == failover["leader_ts_ms"] - failover["master_last_alive_ms"]
    # from the master's silence to the new master, which the 1008 followed
    assert HEARTBEAT_TIMEOUT_MS <= row["duration_ms"] <= timing.notified_ms - failover["master_last_alive_ms"]
    assert summary.failovers.max_ms == row["duration_ms"]
    assert data_pixels(tmp_path / "out" / "failover_durations.png", _report.FAILOVER_COLOR) > 100
