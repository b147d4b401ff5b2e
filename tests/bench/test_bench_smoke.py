"""The benchmark suite's machinery on a tiny load: statistics, the closed loop, the targets table,
and one real scenario (a 3-node rmqc cluster) through to results.json and report.md. No etcd needed:
the anchors are skipped here and the report must say so."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from bench._generators import CLOCK_TICKS, shares
from bench._load import LoadResult, Workload, closed_loop, merge_results
from bench._loadworker import WorkloadSpec, read_result
from bench._report import write_report
from bench._scenarios import SCENARIOS, UnknownScenario, select
from bench._scn_reads import reads_rmqc
from bench._scn_security import summarise
from bench._scn_writes import writes_etcd, writes_rmqc
from bench._stats import percentile, summarise_ms
from bench._suite import PROFILES, Suite, run_scenarios
from bench._targets import target_rows
from bench.bench_floor import composed_floor, main as floor_main


def test_percentile_is_nearest_rank() -> None:
    samples = [float(i) for i in range(100, 0, -1)]
    assert percentile(samples, 0.50) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile(samples, 1.0) == 100.0
    assert math.isnan(percentile([], 0.5))
    assert summarise_ms([2.0, 4.0])["mean_ms"] == 3.0


async def test_closed_loop_counts_refusals_as_errors_and_samples_every_accepted_op() -> None:
    class Conn:
        closed = 0

        async def aclose(self) -> None:
            Conn.closed += 1

    async def open_conn(_client: int) -> Conn:
        return Conn()

    async def op(_conn: Conn, _client: int, seq: int) -> bool:
        await trio.lowlevel.checkpoint()
        return seq % 2 == 0

    result = await closed_loop(Workload(open_conn, op), clients=3, duration_s=0.2, warmup_s=0.05)
    assert result.ops > 0 and result.errors > 0
    assert len(result.latencies_ms) == result.ops
    assert Conn.closed == 3
    assert abs(result.ops - result.errors) <= 3 * 2  # every client alternates, windows cut at most one each side


def test_generator_shares_cover_every_client_once_and_results_merge() -> None:
    spec = WorkloadSpec("bench._scn_reads:rmqc_read_workload", {"addresses": ["127.0.0.1:1"], "level": "stale"})
    parts = shares(spec, clients=10, generators=3, warmup_s=0.1, duration_s=0.2, work=Path("/w"))
    assert [(p.first_client, p.clients) for p in parts] == [(0, 4), (4, 3), (7, 3)]
    assert len({p.result_path for p in parts}) == 3
    with pytest.raises(ValueError):
        shares(spec, clients=2, generators=3, warmup_s=0.1, duration_s=0.2, work=Path("/w"))
    merged = merge_results([LoadResult(4, 2.0, ops=10, errors=1, latencies_ms=[1.0] * 10),
                            LoadResult(3, 2.0, ops=6, latencies_ms=[2.0] * 6, first_error="LoadError: x")])
    assert (merged.clients, merged.ops, merged.errors, merged.first_error) == (7, 16, 1, "LoadError: x")
    assert len(merged.latencies_ms) == 16 and merged.ops_per_s == 8.0


def test_targets_table_reads_the_results() -> None:
    results = {
        "writes_rmqc": {"status": "ok",
                        "points": [{"clients": 256, "ops_per_s": 6000.0, "p50_ms": 20.0, "p99_ms": 40.0}]},
        "writes_etcd": {"status": "ok",
                        "points": [{"clients": 256, "ops_per_s": 2400.0, "p50_ms": 50.0, "p99_ms": 90.0}]},
        "single_queue": {"status": "failed", "message": "boom"},
    }
    rows = {row.what: row for row in target_rows(results)}
    writes = rows["durable writes (fsync on a quorum), 256 clients"]
    assert writes.met is True and writes.ratio == "2.50x of etcd"
    assert rows["vs batch 1 / pipeline 1 (the single-queue design)"].measured == "single_queue failed: boom"
    assert rows["heartbeats ingested, 3-node cluster"].measured == "heartbeats not run"
    assert rows["leader paused (SIGSTOP) -> writes accepted again"].measured == "pauses not run"
    assert rows["security on (ACL + TLS + peer secret) vs off"].measured == "security not run"
    # one per row of design.md's Targets table that bench/ measures, six of its row "vs the Java
    # controller" (writes, heartbeats, leader kill, masters lost at once, dead master closed and
    # hung, follower reads) and the NameServer's three (lookup p99, lookup CPU, re-registrations)
    assert len(rows) == 25


def test_security_ratios_are_on_over_off_and_the_row_needs_every_one_at_0_8() -> None:
    def one_round(writes_1: float, writes_4: float, heartbeats: float) -> dict:
        return {"points": [{"clients": 1, "ops_per_s": writes_1, "p50_ms": 1.0, "p99_ms": 3.0},
                           {"clients": 4, "ops_per_s": writes_4, "p50_ms": 2.0, "p99_ms": 5.0}],
                "heartbeats_per_s": heartbeats}

    # medians over the rounds: one disturbed round (the last "off" one) does not move them
    figures = summarise({"off": [one_round(200, 400, 2000), one_round(200, 400, 2000), one_round(20, 40, 200)],
                         "on": [one_round(180, 320, 1800), one_round(190, 300, 1900), one_round(170, 340, 1700)]},
                        many=4)
    assert figures["ratios"] == {"writes_per_s_1": 0.9, "writes_per_s_4": 0.8, "heartbeats_per_s": 0.9}

    def row(result: dict):  # type: ignore[no-untyped-def]
        rows = target_rows({"security": {"status": "ok", **result}})
        return next(r for r in rows if r.what.startswith("security on"))

    assert row(figures).met is True
    figures["ratios"]["heartbeats_per_s"] = 0.79
    assert row(figures).met is False and row(figures).ratio == "0.79x at worst"


def test_pause_row_is_met_only_within_every_bound() -> None:
    summary = {"pauses": 20, "worst_leader_recovery_ms": 830.0, "worst_silence_ms": 35.0, "lost": 0,
               "stale_reads": 0}

    def row(figures: dict[str, float]):  # type: ignore[no-untyped-def]
        rows = target_rows({"pauses": {"status": "ok", "summary": figures}})
        return next(r for r in rows if r.what == "leader paused (SIGSTOP) -> writes accepted again")

    assert row(summary).met is True
    assert row(summary | {"worst_silence_ms": 180.0}).met is False
    assert row(summary | {"worst_leader_recovery_ms": 5012.0}).met is False
    assert row(summary | {"lost": 1}).met is False


def test_profiles_select_scenarios() -> None:
    assert [name for name, _, _ in select("full", "")] == [name for name, _, _ in SCENARIOS]
    assert "test_suite" not in [name for name, _, _ in select("quick", "")]
    assert [name for name, _, _ in select("quick", "restart,scale")] == ["scale", "restart"]
    with pytest.raises(UnknownScenario):
        select("quick", "nope")


@pytest.mark.slow
async def test_tiny_run_writes_results_and_report(tmp_path: Path) -> None:
    profile = dataclasses.replace(PROFILES["tiny"], seconds=0.3, warmup_s=0.1, write_clients=(1, 2))
    suite = Suite(profile, tmp_path, skip_anchors=True)
    with trio.fail_after(120):
        await run_scenarios(suite, [("writes_rmqc", "writes", writes_rmqc), ("writes_etcd", "etcd", writes_etcd)])
    report = write_report(suite)
    document = json.loads((tmp_path / "results.json").read_text())
    rmqc = document["results"]["writes_rmqc"]
    assert rmqc["status"] == "ok", rmqc.get("traceback")
    assert [p["clients"] for p in rmqc["points"]] == [1, 2]
    assert {"ops_per_s", "p50_ms", "p99_ms", "errors"} <= set(rmqc["points"][0])
    assert rmqc["points"][0]["ops"] > 0
    assert {"nodes", "fsync", "payload_bytes", "nproc", "python"} <= set(rmqc["conditions"])
    assert document["results"]["writes_etcd"]["status"] == "skipped"
    assert {"nproc", "memory_mb", "python"} <= set(document["machine"])
    text = report.read_text()
    assert "## Targets" in text and "durable writes" in text and "writes_etcd" in text
    assert (tmp_path / "writes_throughput.png").stat().st_size > 0


@pytest.mark.slow
async def test_tiny_reads_run_their_many_clients_in_two_generator_processes(tmp_path: Path) -> None:
    profile = dataclasses.replace(PROFILES["tiny"], seconds=0.3, warmup_s=0.1, many_read_clients=5, read_generators=2)
    suite = Suite(profile, tmp_path)
    with trio.fail_after(120):
        await run_scenarios(suite, [("reads_rmqc", "reads", reads_rmqc)])
    result = suite.results["reads_rmqc"]
    assert result["status"] == "ok", result.get("traceback")
    assert result["conditions"]["read_generators"] == 2
    assert result["single_client"]["lease/leader"]["ops"] > 0  # latency points stay in the harness
    for where, point in result["many_clients"].items():
        assert (point["clients"], point["generators"], point["errors"]) == (5, 2, 0), where
        # both processes served their share of the clients, and the point is their sum
        work = tmp_path / "work" / "reads_rmqc" / f"rmqc_1004_linearizable_{where.replace(' ', '_')}-g2"
        parts = [read_result(work / f"generator-{i}.json")[0] for i in range(2)]
        assert [part.clients for part in parts] == [3, 2] and all(part.ops > 0 for part in parts)
        assert point["ops"] == sum(part.ops for part in parts) == point["n"]
        cores = point["cpu_cores"]
        assert len(cores["generators"]) == 2 and all(c > 0 for c in cores["generators"])
        assert set(cores["nodes"]) == {"n0", "n1", "n2"} and cores["nodes"][result["leader"]] > 0
        assert point["cpu_us_per_op"]["nodes"] > 0
        # The machine's busy time includes the processes', up to how coarsely both are counted: each
        # of the five processes' and each CPU's counter is read in whole clock ticks at both ends of
        # the window, and /proc/stat charges a tick to whoever was running when it fired (a sample).
        processes = sum(cores["nodes"].values()) + sum(cores["generators"])
        ticks = (5 + suite.machine["nproc"]) / CLOCK_TICKS / point["window_s"]
        assert cores["machine"] >= processes * 0.9 - ticks
    assert result["all_over_leader"] > 0 and result["all_over_leader_busiest_node_bound"] > 0
    row = next(r for r in target_rows(suite.results) if r.what == "linearizable reads, all nodes, many clients")
    assert "2 generator processes" in row.measured and "cores busy of" in row.measured


def test_floor_composes_the_slower_flush_and_four_hops() -> None:
    floor = composed_floor([1.0, 3.0], [0.5])
    assert set(floor) <= {2.0, 4.0} and 2.0 in floor and 4.0 in floor
    assert floor.count(4.0) > floor.count(2.0)  # the slower of two: 3 of 4 pairs hold a 3.0


@pytest.mark.slow
def test_floor_script_measures_every_flush_and_both_hops_and_cleans_up(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert floor_main(["--repeat", "5", "--warmup", "1", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for title in ("LMDB write txn commit (sync)", "append + fdatasync", "pre-zeroed pwrite + fdatasync"):
        assert f"{title:<32} alone" in out and "(n 5)" in out and "(n 15)" in out  # 3 processes at once
        assert f"floor, {title:<30} raw  hops" in out and f"floor, {title:<30} Trio hops" in out
    assert "loopback TCP round trip, Trio" in out
    assert list(tmp_path.iterdir()) == []  # the data went to a temporary directory, removed


def test_a_run_into_a_used_folder_starts_from_fresh_data_directories(tmp_path: Path) -> None:
    stale = tmp_path / "work" / "writes_rmqc" / "rmqc" / "n0"
    stale.mkdir(parents=True)
    (stale / "data.mdb").write_bytes(b"an earlier run's log")
    (tmp_path / "results.json").write_text("{}")
    suite = Suite.for_run(PROFILES["tiny"], tmp_path, skip_anchors=True)
    assert not (tmp_path / "work").exists()
    assert (tmp_path / "results.json").exists()  # replaced by this run's, not removed up front
    assert suite.work_dir("writes_rmqc").is_dir()
    # rewriting a report keeps the folder's logs and data (`python -m bench report`)
    (suite.work_dir("writes_rmqc") / "n0.log").write_text("kept")
    Suite(PROFILES["tiny"], tmp_path)
    assert (tmp_path / "work" / "writes_rmqc" / "n0.log").read_text() == "kept"
