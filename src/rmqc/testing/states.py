"""Controller states built directly, for tests and benchmarks that need a big one fast: no log, no
requests, the commands a real group's brokers would have led to."""

from __future__ import annotations

from rmqc import fsm

__all__ = ["add_groups"]


def add_groups(state: fsm.ControllerState, groups: int) -> fsm.ControllerState:
    """`groups` broker groups `broker-N` of three brokers each, broker 1 elected master."""
    for g in range(groups):
        name = f"broker-{g}"
        for broker_id in (1, 2, 3):
            state.apply(fsm.ApplyBrokerId("DefaultCluster", name, broker_id,
                                          f"10.{g // 250 % 250}.{g % 250}.{broker_id}:10911", f"{name}-{broker_id}", 0))
        state.apply(fsm.ElectMaster("DefaultCluster", name, fsm.Trigger.BROKER, 1, 0, 0, 0, 1))
    return state
