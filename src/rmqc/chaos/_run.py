"""One chaos run: controller nodes behind the fault proxies, a simulated broker fleet (or the real
Java broker group of rmqc.chaos._java, `brokers="java"`), a writer per register group, readers at
every level on every node, monitors, and a seeded schedule of windows
(quiet, fault, heal, recovery). Everything lands in the history; the checkers run at the end.

It uses the project's one launcher of `rmqc serve` processes (rmqc.launcher), the fault proxy
(rmqc.chaos._tcp_proxy) and the linearizability checker (rmqc.linearizability); no serving code
imports rmqc.chaos."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from rmqc.brokersim import BrokerFleet, Role, SimTiming, Status
from rmqc.chaos._tcp_proxy import ProxyMesh
from rmqc.client import ClientError, ControllerClient
from rmqc.launcher import ServeNode, free_ports, stop_processes
from rmqc.remoting import RequestCode
from rmqc.storage import FAULT_FILE_ENV

from ._faults import FAULTS, FIVE_NODES_ONLY, Fault, libfaketime, set_clock_offset, set_disk_stall
from ._history import History, now_ns
from ._java import JavaBrokers, java_missing
from ._output import write_outputs

CLUSTER = "chaos"
LEVELS = ("linearizable", "lease", "stale")
REQUEST_TIMEOUT_MS = 1000  # a suspended node must not hold a reader for long
NODE_SETTINGS = (f"request_timeout_ms={REQUEST_TIMEOUT_MS}",)
WRITER_PAUSE_S = 0.02  # between writes: ~50 writes/s per group keeps the checker's search small
READER_PAUSE_S = 0.05
RETRY_PAUSE_S = 0.01  # after a refusal: a failover is under way, do not spin
ROLE_SAMPLE_S = 0.25
ROLE_ASK_S = 0.15  # a suspended node does not answer: one sample never waits longer per node
MASTER_SAMPLE_S = 0.05  # the resolution of the masters' RTO
ADMIN_PAUSE_S = (1.0, 3.0)  # between two designations of a master by the admin (1002), uniform
FINAL_READ_BOUND_S = 30.0
CONVERGE_BOUND_S = 60.0  # the fleet's first registration on a loaded 2-core machine
# Ids one writer registers in one group before moving to the next: below the controller's bound of
# 1024 replicas per group (rmqc.fsm MAX_REPLICAS_PER_GROUP), past which 1013 is refused.
IDS_PER_KEY = 1000
BROKER_TIMING = SimTiming.fast()
# A hung broker is only noticed when its heartbeats expire: a shorter hang tests nothing.
MIN_HOLD_S = {"broker-hang": BROKER_TIMING.heartbeat_timeout_ms / 1000 + 1.0}
BROKER_KINDS = ("sim", "java")
# The Java brokers' heartbeat timeout (RocketMQ 5.5.0 BrokerConfig.controllerHeartBeatTimeoutMills,
# 10 s): a hung or cut-off broker is only noticed past it.
JAVA_MIN_HOLD_S = {"broker-hang": 11.0, "broker-partition": 11.0}
# A killed Java broker restarts as a JVM (5-15 s here, more under load) and a slave rejoins the
# SyncStateSet once it has caught up and registered again (registerNameServerPeriod 10 s).
JAVA_RECOVERY_BOUND_S = 90.0
JAVA_SAMPLE_S = 0.25  # each sample asks the controller and three JVMs: 20 a second would load them
JAVA_ONLY = frozenset({"broker-partition"})


@dataclass(frozen=True)
class ChaosConfig:
    out: Path
    nodes: int = 3
    windows: int = 10
    faults: tuple[str, ...] = ("leader-kill", "suspend", "partition")
    seed: int = 0
    register_groups: int = 3  # groups the writer registers ids in (the linearizability registers)
    broker_groups: int = 8  # simulated broker groups, 3 replicas each
    quiet_s: float = 1.0
    fault_s: float = 2.0
    recovery_bound_s: float = 20.0  # a window whose cluster has not recovered by then is a violation
    settle_s: float = 0.5  # after recovery, before the next window: the links age past their backoff
    node_settings: tuple[str, ...] = ()  # OPTION=VALUE for every node's `rmqc serve --set`
    brokers: str = "sim"  # "sim": the simulated fleet; "java": real RocketMQ brokers (rmqc.chaos._java)

    @property
    def java(self) -> bool:
        return self.brokers == "java"

    def recovery_bound(self) -> float:
        return max(self.recovery_bound_s, JAVA_RECOVERY_BOUND_S) if self.java else self.recovery_bound_s

    def hold_s(self, kind: str) -> float:
        """How long the fault of `kind` lasts: the scheduled time, or longer where a shorter one tests nothing."""
        return max(self.fault_s, (JAVA_MIN_HOLD_S if self.java else MIN_HOLD_S).get(kind, 0.0))

    def check(self) -> None:
        if self.brokers not in BROKER_KINDS:
            raise ValueError(f"unknown broker kind {self.brokers!r}; known: {list(BROKER_KINDS)}")
        java_only = [f for f in self.faults if f in JAVA_ONLY and not self.java]
        if java_only:
            raise ValueError(f"{java_only} need the Java brokers (--brokers java)")
        missing = java_missing() if self.java else None
        if missing:
            raise ValueError(f"--brokers java needs the RocketMQ jars: {missing}")
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; known: {sorted(FAULTS)}")
        if self.nodes not in (3, 5):
            raise ValueError("--nodes must be 3 or 5")
        five_only = [f for f in self.faults if f in FIVE_NODES_ONLY and self.nodes != 5]
        if five_only:
            raise ValueError(f"{five_only} need 5 nodes")
        if self.out.exists() and any(self.out.iterdir()):
            # the nodes would start on an earlier run's data, with other peers' addresses
            raise ValueError(f"{self.out} is not empty: give each run a new --out")
        if "clock" in self.faults and libfaketime() is None:
            raise ValueError("the clock fault needs libfaketime (Debian package faketime)")


@dataclass(eq=False)
class World:
    """What the faults act on."""

    config: ChaosConfig
    nodes: list[ServeNode]
    mesh: ProxyMesh
    client: ControllerClient
    history: History
    fleet: BrokerFleet = field(init=False)  # the simulated brokers (brokers="sim")
    java: JavaBrokers | None = None  # the Java broker group (brokers="java")
    incarnation: Counter[str] = field(default_factory=Counter)
    register_keys: list[str] = field(default_factory=list)  # the group each writer writes now

    @property
    def node_addresses(self) -> list[str]:
        return [node.address for node in self.nodes]

    @property
    def node_ids(self) -> list[str]:
        return [node.node_id for node in self.nodes]

    def node(self, node_id: str) -> ServeNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def clock_file(self, node_id: str) -> Path:
        return clock_file(self.config.out, node_id)

    def disk_file(self, node_id: str) -> Path:
        return disk_file(self.config.out, node_id)

    async def restart(self, node_ids: Sequence[str]) -> None:
        """Start the nodes again on their data, all at once (as an operator restarting a majority
        would; one after the other, a major-kill's RTO from the restart counted two process starts),
        and wait until every one serves. A node's incarnation changes as its new process starts, so
        no read it answers is counted as the old process's."""
        for node_id in node_ids:
            self.incarnation[node_id] += 1
            self.node(node_id).spawn()
        for node_id in node_ids:
            await self.node(node_id).wait_serving()

    async def leader(self) -> str | None:
        """The leader most running nodes name (None if none answers)."""
        named: Counter[str] = Counter()
        for node in self.nodes:
            if node.running:
                with trio.move_on_after(ROLE_ASK_S):
                    leader = await self._named_leader(node)
                    if leader:
                        named[leader] += 1
        return named.most_common(1)[0][0] if named else None

    async def _named_leader(self, node: ServeNode) -> str | None:
        try:
            return (await self.client.get_metadata(address=node.address)).ext("controllerLeaderId")
        except ClientError:
            return None

    async def leader_or_random(self, rng: random.Random) -> str:
        return await self.leader() or rng.choice(self.node_ids)

    def broker_problems(self) -> list[str]:
        """What keeps the brokers from having recovered (empty when they have)."""
        return self.java.problems() if self.java is not None else self.fleet.problems()

    def random_master(self, rng: random.Random) -> tuple[str, int]:
        masters = [(b.broker_name, b.broker_id) for b in self.fleet.beliefs()
                   if b.status is Status.RUNNING and b.role is Role.MASTER and b.broker_id is not None]
        return rng.choice(sorted(masters))


def schedule(config: ChaosConfig) -> list[str]:
    """The fault of every window: every kind in turn (so each gets its share), in a seeded order."""
    rng = random.Random(config.seed)
    kinds = list(config.faults)
    order: list[str] = []
    while len(order) < config.windows:
        rng.shuffle(kinds)
        order += kinds
    return order[:config.windows]


async def run_chaos(config: ChaosConfig, on_window: Callable[[dict[str, Any]], None] = lambda _: None,
                    history: History | None = None) -> History:
    config.check()
    history = History() if history is None else history
    ports = free_ports(config.nodes)
    mesh = ProxyMesh({f"n{i}": port for i, port in enumerate(ports)})
    async with trio.open_nursery() as nursery:
        await nursery.start(mesh.run)
        nodes = _nodes(config, mesh)
        try:
            await _with_cluster(config, nodes, mesh, history, on_window)
        finally:
            stop_processes([node.process for node in nodes if node.process is not None])
            nursery.cancel_scope.cancel()
    return history


def clock_file(out: Path, node_id: str) -> Path:
    return out / "nodes" / f"{node_id}.faketime"


def disk_file(out: Path, node_id: str) -> Path:
    return out / "nodes" / f"{node_id}.storage-faults"


def _nodes(config: ChaosConfig, mesh: ProxyMesh) -> list[ServeNode]:
    root = config.out / "nodes"
    root.mkdir(parents=True, exist_ok=True)
    nodes = []
    for node_id, port in mesh.listen_ports.items():
        node = ServeNode(node_id, f"127.0.0.1:{port}", mesh.peers_for(node_id), root / node_id,
                         root / f"{node_id}.log", (*NODE_SETTINGS, *config.node_settings))
        node.env = _fault_env(config, node_id)
        nodes.append(node)
    return nodes


def _fault_env(config: ChaosConfig, node_id: str) -> dict[str, str]:
    """What a node's environment needs for the requested faults; nothing for the others, so the
    test-only storage hook and libfaketime are on only where a fault uses them."""
    env: dict[str, str] = {}
    if "clock" in config.faults:
        clock = clock_file(config.out, node_id)
        set_clock_offset(clock, 0)
        env |= {"LD_PRELOAD": str(libfaketime()), "FAKETIME_TIMESTAMP_FILE": str(clock),
                "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    if "disk-stall" in config.faults:
        disk = disk_file(config.out, node_id)
        set_disk_stall(disk, False)
        env[FAULT_FILE_ENV] = str(disk)
    return env


async def _with_cluster(config: ChaosConfig, nodes: list[ServeNode], mesh: ProxyMesh, history: History,
                        on_window: Callable[[dict[str, Any]], None]) -> None:
    for node in nodes:
        node.spawn()
    for node in nodes:
        await node.wait_serving()
    addresses = [node.address for node in nodes]
    async with ControllerClient(addresses, timeout_ms=REQUEST_TIMEOUT_MS, max_retries=0, max_in_flight=1024) as client:
        world = World(config, nodes, mesh, client, history)
        world.register_keys = [register_key(slot, 0) for slot in range(config.register_groups)]
        if config.java:
            await _with_java_brokers(world, on_window)
        else:
            await _with_simulated_brokers(world, on_window)


async def _with_simulated_brokers(world: World, on_window: Callable[[dict[str, Any]], None]) -> None:
    config = world.config
    # the admin's 1002s name CLUSTER: the brokers must be of it (clusterNameCheck refuses others)
    world.fleet = BrokerFleet(world.node_addresses, groups=config.broker_groups, replicas=3, cluster=CLUSTER,
                              state_dir=config.out / "brokers", timing=BROKER_TIMING, seed=config.seed)
    async with world.fleet:
        await world.fleet.wait_converged(CONVERGE_BOUND_S)
        await _load_and_windows(world, on_window)
        await _final_reads(world)
        await _final_masters(world)
        _record_brokers(world)


async def _with_java_brokers(world: World, on_window: Callable[[dict[str, Any]], None]) -> None:
    """The Java broker group instead of the fleet: no admin designating masters (its 1002s are for
    the fleet's groups), and at the end every acknowledged message read back."""
    java = JavaBrokers(world.config.out / "java", {n.node_id: n.address for n in world.nodes}, world.client,
                       world.history)
    world.java = java
    async with trio.open_nursery() as proxies:
        await proxies.start(java.run_proxies)
        try:
            await java.start()
            await _load_and_windows(world, on_window)
            await java.consume_all()
            await _final_reads(world)
            await _final_masters(world)
            java.record_members()
        finally:
            await java.aclose()
            proxies.cancel_scope.cancel()


async def _load_and_windows(world: World, on_window: Callable[[dict[str, Any]], None]) -> None:
    async with trio.open_nursery() as load:
        _start_load(world, load, random.Random(world.config.seed + 1))
        await _windows(world, on_window)
        load.cancel_scope.cancel()


def _start_load(world: World, load: trio.Nursery, rng: random.Random) -> None:
    for slot in range(world.config.register_groups):
        load.start_soon(_writer, world, slot, random.Random(rng.getrandbits(64)))
    for node in world.nodes:
        for level in LEVELS:
            load.start_soon(_reader, world, node, level, random.Random(rng.getrandbits(64)))
    load.start_soon(_role_monitor, world)
    load.start_soon(_master_monitor, world)
    if world.java is None:
        load.start_soon(_admin, world, random.Random(rng.getrandbits(64)))


def register_key(slot: int, generation: int) -> str:
    return f"chaos-w{slot}.{generation}"


async def _writer(world: World, slot: int, rng: random.Random) -> None:
    """1013 of ids 1, 2, ... through random nodes (followers forward to the leader); an id not
    acknowledged is retried until it is, and all attempts at it are one write (idempotent). A group
    holds at most MAX_REPLICAS_PER_GROUP ids: at IDS_PER_KEY the writer moves on to a fresh group."""
    generation = 0
    while True:
        key = register_key(slot, generation)
        world.register_keys[slot] = key
        await _write_ids(world, key, rng)
        generation += 1


async def _write_ids(world: World, key: str, rng: random.Random) -> None:
    acked, first_invoke = 0, None
    try:
        while acked < IDS_PER_KEY:
            broker_id = acked + 1
            node = rng.choice(world.nodes)
            ext = {"clusterName": CLUSTER, "brokerName": key, "appliedBrokerId": broker_id,
                   "registerCheckCode": f"10.9.0.{broker_id % 250}:{broker_id};1700000000000"}
            invoke = now_ns()
            first_invoke = first_invoke or invoke
            ok = await _request_ok(world, RequestCode.CONTROLLER_APPLY_BROKER_ID, ext, node.address)
            complete = now_ns()
            world.history.add("attempt", proc="writer", node=node.node_id, invoke=invoke, complete=complete, ok=ok)
            if ok:
                world.history.add("write", key=key, id=broker_id, invoke=first_invoke, complete=complete)
                acked, first_invoke = broker_id, None
            await trio.sleep(WRITER_PAUSE_S if ok else RETRY_PAUSE_S)
    finally:
        if first_invoke is not None:  # tried, never acknowledged: it may still take effect
            world.history.add("write", key=key, id=acked + 1, invoke=first_invoke, complete=None)


async def _request_ok(world: World, code: RequestCode, ext: dict[str, Any], address: str) -> bool:
    try:
        answer = await world.client.request(code, ext, address=address)
    except ClientError:
        return False
    return answer is not None and answer.code == 0


async def _reader(world: World, node: ServeNode, level: str, rng: random.Random) -> None:
    while True:
        key = rng.choice(world.register_keys)
        incarnation = world.incarnation[node.node_id]
        invoke = now_ns()
        ext = {"clusterName": CLUSTER, "brokerName": key, "consistency": level}
        try:
            answer = await world.client.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, ext, address=node.address)
        except ClientError:
            answer = None
        complete = now_ns()
        ok = answer is not None and answer.code == 0
        world.history.add("attempt", proc="reader", node=node.node_id, invoke=invoke, complete=complete, ok=ok)
        if answer is not None and ok and incarnation == world.incarnation[node.node_id]:
            world.history.add("read", node=node.node_id, incarnation=incarnation, level=level, key=key,
                              value=answer.ext("nextBrokerId"), invoke=invoke, complete=complete)
        await trio.sleep(READER_PAUSE_S)  # also after a refusal: a down node is asked 20 times a second at most


async def _role_monitor(world: World) -> None:
    while True:
        roles = {}
        for node in world.nodes:
            roles[node.node_id] = "down"
            if node.running:
                with trio.move_on_after(ROLE_ASK_S):
                    roles[node.node_id] = await _role(world, node)
        world.history.add("role", t=now_ns(), roles=roles)
        await trio.sleep(ROLE_SAMPLE_S)


async def _role(world: World, node: ServeNode) -> str:
    try:
        answer = await world.client.get_metadata(address=node.address)
    except ClientError:
        return "down"
    return "leader" if answer.ext("isLeader") == "true" else "follower"


async def _master_monitor(world: World) -> None:
    """What the brokers believe: every live MASTER's (id, masterEpoch), and whether every group has
    one agreed, notified master."""
    while True:
        await _sample_masters(world)
        await trio.sleep(MASTER_SAMPLE_S if world.java is None else JAVA_SAMPLE_S)


async def _sample_masters(world: World) -> None:
    if world.java is not None:
        await world.java.sample()
        return
    groups: dict[str, list[tuple[int, int]]] = {}
    for belief in world.fleet.beliefs():
        if belief.status is Status.RUNNING and belief.role is Role.MASTER and belief.broker_id is not None:
            groups.setdefault(belief.broker_name, []).append((belief.broker_id, belief.master_epoch))
    t = now_ns()
    world.history.add("masters", t=t, groups=groups)
    world.history.add("converged", t=t, ok=not world.fleet.problems())


async def _admin(world: World, rng: random.Random) -> None:
    """Now and then an operator designates a master (1002 with designateElect, mqadmin's
    electMaster) through a random node: a live slave of a random group, one its own belief puts in
    the SyncStateSet when there is one (the controller refuses the others, which is recorded too).
    The answer's master and masterEpoch go into the history for the designation checker."""
    while True:
        await trio.sleep(rng.uniform(*ADMIN_PAUSE_S))
        choice = _designation(world, rng)
        if choice is None:
            continue
        group, broker_id = choice
        node = rng.choice(world.nodes)
        ext = {"clusterName": CLUSTER, "brokerName": group, "brokerId": broker_id, "designateElect": True}
        invoke = now_ns()
        try:
            answer = await world.client.request(RequestCode.CONTROLLER_ELECT_MASTER, ext, address=node.address)
        except ClientError:
            answer = None
        complete = now_ns()
        world.history.add("designate", key=group, id=broker_id, node=node.node_id, invoke=invoke, complete=complete,
                          code=None if answer is None else answer.code,
                          master=_int_or_none(answer, "masterBrokerId"), epoch=_int_or_none(answer, "masterEpoch"))


def _designation(world: World, rng: random.Random) -> tuple[str, int] | None:
    slaves = [b for b in world.fleet.beliefs()
              if b.status is Status.RUNNING and b.role is Role.SLAVE and b.broker_id is not None]
    in_sync = [b for b in slaves if b.broker_id in b.sync_state_set]
    if not slaves:
        return None
    chosen = rng.choice(in_sync or slaves)
    assert chosen.broker_id is not None
    return chosen.broker_name, chosen.broker_id


def _int_or_none(answer: Any, key: str) -> int | None:
    value = None if answer is None else answer.ext(key)
    return None if value is None else int(value)


async def _windows(world: World, on_window: Callable[[dict[str, Any]], None]) -> None:
    rng = random.Random(world.config.seed + 2)
    for number, kind in enumerate(schedule(world.config)):
        record = await _window(world, number, kind, FAULTS[kind], rng)
        on_window(record)


async def _window(world: World, number: int, kind: str, fault: Fault, rng: random.Random) -> dict[str, Any]:
    config = world.config
    start = now_ns()
    await trio.sleep(config.quiet_s)  # the quiet phase is part of the schedule, not a wait for a condition
    fault_at = now_ns()
    detail, heal = await fault(world, rng)
    await trio.sleep(config.hold_s(kind))  # the fault's duration, as scheduled
    heal_at = now_ns()
    await heal()
    problems = await _recovered(world, heal_at, config.recovery_bound())
    await trio.sleep(config.settle_s)
    return world.history.add("window", window=number, kind=kind, detail=detail, start=start, fault=fault_at,
                             heal=heal_at, end=now_ns(), problems=problems)


async def _recovered(world: World, since: int, bound_s: float) -> list[str]:
    """Wait (bounded) until every node runs, a write invoked after `since` was acknowledged, and
    the fleet has converged; what is still wrong at the bound (empty when recovered)."""
    with trio.move_on_after(bound_s):
        while not (all(n.running for n in world.nodes) and _acked_since(world, since) and not world.broker_problems()):
            await trio.sleep(MASTER_SAMPLE_S)
        return []
    down = [n.node_id for n in world.nodes if not n.running]
    writes = [] if _acked_since(world, since) else [f"no write acknowledged within {bound_s:g} s of the heal"]
    return world.broker_problems() + [f"{node} not running" for node in down] + writes


def _acked_since(world: World, since: int) -> bool:
    """Whether the newest acknowledged write was first tried after `since` (see window_rtos)."""
    for record in reversed(world.history.records):
        if record["type"] == "write" and record["complete"] is not None:
            return bool(record["invoke"] >= since)
    return False


async def _final_reads(world: World) -> None:
    """nextBrokerId of every register group, read linearizably once the last window has healed."""
    for key in sorted({record["key"] for record in world.history.of("write")}):
        ext = {"clusterName": CLUSTER, "brokerName": key, "consistency": "linearizable"}
        with trio.move_on_after(FINAL_READ_BOUND_S):
            while True:
                try:
                    answer = await world.client.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, ext)
                except ClientError:
                    answer = None
                if answer is not None and answer.code == 0:
                    world.history.add("final", key=key, value=answer.ext("nextBrokerId"), t=now_ns())
                    break
                await trio.sleep(RETRY_PAUSE_S)


async def _final_masters(world: World) -> None:
    """One last sample of the brokers' masters once they agree (bounded): what every designation
    acknowledged at the very end of the load is checked against."""
    with trio.move_on_after(FINAL_READ_BOUND_S):
        while world.broker_problems():
            await _sample_masters(world)
            await trio.sleep(MASTER_SAMPLE_S)
    await _sample_masters(world)


def _record_brokers(world: World) -> None:
    world.history.add("brokers", t=now_ns(),
                      brokers=[(b.broker_name, b.slot, b.broker_id) for b in world.fleet.beliefs()])


def run_and_report(config: ChaosConfig, on_window: Callable[[dict[str, Any]], None], command: str) -> dict[str, Any]:
    """Run (in Trio), check, and write every output into `config.out`; the summary. A run that
    breaks off (a node that does not start again, a bound exceeded) still leaves its history and
    report, with the reason as a violation."""
    history = History()
    try:
        trio.run(run_chaos, config, on_window, history)
    except Exception as error:  # whatever stopped the run is reported, not lost
        history.add("aborted", reason=f"{type(error).__name__}: {error}", t=now_ns())
    meta = {"seed": config.seed, "nodes": config.nodes, "brokers": config.brokers,
            "faults_requested": list(config.faults), "command": command}
    data_dirs = {f"n{i}": config.out / "nodes" / f"n{i}" for i in range(config.nodes)}
    return write_outputs(config.out, history.records, meta, data_dirs)
