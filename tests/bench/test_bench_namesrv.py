"""The NameServer scenarios: the simulated fleet's registrations, the registration window's
validity checks, the targets they feed, and a tiny real run of each scenario (3 rmqc nodes and a
real Java NameServer JVM; `make interop` builds the jars, `make test` does it first)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
import trio

from bench._docs import _namesrv_section
from bench._namesrv_fleet import BROKERS_PER_TOPIC, registration, topic_of
from bench._regworker import Plan, Tally, write_tally
from bench._rmqc import RmqcCluster, durable_write
from bench._scn_namesrv import (
    MAX_LAG_S,
    NamesrvSystem,
    commit_index,
    fleet_plans,
    namesrv_lookups,
    namesrv_registrations,
    window_figures,
)
from bench._scn_reads import LEVELS
from bench._suite import PROFILES, Suite
from bench._targets import _namesrv_lookup_cpu, _namesrv_lookup_latency, _namesrv_registrations
from rmqc.launcher import free_ports


def test_a_broker_sends_the_same_registration_every_time_with_a_matching_crc() -> None:
    ext, body = registration(5, 10)
    assert registration(5, 10) == (ext, body)
    assert ext["bodyCrc32"] == zlib.crc32(body) & 0x7FFFFFFF
    assert ext["brokerId"] == 0 and body.count(b'"topicName"') == 10
    # brokers of one set carry the same topics, the next set others
    assert registration(5 - 5 % BROKERS_PER_TOPIC, 10)[1] == body
    assert topic_of(0, 0) != topic_of(BROKERS_PER_TOPIC, 0)


def test_fleet_plans_give_every_broker_to_exactly_one_worker(tmp_path: Path) -> None:
    plans = fleet_plans(["127.0.0.1:1"], 1001, 30.0, 63.0, 2, tmp_path)
    covered = [b for plan in plans for b in range(plan.first_broker, plan.first_broker + plan.brokers)]
    assert covered == list(range(1001))
    assert {plan.fleet for plan in plans} == {1001}
    assert Plan.from_json(plans[1].to_json()) == plans[1]


def test_a_generator_tally_with_refusals_is_written_as_the_harness_reads_it(tmp_path: Path) -> None:
    write_tally(tmp_path / "tally.json", Tally(sent=3, answered=3, refused={"1 system busy": 2}, max_lag_s=0.5))
    tally = json.loads((tmp_path / "tally.json").read_text())
    assert tally["refused"] == {"1 system busy": 2} and tally["sent"] == 3


def _figures(tally: dict[str, Any], lookup_errors: int = 0, commits: tuple[int, int] = (100, 100)) -> dict[str, Any]:
    system = NamesrvSystem("rmqc", {}, ["a", "b", "c"], {}, "rmqc")
    plans = [Plan(["a", "b", "c"], 10, 0, 10, 100, 10.0, 20.0, "unused")]
    readings = ({"t": 0.0, "cpu": {"n0": 1.0}, "generators": [0.0], "commit": {"n0": commits[0]}},
                {"t": 15.0, "cpu": {"n0": 2.5}, "generators": [1.5], "commit": {"n0": commits[0]}},
                {"t": 30.0, "cpu": {"n0": 4.0}, "generators": [3.0], "commit": {"n0": commits[1]}})
    lookup = {"ops": 0 if lookup_errors else 50, "errors": lookup_errors, "p50_ms": 1.0, "p99_ms": 2.0}
    return window_figures(system, (10, 10.0, 30.0, 1), plans, readings, [tally], lookup)


def test_the_registration_window_counts_log_entries_and_is_not_valid_when_its_load_was_not_made() -> None:
    kept_up = {"sent": 60, "answered": 60, "refused": {}, "refused_by_round": {}, "max_lag_s": 0.01}
    good = _figures(kept_up, commits=(100, 110))
    assert good["valid"] and good["problems"] == []
    assert good["log_entries_per_min"] == {"n0": 20.0}  # 10 entries in 30 s
    assert good["registrations_per_s"] == 3.0 and good["wanted_per_s"] == 3.0
    assert good["cpu_cores_per_node"] == {"n0": 0.1}  # over the first half only: 1.5 CPU s in 15 s
    lagging = _figures({**kept_up, "max_lag_s": MAX_LAG_S + 0.5})
    assert not lagging["valid"] and "behind schedule" in lagging["problems"][0]
    unanswered = _figures({**kept_up, "answered": 50})
    assert not unanswered["valid"] and "10 of 60 registrations unanswered" in unanswered["problems"]
    refused = _figures({**kept_up, "refused": {"1 busy": 3}, "refused_by_round": {"0": 2, "1": 1}})
    assert refused["refused_by_round"] == {"0": 2, "1": 1}
    assert refused["valid"] and refused["refused"] == {"1 busy": 3}  # the server's failing, not the generator's
    assert not _figures(kept_up, lookup_errors=5)["valid"]


def _lookup_result(p99_ms: float, cpu_us: float, java_cpu_us: float) -> dict[str, Any]:
    point = {"clients": 1, "ops_per_s": 100.0, "p50_ms": p99_ms / 2, "p99_ms": p99_ms, "cpu_us_per_lookup": cpu_us}
    ours = {f"{level}/{role}": {"1": point, "64": point} for level in LEVELS for role in ("leader", "follower")}
    java = {**point, "cpu_us_per_lookup": java_cpu_us, "p99_ms": 3.0}
    return {"status": "ok", "conditions": {"clients": [1, 64]},
            "figures": {"rmqc": ours, "java": {"local": {"1": java, "64": java}}}, "ratios": {}}


def _registration_result(brokers: int, entries: float, rss: float, valid: bool = True,
                         refused: dict[str, int] | None = None) -> dict[str, Any]:
    figure = {"valid": valid, "problems": [] if valid else ["the generator fell 2.00 s behind"],
              "registrations_per_s": 1000.0, "wanted_per_s": 1000.0, "log_entries_per_min": {"n0": entries},
              "rss_mb": {"n0": rss}, "cpu_cores_per_node": {"n0": 0.2}, "cpu_us_per_registration": 100.0,
              "refused": refused or {},
              "lookup": {"p50_ms": 0.5, "p99_ms": 0.9}}
    java = {**figure, "log_entries_per_min": None, "rss_mb": {"namesrv": 400.0}, "cpu_cores_per_node": {"namesrv": 0.3}}
    return {"status": "ok", "conditions": {"brokers": brokers, "topics_per_broker": 100, "period_s": 30.0,
                                           "window_s": 60.0}, "figures": {"rmqc": figure, "java": java}}


def test_the_namesrv_targets_are_met_or_missed_by_the_figures() -> None:
    assert _namesrv_lookup_latency({"namesrv_lookups": _lookup_result(0.8, 50, 60)}).met is True
    assert _namesrv_lookup_latency({"namesrv_lookups": _lookup_result(1.2, 50, 60)}).met is False
    assert _namesrv_lookup_cpu({"namesrv_lookups": _lookup_result(0.8, 50, 60)}).met is True
    assert _namesrv_lookup_cpu({"namesrv_lookups": _lookup_result(0.8, 70, 60)}).met is False
    assert _namesrv_registrations({"namesrv_registrations": _registration_result(10_000, 0, 250)}).met is True
    assert _namesrv_registrations({"namesrv_registrations": _registration_result(10_000, 0, 350)}).met is False
    assert _namesrv_registrations({"namesrv_registrations": _registration_result(1_000, 2, 50)}).met is False
    assert _namesrv_registrations({"namesrv_registrations": _registration_result(1_000, 0, 50)}).met is None
    refused = _namesrv_registrations({"namesrv_registrations": _registration_result(10_000, 0, 50, refused={"1 t": 4})})
    assert refused.met is False and "refused 4" in refused.measured
    late = _registration_result(10_000, 3, 50)
    late["figures"]["rmqc"]["first_round_settled"] = False
    late_row = _namesrv_registrations({"namesrv_registrations": late})
    assert late_row.met is False and "still being written" in late_row.measured
    not_valid = _namesrv_registrations({"namesrv_registrations": _registration_result(10_000, 0, 50, valid=False)})
    assert not_valid.met is None and "NOT VALID" in not_valid.measured
    missing = _namesrv_lookup_latency({})
    assert missing.met is None and "not run" in missing.measured
    section = "\n".join(_namesrv_section({"namesrv_lookups": _lookup_result(0.8, 50, 60),
                                          "namesrv_registrations": _registration_result(10_000, 0, 250)}))
    assert "### NameServer" in section and "| linearizable/follower | 64 |" in section
    assert "| RSS, largest rmqc node / Java | 0.62x | |" in section


@pytest.mark.slow
async def test_the_commit_index_read_for_the_log_entries_moves_with_a_write(tmp_path: Path) -> None:
    cluster = RmqcCluster(tmp_path, 1)
    (port,) = free_ports(1)
    cluster.nodes[0].metrics_port = port
    try:
        await cluster.start()
        metrics = f"127.0.0.1:{port}"
        first = await trio.to_thread.run_sync(commit_index, metrics)
        conn = await cluster.open_conn("n0")
        assert await durable_write(conn, "commit", 0, 0)
        await conn.aclose()
        with trio.fail_after(10):  # the node refreshes its gauges about once a second
            while await trio.to_thread.run_sync(commit_index, metrics) <= first:
                await trio.sleep(0.1)
    finally:
        cluster.stop()


@pytest.mark.slow
async def test_a_tiny_lookup_run_measures_every_rmqc_level_and_role_and_the_java_namesrv(tmp_path: Path) -> None:
    result = await namesrv_lookups(Suite(PROFILES["tiny"], tmp_path))
    figures = result["figures"]
    assert set(figures["rmqc"]) == {f"{level}/{role}" for level in LEVELS for role in ("leader", "follower")}
    assert set(figures["java"]) == {"local"}
    for points in [*figures["rmqc"].values(), figures["java"]["local"]]:
        assert set(points) == {"1", "4"}
        for point in points.values():
            assert point["ops"] > 0 and point["errors"] == 0, point
            assert point["cpu_us_per_lookup"] > 0
    assert result["ratios"]["stale/follower"]["4"]["throughput_rmqc_over_java"] > 0
    row = _namesrv_lookup_cpu({"namesrv_lookups": {**result, "status": "ok"}})
    assert row.met is not None and "4 clients" in row.measured


@pytest.mark.slow
async def test_a_tiny_registration_run_writes_no_log_entry_and_reports_both_systems(tmp_path: Path) -> None:
    result = await namesrv_registrations(Suite(PROFILES["tiny"], tmp_path))
    rmqc, java = result["figures"]["rmqc"], result["figures"]["java"]
    for figure in (rmqc, java):
        assert figure["valid"] and figure["refused"] == {}, (figure["problems"], figure["refused"])
        assert figure["sent"] == figure["answered"] > 0
        assert figure["lookup"]["ops"] > 0
        assert all(mb and mb > 0 for mb in figure["rss_mb"].values())
    assert rmqc["log_entries_per_min"] == {"n0": 0.0, "n1": 0.0, "n2": 0.0}
    assert rmqc["first_round_settled"] is True and java["first_round_settled"] is None
    assert rmqc["wanted_per_s"] == 3 * java["wanted_per_s"]  # every broker registers with every rmqc node
    assert java["log_entries_per_min"] is None
    assert result["conditions"]["nodes"] == {"rmqc": 3, "java": 1}
