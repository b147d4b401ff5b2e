"""CPU per durable write, process by process: rmqc trees and etcd on the same load (issue 21).

Where a write's time goes when CPU is the budget (2 shared cores): for each system, a 3-node
cluster takes `--clients` closed-loop writers (bench._scn_writes: 1013 for rmqc, a put of the same
size for etcd through its HTTP gateway) for `--seconds`, and the user + system CPU each process used
over the window (/proc/PID/stat) is divided by the writes answered: the leader, the followers (mean)
and the load generator (this process). Rounds alternate the systems' order; medians are printed.

`--tree NAME=SRC` runs `rmqc serve` from another source tree (e.g. a `git worktree` of an older
commit) with this harness, for an A/B; without it, the installed rmqc. `--no-etcd` leaves etcd out
(it is skipped anyway when not installed: `apt-get install etcd-server`).

Run: .venv/bin/python bench/bench_cpu_per_write.py [--clients 1,256] [--seconds 8] [--rounds 3]
      [--tree base=/tmp/old/src --tree new=src] [--no-etcd]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _etcd
from bench._load import LoadResult, closed_loop
from bench._rmqc import RMQC_PROGRAM, RmqcCluster
from bench._scn_writes import etcd_write_workload, rmqc_write_workload
from rmqc.launcher import cpu_s

WARMUP_S = 0.5


@dataclass(frozen=True)
class Point:
    clients: int
    ops_per_s: float
    p50_ms: float
    p99_ms: float
    leader_us: float
    follower_us: float
    generator_us: float


def percentile(sorted_ms: list[float], fraction: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * fraction))] if sorted_ms else float("nan")


async def measured(run: Callable[[], Awaitable[LoadResult]], pids: dict[str, int], leader: str,
                   clients: int) -> Point:
    """One load window, with every process's CPU over it per write answered."""
    before, generator_before = {name: cpu_s(pid) or 0.0 for name, pid in pids.items()}, os.times()
    result = await run()
    after, generator_after = {name: cpu_s(pid) or 0.0 for name, pid in pids.items()}, os.times()
    writes = max(result.ops, 1)
    used = {name: 1e6 * (after[name] - before[name]) / writes for name in pids}
    followers = [used[name] for name in pids if name != leader]
    generator = (generator_after.user + generator_after.system) - (generator_before.user + generator_before.system)
    latencies = sorted(result.latencies_ms)
    return Point(clients, result.ops_per_s, percentile(latencies, 0.5), percentile(latencies, 0.99),
                 used[leader], statistics.fmean(followers), 1e6 * generator / writes)


async def rmqc_points(root: Path, program: str, clients: list[int], seconds: float) -> list[Point]:
    cluster = RmqcCluster(root, 3, program=program)
    await cluster.start()
    try:
        leader = await cluster.leader_id()
        pids = {name: process.pid for name, process in cluster.procs.items()}
        workload = rmqc_write_workload(cluster, leader)
        return [await measured(partial(closed_loop, workload, count, seconds, WARMUP_S), pids, leader, count)
                for count in clients]
    finally:
        cluster.stop()


async def etcd_points(root: Path, clients: list[int], seconds: float) -> list[Point]:
    cluster = _etcd.EtcdCluster(root, 3)
    await cluster.start()
    try:
        leader = await cluster.leader()
        etcd_workload = etcd_write_workload(cluster, leader)
        pids = {name: process.pid for name, process in cluster.procs.items()}
        return [await measured(partial(closed_loop, etcd_workload, count, seconds, WARMUP_S), pids, leader, count)
                for count in clients]
    finally:
        cluster.stop()


def wrapper_program(directory: Path, name: str, src: str) -> str:
    """A `rmqc` that runs the tree at `src` with this interpreter and its installed dependencies."""
    path = directory / f"rmqc-{name}"
    path.write_text(f"#!/bin/sh\nexport PYTHONPATH={Path(src).resolve()}\nexec {sys.executable} -c "
                    "\"import sys; from rmqc.cli.main import app; sys.argv[0] = 'rmqc'; app()\" \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def print_point(label: str, point: Point) -> None:
    print(f"  {label:10s} clients {point.clients:4d}: {point.ops_per_s:8,.0f}/s  p50 {point.p50_ms:6.2f} ms  "
          f"p99 {point.p99_ms:6.2f} ms  CPU per write: leader {point.leader_us:5.0f} us, follower "
          f"{point.follower_us:4.0f} us, generator {point.generator_us:4.0f} us", flush=True)


def print_medians(label: str, rounds: list[list[Point]]) -> None:
    for column in zip(*rounds, strict=True):
        print_point(label, Point(column[0].clients, *(statistics.median(getattr(p, field) for p in column)
                                                      for field in ("ops_per_s", "p50_ms", "p99_ms", "leader_us",
                                                                    "follower_us", "generator_us"))))


async def bench(args: argparse.Namespace) -> None:
    clients = [int(count) for count in args.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-cpu-per-write-") as root_text:
        root = Path(root_text)
        systems: dict[str, Callable[[Path], Awaitable[list[Point]]]] = {}
        for tree in args.tree or ["rmqc="]:
            name, _, src = tree.partition("=")
            program = wrapper_program(root, name, src) if src else RMQC_PROGRAM
            systems[name] = partial(rmqc_points, program=program, clients=clients, seconds=args.seconds)
        if not args.no_etcd and _etcd.etcd_binary() is not None:
            systems["etcd"] = partial(etcd_points, clients=clients, seconds=args.seconds)
        results: dict[str, list[list[Point]]] = {name: [] for name in systems}
        for round_number in range(args.rounds):
            order = list(systems) if round_number % 2 == 0 else list(reversed(systems))
            print(f"round {round_number + 1}:")
            for name in order:
                points = await systems[name](root / f"{name}-{round_number}")
                results[name].append(points)
                for point in points:
                    print_point(name, point)
    print(f"medians of {args.rounds} rounds:")
    for name, rounds in results.items():
        print_medians(name, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,256", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured window per point")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", action="append", metavar="NAME=SRC", help="an rmqc source tree to run (repeat)")
    parser.add_argument("--no-etcd", action="store_true")
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
