"""rmqc as NameServer beside Apache RocketMQ's Java NameServer, one run, the same load generators
over the same remoting wire, one system at a time (rmqc first):

- namesrv_lookups: 105 route lookups of a topic on a few brokers (registered with 103 first), at 1
  client (in this process) and many (generator processes), on the rmqc leader and a follower at
  each consistency level, and on the Java NameServer (always local); latency, throughput and the
  CPU every server process used per lookup.
- namesrv_registrations: a fleet of brokers re-registering (103, an unchanged topic table) every
  period, sent by bench._regworker processes to every NameServer address as brokers do; the log
  entries rmqc writes meanwhile (its commit index before and after: must not move), RSS and CPU
  per process, and a route lookup's latency under that load."""

from __future__ import annotations

import collections
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import trio
from prometheus_client.parser import text_string_to_metric_families

from rmqc.javapeers import RocketMQ
from rmqc.launcher import Process, ProcessFailed, cpu_s, free_ports, stop_processes
from rmqc.remoting import RequestCode, ResponseCode

from ._generators import READY_TIMEOUT_S, REPO
from ._java import BENCH_JVM_FLAGS, ROCKETMQ_VERSION, cpu_of
from ._load import RemotingConn, Workload, closed_loop, split_address
from ._loadworker import GO_SIGNAL, READY_LINE, WorkloadSpec
from ._namesrv_fleet import BROKERS_PER_TOPIC, ROCKETMQ_5_5_0, registration, topic_of
from ._points import point_summary, spread_point
from ._regworker import DRAIN_S, Plan
from ._rmqc import RmqcCluster
from ._scn_java import measured_point
from ._scn_reads import LEVELS
from ._stats import fmt
from ._suite import Skipped, Suite, say

ROUTE_BROKERS = 4  # brokers the looked-up topic is on (one set of BROKERS_PER_TOPIC)
ROUTE_TOPICS = 100  # each broker's topic table
LOOKUP_TOPIC = topic_of(0, 0)
LOOKUP_CLIENTS = {"tiny": (1, 4), "quick": (1, 64), "full": (1, 64)}
# The Java NameServer's heap: the launcher's 256 MB is sized for tests, a fleet of 10,000 brokers
# with their topics needs more (runserver.sh gives it 4 GB; RSS is reported whatever the heap).
NAMESRV_JVM_FLAGS = (*(flag for flag in BENCH_JVM_FLAGS if not flag.startswith("-Xmx")), "-Xmx1g")
ROUTE_READY_S = 30.0
METRICS_TIMEOUT_S = 5.0
# rmqc refreshes its gauges (the commit index among them) about once a second; a bit more than that
GAUGE_REFRESH_S = 1.2


# (brokers, re-registration period s, measured window s, generator processes) per profile: the full
# figure is 10,000 brokers every 30 s (a broker's registerBrokerAll interval) over a minute; --quick a
# thousand brokers over 20 s
FLEETS = {"tiny": (24, 2.0, 2.0, 1), "quick": (1_000, 30.0, 20.0, 1), "full": (10_000, 30.0, 60.0, 2)}
FLEET_TOPICS = 100
# Registrations are accepted and applied on every node before the window opens (the first round
# writes one entry per broker); a generator whose sends left later than this behind schedule did
# not produce the load the figure claims (the run is marked not valid).
SETTLE_S = 3.0
MAX_LAG_S = 1.0
# A generator's last answers drained (DRAIN_S), it writes its tally and exits within this.
WORKER_EXIT_S = 30.0


class NamesrvSystem:
    """The NameServer under test: rmqc's 3 nodes (`roles`: leader, follower) or the Java JVM."""

    def __init__(self, name: str, procs: dict[str, Process], addresses: list[str], roles: dict[str, str],
                 describe: str, metrics: dict[str, str] | None = None) -> None:
        self.name = name
        self.procs = procs
        self.addresses = addresses
        self.roles = roles  # role -> address
        self.describe = describe
        self.metrics = metrics or {}  # node -> host:port of its Prometheus endpoint

    def rss_mb(self) -> dict[str, float | None]:
        return {node: round(mb, 1) if (mb := proc.rss_mb()) is not None else None for node, proc in self.procs.items()}


async def start_rmqc(suite: Suite, scenario: str) -> tuple[RmqcCluster, NamesrvSystem]:
    cluster = RmqcCluster(suite.work_dir(scenario), 3)
    # free_ports releases what it finds: the serve ports just chosen may come back, so leave them out
    taken = {split_address(address)[1] for address in cluster.addresses}
    ports = [port for port in free_ports(2 * len(cluster.nodes)) if port not in taken][:len(cluster.nodes)]
    for node, port in zip(cluster.nodes, ports, strict=True):
        node.metrics_port = port  # read for the commit index
    await cluster.start()
    leader = await cluster.leader_id()
    follower = next(node for node in cluster.ids if node != leader)
    system = NamesrvSystem("rmqc", cluster.procs, cluster.addresses,
                           {"leader": cluster.address(leader), "follower": cluster.address(follower)},
                           "rmqc (fsync on, LMDB)",
                           {node.node_id: f"127.0.0.1:{port}" for node, port in zip(cluster.nodes, ports, strict=True)})
    return cluster, system


async def start_java(suite: Suite, scenario: str) -> tuple[RocketMQ, NamesrvSystem]:
    try:
        rocketmq = RocketMQ(suite.work_dir(scenario) / "java")
    except ProcessFailed as error:  # the jars are not built here
        raise Skipped(f"the Java NameServer cannot start: {error}") from error
    rocketmq.jvm_flags = NAMESRV_JVM_FLAGS
    namesrv = await rocketmq.start_namesrv()
    assert namesrv.process is not None
    return rocketmq, NamesrvSystem("java", {"namesrv": namesrv.process}, [namesrv.address],
                                   {"local": namesrv.address},
                                   f"Apache RocketMQ {ROCKETMQ_VERSION} NameServer (JVM {' '.join(NAMESRV_JVM_FLAGS)})")


def lookup_workload(addresses: list[str], level: str | None, topic: str = LOOKUP_TOPIC) -> Workload[RemotingConn]:
    """105 of `topic` as a 5.5.0 client asks (answered in standard JSON); `level` the rmqc
    consistency extField, None for the Java NameServer; client i asks addresses[i % len]."""
    ext: dict[str, object] = {"topic": topic}
    if level is not None:
        ext["consistency"] = level

    async def open_conn(client: int) -> RemotingConn:
        return await RemotingConn.open(addresses[client % len(addresses)])

    async def op(conn: RemotingConn, _client: int, _seq: int) -> bool:
        answer = await conn.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=ROCKETMQ_5_5_0)
        return answer.code == ResponseCode.SUCCESS

    return Workload(open_conn, op)


async def register_route_brokers(addresses: list[str]) -> list[RemotingConn]:
    """ROUTE_BROKERS brokers register with every address, as brokers do; the connections are kept
    open (a NameServer forgets a broker whose connection closes) and returned for the caller to close."""
    conns = [await RemotingConn.open(address) for address in addresses]
    for broker in range(ROUTE_BROKERS):
        ext, body = registration(broker, ROUTE_TOPICS)
        for conn in conns:
            answer = await conn.call(RequestCode.REGISTER_BROKER, ext, body, version=ROCKETMQ_5_5_0)
            if answer.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"103 of broker {broker} to {conn.address}: {answer.code} {answer.remark}")
    return conns


async def wait_route(address: str, level: str | None, timeout_s: float = ROUTE_READY_S) -> None:
    """Until `address` answers the lookup (a follower applies the registrations a moment later)."""
    workload = lookup_workload([address], level)
    conn = await workload.open(0)
    try:
        with trio.fail_after(timeout_s):
            while not await workload.op(conn, 0, 0):
                await trio.sleep(0.05)
    finally:
        await conn.aclose()


async def lookup_points(suite: Suite, system: NamesrvSystem, role: str, level: str | None) -> dict[str, Any]:
    """The lookup at each client count of the profile: 1 client in this process, more in the
    profile's generator processes; every point with the CPU per lookup of the server processes summed."""
    address = system.roles[role]
    await wait_route(address, level)
    label = f"{system.name} 105 {level or 'local'} on {role}"
    points = {}
    for clients in LOOKUP_CLIENTS[suite.profile.name]:
        if clients == 1:
            point = await measured_point(suite, label, lookup_workload([address], level), 1, system.procs)
            point["cpu_us_per_lookup"] = point["cpu_us_per_op"]
        else:
            spec = WorkloadSpec("bench._scn_namesrv:lookup_workload", {"addresses": [address], "level": level})
            point = await spread_point(suite, label, spec, clients, suite.work_dir("namesrv_lookups") / system.name,
                                       system.procs)
            point["cpu_us_per_lookup"] = point["cpu_us_per_op"]["nodes"]
        points[str(clients)] = point
    return points


async def namesrv_lookups(suite: Suite) -> dict[str, Any]:
    figures: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    cluster, rmqc = await start_rmqc(suite, "namesrv_lookups")
    systems["rmqc"] = rmqc.describe
    try:
        conns = await register_route_brokers(rmqc.addresses)
        figures["rmqc"] = {f"{level}/{role}": await lookup_points(suite, rmqc, role, level)
                           for level in LEVELS for role in ("leader", "follower")}
        for conn in conns:
            await conn.aclose()
    finally:
        cluster.stop()
    rocketmq, java = await start_java(suite, "namesrv_lookups")
    systems["java"] = java.describe
    try:
        conns = await register_route_brokers(java.addresses)
        figures["java"] = {"local": await lookup_points(suite, java, "local", None)}
        for conn in conns:
            await conn.aclose()
    finally:
        rocketmq.close()
    return {"conditions": suite.base_conditions(
                systems=systems, order="one system at a time, rmqc first", nodes={"rmqc": 3, "java": 1},
                request=f"105 GET_ROUTEINFO_BY_TOPIC, standard JSON, a topic on {ROUTE_BROKERS} brokers "
                        f"({ROUTE_TOPICS} topics each, registered with 103 first)",
                clients=list(LOOKUP_CLIENTS[suite.profile.name]), generators=suite.profile.read_generators),
            "figures": figures, "ratios": lookup_ratios(figures)}


def lookup_ratios(figures: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rmqc level/role and client count: rmqc's throughput over Java's, rmqc's CPU per lookup over Java's."""
    java = figures.get("java", {}).get("local", {})
    ratios: dict[str, dict[str, Any]] = {}
    for key, points in figures.get("rmqc", {}).items():
        for clients, ours in points.items():
            theirs = java.get(clients)
            if theirs is None:
                continue
            ratios.setdefault(key, {})[clients] = {
                "throughput_rmqc_over_java": _ratio(ours["ops_per_s"], theirs["ops_per_s"]),
                "cpu_per_lookup_rmqc_over_java": _ratio(ours["cpu_us_per_lookup"], theirs["cpu_us_per_lookup"])}
    return ratios


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return round(top / bottom, 2) if top and bottom else None


# ---- namesrv_registrations ------------------------------------------------------------------------


async def namesrv_registrations(suite: Suite) -> dict[str, Any]:
    brokers, period_s, window_s, workers = FLEETS[suite.profile.name]
    figures: dict[str, dict[str, Any]] = {}
    systems: dict[str, str] = {}
    cluster, rmqc = await start_rmqc(suite, "namesrv_registrations")
    systems["rmqc"] = rmqc.describe
    try:
        figures["rmqc"] = await registration_window(suite, rmqc, FLEETS[suite.profile.name])
    finally:
        cluster.stop()
    rocketmq, java = await start_java(suite, "namesrv_registrations")
    systems["java"] = java.describe
    try:
        figures["java"] = await registration_window(suite, java, FLEETS[suite.profile.name])
    finally:
        rocketmq.close()
    return {"conditions": suite.base_conditions(
                systems=systems, order="one system at a time, rmqc first", nodes={"rmqc": 3, "java": 1},
                brokers=brokers, topics_per_broker=FLEET_TOPICS, brokers_per_topic=BROKERS_PER_TOPIC,
                period_s=period_s, window_s=window_s, generator_processes=workers, settle_s=SETTLE_S,
                max_lag_s=MAX_LAG_S,
                request="103 REGISTER_BROKER, unchanged DataVersion, pre-encoded, sent to every NameServer "
                        "address as a broker does; meanwhile 105 at 1 client on the leader"),
            "figures": figures}


async def registration_window(suite: Suite, system: NamesrvSystem,
                              fleet: tuple[int, float, float, int]) -> dict[str, Any]:
    """The fleet re-registering; after one whole period (every broker registered once) and SETTLE_S,
    a window of `window_s`: commit indexes over all of it, CPU over its first half, a 1-client
    lookup over its second half (so the lookups' CPU is not counted as the registrations')."""
    brokers, period_s, window_s, workers = fleet
    work = suite.work_dir("namesrv_registrations") / system.name
    plans = fleet_plans(system.addresses, brokers, period_s, period_s + SETTLE_S + window_s, workers, work)
    procs = [Process(f"regworker-{i}", [sys.executable, "-m", "bench._regworker", plan.to_json()],
                     work / f"regworker-{i}.log", err_path=work / f"regworker-{i}.err", cwd=REPO)
             for i, plan in enumerate(plans)]
    lookup_address = system.roles.get("leader") or system.roles["local"]
    level = "linearizable" if system.name == "rmqc" else None
    try:
        for proc in procs:
            await proc.wait_for_output(f"(?m)^{READY_LINE}$", READY_TIMEOUT_S + brokers / 1000)
        for proc in procs:
            proc.signal(GO_SIGNAL)
        went = time.perf_counter()
        await trio.sleep(period_s + SETTLE_S)
        settled = await commits_settled(system, period_s)
        # the first half: the registrations alone (their CPU); the second: a lookup client beside them
        before = await window_reading(system, procs)
        await trio.sleep(window_s / 2)
        middle = await window_reading(system, procs)
        lookups = await closed_loop(lookup_workload([lookup_address], level), 1, window_s / 2, 0.0)
        after = await window_reading(system, procs)
        for proc in procs:
            remaining = went + period_s + SETTLE_S + window_s + DRAIN_S + WORKER_EXIT_S - time.perf_counter()
            if (code := await proc.wait_exit(max(remaining, 1.0))) != 0:
                raise ProcessFailed(f"{proc.name} exited with {code}: {proc.tail()}")
    finally:
        stop_processes(procs)
    tallies = [orjson.loads(Path(plan.result_path).read_bytes()) for plan in plans]
    lookup = point_summary(f"{system.name} 105 during registrations", lookups, collections.Counter())
    figure = window_figures(system, fleet, plans, (before, middle, after), tallies, lookup)
    figure["first_round_settled"] = settled
    return figure


async def commits_settled(system: NamesrvSystem, bound_s: float) -> bool | None:
    """Until no node's commit index moves between two refreshes of its gauge (the fleet's first
    registrations all written), at most `bound_s`: False when it still moved then (the window's
    log entries then include the first round's), None for a NameServer without a log."""
    if not system.metrics:
        return None
    previous: dict[str, int] = {}
    with trio.move_on_after(bound_s):
        while True:
            current = {node: await trio.to_thread.run_sync(commit_index, address)
                       for node, address in system.metrics.items()}
            if current == previous:
                return True
            previous = current
            await trio.sleep(GAUGE_REFRESH_S)
    return False


def fleet_plans(addresses: list[str], brokers: int, period_s: float, duration_s: float, workers: int,
                work: Path) -> list[Plan]:
    """The fleet split into `workers` consecutive runs of brokers, as even as they go."""
    base, extra = divmod(brokers, workers)
    plans, first = [], 0
    for index in range(workers):
        count = base + (index < extra)
        plans.append(Plan(addresses, brokers, first, count, FLEET_TOPICS, period_s, duration_s,
                          str(work / f"regworker-{index}.json")))
        first += count
    return plans


async def window_reading(system: NamesrvSystem, workers: list[Process]) -> dict[str, Any]:
    """The moment, the CPU seconds of every server process and generator, and rmqc's commit indexes."""
    return {"t": time.perf_counter(), "cpu": cpu_of(system.procs),
            "generators": [cpu_s(proc.pid) or 0.0 for proc in workers],
            "commit": {node: await trio.to_thread.run_sync(commit_index, address)
                       for node, address in system.metrics.items()}}


def commit_index(metrics_address: str) -> int:
    """rmqc_raft_commit_index of a node's Prometheus endpoint (the node refreshes it every second)."""
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=METRICS_TIMEOUT_S) as answer:
        text = answer.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rmqc_raft_commit_index":
                return int(sample.value)
    raise ProcessFailed(f"{metrics_address}: no rmqc_raft_commit_index in /metrics")


def window_figures(system: NamesrvSystem, fleet: tuple[int, float, float, int], plans: list[Plan],
                   readings: tuple[dict[str, Any], dict[str, Any], dict[str, Any]], tallies: list[dict[str, Any]],
                   lookup: dict[str, Any]) -> dict[str, Any]:
    """Log entries over the whole window; CPU over its first half (registrations only)."""
    brokers, period_s, _window_s, _workers = fleet
    before, middle, after = readings
    seconds, cpu_s_window = after["t"] - before["t"], middle["t"] - before["t"]
    sent = sum(t["sent"] for t in tallies)
    answered = sum(t["answered"] for t in tallies)
    refused: collections.Counter[str] = sum((collections.Counter(t["refused"]) for t in tallies),
                                            collections.Counter())
    lag = max(t["max_lag_s"] for t in tallies)
    wanted_per_s = brokers * len(system.addresses) / period_s
    achieved_per_s = sent / plans[0].duration_s
    cpu = {node: middle["cpu"][node] - before["cpu"][node] for node in before["cpu"]}
    generators = [m - b for m, b in zip(middle["generators"], before["generators"], strict=True)]
    problems = [why for failed, why in (
        (lag > MAX_LAG_S, f"the generator fell {lag:.2f} s behind schedule (bound {MAX_LAG_S} s)"),
        (answered < sent, f"{sent - answered} of {sent} registrations unanswered"),
        # the fleet's topics must be routable meanwhile (a 103 body the server ignored leaves none)
        (lookup["errors"] > 0 or lookup["ops"] == 0, f"{lookup['errors']} route lookups failed, "
                                                      f"{lookup['ops']} answered")) if failed]
    figure: dict[str, Any] = {
        "valid": not problems, "problems": problems,
        "registrations_per_s": round(achieved_per_s, 1), "wanted_per_s": round(wanted_per_s, 1),
        "sent": sent, "answered": answered, "generator_max_lag_s": round(lag, 3),
        # answered with an error (the first round's included): the server did not keep up, a finding
        # about it, not about the generator
        "refused": dict(refused),
        "refused_by_round": dict(sum((collections.Counter(t["refused_by_round"]) for t in tallies),
                                     collections.Counter())),
        "window_s": round(seconds, 2),
        "log_entries_per_min": {node: round((after["commit"][node] - index) / seconds * 60, 1)
                                for node, index in before["commit"].items()} or None,
        "rss_mb": system.rss_mb(),
        "cpu_cores_per_node": {node: round(used / cpu_s_window, 3) for node, used in cpu.items()},
        "cpu_us_per_registration": round(sum(cpu.values()) / (achieved_per_s * cpu_s_window) * 1e6, 1)
        if achieved_per_s else None,
        "generator_cpu_cores": [round(used / cpu_s_window, 3) for used in generators],
        "lookup": lookup}
    say(f"   {system.name:<5} {brokers:,} brokers every {period_s:g} s: {figure['registrations_per_s']} "
        f"registrations/s sent (wanted {figure['wanted_per_s']}), lag {figure['generator_max_lag_s']} s, "
        f"log entries/min {figure['log_entries_per_min']}, RSS MB {figure['rss_mb']}, cores "
        f"{figure['cpu_cores_per_node']}, lookup p99 {fmt(lookup['p99_ms'], 2)} ms"
        + (f", REFUSED {dict(refused)} by round {figure['refused_by_round']}" if refused else "")
        + ("" if not problems else f"; NOT VALID: {'; '.join(problems)}"))
    return figure
