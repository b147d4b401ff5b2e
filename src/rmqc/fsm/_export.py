"""History export: one row per command of the committed log (docs/export-schema.md).

`HistoryExporter` replays entries (`apply_entry`, as every replica applies them) into its own
`ControllerState`, so each row can say what the command did (result, epochs and SyncStateSet
after, master and set before) exactly as every replica saw it; `describe_entry` gives the rows'
`command`, `description` and `result`. Start it from the state the log continues from, then feed
entries in order.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from rmqc.errors import ProtocolError
from rmqc.raft import ConfState, Entry, EntryType

from ._commands import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ElectMaster,
    UpdateBrokerAddress,
)
from ._describe import describe_entry
from ._replay import Applied, apply_entry
from ._state import ApplyResult, ControllerState

# Column names and types, in the order of docs/export-schema.md (types as Spark/Arrow name them).
EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("controller_cluster", "string"),
    ("node_id", "string"),
    ("index", "long"),
    ("term", "long"),
    ("seq", "int"),
    ("command", "string"),
    ("leader_ts_ms", "long"),
    ("cluster_name", "string"),
    ("broker_name", "string"),
    ("broker_id", "long"),
    ("broker_address", "string"),
    ("register_check_code", "string"),
    ("trigger", "string"),
    ("elected", "boolean"),
    ("new_master_id", "long"),
    ("prev_master_id", "long"),
    ("master_epoch", "int"),
    ("sync_state_set_epoch", "int"),
    ("sync_state_set", "array<long>"),
    ("prev_sync_state_set", "array<long>"),
    ("clean_ids", "array<long>"),
    ("unclean_enabled", "boolean"),
    ("liveness_lost_ms", "long"),
    ("result", "string"),
    ("description", "string"),
    ("master_last_alive_ms", "long"),
    ("caller", "string"),
    ("caller_address", "string"),
    ("via_node", "string"),
    ("election_reason", "string"),
    ("deadline_missed_by_ms", "long"),
)
EXPORT_COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in EXPORT_COLUMNS)


def _command_columns(result: ApplyResult) -> dict[str, Any]:
    """Columns that come from the command itself (one small table per command type)."""
    c = result.command
    group = result.after or result.before
    base: dict[str, Any] = {"broker_name": c.broker_name, "leader_ts_ms": c.leader_ts_ms}
    base["cluster_name"] = getattr(c, "cluster_name", None) or (group.cluster_name if group else None)
    if c.origin is not None:
        base |= {"caller": c.origin.caller, "caller_address": c.origin.address, "via_node": c.origin.node}
    if isinstance(c, ApplyBrokerId):
        base |= {"broker_id": c.broker_id, "broker_address": c.broker_address,
                 "register_check_code": c.register_check_code}
    elif isinstance(c, UpdateBrokerAddress):
        base |= {"broker_id": c.broker_id, "broker_address": c.broker_address}
    elif isinstance(c, ElectMaster):
        base |= {"broker_id": c.requester_id, "trigger": str(c.trigger),
                 "elected": c.candidate is not None, "new_master_id": c.candidate,
                 "unclean_enabled": c.unclean, "liveness_lost_ms": c.liveness_lost_ms,
                 "master_last_alive_ms": c.master_last_alive_ms,
                 "election_reason": None if c.reason is None else str(c.reason),
                 "deadline_missed_by_ms": c.deadline_missed_by_ms,
                 "broker_address": result.after.address_of(c.candidate) if result.after else None}
    elif isinstance(c, AlterSyncStateSet):
        base |= {"broker_id": c.master_id}
    elif isinstance(c, CleanBrokerData):
        base |= {"clean_ids": list(c.broker_ids) if c.broker_ids else None}
    return base


def _group_columns(result: ApplyResult) -> dict[str, Any]:
    before, after = result.before, result.after
    return {
        "prev_master_id": before.master_id if before else None,
        "prev_sync_state_set": before.sorted_sync_state_set() if before else None,
        "master_epoch": after.master_epoch if after else None,
        "sync_state_set_epoch": after.sync_state_set_epoch if after else None,
        "sync_state_set": after.sorted_sync_state_set() if after else None,
    }


class HistoryExporter:
    """Turns committed entries into export rows, replaying them into its own state (by default
    empty, as before index 1)."""

    def __init__(self, controller_cluster: str, node_id: str, state: ControllerState | None = None,
                 conf_state: ConfState | None = None) -> None:
        self.controller_cluster = controller_cluster
        self.node_id = node_id
        self.state = ControllerState() if state is None else state
        self.conf_state = ConfState() if conf_state is None else conf_state

    def restore(self, snapshot_bytes: bytes) -> None:
        self.state.restore(snapshot_bytes)

    def rows_for_entry(self, entry: Entry) -> list[dict[str, Any]]:
        """One row per command (one for a no-op or a conf change). Raises CommandDecodeError for
        a NORMAL payload that does not decode; an undecodable conf change still gets its row."""
        try:
            applied = apply_entry(self.state, self.conf_state, entry)
        except ProtocolError:
            if entry.type != EntryType.CONF_CHANGE:
                raise
            applied = Applied([], self.conf_state)  # the membership it meant is unknown: kept
        self.conf_state = applied.conf_state
        described = describe_entry(entry, applied.results)["commands"]
        rows = []
        for seq, (command, result) in enumerate(zip_longest(described, applied.results)):
            columns = {} if result is None else {**_command_columns(result), **_group_columns(result)}
            rows.append(self._row(entry, seq, **command, **columns))
        return rows

    def _row(self, entry: Entry, seq: int, **columns: Any) -> dict[str, Any]:
        row = dict.fromkeys(EXPORT_COLUMN_NAMES)
        row.update(controller_cluster=self.controller_cluster, node_id=self.node_id,
                   index=entry.index, term=entry.term, seq=seq, result="ok")
        row.update(columns)
        return row
