"""The recent master changes of the broker groups, as every node applies them (the status page's
"last failovers": rmqc.metrics' status page document).

Taken from the results of applying committed ElectMaster commands, on every node (not only the
leader), so any node's page shows them. A restarted node fills it again as it applies the log behind
its snapshot: the history goes back as far as the retained log does. A group's first master (its
epoch was 0) is no failover and is left out, else starting 10,000 groups would push out every real
one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from rmqc.fsm import ApplyResult, ElectMaster

__all__ = ["MAX_FAILOVERS_KEPT", "Failover", "FailoverHistory"]

# Bounded: the design's fleet loses up to 1,000 masters at once; twice that keeps the batch before too.
MAX_FAILOVERS_KEPT = 2000


@dataclass(frozen=True, slots=True)
class Failover:
    index: int  # the log index of the ElectMaster
    time_ms: int  # wall clock of the leader that decided it (leader_ts_ms)
    cluster_name: str
    broker_name: str
    old_master_id: int | None
    old_master_address: str | None
    new_master_id: int | None  # None: the master was cleared (no candidate)
    new_master_address: str | None
    master_epoch: int
    trigger: str  # broker, admin or controller (fsm.Trigger)


class FailoverHistory:
    def __init__(self, limit: int = MAX_FAILOVERS_KEPT) -> None:
        self._kept: deque[Failover] = deque(maxlen=limit)

    def record(self, index: int, results: Iterable[ApplyResult]) -> None:
        for result in results:
            failover = failover_of(index, result)
            if failover is not None:
                self._kept.append(failover)

    def recent(self) -> tuple[Failover, ...]:
        """Oldest first."""
        return tuple(self._kept)


def failover_of(index: int, result: ApplyResult) -> Failover | None:
    """The master change an applied command made, None when it made none (or set the first master)."""
    command, before, after = result.command, result.before, result.after
    if not isinstance(command, ElectMaster) or not result.ok or before is None or after is None:
        return None
    if before.master_epoch == 0 or before.master_id == after.master_id:
        return None
    return Failover(index, command.leader_ts_ms, command.cluster_name, command.broker_name,
                    before.master_id, before.master_address, after.master_id, after.master_address,
                    after.master_epoch, str(command.trigger))
