"""Reads per consistency level and node role (1004 with extFields consistency=linearizable|lease|
stale on the leader and on a follower), 1 client latency, then many clients on all nodes against
leader-only; and etcd's serializable and linearizable ranges in the same shapes.

The many-clients points run in the profile's `read_generators` processes, the same for rmqc and
etcd, and record the CPU of every node and generator over the window (which one was the limit)."""

from __future__ import annotations

from typing import Any

from rmqc.remoting import RequestCode, ResponseCode

from . import _etcd
from ._java import Controllers
from ._load import HttpConn, RemotingConn, Workload
from ._loadworker import WorkloadSpec
from ._points import load_points, spread_point
from ._rmqc import CLUSTER, RmqcCluster
from ._suite import Skipped, Suite, say

READ_GROUP = "bench-read"
LEVELS = ("linearizable", "lease", "stale")


async def prepare_read_group(cluster: Controllers, leader: str) -> None:
    conn = await RemotingConn.open(cluster.address(leader))
    try:
        ext = {"clusterName": CLUSTER, "brokerName": READ_GROUP, "appliedBrokerId": 1,
               "registerCheckCode": "127.0.0.1:1;1700000000000"}
        response = await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"preparing {READ_GROUP}: 1013 answered {response.code} {response.remark}")
    finally:
        await conn.aclose()


def rmqc_read_workload(addresses: list[str], level: str) -> Workload[RemotingConn]:
    """1004 at `level`; client i reads from addresses[i % len(addresses)]; why a read was refused
    is counted (the Java controller ignores `level` and answers 2007 on a follower)."""
    ext = {"brokerName": READ_GROUP, "consistency": level}

    async def open_conn(client: int) -> RemotingConn:
        return await RemotingConn.open(addresses[client % len(addresses)])

    async def op(conn: RemotingConn, _client: int, _seq: int) -> bool:
        response = await conn.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, ext)
        if response.code != ResponseCode.SUCCESS:
            workload.refusals[f"{response.code} {(response.remark or '')[:40]}"] += 1
        return response.code == ResponseCode.SUCCESS

    workload = Workload(open_conn, op)
    return workload


async def reads_rmqc(suite: Suite) -> dict[str, Any]:
    cluster = RmqcCluster(suite.work_dir("reads_rmqc"), 3)
    await cluster.start()
    leader = await cluster.leader_id()
    follower = next(node for node in cluster.ids if node != leader)
    await prepare_read_group(cluster, leader)
    single: dict[str, Any] = {}
    for level in LEVELS:
        for role, node in (("leader", leader), ("follower", follower)):
            label = f"rmqc 1004 {level} on {role}"
            single[f"{level}/{role}"] = (await load_points(
                suite, label, rmqc_read_workload([cluster.address(node)], level), [1]))[0]
    many = suite.profile.many_read_clients
    spread = {}
    for where, nodes in (("all nodes", cluster.ids), ("leader only", [leader])):
        spec = WorkloadSpec("bench._scn_reads:rmqc_read_workload",
                            {"addresses": [cluster.address(node) for node in nodes], "level": "linearizable"})
        spread[where] = await spread_point(suite, f"rmqc 1004 linearizable, {where}", spec, many,
                                           suite.work_dir("reads_rmqc"), cluster.procs)
    cluster.stop()
    ratio, bound = _ratios(spread)
    return {"conditions": suite.base_conditions(system="rmqc", nodes=3, fsync=suite.fsync,
                                                request="1004 GET_REPLICA_INFO with extFields consistency",
                                                many_clients=many, read_generators=suite.profile.read_generators),
            "leader": leader, "single_client": single, "many_clients": spread, "all_over_leader": ratio,
            "all_over_leader_busiest_node_bound": bound}


def etcd_read_workload(addresses: list[str], serializable: bool) -> Workload[HttpConn]:
    """A range of one key; client i reads from addresses[i % len(addresses)]."""
    async def open_conn(client: int) -> HttpConn:
        return await HttpConn.open(addresses[client % len(addresses)])

    async def op(conn: HttpConn, _client: int, _seq: int) -> bool:
        return await _etcd.get(conn, "bench/read", serializable)

    return Workload(open_conn, op)


async def reads_etcd(suite: Suite) -> dict[str, Any]:
    if suite.skip_anchors:
        raise Skipped("anchors skipped (--no-anchors)")
    if _etcd.etcd_binary() is None:
        raise Skipped("etcd is not installed (apt-get install etcd-server etcd-client); anchor skipped")
    cluster = _etcd.EtcdCluster(suite.work_dir("reads_etcd"), 3)
    await cluster.start()
    leader = await cluster.leader()
    follower = next(name for name in cluster.names if name != leader)
    single: dict[str, Any] = {}
    for level, serializable in (("linearizable", False), ("serializable", True)):
        for role, name in (("leader", leader), ("follower", follower)):
            single[f"{level}/{role}"] = (await load_points(
                suite, f"etcd range {level} on {role}", etcd_read_workload([cluster.address(name)], serializable),
                [1]))[0]
    many = suite.profile.many_read_clients
    spread = {}
    for where, names in (("all nodes", cluster.names), ("leader only", [leader])):
        spec = WorkloadSpec("bench._scn_reads:etcd_read_workload",
                            {"addresses": [cluster.address(name) for name in names], "serializable": False})
        spread[where] = await spread_point(suite, f"etcd range linearizable, {where}", spec, many,
                                           suite.work_dir("reads_etcd"), cluster.procs)
    cluster.stop()
    ratio, bound = _ratios(spread)
    return {"conditions": suite.base_conditions(system=f"etcd {_etcd.etcd_version()}", nodes=3,
                                                request="HTTP/1.1 POST /v3/kv/range (serializable true/false)",
                                                many_clients=many, read_generators=suite.profile.read_generators),
            "leader": leader, "single_client": single, "many_clients": spread, "all_over_leader": ratio,
            "all_over_leader_busiest_node_bound": bound}


def _ratios(spread: dict[str, dict[str, Any]]) -> tuple[float, float]:
    """All nodes / leader only: measured, and projected with the busiest node at one core in each."""
    every, leader = spread["all nodes"], spread["leader only"]
    measured = _ratio(every["ops_per_s"], leader["ops_per_s"])
    bound = _ratio(every["busiest_node_bound_ops_per_s"] or 0.0, leader["busiest_node_bound_ops_per_s"] or 0.0)
    say(f"   all nodes / leader only: {measured:.2f}x measured; {bound:.2f}x with the busiest node at one core")
    return measured, bound


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else 0.0
