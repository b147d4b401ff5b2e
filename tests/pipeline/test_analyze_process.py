"""`rmqc analyze` as an operator runs it (its own process, its own Spark): the summary is not
preceded by Spark's start-up chatter (native Hadoop missing, the default log level), which went
to the terminal before the JVM took its log level."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rmqc import fsm
from rmqc.launcher import RMQC
from rmqc.raft._types import Entry, HardState
from rmqc.storage import LmdbStorage

pytestmark = pytest.mark.slow


def test_analyze_prints_its_summary_without_spark_warnings(tmp_path: Path) -> None:
    commands = [fsm.ApplyBrokerId("C", "broker-a", 1, "10.0.0.1:10911", "check-1", 1_767_225_600_000)]
    with LmdbStorage(tmp_path / "n0") as storage:
        storage.save(HardState(term=1, commit=2), [Entry(1, 1), Entry(2, 1, data=fsm.encode_commands(commands))])
    export = subprocess.run([RMQC, "log", "export", str(tmp_path / "n0"), "--out", str(tmp_path / "n0.jsonl"),
                             "--node-id", "n0", "--cluster", "c"], capture_output=True, text=True, timeout=120)
    assert export.returncode == 0, export.stderr
    done = subprocess.run([RMQC, "analyze", str(tmp_path / "n0.jsonl"), "--out", str(tmp_path / "out"),
                           "--master", "local[1]"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rmqc analyze" in done.stdout
    chatter = [line for line in done.stderr.splitlines()
               if " WARN " in line or "log level" in line or "log4j" in line]
    assert chatter == [], chatter
