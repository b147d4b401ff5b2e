"""Apache RocketMQ's Java controller (DLedger and JRaft modes) beside a 3-node rmqc, in one run,
driven by the same load generators over the same remoting wire: broker registration writes with
the CPU each write costs, heartbeat ingestion, the controller leader killed. One system runs at a
time (the machine's cores are shared), rmqc first, so the ratios compare systems under the same
load on the same machine within minutes of each other."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import trio

from rmqc.brokersim import BrokerFleet
from rmqc.launcher import Process, ProcessFailed

from ._heartbeats import Broker
from ._java import MODES, Controllers, JavaCluster, cpu_of
from ._load import LoadError, LoadResult, RemotingConn, Workload, closed_loop
from ._points import point_summary
from ._rmqc import CLUSTER, RmqcCluster
from ._scn_brokers import blast_heartbeats, failover_rounds, sim_timing
from ._scn_cluster import first_write_after
from ._scn_writes import rmqc_write_workload, write_request_bytes
from ._stats import fmt, summarise_ms
from ._suite import Skipped, Suite, say

SYSTEMS = ("rmqc", *MODES)
FLEETS = (1_000, 10_000)  # simulated brokers sending heartbeats
CONNECTIONS_PER_NODE = 2
LIVE_GROUPS = 3  # groups of simulated brokers that must keep their masters through a heartbeat blast
# Leader kills per system: a Java node restarts as a JVM (seconds), so fewer than rmqc's own scenario.
KILLS = {"tiny": 1, "quick": 3, "full": 30}
# Broker masters closed per system (each: 1008 to the others, then the broker restarted and the
# fleet converged again): the 30 the comparison asks for, except in the smoke test's profile.
MASTER_KILLS = {"tiny": 1, "quick": 30, "full": 30}
# Broker masters hung per system after the kills (heartbeats stop, connections stay open; measured
# from the controllers' heartbeat deadline): as many as the kills in --full.
MASTER_HANGS = {"tiny": 1, "quick": 5, "full": 30}


async def start_system(suite: Suite, scenario: str, system: str) -> RmqcCluster | JavaCluster:
    work = suite.work_dir(scenario) / system
    try:
        cluster: RmqcCluster | JavaCluster = RmqcCluster(work, 3) if system == "rmqc" else JavaCluster(work, system)
    except ProcessFailed as error:  # the jars are not built here
        raise Skipped(f"the Java controller cannot start: {error}") from error
    await cluster.start()
    return cluster


def describe(cluster: RmqcCluster | JavaCluster) -> str:
    if isinstance(cluster, JavaCluster):
        return f"{cluster.system} (JVM {cluster.jvm_flags()})"
    return "rmqc (fsync on, LMDB)"


def conditions(suite: Suite, clusters: Mapping[str, str], **fields: Any) -> dict[str, Any]:
    return suite.base_conditions(nodes=3, systems=dict(clusters), order="one system at a time, rmqc first",
                                 **fields)


async def measured_point(suite: Suite, label: str, workload: Workload[Any], clients: int,
                         procs: Mapping[str, Process]) -> dict[str, Any]:
    """One closed-loop point, with the CPU every server process used inside its measured window
    (read at the window's start and end): cores busy per node, CPU microseconds per accepted op of
    all nodes summed."""
    window: dict[str, tuple[float, dict[str, float]]] = {}
    harness: dict[str, float] = {}
    outcome: list[LoadResult] = []

    async def sample_window() -> None:
        await trio.sleep(suite.profile.warmup_s)
        window["start"] = (time.perf_counter(), cpu_of(procs))
        harness["start"] = time.process_time()
        await trio.sleep(suite.profile.seconds)
        window["end"] = (time.perf_counter(), cpu_of(procs))
        harness["end"] = time.process_time()

    async def load() -> None:
        outcome.append(await closed_loop(workload, clients, suite.profile.seconds, suite.profile.warmup_s))

    workload.refusals.clear()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample_window)
        nursery.start_soon(load)
    point = point_summary(label, outcome[0], workload.refusals)
    point.update(cpu_figures(window["start"], window["end"], outcome[0].ops))
    # the load generator runs in this process: near 1 core, it (not the system) may be the limit
    point["generator_cpu_cores"] = round((harness["end"] - harness["start"]) / suite.profile.seconds, 3)
    say(f"   {'':<34} CPU: {point['cpu_us_per_op']} us per accepted op (nodes summed), cores per node "
        f"{point['cpu_cores_per_node']}, load generator {point['generator_cpu_cores']} cores")
    return point


def cpu_figures(start: tuple[float, dict[str, float]], end: tuple[float, dict[str, float]],
                ops: int) -> dict[str, Any]:
    seconds = end[0] - start[0]
    used = {node: end[1].get(node, 0.0) - start[1][node] for node in start[1]}
    return {"cpu_cores_per_node": {node: round(s / seconds, 3) for node, s in used.items()},
            "cpu_us_per_op": round(sum(used.values()) / ops * 1e6, 1) if ops else None}


async def java_writes(suite: Suite) -> dict[str, Any]:
    """1013 (APPLY_BROKER_ID of a fresh id: one log entry) to the leader at each client count."""
    points: dict[str, list[dict[str, Any]]] = {}
    systems: dict[str, str] = {}
    for system in SYSTEMS:
        cluster = await start_system(suite, "java_writes", system)
        systems[system] = describe(cluster)
        try:
            leader = await cluster.leader_id()
            workload = rmqc_write_workload(cluster, leader)
            points[system] = [await measured_point(suite, f"{system} 1013", workload, clients, cluster.procs)
                              for clients in suite.profile.write_clients]
        finally:
            cluster.stop()
    return {"conditions": conditions(suite, systems, payload_bytes=write_request_bytes(), target="leader",
                                     request="1013 APPLY_BROKER_ID of a fresh id (one log entry each)"),
            "points_by_system": points, "ratios": write_ratios(points)}


def write_ratios(points: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per Java mode and client count: rmqc's throughput over Java's, Java's CPU per write over rmqc's."""
    ratios: dict[str, dict[str, Any]] = {}
    for mode in (m for m in MODES if m in points):
        for ours, theirs in zip(points["rmqc"], points[mode], strict=True):
            ratios.setdefault(mode, {})[str(ours["clients"])] = {
                "throughput_rmqc_over_java": _ratio(ours["ops_per_s"], theirs["ops_per_s"]),
                "cpu_per_op_java_over_rmqc": _ratio(theirs["cpu_us_per_op"], ours["cpu_us_per_op"])}
    return ratios


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return round(top / bottom, 2) if top and bottom else None


async def java_heartbeats(suite: Suite) -> dict[str, Any]:
    """One-way 904s of FLEETS simulated brokers, pre-encoded, sent as fast as each controller takes
    them over 2 connections per node; a two-way 904 on each connection marks the drain."""
    figures: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    for system in SYSTEMS:
        cluster = await start_system(suite, "java_heartbeats", system)
        systems[system] = describe(cluster)
        try:
            figures[system] = {str(size): await heartbeat_point(suite, cluster, system, size) for size in FLEETS}
        finally:
            cluster.stop()
    ratios = {mode: {size: _ratio(figures["rmqc"][size]["heartbeats_per_s"], figures[mode][size]["heartbeats_per_s"])
                     for size in figures["rmqc"]} for mode in MODES if mode in figures}
    return {"conditions": conditions(suite, systems, connections_per_node=CONNECTIONS_PER_NODE,
                                     seconds=suite.profile.heartbeat_s,
                                     request="904 one-way, pre-encoded, as fast as TCP accepts"),
            "figures": figures, "ratios_rmqc_over_java": ratios}


async def heartbeat_point(suite: Suite, cluster: Controllers, system: str, size: int) -> dict[str, Any]:
    """The blast beside a few live groups of simulated brokers (heartbeat timeout 1 s): a group whose
    master changed during the blast was failed over by mistake (its master never stopped)."""
    brokers = [Broker(CLUSTER, f"hb-{i // 3:05d}", i % 3 + 1, f"10.1.{i // 250 % 250}.{i % 250}:10911")
               for i in range(size)]
    addresses = [cluster.address(node) for node in cluster.ids]
    conns = [await RemotingConn.open(address) for address in addresses for _ in range(CONNECTIONS_PER_NODE)]
    async with BrokerFleet(addresses, groups=LIVE_GROUPS, replicas=3, timing=sim_timing(), seed=size, first_group=size,
                           state_dir=suite.work_dir("java_heartbeats") / system / f"live-{size}") as fleet:
        await fleet.wait_converged(120, full_sync_state_sets=True)
        masters = masters_of(fleet)
        before = cpu_of(cluster.procs)
        try:
            outcome = await guarded_blast(conns, brokers, suite.profile.heartbeat_s)
        finally:
            for conn in conns:
                await conn.aclose()
        if isinstance(outcome, str):
            return blast_refused(cluster, system, size, outcome)
        sent, elapsed = outcome
        after = cpu_of(cluster.procs)
        moved = sorted(name for name, master in masters_of(fleet).items() if master != masters[name])
    cpu = sum(after[node] - before[node] for node in before)
    rss = {node: proc.rss_mb() for node, proc in cluster.procs.items()}
    figure: dict[str, Any] = {
              "heartbeats_per_s": round(sent / elapsed, 1), "sent": sent, "elapsed_s": round(elapsed, 2),
              "cpu_us_per_heartbeat": round(cpu / sent * 1e6, 2) if sent else None,
              "cpu_cores_nodes_summed": round(cpu / elapsed, 2),
              "rss_mb": {node: round(mb, 1) if mb is not None else None for node, mb in rss.items()},
              "live_groups": LIVE_GROUPS, "live_masters_failed_over": moved}
    say(f"   {system:<8} {size:>6,} brokers: {fmt(figure['heartbeats_per_s'], 0)} heartbeats/s, "
        f"{figure['cpu_us_per_heartbeat']} us CPU each (nodes summed), RSS MB {figure['rss_mb']}, "
        f"live masters failed over by mistake: {moved or 'none'} of {LIVE_GROUPS} groups")
    return figure


async def guarded_blast(conns: list[RemotingConn], brokers: list[Broker], seconds: float) -> tuple[int, float] | str:
    """blast_heartbeats' (sent, seconds), or why a controller closed a blasting connection or refused
    the drain mark (RuntimeError: the JRaft controller answers 2, system busy, flow control)."""
    try:
        return await blast_heartbeats(conns, brokers, seconds)
    except* (trio.BrokenResourceError, LoadError, RuntimeError) as group:
        failure = str(group.exceptions[0])
    return failure


def blast_refused(cluster: Controllers, system: str, size: int, failure: str) -> dict[str, Any]:
    """A controller that gave up under the blast (Java DLedger closed connections when its Netty direct
    memory, -XX:MaxDirectMemorySize, filled; JRaft refuses with "system busy"): reported, not a crash."""
    alive = {node: proc.alive for node, proc in cluster.procs.items()}
    say(f"   {system:<8} {size:>6,} brokers: the controller gave up mid-blast ({failure}); "
        f"nodes alive {alive}")
    return {"heartbeats_per_s": None, "gave_up_mid_blast": failure, "nodes_alive": alive}


def masters_of(fleet: BrokerFleet) -> dict[str, tuple[int | None, int]]:
    """Each group's serving master and its epoch, as the master itself believes."""
    beliefs = {}
    for name in fleet.group_names:
        master = fleet.master_of(name)
        beliefs[name] = (master, fleet.broker(name, master).master_epoch if master is not None else -1)
    return beliefs


async def java_leader_kill(suite: Suite) -> dict[str, Any]:
    """SIGKILL of the controller leader, then 1013 to both survivors every ~2 ms until one is
    accepted; the killed node is started again before the next kill."""
    kills = KILLS[suite.profile.name]
    results: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    for system in SYSTEMS:
        cluster = await start_system(suite, "java_leader_kill", system)
        systems[system] = describe(cluster)
        try:
            samples = await kill_leaders(cluster, system, kills)
        finally:
            cluster.stop()
        results[system] = {"summary": summarise_ms(samples), "samples_ms": [round(s, 1) for s in samples]}
    return {"conditions": conditions(suite, systems, kills=kills, signal="SIGKILL",
                                     probe="1013 to both survivors every ~2 ms (rmqc's leader_kill probe)"),
            "results": results}


async def kill_leaders(cluster: Controllers, system: str, kills: int) -> list[float]:
    samples_ms = []
    for kill in range(kills):
        leader = await cluster.leader_id(60.0)
        survivors = [node for node in cluster.ids if node != leader]
        t0 = time.perf_counter()
        cluster.procs[leader].kill()
        samples_ms.append(await first_write_after(cluster, survivors, t0, []) * 1000)
        say(f"   {system:<8} kill {kill + 1:>2}: leader {leader} -> write accepted after {samples_ms[-1]:.0f} ms")
        await cluster.restart(leader)
    return samples_ms



async def java_broker_failover(suite: Suite) -> dict[str, Any]:
    """A simulated fleet (rmqc.brokersim, Java broker timings, 1004 polled every 5 s) against each
    controller; a master's connections closed (then a master hung: its heartbeats stop, its connections
    stay open), until every other replica of its group holds the new master epoch: sub-second only
    through the 1008 the controller leader sends."""
    kills, hangs = MASTER_KILLS[suite.profile.name], MASTER_HANGS[suite.profile.name]
    results: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    for system in SYSTEMS:
        cluster = await start_system(suite, "java_broker_failover", system)
        systems[system] = describe(cluster)
        say(f"   {system}:")
        try:
            results[system] = await failover_rounds(suite, [cluster.address(node) for node in cluster.ids],
                                                    suite.work_dir("java_broker_failover") / system / "brokers",
                                                    kills, hangs)
        finally:
            cluster.stop()
    timing = sim_timing()
    return {"conditions": conditions(suite, systems, groups=suite.profile.fleet_groups, replicas=3, kills=kills,
                                     hangs=hangs, hang="in-process hang of rmqc.brokersim (heartbeats and reads "
                                                       "stop, connections stay open), timed from the deadline",
                                     broker_timing=f"heartbeat every {timing.heartbeat_interval_ms} ms, timeout "
                                                   f"{timing.heartbeat_timeout_ms} ms, 1004 poll "
                                                   f"{timing.poll_interval_ms} ms"),
            "results": results}
