"""The chaos run's report.md stays a valid Markdown table whatever a window's detail says."""

from __future__ import annotations

from rmqc.chaos._output import report_markdown


def test_a_pipe_in_a_window_detail_does_not_break_the_windows_table() -> None:
    summary = {"violations": [], "command": "rmqc chaos run", "seed": 1, "nodes": 3, "windows": 1,
               "acknowledged_writes": 5, "reads": 5, "lost": 0, "duplicates": 0, "quiet_errors": 0,
               "unchecked_groups": [], "faults": {}, "stalls": [],
               "window_rows": [{"window": 0, "kind": "partition", "detail": "silent ['n2']|['n0', 'n1']",
                                "write_ms": 230.0, "masters_ms": None}]}
    table = report_markdown(summary, charts=False).split("## Windows", 1)[1].strip().splitlines()
    header, row = table[0], table[2]
    unescaped = row.replace("\\|", "")
    assert unescaped.count("|") == header.count("|") == 7
    assert "silent ['n2']\\|['n0', 'n1']" in row
