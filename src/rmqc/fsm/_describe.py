"""`describe_command`: one command in human words, as `rmqc log dump` prints it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._commands import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    Command,
    ElectMaster,
    UpdateBrokerAddress,
)


def _ids(ids: tuple[int, ...] | None) -> str:
    return "[" + ", ".join(str(i) for i in ids or ()) + "]"


def _apply_broker_id(c: ApplyBrokerId) -> str:
    return f"apply broker id {c.broker_name} id {c.broker_id} at {c.broker_address} (cluster {c.cluster_name})"


def _update_broker_address(c: UpdateBrokerAddress) -> str:
    return f"update address {c.broker_name} id {c.broker_id} -> {c.broker_address}"


def _elect_master(c: ElectMaster) -> str:
    epoch = c.expected_master_epoch + 1
    if c.candidate is None:
        return f"clear master {c.broker_name}: no candidate (masterEpoch {epoch}, {c.trigger} trigger)"
    return f"elect master {c.broker_name} -> {c.candidate} (masterEpoch {epoch})"


def _alter_sync_state_set(c: AlterSyncStateSet) -> str:
    epoch = c.expected_sync_state_set_epoch + 1
    return f"alter sync state set {c.broker_name} -> {_ids(c.new_sync_state_set)} (syncStateSetEpoch {epoch})"


def _clean_broker_data(c: CleanBrokerData) -> str:
    if not c.broker_ids:
        return f"clean broker data {c.broker_name}: whole group"
    return f"clean broker data {c.broker_name}: ids {_ids(c.broker_ids)}"


# keyed by the command's type, so each describer takes that type (Any: a dict cannot say so)
_DESCRIBERS: dict[type, Callable[[Any], str]] = {
    ApplyBrokerId: _apply_broker_id,
    UpdateBrokerAddress: _update_broker_address,
    ElectMaster: _elect_master,
    AlterSyncStateSet: _alter_sync_state_set,
    CleanBrokerData: _clean_broker_data,
}


def describe_command(command: Command) -> str:
    """E.g. "elect master broker-a -> 2 (masterEpoch 3)" (epochs are those the command produces)."""
    return _DESCRIBERS[type(command)](command)
