"""The Java controller's parts of the benchmark suite: one real Apache RocketMQ controller JVM
(`make interop` builds the jars; `make test` does it first) found as leader through 1005 and loaded
by rmqc's own 1013 workload with its CPU read from /proc; and the ratios' arithmetic."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench._java import BENCH_JVM_FLAGS, JavaCluster
from bench._scn_java import cpu_figures, measured_point, write_ratios
from bench._scn_writes import rmqc_write_workload
from bench._suite import PROFILES, Suite


def test_cpu_figures_sum_every_node_over_the_window_and_divide_by_accepted_ops() -> None:
    start = (10.0, {"n0": 1.0, "n1": 2.0})
    end = (12.0, {"n0": 2.0, "n1": 2.5})
    figures = cpu_figures(start, end, ops=500)
    assert figures["cpu_cores_per_node"] == {"n0": 0.5, "n1": 0.25}
    assert figures["cpu_us_per_op"] == 3000.0  # 1.5 CPU seconds / 500 writes
    assert cpu_figures(start, end, ops=0)["cpu_us_per_op"] is None


def test_write_ratios_pair_each_java_mode_with_rmqc_at_the_same_clients() -> None:
    points = {"rmqc": [{"clients": 1, "ops_per_s": 300.0, "cpu_us_per_op": 1000.0}],
              "dledger": [{"clients": 1, "ops_per_s": 100.0, "cpu_us_per_op": 5000.0}]}
    assert write_ratios(points) == {"dledger": {"1": {"throughput_rmqc_over_java": 3.0,
                                                      "cpu_per_op_java_over_rmqc": 5.0}}}


def test_an_unknown_mode_is_refused_before_any_jvm_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of"):
        JavaCluster(tmp_path, "zookeeper")


@pytest.mark.slow
async def test_one_java_controller_node_takes_a_write_point_with_its_cpu(tmp_path: Path) -> None:
    profile = dataclasses.replace(PROFILES["tiny"], seconds=0.5, warmup_s=0.3)
    suite = Suite(profile, tmp_path)
    cluster = JavaCluster(tmp_path / "java", "dledger", nodes=1)
    assert "-XX:TieredStopAtLevel=1" not in BENCH_JVM_FLAGS
    try:
        await cluster.start()
        assert await cluster.leader_id() == "n0"
        assert "-XX:TieredStopAtLevel=1" not in cluster.procs["n0"].argv
        point = await measured_point(suite, "java 1013", rmqc_write_workload(cluster, "n0"), 2, cluster.procs)
    finally:
        cluster.stop()
    assert point["ops"] > 0 and point["errors"] == 0, point
    assert "refusals" not in point
    assert point["cpu_us_per_op"] > 0
    assert point["cpu_cores_per_node"]["n0"] > 0
    assert point["generator_cpu_cores"] > 0
