"""More of the Java controller beside rmqc in one run (see _scn_java): every broker group's master
lost at once, and reads on every node (which node answers what, and the rate a leader and a
follower sustain). One system at a time, rmqc first, as in _scn_java."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import trio

from rmqc.remoting import FrameDecoder, RequestCode, ResponseCode, dumps_fastjson

from ._heartbeats import Broker, heartbeat_chunks, send_rounds
from ._java import MODES, Controllers
from ._load import RemotingConn
from ._scn_java import SYSTEMS, conditions, describe, measured_point, start_system
from ._scn_reads import LEVELS, READ_GROUP, prepare_read_group, rmqc_read_workload
from ._scn_scale import (
    HEARTBEAT_CONNECTIONS_PER_NODE,
    NotificationSink,
    elect_group,
    failover_figures,
    for_each_group,
    group_brokers,
    register_group,
)
from ._stats import fmt, summarise_ms
from ._suite import Suite, say

# Groups of 3 brokers whose masters are all lost at once, per profile.
MASS_GROUPS = {"tiny": 5, "quick": 100, "full": 1_000}
HEARTBEAT_INTERVAL_S = 1.0  # the Java broker's brokerHeartbeatInterval
# From the masters' loss until every group's replicas hold a new master; a system that is not done
# by then is reported unfinished (groups done, and the bound as a lower limit of its time).
MASS_FAILOVER_BOUND_S = 120.0
# Until every replica that will be measured got a 1008 of the setup's elections: a failover
# measured while those still queue would measure the queue.
SETUP_NOTIFIED_BOUND_S = 120.0
READ_CLIENTS = 16
MEASURED_ROLES = ("leader", "follower 1")  # the nodes the read throughput is measured on
READ_REQUESTS = {"1004": RequestCode.CONTROLLER_GET_REPLICA_INFO,
                 "1006": RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                 "1005": RequestCode.CONTROLLER_GET_METADATA_INFO}
REMARK_CHARS = 120


class CountingSink(NotificationSink):
    """A NotificationSink that also counts every 1008 each address received (the setup's too)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: dict[str, int] = {}

    async def _read(self, address: str, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                for command in decoder.feed(data):
                    if command.code != RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
                        continue
                    self.received[address] = self.received.get(address, 0) + 1
                    if int(command.ext("masterEpoch") or 0) > 1:
                        self.first_at.setdefault(address, time.perf_counter())


async def java_mass_failover(suite: Suite) -> dict[str, Any]:
    """MASS_GROUPS groups of 3 brokers heartbeating every node once a second (as a Java broker does,
    each master on its own connection per node), elected with the set {1,2,3}; then every master's
    connections closed at once -> until both other replicas of every group got a 1008 of the new
    master."""
    count = MASS_GROUPS[suite.profile.name]
    results: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    for system in SYSTEMS:
        cluster = await start_system(suite, "java_mass_failover", system)
        systems[system] = describe(cluster)
        say(f"   {system}:")
        try:
            results[system] = await mass_failover(cluster, count)
        finally:
            cluster.stop()
    return {"conditions": conditions(suite, systems, groups=count, brokers_per_group=3, masters_lost_at_once=count,
                                     heartbeat_interval_ms=int(HEARTBEAT_INTERVAL_S * 1000),
                                     heartbeats="every broker to every node (pre-encoded frames); each master "
                                                "on its own connection per node",
                                     loss="every master's connections closed at once (crashed brokers)",
                                     bound_s=MASS_FAILOVER_BOUND_S),
            "results": results, "ratios": mass_ratios(results)}


@dataclass
class FleetConns:
    """The fleet's heartbeat connections: each master's own, one per node (closing them is the
    masters' loss), and the other replicas' shared ones."""

    masters: list[RemotingConn] = field(default_factory=list)
    others: list[RemotingConn] = field(default_factory=list)

    async def aclose(self) -> None:
        for conn in self.masters + self.others:
            await conn.aclose()  # a second close of a master's connection does nothing


async def mass_failover(cluster: Controllers, count: int) -> dict[str, Any]:
    sink = CountingSink()
    addresses = await sink.open(2 * count)
    groups = [group_brokers(g, addresses[2 * g:2 * g + 2]) for g in range(count)]
    conns = FleetConns()
    try:
        async with trio.open_nursery() as nursery:
            await sink.serve(nursery)
            figures, ready = await mass_setup(nursery, cluster, groups, sink, addresses, conns)
            t0 = time.perf_counter()
            for conn in conns.masters:
                await conn.aclose()
            with trio.move_on_after(MASS_FAILOVER_BOUND_S):
                while len(sink.first_at) < 2 * len(ready):
                    await trio.sleep(0.005)
            figures["failover"] = failover_figures(sink, addresses, t0, ready)
            figures["failover"].update(per_group_figures(sink, addresses, t0, ready))
            nursery.cancel_scope.cancel()
    finally:
        await conns.aclose()
        for listener in sink.listeners.values():
            await listener.aclose()
    return figures


async def mass_setup(nursery: trio.Nursery, cluster: Controllers, groups: list[list[Broker]], sink: CountingSink,
                     addresses: list[str], conns: FleetConns) -> tuple[dict[str, Any], list[int]]:
    """Registered, heartbeating, elected with the set {1,2,3}, the elections' 1008s arrived: the
    setup's figures and the indexes of the groups set up in full."""
    started = time.perf_counter()
    refused = await for_each_group(cluster, groups, register_group)
    await heartbeat_fleet(nursery, cluster, groups, conns)
    refused |= await for_each_group(cluster, groups, elect_group)
    setup_s = round(time.perf_counter() - started, 1)
    ready = [g for g, group in enumerate(groups) if group[0].name not in refused]
    notified_s = await setup_notified(sink, [a for g in ready for a in addresses[2 * g:2 * g + 2]])
    say(f"   {len(groups):,} groups x 3 brokers registered and elected in {setup_s} s ({len(refused)} refused "
        f"to the end and left out); the setup's 1008s arrived within {fmt(notified_s)} s more")
    return {"setup_s": setup_s, "setup_refused_groups": len(refused), "setup_notified_s": notified_s}, ready


async def heartbeat_fleet(nursery: trio.Nursery, cluster: Controllers, groups: list[list[Broker]],
                          conns: FleetConns) -> None:
    """Heartbeats of every broker to every node, once a second, on `conns`; the masters' on a
    connection of their own per node (the controllers tie a broker's liveness to the channel its
    heartbeats arrive on)."""
    for group in groups:
        for node in cluster.ids:
            conns.masters.append(conn := await RemotingConn.open(cluster.address(node)))
            nursery.start_soon(send_rounds, conn, heartbeat_chunks([group[0]]), HEARTBEAT_INTERVAL_S)
    others = [b for group in groups for b in group[1:]]
    for node in cluster.ids:
        for share in range(HEARTBEAT_CONNECTIONS_PER_NODE):
            conns.others.append(conn := await RemotingConn.open(cluster.address(node)))
            chunks = heartbeat_chunks(others[share::HEARTBEAT_CONNECTIONS_PER_NODE])
            nursery.start_soon(send_rounds, conn, chunks, HEARTBEAT_INTERVAL_S)


async def setup_notified(sink: CountingSink, addresses: list[str]) -> float | None:
    """Seconds until each of `addresses` got a 1008 of the setup's elections; None past the bound
    (then the failover figures may include the queue's tail)."""
    started = time.perf_counter()
    with trio.move_on_after(SETUP_NOTIFIED_BOUND_S):
        while any(sink.received.get(a, 0) == 0 for a in addresses):
            await trio.sleep(0.1)
        return round(time.perf_counter() - started, 1)
    return None


def per_group_figures(sink: NotificationSink, addresses: list[str], t0: float, ready: list[int]) -> dict[str, Any]:
    """Each group's time until both other replicas got the new master's 1008: p50/p99 over the
    groups done, how many were not done within the bound."""
    done_ms = []
    for g in ready:
        times = [sink.first_at.get(a) for a in addresses[2 * g:2 * g + 2]]
        if None not in times:
            done_ms.append((max(t for t in times if t is not None) - t0) * 1000)
    summary = summarise_ms(done_ms)
    unfinished = len(ready) - len(done_ms)
    say(f"   per group: p50 {fmt(summary['p50_ms'])} ms, p99 {fmt(summary['p99_ms'])} ms; "
        + (f"{unfinished} groups not done within {MASS_FAILOVER_BOUND_S:.0f} s" if unfinished else "every group done"))
    return {"per_group": summary, "unfinished_groups": unfinished, "finished": unfinished == 0 and bool(ready)}


def mass_ratios(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per Java mode: its time to the last group over rmqc's; a mode that did not finish gets the
    bound as its time, so its ratio is a lower limit (`at_least`); none for a mode whose setup
    left no group to lose (every group refused)."""
    ours = results.get("rmqc", {}).get("failover", {}).get("all_notified_ms")
    ratios: dict[str, Any] = {}
    for mode in (m for m in MODES if m in results):
        failover = results[mode]["failover"]
        theirs = failover["all_notified_ms"] if failover["finished"] else MASS_FAILOVER_BOUND_S * 1000
        ratios[mode] = {"java_over_rmqc": round(theirs / ours, 2) if ours and failover["masters_lost"] else None,
                        "at_least": not failover["finished"]}
    return ratios


async def java_reads(suite: Suite) -> dict[str, Any]:
    """1004, 1006 and 1005 to the leader and to each follower (rmqc: at each consistency level):
    the answer each node gives; then 1004 from READ_CLIENTS clients to the leader and to a
    follower, with every node's CPU over the window (a node that refuses 1004 gets no point)."""
    answers: dict[str, dict[str, Any]] = {}
    points: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    for system in SYSTEMS:
        cluster = await start_system(suite, "java_reads", system)
        systems[system] = describe(cluster)
        try:
            leader = await cluster.leader_id()
            await prepare_read_group(cluster, leader)
            roles = node_roles(cluster.ids, leader)
            answers[system] = await read_answers(cluster, roles, LEVELS if system == "rmqc" else (None,))
            points[system] = await read_points(suite, cluster, system, roles, answers[system])
        finally:
            cluster.stop()
    return {"conditions": conditions(suite, systems, clients=READ_CLIENTS, group=READ_GROUP,
                                     requests="1004 GET_REPLICA_INFO, 1006 GET_SYNC_STATE_DATA (body [group]), "
                                              "1005 GET_CONTROLLER_METADATA; rmqc with extFields consistency",
                                     throughput_request="1004, consistency=linearizable (Java ignores the field)"),
            "answers": answers, "throughput": points, "ratios": read_ratios(points)}


def node_roles(ids: list[str], leader: str) -> dict[str, str]:
    followers = [node for node in ids if node != leader]
    return {"leader": leader, **{f"follower {i + 1}": node for i, node in enumerate(followers)}}


async def read_answers(cluster: Controllers, roles: dict[str, str], levels: tuple[str | None, ...]) -> dict[str, Any]:
    """{role: {"1004 linearizable": {"code", "remark"}, ...}}: one request of each kind to each node."""
    answers: dict[str, Any] = {}
    for role, node in roles.items():
        conn = await RemotingConn.open(cluster.address(node))
        try:
            for name, code in READ_REQUESTS.items():
                for level in levels:
                    ext = {"brokerName": READ_GROUP, **({"consistency": level} if level else {})}
                    body = dumps_fastjson([READ_GROUP]) if code == RequestCode.CONTROLLER_GET_SYNC_STATE_DATA else None
                    response = await conn.call(code, ext, body)
                    key = f"{name} {level}" if level else name
                    answers.setdefault(role, {})[key] = {"code": response.code,
                                                         "remark": (response.remark or "")[:REMARK_CHARS]}
        finally:
            await conn.aclose()
        say(f"   {role:<11} {node}: " + ", ".join(f"{k} -> {a['code']}" for k, a in answers[role].items()))
    return answers


async def read_points(suite: Suite, cluster: Controllers, system: str, roles: dict[str, str],
                      answers: dict[str, Any]) -> dict[str, Any]:
    points: dict[str, Any] = {}
    for role in (r for r in MEASURED_ROLES if r in roles):  # a 1-node cluster has no follower
        answer = answers[role].get("1004 linearizable") or answers[role]["1004"]
        if answer["code"] != ResponseCode.SUCCESS:
            points[role] = {"refused": answer}
            say(f"   {system:<8} {role}: 1004 refused ({answer['code']} {answer['remark'][:60]}), no point")
            continue
        workload = rmqc_read_workload([cluster.address(roles[role])], "linearizable")
        points[role] = await measured_point(suite, f"{system} 1004 on {role}", workload, READ_CLIENTS, cluster.procs)
    return points


def read_ratios(points: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """rmqc's reads/s over each Java mode's, on the leader and on a follower (None where Java refuses)."""
    ratios: dict[str, Any] = {}
    for mode in (m for m in MODES if m in points):
        for role, ours in points.get("rmqc", {}).items():
            theirs = points[mode].get(role, {}).get("ops_per_s")
            mine = ours.get("ops_per_s")
            ratios.setdefault(mode, {})[role] = round(mine / theirs, 2) if mine and theirs else None
    return ratios
