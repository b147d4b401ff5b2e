"""The hot paths of one `rmqc serve` process (issue 8, "profile, fix"): 1-client durable writes
(1013), heartbeats (904 one-way) from many connections, and 1-client lease reads (1004), on a
1-node cluster by default. Each scenario runs `--runs` times; the figures printed are the median
of the runs. `--profile-pid-file F` writes the node's PID to F so py-spy can attach meanwhile.

Run: .venv/bin/python bench/bench_node_paths.py [--seconds S] [--runs R] [--nodes N]
      [--only writes,heartbeats,reads]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._heartbeats import Broker, drain_marker, heartbeat_chunks
from bench._load import RemotingConn, Workload, closed_loop
from bench._rmqc import CLUSTER, RmqcCluster, WriteSequence
from bench._scn_reads import prepare_read_group, rmqc_read_workload
from bench._stats import summarise_ms

HEARTBEAT_CLIENTS = 64
BROKERS_PER_HEARTBEAT_CLIENT = 300


async def writes(cluster: RmqcCluster, leader: str, seconds: float, run: int) -> dict[str, float]:
    sequence = WriteSequence(f"p{run}x{int(time.time())}", collections.Counter())

    async def open_conn(_client: int) -> RemotingConn:
        return await RemotingConn.open(cluster.address(leader))

    async def op(conn: RemotingConn, client: int, _seq: int) -> bool:
        return await sequence.write(conn, client)

    result = await closed_loop(Workload(open_conn, op), 1, seconds, 0.5)
    stats = summarise_ms(result.latencies_ms)
    return {"writes_per_s": result.ops_per_s, "write_p50_ms": stats["p50_ms"], "write_p99_ms": stats["p99_ms"],
            "write_errors": result.errors}


async def reads(cluster: RmqcCluster, leader: str, seconds: float, _run: int) -> dict[str, float]:
    result = await closed_loop(rmqc_read_workload([cluster.address(leader)], "lease"), 1, seconds, 0.5)
    stats = summarise_ms(result.latencies_ms)
    return {"lease_reads_per_s": result.ops_per_s, "lease_p50_ms": stats["p50_ms"],
            "lease_p99_ms": stats["p99_ms"], "read_errors": result.errors}


async def heartbeats(cluster: RmqcCluster, leader: str, seconds: float, run: int) -> dict[str, float]:
    """Each client sends its brokers' 904s as fast as TCP takes them, for `seconds`, then a two-way
    heartbeat whose answer proves the node read everything before it: ingested/s = sent / time."""
    sent = [0] * HEARTBEAT_CLIENTS

    async def client(index: int, stop_at: float) -> None:
        brokers = [Broker(CLUSTER, f"hb{run}-{index}-{i // 3}", i % 3 + 1, f"10.{index}.{i // 250}.{i % 250}:10911")
                   for i in range(BROKERS_PER_HEARTBEAT_CLIENT)]
        chunks = heartbeat_chunks(brokers)
        conn = await RemotingConn.open(cluster.address(leader))
        try:
            while time.perf_counter() < stop_at:
                for chunk in chunks:
                    await conn.stream.send_all(chunk)
                sent[index] += len(brokers)
            await drain_marker(conn, brokers[0])
        finally:
            await conn.aclose()

    start = time.perf_counter()
    with trio.fail_after(seconds + 60):
        async with trio.open_nursery() as nursery:
            for index in range(HEARTBEAT_CLIENTS):
                nursery.start_soon(client, index, start + seconds)
    elapsed = time.perf_counter() - start
    return {"heartbeats_per_s": sum(sent) / elapsed}


SCENARIOS = {"writes": writes, "heartbeats": heartbeats, "reads": reads}


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="rmqc-paths-") as root:
        cluster = RmqcCluster(Path(root), args.nodes)
        await cluster.start()
        try:
            leader = await cluster.leader_id()
            if args.profile_pid_file:
                Path(args.profile_pid_file).write_text(str(cluster.procs[leader].pid))
            await prepare_read_group(cluster, leader)
            for name in args.only.split(","):
                runs = [await SCENARIOS[name](cluster, leader, args.seconds, run) for run in range(args.runs)]
                for key in runs[0]:
                    values = [r[key] for r in runs]
                    print(f"{name:10s} {key:18s} median {statistics.median(values):10.2f}   runs "
                          + " ".join(f"{v:.2f}" for v in values), flush=True)
        finally:
            cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--only", default="writes,heartbeats,reads")
    parser.add_argument("--profile-pid-file", default="")
    trio.run(main, parser.parse_args())
