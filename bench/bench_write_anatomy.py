"""Where a durable write's CPU goes, thread by thread and syscall by syscall (issue 36's CPU item).

`bench_cpu_per_write.py` says how much CPU each rmqc process spends per write; this says in which
thread, in user or kernel mode, and on which system calls. A 3-node cluster takes `--clients`
closed-loop 1013 writers for `--seconds`; over the measured window (/proc/PID/task/TID/stat, read
when the warm-up ends and when the window closes) each thread's user and system CPU is divided by
the writes answered in it. The main thread is the event loop (the replica, Raft, the codecs,
Trio); the others are the saver's thread (journal record + fdatasync) and Trio's workers.

`--strace` then runs a second window of the same load with `strace -f -c` attached to the leader
and one follower, and prints each system call's count per write (strace slows the processes: the
counts hold, the times do not).

Run: .venv/bin/python bench/bench_write_anatomy.py [--clients 1] [--seconds 8] [--strace]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import closed_loop
from bench._rmqc import RmqcCluster
from bench._scn_writes import rmqc_write_workload

WARMUP_S = 0.5
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SHOWN_SYSCALLS = 12


def thread_cpu_s(pid: int) -> dict[int, tuple[float, float]]:
    """User and system CPU seconds of every thread of `pid`, by thread id."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a worker thread that ended meanwhile
        threads[int(task.name)] = (int(fields[11]) / CLOCK_TICKS_PER_S, int(fields[12]) / CLOCK_TICKS_PER_S)
    return threads


async def measured_window(cluster: RmqcCluster, leader: str, clients: int, seconds: float,
                          ) -> tuple[float, dict[str, dict[int, tuple[float, float]]]]:
    """Writes answered in the window, and every node's threads' CPU used in it."""
    pids = {node: cluster.procs[node].pid for node in cluster.ids}
    start: dict[str, dict[int, tuple[float, float]]] = {}

    async def at_window_start() -> None:
        await trio.sleep(WARMUP_S)
        start.update({node: thread_cpu_s(pid) for node, pid in pids.items()})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(at_window_start)
        result = await closed_loop(rmqc_write_workload(cluster, leader), clients, seconds, WARMUP_S)
    used = {}
    for node, pid in pids.items():
        end = thread_cpu_s(pid)
        used[node] = {tid: (user - start[node].get(tid, (0.0, 0.0))[0], system - start[node].get(tid, (0.0, 0.0))[1])
                      for tid, (user, system) in end.items()}
    return result.ops_per_s * seconds, used


def print_threads(cluster: RmqcCluster, leader: str, writes: float,
                  used: dict[str, dict[int, tuple[float, float]]]) -> None:
    print(f"CPU per write over {writes:,.0f} writes (us; user + system):")
    for node in cluster.ids:
        pid = cluster.procs[node].pid
        role = "leader" if node == leader else "follower"
        main_user, main_system = used[node].get(pid, (0.0, 0.0))
        other_user = sum(user for tid, (user, _s) in used[node].items() if tid != pid)
        other_system = sum(system for tid, (_u, system) in used[node].items() if tid != pid)
        print(f"  {node} {role:8s}  event loop {1e6 * main_user / writes:6.0f} + {1e6 * main_system / writes:4.0f}"
              f"   other threads {1e6 * other_user / writes:5.0f} + {1e6 * other_system / writes:4.0f}")


async def strace_window(cluster: RmqcCluster, leader: str, clients: int, seconds: float, out: Path) -> None:
    follower = next(node for node in cluster.ids if node != leader)
    traced = {"leader": leader, "follower": follower}
    tracers = {role: subprocess.Popen(["strace", "-f", "-c", "-o", str(out / f"{role}.strace"), "-p",
                                       str(cluster.procs[node].pid)], stderr=subprocess.DEVNULL)
               for role, node in traced.items()}
    try:
        await trio.sleep(WARMUP_S)  # attached before the load starts
        result = await closed_loop(rmqc_write_workload(cluster, leader), clients, seconds, 0.0)
    finally:
        for tracer in tracers.values():
            tracer.send_signal(signal.SIGINT)  # strace prints its table and detaches
            tracer.wait(30)
    writes = result.ops_per_s * seconds
    print(f"system calls per write under strace ({writes:,.0f} writes, {result.ops_per_s:,.0f}/s):")
    for role in traced:
        print(f"  {role}: " + ", ".join(f"{name} {calls / writes:.2f}"
                                         for name, calls in strace_counts(out / f"{role}.strace")[:SHOWN_SYSCALLS]))


def strace_counts(path: Path) -> list[tuple[str, int]]:
    """(syscall, calls) from `strace -c`'s table, most calls first."""
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            rows.append((parts[-1], int(parts[3])))
    return sorted(rows, key=lambda row: -row[1])


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-write-anatomy-") as root_text:
        root = Path(root_text)
        cluster = RmqcCluster(root / "cluster", 3)
        await cluster.start()
        try:
            leader = await cluster.leader_id()
            writes, used = await measured_window(cluster, leader, args.clients, args.seconds)
            print(f"{args.clients} clients, {writes / args.seconds:,.0f} writes/s")
            print_threads(cluster, leader, writes, used)
            if args.strace:
                await strace_window(cluster, leader, args.clients, args.seconds, root)
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured window")
    parser.add_argument("--strace", action="store_true", help="also count system calls per write (needs strace)")
    args = parser.parse_args()
    if args.strace and shutil.which("strace") is None:
        parser.error("--strace needs strace (apt-get install strace)")
    trio.run(bench, args)


if __name__ == "__main__":
    main()
