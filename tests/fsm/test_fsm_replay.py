"""Replaying committed entries (`apply_entry`, `replay`) and describing them (`describe_entry`),
each written once and shared by the replica, `rmqc log dump`, `compact` and `export`."""

from __future__ import annotations

import pytest
from fsm_strategies import commands
from hypothesis import given, settings, strategies as st

from rmqc.fsm import (
    ApplyBrokerId,
    CommandDecodeError,
    ControllerState,
    ElectMaster,
    HistoryExporter,
    Trigger,
    apply_entry,
    describe_entry,
    encode_commands,
    replay,
)
from rmqc.raft import encode_conf_change
from rmqc.raft._types import ConfChange, ConfChangeType, ConfState, Entry, EntryType

C, N = "C", "broker-a"
THREE = ConfState(voters=("n1", "n2", "n3"))
REGISTER = [ApplyBrokerId(C, N, 1, "h1:1", "h1:1;0", 100), ApplyBrokerId(C, N, 2, "h2:1", "h2:1;0", 101)]
ELECT = ElectMaster(C, N, Trigger.BROKER, 1, 0, 0, 102, requester_id=1)
STALE = ElectMaster(C, N, Trigger.ADMIN, 2, 0, 0, 103, requester_id=2)  # masterEpoch 0 is gone by then


def normal(index: int, batch: list) -> Entry:
    return Entry(index, 1, EntryType.NORMAL, encode_commands(batch))


def conf(index: int, change: ConfChange) -> Entry:
    return Entry(index, 1, EntryType.CONF_CHANGE, encode_conf_change(change))


def test_a_normal_entry_applies_its_commands_and_keeps_the_membership() -> None:
    state = ControllerState()
    applied = apply_entry(state, THREE, normal(1, [*REGISTER, ELECT]))
    assert [str(r.status) for r in applied.results] == ["ok", "ok", "ok"]
    assert applied.conf_state == THREE and applied.conf_change is None
    assert state.group(N).master_id == 1


def test_a_noop_changes_nothing() -> None:
    state = ControllerState()
    applied = apply_entry(state, THREE, Entry(1, 1, EntryType.NORMAL, b""))
    assert applied.results == [] and applied.conf_state == THREE and len(state) == 0


def test_a_conf_change_moves_the_membership_and_hands_over_the_change() -> None:
    change = ConfChange(ConfChangeType.ADD_LEARNER, "n4", b"127.0.0.1:9")
    applied = apply_entry(ControllerState(), THREE, conf(1, change))
    assert applied.results == [] and applied.conf_change == change
    assert applied.conf_state == ConfState(voters=THREE.voters, learners=("n4",))


def test_an_undecodable_entry_raises_and_applies_nothing() -> None:
    state = ControllerState()
    with pytest.raises(CommandDecodeError):
        apply_entry(state, THREE, Entry(1, 1, EntryType.NORMAL, b"[[\"apply_broker_id\", 7]]"))
    assert len(state) == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(commands, max_size=4), max_size=8))
def test_replay_is_apply_entry_in_order(batches: list[list]) -> None:
    entries = [normal(i, batch) for i, batch in enumerate(batches, start=1)]
    entries.append(conf(len(entries) + 1, ConfChange(ConfChangeType.REMOVE_NODE, "n3")))
    stepped, conf_state = ControllerState(), THREE
    for entry in entries:
        conf_state = apply_entry(stepped, conf_state, entry).conf_state
    replayed, seen = ControllerState(), []
    assert replay(entries, replayed, THREE, lambda e: seen.append(e.index)) == conf_state
    assert replayed.snapshot() == stepped.snapshot()
    assert seen == [e.index for e in entries]


def test_describe_entry_without_results_decodes_the_payload() -> None:
    assert describe_entry(normal(7, [ELECT])) == {
        "index": 7, "term": 1, "type": "normal",
        "commands": [{"command": "elect_master", "description": "elect master broker-a -> 1 (masterEpoch 1)"}],
    }
    assert describe_entry(Entry(1, 1, EntryType.NORMAL, b""))["commands"] == [
        {"command": "noop", "description": "no-op (leader start)"}]
    [bad] = describe_entry(Entry(2, 1, EntryType.NORMAL, b"junk"))["commands"]
    assert bad["command"] == "undecodable" and bad["description"].startswith("undecodable payload: ")


def test_describe_entry_with_results_says_what_apply_refused() -> None:
    state = ControllerState()
    apply_entry(state, THREE, normal(1, [*REGISTER, ELECT]))
    results = apply_entry(state, THREE, normal(2, [STALE])).results
    [refused] = describe_entry(normal(2, [STALE]), results)["commands"]
    assert (refused["command"], refused["result"]) == ("elect_master", "stale_master_epoch")


def test_describe_a_conf_change_even_an_undecodable_one() -> None:
    entry = conf(3, ConfChange(ConfChangeType.REMOVE_NODE, "n3"))
    assert describe_entry(entry, [])["commands"] == [
        {"command": "conf_change", "description": "conf change: remove node n3"}]
    assert describe_entry(entry) == describe_entry(entry, [])  # a conf change has no command results
    [bad] = describe_entry(Entry(4, 1, EntryType.CONF_CHANGE, b"junk"))["commands"]
    assert bad["description"].startswith("conf change (undecodable: ")


def test_export_rows_are_the_entries_described_and_follow_the_membership() -> None:
    exporter, mirror = HistoryExporter("ctl", "n1", ControllerState(), THREE), ControllerState()
    for index, batch in enumerate([[*REGISTER, ELECT], [STALE]], start=1):
        rows = exporter.rows_for_entry(normal(index, batch))
        described = describe_entry(normal(index, batch), apply_entry(mirror, THREE, normal(index, batch)).results)
        assert [(r["command"], r["description"], r["result"]) for r in rows] == [
            (c["command"], c["description"], c["result"]) for c in described["commands"]]
    assert rows[0]["result"] == "stale_master_epoch"
    exporter.rows_for_entry(conf(3, ConfChange(ConfChangeType.REMOVE_NODE, "n3")))
    assert exporter.conf_state == ConfState(voters=("n1", "n2"))
