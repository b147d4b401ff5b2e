"""BrokerFleet: many simulated brokers in one Trio process, and the simulated replication between them.

    async with BrokerFleet(["127.0.0.1:9878"], groups=200, replicas=3, state_dir=tmp) as fleet:
        await fleet.wait_converged(timeout_s=30)
        fleet.kill(name, fleet.master_of(name))
        await fleet.wait_converged(timeout_s=30)

Every replica of a group runs in the same fleet, so replication is simulated in memory: every
`replication_interval_ms` each master appends `write_bytes_per_tick`, and every slave that follows
a serving master of its own masterEpoch (and was not told to lag) copies the master's offset and
epoch; the master then adds caught-up slaves to its SyncStateSet (1001 expand) and its shrink check
drops the ones that stopped catching up.
"""

from __future__ import annotations

import functools
import random
import ssl
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import trio

from rmqc.acl import Credentials
from rmqc.brokersim._broker import SimBroker
from rmqc.brokersim._errors import FleetTooLarge, NotConverged, UnknownBroker
from rmqc.brokersim._lateness import Lateness, next_due
from rmqc.brokersim._model import BrokerBelief, Role, SimTiming, Status, convergence_problems, expanded_set
from rmqc.fsm import TopicRow

__all__ = ["DEFAULT_CLUSTER", "DEFAULT_TOPICS_PER_BROKER", "MAX_BROKERS_PER_FLEET", "BrokerFleet", "group_name",
           "topic_table"]

DEFAULT_CLUSTER = "DefaultCluster"
# One process holds a listener and one connection per controller for each broker; with 3
# controllers, 5,000 brokers need 20,000 descriptors, this machine's default `ulimit -n`.
MAX_BROKERS_PER_FLEET = 5000
CONVERGENCE_POLL_S = 0.05
DEFAULT_TOPICS_PER_BROKER = 4
# Why: a 103 body of a few hundred bytes per topic; 65,536 is the NameServer's bound per registration.
MAX_TOPICS_PER_BROKER = 65_536
TOPIC_QUEUES = 4  # read and write queues of every simulated topic
PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE
START_BATCHES = 20
# Brokers started per second at most. A start is about six requests (1005, 1012, 1013, 1003, 904,
# 1002) with 3 s timeouts; 1,000 groups started within one second made thousands of them time out
# together on a loaded machine, and their retries kept the simulator seconds behind its schedule
# for minutes (measured: 2,400 of 3,000 brokers still starting after 60 s, the scheduler 2-4 s late).
START_BROKERS_PER_S = 300
# ...and no next batch while the scheduler runs later than this (the probe's last wake-up), for at
# most START_HOLD_S per batch: on a starved machine the starts pace themselves instead of
# collapsing into timeouts and retries (measured on a machine at load 9: 3 processes of 1,000
# brokers each, half of them still starting after 3 minutes, the scheduler 3-5 s late).
START_MAX_LATE_S = 0.5
START_HOLD_S = 10.0
# The lateness probe wakes this often and does nothing else: its lateness is the scheduler's own
# delay, whatever the brokers' steps are doing (a tenth of a second costs nothing measurable).
PROBE_INTERVAL_S = 0.1


def topic_table(group: str, count: int) -> tuple[TopicRow, ...]:
    """The topics every broker of `group` registers (`broker-0007-topic-0`, ...): derived from the
    group's name, so every run and every process agrees on them."""
    return tuple((f"{group}-topic-{i}", TOPIC_QUEUES, TOPIC_QUEUES, PERM_READ_WRITE, 0) for i in range(count))


def group_name(index: int) -> str:
    """The broker-set name of group `index` (`broker-0007`); every process of a run agrees on it."""
    return f"broker-{index:04d}"


class BrokerFleet:
    """Groups `first_group .. first_group + groups - 1`, `replicas` brokers each, against `controllers`."""

    def __init__(self, controllers: Sequence[str], *, groups: int, replicas: int = 3, state_dir: str | Path,
                 cluster: str = DEFAULT_CLUSTER, first_group: int = 0, timing: SimTiming | None = None,
                 seed: int | None = None, credentials: Credentials | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 topics_per_broker: int = DEFAULT_TOPICS_PER_BROKER) -> None:
        if groups * replicas > MAX_BROKERS_PER_FLEET:
            raise FleetTooLarge(f"{groups} groups x {replicas} replicas = {groups * replicas} brokers; "
                                f"one process holds at most {MAX_BROKERS_PER_FLEET} (use more processes)")
        if not 0 <= topics_per_broker <= MAX_TOPICS_PER_BROKER:
            raise FleetTooLarge(f"{topics_per_broker} topics per broker: from 0 to {MAX_TOPICS_PER_BROKER}")
        self.topics_per_broker = topics_per_broker
        self.controllers = list(controllers)
        self._credentials = credentials  # the ACL account every broker signs with (None: unsigned)
        self._ssl_context = ssl_context  # TLS to the controllers (None: plain TCP)
        self.cluster = cluster
        self.timing = timing or SimTiming()
        self.seed = seed if seed is not None else random.randrange(2**32)
        self._rng = random.Random(self.seed)
        self.lateness = Lateness(self.timing.heartbeat_timeout_ms)
        self.two_masters = TwoMasters()
        self._state_dir = Path(state_dir)
        self.group_names = [group_name(first_group + i) for i in range(groups)]
        self._groups: dict[str, list[SimBroker]] = {
            name: [self._new_broker(name, slot) for slot in range(replicas)] for name in self.group_names
        }
        self._nursery: trio.Nursery | None = None
        self._nursery_manager: Any = None

    def _new_broker(self, name: str, slot: int) -> SimBroker:
        return SimBroker(self.cluster, name, slot, self._state_dir / f"{name}-{slot}", self.timing,
                         random.Random(self._rng.getrandbits(64)), self._connected_slaves, self.lateness,
                         self._credentials, self._ssl_context, topic_table(name, self.topics_per_broker))

    # ---- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> BrokerFleet:
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        try:
            await self._start_all(self._nursery)
        except BaseException:
            self._nursery.cancel_scope.cancel()
            await self._nursery_manager.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        nursery_manager, self._nursery = self._nursery_manager, None
        suppressed: bool | None = await nursery_manager.__aexit__(exc_type, exc, tb)
        return suppressed

    async def _start_all(self, nursery: trio.Nursery) -> None:
        """Start brokers in START_BATCHES batches spread over `start_spread_ms`, or longer for a
        fleet above START_BROKERS_PER_S, or while the simulator runs late (START_MAX_LATE_S). Not
        one by one: each start costs a few scheduler passes, which grow slow once hundreds run."""
        nursery.start_soon(self._probe_loop)
        brokers = self.brokers()
        batch_size = -(-len(brokers) // START_BATCHES)
        pause_s = max(self.timing.start_spread_ms / 1000, len(brokers) / START_BROKERS_PER_S) / START_BATCHES
        for first in range(0, len(brokers), batch_size):
            for broker in brokers[first:first + batch_size]:
                nursery.start_soon(broker.run, self.controllers)
            await trio.sleep(pause_s)
            with trio.move_on_after(START_HOLD_S):
                while self.lateness.last_s["probe"] > START_MAX_LATE_S:
                    await trio.sleep(PROBE_INTERVAL_S)
        nursery.start_soon(self._replicate_loop)

    # ---- control ------------------------------------------------------------------------------

    def brokers(self) -> list[SimBroker]:
        return [broker for name in self.group_names for broker in self._groups[name]]

    def group(self, name: str) -> list[SimBroker]:
        try:
            return self._groups[name]
        except KeyError:
            raise UnknownBroker(f"no broker group {name!r} in this fleet") from None

    def broker(self, name: str, broker_id: int) -> SimBroker:
        for broker in self.group(name):
            if broker.broker_id == broker_id:
                return broker
        raise UnknownBroker(f"no broker {name}/{broker_id} in this fleet")

    def master_of(self, name: str) -> int | None:
        """The id of the broker of `name` that serves as master, None if no live broker does."""
        masters = [b.broker_id for b in self.group(name) if b.serving and b.role is Role.MASTER]
        return masters[0] if len(masters) == 1 else None

    def kill(self, name: str, broker_id: int) -> None:
        """Close the broker's connections and stop it (a crashed process)."""
        self.broker(name, broker_id).kill()

    def hang(self, name: str, broker_id: int) -> None:
        """Stop its heartbeats and everything else, connections left open (a hung process)."""
        self.broker(name, broker_id).hang()

    def resume(self, name: str, broker_id: int) -> None:
        self.broker(name, broker_id).resume()

    def lag(self, name: str, broker_id: int, lagging: bool = True) -> None:
        """Make a slave stop copying from its master (it falls behind), or catch up again."""
        self.broker(name, broker_id).lagging = lagging

    async def restart(self, name: str, broker_id: int) -> None:
        """Start a killed broker again on its old port; it reads its identity files (spec 7.2)."""
        broker = self.broker(name, broker_id)
        if broker.status is not Status.KILLED:
            raise UnknownBroker(f"{name}/{broker_id} is {broker.status}, only a killed broker restarts")
        assert self._nursery is not None
        port = int(broker.address.rpartition(":")[2])
        broker.status = Status.STARTING
        await self._nursery.start(functools.partial(broker.run, self.controllers, port=port))

    def beliefs(self, names: Iterable[str] | None = None) -> list[BrokerBelief]:
        chosen = self.group_names if names is None else list(names)
        return [broker.belief() for name in chosen for broker in self.group(name)]

    def problems(self, *, full_sync_state_sets: bool = False) -> list[str]:
        return convergence_problems(self.beliefs(), full_sync_state_sets=full_sync_state_sets)

    async def wait_converged(self, timeout_s: float, *, full_sync_state_sets: bool = False) -> float:
        """Wait until `problems()` is empty; the seconds it took. NotConverged after `timeout_s`."""
        started = trio.current_time()
        with trio.move_on_after(timeout_s):
            while self.problems(full_sync_state_sets=full_sync_state_sets):
                await trio.sleep(CONVERGENCE_POLL_S)
            return trio.current_time() - started
        raise NotConverged(timeout_s, self.problems(full_sync_state_sets=full_sync_state_sets))

    def summary(self) -> dict[str, Any]:
        """Counts of what the brokers believe, and the simulator's lateness since the previous
        summary (with the run's verdict: `lateness.valid` False means do not trust its failovers)."""
        beliefs = self.beliefs()
        statuses = {status.value: 0 for status in Status}
        for belief in beliefs:
            statuses[belief.status.value] += 1
        problems = convergence_problems(beliefs)
        return {"groups": len(self.group_names), "brokers": len(beliefs), **statuses,
                "masters": sum(1 for b in beliefs if b.status is Status.RUNNING and b.role is Role.MASTER),
                "notConverged": len(problems), "problems": problems[:5], "lateness": self.lateness.take_window(),
                "twoMasters": self.two_masters.to_json(int(trio.current_time() * 1000))}

    # ---- simulated replication -------------------------------------------------------------------

    async def _replicate_loop(self) -> None:
        await self._fixed_rate("replication", self.timing.replication_interval_ms / 1000, self._replicate_all)

    async def _probe_loop(self) -> None:
        await self._fixed_rate("probe", PROBE_INTERVAL_S, lambda: None)

    async def _fixed_rate(self, kind: str, interval_s: float, step: Any) -> None:
        """`step()` every `interval_s`, each wake-up's lateness recorded (see `next_due`)."""
        due = trio.current_time() + interval_s
        while True:
            await trio.sleep_until(due)
            self.lateness.record(kind, trio.current_time() - due)
            step()
            due = next_due(due, interval_s, trio.current_time())

    def _replicate_all(self) -> None:
        now_ms = int(trio.current_time() * 1000)
        for name in self.group_names:
            brokers = self._groups[name]
            self._replicate_group(brokers, now_ms)
            self.two_masters.observe(name, sum(1 for b in brokers if b.serving and b.role is Role.MASTER), now_ms)

    def _replicate_group(self, brokers: list[SimBroker], now_ms: int) -> None:
        by_address = {b.address: b for b in brokers if b.serving and b.role is Role.MASTER}
        for master in by_address.values():
            master.max_offset += self.timing.write_bytes_per_tick
        for slave in brokers:
            source = by_address.get(slave.master_address or "")
            if not self._copies_from(slave, source):
                continue
            assert source is not None and slave.broker_id is not None
            slave.max_offset, slave.epoch = source.max_offset, source.epoch
            source.caught_up_ms[slave.broker_id] = now_ms
        for master in by_address.values():
            caught_up = {i for i, at in master.caught_up_ms.items() if at == now_ms}
            bigger = expanded_set(master.sync_state_set, caught_up)
            if bigger != master.sync_state_set:
                master.propose_sync_state_set(bigger)

    @staticmethod
    def _copies_from(slave: SimBroker, master: SimBroker | None) -> bool:
        return (master is not None and slave is not master and slave.serving and not slave.lagging
                and slave.role is Role.SLAVE and slave.master_epoch == master.master_epoch)

    def _connected_slaves(self, master: SimBroker) -> set[int]:
        """Slaves with an HA connection to `master`: alive (even hung) and following it."""
        return {
            b.broker_id for b in self._groups[master.broker_name]
            if b.broker_id is not None and b is not master and b.status is not Status.KILLED
            and b.master_address == master.address
        }


class TwoMasters:
    """Episodes of a group with two (or more) serving brokers that believe they are MASTER, as seen
    at each replication tick (so durations are exact to one tick). After a failover the old master,
    if alive, holds on until the 1008 or its next 1004 poll tells it; this measures how long."""

    def __init__(self) -> None:
        self._since_ms: dict[str, int] = {}  # group -> when its current episode began
        self.episodes = 0  # episodes begun since the start
        self.longest_ms = 0  # of the episodes ended so far

    def observe(self, name: str, masters: int, now_ms: int) -> None:
        began = self._since_ms.get(name)
        if masters > 1 and began is None:
            self._since_ms[name] = now_ms
            self.episodes += 1
        elif masters <= 1 and began is not None:
            del self._since_ms[name]
            self.longest_ms = max(self.longest_ms, now_ms - began)

    def to_json(self, now_ms: int) -> dict[str, Any]:
        ongoing_ms = max((now_ms - began for began in self._since_ms.values()), default=0)
        return {"groupsNow": len(self._since_ms), "episodes": self.episodes,
                "longestMs": max(self.longest_ms, ongoing_ms)}
