"""The logic's CPU inside `rmqc serve`, apart from the shell's (issue 36's CPU item).

`bench_replicated_logic.py` measures rmqc's logic hot in one process; this measures the same
logic where it runs for real. A 3-node cluster runs `bench._timed_serve` (rmqc serve with the
replica's inputs and passes, the peer codec and the remoting codec timed in the event loop's
thread, the saver's hand-off and the actions' sends nested in them counted as shell) and takes
`--clients` closed-loop 1013 writers for `--seconds`. Per node and per write: the event loop's CPU,
the logic's share and the rest (the shell: Trio, the sockets, the peer links, the runner). The
logic's figure here against the in-process one says how much dearer the same code is when it runs
between other processes, with caches they have written over (docs/cpu-per-write.md).

`--with-anchors` runs, in the same rounds and alternating order, the CPU floor with rmqc's saver
thread (bench_cpu_floor.py) and etcd over gRPC (when installed), and prints per round the floor's,
the in-node logic's and `rmqc serve`'s CPU per write as shares of etcd's: whether the floor and the
logic alone, before any shell, are already above the targets.

Run: PYTHONPATH=src:. .venv/bin/python bench/bench_serve_logic.py [--clients 1,16] [--seconds 8] [--rounds 3]
      [--with-anchors]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _etcd
from bench._load import closed_loop
from bench._rmqc import RmqcCluster
from bench._scn_writes import rmqc_write_workload
from bench._timed_serve import LOGIC, OUT_ENV, SHELL_IN_LOGIC
from bench.bench_cpu_floor import floor_points, target_at
from bench.bench_cpu_per_write import Point, add_round_options, etcd_grpc_points, own_cpu_s, point
from rmqc.launcher import cpu_s

REPO = Path(__file__).resolve().parent.parent
WARMUP_S = 2.0
DUMP_TIMEOUT_S = 5.0


def timed_program(directory: Path) -> str:
    """The node program: rmqc serve from this tree, its logic timed (bench._timed_serve)."""
    path = directory / "rmqc-timed"
    path.write_text(f"#!/bin/sh\nexport PYTHONPATH={REPO}:{REPO / 'src'}\n"
                    f"exec {sys.executable} -m bench._timed_serve \"$@\"\n")
    path.chmod(0o755)
    return str(path)


async def read_dump(path: Path) -> dict[str, Any]:
    """The node's figures once its SIGUSR2 handler has written them."""
    with trio.fail_after(DUMP_TIMEOUT_S):
        while True:
            try:
                figures: dict[str, Any] = json.loads(path.read_text())
                return figures
            except (FileNotFoundError, json.JSONDecodeError):  # not written yet, or half written
                await trio.sleep(0.05)


def split(figures: dict[str, Any], writes: float) -> dict[str, float]:
    """A node's event-loop CPU per write (us), its logic's and its shell's, and how often it resumed."""
    cpu, steps = figures["cpu_s"], figures["task_steps"]
    loop_us = 1e6 * figures["event_loop_cpu_s"] / writes
    logic_us = 1e6 * cpu.get(LOGIC, 0.0) / writes
    return {"event loop": loop_us, "logic": logic_us, "shell": loop_us - logic_us,
            "of which inside a pass": 1e6 * cpu.get(SHELL_IN_LOGIC, 0.0) / writes,
            "task steps": sum(steps.values()) / writes, "I/O waits": figures["io_waits"] / writes,
            "timed regions": sum(figures["calls"].values()) / writes}


Splits = dict[str, dict[str, float]]


async def window(cluster: RmqcCluster, leader: str, clients: int, seconds: float, out: str) -> tuple[Point, Splits]:
    """One measured window: the servers' CPU per write (as bench_cpu_per_write counts it) and each
    node's split per write, the leader first."""
    workload = rmqc_write_workload(cluster, leader)
    await closed_loop(workload, clients, WARMUP_S, 0.0)  # the clients' connections and the caches warm
    procs = cluster.procs
    for proc in procs.values():
        os.kill(proc.pid, signal.SIGUSR1)
    servers_before, own_before = {name: cpu_s(proc.pid) or 0.0 for name, proc in procs.items()}, own_cpu_s()
    result = await closed_loop(workload, clients, seconds, 0.0)
    servers_after, own_after = {name: cpu_s(proc.pid) or 0.0 for name, proc in procs.items()}, own_cpu_s()
    for proc in procs.values():
        os.kill(proc.pid, signal.SIGUSR2)
    writes = max(result.ops, 1)
    nodes = [leader] + [node for node in cluster.ids if node != leader]
    splits = {}
    for node in nodes:
        dump = Path(f"{out}.{procs[node].pid}")
        splits["leader" if node == leader else f"follower {node}"] = split(await read_dump(dump), writes)
        dump.unlink()
    servers = point(result, {name: servers_after[name] - servers_before[name] for name in procs}, leader,
                    own_after - own_before)
    print(f"  rmqc  {clients:4d} clients: {result.ops_per_s:8,.0f}/s, servers {servers.servers_us:5.0f} us a write, "
          f"{result.errors} errors", flush=True)
    return servers, splits


async def rmqc_round(root: Path, clients: list[int], seconds: float, out: str) -> list[tuple[Point, Splits]]:
    cluster = RmqcCluster(root, 3, program=timed_program(root.parent))
    await cluster.start()
    try:
        leader = await cluster.leader_id()
        return [await window(cluster, leader, count, seconds, out) for count in clients]
    finally:
        cluster.stop()


async def anchor_round(name: str, root: Path, clients: list[int], seconds: float) -> list[Point]:
    points = (await floor_points(root, clients, seconds, ["--saver-thread"]) if name == "floor-saver"
              else await etcd_grpc_points(root, clients, seconds))
    for anchor in points:
        print(f"  {name:5s} {anchor.clients:4d} clients: {anchor.ops_per_s:8,.0f}/s, servers "
              f"{anchor.servers_us:5.0f} us a write", flush=True)
    return points


async def bench(args: argparse.Namespace) -> None:
    client_counts = [int(text) for text in args.clients.split(",")]
    rmqc_rounds: list[list[tuple[Point, Splits]]] = []
    anchors: dict[str, list[list[Point]]] = {}
    if args.with_anchors:
        anchors["floor-saver"] = []
        if _etcd.etcd_binary() is not None:
            anchors["etcd"] = []
        else:
            print("etcd is not installed (apt-get install etcd-server): no shares of etcd's CPU")
    with tempfile.TemporaryDirectory(prefix="bench-serve-logic-") as root_text:
        root = Path(root_text)
        out = str(root / "figures")
        os.environ[OUT_ENV] = out  # the nodes inherit it
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}:", flush=True)
            order = ["rmqc", *anchors]
            for name in order if round_number % 2 == 0 else reversed(order):
                folder = root / f"{name}-{round_number}"
                if name == "rmqc":
                    rmqc_rounds.append(await rmqc_round(folder, client_counts, args.seconds, out))
                else:
                    anchors[name].append(await anchor_round(name, folder, client_counts, args.seconds))
    print_splits(client_counts, [[splits for _point, splits in round_] for round_ in rmqc_rounds])
    if "etcd" in anchors:
        print_shares(client_counts, rmqc_rounds, anchors)


def print_splits(client_counts: list[int], rounds: list[list[Splits]]) -> None:
    print(f"CPU per write in each node's event loop (us); the loop's task steps, I/O waits and timed regions "
          f"(two clock readings each) per write; medians of {len(rounds)} rounds:")
    for index, count in enumerate(client_counts):
        print(f"{count} clients:")
        for part in ("leader", "followers"):
            print(f"  {part:10s} " + "  ".join(
                f"{column} {statistics.median(_part_figure(r[index], part, column) for r in rounds):{form}}"
                for column, form in (("event loop", "6.0f"), ("logic", "6.0f"), ("shell", "6.0f"),
                                     ("of which inside a pass", "5.0f"), ("task steps", "5.2f"),
                                     ("I/O waits", "5.2f"), ("timed regions", "5.1f"))))


def print_shares(client_counts: list[int], rmqc_rounds: list[list[tuple[Point, Splits]]],
                 anchors: dict[str, list[list[Point]]]) -> None:
    """Per client count, each round's shares of the same round's etcd servers' CPU per write, and
    their medians: the floor, the logic as it runs in the nodes, their sum, and rmqc serve."""
    print("shares of etcd's servers' CPU per write in the same round (medians; each round in brackets):")
    for index, count in enumerate(client_counts):
        shares: dict[str, list[float]] = {"floor with saver": [], "logic in the nodes": [], "floor + logic": [],
                                          "rmqc serve": []}
        for round_number, rmqc_round_ in enumerate(rmqc_rounds):
            servers, splits = rmqc_round_[index]
            etcd_us = anchors["etcd"][round_number][index].servers_us
            floor = anchors["floor-saver"][round_number][index].servers_us / etcd_us
            logic = sum(figures["logic"] for figures in splits.values()) / etcd_us
            for name, share in (("floor with saver", floor), ("logic in the nodes", logic),
                                ("floor + logic", floor + logic), ("rmqc serve", servers.servers_us / etcd_us)):
                shares[name].append(share)
        target = target_at(count)
        print(f"  {count:4d} clients" + (f" (target <= {target}x):" if target is not None else ":"))
        for name, figures in shares.items():
            print(f"    {name:20s} {statistics.median(figures):.2f}x  ("
                  + " ".join(f"{share:.2f}" for share in figures) + ")")


def _part_figure(splits: Splits, part: str, column: str) -> float:
    """The leader's figure, or the followers' mean."""
    if part == "leader":
        return splits["leader"][column]
    return statistics.fmean(figures[column] for name, figures in splits.items() if name != "leader")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_options(parser, "1,16", 8.0)
    parser.add_argument("--with-anchors", action="store_true",
                        help="also the CPU floor (saver thread) and etcd over gRPC in the same rounds, and the shares")
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
