"""Does a snapshot stall the nodes of a 3-node `rmqc serve` cluster? (docs/chaos.md: "Every node
stalls for seconds around the snapshots".)

Writers hammer the leader with durable writes until --entries; meanwhile a prober asks every node
for its metadata every 20 ms (a read the node answers in its event loop) and records each answer's
latency. Printed: per node, the slowest answer and when it was, the nodes' `snapshot at` lines
and their `stalled N ms` warnings. --fsync-load N runs N threads that write 64 KB and fsync in a
loop on the same filesystem (a contended disk, as in the chaos run). --faketime starts the nodes
under libfaketime as `rmqc chaos run`'s clock fault does (offset 0); RMQC_BENCH_PROGRAM runs
another tree's rmqc for a before/after.

Run: PYTHONPATH=src .venv/bin/python bench/repro_snapshot_stall.py [--every 2000] [--entries 4500]
     [--fsync-load 2] [--faketime]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import LoadError
from bench._rmqc import RmqcCluster, durable_write
from rmqc.chaos._faults import libfaketime, set_clock_offset
from rmqc.remoting import RequestCode

PROBE_EVERY_S = 0.02


def fsync_load(directory: Path, stop: threading.Event, index: int) -> None:
    path = directory / f"fsync-load-{index}"
    block = os.urandom(64 * 1024)
    with open(path, "wb") as f:
        while not stop.is_set():
            f.write(block)
            f.flush()
            os.fsync(f.fileno())
            if f.tell() > 64 * 1024 * 1024:
                f.seek(0)
    path.unlink()


async def main(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="snapstall-", dir=args.dir))
    cluster = RmqcCluster(root, 3, {"snapshot_every_entries": args.every})
    if args.faketime:  # every node as rmqc.chaos starts it for its clock fault (offset 0)
        clock = root / "clock"
        set_clock_offset(clock, 0)
        for node in cluster.nodes:
            node.env = {"LD_PRELOAD": str(libfaketime()), "FAKETIME_TIMESTAMP_FILE": str(clock),
                        "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    stop_load = threading.Event()
    loaders = [threading.Thread(target=fsync_load, args=(root, stop_load, i), daemon=True)
               for i in range(args.fsync_load)]
    slowest: dict[str, tuple[float, float]] = {}
    written = 0
    slow: list[tuple[str, str, int]] = []
    t0 = time.time()
    try:
        await cluster.start()
        leader = await cluster.leader_id()
        for loader in loaders:
            loader.start()
        done = trio.Event()

        async def probe(node: str) -> None:
            conn = await cluster.open_conn(node)
            while not done.is_set():
                started = time.perf_counter()
                try:
                    await conn.call(RequestCode.CONTROLLER_GET_METADATA_INFO)
                except (OSError, LoadError, trio.BrokenResourceError):
                    return
                took = time.perf_counter() - started
                if took > args.slow_ms / 1000:
                    sent = time.strftime("%H:%M:%S", time.localtime(time.time() - took))
                    slow.append((sent, node, round(took * 1000)))
                if took > slowest.get(node, (0.0, 0.0))[0]:
                    slowest[node] = (took, time.time() - t0)
                await trio.sleep(PROBE_EVERY_S)

        async def writer(client: int) -> None:
            nonlocal written
            conn = await cluster.open_conn(leader)
            seq = 0
            while written < args.entries:
                if await durable_write(conn, f"w{client}", client, seq):
                    seq += 1
                    written += 1
            done.set()

        async with trio.open_nursery() as nursery:
            for node_id in cluster.ids:
                nursery.start_soon(probe, node_id)
            for client in range(args.writers):
                nursery.start_soon(writer, client)
        elapsed = time.time() - t0
    finally:
        stop_load.set()
        cluster.stop()
    print(f"every={args.every} entries={written} fsync_load={args.fsync_load} faketime={args.faketime} "
          f"writes/s={written / elapsed:.0f}")
    worst = 0.0
    for node_id in cluster.ids:
        took, at = slowest.get(node_id, (0.0, 0.0))
        worst = max(worst, took)
        text = (root / "rmqc" / f"{node_id}.log").read_text(errors="replace")
        snaps = re.findall(r"(\d\d:\d\d:\d\d),\d+ INFO \S+ \S+ snapshot at (\d+)", text)
        stalls = re.findall(r"stalled (\d+) ms", text)
        print(f"  {node_id}: slowest probe {took * 1000:.0f} ms at +{at:.1f} s; snapshots {snaps}; "
              f"stall warnings (ms): {stalls}")
    print(f"  probes slower than {args.slow_ms} ms (sent at, node, ms): {slow}")
    print(f"WORST_PROBE_MS {worst * 1000:.0f}")
    print(f"logs: {root}/rmqc")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=4500)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--fsync-load", type=int, default=0)
    parser.add_argument("--faketime", action="store_true", help="run the nodes under libfaketime")
    parser.add_argument("--slow-ms", type=int, default=200)
    parser.add_argument("--dir", default=None)
    sys.exit(trio.run(main, parser.parse_args()))
