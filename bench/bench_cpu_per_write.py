"""CPU per durable write, process by process: rmqc trees and etcd on the same load (issue 21).

Where a write's time goes when CPU is the budget (2 shared cores): for each system, a 3-node
cluster takes `--clients` closed-loop writers for `--seconds`, and the user + system CPU each
process used over the measured window (/proc/PID/stat, read when the warm-up ends and when the
window closes) is divided by the writes answered in it: the leader, the followers (mean), all
server processes together (leader + followers) and the load generator. Rounds alternate the
systems' order; medians are printed, then per client count the ratio rmqc/etcd of the servers'
CPU per write and both p50s.

The loads (bench._scn_writes's sizes): rmqc takes 1013 frames from this process's Trio closed loop
(the generator is this process). etcd takes KV Puts of the same size over gRPC, its native client
protocol, from one generator process (bench._etcd_grpc: grpc.aio; the generator is that process
and this one). `--etcd-http` also loads etcd through its HTTP/JSON gateway (the earlier anchor,
from this process's Trio loop) as a third system in the same rounds: what the gateway costs etcd.

`--tree NAME=SRC` runs `rmqc serve` from another source tree (e.g. a `git worktree` of an older
commit, or bench/build_compiled.py's copy) with this harness, for an A/B; without it, the installed
rmqc. With several trees, each after the first is also compared to the first in units of the
generator's CPU per write in the same window (`print_tree_ratios`: the machine's speed drifts).
`--no-etcd` leaves etcd out (it is skipped anyway when not installed: `apt-get install etcd-server`).

`--pin-leader` adds a pinned variant of every system to the same rounds: once the leader is known,
its threads run on CPU 0 alone and everything else (the followers, the generators, this process)
on the other CPUs, and the leader's CPU per write pinned is printed against unpinned. A core of its
own is a machine of its own only where the cores do not share their last cache; on this 2-core VM
they do, and pinning saved neither leader anything (docs/cpu-per-write.md).

Run: .venv/bin/python bench/bench_cpu_per_write.py [--clients 1,16,64,256] [--seconds 8] [--rounds 3]
      [--tree base=/tmp/old/src --tree new=src] [--no-etcd] [--etcd-http] [--pin-leader]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _etcd, _etcd_grpc
from bench._generators import run_generators
from bench._load import LoadResult, Workload, closed_loop
from bench._rmqc import RMQC_PROGRAM, RmqcCluster
from bench._scn_writes import anchor_value, etcd_write_workload, rmqc_write_workload
from rmqc.launcher import Process, cpu_s

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
    servers_us: float  # leader + every follower


FIELDS = ("ops_per_s", "p50_ms", "p99_ms", "leader_us", "follower_us", "generator_us", "servers_us")


def percentile(sorted_ms: list[float], fraction: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * fraction))] if sorted_ms else float("nan")


def point(result: LoadResult, servers_cpu_s: dict[str, float], leader: str, generator_cpu_s: float) -> Point:
    """One load window's point: each process's CPU over the window per write answered in it."""
    if result.errors:
        print(f"    ({result.errors} errors; first: {result.first_error})", flush=True)
    writes = max(result.ops, 1)
    used = {name: 1e6 * cpu / writes for name, cpu in servers_cpu_s.items()}
    followers = [used[name] for name in used if name != leader]
    latencies = sorted(result.latencies_ms)
    return Point(result.clients, result.ops_per_s, percentile(latencies, 0.5), percentile(latencies, 0.99),
                 used[leader], statistics.fmean(followers), 1e6 * generator_cpu_s / writes, sum(used.values()))


def own_cpu_s() -> float:
    times = os.times()  # every thread of this process
    return times.user + times.system


async def in_process(workload: Workload[Any], clients: int, seconds: float, procs: dict[str, Process],
                     leader: str) -> Point:
    """The load from this process's Trio loop; the CPU of the servers and of this process read when
    closed_loop's warm-up ends and when its window closes (as bench._generators does)."""
    samples: list[tuple[dict[str, float], float]] = []

    async def sample_at(moment: float) -> None:
        await trio.sleep_until(moment)
        samples.append(({name: cpu_s(proc.pid) or 0.0 for name, proc in procs.items()}, own_cpu_s()))

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        nursery.start_soon(sample_at, start + WARMUP_S)
        nursery.start_soon(sample_at, start + WARMUP_S + seconds)
        result = await closed_loop(workload, clients, seconds, WARMUP_S)
    (servers_before, own_before), (servers_after, own_after) = samples
    return point(result, {name: servers_after[name] - servers_before[name] for name in procs}, leader,
                 own_after - own_before)


def set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` on `cpus` (threads it starts later inherit the setting of their creator)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), cpus)


@contextlib.contextmanager
def leader_alone(procs: Mapping[str, Process], leader: str, pin: bool) -> Iterator[None]:
    """With `pin`: the leader's threads on CPU 0 alone, every other process of the cluster and this
    one (whose generators inherit it) on the rest, for the block; this process's CPUs restored after."""
    if not pin:
        yield
        return
    everything = os.sched_getaffinity(0)
    if len(everything) < 2 or 0 not in everything:
        raise SystemExit("--pin-leader needs CPU 0 and at least one other CPU")
    rest = everything - {0}
    set_affinity(os.getpid(), rest)
    for name, proc in procs.items():
        set_affinity(proc.pid, {0} if name == leader else rest)
    try:
        yield
    finally:
        set_affinity(os.getpid(), everything)


async def rmqc_points(root: Path, program: str, clients: list[int], seconds: float, pin: bool = False) -> list[Point]:
    cluster = RmqcCluster(root, 3, program=program)
    await cluster.start()
    try:
        leader = await cluster.leader_id()
        workload = rmqc_write_workload(cluster, leader)
        with leader_alone(cluster.procs, leader, pin):
            return [await in_process(workload, count, seconds, cluster.procs, leader) for count in clients]
    finally:
        cluster.stop()


async def etcd_grpc_points(root: Path, clients: list[int], seconds: float, pin: bool = False) -> list[Point]:
    """etcd's leader loaded over gRPC by one bench._etcd_grpc process per point."""
    cluster = _etcd.EtcdCluster(root, 3)
    await cluster.start()
    try:
        leader = await cluster.leader()
        load = _etcd_grpc.PutLoad(cluster.address(leader), len(anchor_value()))
        points = []
        with leader_alone(cluster.procs, leader, pin):
            for count in clients:
                run = await run_generators(load.spec(), count, 1, WARMUP_S, seconds, root / f"load-{count}",
                                           cluster.procs, worker=_etcd_grpc.WORKER)
                points.append(point(run.result, run.node_cpu_s, leader,
                                    sum(run.generator_cpu_s) + run.harness_cpu_s))
        return points
    finally:
        cluster.stop()


async def etcd_http_points(root: Path, clients: list[int], seconds: float) -> list[Point]:
    """etcd's leader loaded through its HTTP/JSON gateway from this process (the earlier anchor)."""
    cluster = _etcd.EtcdCluster(root, 3)
    await cluster.start()
    try:
        leader = await cluster.leader()
        workload = etcd_write_workload(cluster, leader)
        return [await in_process(workload, count, seconds, cluster.procs, leader) for count in clients]
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
          f"{point.follower_us:4.0f} us, servers {point.servers_us:5.0f} us, generator {point.generator_us:4.0f} us",
          flush=True)


def median_points(rounds: list[list[Point]]) -> list[Point]:
    return [Point(column[0].clients, *(statistics.median(getattr(p, field) for p in column) for field in FIELDS))
            for column in zip(*rounds, strict=True)]


def print_ratios(name: str, rounds: list[list[Point]], anchor: str, anchor_rounds: list[list[Point]]) -> None:
    """Per client count: the medians' ratio of the servers' CPU per write (and each round's), both
    p50s, and in how many rounds `name`'s p50 was the lower."""
    print(f"{name}/{anchor}, CPU per write of the servers (leader + 2 followers):")
    medians, anchor_medians = median_points(rounds), median_points(anchor_rounds)
    for index, (mine, theirs) in enumerate(zip(medians, anchor_medians, strict=True)):
        pairs = [(r[index], a[index]) for r, a in zip(rounds, anchor_rounds, strict=True)]
        each = " ".join(f"{p.servers_us / q.servers_us:.2f}x" for p, q in pairs)
        lower = sum(p.p50_ms < q.p50_ms for p, q in pairs)
        print(f"  clients {mine.clients:4d}: {mine.servers_us:5.0f} / {theirs.servers_us:5.0f} us = "
              f"{mine.servers_us / theirs.servers_us:.2f}x (rounds: {each});  p50 {mine.p50_ms:6.2f} / "
              f"{theirs.p50_ms:6.2f} ms, {name}'s lower in {lower} of {len(pairs)} rounds", flush=True)


def print_tree_ratios(name: str, rounds: list[list[Point]], first: str, first_rounds: list[list[Point]]) -> None:
    """An A/B of two rmqc trees, robust to the machine's speed drifting between windows (on this VM
    the same code's CPU per write swung by 40 % within minutes): each window's servers' CPU per
    write is divided by the generator's in the same window (the same closed loop for every tree:
    it slows with the machine), and the medians of those per-round figures are compared."""
    print(f"{name}/{first}, servers' CPU per write in units of the generator's (same window):")
    for index, mine in enumerate(median_points(rounds)):
        ours = statistics.median(r[index].servers_us / r[index].generator_us for r in rounds)
        theirs = statistics.median(r[index].servers_us / r[index].generator_us for r in first_rounds)
        print(f"  clients {mine.clients:4d}: {ours:5.2f} / {theirs:5.2f} = {ours / theirs:.2f}x", flush=True)


def print_pinned_ratios(name: str, pinned: list[list[Point]], shared: list[list[Point]]) -> None:
    """What a core of its own saves a system's leader: pinned / unpinned leader CPU per write."""
    print(f"{name}: the leader's CPU per write on a core of its own / on the shared cores:")
    for mine, theirs in zip(median_points(pinned), median_points(shared), strict=True):
        print(f"  clients {mine.clients:4d}: {mine.leader_us:5.0f} / {theirs.leader_us:5.0f} us = "
              f"{mine.leader_us / theirs.leader_us:.2f}x (servers {mine.servers_us / theirs.servers_us:.2f}x)",
              flush=True)


System = Callable[..., Awaitable[list[Point]]]


async def run_rounds(systems: dict[str, System], rounds: int, root: Path) -> dict[str, list[list[Point]]]:
    """Every system once a round, the order reversed every other round; each round's points printed
    as they come. Each system's run gets a folder of its own under `root`."""
    results: dict[str, list[list[Point]]] = {name: [] for name in systems}
    for round_number in range(rounds):
        order = list(systems) if round_number % 2 == 0 else list(reversed(systems))
        print(f"round {round_number + 1}:")
        for name in order:
            points = await systems[name](root / f"{name}-{round_number}")
            results[name].append(points)
            for point in points:
                print_point(name, point)
    return results


async def bench(args: argparse.Namespace) -> None:
    clients = [int(count) for count in args.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-cpu-per-write-") as root_text:
        root = Path(root_text)
        systems: dict[str, System] = {}
        for tree in args.tree or ["rmqc="]:
            name, _, src = tree.partition("=")
            program = wrapper_program(root, name, src) if src else RMQC_PROGRAM
            systems[name] = partial(rmqc_points, program=program, clients=clients, seconds=args.seconds)
        rmqc_names = list(systems)
        if not args.no_etcd and _etcd.etcd_binary() is not None:
            systems["etcd"] = partial(etcd_grpc_points, clients=clients, seconds=args.seconds)
            if args.etcd_http:
                systems["etcd-http"] = partial(etcd_http_points, clients=clients, seconds=args.seconds)
        if args.pin_leader:
            for name in [name for name in systems if name != "etcd-http"]:
                systems[f"{name}-pinned"] = partial(systems[name], pin=True)
            rmqc_names += [f"{name}-pinned" for name in rmqc_names]
        results = await run_rounds(systems, args.rounds, root)
    print(f"medians of {args.rounds} rounds:")
    for name, rounds in results.items():
        for point in median_points(rounds):
            print_point(name, point)
    for anchor in [name for name in results if name not in rmqc_names]:
        for name in rmqc_names:
            if name.endswith("-pinned") == anchor.endswith("-pinned"):
                print_ratios(name, results[name], anchor, results[anchor])
    if args.pin_leader:
        for name in [name for name in results if name.endswith("-pinned")]:
            print_pinned_ratios(name, results[name], results[name.removesuffix("-pinned")])
    for name in [name for name in rmqc_names[1:] if not name.endswith("-pinned")]:
        print_tree_ratios(name, results[name], rmqc_names[0], results[rmqc_names[0]])
    if "etcd-http" in results:
        print_ratios("etcd-http", results["etcd-http"], "etcd", results["etcd"])


def add_round_options(parser: argparse.ArgumentParser, clients: str, seconds: float) -> None:
    """--clients, --seconds and --rounds, as every CPU-per-write benchmark takes them."""
    parser.add_argument("--clients", default=clients, help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=seconds, help="measured window per point")
    parser.add_argument("--rounds", type=int, default=3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_options(parser, "1,16,64,256", 8.0)
    parser.add_argument("--tree", action="append", metavar="NAME=SRC", help="an rmqc source tree to run (repeat)")
    parser.add_argument("--no-etcd", action="store_true")
    parser.add_argument("--etcd-http", action="store_true",
                        help="also load etcd through its HTTP/JSON gateway (the earlier anchor), in the same rounds")
    parser.add_argument("--pin-leader", action="store_true",
                        help="also run every system with its leader alone on CPU 0, the rest on the other CPUs")
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
