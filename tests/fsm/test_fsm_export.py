"""HistoryExporter rows against docs/export-schema.md."""

from __future__ import annotations

import re
from pathlib import Path

from fsm_strategies import commands
from hypothesis import given, settings, strategies as st

from rmqc.fsm import (
    EXPORT_COLUMNS,
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ControllerState,
    ElectMaster,
    HistoryExporter,
    Origin,
    Trigger,
    encode_commands,
)
from rmqc.raft import decode_conf_change, encode_conf_change
from rmqc.raft._types import ConfChange, ConfChangeType, Entry, EntryType

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "export-schema.md"
C, N = "C", "broker-a"


def schema_columns() -> list[tuple[str, str]]:
    rows = re.findall(r"^\| `(\w+)` \| ([\w<>]+) \|", SCHEMA.read_text(), re.MULTILINE)
    assert rows, "no column table found in export-schema.md"
    return rows


def test_columns_are_exactly_those_of_the_schema_in_order() -> None:
    assert list(EXPORT_COLUMNS) == schema_columns()


def entry(index: int, commands: list, term: int = 2) -> Entry:
    return Entry(index, term, EntryType.NORMAL, encode_commands(commands))


def setup_commands() -> list:
    return [
        ApplyBrokerId(C, N, 1, "h1:1", "h1:1;0", 100),
        ApplyBrokerId(C, N, 2, "h2:1", "h2:1;0", 101),
        ElectMaster(C, N, Trigger.BROKER, 1, 0, 0, 102, requester_id=1),
        AlterSyncStateSet(N, 1, 1, 1, (1, 2), 103),
    ]


def test_rows_per_command_with_before_and_after() -> None:
    exporter = HistoryExporter("ctl", "n1")
    rows = exporter.rows_for_entry(entry(5, setup_commands()))
    assert [r["seq"] for r in rows] == [0, 1, 2, 3]
    assert all(set(r) == {name for name, _ in EXPORT_COLUMNS} for r in rows)
    assert {(r["controller_cluster"], r["node_id"], r["index"], r["term"]) for r in rows} == {("ctl", "n1", 5, 2)}
    first, _, elected, altered = rows
    assert (first["command"], first["broker_id"], first["register_check_code"], first["trigger"]) == (
        "apply_broker_id", 1, "h1:1;0", None)
    assert first["prev_master_id"] is None and first["prev_sync_state_set"] is None
    assert (elected["command"], elected["trigger"], elected["elected"], elected["new_master_id"]) == (
        "elect_master", "broker", True, 1)
    assert (elected["master_epoch"], elected["sync_state_set"], elected["broker_address"]) == (1, [1], "h1:1")
    assert elected["description"] == "elect master broker-a -> 1 (masterEpoch 1)"
    assert (altered["cluster_name"], altered["prev_sync_state_set"], altered["sync_state_set"]) == (C, [1], [1, 2])
    assert altered["sync_state_set_epoch"] == 2 and altered["leader_ts_ms"] == 103 and altered["result"] == "ok"


def test_a_refused_command_says_why() -> None:
    exporter = HistoryExporter("ctl", "n1")
    exporter.rows_for_entry(entry(1, setup_commands()))
    stale = ElectMaster(C, N, Trigger.CONTROLLER, None, 0, 0, 200, liveness_lost_ms=190)
    [row] = exporter.rows_for_entry(entry(2, [stale]))
    assert row["result"] == "stale_master_epoch" and row["elected"] is False and row["new_master_id"] is None
    assert row["liveness_lost_ms"] == 190 and row["master_epoch"] == 1 and row["prev_master_id"] == 1


def test_clean_row_and_group_removal() -> None:
    exporter = HistoryExporter("ctl", "n1")
    exporter.rows_for_entry(entry(1, setup_commands()))
    [row] = exporter.rows_for_entry(entry(2, [CleanBrokerData(C, N, None, 300)]))
    assert row["command"] == "clean_broker_data" and row["clean_ids"] is None
    assert row["master_epoch"] is None and row["prev_sync_state_set"] == [1, 2]


def test_noop_and_conf_change_rows() -> None:
    exporter = HistoryExporter("ctl", "n1")
    [noop] = exporter.rows_for_entry(Entry(1, 1, EntryType.NORMAL, b""))
    assert (noop["command"], noop["broker_name"], noop["seq"], noop["result"]) == ("noop", None, 0, "ok")
    change = ConfChange(ConfChangeType.ADD_VOTER, "n3", b"127.0.0.1:9858")
    assert decode_conf_change(encode_conf_change(change)) == change
    [row] = exporter.rows_for_entry(Entry(2, 1, EntryType.CONF_CHANGE, encode_conf_change(change)))
    assert row["command"] == "conf_change" and row["description"] == "conf change: add voter n3 (127.0.0.1:9858)"
    [bad] = exporter.rows_for_entry(Entry(3, 1, EntryType.CONF_CHANGE, b"junk"))
    assert bad["description"].startswith("conf change (undecodable")


def test_exporter_restored_from_a_snapshot_continues_the_history() -> None:
    state = ControllerState()
    state.apply_all(setup_commands())
    exporter = HistoryExporter("ctl", "n1")
    exporter.restore(state.snapshot())
    [row] = exporter.rows_for_entry(entry(9, [ElectMaster(C, N, Trigger.ADMIN, 2, 1, 2, 400, requester_id=2)]))
    assert (row["result"], row["prev_master_id"], row["new_master_id"], row["master_epoch"]) == ("ok", 1, 2, 2)


@settings(max_examples=40)
@given(st.lists(st.lists(commands, min_size=0, max_size=5), max_size=10))
def test_export_rows_agree_with_the_state_that_applied_the_same_entries(entries) -> None:
    state, exporter = ControllerState(), HistoryExporter("ctl", "n1")
    for index, batch in enumerate(entries, start=1):
        rows = exporter.rows_for_entry(entry(index, batch))
        results = state.apply_all(batch)
        if not batch:
            assert [r["command"] for r in rows] == ["noop"]
            continue
        assert [r["result"] for r in rows] == [str(r.status) for r in results]
        for row, result in zip(rows, results, strict=True):
            after = result.after
            assert row["master_epoch"] == (after.master_epoch if after else None)
            assert row["sync_state_set"] == (after.sorted_sync_state_set() if after else None)
    assert exporter.state.snapshot() == state.snapshot()


def test_who_asked_is_in_the_description_and_its_own_columns() -> None:
    who = Origin("broker-key", "10.0.0.9:5000", "n1")
    commands = [ApplyBrokerId(C, N, 1, "h1:1", "h1:1;0", 100, origin=who),
                ElectMaster(C, N, Trigger.CONTROLLER, None, 0, 0, 101, origin=Origin(None, None, "n0")),
                ApplyBrokerId(C, N, 2, "h2:1", "h2:1;0", 102)]  # written before the audit
    rows = HistoryExporter("ctl", "n1").rows_for_entry(entry(5, commands))
    assert [(r["caller"], r["caller_address"], r["via_node"]) for r in rows] == [
        ("broker-key", "10.0.0.9:5000", "n1"), ("controller", None, "n0"), (None, None, None)]
    assert rows[0]["description"].endswith(" [by broker-key from 10.0.0.9:5000 via n1]")
    assert rows[1]["description"].endswith(" [by controller n0]")
    assert "[" not in rows[2]["description"].replace("[]", "")
