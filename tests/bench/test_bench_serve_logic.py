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
from bench.bench_cpu_per_write import Point
from bench.bench_serve_logic import print_shares, timed_program, window

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
            servers, splits = await window(cluster, leader, 2, 1.0, out)
    finally:
        cluster.stop()
    assert servers.ops_per_s > 0 and servers.servers_us > 0
    assert next(iter(splits)) == "leader" and len(splits) == 3
    for figures in splits.values():
        assert figures["logic"] > 0 and figures["shell"] > 0 and figures["of which inside a pass"] > 0
        assert figures["event loop"] == pytest.approx(figures["logic"] + figures["shell"])
        assert figures["task steps"] > 0 and figures["I/O waits"] > 0  # the node resumed for its inputs
        assert figures["timed regions"] > 0
    assert not list(tmp_path.glob("figures.*"))  # each node's dump was read and removed
    loops_us = sum(figures["event loop"] for figures in splits.values())
    assert loops_us < servers.servers_us * 1.05  # the loops are part of the processes' CPU (ticks: 5 %)


def anchor(clients: int, servers_us: float) -> Point:
    return Point(clients, 100.0, 1.0, 2.0, servers_us / 2, servers_us / 4, 10.0, servers_us)


def test_shares_are_each_rounds_figures_over_the_same_rounds_etcd(capsys: pytest.CaptureFixture[str]) -> None:
    splits = {"leader": {"logic": 300.0}, "follower n1": {"logic": 100.0}, "follower n2": {"logic": 100.0}}
    rmqc_rounds = [[(anchor(1, 1500.0), splits)], [(anchor(1, 3000.0), splits)]]
    anchors = {"floor-saver": [[anchor(1, 500.0)], [anchor(1, 500.0)]],
               "etcd": [[anchor(1, 1000.0)], [anchor(1, 2000.0)]]}
    print_shares([1], rmqc_rounds, anchors)
    out = capsys.readouterr().out
    assert "1 clients (target <= 0.7x):" in out
    assert "floor with saver     0.38x  (0.50 0.25)" in out
    assert "logic in the nodes   0.38x  (0.50 0.25)" in out
    assert "floor + logic        0.75x  (1.00 0.50)" in out
    assert "rmqc serve           1.50x  (1.50 1.50)" in out
