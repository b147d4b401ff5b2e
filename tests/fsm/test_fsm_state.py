"""ControllerState.apply (spec 4.2 with rmqc's one-record groups), commands codec and snapshot."""

from __future__ import annotations

import contextlib
import dataclasses

import orjson
import pytest
from fsm_strategies import commands
from hypothesis import given, settings, strategies as st

from rmqc.fsm import (
    COMMAND_TAGS,
    AlterSyncStateSet,
    ApplyBrokerId,
    ApplyStatus,
    CleanBrokerData,
    CommandDecodeError,
    ControllerState,
    ElectionReason,
    ElectMaster,
    Origin,
    PutKvConfig,
    Trigger,
    UpdateBrokerAddress,
    UpdateControllerConfig,
    decode_commands,
    describe_command,
    encode_commands,
    encode_commands_as_decoded,
)

C, N = "C", "broker-a"


def apply_id(broker_id: int, code: str | None = None, name: str = N) -> ApplyBrokerId:
    return ApplyBrokerId(C, name, broker_id, f"h{broker_id}:1", code or f"h{broker_id}:1;0", 1)


def elect(candidate: int | None, master_epoch: int, sss_epoch: int, name: str = N) -> ElectMaster:
    return ElectMaster(C, name, Trigger.BROKER, candidate, master_epoch, sss_epoch, 2, requester_id=candidate)


def alter(ids: tuple[int, ...], master: int, master_epoch: int, sss_epoch: int) -> AlterSyncStateSet:
    return AlterSyncStateSet(N, master, master_epoch, sss_epoch, ids, 3)


def three_replicas_with_master() -> ControllerState:
    state = ControllerState()
    for broker_id in (1, 2, 3):
        assert state.apply(apply_id(broker_id)).ok
    assert state.apply(elect(1, 0, 0)).ok
    assert state.apply(alter((1, 2, 3), 1, 1, 1)).ok
    return state


def test_first_id_creates_the_group_and_next_id_follows() -> None:
    state = ControllerState()
    assert state.apply(apply_id(2)).status is ApplyStatus.FIRST_ID_NOT_ONE and len(state) == 0
    result = state.apply(apply_id(1))
    assert result.ok and result.before is None
    group = state.group(N)
    assert (group.next_broker_id, group.master_id, group.master_epoch) == (2, None, 0)
    assert group.sync_state_set == frozenset()


def test_apply_id_is_idempotent_with_the_same_check_code_only() -> None:
    state = ControllerState()
    state.apply(apply_id(1))
    again = state.apply(apply_id(1))
    assert again.ok and again.after is again.before and state.group(N).next_broker_id == 2
    other = state.apply(apply_id(1, code="x:1;9"))
    assert other.status is ApplyStatus.BROKER_ID_TAKEN and state.group(N).replicas[1].register_check_code == "h1:1;0"


def test_next_id_skips_past_a_self_chosen_id() -> None:
    state = ControllerState()
    state.apply(apply_id(1))
    state.apply(apply_id(5))
    assert state.group(N).next_broker_id == 6


def test_update_address_keeps_the_check_code() -> None:
    state = ControllerState()
    state.apply(apply_id(1))
    assert state.apply(UpdateBrokerAddress(C, N, 1, "new:1", 4)).ok
    replica = state.group(N).replicas[1]
    assert (replica.address, replica.register_check_code) == ("new:1", "h1:1;0")
    assert state.apply(UpdateBrokerAddress(C, N, 7, "new:1", 4)).status is ApplyStatus.UNKNOWN_BROKER
    assert state.apply(UpdateBrokerAddress(C, "x", 1, "new:1", 4)).status is ApplyStatus.UNKNOWN_GROUP


def test_elect_sets_master_and_bumps_both_epochs() -> None:
    state = three_replicas_with_master()
    result = state.apply(elect(2, 1, 2))
    g = result.after
    assert (g.master_id, g.master_epoch, g.sync_state_set, g.sync_state_set_epoch) == (2, 2, frozenset({2}), 3)
    assert result.before.master_id == 1


def test_elect_without_candidate_clears_master_and_keeps_the_set() -> None:
    state = three_replicas_with_master()
    g = state.apply(ElectMaster(C, N, Trigger.CONTROLLER, None, 1, 2, 5)).after
    assert (g.master_id, g.master_epoch, g.sync_state_set, g.sync_state_set_epoch) == (None, 2, frozenset({1, 2, 3}), 2)


@pytest.mark.parametrize(
    ("command", "status"),
    [
        (elect(2, 0, 2), ApplyStatus.STALE_MASTER_EPOCH),
        (elect(2, 1, 1), ApplyStatus.STALE_SYNC_STATE_SET_EPOCH),
        (elect(9, 1, 2), ApplyStatus.UNKNOWN_CANDIDATE),
        (elect(2, 1, 2, name="other"), ApplyStatus.UNKNOWN_GROUP),
        (alter((1, 2, 3), 1, 1, 2), ApplyStatus.SYNC_STATE_SET_UNCHANGED),
        (alter((1, 2), 2, 1, 2), ApplyStatus.NOT_MASTER),
        (alter((1, 2), 1, 0, 2), ApplyStatus.STALE_MASTER_EPOCH),
        (alter((1, 2), 1, 1, 1), ApplyStatus.STALE_SYNC_STATE_SET_EPOCH),
        (alter((1, 4), 1, 1, 2), ApplyStatus.UNREGISTERED_REPLICA),
        (alter((2, 3), 1, 1, 2), ApplyStatus.MASTER_NOT_IN_SYNC_STATE_SET),
        (CleanBrokerData(C, "other", None, 1), ApplyStatus.UNKNOWN_GROUP),
    ],
)
def test_failed_preconditions_are_named_and_change_nothing(command, status) -> None:
    state = three_replicas_with_master()
    before = state.snapshot()
    result = state.apply(command)
    assert result.status is status and not result.ok
    assert state.snapshot() == before


def test_two_racing_commands_cannot_both_win() -> None:
    state = three_replicas_with_master()
    first, second = elect(2, 1, 2), elect(3, 1, 2)  # both decided against the same state
    assert state.apply(first).ok
    assert state.apply(second).status is ApplyStatus.STALE_MASTER_EPOCH
    assert state.group(N).master_id == 2


def test_alter_replaces_the_set_and_bumps_its_epoch() -> None:
    state = three_replicas_with_master()
    g = state.apply(alter((1, 3), 1, 1, 2)).after
    assert (g.sync_state_set, g.sync_state_set_epoch, g.master_epoch) == (frozenset({1, 3}), 3, 1)


def test_clean_some_ids_keeps_epochs_and_master() -> None:
    state = three_replicas_with_master()
    g = state.apply(CleanBrokerData(C, N, (1,), 6)).after
    assert sorted(g.replicas) == [2, 3] and g.sync_state_set == frozenset({2, 3})
    assert (g.master_id, g.master_epoch, g.sync_state_set_epoch, g.next_broker_id) == (1, 1, 2, 4)


def test_clean_never_splits_a_group() -> None:
    """Java can drop SyncStateInfo while ids remain (spec 4.2 quirk); rmqc keeps one record."""
    state = ControllerState()
    state.apply(apply_id(1))
    state.apply(apply_id(2))
    g = state.apply(CleanBrokerData(C, N, (1,), 6)).after  # never elected: its set was empty
    assert g is not None and sorted(g.replicas) == [2] and state.group(N) is g


@pytest.mark.parametrize("ids", [None, (), (1, 2, 3)])
def test_clean_everything_removes_the_group(ids) -> None:
    state = three_replicas_with_master()
    result = state.apply(CleanBrokerData(C, N, ids, 6))
    assert result.ok and result.after is None and state.group(N) is None and len(state) == 0


def test_groups_are_independent() -> None:
    state = three_replicas_with_master()
    other_before = state.apply(apply_id(1, name="b")).after
    state.apply(elect(2, 1, 2))
    state.apply(CleanBrokerData(C, N, None, 7))
    assert state.group("b") is other_before


def test_describe_command() -> None:
    assert describe_command(elect(2, 2, 4)) == "elect master broker-a -> 2 (masterEpoch 3)"
    assert "no candidate" in describe_command(ElectMaster(C, N, Trigger.CONTROLLER, None, 2, 4, 0))
    assert describe_command(alter((1, 2), 1, 1, 2)) == "alter sync state set broker-a -> [1, 2] (syncStateSetEpoch 3)"
    assert describe_command(CleanBrokerData(C, N, None, 0)) == "clean broker data broker-a: whole group"
    assert describe_command(apply_id(3)).startswith("apply broker id broker-a id 3 at h3:1")


# ---- codec ---------------------------------------------------------------------------------------

@given(st.lists(commands, max_size=20))
def test_encode_decode_round_trip(cmds) -> None:
    assert decode_commands(encode_commands(cmds)) == cmds


@given(st.lists(commands, max_size=20))
def test_commands_built_with_their_field_types_are_as_decoded(cmds) -> None:
    """The proposing leader applies such commands instead of decoding its entry: they must equal
    the decoding, and their fields have its types (a list would not equal a decoded tuple's use)."""
    payload, as_decoded = encode_commands_as_decoded(cmds)
    assert payload == encode_commands(cmds) and as_decoded
    decoded = decode_commands(payload)
    assert decoded == cmds
    assert [[type(getattr(c, f.name)) for f in dataclasses.fields(c)] for c in cmds] == \
        [[type(getattr(c, f.name)) for f in dataclasses.fields(c)] for c in decoded]


def test_a_command_with_a_list_where_decoding_gives_a_tuple_is_not_as_decoded() -> None:
    """Built with a list (the check accepts it and the payload is the same), so the leader must
    decode its entry as the followers do, or its state would hold a list where theirs hold a tuple."""
    as_tuple = AlterSyncStateSet(N, 1, 1, 2, (1, 2), 5)
    as_list = AlterSyncStateSet(N, 1, 1, 2, [1, 2], 5)  # type: ignore[arg-type]
    row_as_list = UpdateControllerConfig((("x", "1"),), 5)
    nested_list = UpdateControllerConfig((["x", "1"],), 5)  # type: ignore[arg-type]
    assert encode_commands_as_decoded([as_tuple, row_as_list]) == (encode_commands([as_tuple, row_as_list]), True)
    assert encode_commands_as_decoded([as_tuple, as_list]) == (encode_commands([as_tuple, as_tuple]), False)
    assert encode_commands_as_decoded([nested_list])[1] is False


def test_decoded_commands_are_the_records_their_constructors_build() -> None:
    """Decoding stores fields straight into the slots: the records must still be frozen, equal
    and hash alike, with every field set (a missing one would raise AttributeError here)."""
    origin = Origin("ak", "10.0.0.9:4000", "n1")
    built = [ApplyBrokerId(C, N, 2, "h2:1", "h2:1;7", 9, origin, True),
             ElectMaster(C, N, Trigger.CONTROLLER, None, 2, 4, 0, liveness_lost_ms=3, attempt=2, origin=origin)]
    decoded = decode_commands(encode_commands(built))
    assert decoded == built and [hash(c) for c in decoded] == [hash(c) for c in built]
    assert [repr(c) for c in decoded] == [repr(c) for c in built]
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded[0].broker_id = 3  # type: ignore[misc]


def test_empty_payload_is_a_no_op() -> None:
    assert encode_commands([]) == b"" and decode_commands(b"") == []


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{", "not JSON"),
        (b'{"a":1}', "not a list"),
        (b'[["nope",{}]]', "unknown tag"),
        (b'[["elect_master",{"broker_name":"x"}]]', "bad fields"),
        (b'[["clean_broker_data",{"cluster_name":null,"broker_name":"b","broker_ids":"x","leader_ts_ms":1}]]',
         "bad fields"),
        (b"[1]", "is not a .tag, fields. pair"),
    ],
)
def test_bad_payloads_raise_a_named_error(payload: bytes, message: str) -> None:
    with pytest.raises(CommandDecodeError, match=message):
        decode_commands(payload)


# Written by the codec before this one (cattrs): logs already on disk must keep decoding, and the
# same commands must keep encoding to the same bytes.
GOLDEN_PAYLOAD = (
    b'[["apply_broker_id",{"cluster_name":"C","broker_name":"b","broker_id":1,"broker_address":"10.0.0.1:10911",'
    b'"register_check_code":"10.0.0.1:10911;1","leader_ts_ms":1700000000001}],'
    b'["update_broker_address",{"cluster_name":"C","broker_name":"b","broker_id":1,"broker_address":"10.0.0.1:10912",'
    b'"leader_ts_ms":1700000000002}],'
    b'["elect_master",{"cluster_name":"C","broker_name":"b","trigger":"controller","candidate":2,'
    b'"expected_master_epoch":3,"expected_sync_state_set_epoch":4,"leader_ts_ms":1700000000003,"requester_id":null,'
    b'"unclean":true,"liveness_lost_ms":1700000000000,"attempt":2}],'
    b'["alter_sync_state_set",{"broker_name":"b","master_id":2,"expected_master_epoch":4,'
    b'"expected_sync_state_set_epoch":5,"new_sync_state_set":[1,2],"leader_ts_ms":1700000000004}],'
    b'["clean_broker_data",{"cluster_name":null,"broker_name":"b","broker_ids":[3],"leader_ts_ms":1700000000005}],'
    b'["clean_broker_data",{"cluster_name":"C","broker_name":"b","broker_ids":null,"leader_ts_ms":1700000000006}]]'
)
GOLDEN_COMMANDS = [
    ApplyBrokerId("C", "b", 1, "10.0.0.1:10911", "10.0.0.1:10911;1", 1700000000001),
    UpdateBrokerAddress("C", "b", 1, "10.0.0.1:10912", 1700000000002),
    ElectMaster("C", "b", Trigger.CONTROLLER, 2, 3, 4, 1700000000003, None, True, 1700000000000, 2),
    AlterSyncStateSet("b", 2, 4, 5, (1, 2), 1700000000004),
    CleanBrokerData(None, "b", (3,), 1700000000005),
    CleanBrokerData("C", "b", None, 1700000000006),
]


def test_payloads_of_the_previous_codec_decode_and_encode_byte_for_byte() -> None:
    decoded = decode_commands(GOLDEN_PAYLOAD)
    assert decoded == GOLDEN_COMMANDS
    assert type(decoded[2].trigger) is Trigger and type(decoded[3].new_sync_state_set) is tuple
    assert decoded[2].master_last_alive_ms is None  # written before the field existed: unknown
    assert (decoded[2].reason, decoded[2].deadline_missed_by_ms, decoded[2].candidates) == (None, None, ())
    assert all(command.origin is None for command in decoded)  # written before the audit: no origin
    assert decoded[0].same_cluster_only is False  # nor the apply-time cluster check
    # fields added since are written after the old ones, which keep their bytes and order
    added = {"elect_master": ["master_last_alive_ms", "origin", "reason", "deadline_missed_by_ms", "candidates"],
             "apply_broker_id": ["origin", "same_cluster_only"]}
    old_items, new_items = orjson.loads(GOLDEN_PAYLOAD), orjson.loads(encode_commands(GOLDEN_COMMANDS))
    for (tag, old_fields), (new_tag, new_fields) in zip(old_items, new_items, strict=True):
        assert new_tag == tag
        assert list(new_fields.items())[: len(old_fields)] == list(old_fields.items())
        assert list(new_fields)[len(old_fields):] == added.get(tag, ["origin"])


def test_an_election_keeps_its_reason_and_candidates_through_the_log() -> None:
    election = ElectMaster("C", "b", Trigger.CONTROLLER, 2, 3, 4, 1_700_000_000_003,
                           reason=ElectionReason.HEARTBEAT_MISSED, deadline_missed_by_ms=12,
                           candidates=((2, 3, 900, 1, True), (3, 3, 100, 1, False)))
    payload = encode_commands([election])
    fields = orjson.loads(payload)[0][1]
    assert fields["reason"] == "heartbeat_deadline_missed" and fields["deadline_missed_by_ms"] == 12
    assert fields["candidates"] == [[2, 3, 900, 1, True], [3, 3, 100, 1, False]]
    decoded = decode_commands(payload)[0]
    assert decoded == election and type(decoded.reason) is ElectionReason  # type: ignore[union-attr]
    assert describe_command(decoded).endswith(
        "; reason heartbeat_deadline_missed by 12 ms; candidates [2: epoch 3 offset 900 priority 1; "
        "3: epoch 3 offset 100 priority 1 (not in sync)]")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (b'"reason":"bored"', "field 'reason': 'bored' is not a valid ElectionReason"),
        (b'"reason":3', "field 'reason': expected an election reason"),
        (b'"candidates":[[1,2,3,4]]',
         "field 'candidates': expected a .brokerId, epoch, maxOffset, priority, inSync. row"),
        (b'"candidates":[[1,2,3,4,1]]', "field 'candidates': expected a .brokerId"),
        (b'"candidates":{}', "field 'candidates': expected a list of candidate rows"),
    ],
)
def test_a_bad_reason_or_candidate_is_named(fields: bytes, message: str) -> None:
    payload = (b'[["elect_master",{"cluster_name":"C","broker_name":"b","trigger":"controller","candidate":null,'
               b'"expected_master_epoch":0,"expected_sync_state_set_epoch":0,"leader_ts_ms":5,' + fields + b"}]]")
    with pytest.raises(CommandDecodeError, match=f"command 0 .elect_master. has bad fields: {message}"):
        decode_commands(payload)


def test_defaulted_fields_may_be_absent_and_unknown_fields_are_ignored() -> None:
    payload = (b'[["elect_master",{"cluster_name":"C","broker_name":"b","trigger":"admin","candidate":null,'
               b'"expected_master_epoch":0,"expected_sync_state_set_epoch":0,"leader_ts_ms":5,"from_the_future":1}]]')
    assert decode_commands(payload) == [ElectMaster("C", "b", Trigger.ADMIN, None, 0, 0, 5)]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (b'"broker_id":true', "field 'broker_id': expected int, got True"),
        (b'"broker_id":1.0', "field 'broker_id': expected int"),
        (b'"broker_id":"1"', "field 'broker_id': expected int"),
        (b'"broker_id":null', "field 'broker_id': expected int"),
        (b'"broker_address":7', "field 'broker_address': expected str"),
    ],
)
def test_a_field_of_the_wrong_json_type_is_named(fields: bytes, message: str) -> None:
    good = {b"broker_id": b'"broker_id":1', b"broker_address": b'"broker_address":"h:1"'}
    key = fields.split(b":")[0].strip(b'"')
    good[key] = fields
    payload = (b'[["update_broker_address",{"cluster_name":"C","broker_name":"b",' + good[b"broker_id"] + b","
               + good[b"broker_address"] + b',"leader_ts_ms":1}]]')
    with pytest.raises(CommandDecodeError, match=f"command 0 .update_broker_address. has bad fields: {message}"):
        decode_commands(payload)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (ApplyBrokerId(None, "b", 1, "h:1", "h:1;0", 1),  # type: ignore[arg-type]
         "apply_broker_id command: field 'cluster_name': expected str"),
        (UpdateBrokerAddress("C", "b", True, "h:1", 1), "field 'broker_id': expected int, got True"),
        (AlterSyncStateSet("b", 1, 1, 1, frozenset({1}), 1),  # type: ignore[arg-type]
         "field 'new_sync_state_set': expected a list"),
        (ElectMaster("C", "b", "someone", None, 0, 0, 1),  # type: ignore[arg-type]
         "field 'trigger': 'someone' is not a valid Trigger"),
    ],
)
def test_a_command_that_would_not_decode_is_refused_when_encoded(command, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        encode_commands([apply_id(1), command])


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'[["update_broker_address",{"cluster_name":"C","broker_name":"b","broker_id":1,"leader_ts_ms":1}]]',
         "field 'broker_address' is missing"),
        (b'[["alter_sync_state_set",{"broker_name":"b","master_id":1,"expected_master_epoch":1,'
         b'"expected_sync_state_set_epoch":1,"new_sync_state_set":[1,"2"],"leader_ts_ms":1}]]',
         "field 'new_sync_state_set': expected a list of integers"),
        (b'[["elect_master",{"cluster_name":"C","broker_name":"b","trigger":"nobody","candidate":null,'
         b'"expected_master_epoch":0,"expected_sync_state_set_epoch":0,"leader_ts_ms":5}]]',
         "field 'trigger': 'nobody' is not a valid Trigger"),
    ],
)
def test_missing_and_malformed_fields_are_named(payload: bytes, message: str) -> None:
    with pytest.raises(CommandDecodeError, match=message):
        decode_commands(payload)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3)
    | st.sampled_from(["broker", "admin"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@given(st.sampled_from(sorted(COMMAND_TAGS.values())),
       st.dictionaries(st.sampled_from(["cluster_name", "broker_name", "broker_id", "trigger", "candidate",
                                        "new_sync_state_set", "broker_ids", "leader_ts_ms", "unclean"]),
                       json_values))
def test_any_json_fields_decode_or_raise_the_named_error(tag: str, fields: dict) -> None:
    with contextlib.suppress(CommandDecodeError):
        decode_commands(orjson.dumps([[tag, fields]]))


@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_the_named_error(payload: bytes) -> None:
    with contextlib.suppress(CommandDecodeError):
        decode_commands(payload)


# ---- determinism and snapshots ------------------------------------------------------------------


@settings(max_examples=60)
@given(st.lists(commands, max_size=40), st.integers(0, 40))
def test_replicas_agree_and_a_snapshot_continues_identically(cmds, cut) -> None:
    one, two = ControllerState(), ControllerState()
    results_one = [one.apply(c) for c in cmds]
    assert [two.apply(c) for c in cmds] == results_one
    assert one.snapshot() == two.snapshot()
    head, tail = cmds[:cut], cmds[cut:]
    partial = ControllerState()
    partial.apply_all(head)
    resumed = ControllerState()
    resumed.restore(partial.snapshot())
    assert [resumed.apply(c) for c in tail] == results_one[cut:]
    assert resumed.snapshot() == one.snapshot()


def test_snapshot_round_trip_of_10000_groups() -> None:
    state = ControllerState()
    for n in range(10_000):
        name = f"g{n}"
        for broker_id in (1, 2, 3):
            state.apply(apply_id(broker_id, name=name))
        state.apply(elect(1, 0, 0, name=name))
    data = state.snapshot()
    restored = ControllerState()
    restored.restore(data)
    assert len(restored) == 10_000 and restored.snapshot() == data
    assert restored.group("g9999") == state.group("g9999")


@pytest.mark.parametrize(
    "data",
    [b"nope", b"[]", b'{"version":2,"groups":[]}', b'{"version":1}',
     b'{"version":1,"groups":[["C","b",2,[[1,"a"]],null,0,[],0]]}',
     b'{"version":1,"groups":[["C","b",2,[[1,"a","c"]],null,0,["1"],0]]}',
     b'{"version":1,"groups":[["C","b",2,[[1,"a","c"]],true,0,[1],0]]}',
     b'{"version":1,"groups":[["C","b",2,[[1,"a","c"]],null,0,[1]]]}',
     b'{"version":1,"groups":[["C","b",2,[[1,"a","c"]],null,0,7,0]]}',
     b'{"version":1,"groups":[["C","b",2,[[1,"a","c"]],null,0,[],0],["C","c",2,[["1","a","c"]],null,0,[],0]]}'],
)
def test_a_bad_snapshot_is_refused_and_leaves_the_state_alone(data: bytes) -> None:
    state = three_replicas_with_master()
    before = state.snapshot()
    with pytest.raises(CommandDecodeError):
        state.restore(data)
    assert state.snapshot() == before


def test_a_bad_snapshot_row_is_named() -> None:
    good = '["C","b",2,[[1,"a","c"]],null,0,[],0]'
    with pytest.raises(CommandDecodeError, match="snapshot group 2 is malformed"):
        ControllerState().restore(f'{{"version":1,"groups":[{good},{good},["C","b",2,[],null,"0",[],0]]}}'.encode())


def test_restored_groups_equal_the_applied_ones_field_for_field() -> None:
    state = three_replicas_with_master()
    assert state.apply(alter((1, 2), 1, 1, 2)).ok
    restored = ControllerState()
    restored.restore(state.snapshot())
    assert list(restored.groups()) == list(state.groups())
    assert type(restored.group(N).sync_state_set) is frozenset


def test_restores_constructors_name_every_field_of_the_model() -> None:
    from dataclasses import fields

    from rmqc.fsm._model import GROUP_FIELDS, REPLICA_FIELDS, BrokerGroup, Replica, restored_group, restored_replica

    assert tuple(f.name for f in fields(Replica)) == REPLICA_FIELDS
    assert tuple(f.name for f in fields(BrokerGroup)) == GROUP_FIELDS
    # They bypass __init__: a __post_init__ would be skipped on restore.
    assert not hasattr(Replica, "__post_init__") and not hasattr(BrokerGroup, "__post_init__")
    replica = restored_replica("h:1", "h:1;0")
    assert replica == Replica("h:1", "h:1;0") and hash(replica) == hash(Replica("h:1", "h:1;0"))
    values = ("C", "b", 4, {1: replica}, 1, 2, frozenset({1}), 3)
    assert restored_group(*values) == BrokerGroup(*values)
    with pytest.raises(AttributeError):
        restored_group(*values).master_id = 2  # type: ignore[misc]  # still frozen


def test_entry_size_bound() -> None:
    from rmqc.fsm import MAX_COMMANDS_PER_ENTRY, TooManyCommands

    too_many = [CleanBrokerData(C, N, None, 0)] * (MAX_COMMANDS_PER_ENTRY + 1)
    with pytest.raises(TooManyCommands):
        encode_commands(too_many)
    with pytest.raises(CommandDecodeError, match="exceed the bound"):
        decode_commands(b"[" + b",".join([b"1"] * (MAX_COMMANDS_PER_ENTRY + 1)) + b"]")


def test_restore_and_snapshot_leave_the_garbage_collector_as_they_found_it() -> None:
    import gc

    state = three_replicas_with_master()
    assert gc.isenabled()
    ControllerState().restore(state.snapshot())
    with pytest.raises(CommandDecodeError):
        ControllerState().restore(b"junk")
    assert gc.isenabled()
    gc.disable()
    try:
        ControllerState().restore(state.snapshot())
        assert state.snapshot() and not gc.isenabled()
    finally:
        gc.enable()


# ---- the audit: who caused a command ------------------------------------------------------------


def test_an_origin_round_trips_and_a_malformed_one_is_a_named_error() -> None:
    who = Origin("ops-admin", "10.0.0.9:5000", "n1")
    command = CleanBrokerData("C", "b", None, 5, origin=who)
    payload = encode_commands([command])
    assert b'"origin":{"access_key":"ops-admin","address":"10.0.0.9:5000","node":"n1"}' in payload
    assert decode_commands(payload) == [command]
    for bad in (b'"x"', b'{"access_key":1}', b'[1,2,3]'):
        with pytest.raises(CommandDecodeError, match="origin"):
            decode_commands(b'[["clean_broker_data",{"cluster_name":"C","broker_name":"b","broker_ids":null,'
                            b'"leader_ts_ms":5,"origin":' + bad + b'}]]')
    with pytest.raises(TypeError, match="origin"):
        encode_commands([CleanBrokerData("C", "b", None, 5, origin=Origin(7, None, None))])  # type: ignore[arg-type]


def test_who_is_described_by_role() -> None:
    assert Origin("k", "h:1", "n1").caller == "k"
    assert Origin(None, "h:1", "n1").caller == "anonymous"
    assert Origin(None, None, "n0").caller == "controller"


# ---- 1009 UpdateControllerConfig -----------------------------------------------------------------

RECONFIGURE = UpdateControllerConfig((("electMasterMaxRetryCount", "5"), ("enableElectUncleanMaster", "true")),
                                     7, Origin("ops-admin", "10.0.0.9:52110", "n1"))


def test_update_controller_config_round_trips_and_is_described() -> None:
    payload = encode_commands([RECONFIGURE])
    assert orjson.loads(payload) == [["update_controller_config", {
        "properties": [["electMasterMaxRetryCount", "5"], ["enableElectUncleanMaster", "true"]],
        "leader_ts_ms": 7, "origin": {"access_key": "ops-admin", "address": "10.0.0.9:52110", "node": "n1"}}]]
    assert decode_commands(payload) == [RECONFIGURE]
    assert describe_command(RECONFIGURE) == (
        "update controller config {electMasterMaxRetryCount: 5, enableElectUncleanMaster: true} "
        "[by ops-admin from 10.0.0.9:52110 via n1]")
    bad = b'[["update_controller_config", {"properties": [["k"]], "leader_ts_ms": 1}]]'
    with pytest.raises(CommandDecodeError, match="key, value"):
        decode_commands(bad)


def test_update_controller_config_merges_into_the_state_and_its_snapshot() -> None:
    state = ControllerState()
    assert b"config" not in state.snapshot()  # unchanged snapshots when no 1009 was applied
    [result] = state.apply_all([RECONFIGURE, UpdateControllerConfig((("electMasterMaxRetryCount", "2"),), 8)])[1:]
    assert result.ok and result.before is None and result.after is None
    assert state.config_updates() == {"electMasterMaxRetryCount": "2", "enableElectUncleanMaster": "true"}
    restored = ControllerState()
    restored.restore(state.snapshot())
    assert restored.config_updates() == state.config_updates()
    old = ControllerState()
    old.restore(b'{"version": 1, "groups": []}')  # a snapshot written before 1009 was replicated
    assert old.config_updates() == {}
    with pytest.raises(CommandDecodeError, match="config"):
        old.restore(b'{"version": 1, "groups": [], "config": {"k": 1}}')


def test_a_capture_is_frozen_and_encodes_in_steps_what_snapshot_gives() -> None:
    """A node captures the state when it decides to snapshot and encodes it a step at a time
    between other work: the bytes are those of the state at the capture, whatever was applied
    since, and the document a single orjson call over the whole state would give."""
    state = ControllerState()
    for n in range(10):
        state.apply(apply_id(1, name=f"g{n}"))
    state.apply(UpdateControllerConfig((("electMasterMaxRetryCount", "4"),), 0))
    state.apply(PutKvConfig("ORDER_TOPIC_CONFIG", "t", "b:4", 0))
    before = state.snapshot()
    capture = state.capture()
    state.apply(apply_id(1, name="later"))
    state.apply(PutKvConfig("ORDER_TOPIC_CONFIG", "t", "changed", 0))
    steps = list(capture.encode_steps(groups_per_step=3))
    # 10 groups, 3 a step; then a KV namespace and its entry (the config's piece takes no step)
    assert steps[:-1] == [None] * 6
    document = orjson.loads(before)
    assert orjson.dumps(document) == before  # joined parts: exactly one call's bytes
    assert document["config"] == {"electMasterMaxRetryCount": "4"} and "namesrv" in document
    assert len(document["groups"]) == 10
    in_steps = orjson.loads(steps[-1])  # other pieces, so another index; the same document otherwise
    assert in_steps.pop("chunks") != document.pop("chunks") and in_steps == document
    assert ControllerState().capture().encode() == b'{"version":1,"chunks":[2],"groups":[]}'
