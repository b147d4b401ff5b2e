"""Scale: G broker groups of 3 brokers heartbeating once a second (spread over the 3 nodes), CPU and
RSS per node in steady state, then the masters of K groups lost at once (their heartbeat connection
closed) -> time until every group is re-elected and every surviving replica got its 1008.

The brokers are lightweight: registrations are plain requests, heartbeats pre-encoded frames, and
only the replicas that must receive a 1008 have a real listening address (this process), so one
Python process can stand in for 30,000 brokers on a 2-core machine that also runs the cluster."""

from __future__ import annotations

import time
from typing import Any

import trio

from rmqc.remoting import FrameDecoder, RequestCode, ResponseCode, dumps_fastjson, loads_fastjson

from ._heartbeats import Broker, heartbeat_chunks, send_rounds
from ._java import Controllers
from ._load import RemotingConn
from ._rmqc import CLUSTER, RmqcCluster
from ._stats import fmt
from ._suite import Suite, say

SETUP_CONCURRENCY = 64
# per request; a refused setup request (e.g. 1001 before a digest told the leader that a replica is
# alive) is retried this often, SETUP_RETRY_S apart, then the scenario fails
SETUP_ATTEMPTS = 50
SETUP_RETRY_S = 0.1
HEARTBEAT_CONNECTIONS_PER_NODE = 2
FAILOVER_BOUND_S = 120.0
NOTIFIER_DRAIN_BOUND_S = 120.0


class NotificationSink:
    """Listening addresses for the replicas that must be told about a new master; records, per
    address, when the first 1008 with a master epoch above 1 arrived."""

    def __init__(self) -> None:
        self.first_at: dict[str, float] = {}
        self.listeners: dict[str, trio.SocketListener] = {}

    async def open(self, count: int) -> list[str]:
        for _ in range(count):
            (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
            address = f"127.0.0.1:{listener.socket.getsockname()[1]}"
            self.listeners[address] = listener
        return list(self.listeners)

    async def serve(self, nursery: trio.Nursery) -> None:
        for address, listener in self.listeners.items():
            nursery.start_soon(trio.serve_listeners, lambda stream, a=address: self._read(a, stream), [listener])

    async def _read(self, address: str, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                for command in decoder.feed(data):
                    if (command.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED
                            and int(command.ext("masterEpoch") or 0) > 1):
                        self.first_at.setdefault(address, time.perf_counter())


def group_brokers(group: int, sink_addresses: list[str] | None) -> list[Broker]:
    name = f"scale-{group:05d}"
    # Brokers that need no 1008 get an address where a connection is refused at once (127.x.y.z:9,
    # nothing listens there), so the notifier's work for them is one refused connect each.
    addresses = [f"127.{3 + i}.{group // 250 % 250}.{group % 250 + 1}:9" for i in range(3)]
    if sink_addresses:
        addresses[1:] = sink_addresses
    return [Broker(CLUSTER, name, i + 1, addresses[i]) for i in range(3)]


class LeaderChanged(Exception):
    """A setup request reached a node that is no longer the leader; the worker follows the leader."""


async def call_ok(conn: RemotingConn, code: int, ext: dict[str, object], body: bytes | None = None) -> Any:
    for _ in range(SETUP_ATTEMPTS):
        response = await conn.call(code, ext, body)
        if response.code == ResponseCode.SUCCESS:
            return response
        if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
            raise LeaderChanged(conn.address)
        await trio.sleep(SETUP_RETRY_S)
    raise SetupRefused(f"request {code} for {ext.get('brokerName')} answered {response.code} {response.remark}")


async def register_group(conn: RemotingConn, brokers: list[Broker]) -> None:
    """1013 for the 3 brokers (a repeat with the same check code is an idempotent success)."""
    for b in brokers:
        await call_ok(conn, RequestCode.CONTROLLER_APPLY_BROKER_ID, {
            "clusterName": b.cluster, "brokerName": b.name, "appliedBrokerId": b.broker_id,
            "registerCheckCode": f"{b.address};1700000000000"})


async def elect_group(conn: RemotingConn, brokers: list[Broker]) -> None:
    """Broker 1 elects itself (1002) and grows the set to {1,2,3} (1001); skips what is done already,
    so a step repeated after a leader change does no harm."""
    master = brokers[0]
    info = await call_ok(conn, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": master.name})
    members = loads_fastjson(info.body or b"{}") or {}
    if info.ext("masterBrokerId") != "1":
        info = await call_ok(conn, RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": master.cluster, "brokerName": master.name, "brokerId": 1, "designateElect": False,
            "invokeTime": int(time.time() * 1000)})
        members = {"syncStateSet": [1], "syncStateSetEpoch": int(info.ext("syncStateSetEpoch"))}
    if sorted(members.get("syncStateSet", [])) == [1, 2, 3]:
        return
    body = dumps_fastjson({"syncStateSet": [1, 2, 3], "syncStateSetEpoch": int(members["syncStateSetEpoch"])})
    await call_ok(conn, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
        "brokerName": master.name, "masterBrokerId": 1, "masterEpoch": int(info.ext("masterEpoch")),
        "invokeTime": int(time.time() * 1000)}, body)


class SetupRefused(RuntimeError):
    """A setup request kept being refused (e.g. 1001 while the leader churns under load)."""


async def for_each_group(cluster: Controllers, groups: list[list[Broker]], step: Any) -> set[str]:
    """Run `step` for every group on connections to the current leader; the names of the groups
    whose step was refused to the end (they are left out of the failover figures, and counted)."""
    queue = list(reversed(groups))
    refused: set[str] = set()

    async def worker() -> None:
        while queue:
            conn = await RemotingConn.open(cluster.address(await cluster.leader_id()))
            try:
                while queue:
                    group = queue.pop()
                    try:
                        await step(conn, group)
                    except LeaderChanged:
                        queue.append(group)
                        break
                    except SetupRefused:
                        refused.add(group[0].name)
            finally:
                await conn.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(min(SETUP_CONCURRENCY, len(groups))):
            nursery.start_soon(worker)
    return refused


async def scale(suite: Suite) -> dict[str, Any]:
    total, kills = suite.profile.scale_groups, suite.profile.scale_kills
    cluster = RmqcCluster(suite.work_dir("scale"), 3)
    await cluster.start()
    leader = await cluster.leader_id()
    sink = NotificationSink()
    sink_addresses = await sink.open(2 * kills)
    groups = [group_brokers(g, sink_addresses[2 * g:2 * g + 2] if g < kills else None) for g in range(total)]
    doomed = [g[0] for g in groups[:kills]]  # the masters that will be lost together
    others = [b for g in groups for b in g if b not in doomed]
    figures: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await sink.serve(nursery)
        started = time.perf_counter()
        refused = await for_each_group(cluster, groups, register_group)
        # one connection per master to be lost, as each real broker has its own: the controller
        # ties a broker's liveness to the channel its heartbeats arrive on
        doomed_conns = [await RemotingConn.open(cluster.address(leader)) for _ in doomed]
        for conn, master in zip(doomed_conns, doomed, strict=True):
            nursery.start_soon(send_rounds, conn, heartbeat_chunks([master]), 1.0)
        conns = [await RemotingConn.open(cluster.address(n))
                 for n in cluster.ids for _ in range(HEARTBEAT_CONNECTIONS_PER_NODE)]
        for index, conn in enumerate(conns):
            nursery.start_soon(send_rounds, conn, heartbeat_chunks(others[index::len(conns)]), 1.0)
        await trio.sleep(3)  # heartbeats (and followers' digests of them) reach the leader before elections
        refused |= await for_each_group(cluster, groups, elect_group)
        figures["setup_s"] = round(time.perf_counter() - started, 1)
        figures["setup_refused_groups"] = len(refused)
        say(f"   {total:,} groups x 3 brokers registered and elected in {figures['setup_s']} s "
            f"({len(refused)} groups refused to the end and left out)")
        figures["setup_notifications_drained_s"] = await notifier_drained(cluster, leader, 3 * total)
        figures["steady"] = await steady_state(cluster, suite.profile.scale_steady_s)
        t0 = time.perf_counter()
        for conn in doomed_conns:
            await conn.aclose()
        expected = 2 * sum(1 for g in range(kills) if groups[g][0].name not in refused)
        with trio.move_on_after(FAILOVER_BOUND_S):
            while len(sink.first_at) < expected:
                await trio.sleep(0.005)
        ready = [g for g in range(kills) if groups[g][0].name not in refused]
        figures["failover"] = failover_figures(sink, sink_addresses, t0, ready)
        nursery.cancel_scope.cancel()
    cluster.stop()
    return {"conditions": suite.base_conditions(
                system="rmqc", nodes=3, groups=total, brokers=3 * total, heartbeat_interval_ms=1000,
                heartbeats="each broker to one node, spread over all 3 (pre-encoded frames)",
                masters_lost_at_once=kills, loss="each one's own heartbeat connection closed (crashed brokers)"),
            **figures}


async def notifier_drained(cluster: RmqcCluster, leader: str, expected: int) -> float | None:
    """Seconds until the nodes have logged `expected` 1008 attempts (sent or failed): the setup's
    elections notify every replica, and a failover measured while that queue drains would measure
    the queue. None if it did not drain within the bound (the failover figures then include it)."""
    started = time.perf_counter()
    with trio.move_on_after(NOTIFIER_DRAIN_BOUND_S):
        # every node's log counts: the leader may change meanwhile and its successor notifies
        while sum(proc.log_text().count("1008 to") for proc in cluster.procs.values()) < expected:
            await trio.sleep(0.2)
        drained_s = round(time.perf_counter() - started, 1)
        say(f"   the setup's {expected:,} notifications left the leader within {drained_s} s more")
        return drained_s
    say(f"   fewer than {expected:,} notification attempts logged after {NOTIFIER_DRAIN_BOUND_S} s "
        "(some replicas are not notified or were superseded)")
    return None


async def steady_state(cluster: RmqcCluster, seconds: float) -> dict[str, Any]:
    cpu_before = cluster.cpu_s()
    rss_samples: dict[str, list[float]] = {node: [] for node in cluster.ids}
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for node, rss in cluster.rss_mb().items():
            if rss is not None:
                rss_samples[node].append(round(rss, 1))
        await trio.sleep(min(1.0, seconds / 5))
    elapsed = time.perf_counter() - start
    cpu_after = cluster.cpu_s()
    cpu_pct = {node: round(100 * ((cpu_after[node] or 0) - (cpu_before[node] or 0)) / elapsed, 1)
               for node in cluster.ids}
    rss_last = {node: samples[-1] if samples else None for node, samples in rss_samples.items()}
    say(f"   steady {elapsed:.0f} s: CPU % per node {cpu_pct}, RSS MB per node {rss_last}")
    return {"seconds": round(elapsed, 1), "cpu_percent": cpu_pct, "rss_mb": rss_last, "rss_samples_mb": rss_samples}


def failover_figures(sink: NotificationSink, addresses: list[str], t0: float, ready: list[int]) -> dict[str, Any]:
    """Over the lost groups in `ready` (fully set up): when each was re-elected and fully notified."""
    kills = len(ready)
    per_group = [[sink.first_at.get(a) for a in addresses[2 * g:2 * g + 2]] for g in ready]
    elected = [min(t for t in pair if t is not None) for pair in per_group if any(t is not None for t in pair)]
    notified = [max(t for t in pair if t is not None) for pair in per_group if None not in pair]
    all_elected_s = (max(elected) - t0) if len(elected) == kills else None
    all_notified_s = (max(notified) - t0) if len(notified) == kills else None
    say(f"   {kills:,} masters lost at once: all re-elected (first 1008 per group) after "
        f"{fmt(all_elected_s and all_elected_s * 1000)} ms, all replicas notified after "
        f"{fmt(all_notified_s and all_notified_s * 1000)} ms ({len(notified)}/{kills} groups complete)")
    curve = sorted(round((t - t0) * 1000, 1) for t in sink.first_at.values())
    return {"masters_lost": kills, "groups_reelected": len(elected), "groups_fully_notified": len(notified),
            "all_reelected_ms": all_elected_s and round(all_elected_s * 1000, 1),
            "all_notified_ms": all_notified_s and round(all_notified_s * 1000, 1),
            "notification_times_ms": curve}
