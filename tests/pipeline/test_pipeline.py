"""The real pipeline on local Spark over small generated and hand-written histories."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chart_reading import axis_ranges, data_pixels
from matplotlib import dates
from rich.console import Console
from typer.testing import CliRunner

from rmqc import fsm
from rmqc.cli.analyze import found_problems, render_summary
from rmqc.cli.main import app
from rmqc.linearizability import write_history as write_ops
from rmqc.pipeline import LOG_DIVERGENCE, TABLES, _report, run_pipeline, synth
from rmqc.raft._types import Entry, EntryType

# A pipeline run over the module fixture takes a minute or two on an idle 2-core machine but several
# times that when the machine is shared; the fixture's run counts against the first test's timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PLANTS = {kind: 1 for kind in synth.PLANTABLE_KINDS} | {"broker_id_reused": 2}
SEED = 11


# ---- a hand-written history --------------------------------------------------------------------

def _row(index: int, command: str, ts_ms: int, **columns) -> dict:
    row = dict.fromkeys(synth.ARROW_SCHEMA.names)
    row |= dict(controller_cluster="c", node_id="n1", index=index, term=1, seq=0, command=command,
                leader_ts_ms=ts_ms, cluster_name="C", broker_name="b", result="ok")  # fmt: skip
    return row | columns


def _state(epoch: int, sse: int, sss: list[int], prev: list[int] | None) -> dict:
    return dict(master_epoch=epoch, sync_state_set_epoch=sse, sync_state_set=sss, prev_sync_state_set=prev)


HAND_WRITTEN = [
    _row(1, "apply_broker_id", 1000, broker_id=1, broker_address="10.0.0.1:1",
         register_check_code="10.0.0.1:1;1", **_state(0, 0, [], None)),
    _row(2, "apply_broker_id", 1100, broker_id=2, broker_address="10.0.0.2:1",
         register_check_code="10.0.0.2:1;2", **_state(0, 0, [], [])),
    _row(3, "elect_master", 1200, trigger="broker", elected=True, new_master_id=1,
         unclean_enabled=False, **_state(1, 1, [1], [])),
    _row(4, "alter_sync_state_set", 1300, **_state(1, 2, [1, 2], [1])),
    # The master dies at 5000; the first controller election finds nobody, a broker one succeeds.
    # Written by an rmqc before `master_last_alive_ms`: the failover's start is unknown.
    _row(5, "elect_master", 5100, trigger="controller", elected=False, prev_master_id=1,
         liveness_lost_ms=5000, unclean_enabled=False, **_state(2, 2, [1, 2], [1, 2])),
    _row(6, "elect_master", 5900, trigger="broker", elected=True, new_master_id=2, prev_master_id=None,
         unclean_enabled=False, **_state(3, 3, [2], [1, 2])),
    _row(7, "alter_sync_state_set", 6000, result="stale_master_epoch", **_state(3, 3, [2], [2])),
    _row(8, "update_broker_address", 6100, broker_id=2, broker_address="10.0.0.2:2",
         **_state(3, 3, [2], [2])),
    # The group is removed and created again: epochs and ids start afresh, nothing is reused.
    _row(9, "clean_broker_data", 7000, **_state(None, None, None, [2])),
    _row(10, "apply_broker_id", 8000, broker_id=1, broker_address="10.0.0.9:1",
         register_check_code="10.0.0.9:1;8000", **_state(0, 0, [], None)),
    _row(11, "elect_master", 8100, trigger="broker", elected=True, new_master_id=1,
         unclean_enabled=False, **_state(1, 1, [1], [])),
    _row(12, "noop", 9000, cluster_name=None, broker_name=None),
]  # fmt: skip



# ---- a history exported by the real state machine (rmqc.fsm.HistoryExporter) -----------------

T0_MS = 1_767_225_600_000


def _apply_id(broker_id: int, ts_ms: int) -> fsm.ApplyBrokerId:
    address = f"10.1.0.{broker_id}:10911"
    return fsm.ApplyBrokerId("C", "real-b", broker_id, address, f"{address};{ts_ms}", ts_ms)


def _real_batches() -> list[list[fsm.Command]]:
    """Registrations, a failover (master last heard at +2000, its heartbeat timeout noticed at +5000,
    new master at +5150), refused alters, an
    address change, a replica replaced, the group removed and registered again, a 1009."""
    return [
        [_apply_id(1, T0_MS), _apply_id(2, T0_MS + 1), _apply_id(3, T0_MS + 2)],
        [fsm.ElectMaster("C", "real-b", fsm.Trigger.BROKER, 1, 0, 0, T0_MS + 10, requester_id=1)],
        [fsm.AlterSyncStateSet("real-b", 1, 1, 1, (1, 2, 3), T0_MS + 20)],
        [fsm.ElectMaster("C", "real-b", fsm.Trigger.CONTROLLER, 2, 1, 2, T0_MS + 5_150,
                         liveness_lost_ms=T0_MS + 5_000, master_last_alive_ms=T0_MS + 2_000,
                         reason=fsm.ElectionReason.HEARTBEAT_MISSED, deadline_missed_by_ms=40,
                         candidates=((2, 1, 500, 1, True), (3, 1, 400, 1, True)))],
        [fsm.AlterSyncStateSet("real-b", 2, 1, 3, (2, 3), T0_MS + 5_200)],  # stale epoch: refused
        [fsm.UpdateBrokerAddress("C", "real-b", 3, "10.1.0.33:10911", T0_MS + 6_000)],
        [fsm.CleanBrokerData("C", "real-b", (3,), T0_MS + 7_000), _apply_id(4, T0_MS + 7_001)],
        [fsm.CleanBrokerData("C", "real-b", None, T0_MS + 8_000)],
        [_apply_id(1, T0_MS + 9_000),
         fsm.ElectMaster("C", "real-b", fsm.Trigger.BROKER, 1, 0, 0, T0_MS + 9_010, requester_id=1)],
        # a 1009: no broker group, so no group table has it (and it breaks none of them)
        [fsm.UpdateControllerConfig((("electMasterMaxRetryCount", "5"),), T0_MS + 9_500,
                                    fsm.Origin("ops", "10.9.0.1:5000", "n1"))],
    ]  # fmt: skip


def _write_real_export(path: Path) -> None:
    exporter = fsm.HistoryExporter("real", "n0")
    rows = exporter.rows_for_entry(Entry(1, 1, EntryType.NORMAL, b""))
    for index, batch in enumerate(_real_batches(), start=2):
        rows += exporter.rows_for_entry(Entry(index, 1, EntryType.NORMAL, fsm.encode_commands(batch)))
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


def _violations(out: Path) -> set[tuple[str, str, str, int, int]]:
    table = pq.read_table(out / "violations")
    return {
        (r["kind"], r["controller_cluster"], r["broker_name"], r["index"], r["seq"])
        for r in table.to_pylist()
    }


def _planted(planted) -> set[tuple[str, str, str, int, int]]:
    return {(p.kind, p.controller_cluster, p.broker_name, p.index, p.seq) for p in planted}


def _write_hand_written(work: Path) -> None:
    """Controller cluster "c" from two nodes; n2 has a different master at index 11 (divergence)."""
    (work / "n1.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in HAND_WRITTEN) + b"\n")
    diverged = [r | {"node_id": "n2"} for r in HAND_WRITTEN]
    diverged[10] = diverged[10] | {"new_master_id": 7}
    (work / "n2.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in diverged) + b"\n")


@pytest.fixture(scope="module")
def planted_run(spark, tmp_path_factory):
    """One run over: a planted synthetic history in two JSON-lines files (two controller clusters),
    the hand-written cluster "c" exported by two nodes (a directory), a history exported by the
    real state machine (cluster "real"), and client histories."""
    work = tmp_path_factory.mktemp("planted")
    config = synth.SynthConfig(groups=30, rows_per_group=30, controller_clusters=2, seed=SEED, plant=PLANTS)
    table, planted = synth.generate_history(config)
    for cluster in synth.controller_cluster_names(config):
        rows = table.filter(pa.compute.equal(table["controller_cluster"], cluster))
        synth.write_jsonl_table(rows, work / f"{cluster}.jsonl")
    (work / "hand").mkdir()
    _write_hand_written(work / "hand")
    ops, stale = synth.generate_client_history(keys=6, ops_per_key=40, seed=SEED, stale_reads=2)
    write_ops(work / "clients.jsonl", ops)
    _write_real_export(work / "real.jsonl")
    inputs = [work / "rmqc-0.jsonl", work / "rmqc-1.jsonl", work / "hand", work / "real.jsonl"]
    summary = run_pipeline(spark, inputs, work / "out", histories=[work / "clients.jsonl"])
    return summary, planted, stale, work / "out", table


HAND_DIVERGENCE = (LOG_DIVERGENCE, "c", "b", 11, 0)


def _hand(rows: list[dict], cluster: str = "c") -> list[dict]:
    """The rows of one controller cluster, in log order."""
    mine = (r for r in rows if r["controller_cluster"] == cluster)
    return sorted(mine, key=lambda r: (r.get("index", r.get("start_index")), r.get("seq", r.get("start_seq"))))


def test_exactly_the_planted_violations_are_reported(planted_run):
    summary, planted, _, out, _ = planted_run
    assert _violations(out) == _planted(planted) | {HAND_DIVERGENCE}, f"seed {SEED}"
    assert summary.violation_total == len(planted) + 1


def test_violations_carry_their_evidence(planted_run):
    _, _, _, out, table = planted_run
    entries = {(r["controller_cluster"], r["index"], r["seq"]) for r in table.to_pylist() + HAND_WRITTEN}
    for violation in pq.read_table(out / "violations").to_pylist():
        refs = {(e["controller_cluster"], e["index"], e["seq"]) for e in violation["evidence"]}
        assert (violation["controller_cluster"], violation["index"], violation["seq"]) in refs
        assert refs <= entries, violation


def test_planted_stale_reads_are_the_failing_keys(planted_run):
    summary, _, stale, out, _ = planted_run
    results = pq.read_table(out / "linearizability").to_pylist()
    assert {r["key"] for r in results if not r["ok"]} == {p.key for p in stale}
    assert len(results) == 6
    assert summary.linearizability.not_linearizable == 2


def test_failover_durations_match_the_log(planted_run):
    _, _, _, out, table = planted_run
    rows = pq.read_table(out / "failovers").to_pylist()
    failovers = [f for f in rows if f["controller_cluster"].startswith("rmqc-")]
    assert failovers, "the synthetic history has controller-triggered failovers"
    by_entry = {(r["controller_cluster"], r["index"], r["seq"]): r for r in table.to_pylist()}
    for f in failovers:
        start = by_entry[(f["controller_cluster"], f["start_index"], f["start_seq"])]
        end = by_entry[(f["controller_cluster"], f["end_index"], f["end_seq"])]
        assert start["trigger"] == "controller" and end["elected"] is True
        assert f["duration_ms"] == end["leader_ts_ms"] - start["master_last_alive_ms"] >= 0


def test_report_and_tables_are_written(planted_run):
    summary, _, _, out, _ = planted_run
    report = (out / "report.md").read_text()
    colours = {"failover_durations": _report.FAILOVER_COLOR, "elections_per_hour": _report.ELECTIONS_COLOR,
               "flapping_groups": _report.FLAPPING_COLOR, "timeline_top_group": _report.MASTER_COLOR}
    for chart, colour in colours.items():
        assert data_pixels(out / f"{chart}.png", colour) > 100, chart
        assert f"({chart}.png)" in report
    assert summary.failovers.timed == summary.failovers.resolved - 1  # the hand-written old log
    assert set(summary.tables) == set(TABLES)
    assert summary.groups == 32 and summary.controller_clusters == 4
    assert [r.rank for r in summary.top_flapping] == list(range(1, len(summary.top_flapping) + 1))
    assert all(r.failovers > 0 for r in summary.top_flapping), "a group never failed over is not flapping"


def test_clean_history_from_two_nodes_through_the_cli(spark, tmp_path):
    """`rmqc analyze` over Parquet exports of one log from two nodes: deduplicated, nothing to
    report, exit status 0 (the CLI reuses the running test session and leaves it running)."""
    config = synth.SynthConfig(groups=25, rows_per_group=30, seed=SEED + 1, recreate_fraction=0.3,
                               unclean_fraction=0.5)
    table, planted = synth.generate_history(config)
    assert planted == []
    pq.write_table(table, tmp_path / "n1.parquet")
    n2 = table.set_column(1, "node_id", pa.array(["n2"] * table.num_rows))
    pq.write_table(n2, tmp_path / "n2.parquet")
    args = ["analyze", str(tmp_path / "n1.parquet"), str(tmp_path / "n2.parquet"),
            "--out", str(tmp_path / "out"), "--master", "local[2]"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _violations(tmp_path / "out") == set(), f"seed {SEED + 1}"
    assert f"{table.num_rows:,}" in result.output
    assert not spark.sparkContext._jsc.sc().isStopped()


def test_cli_summary_of_a_run_with_problems(planted_run):
    summary = planted_run[0]
    console = Console(record=True, width=200)
    render_summary(console, summary)
    text = console.export_text()
    assert found_problems(summary)
    for kind in ("two_masters_in_epoch", "broker_id_reused", "log_divergence"):
        assert kind in text
    assert "2 not linearizable" in text
    assert "rmqc log export DIR --cluster NAME" in " ".join(text.split()), "a divergence says how to label groups"


def test_chart_axes_span_the_data(planted_run):
    out = planted_run[3]
    durations = [f["duration_ms"] for f in pq.read_table(out / "failovers").to_pylist() if f["duration_ms"]]
    (low, high), _ = axis_ranges(out / "failover_durations.png")
    assert low <= min(durations) and max(durations) <= high <= 10 * max(durations)
    times = pq.read_table(out / "master_timeline")["leader_ts_ms"].to_pylist()
    hour = 3_600_000
    first, last = _day(min(times) // hour * hour), _day(max(times) // hour * hour + hour)
    margin = 0.05 * (last - first) + 1 / 24  # a little padding, never matplotlib's years
    (low, high), _ = axis_ranges(out / "elections_per_hour.png")
    half_hour = 1 / 48  # each hour's point is at its middle
    assert first - margin <= low <= first + half_hour and last - half_hour <= high <= last + margin


def _day(ms: int) -> float:
    return dates.date2num(datetime.fromtimestamp(ms / 1000, UTC))


def test_hand_written_divergence_is_its_only_violation(planted_run):
    out = planted_run[3]
    assert {v for v in _violations(out) if v[1] == "c"} == {HAND_DIVERGENCE}


def test_hand_written_failover_spans_two_attempts(planted_run):
    out = planted_run[3]
    (failover,) = _hand(pq.read_table(out / "failovers").to_pylist())
    assert (failover["start_index"], failover["end_index"], failover["attempts"]) == (5, 6, 2)
    assert failover["resolved"] and failover["new_master_id"] == 2
    assert failover["duration_ms"] is None  # an old log: unknown, not 900 ms nor 0
    assert (failover["reason"], failover["detection_ms"]) == (None, None)  # nor why, nor how soon seen


def test_hand_written_timeline_and_incarnations(planted_run):
    timeline = _hand(pq.read_table(planted_run[3] / "master_timeline").to_pylist())
    assert [(r["index"], r["master_id"], r["master_epoch"], r["incarnation"]) for r in timeline] == [
        (3, 1, 1, 0), (5, None, 2, 0), (6, 2, 3, 0), (11, 1, 1, 1)]
    assert [r["until_ms"] for r in timeline] == [5100, 5900, None, None]


def test_hand_written_audit(planted_run):
    audit = _hand(pq.read_table(planted_run[3] / "audit").to_pylist())
    assert [(r["index"], r["event"], r["broker_id"], r["address"], r["previous_address"]) for r in audit] == [
        (1, "id_allocated", 1, "10.0.0.1:1", None),
        (2, "id_allocated", 2, "10.0.0.2:1", None),
        (3, "master_elected", 1, None, None),
        (5, "no_master_elected", None, None, None),
        (6, "master_elected", 2, None, None),
        (8, "address_changed", 2, "10.0.0.2:2", "10.0.0.2:1"),
        (9, "group_cleaned", None, None, None),
        (10, "id_allocated", 1, "10.0.0.9:1", None),
        (11, "master_elected", 1, None, None),
    ]


def test_real_state_machine_export(planted_run):
    out = planted_run[3]
    assert {v for v in _violations(out) if v[1] == "real"} == set()
    (failover,) = _hand(pq.read_table(out / "failovers").to_pylist(), "real")
    assert (failover["duration_ms"], failover["old_master_id"], failover["new_master_id"]) == (3150, 1, 2)
    assert (failover["reason"], failover["deadline_missed_by_ms"], failover["detection_ms"]) == (
        "heartbeat_deadline_missed", 40, 3000)
    reasons = dict(planted_run[0].failovers.by_reason)
    assert reasons["heartbeat_deadline_missed"] == 1  # this one; the synthetic histories have none recorded
    assert reasons["unknown"] == planted_run[0].failovers.count - 1
    audit = _hand(pq.read_table(out / "audit").to_pylist(), "real")
    assert [(r["index"], r["event"], r["broker_id"], r["incarnation"]) for r in audit] == [
        (2, "id_allocated", 1, 0), (2, "id_allocated", 2, 0), (2, "id_allocated", 3, 0),
        (3, "master_elected", 1, 0), (5, "master_elected", 2, 0),
        (7, "address_changed", 3, 0), (8, "ids_cleaned", None, 0), (8, "id_allocated", 4, 0),
        (9, "group_cleaned", None, 0), (10, "id_allocated", 1, 1), (10, "master_elected", 1, 1),
        (11, "config_updated", None, None),
    ]  # fmt: skip
    config = audit[-1]
    assert (config["settings"], config["caller"], config["caller_address"], config["via_node"]) == (
        "electMasterMaxRetryCount: 5", "ops", "10.9.0.1:5000", "n1")
    assert config["broker_name"] is None and config["time"] is not None


def test_cli_says_what_is_wrong_with_a_malformed_input(spark, tmp_path):
    """A history file that is not JSON lines: exit status 2 and one line naming the problem, no
    traceback (Spark's refusal arrives as rmqc.pipeline.SparkJobFailed)."""
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"index": 1, "term": \n not json at all\n')
    result = CliRunner().invoke(app, ["analyze", str(broken), "--out", str(tmp_path / "out"), "--master", "local[2]"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error:")
    assert "Traceback" not in result.output
