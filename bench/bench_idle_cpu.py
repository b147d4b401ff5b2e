"""CPU an idle node uses (issue 21: "Idle node CPU below 1 %").

Starts 3 `rmqc serve` nodes on loopback (bench._rmqc.RmqcCluster, so RMQC_BENCH_PROGRAM points it
at another tree for an A/B), waits until they accept a write and agree on a leader, lets them
settle for --settle-s, then measures for --seconds with no client connected: each node's user +
system CPU seconds (/proc/PID/stat) over the window, as a percentage of one core.

Run: .venv/bin/python bench/bench_idle_cpu.py [--seconds S] [--settle-s S] [--set OPTION=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._rmqc import RmqcCluster


def settings_of(pairs: list[str]) -> dict[str, object]:
    settings: dict[str, object] = {}
    for pair in pairs:
        option, _, value = pair.partition("=")
        settings[option] = value
    return settings


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-idle-cpu-") as root:
        cluster = RmqcCluster(Path(root), 3, settings=settings_of(args.set))
        try:
            await cluster.start()
            leader = await cluster.leader_id()
            await trio.sleep(args.settle_s)
            before, started = cluster.cpu_s(), time.perf_counter()
            await trio.sleep(args.seconds)
            after, elapsed = cluster.cpu_s(), time.perf_counter() - started
            still = await cluster.leader_id()
        finally:
            cluster.stop()
    print(f"3 rmqc serve nodes, idle for {elapsed:.1f} s (no clients), CPU of one core:")
    for node in cluster.ids:
        used = (after[node] or 0.0) - (before[node] or 0.0)
        role = " (leader)" if node == leader else ""
        print(f"  {node}{role}: {100 * used / elapsed:.2f} %")
    if still != leader:
        print(f"  the leader changed during the window: {leader} -> {still} (not an idle figure)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="the measured idle window")
    parser.add_argument("--settle-s", type=float, default=2.0, help="idle time before the window")
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="an rmqc serve option for every node (repeatable)")
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
