"""bench/bench_serve_logic.py: the timed regions count each thread's CPU exclusively and only in the
event loop's thread, and a tiny run on a real cluster splits every node's loop into logic and shell."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import trio

from bench._rmqc import RmqcCluster
from bench._timed_serve import LOGIC, SHELL_IN_LOGIC, Regions
from bench.bench_serve_logic import timed_program, window

BURN_S = 0.05


def burn(seconds: float) -> None:
    """Busy for `seconds` of this thread's CPU."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_nested_region_is_not_counted_twice_and_other_threads_not_at_all() -> None:
    regions = Regions()
    child = regions.wrap(burn, SHELL_IN_LOGIC, "child")
    parent = regions.wrap(lambda: child(BURN_S), LOGIC, "parent")
    parent()
    worker = threading.Thread(target=parent)
    worker.start()
    worker.join()
    assert regions.calls == {"parent": 1, "child": 1}  # the worker thread's calls are not counted
    assert regions.cpu_s[SHELL_IN_LOGIC] >= BURN_S
    assert regions.cpu_s[LOGIC] < BURN_S / 2  # the parent's own time only, not its child's
    regions.reset()
    assert not regions.cpu_s and not regions.calls


@pytest.mark.slow
async def test_a_tiny_run_splits_every_nodes_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "figures")
    monkeypatch.setenv("RMQC_TIMED_SERVE_OUT", out)
    cluster = RmqcCluster(tmp_path / "cluster", 3, program=timed_program(tmp_path))
    await cluster.start()
    try:
        leader = await cluster.leader_id()
        with trio.fail_after(60):
            splits = await window(cluster, leader, 2, 1.0, out)
    finally:
        cluster.stop()
    assert next(iter(splits)) == "leader" and len(splits) == 3
    for figures in splits.values():
        assert figures["logic"] > 0 and figures["shell"] > 0 and figures["of which inside a pass"] > 0
        assert figures["event loop"] == pytest.approx(figures["logic"] + figures["shell"])
        assert figures["task steps"] > 0 and figures["I/O waits"] > 0  # the node resumed for its inputs
    assert not list(tmp_path.glob("figures.*"))  # each node's dump was read and removed
