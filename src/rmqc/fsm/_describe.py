"""Log entries and commands in human words, described in one place: `describe_entry` is what
`rmqc log dump` prints and what `rmqc log export` writes (and `rmqc analyze` reads) as `command`,
`description` and `result`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rmqc.errors import ProtocolError
from rmqc.raft import Entry, EntryType, decode_conf_change

from ._commands import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    Command,
    DeleteKvConfig,
    DeleteTopicRoute,
    ElectMaster,
    ImportGroups,
    NotificationSent,
    Origin,
    PutKvConfig,
    RecordOperation,
    RegisterBrokerRoute,
    RegisterTopicRoute,
    SetWritePermOfBroker,
    UnregisterBrokerRoute,
    UpdateBrokerAddress,
    UpdateControllerConfig,
    command_tag,
    decode_commands,
)
from ._state import ApplyResult


def _ids(ids: tuple[int, ...] | None) -> str:
    return "[" + ", ".join(str(i) for i in ids or ()) + "]"


def _apply_broker_id(c: ApplyBrokerId) -> str:
    return f"apply broker id {c.broker_name} id {c.broker_id} at {c.broker_address} (cluster {c.cluster_name})"


def _update_broker_address(c: UpdateBrokerAddress) -> str:
    return f"update address {c.broker_name} id {c.broker_id} -> {c.broker_address}"


def _elect_master(c: ElectMaster) -> str:
    epoch = c.expected_master_epoch + 1
    if c.candidate is None:
        what = f"clear master {c.broker_name}: no candidate (masterEpoch {epoch}, {c.trigger} trigger)"
    else:
        what = f"elect master {c.broker_name} -> {c.candidate} (masterEpoch {epoch})"
    return what + _why(c)


def _why(c: ElectMaster) -> str:
    """The reason and the candidates weighed (nothing for commands written before they existed)."""
    if c.reason is None:
        return ""
    late = "" if c.deadline_missed_by_ms is None else f" by {c.deadline_missed_by_ms} ms"
    weighed = "; ".join(
        f"{broker_id}: epoch {epoch} offset {offset} priority {priority}{'' if in_sync else ' (not in sync)'}"
        for broker_id, epoch, offset, priority, in_sync in c.candidates)
    return f"; reason {c.reason}{late}; candidates [{weighed}]"


def _alter_sync_state_set(c: AlterSyncStateSet) -> str:
    epoch = c.expected_sync_state_set_epoch + 1
    return f"alter sync state set {c.broker_name} -> {_ids(c.new_sync_state_set)} (syncStateSetEpoch {epoch})"


def _clean_broker_data(c: CleanBrokerData) -> str:
    if not c.broker_ids:
        return f"clean broker data {c.broker_name}: whole group"
    return f"clean broker data {c.broker_name}: ids {_ids(c.broker_ids)}"


def _update_controller_config(c: UpdateControllerConfig) -> str:
    return "update controller config {" + ", ".join(f"{key}: {value}" for key, value in c.properties) + "}"


def _record_operation(c: RecordOperation) -> str:
    return f"{c.action.value.replace('_', ' ')}: {c.detail}"


def _register_broker_route(c: RegisterBrokerRoute) -> str:
    return (f"register route {c.broker_name} id {c.broker_id} at {c.broker_address} (cluster {c.cluster_name}, "
            f"{len(c.topics)} topics, stateVersion {c.state_version}, counter {c.data_counter})")


def _unregister_broker_route(c: UnregisterBrokerRoute) -> str:
    return f"unregister route {c.broker_name} id {c.broker_id} at {c.broker_address} ({c.reason})"


def _delete_topic_route(c: DeleteTopicRoute) -> str:
    return f"delete topic {c.topic}" + (f" in cluster {c.cluster_name}" if c.cluster_name else "")


def _put_kv_config(c: PutKvConfig) -> str:
    return f"put kv {c.namespace}/{c.key} ({len(c.value)} characters)"


def _delete_kv_config(c: DeleteKvConfig) -> str:
    return f"delete kv {c.namespace}/{c.key}"


def _register_topic_route(c: RegisterTopicRoute) -> str:
    return f"register topic {c.topic} on " + ", ".join(f"{row[0]} (perm {row[3]})" for row in c.queues)


def _set_write_perm_of_broker(c: SetWritePermOfBroker) -> str:
    return f"{'wipe' if c.wipe else 'add'} write permission of {c.broker_name}"
def _notification_sent(c: NotificationSent) -> str:
    return (f"1008 sent to {c.broker_name} id {c.broker_id} at {c.broker_address} (masterEpoch {c.master_epoch}, "
            f"{c.after_commit_ms} ms after the commit)")


def _import_groups(c: ImportGroups) -> str:
    names = ", ".join(row[1] for row in c.groups[:5]) + (", ..." if len(c.groups) > 5 else "")
    return f"import {len(c.groups)} broker group(s) from {c.source}: {names}"


# keyed by the command's type, so each describer takes that type (Any: a dict cannot say so)
_DESCRIBERS: dict[type, Callable[[Any], str]] = {
    ApplyBrokerId: _apply_broker_id,
    UpdateBrokerAddress: _update_broker_address,
    ElectMaster: _elect_master,
    AlterSyncStateSet: _alter_sync_state_set,
    CleanBrokerData: _clean_broker_data,
    UpdateControllerConfig: _update_controller_config,
    RegisterBrokerRoute: _register_broker_route,
    UnregisterBrokerRoute: _unregister_broker_route,
    DeleteTopicRoute: _delete_topic_route,
    PutKvConfig: _put_kv_config,
    DeleteKvConfig: _delete_kv_config,
    RecordOperation: _record_operation,
    RegisterTopicRoute: _register_topic_route,
    SetWritePermOfBroker: _set_write_perm_of_broker,
    ImportGroups: _import_groups,
    NotificationSent: _notification_sent,
}


def describe_origin(origin: Origin) -> str:
    """E.g. "by ops-admin from 10.0.0.9:52110 via n1", or "by controller n0"."""
    if origin.is_controller:
        return f"by controller {origin.node or '?'}"
    return f"by {origin.caller} from {origin.address} via {origin.node or '?'}"


def describe_command(command: Command) -> str:
    """E.g. "elect master broker-a -> 2 (masterEpoch 3) [by ops-admin from 10.0.0.9:52110 via n1]"
    (epochs are those the command produces; no brackets for a command written before the audit)."""
    text = _DESCRIBERS[type(command)](command)
    origin = command.origin
    return text if origin is None else f"{text} [{describe_origin(origin)}]"


def describe_entry(entry: Entry, results: Sequence[ApplyResult] | None = None) -> dict[str, Any]:
    """`{"index", "term", "type", "commands"}`, each command a `{"command", "description"}` dict
    (`command`: the tag of the export, "noop" for a leader's empty entry, "conf_change", or
    "undecodable"). `results` (from `apply_entry`) add each command's `result`: "ok" or why apply
    refused it. Without them the payload is decoded here; one that does not decode is described
    as such, naming why."""
    return {"index": entry.index, "term": entry.term, "type": entry.type.name.lower(),
            "commands": _entry_commands(entry, results)}


def _entry_commands(entry: Entry, results: Sequence[ApplyResult] | None) -> list[dict[str, str]]:
    if entry.type == EntryType.CONF_CHANGE:
        return [{"command": "conf_change", "description": _describe_conf_change(entry.data)}]
    if results is not None:
        return [{"command": command_tag(r.command), "description": describe_command(r.command),
                 "result": str(r.status)} for r in results] or [dict(_NOOP)]
    try:
        commands = decode_commands(entry.data)
    except ProtocolError as exc:
        return [{"command": "undecodable", "description": f"undecodable payload: {exc}"}]
    return [{"command": command_tag(c), "description": describe_command(c)} for c in commands] or [dict(_NOOP)]


_NOOP = {"command": "noop", "description": "no-op (leader start)"}


def _describe_conf_change(data: bytes) -> str:
    try:
        change = decode_conf_change(data)
    except ProtocolError as exc:  # still say the entry is there
        return f"conf change (undecodable: {exc})"
    kind = change.type.name.lower().replace("_", " ")
    context = change.context.decode("utf-8", "replace")
    return f"conf change: {kind} {change.node_id}" + (f" ({context})" if context else "")
