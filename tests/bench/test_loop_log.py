"""bench/loop_log.py on a real `rmqc serve` process: the node serves as usual and writes one line a
second of what its event loop did, and the program refuses to start without its log directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from rmqc.launcher import ServeCluster, free_ports, serve_nodes

PROGRAM = [sys.executable, str(Path(__file__).resolve().parents[2] / "bench" / "loop_log.py")]
START_S = 60.0


def test_a_node_run_by_it_serves_and_logs_its_loop_every_second(tmp_path: Path) -> None:
    (node,) = serve_nodes(tmp_path / "cluster", free_ports(1), program=PROGRAM)
    node.env["RMQC_LOOP_LOG_DIR"] = str(tmp_path / "logs")
    cluster = ServeCluster([node])
    cluster.start_blocking(START_S)
    log = tmp_path / "logs" / "n0.jsonl"
    try:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and (not log.exists() or log.read_text().count("\n") < 3):
            time.sleep(0.2)
    finally:
        assert cluster.stop_blocking() == {"n0": 0}
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) >= 3
    last = records[-1]
    assert 0 <= last["busy"] <= 1.5 and 0 <= last["cpu"] <= 1.5  # shares of a second (a late wake-up over 1)
    assert last["rss_mb"] > 10 and last["requests_in_flight"] == 0
    assert last["reads_waiting"] == 0 and last["read_index_batches"] >= 0
    assert last["stretches_over_100ms"] >= 0 and len(last["gc"]) == 3


def test_it_refuses_to_start_without_a_log_directory(tmp_path: Path) -> None:
    done = subprocess.run([*PROGRAM, "serve", "--help"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1 and "RMQC_LOOP_LOG_DIR is not set" in done.stderr
