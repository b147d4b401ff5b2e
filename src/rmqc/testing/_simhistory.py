"""What the simulated brokers and admins saw, for the controller-level checks (`_simcontroller_check`).

Records are appended by the clients as answers arrive (virtual time in microseconds); the checker
reads them at the end of a seed. Bounded like every other buffer of a run."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqc.errors import BoundExceeded

# A seed lasts 1.3 s of virtual time with a few dozen clients: a few thousand records. Far more
# means a client loops without pause, which must fail loudly instead of eating memory.
HISTORY_RECORDS_MAX = 200_000

LINEARIZABLE, LEASE, STALE = "linearizable", "lease", "stale"
READ_LEVELS = (LINEARIZABLE, LEASE, STALE)

# What a 1004 answer shows of a group: (masterBrokerId, masterEpoch, syncStateSetEpoch, syncStateSet).
GroupView = tuple[int | None, int, int, tuple[int, ...]]


class HistoryFull(BoundExceeded):
    """More than HISTORY_RECORDS_MAX records in one run."""


@dataclass(frozen=True, slots=True)
class IdGrant:
    """A 1013 answered SUCCESS: `broker_id` of `group` belongs to the broker with `check_code`."""

    group: str
    broker_id: int
    check_code: str
    at_us: int


@dataclass(frozen=True, slots=True)
class AlterAck:
    """A 1001 answered SUCCESS, with the epochs the master sent and the new epoch it got back."""

    group: str
    master_id: int
    master_epoch: int
    sync_state_set_epoch: int
    new_set: tuple[int, ...]
    new_sync_state_set_epoch: int
    at_us: int


@dataclass(frozen=True, slots=True)
class ElectAck:
    """A 1002 answered SUCCESS: `master_id` leads `group` in `master_epoch`."""

    group: str
    master_id: int
    master_epoch: int
    at_us: int


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """A 1004 answered SUCCESS by `node` at consistency `level`."""

    node: str
    incarnation: int
    level: str
    group: str
    invoke_us: int
    complete_us: int
    view: GroupView
    served_us: int  # when the node answered: what one node serves is ordered by this


@dataclass(frozen=True, slots=True)
class RouteRecord:
    """A 105 (GET_ROUTEINFO_BY_TOPIC) answered by `node` at consistency `level`, at the node's
    applied index when it answered: `masters` maps each broker name of the route to the address it
    lists as brokerId 0 (None: none listed), `queues` the broker names with queue data; `body` the
    answer's bytes (None: 17 TOPIC_NOT_EXIST)."""

    node: str
    incarnation: int
    level: str
    topic: str
    invoke_us: int
    served_us: int
    applied_index: int
    masters: tuple[tuple[str, str | None], ...]
    queues: tuple[str, ...]
    body: bytes | None


@dataclass(frozen=True, slots=True)
class Notified:
    """A 1008 a broker received (whether or not it was newer than what it knew)."""

    broker: str
    group: str
    master_id: int
    master_epoch: int
    at_us: int


@dataclass(slots=True)
class ControllerHistory:
    grants: list[IdGrant] = field(default_factory=list)
    alters: list[AlterAck] = field(default_factory=list)
    elections: list[ElectAck] = field(default_factory=list)
    reads: list[ReadRecord] = field(default_factory=list)
    notifications: list[Notified] = field(default_factory=list)
    routes: list[RouteRecord] = field(default_factory=list)
    requests: int = 0  # every request a broker or admin sent, heartbeats included

    def add(self, record: IdGrant | AlterAck | ElectAck | ReadRecord | Notified | RouteRecord) -> None:
        if self.size() >= HISTORY_RECORDS_MAX:
            raise HistoryFull(f"more than {HISTORY_RECORDS_MAX} history records in one run")
        _LISTS[type(record)](self).append(record)

    def size(self) -> int:
        return (len(self.grants) + len(self.alters) + len(self.elections) + len(self.reads)
                + len(self.notifications) + len(self.routes))


_LISTS = {
    IdGrant: lambda h: h.grants,
    AlterAck: lambda h: h.alters,
    ElectAck: lambda h: h.elections,
    ReadRecord: lambda h: h.reads,
    Notified: lambda h: h.notifications,
    RouteRecord: lambda h: h.routes,
}
