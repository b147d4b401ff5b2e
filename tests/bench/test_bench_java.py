"""The Java controller's parts of the benchmark suite: one real Apache RocketMQ controller JVM
(`make interop` builds the jars; `make test` does it first) found as leader through 1005 and loaded
by rmqc's own 1013 workload with its CPU read from /proc, asked every read and its masters lost at
once; a real 3-node rmqc's followers asked every read; and the ratios' arithmetic."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bench._docs import _java_tables
from bench._java import BENCH_JVM_FLAGS, JavaCluster
from bench._rmqc import RmqcCluster
from bench._scn_java import cpu_figures, measured_point, write_ratios
from bench._scn_java2 import (
    MASS_FAILOVER_BOUND_S,
    CountingSink,
    mass_failover,
    mass_ratios,
    node_roles,
    per_group_figures,
    read_answers,
    read_points,
    read_ratios,
)
from bench._scn_reads import LEVELS, prepare_read_group
from bench._scn_writes import rmqc_write_workload
from bench._suite import PROFILES, Suite
from bench._targets import target_rows


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


def test_mass_ratios_take_the_bound_for_a_java_mode_that_did_not_finish_and_say_it_is_a_lower_limit() -> None:
    results = {"rmqc": _failover(100.0, 80.0, 10), "dledger": _failover(2500.0, 900.0, 10),
               "jraft": _failover(None, 900.0, 3)}
    ratios = mass_ratios(results)
    assert ratios["dledger"] == {"java_over_rmqc": 25.0, "at_least": False}
    assert ratios["jraft"] == {"java_over_rmqc": MASS_FAILOVER_BOUND_S * 1000 / 100.0, "at_least": True}
    results["jraft"] = _failover(None, 0.0, 0, lost=0)  # its setup was refused for every group
    assert mass_ratios(results)["jraft"]["java_over_rmqc"] is None


def test_per_group_figures_count_a_group_done_only_when_both_other_replicas_got_their_1008() -> None:
    sink = CountingSink()
    addresses = ["a0", "a1", "b0", "b1", "c0", "c1"]
    sink.first_at.update({"a0": 10.010, "a1": 10.030, "b0": 10.020, "b1": 10.050, "c0": 10.040})
    figures = per_group_figures(sink, addresses, 10.0, [0, 1, 2])
    assert figures["per_group"]["n"] == 2  # group c: one replica never notified
    assert figures["per_group"]["p50_ms"] == pytest.approx(30.0)
    assert figures["per_group"]["max_ms"] == pytest.approx(50.0)
    assert figures["unfinished_groups"] == 1 and figures["finished"] is False


def test_read_ratios_leave_out_a_role_a_java_mode_refused() -> None:
    points = {"rmqc": {"leader": {"ops_per_s": 3000.0}, "follower 1": {"ops_per_s": 2000.0}},
              "dledger": {"leader": {"ops_per_s": 1000.0}, "follower 1": {"refused": {"code": 2007, "remark": ""}}}}
    assert read_ratios(points) == {"dledger": {"leader": 3.0, "follower 1": None}}
    assert node_roles(["n0", "n1", "n2"], "n1") == {"leader": "n1", "follower 1": "n0", "follower 2": "n2"}


@pytest.mark.slow
async def test_a_java_controller_refuses_no_read_on_its_leader_and_its_masters_are_replaced_at_once(
        tmp_path: Path) -> None:
    """One real DLedger JVM: 1004/1005/1006 answered on the leader, a 16-client read point with its
    CPU, then 3 groups' masters lost at once and every group's two replicas told of the new master."""
    profile = dataclasses.replace(PROFILES["tiny"], seconds=0.5, warmup_s=0.3)
    suite = Suite(profile, tmp_path)
    cluster = JavaCluster(tmp_path / "java", "dledger", nodes=1)
    try:
        await cluster.start()
        await prepare_read_group(cluster, "n0")
        answers = await read_answers(cluster, {"leader": "n0"}, (None,))
        points = await read_points(suite, cluster, "dledger", {"leader": "n0"}, answers)
        figures = await mass_failover(cluster, 3)
    finally:
        cluster.stop()
    assert {request: answer["code"] for request, answer in answers["leader"].items()} == \
        {"1004": 0, "1006": 0, "1005": 0}, answers
    assert points["leader"]["ops"] > 0 and points["leader"]["cpu_us_per_op"] > 0, points
    failover = figures["failover"]
    assert figures["setup_refused_groups"] == 0 and figures["setup_notified_s"] is not None, figures
    assert failover["finished"] and failover["groups_fully_notified"] == 3, failover
    assert 0 < failover["per_group"]["p50_ms"] <= failover["all_notified_ms"] < MASS_FAILOVER_BOUND_S * 1000


@pytest.mark.slow
async def test_every_rmqc_node_answers_each_read_at_each_consistency_level(tmp_path: Path) -> None:
    cluster = RmqcCluster(tmp_path, 3)
    await cluster.start()
    try:
        leader = await cluster.leader_id()
        await prepare_read_group(cluster, leader)
        answers = await read_answers(cluster, node_roles(cluster.ids, leader), LEVELS)
    finally:
        cluster.stop()
    assert set(answers) == {"leader", "follower 1", "follower 2"}
    for role, by_request in answers.items():
        assert len(by_request) == 3 * len(LEVELS), by_request
        assert all(answer["code"] == 0 for answer in by_request.values()), (role, by_request)


def _failover(all_ms: float | None, p50: float, done: int, lost: int = 10) -> dict[str, Any]:
    return {"failover": {"all_notified_ms": all_ms, "finished": done == lost, "groups_fully_notified": done,
                         "masters_lost": lost, "unfinished_groups": lost - done,
                         "per_group": {"n": done, "p50_ms": p50, "p99_ms": all_ms or p50}}}


def _kinds(closed_p99: float, hung_p99: float) -> dict[str, Any]:
    return {"closed": {"n": 30, "p50_ms": closed_p99 / 2, "p99_ms": closed_p99},
            "hung_from_deadline": {"n": 30, "p50_ms": hung_p99 / 2, "p99_ms": hung_p99}}


def java_results() -> dict[str, Any]:
    mass = {"rmqc": _failover(150.0, 90.0, 10), "dledger": _failover(2000.0, 900.0, 10),
            "jraft": _failover(None, 5000.0, 4)}
    refused = {"refused": {"code": 2007, "remark": "The controller is not in leader state"}}
    read = {"clients": 16, "ops_per_s": 3000.0, "p50_ms": 5.0, "p99_ms": 9.0, "cpu_us_per_op": 300.0}
    return {
        "java_mass_failover": {"status": "ok", "conditions": {"groups": 10, "bound_s": MASS_FAILOVER_BOUND_S},
                               "results": mass, "ratios": mass_ratios(mass)},
        "java_broker_failover": {"status": "ok", "results": {"rmqc": _kinds(40.0, 60.0),
                                                             "dledger": _kinds(1000.0, 6000.0)}},
        "java_reads": {"status": "ok", "conditions": {"clients": 16},
                       "answers": {"rmqc": {"follower 1": {"1004 stale": {"code": 0, "remark": ""}}},
                                   "dledger": {"follower 1": {"1004": {"code": 2007, "remark": "not leader"},
                                                              "1005": {"code": 0, "remark": ""}}}},
                       "throughput": {"rmqc": {"leader": read, "follower 1": dict(read, ops_per_s=2500.0)},
                                      "dledger": {"leader": dict(read, ops_per_s=1000.0), "follower 1": refused}},
                       "ratios": {"dledger": {"leader": 3.0, "follower 1": None}}},
    }


def test_the_java_targets_judge_against_the_better_java_mode() -> None:
    rows = {row.what: row for row in target_rows(java_results())}
    mass = rows["vs the Java controller: every broker master lost at once -> all groups' 1008 received"]
    assert mass.ratio.startswith("13.33x") and mass.met is True  # DLedger's 2,000 ms over rmqc's 150 ms
    assert "JRaft 6 groups not done within the bound" in mass.anchors
    dead = rows["vs the Java controller: dead master (connection closed; hung) -> 1008 received"]
    assert dead.met is True, dead  # 40/1000 and 60/6000, both <= 1/20
    reads = rows["vs the Java controller: 1004/1005/1006 on a follower, 16 clients"]
    assert reads.met is True and "DLedger: follower answers 0/2007" in reads.anchors, reads


def test_the_docs_show_rmqc_each_java_mode_and_their_ratio(tmp_path: Path) -> None:
    text = "\n".join(_java_tables(java_results()))
    assert "| Java DLedger | 2,000 | 900.0 | 2,000 | 10 of 10 | 13.33x |" in text
    assert f"| Java JRaft | not done in {MASS_FAILOVER_BOUND_S:.0f} s | 5,000 | 5,000 | 4 of 10 | >= 800.00x |" in text
    assert "| Java DLedger | 500.0 / 1,000 (30) | 3,000 / 6,000 (30) | 25.00x | 100.00x |" in text
    assert "| Java DLedger | follower 1 | 1004 2007 (not leader), 1005 0 |" in text
    assert "| Java DLedger | 1,000/s, 5.00 / 9.00, 300 us | refused (2007) | 3.00x | - |" in text


def test_the_same_run_part_is_rewritten_from_a_java_run_and_nothing_else(tmp_path: Path) -> None:
    from bench._docs import BEGIN, END, SAME_RUN_BEGIN, SAME_RUN_END, DocsError, update_same_run_part

    run = tmp_path / "java-full"
    run.mkdir()
    document = {"profile": {"name": "full"}, "started": 1795822276.0, "results": java_results(),
                "machine": {"nproc": 2, "cpu_model": "EPYC", "commit": "abc1234"}}
    (run / "results.json").write_text(json.dumps(document))
    main_section = f"{BEGIN}\nthe main results, another run's\n{END}"
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# B\n{main_section}\n## Java\n{SAME_RUN_BEGIN}\nold figures\n{SAME_RUN_END}\nprose after\n")
    update_same_run_part([run], docs)
    text = docs.read_text()
    assert main_section in text and text.endswith("prose after\n") and "old figures" not in text
    assert "run `java-full` (java_mass_failover, java_broker_failover, java_reads)" in text and "abc1234" in text
    assert "| Java DLedger | 2,000 | 900.0 | 2,000 | 10 of 10 | 13.33x |" in text
    assert "every broker master lost at once" in text  # its target row, measured by this run
    assert "Durable writes" not in text.split(SAME_RUN_BEGIN)[1]  # rows this run did not measure: left out
    docs.write_text("# no markers\n")
    with pytest.raises(DocsError, match="same-run comparisons"):
        update_same_run_part([run], docs)


def _write_points(ops_per_s: float, cpu_us: float) -> list[dict[str, Any]]:
    return [{"clients": 256, "ops_per_s": ops_per_s, "p99_ms": 100.0, "cpu_us_per_op": cpu_us}]


def test_the_writes_heartbeats_and_leader_kill_targets_judge_against_the_better_java_mode() -> None:
    gave_up = {"heartbeats_per_s": None, "gave_up_mid_blast": "socket connection broken"}
    beat = {"heartbeats_per_s": 80_000.0, "cpu_us_per_heartbeat": 12.0, "live_masters_failed_over": []}
    results = {
        "java_writes": {"status": "ok", "points_by_system": {"rmqc": _write_points(2100.0, 184.0),
                                                             "dledger": _write_points(521.0, 1544.0),
                                                             "jraft": _write_points(646.0, 1348.0)}},
        "java_heartbeats": {"status": "ok", "figures": {"rmqc": {"10000": beat},
                                                         "dledger": {"10000": {"heartbeats_per_s": 20_000.0}},
                                                         "jraft": {"10000": gave_up}}},
        "java_leader_kill": {"status": "ok", "results": {
            "rmqc": {"summary": {"n": 30, "p50_ms": 200.0, "p99_ms": 270.0}},
            "dledger": {"summary": {"n": 30, "p50_ms": 9200.0, "p99_ms": 17400.0}},
            "jraft": {"summary": {"n": 30, "p50_ms": 1650.0, "p99_ms": 1000.0}}}},
    }
    rows = {row.what: row for row in target_rows(results)}
    writes = rows["vs the Java controller: registration writes (1013), 256 clients"]
    assert writes.ratio == "3.25x the better mode" and writes.met is False  # 2,100 over JRaft's 646
    beats = rows["vs the Java controller: heartbeats (904) from 10,000 brokers"]
    assert beats.ratio == "4.00x the better mode" and beats.met is True and "JRaft gave up" in beats.anchors
    beat["live_masters_failed_over"] = ["broker-1"]  # one mistaken failover misses it, whatever the rate
    assert {row.what: row for row in target_rows(results)}[beats.what].met is False
    kill = rows["vs the Java controller: controller leader SIGKILL -> a write accepted again"]
    assert kill.ratio.startswith("3.70x") and kill.met is False  # JRaft's p99 1,000 ms over rmqc's 270 ms
    results["java_writes"]["ratios"] = {"dledger": {"256": {"throughput_rmqc_over_java": 4.03,
                                                            "cpu_per_op_java_over_rmqc": 8.39}}}
    for point in (p for points in results["java_writes"]["points_by_system"].values() for p in points):
        point["p50_ms"] = 50.0
    results["java_leader_kill"]["conditions"] = {"kills": 30}
    text = "\n".join(_java_tables(results))
    assert "| 256 | 2,100/s, 50.0 / 100.0, 184 us | 521/s, 50.0 / 100.0, 1,544 us | 646/s, 50.0 / 100.0, 1,348 us | " \
           "DLedger 4.03x, CPU 8.39x |" in text
    assert "| 10,000 brokers | 80,000/s, 12.00 us" not in text  # no RSS in this result: the rate alone
    assert "| 10,000 brokers | 80,000/s | 20,000/s | gave up: socket connection broken |" in text
    assert "(30 kills each): rmqc p50 200.0 / p99 270.0 ms; Java DLedger p50 9,200 / p99 17,400 ms" in text
