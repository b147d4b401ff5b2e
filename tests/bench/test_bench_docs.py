"""docs/benchmarks.md's results section generated from a run's results.json (`python -m bench docs`,
`make bench-docs`): the run's tables from a small results.json, the history kept across runs
(newest first, one row per run, bounded), the prose around the section untouched, and clear
refusals."""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench._docs import BEGIN, END, HISTORY_HEADER, HISTORY_ROWS, DocsError, update_docs

REPO = Path(__file__).resolve().parents[2]
PROSE_BEFORE = "# Benchmarks\n\nHow the load is made.\n\n"
PROSE_AFTER = "\n\n## Analysis\n\nWhat the profiles show.\n"


def point(clients: int, ops_per_s: float, p50_ms: float, p99_ms: float) -> dict[str, Any]:
    return {"clients": clients, "ops_per_s": ops_per_s, "p50_ms": p50_ms, "p99_ms": p99_ms, "errors": 0}


def results_json(commit: str, writes_256: float) -> dict[str, Any]:
    return {
        "profile": {"name": "full"},
        "machine": {"nproc": 2, "memory_mb": 3900, "python": "3.11.2", "kernel": "6.1.0", "cpu_model": "Xeon",
                    "commit": commit},
        "started": calendar.timegm((2026, 11, 25, 0, 12, 0)),
        "results": {
            "writes_rmqc": {"status": "ok", "points": [point(1, 700.0, 1.38, 3.08),
                                                       point(256, writes_256, 20.0, 40.0)]},
            "writes_etcd": {"status": "ok", "points": [point(1, 760.0, 1.17, 4.01), point(256, 2400.0, 50.0, 90.0)]},
            "reads_rmqc": {"status": "ok", "single_client": {"lease/leader": point(1, 4000.0, 0.2, 0.42),
                                                             "linearizable/follower": point(1, 1000.0, 0.89, 1.43)},
                           "many_clients": {"all nodes": point(128, 13794.0, 8.0, 20.0)}, "all_over_leader": 0.94,
                           "conditions": {"many_clients": 128}},
            "leader_kill": {"status": "ok", "summary": {"n": 30, "p50_ms": 187.1, "p99_ms": 192.5}},
            "heartbeats": {"status": "ok", "heartbeats_per_s": 128996.0},
            "single_queue": {"status": "failed", "message": "boom"},
        },
    }


def write_run(root: Path, name: str, commit: str, writes_256: float = 6000.0) -> Path:
    run = root / name
    run.mkdir()
    (run / "results.json").write_text(json.dumps(results_json(commit, writes_256)))
    return run


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    path = tmp_path / "benchmarks.md"
    path.write_text(f"{PROSE_BEFORE}{BEGIN}\n(not generated yet)\n{END}{PROSE_AFTER}")
    return path


def history_of(text: str) -> list[str]:
    lines = text.split(BEGIN, 1)[1].split(END, 1)[0].splitlines()
    start = lines.index(HISTORY_HEADER) + 2
    return [line for line in lines[start:] if line.startswith("|")]


def test_the_section_is_generated_from_a_runs_results(tmp_path: Path, docs: Path) -> None:
    update_docs(write_run(tmp_path, "s7-full2", "50f1ef5"), docs)
    text = docs.read_text()
    assert text.startswith(PROSE_BEFORE + BEGIN) and text.endswith(END + PROSE_AFTER)
    assert "(not generated yet)" not in text
    assert "## Results (run `s7-full2`, 2026-11-25 00:12 UTC, commit 50f1ef5)" in text
    assert "| controller leader killed -> new leader accepting writes | p99 <= 500 ms, p50 <= 250 ms | " \
           "p50 187.1 ms, p99 192.5 ms (30 kills) |  |  | yes |" in text
    assert "| heartbeats ingested, 3-node cluster | >= 50,000/s | 128,996/s |  |  | yes |" in text
    assert "| vs batch 1 / pipeline 1 (the single-queue design) |" in text  # a failed scenario keeps its row
    assert "| 256 | 6,000 | 20.00 | 40.00 | 2,400 | 50.00 | 90.00 | 2.50x |" in text
    assert "| 1 | 700 | 1.38 | 3.08 | 760 | 1.17 | 4.01 | 0.92x |" in text
    assert "| rmqc lease/leader | 0.20 | 0.42 |" in text and "| rmqc linearizable/follower | 0.89 | 1.43 |" in text
    met = [line for line in text.splitlines() if line.startswith("| ") and line.endswith(" | yes |")]
    judged = [line for line in text.splitlines() if line.endswith((" | yes |", " | **no** |"))]
    assert history_of(text) == ["| `s7-full2` | 2026-11-25 00:12 | 50f1ef5 | full | 6,000 | 3.08 | 192.5 | 128,996 | "
                                f"{len(met)} of {len(judged)} |"]
    assert len(met) >= 3 and len(judged) > len(met)  # the fixture meets some targets and misses others


def test_the_history_keeps_one_row_per_run_newest_first_and_is_bounded(tmp_path: Path, docs: Path) -> None:
    update_docs(write_run(tmp_path, "run-a", "aaaaaaa", writes_256=5000.0), docs)
    newer = write_run(tmp_path, "run-b", "bbbbbbb", writes_256=7000.0)
    update_docs(newer, docs)
    (newer / "results.json").write_text(json.dumps(results_json("ccccccc", 7500.0)))
    update_docs(newer, docs)  # the same run again (rewritten): its row is replaced, not repeated
    rows = history_of(docs.read_text())
    assert [row.split(" | ")[0:3] for row in rows] == [["| `run-b`", "2026-11-25 00:12", "ccccccc"],
                                                       ["| `run-a`", "2026-11-25 00:12", "aaaaaaa"]]
    assert "| 7,500 |" in rows[0] and "| 5,000 |" in rows[1]
    for i in range(HISTORY_ROWS + 2):
        update_docs(write_run(tmp_path, f"run-{i:02}", f"{i:07}"), docs)
    rows = history_of(docs.read_text())
    assert len(rows) == HISTORY_ROWS and rows[0].startswith(f"| `run-{HISTORY_ROWS + 1:02}`")
    assert docs.read_text().endswith(END + PROSE_AFTER)


def test_a_docs_file_without_the_markers_or_a_folder_without_results_is_refused(tmp_path: Path,
                                                                               docs: Path) -> None:
    run = write_run(tmp_path, "run", "1234567")
    plain = tmp_path / "plain.md"
    plain.write_text(PROSE_BEFORE)
    with pytest.raises(DocsError, match="needs exactly one"):
        update_docs(run, plain)
    assert plain.read_text() == PROSE_BEFORE
    with pytest.raises(DocsError, match=r"results.json: no such file"):
        update_docs(tmp_path / "nothing", docs)


def test_the_command_writes_the_section_and_refuses_clearly(tmp_path: Path, docs: Path) -> None:
    run = write_run(tmp_path, "run", "1234567")
    done = subprocess.run([sys.executable, "-m", "bench", "docs", str(run), "--docs", str(docs)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert history_of(docs.read_text())[0].startswith("| `run` | 2026-11-25 00:12 | 1234567 |")
    refused = subprocess.run([sys.executable, "-m", "bench", "docs", str(tmp_path / "nothing"), "--docs", str(docs)],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "results.json: no such file" in refused.stderr


def test_the_repositorys_docs_regenerate_keeping_their_history_and_prose(tmp_path: Path) -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    history = history_of(text)
    assert history, "the history table"
    copy = tmp_path / "benchmarks.md"
    copy.write_text(text)
    update_docs(write_run(tmp_path, "next-run", "1234567"), copy)
    regenerated = copy.read_text()
    assert history_of(regenerated) == [history_of(regenerated)[0], *history][:HISTORY_ROWS]
    assert history_of(regenerated)[0].startswith("| `next-run` |")
    for outside in (text.split(BEGIN)[0], text.split(END)[1]):  # the prose around it is untouched
        assert outside in regenerated
