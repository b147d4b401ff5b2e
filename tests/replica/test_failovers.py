"""The failover history every node keeps from the ElectMaster commands it applies (the status page's
"last failovers"), on the real controller state."""

from __future__ import annotations

from rmqc.fsm import ApplyBrokerId, ControllerState, ElectMaster, Trigger
from rmqc.replica import FailoverHistory

CLUSTER = "C"


def elect(state: ControllerState, name: str, candidate: int | None, trigger: Trigger = Trigger.CONTROLLER,
          *, stale: bool = False) -> list:
    group = state.group(name)
    assert group is not None
    epoch = group.master_epoch - (1 if stale else 0)
    return state.apply_all([ElectMaster(CLUSTER, name, trigger, candidate, epoch, group.sync_state_set_epoch,
                                        1_700_000_000_000 + group.master_epoch)])


def group_of_two(state: ControllerState, name: str) -> None:
    state.apply_all([ApplyBrokerId(CLUSTER, name, broker_id, f"10.0.0.{broker_id}:30911", f"check-{broker_id}", 1)
                     for broker_id in (1, 2)])


def test_master_changes_are_kept_and_first_masters_and_refused_elections_are_not() -> None:
    state, history = ControllerState(), FailoverHistory()
    group_of_two(state, "g")
    history.record(1, elect(state, "g", 1, Trigger.BROKER))  # the first master: no failover
    history.record(2, elect(state, "g", 2))
    history.record(3, elect(state, "g", 1, stale=True))  # refused: its expected epoch is old
    history.record(4, elect(state, "g", None))  # no candidate: the master is cleared
    kept = history.recent()
    assert [(f.index, f.old_master_id, f.new_master_id, f.master_epoch, f.trigger) for f in kept] == [
        (2, 1, 2, 2, "controller"), (4, 2, None, 3, "controller")]
    assert (kept[0].old_master_address, kept[0].new_master_address) == ("10.0.0.1:30911", "10.0.0.2:30911")
    assert (kept[0].broker_name, kept[0].cluster_name, kept[0].time_ms) == ("g", CLUSTER, 1_700_000_000_001)


def test_the_history_is_bounded_and_keeps_the_newest() -> None:
    state, history = ControllerState(), FailoverHistory(limit=3)
    group_of_two(state, "g")
    history.record(1, elect(state, "g", 1))
    for index in range(2, 8):
        history.record(index, elect(state, "g", 2 if index % 2 == 0 else 1))
    assert [f.index for f in history.recent()] == [5, 6, 7]
