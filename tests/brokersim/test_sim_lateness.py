"""The simulator judges itself: lateness of its steps against their schedule, the verdict of each
summary window, and two-master episodes (pure parts, then a fleet starved by a blocked loop).

Bounds: the fleet runs SimTiming.fast (heartbeat timeout 3 s, so a window is invalid past 750 ms);
the blocked loop lasts BLOCK_S, twice that limit; waits are bounded by CONVERGE_S.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
from sim_helpers import single_node

from rmqc.brokersim import BrokerFleet, SimTiming
from rmqc.brokersim._fleet import TwoMasters
from rmqc.brokersim._lateness import INVALID_FRACTION, Lateness, next_due
from rmqc.cli.sim import _report

CONVERGE_S = 30.0
BLOCK_S = 1.5


def test_a_window_is_invalid_past_a_quarter_of_the_heartbeat_timeout() -> None:
    lateness = Lateness(heartbeat_timeout_ms=10_000)
    assert lateness.limit_s == pytest.approx(INVALID_FRACTION * 10)
    lateness.record("heartbeat", 0.2)
    lateness.record("poll", -0.01)  # early counts as on time
    window = lateness.take_window()
    assert window["valid"] and window["windowMaxMs"] == 200.0 and window["window"]["poll"]["maxMs"] == 0.0
    lateness.record("probe", 2.6)
    window = lateness.take_window()
    assert not window["valid"] and window["invalidWindows"] == 1
    assert "probe step ran 2600 ms late" in window["invalidBecause"]
    # the next window stands on its own; the run's worst stays
    window = lateness.take_window()
    assert window["valid"] and window["worstMs"] == 2600.0 and window["invalidWindows"] == 1


def test_a_late_schedule_restarts_instead_of_bursting() -> None:
    assert next_due(10.0, 1.0, 10.3) == 11.0
    assert next_due(10.0, 1.0, 13.5) == 14.5


def test_two_master_episodes_are_counted_and_timed() -> None:
    episodes = TwoMasters()
    episodes.observe("g", 1, 0)
    episodes.observe("g", 2, 100)
    assert episodes.to_json(300) == {"groupsNow": 1, "episodes": 1, "longestMs": 200}
    episodes.observe("g", 1, 400)
    episodes.observe("g", 2, 500)
    episodes.observe("g", 1, 600)
    assert episodes.to_json(700) == {"groupsNow": 0, "episodes": 2, "longestMs": 300}


async def steps_recorded(fleet: BrokerFleet) -> None:
    with trio.fail_after(CONVERGE_S):
        while fleet.lateness.window_steps("probe") < 2 or fleet.lateness.window_steps("heartbeat") < 2:
            await trio.sleep(0.01)


async def test_a_starved_simulator_reports_itself_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=2, replicas=2, state_dir=tmp_path / "sim",
                               timing=SimTiming.fast(), seed=3) as fleet:
            await fleet.wait_converged(CONVERGE_S)
            await steps_recorded(fleet)  # every periodic task is on its schedule
            fleet.summary()  # ends the start-up window
            time.sleep(BLOCK_S)  # noqa: ASYNC251 - the fault: the simulator's event loop gets no time, as on a starved core
            await steps_recorded(fleet)  # ...and each wakes (late) once more
            summary = fleet.summary()
    late = summary["lateness"]
    assert not late["valid"], late
    assert late["window"]["probe"]["maxMs"] > late["limitMs"], late["window"]
    _report(summary, as_json=True)
    assert "SIMULATOR RESULTS NOT VALID" in capsys.readouterr().err
