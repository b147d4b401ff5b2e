"""The heartbeat table (spec section 6): who is alive, with deadline-based expiry.

Not replicated: every node keeps its own table from the 904 heartbeats it receives; followers
forward coalesced digests so the leader's table (the one elections use) also covers brokers that
can only reach a follower.

Expiry is by deadline, not by a periodic full scan. A heap holds at most one *scheduled* deadline
per broker (plus stale entries, which are skipped when popped). A heartbeat that moves a deadline
later does not touch the heap; when the old deadline pops, the broker is re-scheduled at its real
deadline. So `expire(now_ms)` costs O(log n) per broker whose scheduled deadline passed — those
that expired plus at most one re-schedule per broker per timeout period — never O(table).

"Dead" means silent while this node was looking. When the node could not look (its event loop
stalled: a GC pause, CPU starvation, a long synchronous step), `forgive(ms)` gives that time back
to every broker at once: the table keeps its times on a clock of its own, the caller's clock minus
all forgiven time, so every deadline moves later by the stall in O(1). Digest ages are on that clock
too, so a follower's stall is not counted against the brokers it relays.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from rmqc.errors import BoundExceeded, ProtocolError

DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000  # Java BrokerHeartbeatRequestHeader default
DEFAULT_ELECTION_PRIORITY = 2_147_483_647  # Integer.MAX_VALUE: least preferred

# Why: 30,000 live brokers is the design target; the bound stops a flood of invented broker
# identities (heartbeats need no registration) from growing memory without limit.
DEFAULT_MAX_BROKERS = 200_000


class LivenessTableFull(BoundExceeded):
    """A heartbeat for a new broker arrived while the table held `max_brokers` entries."""


class DigestDecodeError(ProtocolError):
    """A liveness digest received from a peer could not be decoded."""


class BrokerKey(NamedTuple):
    """Java BrokerIdentityInfo: (clusterName, brokerName, brokerId)."""

    cluster_name: str
    broker_name: str
    broker_id: int


class Heartbeat(NamedTuple):
    """The fields of one 904 request (spec 3.1) that liveness keeps. A NamedTuple because one is
    built per heartbeat (the hottest path): about 5x cheaper to create than a frozen dataclass."""

    key: BrokerKey
    broker_addr: str
    timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = DEFAULT_ELECTION_PRIORITY


@dataclass(slots=True)
class LiveInfo:
    """Java BrokerLiveInfo. Returned by `live_info` for reading; only the table changes it."""

    broker_addr: str
    last_update_ms: int
    timeout_ms: int
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int
    channel_id: Hashable | None = None  # connection of the latest direct heartbeat
    scheduled_deadline_ms: int | None = field(default=None, repr=False)

    @property
    def deadline_ms(self) -> int:
        return self.last_update_ms + self.timeout_ms

    def absorb(self, hb: Heartbeat, now_ms: int) -> None:
        """Spec 6.1: time, timeout and priority always; (epoch, offsets) only if they move forward.
        The time never moves back either (a digest may report a heartbeat older than a direct one)."""
        _key, self.broker_addr, self.timeout_ms, epoch, max_offset, confirm_offset, self.election_priority = hb
        if now_ms > self.last_update_ms:
            self.last_update_ms = now_ms
        if epoch > self.epoch or (epoch == self.epoch and max_offset > self.max_offset):  # (epoch, offset) order
            self.epoch, self.max_offset, self.confirm_offset = epoch, max_offset, confirm_offset


# [cluster, broker name, broker id, address, timeout ms, epoch, max offset, confirm offset,
# election priority, heard ms ago]: mixed types, one plain list per row (see Digest)
DigestRow = list[Any]


@dataclass(frozen=True, slots=True)
class Digest:
    """What a follower forwards to the leader: the latest values of each broker heard since the last
    digest (coalesced) with how long ago it was heard, and the brokers whose connection to the
    follower closed. A row: [cluster, broker name, broker id, address, timeout ms, epoch, max
    offset, confirm offset, election priority, heard ms ago]; rows travel and merge as they are
    (no object per row: the leader merges every follower's heartbeats)."""

    rows: tuple[DigestRow, ...] = ()
    closed: tuple[BrokerKey, ...] = ()
    # NameServer registrations this follower answered itself (a 103 that changed nothing, a 322):
    # [cluster, broker address, heartbeatTimeoutMillis or 0 (none given), heard ms ago]. Older
    # peers leave the key out; the leader then hears those brokers only directly.
    registrations: tuple[DigestRow, ...] = ()

    @classmethod
    def of(cls, heartbeats: Iterable[Heartbeat] = (), closed: Iterable[BrokerKey] = (),
           heard_ms_ago: int = 0) -> Digest:
        return cls(tuple([*hb.key, *hb[1:], heard_ms_ago] for hb in heartbeats), tuple(closed))

    @property
    def heartbeats(self) -> tuple[Heartbeat, ...]:
        return tuple(Heartbeat(BrokerKey(*row[:3]), *row[3:9]) for row in self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows or self.closed or self.registrations)

    def to_bytes(self) -> bytes:
        document: dict[str, object] = {"heartbeats": self.rows, "closed": [list(key) for key in self.closed]}
        if self.registrations:
            document["registrations"] = self.registrations
        return orjson.dumps(document)

    @classmethod
    def from_bytes(cls, data: bytes) -> Digest:
        try:
            document = orjson.loads(data)
            rows = tuple(_checked_row(row) for row in document["heartbeats"])
            closed = tuple(_key_from_row(row) for row in document["closed"])
            registrations = tuple(_checked_registration_row(row) for row in document.get("registrations", ()))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DigestDecodeError(f"bad liveness digest: {exc!r}") from None
        return cls(rows, closed, registrations)


def _checked_registration_row(row: DigestRow) -> DigestRow:
    if (type(row) is not list or len(row) != 4 or type(row[0]) is not str or type(row[1]) is not str
            or type(row[2]) is not int or type(row[3]) is not int or row[2] < 0 or row[3] < 0):
        raise ValueError(f"bad registration row {row!r}")
    return row


def _key_from_row(row: DigestRow) -> BrokerKey:
    cluster, name, broker_id = row
    if not (isinstance(cluster, str) and isinstance(name, str) and isinstance(broker_id, int)):
        raise ValueError(f"bad broker key {row!r}")
    return BrokerKey(cluster, name, broker_id)


def _checked_row(row: DigestRow) -> DigestRow:
    """A digest row as sent; a row of 9 (a peer that sends no age) counts as heard just now."""
    if type(row) is not list or len(row) not in (9, 10):
        raise ValueError(f"bad digest row {row!r}")
    if len(row) == 9:
        row.append(0)
    cluster, name, broker_id, address, timeout, epoch, max_offset, confirm_offset, priority, age = row
    if (type(cluster) is not str or type(name) is not str or type(broker_id) is not int
            or type(address) is not str or type(timeout) is not int or type(epoch) is not int
            or type(max_offset) is not int or type(confirm_offset) is not int or type(priority) is not int
            or type(age) is not int or age < 0):
        raise ValueError(f"bad digest row {row!r}")
    return row


class HeartbeatTable:
    """Liveness of every broker this node hears from. All times are `now_ms` arguments, all on one
    monotonic clock (the node's): deadlines are compared with it, so it must never step. Nothing
    here leaves the node as a time: digests carry ages ("heard N ms ago")."""

    def __init__(self, max_brokers: int = DEFAULT_MAX_BROKERS) -> None:
        self.max_brokers = max_brokers
        self._live: dict[BrokerKey, LiveInfo] = {}
        self._by_channel: dict[Hashable, set[BrokerKey]] = {}
        self._heap: list[tuple[int, int, BrokerKey]] = []
        self._seq = 0
        self._dirty: set[BrokerKey] = set()  # changed since the last digest
        self._closed: set[BrokerKey] = set()  # connection closed since the last digest
        # Brokers found inactive -> when they were last known alive, for the election command
        # (a failover's duration starts there). Oldest dropped first past max_brokers.
        self._last_alive: dict[BrokerKey, int] = {}
        # Brokers expired by deadline -> that deadline (how late the detection was; a close has none).
        # Bounded with _last_alive: an entry leaves when its broker leaves that dict.
        self._missed_deadline: dict[BrokerKey, int] = {}
        self.forgiven_ms = 0  # time this node could not look; the table's clock is the caller's minus this

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[BrokerKey]:
        return iter(list(self._live))

    # ---- input -----------------------------------------------------------------------------

    def forgive(self, ms: int) -> None:
        """This node could not look for `ms` (its loop stalled): every broker's deadline, and the
        age of everything it heard, moves `ms` later."""
        if ms > 0:
            self.forgiven_ms += ms

    def update(self, hb: Heartbeat, now_ms: int, channel_id: Hashable | None = None) -> None:
        """Record a heartbeat received at `now_ms` (on connection `channel_id`, if direct)."""
        self._record(hb, now_ms - self.forgiven_ms, channel_id)

    def _record(self, hb: Heartbeat, now_ms: int, channel_id: Hashable | None) -> None:
        """`update` with `now_ms` on the table's own clock."""
        key = hb.key
        info = self._live.get(key)
        if info is None:
            info = self._insert(hb, now_ms)
        else:
            info.absorb(hb, now_ms)
        if channel_id is not None and channel_id != info.channel_id:
            self._move_channel(key, info, channel_id)
        self._schedule(key, info)
        self._dirty.add(key)
        if self._closed:  # empty but for brokers whose connection closed since the last digest
            self._closed.discard(key)

    def _insert(self, hb: Heartbeat, now_ms: int) -> LiveInfo:
        if len(self._live) >= self.max_brokers:
            raise LivenessTableFull(f"liveness table holds {self.max_brokers} brokers; refusing {hb.key}")
        info = LiveInfo(hb.broker_addr, now_ms, hb.timeout_ms, hb.epoch, hb.max_offset, hb.confirm_offset,
                        hb.election_priority)
        self._live[hb.key] = info
        return info

    def expire(self, now_ms: int) -> list[BrokerKey]:
        """Remove and return the brokers whose deadline passed (`last + timeout < now_ms`, less
        forgiven time)."""
        now_ms -= self.forgiven_ms
        expired = []
        heap = self._heap
        while heap and heap[0][0] < now_ms:
            deadline, _, key = heapq.heappop(heap)
            info = self._live.get(key)
            if info is None or info.scheduled_deadline_ms != deadline:
                continue  # stale: removed, or re-scheduled earlier
            if info.deadline_ms < now_ms:
                self._remove(key)
                self._went_inactive(key, info.last_update_ms, info.deadline_ms)
                expired.append(key)
            else:
                info.scheduled_deadline_ms = None
                self._schedule(key, info)
        self._compact_heap_if_bloated()
        return expired

    def on_channel_closed(self, channel_id: Hashable, now_ms: int) -> list[BrokerKey]:
        """A broker connection closed at `now_ms`: its brokers are inactive at once (spec 6.2)."""
        keys = sorted(self._by_channel.pop(channel_id, ()))
        for key in keys:
            self._remove(key)
            self._went_inactive(key, now_ms)
            # Only a follower takes digests; on a leader this set is never drained, so it is
            # capped (a leader learns of the close directly; a lost report only delays expiry).
            if len(self._closed) < self.max_brokers:
                self._closed.add(key)
        return keys

    def remove(self, key: BrokerKey) -> bool:
        """Forget a broker (e.g. its data was cleaned); True if it was present."""
        return self._remove(key) is not None

    # ---- queries ---------------------------------------------------------------------------

    def is_alive(self, key: BrokerKey, now_ms: int) -> bool:
        info = self._live.get(key)
        return info is not None and info.deadline_ms >= now_ms - self.forgiven_ms

    def live_info(self, key: BrokerKey) -> LiveInfo | None:
        return self._live.get(key)

    def last_alive_ms(self, key: BrokerKey) -> int | None:
        """When `key` was last known alive: its latest heartbeat while it is in the table; once
        found inactive, its last heartbeat (expiry) or the moment its connection closed. None when
        this node never heard of it (e.g. it led only after the broker died). On the caller's
        clock: the table's times leave out forgiven stalls, so they are given back here."""
        info = self._live.get(key)
        last = info.last_update_ms if info is not None else self._last_alive.get(key)
        return None if last is None else last + self.forgiven_ms

    def missed_deadline_ms(self, key: BrokerKey) -> int | None:
        """The heartbeat deadline `key` missed when it expired (None: it is live, its connection
        closed, or this node never saw it expire). On the caller's clock, as last_alive_ms."""
        if key in self._live:
            return None
        deadline = self._missed_deadline.get(key)
        return None if deadline is None else deadline + self.forgiven_ms

    @property
    def scheduled_deadlines(self) -> int:
        """Entries in the deadline heap (about one per broker; for metrics and tests)."""
        return len(self._heap)

    def next_deadline_ms(self) -> int | None:
        """The earliest scheduled deadline on the caller's clock (when `expire` may next find
        something), or None."""
        return self._heap[0][0] + self.forgiven_ms if self._heap else None

    # ---- follower -> leader digests --------------------------------------------------------

    def take_digest(self, now_ms: int) -> Digest:
        """The latest values of every broker heard from since the last digest (with how long ago),
        and closes. Ages leave out forgiven time: a relay that stalled does not age what it relays."""
        now_ms -= self.forgiven_ms
        live = self._live
        rows = []
        for key in self._dirty:
            info = live.get(key)
            if info is not None:
                rows.append([*key, info.broker_addr, info.timeout_ms, info.epoch, info.max_offset,
                             info.confirm_offset, info.election_priority, max(0, now_ms - info.last_update_ms)])
        closed = tuple(self._closed)
        self._dirty.clear()
        self._closed.clear()
        return Digest(tuple(rows), closed)

    def merge_digest(self, digest: Digest, now_ms: int) -> list[BrokerKey]:
        """Leader side: a row counts as a heartbeat received when the follower heard it (`now_ms`
        minus its age), so forwarding delays neither extend nor shorten a deadline. A close
        reported by a follower removes a broker only if this node has no direct connection from
        it. Returns the brokers that became inactive."""
        now_ms -= self.forgiven_ms
        for row in digest.rows:
            self._merge_row(row, now_ms - row[9])
        inactive = []
        for key in digest.closed:
            info = self._live.get(key)
            if info is not None and info.channel_id is None:
                self._remove(key)
                # a follower reports a close at once (its digest is not coalesced), so the close
                # is about now
                self._went_inactive(key, now_ms)
                inactive.append(key)
        return inactive

    # ---- internals -------------------------------------------------------------------------

    def _merge_row(self, row: DigestRow, heard_ms: int) -> None:
        # The leader merges every follower's heartbeats, so a known broker costs no object: a plain
        # (cluster, name, id) tuple finds its BrokerKey, and row[2:9] lines up with a Heartbeat's
        # fields for absorb (which ignores the key slot).
        key = (row[0], row[1], row[2])
        info = self._live.get(key)  # type: ignore[call-overload]  # equal and hashed as its BrokerKey
        if info is None:
            self._record(Heartbeat(BrokerKey(*key), *row[3:9]), heard_ms, None)
        else:
            info.absorb(row[2:9], heard_ms)
            scheduled = info.scheduled_deadline_ms
            if scheduled is None or info.deadline_ms < scheduled:
                self._schedule(BrokerKey(*key), info)
        self._dirty.discard(key)  # the leader does not echo digests back

    def _went_inactive(self, key: BrokerKey, last_alive_ms: int, deadline_ms: int | None = None) -> None:
        self._last_alive.pop(key, None)  # re-inserted last: the dict stays in order of inactivity
        self._missed_deadline.pop(key, None)
        if len(self._last_alive) >= self.max_brokers:
            oldest = next(iter(self._last_alive))
            del self._last_alive[oldest]
            self._missed_deadline.pop(oldest, None)
        self._last_alive[key] = last_alive_ms
        if deadline_ms is not None:
            self._missed_deadline[key] = deadline_ms

    def _schedule(self, key: BrokerKey, info: LiveInfo) -> None:
        deadline, scheduled = info.last_update_ms + info.timeout_ms, info.scheduled_deadline_ms  # deadline_ms
        if scheduled is None or deadline < scheduled:
            info.scheduled_deadline_ms = deadline
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, key))

    def _move_channel(self, key: BrokerKey, info: LiveInfo, channel_id: Hashable) -> None:
        # Java keeps the first heartbeat's channel; rmqc follows the latest one, so a broker that
        # reconnected is not declared dead when its abandoned old connection finally closes.
        if info.channel_id is not None:
            self._unindex_channel(key, info.channel_id)
        info.channel_id = channel_id
        self._by_channel.setdefault(channel_id, set()).add(key)

    def _unindex_channel(self, key: BrokerKey, channel_id: Hashable) -> None:
        keys = self._by_channel.get(channel_id)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_channel[channel_id]

    def _remove(self, key: BrokerKey) -> LiveInfo | None:
        info = self._live.pop(key, None)
        if info is not None and info.channel_id is not None:
            self._unindex_channel(key, info.channel_id)
        self._dirty.discard(key)
        return info

    def _compact_heap_if_bloated(self) -> None:
        # Stale entries of removed brokers wait for their deadline; if many brokers were removed
        # early (mass disconnect) rebuild the heap so its size stays proportional to the table.
        if len(self._heap) <= 2 * len(self._live) + 1024:
            return
        self._heap = []
        for key, info in self._live.items():
            info.scheduled_deadline_ms = None
            self._schedule(key, info)
