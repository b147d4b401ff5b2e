"""bench/bench_cpu_per_write.py's --pin-leader: the leader alone on CPU 0, the rest elsewhere."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench.bench_cpu_per_write import leader_alone
from rmqc.launcher import Process

needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or 0 not in os.sched_getaffinity(0),
                                    reason="pinning a leader apart needs CPU 0 and another CPU")


@needs_two_cpus
def test_the_leader_gets_cpu_0_alone_and_this_process_gets_its_cpus_back(tmp_path: Path) -> None:
    everything = os.sched_getaffinity(0)
    procs = {name: Process(name, [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / f"{name}.log")
             for name in ("n0", "n1", "n2")}
    try:
        with leader_alone(procs, "n1", pin=True):
            assert os.sched_getaffinity(procs["n1"].pid) == {0}
            assert os.sched_getaffinity(procs["n0"].pid) == everything - {0}
            assert os.sched_getaffinity(procs["n2"].pid) == everything - {0}
            assert os.sched_getaffinity(0) == everything - {0}  # the generators this process starts inherit it
        assert os.sched_getaffinity(0) == everything
    finally:
        for proc in procs.values():
            proc.kill()


def test_without_pin_nothing_moves(tmp_path: Path) -> None:
    everything = os.sched_getaffinity(0)
    with leader_alone({}, "n1", pin=False):
        assert os.sched_getaffinity(0) == everything
