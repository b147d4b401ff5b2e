"""`rmqc chaos run` end to end on real processes: a short schedule of leader-kill, suspend,
partition, loss and disk-stall on 3 nodes, with the admin designating masters, passes with every
output written and the design's RTO target met (p99 <= 2 s from the fault's start for the kill,
the pause and the partition); then a lost write planted into that run's own history is reported."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rmqc.chaos import read_jsonl, summarize
from rmqc.chaos._summary import RTO_TARGET_P99_MS
from rmqc.launcher import rmqc_argv

pytestmark = pytest.mark.slow
RUN_BOUND_S = 240  # the run takes about 30 s here; this bound only turns a hang into a failure
FAULTS = ("leader-kill", "suspend", "partition", "loss", "disk-stall")


def test_a_short_schedule_passes_and_writes_every_output(tmp_path: Path) -> None:
    out = tmp_path / "chaos"
    argv = [*rmqc_argv(), "chaos", "run", "--nodes", "3", "--windows", str(len(FAULTS)), "--faults", ",".join(FAULTS),
            "--out", str(out), "--seed", "20", "--broker-groups", "4", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_BOUND_S)
    assert "chaos seed 20" in done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, f"{summary['violations']}\n{done.stderr[-3000:]}"
    assert summary["windows"] == len(FAULTS) and summary["violations"] == []
    assert summary["lost"] == 0 and summary["duplicates"] == 0
    assert summary["acknowledged_writes"] > 0
    assert set(summary["rto_ms"]) == set(FAULTS)
    for rto in summary["rto_ms"].values():
        assert set(rto) == {"p50", "p99", "max"} and rto["max"] is not None
    assert_rto_target_met(summary, done.stderr)
    assert summary["designations"]["sent"] > 0  # the admin designated masters, every answer checked
    # and some were elected: refusals alone (a wrong clusterName: 2005) would check nothing
    assert summary["designations"]["elected"] > 0
    for name in ("history.jsonl", "summary.json", "report.md", "timeline.png", "rto.png", "clients.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "export" / "n0.jsonl").read_text().startswith('{"controller_cluster"')
    report = (out / "report.md").read_text()
    assert "# Chaos run: PASS" in report and "## RTO against the target" in report
    assert_planted_lost_write_is_found(out)


def assert_rto_target_met(summary: dict[str, Any], stderr: str) -> None:
    """The design's target (RTO p99 <= 2 s for kills, pauses and partitions), judged on the write
    RTO from the fault's start, and the leader-kill's time from its restart reported beside it."""
    targets = summary["rto_targets"]
    assert targets["target_p99_ms"] == RTO_TARGET_P99_MS == 2000.0
    assert set(targets["kinds"]) == {"leader-kill", "suspend", "partition"}  # the targeted ones
    for kind, row in targets["kinds"].items():
        assert row["p99"] == summary["rto_ms"][kind]["p99"], (kind, row)  # counted from the fault
        assert row["unrecovered"] == 0 and row["p99"] <= RTO_TARGET_P99_MS and row["met"], (kind, row)
    assert targets["all_met"]
    assert set(targets["kinds"]["leader-kill"]["from_restart"]) == {"p50", "p99"}
    assert "from_restart" not in targets["kinds"]["suspend"]
    assert "RTO target p99 <= 2,000 ms from the fault's start: met by every kind" in stderr


def assert_planted_lost_write_is_found(out: Path) -> None:
    """The run's own history with one group's final read set back below its last acknowledged id."""
    records = read_jsonl(out / "history.jsonl")
    final = next(r for r in records if r["type"] == "final")
    acked = max(r["id"] for r in records if r["type"] == "write" and r["key"] == final["key"] and r["complete"])
    final["value"] = str(acked)  # nextBrokerId = acked: id `acked` was lost
    summary = summarize(records, {})
    assert summary["lost"] == 1
    assert any(v.startswith(f"lost: {final['key']}") for v in summary["violations"])


@pytest.mark.parametrize(("bad", "said"), [(["--nodes", "4"], "3 or 5"),
                                          (["--faults", "leader-kill,nosuch"], "nosuch")])
def test_bad_options_are_refused_before_a_seed_is_announced(tmp_path: Path, bad: list[str], said: str) -> None:
    done = subprocess.run([*rmqc_argv(), "chaos", "run", "--out", str(tmp_path / "chaos"), *bad],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "chaos seed" not in done.stderr


def test_the_help_names_the_whole_default_fault_list() -> None:
    from typer.testing import CliRunner

    from rmqc.cli.chaos import DEFAULT_FAULTS
    from rmqc.cli.main import app

    result = CliRunner().invoke(app, ["chaos", "run", "--help"], env={"COLUMNS": "100"})
    text = " ".join(result.output.replace("│", " ").split())
    assert all(kind in text for kind in DEFAULT_FAULTS.split(",")) and "…" not in text, text
