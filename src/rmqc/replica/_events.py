"""What happened on this node, for `rmqc events` (docs/operations.md "Events"): failovers with
their reason, the candidates weighed and their timeline, leader and membership changes, alarms.

A failover's timeline has two halves. What the leader decided travels in the committed ElectMaster
(the master last alive, the detection, the proposal), so every node reports it alike when it
applies the entry (`committed` is that node's own apply time). What follows the commit: the leader
sends each replica its 1008 and commits a record of it (NotificationSent), so every node reports
the `notified` step when it applies that record; and every node that takes a broker's heartbeats
sees each replica's first heartbeat naming the new masterEpoch (`heartbeat`).

Bounded: the events are a ring of MAX_EVENTS, numbered from 1 by `seq`; a reader asks for the
events after the last `seq` it saw and learns how many it missed when the ring moved past them.
The brokers awaited (a notification or a heartbeat) are bounded by MAX_AWAITED, oldest dropped.

RMQC_EVENTS (60008), `rmqc events`' request: extFields `after` (the cursor), `waitMs` (how long to
hold the request while there is nothing after the cursor: a long poll, which the shell holds) and
`limit`, read by `events_query`; the answer's body (`events_answer`): {"events": [...], "missed": n,
"lastSeq": n}; `missed` > 0 says the reader fell behind and the ring dropped that many events before
it asked. Any node answers with its own events, a follower too.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from rmqc.fsm import ApplyResult, ElectMaster, NotificationSent
from rmqc.liveness import BrokerKey, Heartbeat
from rmqc.remoting import RemotingCommand, ResponseCode, make_response

# Events kept per node: a few hours of failovers and changes on a busy cluster, about 2 MB at most.
MAX_EVENTS = 4096
# Brokers whose 1008 or first heartbeat after a failover is awaited: a mass failover of the design
# target (10,000 groups of 3) fits; beyond it the oldest are no longer reported.
MAX_AWAITED = 100_000
# Events one answer carries at most (the answer is one remoting frame).
MAX_EVENTS_PER_PAGE = 512
# The longest wait an RMQC_EVENTS request gets, far below the client's own timeout (rmqc events asks
# with a larger one): an answer always comes.
MAX_EVENTS_WAIT_MS = 20_000

FAILOVER = "failover"
FAILOVER_STEP = "failover_step"
LEADER_CHANGED = "leader_changed"
MEMBERSHIP_CHANGED = "membership_changed"
ALARM = "alarm"
NOTIFIED = "notified"  # the leader sent the replica its 1008
HEARTBEAT = "heartbeat"  # the replica's first heartbeat naming the new masterEpoch, on this node
FAILOVER_STEPS = (NOTIFIED, HEARTBEAT)  # after the commit (the labels of a metric)


@dataclass(frozen=True, slots=True)
class EventPage:
    """The events after a reader's cursor. `missed`: events the ring dropped before the reader
    asked for them (the reader fell behind); `last_seq`: the newest event of this node."""

    events: list[dict[str, Any]]
    missed: int
    last_seq: int

    def to_json(self) -> dict[str, Any]:
        return {"events": self.events, "missed": self.missed, "lastSeq": self.last_seq}


class BadEventsRequest(ValueError):
    """An RMQC_EVENTS field is not a non-negative integer."""


@dataclass(frozen=True, slots=True)
class EventsQuery:
    """An RMQC_EVENTS request's fields: at most `limit` events after the cursor `after`, and how long
    to wait for one while there is none (`wait_ms`)."""

    after: int
    wait_ms: int
    limit: int


def events_query(request: RemotingCommand) -> EventsQuery:
    """The request's fields, bounded (MAX_EVENTS_WAIT_MS, MAX_EVENTS_PER_PAGE; a limit of 0 is the most);
    BadEventsRequest names a field that is not a non-negative integer."""
    after = _count(request, "after", 0)
    wait_ms = min(_count(request, "waitMs", 0), MAX_EVENTS_WAIT_MS)
    limit = min(_count(request, "limit", MAX_EVENTS_PER_PAGE), MAX_EVENTS_PER_PAGE) or MAX_EVENTS_PER_PAGE
    return EventsQuery(after, wait_ms, limit)


def events_answer(request: RemotingCommand, page: EventPage) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, body=orjson.dumps(page.to_json()))


def _count(request: RemotingCommand, name: str, default: int) -> int:
    text = request.ext(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadEventsRequest(f"RMQC_EVENTS: {name} must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise BadEventsRequest(f"RMQC_EVENTS: {name} must be a non-negative integer, got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class _Awaited:
    """A replica's step still to come of the failover of `broker_name` at `master_epoch`."""

    key: BrokerKey
    master_epoch: int
    committed_ms: int  # monotonic, on this node


class EventLog:
    def __init__(self, capacity: int = MAX_EVENTS) -> None:
        self._ring: deque[dict[str, Any]] = deque(maxlen=capacity)
        self.last_seq = 0
        self.listener: Callable[[], None] = _nothing  # the shell wakes its waiting readers
        # the processor looks up every heartbeat's broker here (one dict lookup while a failover is open)
        self.awaiting_heartbeat: OrderedDict[BrokerKey, _Awaited] = OrderedDict()
        self._awaiting_notify: OrderedDict[str, _Awaited] = OrderedDict()  # by broker address

    def record(self, kind: str, wall_ms: int, fields: dict[str, Any]) -> None:
        self.last_seq += 1
        self._ring.append({"seq": self.last_seq, "kind": kind, "timeMs": wall_ms, **fields})
        self.listener()

    def page(self, after: int, limit: int = MAX_EVENTS_PER_PAGE) -> EventPage:
        """The events after seq `after` (0: every event kept), at most `limit`. A cursor beyond
        `last_seq` (the node restarted since) reads from the start as well."""
        if after > self.last_seq:
            after = 0
        oldest = self._ring[0]["seq"] if self._ring else self.last_seq + 1
        missed = max(0, oldest - after - 1) if after else 0
        skip = max(0, after - oldest + 1)
        events = [self._ring[i] for i in range(skip, min(len(self._ring), skip + limit))]
        return EventPage(events, missed, self.last_seq)

    # ----- failovers -----

    def failovers_applied(self, results: list[ApplyResult], wall_ms: int, now_ms: int) -> None:
        """Every node: each committed election that changed or cleared a group's master (see
        is_failover) is a failover event, and its replicas' first heartbeats after it are awaited."""
        for result in results:
            group = result.after
            assert group is not None
            self.record(FAILOVER, wall_ms, failover_fields(result, wall_ms))
            for broker_id in group.replicas:
                key = BrokerKey(group.cluster_name, group.broker_name, broker_id)
                _put(self.awaiting_heartbeat, key, _Awaited(key, group.master_epoch, now_ms))

    def notifications_queued(self, key: BrokerKey, address: str, master_epoch: int, now_ms: int) -> None:
        """The leader: a 1008 for `key` at `address` is on its way to the transport."""
        _put(self._awaiting_notify, address, _Awaited(key, master_epoch, now_ms))

    def sent(self, address: str, master_epoch: int, now_ms: int) -> tuple[BrokerKey, int] | None:
        """The leader's transport sent the 1008 of `master_epoch` to `address`: the replica and the
        ms since the commit (None: not awaited, e.g. dropped past MAX_AWAITED or superseded). The
        step itself is recorded when the leader's record of it is applied (`notification_applied`)."""
        awaited = self._awaiting_notify.get(address)
        if awaited is None or awaited.master_epoch != master_epoch:
            return None
        del self._awaiting_notify[address]
        return awaited.key, now_ms - awaited.committed_ms

    def notification_applied(self, sent: NotificationSent, wall_ms: int) -> None:
        """Every node: the leader's record that a replica got its 1008 (its `notified` step)."""
        self._step(_Awaited(BrokerKey(sent.cluster_name, sent.broker_name, sent.broker_id), sent.master_epoch, 0),
                   NOTIFIED, wall_ms, {"address": sent.broker_address, "afterCommitMs": sent.after_commit_ms})

    def heartbeat_heard(self, heartbeat: Heartbeat, wall_ms: int, now_ms: int) -> int | None:
        """A broker in `awaiting_heartbeat` heartbeat this node: its step once the heartbeat names
        the new masterEpoch (the epoch of its epoch file: at once for the new master, once a
        slave has synced from it for a slave; an older epoch says nothing yet). Returns the ms
        since the commit when it was the step."""
        awaited = self.awaiting_heartbeat[heartbeat.key]
        if heartbeat.epoch < awaited.master_epoch:
            return None
        del self.awaiting_heartbeat[heartbeat.key]
        after_ms = now_ms - awaited.committed_ms
        self._step(awaited, HEARTBEAT, wall_ms, {"epoch": heartbeat.epoch, "afterCommitMs": after_ms})
        return after_ms

    def _step(self, awaited: _Awaited, step: str, wall_ms: int, fields: dict[str, Any]) -> None:
        key = awaited.key
        self.record(FAILOVER_STEP, wall_ms, {"cluster": key.cluster_name, "brokerName": key.broker_name,
                                             "masterEpoch": awaited.master_epoch, "step": step,
                                             "brokerId": key.broker_id, **fields})


def is_failover(result: ApplyResult) -> bool:
    """An applied election that changed or cleared a group's master. A group's first master is
    none (starting 10,000 groups would push every real failover out of the ring)."""
    before, after = result.before, result.after
    return (type(result.command) is ElectMaster and result.ok and before is not None and after is not None
            and before.master_epoch > 0 and before.master_id != after.master_id)


def failover_fields(result: ApplyResult, committed_ms: int) -> dict[str, Any]:
    """The failover event of an applied election: who, why, from whom, and its committed timeline."""
    command = result.command
    assert isinstance(command, ElectMaster) and result.after is not None
    group = result.after
    old_master = None if result.before is None else result.before.master_id
    return {
        "cluster": group.cluster_name, "brokerName": group.broker_name, "trigger": str(command.trigger),
        "reason": None if command.reason is None else str(command.reason),
        "deadlineMissedByMs": command.deadline_missed_by_ms,
        "oldMaster": old_master, "newMaster": group.master_id, "masterEpoch": group.master_epoch,
        "attempt": command.attempt,
        "candidates": [{"brokerId": broker_id, "epoch": epoch, "maxOffset": offset, "priority": priority,
                        "inSyncStateSet": in_sync}
                       for broker_id, epoch, offset, priority, in_sync in command.candidates],
        "timeline": {"masterLastAliveMs": command.master_last_alive_ms, "detectedMs": command.liveness_lost_ms,
                     "proposedMs": command.leader_ts_ms, "committedMs": committed_ms},
    }


def _put(awaited: OrderedDict[Any, _Awaited], key: Any, value: _Awaited) -> None:
    awaited.pop(key, None)  # re-inserted last: the oldest are dropped first
    awaited[key] = value
    if len(awaited) > MAX_AWAITED:
        awaited.popitem(last=False)


def _nothing() -> None:
    pass
