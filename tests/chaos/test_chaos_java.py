"""`rmqc chaos run --brokers java`: the message-loss checker on fabricated histories (a message
acknowledged and never consumed is a violation, as is a run whose Consumer never ran), the CLI's
refusals, and (slow) a short schedule on real rmqc nodes and real Java brokers that passes with
every acknowledged message consumed."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from rmqc.chaos import ChaosConfig, read_jsonl, summarize
from rmqc.chaos._checks import lost_messages
from rmqc.chaos._java import java_missing
from rmqc.chaos._output import report_markdown
from rmqc.launcher import rmqc_argv

MS = 1_000_000
# JVMs on a loaded 2-core machine: the run takes 3-5 min; this only turns a hang into a failure
RUN_BOUND_S = 900
JAVA_FAULTS = ("broker-kill", "leader-kill", "suspend", "partition")


def sends_and_receipts(*, acked: range, failed: range, consumed: Iterable[int],
                       consumer_ran: bool = True) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = [
        {"type": "send", "seq": seq, "ok": True, "invoke": seq * MS, "complete": seq * MS + 1} for seq in acked]
    records += [{"type": "send", "seq": seq, "ok": False, "invoke": seq * MS, "complete": seq * MS + 1}
                for seq in failed]
    records += [{"type": "recv", "body": f"rmqc-{seq}"} for seq in consumed]
    if consumer_ran:
        records.append({"type": "consumed", "t": 10_000 * MS})
    return records


def test_every_acknowledged_message_consumed_is_no_loss() -> None:
    """A failed send that was stored after all (consumed though never acknowledged) is no loss."""
    records = sends_and_receipts(acked=range(0, 50), failed=range(50, 53), consumed=range(0, 52))
    assert lost_messages(records) == []
    summary = summarize(records, {})
    assert summary["messages"] == {"acknowledged": 50, "consumed": 52, "failed_sends": 3, "lost": 0}
    assert summary["violations"] == []
    assert "acknowledged 50, consumed 52, lost 0" in report_markdown(summary, charts=False)


def test_an_acknowledged_message_never_consumed_is_lost() -> None:
    records = sends_and_receipts(acked=range(0, 50), failed=range(0), consumed=[*range(0, 17), *range(18, 50)])
    assert lost_messages(records) == ["message rmqc-17 acknowledged (SEND_OK) but never consumed"]
    summary = summarize(records, {})
    assert summary["messages"]["lost"] == 1
    assert summary["violations"] == ["lost_messages: message rmqc-17 acknowledged (SEND_OK) but never consumed"]


def test_acknowledged_messages_no_consumer_read_back_count_as_lost() -> None:
    """A run that broke off before its Consumer ran verified nothing: that is not a pass."""
    records = sends_and_receipts(acked=range(0, 5), failed=range(0), consumed=range(0), consumer_ran=False)
    assert lost_messages(records) == ["5 acknowledged messages never verified: no Consumer read the topic back"]
    assert summarize(records, {})["messages"]["lost"] == 5


def test_two_java_brokers_answering_master_at_once_is_a_split_brain() -> None:
    """One master at a time, even a new one whose cached epoch is its predecessor's, is fine."""
    one_at_a_time = [{"type": "java_masters", "t": 1, "claims": [[1, 1]]},
                     {"type": "java_masters", "t": 2, "claims": [[2, 1]]}]
    assert summarize(one_at_a_time, {})["violations"] == []
    both = [*one_at_a_time, {"type": "java_masters", "t": 3, "claims": [[2, 2], [1, 1]]},
            {"type": "java_masters", "t": 4, "claims": [[1, 1], [2, 2]]}]
    assert summarize(both, {})["violations"] == [
        "split_brain: brokers [1, 2] all MASTER at once (id, cached epoch: [[2, 2], [1, 1]]) in 2 samples"]


def test_a_history_without_a_producer_has_no_message_counts() -> None:
    """The simulated fleet's runs: no `messages` in the summary, no line in the report."""
    summary = summarize([], {})
    assert "messages" not in summary and "Java Producer" not in report_markdown(summary, charts=False)


def test_the_message_rto_counts_from_the_faults_start_to_the_first_acknowledged_send() -> None:
    window = {"type": "window", "window": 0, "kind": "broker-kill", "detail": "SIGKILL broker", "start": 0,
              "fault": 100 * MS, "heal": 200 * MS, "end": 900 * MS, "problems": []}
    records = [window, *sends_and_receipts(acked=range(0, 1), failed=range(0), consumed=range(0, 1))]
    records += [{"type": "send", "seq": 1, "ok": False, "invoke": 150 * MS, "complete": 3150 * MS},
                {"type": "send", "seq": 2, "ok": True, "invoke": 450 * MS, "complete": 470 * MS},
                {"type": "recv", "body": "rmqc-2"}]
    summary = summarize(records, {})
    assert summary["window_rows"][0]["send_ms"] == 370.0
    assert summary["faults"]["broker-kill"]["rto_send_ms"] == {"p50": 370.0, "p99": 370.0, "max": 370.0}


@pytest.mark.parametrize(("config", "error"), [
    (ChaosConfig(out=Path("/nonexistent-chaos"), brokers="kafka"), "unknown broker kind 'kafka'"),
    (ChaosConfig(out=Path("/nonexistent-chaos"), faults=("broker-partition",)), "need the Java brokers"),
])
def test_bad_broker_configs_are_refused(config: ChaosConfig, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        config.check()


def chaos_run(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*rmqc_argv(), "chaos", "run", "--out", str(tmp_path / "chaos"), *options],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def test_java_brokers_without_the_jars_are_refused_with_the_way_to_build_them(tmp_path: Path) -> None:
    done = chaos_run(tmp_path, "--brokers", "java", env={"RMQC_INTEROP_DIR": str(tmp_path / "no-interop")})
    assert done.returncode == 2, done.stderr
    text = " ".join(done.stderr.split())
    assert "--brokers java needs the RocketMQ jars" in text and "make interop" in text, done.stderr
    assert "chaos seed" not in done.stderr


@pytest.mark.parametrize(("options", "said"), [
    (["--brokers", "java", "--broker-groups", "4"], "--broker-groups sizes the simulated fleet"),
    (["--brokers", "kafka"], "unknown broker kind"),
    (["--faults", "broker-partition"], "need the Java brokers"),
])
def test_broker_options_that_do_not_fit_are_refused(tmp_path: Path, options: list[str], said: str) -> None:
    done = chaos_run(tmp_path, *options)
    assert done.returncode == 2 and said in " ".join(done.stderr.split()), done.stderr


@pytest.mark.slow
@pytest.mark.skipif(java_missing() is not None, reason="the RocketMQ jars are not built: run `make interop`")
def test_a_short_schedule_with_java_brokers_loses_no_message(tmp_path: Path) -> None:
    """Real rmqc nodes, a Java NameServer, three Java brokers and the Producer; the master broker
    killed, rmqc's leader killed, a node stopped, a minority cut off: no violation, and every
    acknowledged message consumed at the end."""
    out = tmp_path / "chaos"
    argv = [*rmqc_argv(), "chaos", "run", "--brokers", "java", "--windows", str(len(JAVA_FAULTS)),
            "--faults", ",".join(JAVA_FAULTS), "--out", str(out), "--seed", "1", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_BOUND_S)
    assert done.stdout.strip(), f"no summary (exit {done.returncode}):\n{done.stderr[-5000:]}"
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, f"{summary['violations']}\n{done.stderr[-3000:]}"
    assert summary["windows"] == len(JAVA_FAULTS) and summary["violations"] == []
    messages = summary["messages"]
    assert messages["lost"] == 0 and messages["acknowledged"] > 100, messages
    assert messages["consumed"] >= messages["acknowledged"], messages
    assert set(summary["rto_ms"]) == set(JAVA_FAULTS)
    for kind in JAVA_FAULTS:  # sends resumed within every window
        assert summary["faults"][kind]["rto_send_ms"]["max"] is not None, kind
    assert "lost 0" in (out / "report.md").read_text()
    records = read_jsonl(out / "history.jsonl")
    assert any(r["claims"] for r in records if r["type"] == "java_masters"), "no broker was ever seen as master"
    # the run's own history, one acknowledged message's receipt taken out, fails
    body = f"rmqc-{next(r['seq'] for r in records if r['type'] == 'send' and r['ok'])}"
    records.remove(next(r for r in records if r["type"] == "recv" and r["body"] == body))
    assert f"lost_messages: message {body} acknowledged (SEND_OK) but never consumed" in \
        summarize(records, {})["violations"]
