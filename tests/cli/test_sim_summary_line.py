"""The broker simulator's summary is one line however long, also when piped (scripts read it
line by line; Rich wrapped it at 160 columns)."""

from __future__ import annotations

import pytest

from rmqc.cli.sim import _report


def summary(groups: int) -> dict[str, object]:
    window = {"heartbeat": {"maxMs": 12.0}, "probe": {"maxMs": 9.0}}
    return {"brokers": 3 * groups, "groups": groups, "running": 3 * groups, "starting": 0, "hung": 0,
            "killed": 0, "masters": groups, "notConverged": 2,
            "problems": [f"broker-{n:04d}: only dead ids in the SyncStateSet, unclean election off" for n in range(2)],
            "lateness": {"valid": True, "window": window, "worstMs": 40.0, "invalidWindows": 0}}


def test_the_summary_is_one_line_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    _report(summary(10_000), as_json=False)
    out = capsys.readouterr().out
    assert len(out) > 200 and out.count("\n") == 1, out
