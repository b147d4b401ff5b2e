"""The pure parts of the simulator: timings, what a broker believes, SyncStateSet decisions, and
the convergence check tests assert on. No I/O and no clock: time enters as `now_ms`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "BrokerBelief",
    "Phase",
    "Role",
    "SimTiming",
    "Status",
    "convergence_problems",
    "expanded_set",
    "shrunk_set",
]


class Phase(StrEnum):
    """The broker start-up state machine of spec 7.2."""

    INITIAL = "INITIAL"
    FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE = "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE"
    REGISTER_TO_CONTROLLER_DONE = "REGISTER_TO_CONTROLLER_DONE"
    RUNNING = "RUNNING"


class Role(StrEnum):
    NONE = "NONE"
    MASTER = "MASTER"
    SLAVE = "SLAVE"


class Status(StrEnum):
    """What the simulator did to the broker process (not what the broker believes)."""

    STARTING = "starting"
    RUNNING = "running"
    HUNG = "hung"
    KILLED = "killed"


@dataclass(frozen=True, slots=True)
class SimTiming:
    """Broker timings; the defaults are the Java broker's (spec 7.3, 7.6). Tests shorten them."""

    heartbeat_interval_ms: int = 1000  # brokerHeartbeatInterval
    heartbeat_send_timeout_ms: int = 1000  # sendHeartbeatTimeoutMillis
    heartbeat_timeout_ms: int = 10000  # controllerHeartBeatTimeoutMills, sent in every heartbeat
    poll_interval_ms: int = 5000  # syncBrokerMetadataPeriod (1004)
    check_sync_state_set_ms: int = 5000  # checkSyncStateSetPeriod (shrink)
    max_time_slave_not_catchup_ms: int = 15000  # haMaxTimeSlaveNotCatchup
    register_round_interval_ms: int = 5000  # a failed registration round is retried this often
    register_attempts: int = 5  # attempts per round
    register_retry_max_ms: int = 1000  # random sleep below this between attempts
    rpc_timeout_ms: int = 3000  # Java brokers' controller RPC timeout
    replication_interval_ms: int = 200  # how often masters write and slaves copy (simulated HA)
    write_bytes_per_tick: int = 4096  # what a master appends to its commit log each replication tick
    start_spread_ms: int = 1000  # brokers start spread over this window, not all in one instant
    register_interval_ms: int = 30000  # registerNameServerPeriod: 103 to every NameServer

    @classmethod
    def fast(cls) -> SimTiming:
        """Timings for tests: polling and shrinking in well under a second."""
        return cls(heartbeat_interval_ms=300, heartbeat_timeout_ms=3000, poll_interval_ms=500,
                   check_sync_state_set_ms=500, max_time_slave_not_catchup_ms=2000,
                   register_round_interval_ms=500, register_retry_max_ms=200, replication_interval_ms=100,
                   start_spread_ms=500, register_interval_ms=3000)


@dataclass(frozen=True, slots=True)
class BrokerBelief:
    """What one simulated broker believes (and what was done to it), as tests and `beliefs` report it."""

    broker_name: str
    slot: int  # replica number within the group in this fleet (0-based), stable before an id exists
    broker_id: int | None
    address: str
    status: Status
    phase: Phase
    role: Role
    master_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int
    epoch: int
    max_offset: int
    lagging: bool
    notifications: int
    last_error: str | None = None  # the controller's latest refusal or failure this broker saw

    def to_json(self) -> dict[str, Any]:
        """camelCase keys, the names RocketMQ uses for the same things."""
        raw = asdict(self)
        return {
            "brokerName": raw["broker_name"], "slot": raw["slot"], "brokerId": raw["broker_id"],
            "address": raw["address"], "status": str(self.status), "phase": str(self.phase),
            "role": str(self.role), "masterBrokerId": raw["master_id"], "masterAddress": raw["master_address"],
            "masterEpoch": raw["master_epoch"], "syncStateSet": list(raw["sync_state_set"]),
            "syncStateSetEpoch": raw["sync_state_set_epoch"], "epoch": raw["epoch"],
            "maxOffset": raw["max_offset"], "lagging": raw["lagging"], "notifications": raw["notifications"],
            "lastError": raw["last_error"],
        }


def shrunk_set(sync_state_set: frozenset[int], master_id: int, caught_up_ms: Mapping[int, int],
               connected: Iterable[int], now_ms: int, max_not_catchup_ms: int) -> frozenset[int]:
    """The master's shrink check (spec 7.3): drop slaves without an HA connection or not caught up
    for longer than `max_not_catchup_ms`; the master's own id always stays."""
    linked = set(connected)
    kept = {
        broker_id for broker_id in sync_state_set
        if broker_id == master_id
        or (broker_id in linked and now_ms - caught_up_ms.get(broker_id, -max_not_catchup_ms - 1) <= max_not_catchup_ms)
    }
    return frozenset(kept | {master_id})


def expanded_set(sync_state_set: frozenset[int], caught_up_ids: Iterable[int]) -> frozenset[int]:
    """The master's expand (spec 7.3): add every slave that has caught up."""
    return sync_state_set | frozenset(caught_up_ids)


def convergence_problems(beliefs: Iterable[BrokerBelief], *, full_sync_state_sets: bool = False) -> list[str]:
    """Why the fleet has not converged; empty when every group with a live broker has exactly one
    master that all its live brokers agree on (same master id and masterEpoch, one MASTER, the rest
    SLAVE). With `full_sync_state_sets`, the master must also hold every live broker in its set."""
    groups: dict[str, list[BrokerBelief]] = defaultdict(list)
    for belief in beliefs:
        if belief.status in (Status.RUNNING, Status.STARTING):  # a starting broker has not converged yet
            groups[belief.broker_name].append(belief)
    problems: list[str] = []
    for name in sorted(groups):
        problem = _group_problem(groups[name], full_sync_state_sets)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def _group_problem(live: list[BrokerBelief], full_sync_state_sets: bool) -> str | None:
    waiting = [b for b in live if b.phase is not Phase.RUNNING or b.status is not Status.RUNNING]
    if waiting:
        # why they wait is what the operator needs (e.g. only dead ids in the SyncStateSet and
        # unclean elections off: every 1002 is refused), not only that they do
        reasons = sorted({f"{b.status.value} in {b.phase.value}" + (f": {b.last_error}" if b.last_error else "")
                          for b in waiting})
        return f"{len(waiting)} live broker(s) not RUNNING ({'; '.join(reasons[:2])})"
    views = {(b.master_id, b.master_epoch) for b in live}
    if len(views) != 1:
        return f"live brokers disagree on (master, masterEpoch): {sorted(views, key=str)}"
    ((master_id, _epoch),) = views
    masters = [b for b in live if b.role is Role.MASTER]
    if master_id is None or len(masters) != 1 or masters[0].broker_id != master_id:
        return f"master {master_id} but brokers in role MASTER are {[b.broker_id for b in masters]}"
    if any(b.role is not Role.SLAVE for b in live if b is not masters[0]):
        return "a live broker other than the master is not SLAVE"
    if full_sync_state_sets and set(masters[0].sync_state_set) != {b.broker_id for b in live}:
        return f"SyncStateSet {list(masters[0].sync_state_set)} is not every live broker"
    return None
