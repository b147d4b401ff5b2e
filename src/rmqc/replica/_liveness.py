"""Liveness on one replica: the heartbeat table's deadlines, stall forgiveness, digests to the
leader, and on the serving leader the elections for dead masters (design.md "Liveness and
elections"). Every time here is monotonic; the wall clock only stamps the commands."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from rmqc.controller import ControllerProcessor
from rmqc.fsm import Command, ElectionReason
from rmqc.liveness import BrokerKey, Digest, HeartbeatTable, MassExpiry, StallMeter

from ._io import Outbox, ReplicaConfig, SendDigest

log = logging.getLogger("rmqc.replica.liveness")

# The grace period of design.md: the scan for masters that are simply missing from this node's
# liveness table waits until the node has collected heartbeats for one (default) heartbeat timeout,
# so a controller restart or failover never causes mass broker failovers. Masters whose heartbeats
# this node saw expire, or whose connection closed, are acted on at once.
LIVENESS_GRACE_MS = 10_000
STALL_WARNING_MS = 1_000  # a stall this long is logged as a warning (shorter ones at debug)


class Liveness:
    """`propose(commands)` enters one batch of elections into the log (the replica's waiters)."""

    def __init__(self, config: ReplicaConfig, table: HeartbeatTable, processor: ControllerProcessor,
                 outbox: Outbox, propose: Callable[[list[Command]], None], now_ms: int) -> None:
        self._config = config
        self.table = table
        self._processor = processor
        self._out = outbox.append
        self._propose = propose
        self._started_ms = now_ms
        self._next_scan_ms = now_ms + config.scan_inactive_master_interval_ms
        self._closed: list[BrokerKey] = []  # inactive by a close (or a digest's close): act at once
        self._round_due = False
        self.digest_due_ms: int | None = None  # None: the table has not changed since the last digest
        self.stalls = StallMeter()  # how long this node could not look (forgiven to the brokers)
        self.mass_expiry = MassExpiry()
        self.rounds = 0  # liveness rounds run: deadlines, closes, scans

    def quiet(self) -> bool:
        return not (self._closed or self._round_due)

    # ----- inputs -----

    def changed(self, now_ms: int) -> bool:
        """A heartbeat changed the table: a digest is due within digest_interval_ms (heartbeats
        coalesce, no polling while idle). True when that made a new deadline."""
        if self.digest_due_ms is None:
            self.digest_due_ms = now_ms + self._config.digest_interval_ms
            return True
        return False

    def closed(self, keys: list[BrokerKey], now_ms: int) -> None:
        """Brokers went inactive (their connection closed, or a digest says so): a round and, on a
        follower, a digest are due at once (a failover is not coalesced)."""
        self._closed.extend(keys)
        self._round_due = True
        self.digest_due_ms = now_ms

    def digest(self, payload: bytes, now_ms: int) -> None:
        digest = Digest.from_bytes(payload)
        inactive = self.table.merge_digest(digest, now_ms)
        if digest.registrations:
            self._processor.namesrv.relayed(digest.registrations, now_ms)
        if inactive:
            self._closed.extend(inactive)
            self._round_due = True

    def stalled(self, due_ms: int, now_ms: int) -> None:
        """Something due at `due_ms` runs at `now_ms`: forgive any stall it reveals to the brokers."""
        stalled_s = self.stalls.observe(due_ms / 1000, now_ms / 1000)
        if stalled_s:
            stalled_ms = round(stalled_s * 1000)
            self.table.forgive(stalled_ms)
            # short stalls are routine on a busy machine (hundreds an hour): counted, not shouted
            log.log(logging.WARNING if stalled_ms >= STALL_WARNING_MS else logging.DEBUG,
                    "%s: stalled %d ms; not counted against brokers' heartbeat deadlines",
                    self._config.node_id, stalled_ms)

    # ----- time -----

    def next_due_ms(self, now_ms: int) -> int:
        soonest = now_ms if self._round_due else self._next_scan_ms
        deadline = self.table.next_deadline_ms()
        if deadline is not None:
            soonest = min(soonest, deadline + 1)
        if self.digest_due_ms is not None:
            soonest = min(soonest, self.digest_due_ms)
        return soonest

    def round_due(self, now_ms: int) -> bool:
        """A round is due: a close to act on, the scan, or a heartbeat deadline passed. Asked
        BEFORE a stall is forgiven: a round due when the node stalled runs once it resumes (after
        the forgiveness), as a timer set for then would."""
        deadline = self.table.next_deadline_ms()
        return self._round_due or now_ms >= self._next_scan_ms or (deadline is not None and now_ms > deadline)

    def on_time(self, now_ms: int, wall_ms: int, leader_id: str | None, serving: bool, round_due: bool) -> None:
        if self.digest_due_ms is not None and now_ms >= self.digest_due_ms:
            self.digest_due_ms = None
            self._send_digest(now_ms, leader_id)
        if round_due:
            self._round(now_ms, wall_ms, serving)

    def _send_digest(self, now_ms: int, leader_id: str | None) -> None:
        if leader_id is None or leader_id == self._config.node_id:
            return
        digest = self.table.take_digest(now_ms)
        registrations = self._processor.namesrv.take_heard_here(now_ms)
        if registrations:
            digest = dataclasses.replace(digest, registrations=registrations)
        if digest:
            self._out(SendDigest(leader_id, digest.to_bytes()))

    def _round(self, now_ms: int, wall_ms: int, serving: bool) -> None:
        """Expiry by deadline on every node; on the serving leader, dead masters become ONE batch
        of election commands."""
        self._round_due = False
        self.rounds += 1
        expired = self.table.expire(now_ms)
        closed, self._closed = self._closed, []
        scan_due = now_ms >= self._next_scan_ms
        if scan_due:  # on every node: a follower that kept an old scan time would spin here
            self._next_scan_ms = now_ms + self._config.scan_inactive_master_interval_ms
        if not serving:
            return
        commands = self._elections_for(now_ms, expired, closed, wall_ms)
        if scan_due and now_ms - self._started_ms >= LIVENESS_GRACE_MS:
            commands += self._processor.inactive_master_scan(now_ms, wall_ms)
        if commands:
            self._propose(one_per_group(commands))
        # the NameServer role: dead brokers leave the routes at once (their own entry: one_per_group
        # keeps one command per broker name, and an election may be among them)
        route_exits = self._processor.namesrv.inactive(expired + closed, wall_ms)
        if route_exits:
            self._propose(route_exits)

    def _elections_for(self, now_ms: int, expired: list[BrokerKey], closed: list[BrokerKey],
                       wall_ms: int) -> list[Command]:
        """A closed connection is a death seen, acted on at once; masters expired by deadline are
        too, unless many expire together (MassExpiry: then groups whose replicas are silent as
        well wait for the scan)."""
        now_s = now_ms / 1000
        masters = self._processor.masters_among(expired)
        self.mass_expiry.note(masters, now_s)
        guarded = self.mass_expiry.suspect(now_s)
        commands = self._processor.elections_due(now_ms, closed, wall_ms, reason=ElectionReason.CONNECTION_CLOSED)
        due = self._processor.elections_due(now_ms, expired, wall_ms, wait_if_replicas_silent=guarded)
        if guarded and len(due) < masters:  # only the guard leaves an expired master without an election
            self.mass_expiry.deferred += masters - len(due)
            log.warning("%s: %d masters expired within %.0f s; groups with no live replica wait for the "
                        "inactive-master scan (%d deferred so far)", self._config.node_id,
                        self.mass_expiry.masters, self.mass_expiry.window_s, self.mass_expiry.deferred)
        return commands + due


def one_per_group(commands: list[Command]) -> list[Command]:
    seen: set[str | None] = set()
    unique = []
    for command in commands:
        name = getattr(command, "broker_name", None)
        if name in seen:
            continue
        seen.add(name)
        unique.append(command)
    return unique
