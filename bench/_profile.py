"""`python -m bench profile [writes|heartbeats]`: py-spy on the leader while the heaviest loads run.

Starts a 3-node cluster, attaches `py-spy record` (installed into the venv at run time when
missing) to the leader's PID, runs the load, and writes a flame graph (SVG) plus a table of the
functions with the most samples, own and inclusive, into the output folder."""

from __future__ import annotations

import collections
import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path

import trio

from ._heartbeats import Broker, heartbeat_chunks
from ._load import RemotingConn, closed_loop
from ._rmqc import CLUSTER, RmqcCluster
from ._scn_writes import rmqc_write_workload

PROFILE_SECONDS = 15.0
SAMPLE_RATE_HZ = 200
TOP_FUNCTIONS = 25


def py_spy() -> str:
    binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(binary).exists() and importlib.util.find_spec("py_spy") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=False, timeout=300)
    return binary


async def write_load(cluster: RmqcCluster, leader: str, seconds: float) -> str:
    result = await closed_loop(rmqc_write_workload(cluster, leader), 256, seconds, 0.5)
    return f"256 clients, 1013 writes: {result.ops_per_s:,.0f}/s, errors {result.errors}"


async def heartbeat_load(cluster: RmqcCluster, leader: str, seconds: float) -> str:
    brokers = [Broker(CLUSTER, f"hb-{i // 3:05d}", i % 3 + 1, f"10.1.{i // 250 % 250}.{i % 250}:10911")
               for i in range(30_000)]
    conn = await RemotingConn.open(cluster.address(leader))
    chunks = heartbeat_chunks(brokers)
    sent = 0
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        for chunk in chunks:
            await conn.stream.send_all(chunk)
        sent += len(brokers)
    await conn.aclose()
    return f"heartbeats to the leader: {sent / seconds:,.0f}/s sent"


LOADS = {"writes": write_load, "heartbeats": heartbeat_load}


def summarise_raw(raw_path: Path) -> list[str]:
    """Top functions by own and by inclusive samples from py-spy's collapsed-stack output."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw_path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    # the frames every sample shares (entry point, trio's run loop) say nothing: keep rmqc's own
    ours = [(f, c) for f, c in inclusive.most_common() if "rmqc/" in f and c < 0.8 * total][:TOP_FUNCTIONS]
    lines = [f"{total} samples"]
    lines += ["", "own samples:"] + [f"{100 * c / total:5.1f}%  {f}" for f, c in own.most_common(TOP_FUNCTIONS)]
    lines += ["", "inclusive samples, rmqc functions:"] + [f"{100 * c / total:5.1f}%  {f}" for f, c in ours]
    return lines


async def profile(load_name: str, out: Path) -> Path:
    cluster = RmqcCluster(out / "work" / f"profile-{load_name}", 3)
    await cluster.start()
    try:
        leader = await cluster.leader_id()
        raw = out / f"profile-{load_name}.raw.txt"
        svg = out / f"profile-{load_name}.svg"
        argv = [py_spy(), "record", "-p", str(cluster.procs[leader].pid), "-r", str(SAMPLE_RATE_HZ),
                "-d", str(int(PROFILE_SECONDS)), "--nonblocking"]
        spies = [subprocess.Popen([*argv, "-f", "raw", "-o", str(raw)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE),
                 subprocess.Popen([*argv, "-f", "flamegraph", "-o", str(svg)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)]
        figures = await LOADS[load_name](cluster, leader, PROFILE_SECONDS)
        for spy in spies:
            await trio.to_thread.run_sync(spy.wait, 60)
        text = [f"py-spy on leader {leader} ({SAMPLE_RATE_HZ} Hz, {PROFILE_SECONDS:.0f} s) during: {figures}", ""]
        if raw.exists():
            text += summarise_raw(raw)
        else:
            stderr = spies[0].stderr
            text += [f"py-spy wrote nothing: {stderr.read().decode() if stderr else ''}"]
        summary = out / f"profile-{load_name}.txt"
        summary.write_text("\n".join(text) + "\n")
        print("\n".join(text[:40]))
        return summary
    finally:
        cluster.stop()
