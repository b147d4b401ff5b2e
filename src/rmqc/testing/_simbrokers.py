"""Simulated RocketMQ brokers as a pure model: the broker life cycle of spec section 7 as requests
addressed to controller nodes, answers (or a loss) and 1008 notifications. No I/O, no clock: the
world calls `step(now_us)` on a timer and hands answers back; randomness is the seeded rng given.

One broker: gets an id (1012, then 1013 with its check code), registers (1003), asks for an
election with its own id when its group has no master (1002), sends a one-way 904 to EVERY node
each heartbeat, polls its group (1004) and, as master, expands or shrinks the SyncStateSet (1001,
fenced by the masterEpoch and syncStateSetEpoch it believes). It also reads its group's metadata
(1004) at a random consistency level, on a random node: the reads the checker verifies. It adopts a
1008 only when its masterEpoch is newer than the one it holds (spec 5.4).

As a NameServer client: once it knows its role it registers (103) its group's topic table with
rmqc as its NameServer, brokerId 0 as master and its controller id as slave, every `register_us`
and at once after a role change (a new DataVersion then, as Java's changeToMaster/changeToSlave);
now and then the table gains a topic under a new DataVersion. Some of its reads are 105s
(GET_ROUTEINFO_BY_TOPIC) of any group's topic at a random consistency level on a random node.

A request whose answer does not come within `timeout_us` is lost: the broker keeps what it
believed, so its next 1001 may carry a stale epoch, which the controller must refuse. The SyncState
set decisions are the broker simulator's own (`rmqc.brokersim._model`)."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import orjson

from rmqc.brokersim._model import Phase, Role, expanded_set, shrunk_set
from rmqc.client import heartbeat_ext
from rmqc.controller import register_body
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, dumps_fastjson, loads_fastjson, make_request

from ._simhistory import (
    READ_LEVELS,
    AlterAck,
    ControllerHistory,
    ElectAck,
    GroupView,
    IdGrant,
    Notified,
    ReadRecord,
    RouteRecord,
)

C = ResponseCode
CLUSTER = "sim"
ELECTION_ACCEPTED = (C.SUCCESS, C.CONTROLLER_MASTER_STILL_EXIST)


@dataclass(frozen=True, slots=True)
class BrokerKnobs:
    groups: int = 2
    replicas: int = 3
    step_us: int = 10_000  # how often the world calls step()
    heartbeat_us: int = 30_000
    heartbeat_timeout_ms: int = 200  # sent in every 904: the controller's expiry for this broker
    poll_us: int = 60_000  # 1004 of its own group, to learn the master
    alter_us: int = 40_000  # a master's expand/shrink check
    read_think_max_us: int = 20_000
    read_level_weights: tuple[int, int, int] = (1, 1, 1)  # linearizable, lease, stale
    read_follow_hint_p: float = 0.0  # reads on the node believed to lead, else on any node
    timeout_us: int = 150_000
    retry_us: int = 20_000  # pause after a control request failed or was lost, as a broker's retry
    follow_hint_p: float = 0.8
    register_us: int = 100_000  # 103 of its topic table (Java: 30 s, scaled as the heartbeat's 1 s)
    topics_per_group: int = 2  # the table every broker of a group registers: g0-t0, g0-t1, ...
    extra_topics: int = 3  # topics a table may gain (g0-x0 ...): a new DataVersion each time
    table_change_p: float = 0.1  # per registration: the table gains an extra topic
    route_read_p: float = 0.5  # a read is a 105 of a random topic, else a 1004 of a random group


TOPIC_QUEUES = 4
PERM_READ_WRITE = 6


def group_topics(group: str, knobs: BrokerKnobs) -> tuple[str, ...]:
    """Every topic a broker of `group` may register: its base table, then the extras."""
    return (tuple(f"{group}-t{i}" for i in range(knobs.topics_per_group))
            + tuple(f"{group}-x{i}" for i in range(knobs.extra_topics)))


def route_of(body: bytes) -> tuple[tuple[tuple[str, str | None], ...], tuple[str, ...]]:
    """A standard-JSON TopicRouteData: (broker name, its brokerId 0 address) pairs, and the broker
    names with queue data, both sorted."""
    route = orjson.loads(body)
    masters = tuple(sorted((b["brokerName"], b["brokerAddrs"].get("0")) for b in route.get("brokerDatas") or ()))
    return masters, tuple(sorted(q["brokerName"] for q in route.get("queueDatas") or ()))


class Answer(NamedTuple):
    """What came back for one request: the response, who served it, and who it says leads."""

    response: RemotingCommand
    node: str
    incarnation: int
    leader_hint: str | None
    served_us: int = 0  # when the node answered (the answer then travels to the client)
    applied_index: int = 0  # the node's applied index when it answered


Outgoing = tuple[str, RemotingCommand]  # (node, request)


@dataclass(slots=True)
class _Pending:
    slot: str  # "control" or "read"
    kind: str
    request: RemotingCommand
    node: str
    sent_us: int
    level: str | None = None


def master_of(command: RemotingCommand) -> int | None:
    """extFields masterBrokerId as a number (None: absent or empty, no master)."""
    master = command.ext("masterBrokerId")
    return int(master) if master else None


def group_view(response: RemotingCommand) -> GroupView:
    """The group as a successful 1004 shows it."""
    body = loads_fastjson(response.body) if response.body else {}
    return (
        master_of(response),
        int(response.ext("masterEpoch") or 0),
        int(body.get("syncStateSetEpoch") or 0),
        tuple(sorted(int(i) for i in body.get("syncStateSet") or ())),
    )


class SimBrokerClient:
    """One broker of group `group` (replica number `slot`); see the module text."""

    def __init__(self, group: str, slot: int, node_ids: Sequence[str], rng: random.Random, knobs: BrokerKnobs,
                 history: ControllerHistory, running_ids: Callable[[str], list[int]],
                 groups: Sequence[str]) -> None:
        self.group = group
        self.slot = slot
        self.name = f"{group}.{slot}"
        self.address = f"10.0.{group}.{slot}:10911"
        self.check_code = f"{self.address};{self.name}"
        self.node_ids = tuple(node_ids)
        self.rng = rng
        self.knobs = knobs
        self.history = history
        self.running_ids = running_ids  # ids of this group's running brokers (its HA connections)
        self.groups = tuple(groups)
        self.broker_id: int | None = None  # kept across restarts (the broker's identity file)
        self.max_offset = 0
        self.running = True
        self.running_since_us = 0
        self._opaque = 0
        self.leader_hint: str | None = None
        all_topics = group_topics(group, knobs)
        self.topics = list(all_topics[:knobs.topics_per_group])  # kept across restarts, as topics.json
        self._extra_topics = all_topics[knobs.topics_per_group:]
        self.all_topics = tuple(t for g in self.groups for t in group_topics(g, knobs))
        self.data_version = (0, 0, 0)  # (stateVersion, timestamp, counter), kept with the table
        self._reset_volatile()

    def _reset_volatile(self) -> None:
        self.phase = Phase.INITIAL
        self.polled_us: int | None = None  # when the last successful 1004 of its group was sent
        self.role = Role.NONE
        self.master_id: int | None = None
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.pending: dict[int, _Pending] = {}
        self.id_to_apply: int | None = None  # the answer of 1012, to apply for with 1013
        self.next_heartbeat_us = 0
        self.next_poll_us = 0
        self.next_alter_us = 0
        self.next_read_us = 0
        self.next_control_us = 0
        self.next_register_us = 0
        self.caught_up_us: dict[int, int] = {}

    # -- faults -----------------------------------------------------------------------------------
    def crash(self) -> None:
        """The process dies: no heartbeats, answers are lost; its id survives on disk."""
        self.running = False
        self._reset_volatile()

    def restart(self, now_us: int) -> None:
        self.running = True
        self.running_since_us = now_us
        self._reset_volatile()
        self.next_read_us = now_us

    # -- the world's calls ----------------------------------------------------------------------
    def step(self, now_us: int) -> list[Outgoing]:
        if not self.running:
            return []
        self._expire(now_us)
        out: list[Outgoing] = []
        if self.broker_id is not None and now_us >= self.next_heartbeat_us:
            self.next_heartbeat_us = now_us + self.knobs.heartbeat_us
            out += self._heartbeats()
        if not self._busy("control") and now_us >= self.next_control_us:
            out += self._control(now_us)
        if not self._busy("read") and now_us >= self.next_read_us:
            out += self._read(now_us)
        if not self._busy("route") and self.master_id is not None and now_us >= self.next_register_us:
            out.append(self._register_route(now_us))
        return out

    def on_answer(self, opaque: int, answer: Answer | None, now_us: int) -> list[Outgoing]:
        """An answer (None: lost or timed out) to request `opaque`; may send the next request."""
        if opaque not in self.pending or not self.running:
            return []
        self._finish(opaque, answer, now_us)
        return self.step(now_us)

    def _finish(self, opaque: int, answer: Answer | None, now_us: int) -> None:
        pending = self.pending.pop(opaque)
        if answer is not None:
            self.leader_hint = answer.leader_hint or self.leader_hint
        else:
            self.leader_hint = None
        if pending.slot == "control" and (answer is None or answer.response.code not in ELECTION_ACCEPTED):
            self.next_control_us = now_us + self.knobs.retry_us
        getattr(self, f"_after_{pending.kind}")(pending, answer, now_us)

    def on_notify(self, request: RemotingCommand, now_us: int) -> None:
        """A one-way 1008 from the controller leader (spec 5.4)."""
        if not self.running or self.broker_id is None:
            return
        master, epoch = master_of(request), int(request.ext("masterEpoch") or 0)
        if master is None:
            return
        self.history.add(Notified(self.name, self.group, master, epoch, now_us))
        if epoch > self.master_epoch:
            body = loads_fastjson(request.body) if request.body else {}
            self._adopt(master, epoch, int(request.ext("syncStateSetEpoch") or 0),
                        frozenset(int(i) for i in body.get("syncStateSet") or ()), now_us)

    # -- requests ---------------------------------------------------------------------------------
    def _send(self, slot: str, kind: str, code: int, ext: Mapping[str, object], now_us: int, body: bytes | None = None,
              node: str | None = None, level: str | None = None) -> Outgoing:
        self._opaque += 1
        request = make_request(code, self._opaque, ext, body)
        target = node or self._target()
        self.pending[self._opaque] = _Pending(slot, kind, request, target, now_us, level)
        self.history.requests += 1
        return target, request

    def _target(self) -> str:
        if self.leader_hint is not None and self.rng.random() < self.knobs.follow_hint_p:
            return self.leader_hint
        return self.rng.choice(self.node_ids)

    def _busy(self, slot: str) -> bool:
        return any(p.slot == slot for p in self.pending.values())

    def _expire(self, now_us: int) -> None:
        expired = [o for o, p in sorted(self.pending.items()) if now_us - p.sent_us >= self.knobs.timeout_us]
        for opaque in expired:
            self._finish(opaque, None, now_us)

    def _heartbeats(self) -> list[Outgoing]:
        assert self.broker_id is not None
        self.max_offset += self.rng.randint(0, 1000)
        ext = heartbeat_ext(CLUSTER, self.group, self.broker_id, self.address, epoch=self.master_epoch,
                            max_offset=self.max_offset, heartbeat_timeout_ms=self.knobs.heartbeat_timeout_ms)
        self.history.requests += len(self.node_ids)
        return [(node, make_request(RequestCode.BROKER_HEARTBEAT, 0, ext, oneway=True)) for node in self.node_ids]

    def _control(self, now_us: int) -> list[Outgoing]:
        if self.broker_id is None and self.id_to_apply is not None:
            ext = {"clusterName": CLUSTER, "brokerName": self.group, "appliedBrokerId": self.id_to_apply,
                   "registerCheckCode": self.check_code}
            return [self._send("control", "apply_id", RequestCode.CONTROLLER_APPLY_BROKER_ID, ext, now_us)]
        if self.broker_id is None:
            return [self._send("control", "next_id", RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                               {"clusterName": CLUSTER, "brokerName": self.group}, now_us)]
        if self.phase is Phase.INITIAL:
            return [self._register(now_us)]
        if self.master_id is None:
            return [self._elect_self(now_us)]
        if self.role is Role.MASTER and now_us >= self.next_alter_us:
            self.next_alter_us = now_us + self.knobs.alter_us
            alter = self._alter(now_us)
            if alter is not None:
                return [alter]
        if now_us >= self.next_poll_us:
            self.next_poll_us = now_us + self.knobs.poll_us
            return [self._send("control", "poll", RequestCode.CONTROLLER_GET_REPLICA_INFO,
                               {"brokerName": self.group}, now_us)]
        return []

    def _register(self, now_us: int) -> Outgoing:
        ext = {"clusterName": CLUSTER, "brokerName": self.group, "brokerId": self.broker_id,
               "brokerAddress": self.address}
        return self._send("control", "register", RequestCode.CONTROLLER_REGISTER_BROKER, ext, now_us)

    def _elect_self(self, now_us: int) -> Outgoing:
        ext = {"clusterName": CLUSTER, "brokerName": self.group, "brokerId": self.broker_id,
               "designateElect": False}
        return self._send("control", "elect", RequestCode.CONTROLLER_ELECT_MASTER, ext, now_us)

    def _alter(self, now_us: int) -> Outgoing | None:
        """Expand by the slaves caught up, or shrink by those silent too long (spec 7.3)."""
        assert self.broker_id is not None
        connected = [i for i in self.running_ids(self.group) if i != self.broker_id]
        for broker_id in connected:
            if self.rng.random() < 0.7:
                self.caught_up_us[broker_id] = now_us
        caught = [i for i, at in self.caught_up_us.items() if at == now_us]
        new_set = expanded_set(self.sync_state_set, caught)
        if new_set == self.sync_state_set:
            new_set = shrunk_set(self.sync_state_set, self.broker_id,
                                 {i: t // 1000 for i, t in self.caught_up_us.items()},
                                 connected, now_us // 1000, self.knobs.alter_us // 1000)
        if new_set == self.sync_state_set:
            return None
        ext = {"brokerName": self.group, "masterBrokerId": self.broker_id, "masterEpoch": self.master_epoch}
        body = dumps_fastjson({"syncStateSet": sorted(new_set), "syncStateSetEpoch": self.sync_state_set_epoch})
        return self._send("control", "alter", RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, ext, now_us, body)

    def _read(self, now_us: int) -> list[Outgoing]:
        self.next_read_us = now_us + self.rng.randrange(self.knobs.read_think_max_us + 1)
        level = self.rng.choices(READ_LEVELS, weights=self.knobs.read_level_weights)[0]
        hinted = self.leader_hint is not None and self.rng.random() < self.knobs.read_follow_hint_p
        node = self.leader_hint if hinted and self.leader_hint is not None else self.rng.choice(self.node_ids)
        if self.rng.random() < self.knobs.route_read_p:
            ext = {"topic": self.rng.choice(self.all_topics), "acceptStandardJsonOnly": "true", "consistency": level}
            return [self._send("read", "route_read", RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, now_us,
                               node=node, level=level)]
        ext = {"brokerName": self.rng.choice(self.groups), "consistency": level}
        return [self._send("read", "read", RequestCode.CONTROLLER_GET_REPLICA_INFO, ext, now_us,
                           node=node, level=level)]

    def _register_route(self, now_us: int) -> Outgoing:
        """103 of the topic table (registerBrokerAll); now and then the table gains a topic first."""
        assert self.broker_id is not None
        self.next_register_us = now_us + self.knobs.register_us
        missing = [t for t in self._extra_topics if t not in self.topics]
        if missing and self.rng.random() < self.knobs.table_change_p:
            self.topics.append(self.rng.choice(missing))
            self._next_data_version(now_us)
        rows = [(topic, TOPIC_QUEUES, TOPIC_QUEUES, PERM_READ_WRITE, 0) for topic in sorted(self.topics)]
        body = register_body(self.data_version, rows)
        ext = {"brokerName": self.group, "brokerAddr": self.address, "clusterName": CLUSTER,
               "haServerAddr": self.address, "brokerId": 0 if self.role is Role.MASTER else self.broker_id,
               "heartbeatTimeoutMillis": self.knobs.heartbeat_timeout_ms, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
        return self._send("route", "register_route", RequestCode.REGISTER_BROKER, ext, now_us, body)

    def _next_data_version(self, now_us: int) -> None:
        _, _, counter = self.data_version
        self.data_version = (self.master_epoch, now_us // 1000, counter + 1)

    # -- answers ----------------------------------------------------------------------------------
    def _after_next_id(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is not None and answer.response.code == C.SUCCESS:
            self.id_to_apply = int(answer.response.ext("nextBrokerId") or 0)

    def _after_apply_id(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        self.id_to_apply = None  # taken, refused or lost: ask for the next id again
        if answer is None or answer.response.code != C.SUCCESS:
            return
        self.broker_id = int(pending.request.ext("appliedBrokerId") or 0)
        self.history.add(IdGrant(self.group, self.broker_id, self.check_code, now_us))

    def _after_register(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None:
            return
        response = answer.response
        if response.code == C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED:
            self.broker_id = None  # cleaned by an admin: apply for a new id (spec 7.2)
            return
        if response.code != C.SUCCESS:
            return
        self.phase = Phase.RUNNING
        master = master_of(response)
        if master is not None:
            self._adopt(master, int(response.ext("masterEpoch") or 0),
                        int(response.ext("syncStateSetEpoch") or 0), frozenset(), now_us)

    def _after_elect(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None or answer.response.code not in ELECTION_ACCEPTED:
            return
        response = answer.response
        master = master_of(response)
        if master is None:
            return
        epoch = int(response.ext("masterEpoch") or 0)
        if response.code == C.SUCCESS:
            self.history.add(ElectAck(self.group, master, epoch, now_us))
        body = loads_fastjson(response.body) if response.body else {}
        self._adopt(master, epoch, int(response.ext("syncStateSetEpoch") or 0),
                    frozenset(int(i) for i in body.get("syncStateSet") or ()), now_us)

    def _after_alter(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None:
            return  # lost: the old epoch stays believed (the next 1001 may be stale)
        response = answer.response
        if response.code == C.SUCCESS:
            body = loads_fastjson(pending.request.body or b"{}")
            new_epoch = int(response.ext("newSyncStateSetEpoch") or 0)
            self.history.add(AlterAck(self.group, self.broker_id or 0, self.master_epoch,
                                      int(body["syncStateSetEpoch"]), tuple(body["syncStateSet"]), new_epoch, now_us))
            self.sync_state_set = frozenset(body["syncStateSet"])
            self.sync_state_set_epoch = new_epoch
        elif response.code in (C.CONTROLLER_FENCED_MASTER_EPOCH, C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                               C.CONTROLLER_INVALID_MASTER):
            self.next_poll_us = now_us  # learn the current state before the next try

    def _after_poll(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None:
            return
        if answer.response.code == C.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            self.phase = Phase.INITIAL  # spec 7.3: re-register
            return
        if answer.response.code != C.SUCCESS:
            return
        self.polled_us = pending.sent_us
        master, epoch, sss_epoch, sss = group_view(answer.response)
        if master is None:
            self.master_id = None
            self.role = Role.NONE
        elif epoch > self.master_epoch or (epoch == self.master_epoch and sss_epoch > self.sync_state_set_epoch):
            self._adopt(master, epoch, sss_epoch, frozenset(sss), now_us)

    def _after_register_route(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None or answer.response.code != C.SUCCESS:
            self.next_register_us = now_us + self.knobs.retry_us  # Java: the next period; sooner here

    def _after_route_read(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None or answer.response.code not in (C.SUCCESS, C.TOPIC_NOT_EXIST):
            return
        assert pending.level is not None
        body = answer.response.body if answer.response.code == C.SUCCESS else None
        masters, queues = route_of(body) if body else ((), ())
        self.history.add(RouteRecord(answer.node, answer.incarnation, pending.level,
                                     str(pending.request.ext("topic")), pending.sent_us, answer.served_us,
                                     answer.applied_index, masters, queues, body))

    def _after_read(self, pending: _Pending, answer: Answer | None, now_us: int) -> None:
        if answer is None or answer.response.code != C.SUCCESS:
            return
        assert pending.level is not None
        self.history.add(ReadRecord(answer.node, answer.incarnation, pending.level,
                                    str(pending.request.ext("brokerName")), pending.sent_us, now_us,
                                    group_view(answer.response), answer.served_us))

    def _adopt(self, master: int, epoch: int, sss_epoch: int, sss: frozenset[int], now_us: int) -> None:
        if (master, epoch) != (self.master_id, self.master_epoch):
            # changeToMaster / changeToSlave: a new DataVersion, registered at once
            self.master_epoch = epoch
            self._next_data_version(now_us)
            self.next_register_us = now_us
        self.master_id = master
        self.master_epoch = epoch
        self.sync_state_set_epoch = sss_epoch
        self.sync_state_set = sss or frozenset({master})
        self.role = Role.MASTER if master == self.broker_id else Role.SLAVE
        self.phase = Phase.RUNNING
        self.caught_up_us = {}
