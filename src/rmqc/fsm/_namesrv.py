"""The NameServer's replicated state (docs/namesrv.md): broker registrations, topic routes (queue
data per broker name) and KV config, in the same log and snapshot as the controller's groups.

Java's RouteInfoManager keeps the same tables as soft state on each NameServer; here they change
only by committed commands, so every node holds the same routes at the same applied index.

Fencing (the reason the NameServer lives in the controller): for a broker name the controller
manages (it holds a BrokerGroup of that name), the master of a route is the group's committed
master, found by its address among the registrations, whatever id the registration claims; other
registrations appear under their controller ids; addresses the controller does not know are left
out. Only the committed master's registrations update the group's queue data. For a broker name
the controller does not manage, Java's rule holds: brokerId 0 is the master.

Pure: no I/O, no clock. Liveness of registrations (Java: 120 s without a registration) is the
leader's judgement; it leaves the route through an UnregisterBrokerRoute command.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from rmqc._gc import collector_paused

from ._chunks import (
    KV_ENTRIES,
    KV_NAMESPACE,
    REGISTRATIONS,
    SNAPSHOT_STEP_KV_BYTES,
    TOPICS,
    batches,
    topic_weight,
)
from ._commands import (
    DeleteKvConfig,
    DeleteTopicRoute,
    PutKvConfig,
    RegisterBrokerRoute,
    RegisterTopicRoute,
    SetWritePermOfBroker,
    TopicRow,
    UnregisterBrokerRoute,
)
from ._model import BrokerGroup

# Why: far above a real fleet (the bench shape is 10,000 brokers of 100 topics each), low enough
# that a hostile client cannot grow the replicated state, and every snapshot, without limit.
# Constants, not options: apply must decide the same on every node.
MAX_TOPICS_PER_REGISTRATION = 65_536
MAX_TOPICS = 1_000_000
MAX_REGISTRATIONS = 100_000
MAX_KV_ENTRIES = 100_000
MAX_KV_KEY_BYTES = 1024
MAX_KV_VALUE_BYTES = 65_536
MAX_NAME_BYTES = 1024  # topic, cluster and broker names, addresses

MASTER_ID = 0  # MixAll.MASTER_ID
PERM_WRITE, PERM_READ = 2, 4  # PermName
# Why: the cache holds one encoded answer per (topic, JSON dialect) asked for; a client walking
# through every topic cannot make it grow past this (the oldest answer makes room).
MAX_CACHED_ROUTES = 100_000


@dataclass(frozen=True, slots=True)
class QueueData:
    """Java's QueueData of one broker name for one topic."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


@dataclass(frozen=True, slots=True)
class Registration:
    """One registered broker (Java: BrokerAddrInfo(cluster, address) -> BrokerLiveInfo, and its
    entry in BrokerData.brokerAddrs)."""

    cluster_name: str
    broker_name: str
    broker_id: int  # the id the broker claimed
    address: str
    ha_address: str
    data_version: tuple[int, int, int]  # (stateVersion, timestamp, counter)


def managed(group: BrokerGroup | None) -> bool:
    """The controller manages this broker name: route masters come from its committed state."""
    return group is not None


class NamesrvRefused(Exception):
    """Apply refused a command; `status` names why (an ApplyStatus value), `detail` says it."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class NamesrvState:
    def __init__(self) -> None:
        # (cluster, address) -> registration; changed only through _put/_drop, which keep the
        # index by broker name (a 103 reads its name's registrations: a scan of all of them made
        # a fleet's first round quadratic, 37% of a leader's time at 10,000 brokers)
        self.registrations: dict[tuple[str, str], Registration] = {}
        self._by_name: dict[str, dict[tuple[str, str], Registration]] = {}
        # topic -> broker name -> queue data. An inner table is never changed, only replaced
        # (_set_queues): a snapshot's capture shares them (copying 250,000 of them stalled the loop
        # for 0.45 s), and the index of topics by broker name is kept with it.
        self.topics: dict[str, dict[str, QueueData]] = {}
        # A list, not a set: 10,000 sets of 100 topics took 145 MB, the lists 9 (a topic leaves a
        # name's list only when deleted: a scan of that one list)
        self._topics_of_name: dict[str, list[str]] = {}
        self.kv: dict[str, dict[str, str]] = {}  # namespace -> key -> value
        # Encoded 105 answers, local to this node (never in a snapshot): (topic, standard JSON) ->
        # body. Every change a route depends on drops the answers it affects (`_forget_*`): its
        # topic's queue data, and the registrations and controller group of its broker names.
        self._routes: dict[tuple[str, bool], bytes] = {}
        # Which cached topics name a broker name, both ways, so that dropping an answer also drops
        # its index entries (the index never outgrows the cache).
        self._cached_topics_of: dict[str, set[str]] = {}  # broker name -> cached topics naming it
        self._names_of_cached: dict[str, tuple[str, ...]] = {}  # cached topic -> its broker names

    # ---- the route cache ---------------------------------------------------------------------------

    def cached_route(self, topic: str, standard_json: bool) -> bytes | None:
        return self._routes.get((topic, standard_json))

    def cache_route(self, topic: str, standard_json: bool, body: bytes) -> None:
        if len(self._routes) >= MAX_CACHED_ROUTES:
            self._forget_topic(next(iter(self._routes))[0])  # the oldest answer makes room
        self._routes[(topic, standard_json)] = body
        names = tuple(self.topics.get(topic, ()))
        self._names_of_cached[topic] = names
        for name in names:
            self._cached_topics_of.setdefault(name, set()).add(topic)

    def forget_broker_name(self, broker_name: str) -> None:
        """The registrations or the controller group of `broker_name` changed (also its master)."""
        for topic in list(self._cached_topics_of.get(broker_name, ())):
            self._forget_topic(topic)

    def _forget_topic(self, topic: str) -> None:
        self._routes.pop((topic, False), None)
        self._routes.pop((topic, True), None)
        for name in self._names_of_cached.pop(topic, ()):
            topics = self._cached_topics_of.get(name)
            if topics is not None:
                topics.discard(topic)
                if not topics:
                    del self._cached_topics_of[name]

    def cache_size(self) -> tuple[int, int]:
        """(answers cached, index entries): both bounded by MAX_CACHED_ROUTES answers."""
        return len(self._routes), sum(len(topics) for topics in self._cached_topics_of.values())

    # ---- reads -----------------------------------------------------------------------------------

    def registrations_of(self, broker_name: str) -> list[Registration]:
        return sorted(self._by_name.get(broker_name, {}).values(), key=lambda r: (r.broker_id, r.address))

    def broker_names(self) -> Iterator[str]:
        return iter(sorted(self._by_name))

    def _set_queues(self, topic: str, queues: dict[str, QueueData]) -> None:
        """The one place a topic's queue data changes: `queues` (a new table, none when empty)."""
        # one string per topic name, whoever sent it: the index would otherwise keep each
        # registration's own copy alive (70 MB at 10,000 brokers sharing 100 topics in fours)
        topic = sys.intern(topic)
        old = self.topics.get(topic, {})
        for name in old.keys() - queues.keys():
            of_name = self._topics_of_name[name]
            of_name.remove(topic)
            if not of_name:
                del self._topics_of_name[name]
        for name in queues.keys() - old.keys():
            self._topics_of_name.setdefault(name, []).append(topic)
        if queues:
            self.topics[topic] = queues
        else:
            self.topics.pop(topic, None)

    def _put(self, registration: Registration) -> None:
        key = (registration.cluster_name, registration.address)
        self._drop(key)
        self.registrations[key] = registration
        self._by_name.setdefault(registration.broker_name, {})[key] = registration

    def _drop(self, key: tuple[str, str]) -> Registration | None:
        old = self.registrations.pop(key, None)
        if old is not None:
            of_name = self._by_name[old.broker_name]
            del of_name[key]
            if not of_name:
                del self._by_name[old.broker_name]
        return old

    def clusters(self) -> dict[str, list[str]]:
        """cluster -> broker names (Java's clusterAddrTable)."""
        table: dict[str, set[str]] = {}
        for r in self.registrations.values():
            table.setdefault(r.cluster_name, set()).add(r.broker_name)
        return {cluster: sorted(names) for cluster, names in sorted(table.items())}

    def cluster_of(self, broker_name: str) -> str | None:
        return next((r.cluster_name for r in self._by_name.get(broker_name, {}).values()), None)

    def broker_addrs(self, broker_name: str, group: BrokerGroup | None) -> dict[int, str]:
        """BrokerData.brokerAddrs of a broker name, fenced (module docstring)."""
        registrations = self.registrations_of(broker_name)
        if not managed(group):
            return {r.broker_id: r.address for r in registrations}
        assert group is not None
        ids_by_address = {replica.address: broker_id for broker_id, replica in group.replicas.items()}
        master_address = group.master_address
        addrs: dict[int, str] = {}
        for r in registrations:
            if master_address is not None and r.address == master_address:
                addrs[MASTER_ID] = r.address
            elif r.address in ids_by_address and ids_by_address[r.address] != group.master_id:
                addrs[ids_by_address[r.address]] = r.address
        return addrs

    def master_registration(self, broker_name: str, group: BrokerGroup | None) -> Registration | None:
        """The registration a route names as master (for a 103 answer's masterAddr/haServerAddr)."""
        address = self.broker_addrs(broker_name, group).get(MASTER_ID)
        if address is None:
            return None
        return next((r for r in self.registrations_of(broker_name) if r.address == address), None)

    def registration(self, cluster_name: str, address: str) -> Registration | None:
        return self.registrations.get((cluster_name, address))

    def is_master_registration(self, cmd: RegisterBrokerRoute, group: BrokerGroup | None) -> bool:
        """Whether this registration's topics become the broker name's queue data."""
        if managed(group):
            assert group is not None
            return group.master_address is not None and group.master_address == cmd.broker_address
        return cmd.broker_id == MASTER_ID

    def register_changes(self, cmd: RegisterBrokerRoute, group: BrokerGroup | None) -> bool:
        """Whether applying `cmd` would change anything (the leader writes nothing otherwise: a
        registration that changes nothing only refreshes liveness). As Java's RouteInfoManager, a
        master's topics are taken only from a new registration or a new data version: a topic
        table whose version did not change is not compared with the queue data, which 205/327 may
        have changed since (a broker's next registration would undo an operator's wipeWritePerm)."""
        old = self.registrations.get((cmd.cluster_name, cmd.broker_address))
        if old is None or old != registration_of(cmd):
            return True
        return bool(self._same_id(cmd, group))

    def _same_id(self, cmd: RegisterBrokerRoute, group: BrokerGroup | None) -> list[Registration]:
        """Registrations of the same claimed id at another address: Java keeps one address per id.
        Not for a managed broker name, where claimed ids mean nothing (a deposed master claiming 0
        must not evict the committed master's registration)."""
        if managed(group):
            return []
        return [r for r in self.registrations_of(cmd.broker_name)
                if r.broker_id == cmd.broker_id and r.address != cmd.broker_address
                and r.cluster_name == cmd.cluster_name]

    def kv_list(self, namespace: str) -> dict[str, str] | None:
        table = self.kv.get(namespace)
        return dict(table) if table else None

    def __bool__(self) -> bool:
        return bool(self.registrations or self.topics or self.kv)

    # ---- apply -----------------------------------------------------------------------------------

    def register(self, cmd: RegisterBrokerRoute, group: BrokerGroup | None) -> None:
        """Raises NamesrvRefused (nothing changed) when a bound or Java's stateVersion rule refuses."""
        if len(cmd.topics) > MAX_TOPICS_PER_REGISTRATION:
            raise NamesrvRefused("too_many_topics", f"{len(cmd.topics)} topics in one registration exceed "
                                 f"the bound of {MAX_TOPICS_PER_REGISTRATION}")
        key = (cmd.cluster_name, cmd.broker_address)
        if key not in self.registrations and len(self.registrations) >= MAX_REGISTRATIONS:
            raise NamesrvRefused("too_many_registrations", f"{len(self.registrations)} brokers registered: "
                                 f"the bound is {MAX_REGISTRATIONS}")
        same_id = self._same_id(cmd, group)
        for other in same_id:  # Java: an id held at another address with a newer stateVersion wins
            if other.data_version[0] > cmd.state_version:
                raise NamesrvRefused("stale_registration", f"broker id {cmd.broker_id} of {cmd.broker_name} is "
                                     f"registered at {other.address} with stateVersion {other.data_version[0]} > "
                                     f"{cmd.state_version}")
        master = self.is_master_registration(cmd, group)
        if master:
            new_topics = sum(1 for row in cmd.topics if row[0] not in self.topics)
            if len(self.topics) + new_topics > MAX_TOPICS:
                raise NamesrvRefused("too_many_topics", f"{len(self.topics) + new_topics} topics exceed the "
                                     f"bound of {MAX_TOPICS}")
        for other in same_id:  # Java replaces brokerAddrs[id]; the old address's entry goes with it
            self._drop((other.cluster_name, other.address))
        self._put(registration_of(cmd))
        self.forget_broker_name(cmd.broker_name)
        if master:
            for row in cmd.topics:
                self._set_queues(row[0], {**self.topics.get(row[0], {}), cmd.broker_name: _queue_data(row)})
                self._forget_topic(row[0])

    def unregister(self, cmd: UnregisterBrokerRoute) -> bool:
        """Java's unRegisterBroker: the registration goes; when it was the broker name's last, the
        name's queue data goes too (and topics left without queue data)."""
        old = self._drop((cmd.cluster_name, cmd.broker_address))
        if old is None:
            return False
        self.forget_broker_name(old.broker_name)
        if old.broker_name in self._by_name:
            return True
        # the name leaves every topic at once: its list goes whole (removing topics from it one by
        # one through _set_queues would scan it once per topic)
        for topic in self._topics_of_name.pop(old.broker_name, ()):
            remaining = {name: q for name, q in self.topics[topic].items() if name != old.broker_name}
            if remaining:
                self.topics[topic] = remaining
            else:
                del self.topics[topic]
        return True

    def delete_topic(self, cmd: DeleteTopicRoute) -> bool:
        self._forget_topic(cmd.topic)
        if cmd.cluster_name:
            names = set(self.clusters().get(cmd.cluster_name, ()))
            queues = self.topics.get(cmd.topic)
            if not names or queues is None:
                return False
            self._set_queues(cmd.topic, {name: q for name, q in queues.items() if name not in names})
            return True
        existed = cmd.topic in self.topics
        self._set_queues(cmd.topic, {})
        return existed

    def register_topic(self, cmd: RegisterTopicRoute) -> None:
        """Java's registerTopic: the rows replace the queue data of their broker names; nothing
        changes when one of the names is not registered (Java logs "illegal broker" and answers
        success)."""
        check_topic(cmd.topic)
        unknown = sorted({row[0] for row in cmd.queues if row[0] not in self._by_name})
        if unknown:
            raise NamesrvRefused("not_found", f"topic {cmd.topic}: broker names not registered: {', '.join(unknown)}")
        if cmd.topic not in self.topics and len(self.topics) >= MAX_TOPICS:
            raise NamesrvRefused("too_many_topics", f"{len(self.topics) + 1} topics exceed the bound of {MAX_TOPICS}")
        rows = {row[0]: _queue_data(row) for row in cmd.queues}
        self._set_queues(cmd.topic, {**self.topics.get(cmd.topic, {}), **rows})
        self._forget_topic(cmd.topic)

    def set_write_perm(self, cmd: SetWritePermOfBroker) -> int:
        """205 / 327 (Java's operateWritePermOfBroker): how many topics of the broker name it touched."""
        touched = sorted(self._topics_of_name.get(cmd.broker_name, ()))
        for topic in touched:
            old = self.topics[topic][cmd.broker_name]
            perm = old.perm & ~PERM_WRITE if cmd.wipe else PERM_READ | PERM_WRITE
            new = QueueData(old.read_queue_nums, old.write_queue_nums, perm, old.topic_sys_flag)
            self._set_queues(topic, {**self.topics[topic], cmd.broker_name: new})
            self._forget_topic(topic)
        return len(touched)

    def put_kv(self, cmd: PutKvConfig) -> None:
        check_kv(cmd.namespace, cmd.key, cmd.value)
        table = self.kv.get(cmd.namespace)
        exists = table is not None and cmd.key in table
        if not exists and sum(len(t) for t in self.kv.values()) >= MAX_KV_ENTRIES:
            raise NamesrvRefused("too_many_kv_entries", f"KV config holds {MAX_KV_ENTRIES} entries: the bound")
        self.kv.setdefault(cmd.namespace, {})[cmd.key] = cmd.value

    def delete_kv(self, cmd: DeleteKvConfig) -> bool:
        table = self.kv.get(cmd.namespace)
        if table is None or table.pop(cmd.key, None) is None:
            return False
        if not table:
            del self.kv[cmd.namespace]
        return True

    # ---- snapshot --------------------------------------------------------------------------------

    def capture(self) -> NamesrvCapture:
        """What a snapshot encodes later, which later changes do not reach: the records and the
        inner topic tables are never changed in place, so shallow copies do (fsm._state.StateCapture)."""
        return NamesrvCapture(list(self.registrations.values()), dict(self.topics),
                              {namespace: dict(table) for namespace, table in self.kv.items()})

    # A snapshot's records, added to a state that is being built (never the live one): the checks and
    # the indexes of apply's own paths (_put, _set_queues), so a restored state keeps the same
    # invariants. They raise TypeError or ValueError on a malformed record (the caller names where).

    def restore_registrations(self, rows: Iterable[Any]) -> None:
        for cluster, name, broker_id, address, ha, version in rows:
            if not (type(cluster) is str and type(name) is str and type(address) is str and type(ha) is str
                    and type(broker_id) is int and len(version) == 3 and all(type(v) is int for v in version)):
                raise ValueError("a registration field has the wrong type")
            self._put(restored_registration(cluster, name, broker_id, address, ha,
                                            (version[0], version[1], version[2])))

    def restore_topics(self, topics: Iterable[tuple[str, Any]]) -> None:
        """(topic, {broker name: [read, write, perm, flag]}) pairs."""
        intern, all_topics, of_name = sys.intern, self.topics, self._topics_of_name
        for topic, queues in topics:
            table = {}
            for name, (read, write, perm, flag) in queues.items():
                if not (type(read) is int and type(write) is int and type(perm) is int and type(flag) is int):
                    raise ValueError(f"queue data of {topic!r} is not integers")
                table[name] = restored_queue_data(read, write, perm, flag)
            if not table or topic in all_topics:  # what a snapshot written by rmqc never holds
                self._set_queues(topic, table)
                continue
            topic = intern(topic)  # as _set_queues does, without its diff of the old table (there is none)
            all_topics[topic] = table
            for name in table:
                names = of_name.get(name)
                if names is None:
                    of_name[name] = [topic]
                else:
                    names.append(topic)

    def restore_kv(self, namespace: object, table: dict[str, Any], *, merge: bool = False) -> None:
        """A namespace's entries; with `merge`, more entries of the namespace restored last."""
        if type(namespace) is not str or not all(type(k) is str and type(v) is str for k, v in table.items()):
            raise ValueError(f"KV namespace {namespace!r} is not strings")
        if merge:
            self.kv[namespace].update(table)
        else:
            self.kv[namespace] = dict(table)

    def release_steps(self, items_per_step: int) -> Iterator[None]:
        """Empties this state about `items_per_step` records a step (None after each): dropping a
        big state at once frees every record in one call, which holds the GIL (0.18 s for 250,000
        topics and 100,000 groups)."""
        for table in (self.topics, self._topics_of_name, self.registrations, self._by_name, self.kv,
                      self._routes, self._cached_topics_of, self._names_of_cached):
            while table:
                for _ in range(min(items_per_step, len(table))):
                    table.popitem()
                yield None


@dataclass(frozen=True, slots=True)
class NamesrvCapture:
    """The NameServer's part of a snapshot, as captured; encoded a step at a time."""

    registrations: list[Registration]
    topics: dict[str, dict[str, QueueData]]
    kv: dict[str, dict[str, str]]

    def __bool__(self) -> bool:
        return bool(self.registrations or self.topics or self.kv)

    def chunks(self, items_per_step: int) -> Iterator[tuple[int, bytes]]:
        """The section's pieces (fsm._chunks), each of about `items_per_step` records, encoded as
        they are asked for: the caller lets other work run between two (250,000 topics took 0.7 s
        in one piece)."""
        registrations = self.registrations
        for start in range(0, len(registrations), items_per_step):
            with collector_paused():
                piece = orjson.dumps([[r.cluster_name, r.broker_name, r.broker_id, r.address, r.ha_address,
                                       list(r.data_version)] for r in registrations[start:start + items_per_step]])
            yield REGISTRATIONS, piece[1:-1]
        # a captured copy: nothing changes it between steps
        for batch in batches(self.topics.items(), items_per_step, topic_weight):
            with collector_paused():
                piece = orjson.dumps({topic: {name: [q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag]
                                              for name, q in queues.items()} for topic, queues in batch})
            yield TOPICS, piece[1:-1]
        for namespace, table in self.kv.items():
            yield KV_NAMESPACE, orjson.dumps(namespace)
            entries = iter(table.items())
            while True:
                part, size = {}, 0
                for key, value in entries:
                    part[key] = value
                    size += len(key) + len(value)
                    if len(part) >= items_per_step or size >= SNAPSHOT_STEP_KV_BYTES:
                        break
                if not part:
                    break
                yield KV_ENTRIES, orjson.dumps(part)[1:-1]


# ---- restore's constructors (as fsm._model's: the checked values straight into the slots, half
# the cost of the frozen dataclasses' __init__; tests/fsm checks that they name every field)

_new = object.__new__
QUEUE_DATA_FIELDS = ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
REGISTRATION_FIELDS = ("cluster_name", "broker_name", "broker_id", "address", "ha_address", "data_version")
_set_read, _set_write, _set_perm, _set_flag = (getattr(QueueData, name).__set__ for name in QUEUE_DATA_FIELDS)
_set_cluster, _set_name, _set_id, _set_address, _set_ha, _set_version = (
    getattr(Registration, name).__set__ for name in REGISTRATION_FIELDS)


def restored_queue_data(read_queue_nums: int, write_queue_nums: int, perm: int, topic_sys_flag: int) -> QueueData:
    queue_data = _new(QueueData)
    _set_read(queue_data, read_queue_nums)
    _set_write(queue_data, write_queue_nums)
    _set_perm(queue_data, perm)
    _set_flag(queue_data, topic_sys_flag)
    return queue_data


def restored_registration(cluster_name: str, broker_name: str, broker_id: int, address: str, ha_address: str,
                          data_version: tuple[int, int, int]) -> Registration:
    registration = _new(Registration)
    _set_cluster(registration, cluster_name)
    _set_name(registration, broker_name)
    _set_id(registration, broker_id)
    _set_address(registration, address)
    _set_ha(registration, ha_address)
    _set_version(registration, data_version)
    return registration


def check_kv(namespace: str, key: str, value: str) -> None:
    """The bounds of one KV entry (the leader checks before proposing, apply again)."""
    if len(namespace.encode()) > MAX_KV_KEY_BYTES or len(key.encode()) > MAX_KV_KEY_BYTES:
        raise NamesrvRefused("kv_too_large", f"KV namespace and key are limited to {MAX_KV_KEY_BYTES} bytes")
    if len(value.encode()) > MAX_KV_VALUE_BYTES:
        raise NamesrvRefused("kv_too_large", f"KV value of {len(value.encode())} bytes exceeds the bound of "
                             f"{MAX_KV_VALUE_BYTES}")


def check_topic(topic: str) -> None:
    """A topic name's bound (the leader checks before proposing, apply again)."""
    if not topic or len(topic.encode()) > MAX_NAME_BYTES:
        raise NamesrvRefused("name_too_long", f"a topic name must be 1 to {MAX_NAME_BYTES} bytes")


def registration_of(cmd: RegisterBrokerRoute) -> Registration:
    return Registration(cmd.cluster_name, cmd.broker_name, cmd.broker_id, cmd.broker_address, cmd.ha_address,
                        (cmd.state_version, cmd.data_timestamp, cmd.data_counter))


def _queue_data(row: TopicRow) -> QueueData:
    return QueueData(row[1], row[2], row[3], row[4])
