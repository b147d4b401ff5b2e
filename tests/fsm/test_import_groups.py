"""ImportGroups (rmqc migrate from-java): apply, refusals, the idempotent re-run, codec and
snapshot round trip, and the request that proposes it (RMQC_IMPORT_GROUPS through the processor)."""

from __future__ import annotations

import orjson
import pytest

from rmqc.fsm import (
    ApplyStatus,
    CommandDecodeError,
    ControllerState,
    ImportGroups,
    Origin,
    decode_commands,
    describe_command,
    encode_commands,
    row_of_group,
)
from rmqc.remoting import RMQC_IMPORT_GROUPS, ResponseCode, loads_fastjson
from rmqc.testing.controller_harness import ControllerHarness

C = "DefaultCluster"
ROW_A = (C, "broker-a", 4, ((1, "10.0.0.1:10911", ""), (2, "10.0.0.2:10911", ""), (3, "10.0.0.3:10911", "")),
         2, 7, (1, 2), 12)
ROW_B = (C, "broker-b", 2, ((1, "10.0.0.4:10911", ""),), None, 0, (), 0)
ORIGIN = Origin("ops-admin", "10.0.0.9:52110", "n1")


def importing(*rows: tuple, origin: Origin | None = ORIGIN) -> ImportGroups:
    return ImportGroups("java controller 10.0.0.5:9878", tuple(rows), 1_700_000_000_000, origin)


def test_import_sets_every_field_of_every_group_exactly() -> None:
    state = ControllerState()
    result = state.apply(importing(ROW_A, ROW_B))
    assert result.ok and result.remark is None
    a = state.group("broker-a")
    assert a is not None
    assert (a.master_id, a.master_address, a.master_epoch) == (2, "10.0.0.2:10911", 7)
    assert (a.sorted_sync_state_set(), a.sync_state_set_epoch, a.next_broker_id) == ([1, 2], 12, 4)
    assert {i: r.address for i, r in a.replicas.items()} == {1: "10.0.0.1:10911", 2: "10.0.0.2:10911",
                                                            3: "10.0.0.3:10911"}
    assert [row_of_group(g) for g in sorted(state.groups(), key=lambda g: g.broker_name)] == [ROW_A, ROW_B]


def test_imported_epochs_continue_upwards() -> None:
    """The next election and SyncStateSet change build on the imported epochs (never from 1)."""
    from rmqc.fsm import AlterSyncStateSet, ElectMaster, Trigger

    state = ControllerState()
    state.apply(importing(ROW_A))
    assert state.apply(AlterSyncStateSet("broker-a", 2, 7, 12, (1, 2, 3), 2)).ok
    assert state.group("broker-a").sync_state_set_epoch == 13
    assert state.apply(ElectMaster(C, "broker-a", Trigger.CONTROLLER, 3, 7, 13, 3)).ok
    group = state.group("broker-a")
    assert (group.master_id, group.master_epoch, group.sync_state_set_epoch) == (3, 8, 14)


def test_a_rerun_of_the_same_import_changes_nothing() -> None:
    state = ControllerState()
    state.apply(importing(ROW_A, ROW_B))
    before = state.snapshot()
    again = state.apply(importing(ROW_B, ROW_A, origin=None))
    assert again.ok and again.remark == "unchanged"
    assert state.snapshot() == before


@pytest.mark.parametrize("changed", [
    (C, "broker-a", 4, ROW_A[3], 2, 8, (1, 2), 13),  # the group moved on since (a failover)
    (C, "broker-c", 2, ((1, "10.0.0.7:10911", ""),), 1, 1, (1,), 1),  # another group
])
def test_an_import_into_a_cluster_holding_other_groups_is_refused(changed: tuple) -> None:
    state = ControllerState()
    state.apply(importing(ROW_A))
    before = state.snapshot()
    refused = state.apply(importing(changed))
    assert refused.status is ApplyStatus.NOT_EMPTY and "already holds 1 broker group" in (refused.remark or "")
    assert state.snapshot() == before


def test_an_import_into_a_cluster_that_registered_brokers_itself_is_refused() -> None:
    from rmqc.fsm import ApplyBrokerId

    state = ControllerState()
    assert state.apply(ApplyBrokerId(C, "broker-a", 1, "10.0.0.1:10911", "10.0.0.1:10911;1", 1)).ok
    assert state.apply(importing(ROW_A)).status is ApplyStatus.NOT_EMPTY


@pytest.mark.parametrize(("row", "problem"), [
    ((C, "x", 2, (), None, 0, (), 0), "no broker ids"),
    ((C, "x", 2, ((1, "a:1", ""), (1, "a:2", "")), None, 0, (), 0), "not distinct positive ids"),
    ((C, "x", 2, ((0, "a:1", ""),), None, 0, (), 0), "not distinct positive ids"),
    ((C, "x", 2, ((2, "a:1", ""),), None, 0, (), 0), "nextBrokerId 2 would hand out an id already taken"),
    ((C, "x", 3, ((1, "a:1", ""), (2, "a:2", "")), 3, 1, (3,), 1), "master 3 is not a registered id"),
    ((C, "x", 3, ((1, "a:1", ""), (2, "a:2", "")), 1, 0, (1,), 1), "master 1 is not a registered id"),
    ((C, "x", 3, ((1, "a:1", ""), (2, "a:2", "")), 1, 1, (1, 5), 1), "names an id that is not registered"),
    ((C, "x", 3, ((1, "a:1", ""), (2, "a:2", "")), 1, 1, (2,), 1), "master 1 is not in its SyncStateSet"),
    ((C, "x", 3, ((1, "a:1", ""), (2, "a:2", "")), None, -1, (), 0), "a negative epoch"),
])
def test_rows_that_contradict_themselves_are_refused_naming_why(row: tuple, problem: str) -> None:
    state = ControllerState()
    refused = state.apply(importing(row))
    assert refused.status is ApplyStatus.INVALID_IMPORT and problem in (refused.remark or "")
    assert len(state) == 0


def test_a_broker_name_twice_is_refused() -> None:
    refused = ControllerState().apply(importing(ROW_A, ROW_A))
    assert refused.status is ApplyStatus.INVALID_IMPORT and "twice" in (refused.remark or "")


def test_codec_round_trip_keeps_origin_and_rows() -> None:
    command = importing(ROW_A, ROW_B)
    (decoded,) = decode_commands(encode_commands([command]))
    assert decoded == command
    assert describe_command(decoded) == ("import 2 broker group(s) from java controller 10.0.0.5:9878: broker-a, "
                                         "broker-b [by ops-admin from 10.0.0.9:52110 via n1]")


@pytest.mark.parametrize(("groups", "message"), [
    ("nope", "expected a list of broker group rows"),
    ([[C, "x", 2]], "group row 0 is not an array of 8 fields"),
    ([[C, "x", "2", [], None, 0, [], 0]], "group row 0 has a field of the wrong type"),
    ([[C, "x", 2, [[1, "a:1"]], None, 0, [], 0]], "replicas must be"),
    ([[C, "x", 2, [[1, "a:1", ""]], None, 0, ["1"], 0]], "expected a list of integers"),
])
def test_bad_rows_in_the_log_are_named(groups: object, message: str) -> None:
    payload = orjson.dumps([["import_groups", {"source": "s", "groups": groups, "leader_ts_ms": 1}]])
    with pytest.raises(CommandDecodeError, match=message):
        decode_commands(payload)


def test_snapshot_round_trip_keeps_the_imported_groups_and_a_rerun_stays_unchanged() -> None:
    state = ControllerState()
    state.apply(importing(ROW_A, ROW_B))
    restored = ControllerState()
    restored.restore(state.snapshot())
    assert restored.snapshot() == state.snapshot()
    assert restored.apply(importing(ROW_A, ROW_B)).remark == "unchanged"


# ---- the request (RMQC_IMPORT_GROUPS) through the processor --------------------------------------


def ask_import(h: ControllerHarness, *rows: tuple, body: bytes | None = None):
    raw = body if body is not None else orjson.dumps({"source": "java controller 10.0.0.5:9878", "groups": rows})
    response = h.request(RMQC_IMPORT_GROUPS, None, raw)
    assert response is not None
    return response


def test_the_request_imports_then_answers_unchanged_then_refuses_a_different_import() -> None:
    h = ControllerHarness()
    first = ask_import(h, ROW_A)
    assert first.code == ResponseCode.SUCCESS and loads_fastjson(first.body) == {"groups": 1, "unchanged": False}
    info = h.request(1004, {"brokerName": "broker-a"})
    assert info is not None and (info.ext("masterBrokerId"), info.ext("masterEpoch")) == ("2", "7")
    again = ask_import(h, ROW_A)
    assert again.code == ResponseCode.SUCCESS and loads_fastjson(again.body) == {"groups": 1, "unchanged": True}
    other = ask_import(h, ROW_B)
    assert other.code == ResponseCode.CONTROLLER_INVALID_REQUEST and "already holds" in (other.remark or "")


def test_a_bad_request_body_is_answered_naming_what_was_wrong() -> None:
    h = ControllerHarness()
    assert "the import body must be" in (ask_import(h, body=b"[1]").remark or "")
    bad = ask_import(h, body=orjson.dumps({"source": "s", "groups": [[C]]}))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "group row 0 is not an array" in (bad.remark or "")
    invalid = ask_import(h, (C, "x", 2, (), None, 0, (), 0))
    assert invalid.code == ResponseCode.INVALID_PARAMETER and "no broker ids" in (invalid.remark or "")
