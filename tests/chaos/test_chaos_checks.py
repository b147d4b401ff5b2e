"""The chaos checkers and the summary on small hand-made histories: a clean one passes, and each
planted fault (a lost write, a duplicated id, two masters with one epoch, a non-linearizable read,
a stale read going back, a designation answered wrong or lost, a window not recovered) is reported
as a violation; the RTO is set against the design's target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmqc.chaos import ChaosConfig, all_violations, read_jsonl, schedule, summarize, write_outputs
from rmqc.chaos._checks import history_ops, stalls
from rmqc.chaos._output import CLOSE_UP_WINDOWS, report_markdown, with_initial_writes
from rmqc.linearizability import check_key


def clean_history() -> list[dict[str, Any]]:
    """Group g: ids 1 and 2 acknowledged, reads that follow them; one window whose fault stopped
    writes for 300 ms; every broker group agreed throughout."""
    ms = 1_000_000
    return [
        {"type": "attempt", "proc": "writer", "node": "n0", "invoke": 0, "complete": 5 * ms, "ok": True},
        {"type": "write", "key": "g", "id": 1, "invoke": 0, "complete": 5 * ms},
        {"type": "read", "node": "n1", "incarnation": 0, "level": "linearizable", "key": "g", "value": "2",
         "invoke": 6 * ms, "complete": 7 * ms},
        {"type": "read", "node": "n1", "incarnation": 0, "level": "stale", "key": "g", "value": "2",
         "invoke": 8 * ms, "complete": 9 * ms},
        {"type": "attempt", "proc": "writer", "node": "n1", "invoke": 110 * ms, "complete": 120 * ms, "ok": False},
        {"type": "attempt", "proc": "writer", "node": "n0", "invoke": 130 * ms, "complete": 400 * ms, "ok": True},
        {"type": "write", "key": "g", "id": 2, "invoke": 110 * ms, "complete": 400 * ms},
        {"type": "read", "node": "n2", "incarnation": 0, "level": "lease", "key": "g", "value": "3",
         "invoke": 401 * ms, "complete": 402 * ms},
        {"type": "masters", "t": 50 * ms, "groups": {"b": [[1, 1]]}},
        {"type": "masters", "t": 300 * ms, "groups": {"b": [[2, 2]]}},
        {"type": "converged", "t": 150 * ms, "ok": False},
        {"type": "converged", "t": 350 * ms, "ok": True},
        {"type": "window", "window": 0, "kind": "leader-kill", "detail": "SIGKILL n0", "start": 10 * ms,
         "fault": 100 * ms, "heal": 200 * ms, "end": 500 * ms, "problems": []},
        {"type": "final", "key": "g", "value": "3", "t": 600 * ms},
        {"type": "brokers", "t": 600 * ms, "brokers": [["b", 0, 1], ["b", 1, 2], ["b", 2, None]]},
        {"type": "designate", "key": "b", "id": 2, "node": "n1", "invoke": 200 * ms, "complete": 250 * ms,
         "code": 0, "master": 2, "epoch": 2},
    ]


def with_change(index: int | None, **fields: Any) -> list[dict[str, Any]]:
    history = clean_history()
    if index is None:
        history.append(fields)
    else:
        history[index] = {**history[index], **fields}
    return history


def test_a_clean_history_passes_and_its_rto_is_measured() -> None:
    summary = summarize(clean_history(), {"seed": 1, "nodes": 3})
    assert summary["violations"] == []
    assert (summary["windows"], summary["acknowledged_writes"], summary["lost"], summary["duplicates"]) == (1, 2, 0, 0)
    # the first write invoked after the fault (at 100 ms) was acknowledged at 400 ms; every group
    # agreed again at 350 ms
    assert summary["rto_ms"]["leader-kill"] == {"p50": 300.0, "p99": 300.0, "max": 300.0}
    assert summary["faults"]["leader-kill"]["rto_masters_ms"]["max"] == 250.0


PLANTED = {
    "lost": with_change(13, value="2"),  # id 2 was acknowledged, the final read shows nextBrokerId 2
    "duplicates": with_change(14, brokers=[["b", 0, 1], ["b", 1, 1]]),
    "split_brain": with_change(None, type="masters", t=320 * 1_000_000, groups={"b": [[2, 2], [1, 2]]}),
    "linearizability": with_change(7, value="2"),  # a lease read after id 2's ack returns the old value
    "stale_going_back": with_change(None, type="read", node="n1", incarnation=0, level="stale", key="g",
                                    value="1", invoke=10 * 1_000_000, complete=11 * 1_000_000),
    "designations": with_change(15, master=1),  # answered SUCCESS, but another broker is master
    "aborted": with_change(None, type="aborted", reason="NodeStartFailed: n1 did not print 'serving on'"),
    "recovery": with_change(12, problems=["b: live brokers disagree on (master, masterEpoch)"]),
}


@pytest.mark.parametrize("checker", sorted(PLANTED))
def test_every_planted_fault_is_a_violation(checker: str) -> None:
    found = all_violations(PLANTED[checker])
    assert found[checker], f"{checker} not found"
    others = [name for name in PLANTED if name != checker and found[name]]
    assert not others, f"{checker} planted, but {others} reported too"
    assert summarize(PLANTED[checker], {})["violations"]


def designation(invoke_ms: int, complete_ms: int, code: int, epoch: int, broker_id: int = 1) -> dict[str, Any]:
    return {"type": "designate", "key": "b", "id": broker_id, "node": "n0", "invoke": invoke_ms * 1_000_000,
            "complete": complete_ms * 1_000_000, "code": code, "master": broker_id, "epoch": epoch}


@pytest.mark.parametrize(("later", "went_back"), [
    (designation(260, 270, 2011, 2, broker_id=2), False),  # still master, the same epoch: fine
    (designation(260, 270, 2011, 1), True),  # an answer from before the acknowledged election
    (designation(260, 270, 0, 2), True),  # a new election cannot reuse the epoch
    (designation(240, 270, 0, 1), False),  # concurrent with it: either order is possible
])
def test_designations_never_go_back_in_masterepoch(later: dict[str, Any], went_back: bool) -> None:
    found = all_violations([*clean_history(), later])["designations"]
    assert bool(found) == went_back, found


def test_an_acknowledged_election_no_broker_follows_is_lost() -> None:
    history = [*clean_history(), designation(310, 320, 0, 3)]  # no sample after 320 ms shows epoch 3
    assert "no broker followed it" in all_violations(history)["designations"][0]
    history.append({"type": "masters", "t": 330 * 1_000_000, "groups": {"b": [[1, 3]]}})
    assert all_violations(history)["designations"] == []


def test_designations_are_counted_by_answer() -> None:
    history = [*clean_history(), designation(260, 270, 2011, 2, broker_id=2), designation(280, 290, 2012, 2),
               {**designation(300, 310, 0, 2), "code": None, "master": None, "epoch": None}]
    assert summarize(history, {})["designations"] == {"sent": 4, "elected": 1, "still_master": 1, "refused": 1,
                                                      "unanswered": 1}


def test_every_rto_counts_from_the_faults_start_and_a_restart_is_reported_beside_it() -> None:
    """A major-kill at 100 ms, restarted at 2,000 ms: id 2 (first tried at 110 ms, during the hold)
    is acknowledged at 2,400 ms, 2,300 ms after the fault, as OpenChaos would count it: the target
    is missed. From the restart, id 3 (tried at 2,100 ms, acknowledged at 2,400 ms) took 400 ms:
    reported beside it, not judged."""
    ms = 1_000_000
    history = clean_history()
    history[6] = {**history[6], "complete": 2_400 * ms}  # id 2
    history[12] = {**history[12], "kind": "major-kill", "detail": "SIGKILL n0,n1", "heal": 2_000 * ms,
                   "end": 3_000 * ms}
    history.append({"type": "write", "key": "g", "id": 3, "invoke": 2_100 * ms, "complete": 2_400 * ms})
    history.append({"type": "final", "key": "g", "value": "4", "t": 3_100 * ms})
    summary = summarize(history, {})
    targets = summary["rto_targets"]
    assert targets["kinds"] == {"major-kill": {"p50": 2300.0, "p99": 2300.0, "unrecovered": 0, "met": False,
                                               "from_restart": {"p50": 400.0, "p99": 400.0}}}
    assert not targets["all_met"] and targets["target_p99_ms"] == 2000.0
    assert summary["faults"]["major-kill"]["rto_write_ms"]["p99"] == 2300.0
    assert summary["faults"]["major-kill"]["rto_write_from_restart_ms"]["p99"] == 400.0
    report = report_markdown(summary, charts=False)
    assert "| major-kill | 2,300 | 2,300 | 0 | **no** | 400 / 400 |" in report


def test_a_fault_without_a_restart_has_no_rto_from_the_restart() -> None:
    history = with_change(12, kind="partition", detail="silent ['n2']|['n0', 'n1']")
    summary = summarize(history, {})
    assert summary["rto_targets"]["kinds"] == {"partition": {"p50": 300.0, "p99": 300.0, "unrecovered": 0,
                                                             "met": True}}
    assert "rto_write_from_restart_ms" not in summary["faults"]["partition"]


def test_a_kind_with_a_window_never_recovered_misses_the_target() -> None:
    history = [r for r in clean_history() if not (r["type"] == "write" and r["invoke"] >= 100 * 1_000_000)]
    targets = summarize(history, {})["rto_targets"]
    assert targets["kinds"]["leader-kill"]["unrecovered"] == 1
    assert not targets["kinds"]["leader-kill"]["met"] and not targets["all_met"]


def test_a_retry_answered_from_the_state_is_no_recovery() -> None:
    """Id 2 first tried before the fault and acknowledged on a retry during it: the retry may be
    answered from state committed before the fault, so it does not end the outage."""
    history = with_change(6, invoke=90 * 1_000_000)
    history.append({"type": "write", "key": "g", "id": 3, "invoke": 420 * 1_000_000, "complete": 450 * 1_000_000})
    assert summarize(history, {})["rto_ms"]["leader-kill"]["max"] == 350.0


def test_a_window_without_an_acknowledged_write_is_a_violation() -> None:
    history = [r for r in clean_history() if not (r["type"] == "write" and r["invoke"] >= 100 * 1_000_000)]
    summary = summarize(history, {})
    assert summary["faults"]["leader-kill"]["unrecovered"] == 1
    assert any("no acknowledged write" in v for v in summary["violations"])


def test_stale_reads_on_a_restarted_node_start_over() -> None:
    """A node restarted from its disk may answer from an older applied state until it catches up:
    each incarnation is checked on its own."""
    history = with_change(None, type="read", node="n1", incarnation=1, level="stale", key="g",
                          value="1", invoke=10 * 1_000_000, complete=11 * 1_000_000)
    assert all_violations(history)["stale_going_back"] == []


def test_the_schedule_is_seeded_and_gives_every_kind_its_share() -> None:
    config = ChaosConfig(out=Path("unused"), windows=7, faults=("kill", "suspend", "partition"), seed=5)
    first = schedule(config)
    assert first == schedule(config)
    assert sorted(first[:6]) == sorted(["kill", "suspend", "partition"] * 2)


def test_outputs_are_written_and_read_back(tmp_path: Path) -> None:
    summary = write_outputs(tmp_path, PLANTED["lost"], {"seed": 3, "nodes": 3, "command": "rmqc chaos run"})
    assert read_jsonl(tmp_path / "history.jsonl") == PLANTED["lost"]
    assert summary["lost"] == 1
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# Chaos run: FAIL") and "lost:" in report and "| leader-kill | 1 |" in report
    assert (tmp_path / "timeline.png").stat().st_size > 0 and (tmp_path / "rto.png").stat().st_size > 0


def test_a_node_log_that_cannot_be_exported_is_a_violation_in_the_report(tmp_path: Path) -> None:
    """Not a traceback in place of the report and its summary line (a CI run once printed none)."""
    summary = write_outputs(tmp_path / "out", clean_history(), {"seed": 3, "nodes": 3},
                            {"n0": tmp_path / "no-such-node"})
    assert summary["violations"] == [f"aborted: the committed log could not be exported: NotAStorageError: no rmqc "
                                     f"log in {tmp_path / 'no-such-node'} (no data.mdb)"]
    assert read_jsonl(tmp_path / "out" / "history.jsonl")[-1]["type"] == "aborted"


@pytest.mark.parametrize(("config", "error"), [
    (ChaosConfig(out=Path("x"), nodes=4), "3 or 5"),
    (ChaosConfig(out=Path("x"), faults=("ring",)), "need 5 nodes"),
    (ChaosConfig(out=Path("x"), faults=("meteor",)), "unknown faults"),
])
def test_bad_configs_are_refused(config: ChaosConfig, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        config.check()


def test_an_earlier_runs_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="not empty"):
        ChaosConfig(out=tmp_path).check()


def test_a_node_silent_without_a_fault_is_reported_as_a_stall() -> None:
    s = 1_000_000_000
    roles = [{"type": "role", "t": i * s // 4,
              "roles": {"n0": "down" if 4 <= i < 12 else "follower",  # 2 s, but SIGKILLed then
                        "n1": "down" if 16 <= i < 22 else "leader",  # 1.5 s, no fault: a stall
                        "n2": "down" if i == 30 else "follower"}}  # 0.25 s: noise
             for i in range(40)]
    window = {"type": "window", "window": 0, "kind": "kill", "detail": "SIGKILL n0", "start": 0,
              "fault": s, "heal": 2 * s, "end": 3 * s, "problems": []}
    assert stalls([*roles, window]) == [{"node": "n1", "at_s": 4.0, "for_s": 1.5}]


def test_the_client_export_checks_from_an_empty_register_as_rmqc_analyze_does() -> None:
    """`rmqc analyze` checks each key from None; the export leads each key with its initial value,
    so a read of nextBrokerId 1 before the first write is linearizable there too."""
    ops = history_ops(with_change(None, type="read", node="n0", incarnation=0, level="linearizable", key="g",
                                  value="1", invoke=-5, complete=-4))
    assert not check_key([op for op in ops if op.key == "g"]).ok
    assert check_key(with_initial_writes(ops)).ok


def test_a_long_run_gets_a_close_up_of_its_first_windows(tmp_path: Path) -> None:
    s = 1_000_000_000
    history = clean_history()
    history += [{"type": "window", "window": i, "kind": "kill", "detail": "SIGKILL n1", "start": i * s,
                 "fault": i * s + s // 4, "heal": i * s + s // 2, "end": (i + 1) * s, "problems": []}
                for i in range(1, CLOSE_UP_WINDOWS + 1)]
    write_outputs(tmp_path / "long", history, {"seed": 3, "nodes": 3})
    assert (tmp_path / "long" / "timeline-close-up.png").stat().st_size > 0
    assert "(timeline-close-up.png)" in (tmp_path / "long" / "report.md").read_text()
    write_outputs(tmp_path / "short", clean_history(), {"seed": 3, "nodes": 3})
    assert not (tmp_path / "short" / "timeline-close-up.png").exists()
