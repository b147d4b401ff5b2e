"""The real Java broker group of `rmqc chaos run --brokers java`: a Java NameServer, three RocketMQ
brokers of one group in controller mode against the run's rmqc nodes, and the Java Producer of
interop/java sending under every window (rmqc.javapeers starts them all; `make interop`
builds the jars). At the end the Producer is stopped and a Consumer reads the topic from its first
offset: every send the Producer saw acknowledged must come back (the message-loss checker).

Each broker dials the controllers through its own fault proxy per rmqc node, so a broker can be
cut off from every controller while it runs (`broker-partition`). Only the broker's own
connections go through them: the 1008 notifications rmqc sends dial the broker's listen address
directly, so the cut silences the broker's registrations, heartbeats and SyncStateSet changes,
not what the controllers tell it."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from rmqc.chaos._tcp_proxy import TcpProxy
from rmqc.client import ClientError, ControllerClient
from rmqc.javapeers import (
    CLUSTER as JAVA_CLUSTER,
    GROUP,
    TOPIC,
    Broker,
    JavaProgram,
    RocketMQ,
    bring_up,
    classpath,
    mqadmin_ok,
    replica_state,
)
from rmqc.launcher import ProcessFailed
from rmqc.remoting import RequestCode, loads_fastjson

from ._history import History, now_ns

REPLICAS = 3
PRODUCER_INTERVAL_MS = 20
BROKER_ASK_S = 0.5  # a stopped broker does not answer: one sample never waits longer per broker
CONSUME_BOUND_S = 180.0  # the Consumer reading every acknowledged message back, on a loaded machine
PRODUCER_START_S = 120.0  # the JVM up, the route read and a first send acknowledged, on a loaded machine
PRODUCER_STOP_S = 30.0  # SIGTERM: the Producer finishes the send in flight (3 s timeout, 2 retries)


def java_missing() -> str | None:
    """Why the Java side cannot run (the jars of `make interop` missing), None when it can."""
    try:
        classpath()
    except ProcessFailed as error:
        return str(error)
    return None


@dataclass(frozen=True)
class BrokerView:
    """What one broker says of itself (907 and 1007): master or not, and its newest epoch."""

    broker_id: int
    master: bool
    epoch: int


@dataclass
class _ControllerAddresses:
    """What rmqc.testing.interop.bring_up needs of the controllers: where the brokers dial them."""

    addresses: list[str]


@dataclass(eq=False)
class JavaBrokers:
    """The broker group, its proxies to the controllers, the Producer and what they were last seen
    to believe."""

    root: Path
    node_addresses: dict[str, str]  # rmqc node id -> listen address
    client: ControllerClient
    history: History
    rmq: RocketMQ = field(init=False)
    brokers: list[Broker] = field(default_factory=list)
    proxies: dict[tuple[int, str], TcpProxy] = field(default_factory=dict)  # (broker index, node id)
    producer: JavaProgram | None = None
    last_views: list[BrokerView] = field(default_factory=list)
    last_replicas: tuple[int | None, int, list[int]] = (None, 0, [])
    _read_offset: int = 0
    _wall_minus_monotonic_ns: int = field(default_factory=lambda: time.time_ns() - time.monotonic_ns())

    def __post_init__(self) -> None:
        self.rmq = RocketMQ(self.root)
        for index in range(REPLICAS):
            for node_id, address in self.node_addresses.items():
                host, port = address.rsplit(":", 1)
                self.proxies[(index, node_id)] = TcpProxy(host, int(port), name=f"proxy broker{index}->{node_id}")

    async def run_proxies(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for proxy in self.proxies.values():
                await nursery.start(proxy.run)
            task_status.started()

    async def start(self) -> None:
        """The NameServer and the three brokers (each dialling the controllers through its own
        proxies) up with a master and all three in the SyncStateSet, the topic, then the Producer."""
        controllers = _ControllerAddresses(list(self.node_addresses.values()))
        self.brokers = await bring_up(self.rmq, controllers, self.client, dial=self._dial)
        assert self.rmq.namesrv is not None
        await mqadmin_ok(self.rmq, "updateTopic", "-n", self.rmq.namesrv.address, "-c", JAVA_CLUSTER, "-t", TOPIC,
                         "-r", "4", "-w", "4")
        self.producer = self.rmq.producer(TOPIC, interval_ms=PRODUCER_INTERVAL_MS)
        await self._first_send_acknowledged()

    async def _first_send_acknowledged(self) -> None:
        """The first window starts once the Producer's JVM is up and a send came back SEND_OK: on
        a loaded machine its start took most of a first window, which then saw no send at all."""
        with trio.move_on_after(PRODUCER_START_S):
            while not any(record["ok"] for record in self.history.of("send")):
                await trio.sleep(0.1)
                self.read_sends()
            return
        raise TimeoutError(f"the Producer had no send acknowledged within {PRODUCER_START_S:.0f} s of its start")

    def _dial(self, index: int) -> list[str]:
        return [self.proxies[(index, node)].address for node in self.node_addresses]

    async def aclose(self) -> None:
        await self.rmq.aclose()

    # ----- what the brokers believe -----

    async def sample(self) -> None:
        """One sample: the controller's view of the group (1004), each running broker's own view,
        and the Producer's new lines into the history."""
        self.last_replicas = await replica_state(self.client)
        views = []
        for broker in self.brokers:
            if broker.running:
                with trio.move_on_after(BROKER_ASK_S):
                    view = await self._view(broker)
                    if view is not None:
                        views.append(view)
        self.last_views = views
        t = now_ns()
        # not a `masters` record: its split-brain check compares epochs across samples, and a new
        # master's epoch cache (1007) can still show its predecessor's epoch
        self.history.add("java_masters", t=t, claims=[[v.broker_id, v.epoch] for v in views if v.master])
        self.history.add("converged", t=t, ok=not self.problems())
        self.read_sends()

    async def _view(self, broker: Broker) -> BrokerView | None:
        broker_id = broker.broker_id()
        try:
            ha = await self.client.request(RequestCode.GET_BROKER_HA_STATUS, {}, address=broker.address)
            epochs = await self.client.request(RequestCode.GET_BROKER_EPOCH_CACHE, {}, address=broker.address)
        except ClientError:
            return None
        if broker_id is None or ha is None or epochs is None or ha.code != 0 or epochs.code != 0:
            return None
        master = bool(loads_fastjson(ha.body or b"{}").get("master"))
        entries = loads_fastjson(epochs.body or b"{}").get("epochList") or []
        return BrokerView(broker_id, master, max((int(e["epoch"]) for e in entries), default=0))

    def problems(self) -> list[str]:
        """What keeps the group from having recovered (empty when it has): every broker running and
        answering, exactly one saying it is master, the one the controller elected, and all three
        in the SyncStateSet (the next fault may take any of them)."""
        master, epoch, in_sync = self.last_replicas
        found = [f"broker {b.name} not running" for b in self.brokers if not b.running]
        if len(self.last_views) < REPLICAS:
            found.append(f"{len(self.last_views)} of {REPLICAS} brokers answer")
        # not the epoch: a new master's epoch cache (1007) can lag its election for minutes
        claims = [v.broker_id for v in self.last_views if v.master]
        if claims != [master]:
            found.append(f"brokers claiming master {claims}, the controller's {master} at epoch {epoch}")
        if len(in_sync) < REPLICAS:
            found.append(f"SyncStateSet {in_sync}")
        return found

    def master(self) -> tuple[int, Broker]:
        """The broker the controller last named master, and its index."""
        master_id = self.last_replicas[0]
        for index, broker in enumerate(self.brokers):
            if broker.broker_id() == master_id:
                return index, broker
        raise LookupError(f"no broker has the controller's master id {master_id}")

    def record_members(self) -> None:
        self.history.add("brokers", t=now_ns(),
                         brokers=[(GROUP, index, broker.broker_id()) for index, broker in enumerate(self.brokers)])

    # ----- the Producer and the Consumer -----

    def read_sends(self) -> None:
        """The Producer's send lines since the last call, as `send` records (times in the run's
        monotonic ns: the Producer stamps the wall clock)."""
        if self.producer is None:
            return
        path = self.producer.directory / "stdout.log"
        with open(path, "rb") as lines:
            lines.seek(self._read_offset)
            chunk = lines.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self._read_offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if line.startswith('{"event":"send"'):
                sent = json.loads(line)
                self.history.add("send", seq=sent["seq"], ok=sent["result"] == "ok",
                                 invoke=self._monotonic(sent["sendMs"]), complete=self._monotonic(sent["ackMs"]))

    def _monotonic(self, wall_ms: int) -> int:
        return wall_ms * 1_000_000 - self._wall_minus_monotonic_ns

    async def consume_all(self) -> None:
        """Stop the Producer, then read the topic from its first offset until every acknowledged
        message came back or CONSUME_BOUND_S passed: a `recv` record per message body, then
        `consumed` (the checker needs it: without one, nothing was verified)."""
        assert self.producer is not None
        self.producer.kill(signal.SIGTERM)
        await self.producer.wait_exit(PRODUCER_STOP_S)
        self.read_sends()
        acked = {f"rmqc-{r['seq']}" for r in self.history.of("send") if r["ok"]}
        consumer = self.rmq.consumer(TOPIC)
        bodies: set[str] = set()
        with trio.move_on_after(CONSUME_BOUND_S):
            while not acked <= bodies:
                await trio.sleep(0.5)
                bodies = {line["body"] for line in consumer.json_lines() if line["event"] == "recv"}
        consumer.kill(signal.SIGTERM)
        for body in sorted(bodies):
            self.history.add("recv", body=body)
        self.history.add("consumed", t=now_ns())
