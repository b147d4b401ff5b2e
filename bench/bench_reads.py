"""Reads at every consistency level on the leader and on a follower of a 3-node `rmqc serve`
cluster (1004 GET_REPLICA_INFO with extFields `consistency`): p50/p99 with one client, throughput
with many clients, then linearizable throughput with the clients spread over all nodes against all
on the leader. Every figure is also given per CPU second of the three node processes, since the
machine is shared (wall-clock figures move with the load of other tenants; CPU-normalised ones
much less).

Run: .venv/bin/python bench/bench_reads.py [--seconds S] [--clients N]
Targets (design.md): lease read on the leader p99 <= 0.5 ms; linearizable read on a follower
p99 <= 2 ms; >= 30,000 linearizable reads/s over all nodes; all nodes >= 1.8x leader only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import RemotingConn, Workload, closed_loop
from bench._rmqc import RmqcCluster
from bench._scn_reads import READ_GROUP, prepare_read_group
from bench._stats import summarise_ms
from rmqc.remoting import RequestCode, ResponseCode

LEVELS = ("linearizable", "lease", "stale")


def read_workload(cluster: RmqcCluster, nodes: list[str], level: str) -> Workload[RemotingConn]:
    ext = {"brokerName": READ_GROUP, "consistency": level}

    async def open_conn(client: int) -> RemotingConn:
        return await RemotingConn.open(cluster.address(nodes[client % len(nodes)]))

    async def op(conn: RemotingConn, _client: int, _seq: int) -> bool:
        response = await conn.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, ext)
        if response.code != ResponseCode.SUCCESS:
            workload.refusals[f"{response.code} {(response.remark or '')[:50]}"] += 1
        return response.code == ResponseCode.SUCCESS

    workload = Workload(open_conn, op)
    return workload


def node_cpu_s(cluster: RmqcCluster) -> float:
    return sum(value or 0.0 for value in cluster.cpu_s().values())


async def idle_cpu_share(cluster: RmqcCluster, seconds: float = 2.0) -> float:
    """CPUs the three nodes burn with no requests (ticks, heartbeats): subtracted from each cell."""
    before, started = node_cpu_s(cluster), time.perf_counter()
    await trio.sleep(seconds)
    return (node_cpu_s(cluster) - before) / (time.perf_counter() - started)


async def measure(cluster: RmqcCluster, label: str, workload: Workload[RemotingConn], clients: int,
                  seconds: float, idle_share: float) -> dict[str, float]:
    cpu_before, client_cpu_before, started = node_cpu_s(cluster), time.process_time(), time.perf_counter()
    result = await closed_loop(workload, clients, seconds)
    elapsed_s = time.perf_counter() - started
    node_share = (node_cpu_s(cluster) - cpu_before) / elapsed_s
    client_share = (time.process_time() - client_cpu_before) / elapsed_s
    busy_share = max(node_share - idle_share, 1e-9)
    stats = summarise_ms(result.latencies_ms)
    row = {"clients": clients, "ops_per_s": result.ops_per_s, "errors": result.errors,
           "p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"],
           # reads per second of node CPU spent on them (idle cost removed): what the cluster would
           # serve per CPU if it had the machine to itself
           "ops_per_node_cpu_s": result.ops_per_s / busy_share,
           "node_cpu_share": node_share, "client_cpu_share": client_share}
    refusals = dict(workload.refusals.most_common(2))
    print(f"{label:<42} {clients:>4} cl  {row['ops_per_s']:>9,.0f} ops/s  p50 {row['p50_ms']:7.3f} ms  "
          f"p99 {row['p99_ms']:7.3f} ms  {row['ops_per_node_cpu_s']:>9,.0f} ops/node-CPU-s  "
          f"nodes {row['node_cpu_share']:.2f} CPU, client {row['client_cpu_share']:.2f}  errors {result.errors}"
          + (f"  refusals {refusals}" if refusals else "")
          + (f"  first error: {result.first_error}" if result.first_error else ""), flush=True)
    return row


async def main(seconds: float, clients: int) -> None:
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared with other work)")
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as root:
        cluster = RmqcCluster(Path(root), 3)
        await cluster.start()
        try:
            leader = await cluster.leader_id()
            follower = next(node for node in cluster.ids if node != leader)
            await prepare_read_group(cluster, leader)
            idle_share = await idle_cpu_share(cluster)
            print(f"idle cluster: {idle_share:.2f} CPU (ticks, heartbeats), subtracted below")
            rows = {}
            for level in LEVELS:
                for role, node in (("leader", leader), ("follower", follower)):
                    for count in (1, clients):
                        rows[(level, role, count)] = await measure(
                            cluster, f"1004 {level} on {role}", read_workload(cluster, [node], level), count, seconds,
                            idle_share)
            spread = {}
            for where, nodes in (("all nodes", cluster.ids), ("leader only", [leader])):
                spread[where] = await measure(cluster, f"1004 linearizable, {where}",
                                              read_workload(cluster, nodes, "linearizable"), clients, seconds,
                                              idle_share)
        finally:
            cluster.stop()
    report(rows, spread, clients)


def report(rows: dict, spread: dict, clients: int) -> None:
    lease_p99 = rows[("lease", "leader", 1)]["p99_ms"]
    follower_p99 = rows[("linearizable", "follower", 1)]["p99_ms"]
    all_nodes = spread["all nodes"]["ops_per_s"]
    leader_only = spread["leader only"]["ops_per_s"]
    ratio = all_nodes / leader_only if leader_only else float("nan")
    cpu_ratio = spread["all nodes"]["ops_per_node_cpu_s"] / spread["leader only"]["ops_per_node_cpu_s"]
    print("\ntargets (design.md)                          measured")
    print(f"lease read on leader, 1 client, p99 <= 0.5 ms    {lease_p99:.3f} ms")
    print(f"linearizable on follower, 1 client, p99 <= 2 ms  {follower_p99:.3f} ms")
    print(f"linearizable all nodes >= 30,000/s ({clients} cl)  {all_nodes:,.0f}/s "
          f"({spread['all nodes']['ops_per_node_cpu_s']:,.0f} per node-CPU-s, "
          f"nodes used {spread['all nodes']['node_cpu_share']:.2f} of 2 CPUs)")
    print(f"all nodes / leader only >= 1.8x                  {ratio:.2f}x wall, {cpu_ratio:.2f}x per node-CPU-s")
    for key in (("lease", "leader", 1), ("linearizable", "follower", 1)):
        row = rows[key]
        print(f"node CPU per read, {key[0]} on {key[1]}, 1 client: {1e6 / row['ops_per_node_cpu_s']:,.0f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per cell")
    parser.add_argument("--clients", type=int, default=64, help="clients for the throughput cells")
    args = parser.parse_args()
    trio.run(main, args.seconds, args.clients)
