"""The logic's CPU inside `rmqc serve`, apart from the shell's (issue 36's CPU item).

`bench_replicated_logic.py` measures rmqc's logic hot in one process; this measures the same
logic where it runs for real. A 3-node cluster runs `bench._timed_serve` (rmqc serve with the
replica's inputs and passes, the peer codec and the remoting codec timed in the event loop's
thread, the saver's hand-off and the actions' sends nested in them counted as shell) and takes
`--clients` closed-loop 1013 writers for `--seconds`. Per node and per write: the event loop's CPU,
the logic's share and the rest (the shell: Trio, the sockets, the peer links, the runner). The
logic's figure here against the in-process one says how much dearer the same code is when it runs
between other processes, with caches they have written over (docs/benchmarks.md).

Run: PYTHONPATH=src:. .venv/bin/python bench/bench_serve_logic.py [--clients 1,16] [--seconds 8] [--rounds 3]
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

from bench._load import closed_loop
from bench._rmqc import RmqcCluster
from bench._scn_writes import rmqc_write_workload
from bench._timed_serve import LOGIC, OUT_ENV, SHELL_IN_LOGIC

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
            "task steps": sum(steps.values()) / writes, "I/O waits": figures["io_waits"] / writes}


async def window(cluster: RmqcCluster, leader: str, clients: int, seconds: float,
                 out: str) -> dict[str, dict[str, float]]:
    """One measured window: each node's split per write, the leader first."""
    workload = rmqc_write_workload(cluster, leader)
    await closed_loop(workload, clients, WARMUP_S, 0.0)  # the clients' connections and the caches warm
    procs = cluster.procs
    for proc in procs.values():
        os.kill(proc.pid, signal.SIGUSR1)
    result = await closed_loop(workload, clients, seconds, 0.0)
    for proc in procs.values():
        os.kill(proc.pid, signal.SIGUSR2)
    writes = max(result.ops, 1)
    nodes = [leader] + [node for node in cluster.ids if node != leader]
    splits = {}
    for node in nodes:
        dump = Path(f"{out}.{procs[node].pid}")
        splits["leader" if node == leader else f"follower {node}"] = split(await read_dump(dump), writes)
        dump.unlink()
    print(f"  {clients} clients: {result.ops_per_s:,.0f}/s, {result.errors} errors", flush=True)
    return splits


async def bench(args: argparse.Namespace) -> None:
    client_counts = [int(text) for text in args.clients.split(",")]
    results: dict[int, list[dict[str, dict[str, float]]]] = {count: [] for count in client_counts}
    with tempfile.TemporaryDirectory(prefix="bench-serve-logic-") as root_text:
        root = Path(root_text)
        out = str(root / "figures")
        os.environ[OUT_ENV] = out  # the nodes inherit it
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}:", flush=True)
            cluster = RmqcCluster(root / f"round-{round_number}", 3, program=timed_program(root))
            await cluster.start()
            try:
                leader = await cluster.leader_id()
                for count in client_counts:
                    results[count].append(await window(cluster, leader, count, args.seconds, out))
            finally:
                cluster.stop()
    print(f"CPU per write in each node's event loop (us), and the loop's task steps and I/O waits per write; "
          f"medians of {args.rounds} rounds:")
    for count, rounds in results.items():
        print(f"{count} clients:")
        for part in ("leader", "followers"):
            print(f"  {part:10s} " + "  ".join(
                f"{column} {statistics.median(_part_figure(r, part, column) for r in rounds):{form}}"
                for column, form in (("event loop", "6.0f"), ("logic", "6.0f"), ("shell", "6.0f"),
                                     ("of which inside a pass", "5.0f"), ("task steps", "5.2f"),
                                     ("I/O waits", "5.2f"))))


def _part_figure(splits: dict[str, dict[str, float]], part: str, column: str) -> float:
    """The leader's figure, or the followers' mean."""
    if part == "leader":
        return splits["leader"][column]
    return statistics.fmean(figures[column] for name, figures in splits.items() if name != "leader")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,16", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured window per point")
    parser.add_argument("--rounds", type=int, default=3)
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
