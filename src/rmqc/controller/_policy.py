"""DefaultElectPolicy (spec 5.1), with offsets compared correctly and ties to the smallest id."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rmqc.fsm import BrokerGroup
from rmqc.liveness import LiveInfo

IsAlive = Callable[[int], bool]
LiveInfoOf = Callable[[int], LiveInfo | None]


def choose_master(
    group: BrokerGroup,
    *,
    unclean: bool,
    preferred: int | None,
    is_alive: IsAlive,
    live_info: LiveInfoOf,
) -> int | None:
    """The master `group` should have now, or None if no candidate qualifies.

    Candidates: live members of the SyncStateSet; if none qualify and unclean election is enabled,
    live members of all registered replicas. The current master stays if live (and not overridden
    by an admin's `preferred` id); a preferred id wins only if live in the candidate set.
    """
    candidate_sets: list[Iterable[int]] = [group.sync_state_set]
    if unclean:
        candidate_sets.append(group.replicas.keys())
    for ids in candidate_sets:
        chosen = _choose_within(ids, group.master_id, preferred, is_alive, live_info)
        if chosen is not None:
            return chosen
    return None


def _choose_within(ids: Iterable[int], old_master: int | None, preferred: int | None,
                   is_alive: IsAlive, live_info: LiveInfoOf) -> int | None:
    live = [broker_id for broker_id in ids if is_alive(broker_id)]
    if not live:
        return None
    if old_master in live and (preferred is None or preferred == old_master):
        return old_master
    if preferred is not None:
        return preferred if preferred in live else None
    return min(live, key=lambda broker_id: _rank(broker_id, live_info(broker_id)))


def _rank(broker_id: int, info: LiveInfo | None) -> tuple[int, int, int, int, int]:
    """Smaller is better: higher epoch, then higher max offset (full 64-bit compare, unlike Java's
    int cast), then lower electionPriority value, then smaller id (Java: first inserted)."""
    if info is None:
        return (1, 0, 0, 0, broker_id)
    return (0, -info.epoch, -info.max_offset, info.election_priority, broker_id)
