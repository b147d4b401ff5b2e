"""The chunked snapshot (format 2, fsm._chunks) and the stepped decode: version-1 snapshots still
restore; every piece is checked, and a bad one is named and leaves the live state alone; no step of
the encode or of the decode handles more records than its bound; adopt swaps in O(1)."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from rmqc.fsm import (
    ApplyBrokerId,
    CommandDecodeError,
    ControllerState,
    ElectMaster,
    PutKvConfig,
    RegisterBrokerRoute,
    Trigger,
    UpdateControllerConfig,
    _chunks,
    _namesrv,
    _state,
)
from rmqc.fsm._chunks import CONFIG, GROUPS, KV_ENTRIES, KV_NAMESPACE, REGISTRATIONS, TOPICS, ChunkWriter, read_index

# Written by the version-1 encoder (main before format 2): groups, config, registrations, topics, KV.
V1 = (b'{"version":1,"groups":[["C","g1",3,[[1,"10.0.0.1:10911","10.0.0.1:10911;1"],[2,"10.0.0.2:10911",'
      b'"10.0.0.2:10911;2"]],1,1,[1],1],["C","g2",2,[[1,"10.0.0.3:10911","10.0.0.3:10911;1"]],null,0,[],0]],'
      b'"config":{"electMasterMaxRetryCount":"4"},"namesrv":{"registrations":[["C","nb-a",0,"10.1.0.1:10911",'
      b'"10.1.0.1:10912",[1,1700000000000,2]],["C","nb-b",0,"10.1.0.2:10911","10.1.0.2:10912",[1,1700000000000,3]]],'
      b'"topics":{"t0":{"nb-a":[8,8,6,0]},"t1":{"nb-a":[4,4,6,0],"nb-b":[8,8,6,0]}},'
      b'"kv":{"ORDER_TOPIC_CONFIG":{"t0":"nb-a:8"}}}}')


def version_1(snapshot: bytes) -> bytes:
    return b'{"version":1' + snapshot[snapshot.index(b"]") + 1:]


def register(broker: int, topics: list[tuple[str, int]]) -> RegisterBrokerRoute:
    address = f"10.1.0.{broker}:10911"
    return RegisterBrokerRoute("C", f"nb-{broker}", 0, address, address, 1, 1_700_000_000_000, 1,
                               tuple((topic, queues, queues, 6, 0) for topic, queues in sorted(topics)), 0)


def a_state(groups: int = 10, brokers: int = 7, topics: int = 9) -> ControllerState:
    """Every kind of piece: groups, config, registrations, topics on 1 or 2 broker names, two KV
    namespaces of 5 entries."""
    state = ControllerState()
    for n in range(groups):
        for broker_id in (1, 2):
            state.apply(ApplyBrokerId("C", f"g{n}", broker_id, f"10.0.{n}.{broker_id}:10911", f"g{n}-{broker_id}", 0))
        state.apply(ElectMaster("C", f"g{n}", Trigger.BROKER, 1, 0, 0, 0, 1))
    state.apply(UpdateControllerConfig((("electMasterMaxRetryCount", "4"),), 0))
    for broker in range(brokers):
        state.apply(register(broker, [(f"t{t}", 4) for t in range(topics)
                                      if t % brokers == broker or (t % 3 and (t + 1) % brokers == broker)]))
    for namespace in ("ns1", "ns2"):
        for key in range(5):
            state.apply(PutKvConfig(namespace, f"k{key}", f"v{key}", 0))
    return state


def decode(data: bytes, items_per_step: int = 1_024) -> ControllerState:
    *steps, state = ControllerState.decode_steps(data, items_per_step)
    assert state is not None and all(step is None for step in steps)
    return state


# ---- version 1 and the layout --------------------------------------------------------------------


def test_a_version_1_snapshot_restores_and_is_written_back_as_the_same_document_with_an_index() -> None:
    state = ControllerState()
    state.restore(V1)
    assert [g.broker_name for g in state.groups()] == ["g1", "g2"] and state.group("g1").master_id == 1
    assert state.config_updates() == {"electMasterMaxRetryCount": "4"}
    assert sorted(state.namesrv.topics) == ["t0", "t1"] and state.namesrv.kv_list("ORDER_TOPIC_CONFIG")
    data = state.snapshot()
    assert data.startswith(b'{"version":1,"chunks":[2,') and version_1(data) == V1
    assert decode(V1, items_per_step=1).snapshot() == data == decode(data, items_per_step=1).snapshot()


def test_a_version_1_reader_reads_format_2() -> None:
    """A release that knows only version 1 parses the whole document and ignores "chunks"."""
    data = a_state().snapshot()
    document = orjson.loads(data)
    assert document["version"] == 1 and set(document) == {"version", "chunks", "groups", "config", "namesrv"}
    assert orjson.dumps({key: value for key, value in document.items() if key != "chunks"}) == version_1(data)


@pytest.mark.parametrize("kinds", [[], [GROUPS], [CONFIG], [REGISTRATIONS], [TOPICS], [KV_NAMESPACE],
                                   [KV_NAMESPACE, KV_ENTRIES], [KV_NAMESPACE, KV_NAMESPACE, KV_ENTRIES],
                                   [GROUPS, GROUPS, CONFIG, TOPICS, KV_NAMESPACE], [CONFIG, REGISTRATIONS, TOPICS]])
def test_the_glue_between_pieces_makes_the_version_1_document(kinds: list[int]) -> None:
    pieces = {GROUPS: b'["C","g",2,[[1,"a","c"]],null,0,[],0]', CONFIG: b'{"k":"v"}',
              REGISTRATIONS: b'["C","n",0,"a","h",[1,2,3]]', TOPICS: b'"t":{"n":[1,1,6,0]}', KV_NAMESPACE: b'"ns"',
              KV_ENTRIES: b'"k":"v"'}
    writer = ChunkWriter()
    for number, kind in enumerate(kinds):
        writer.add(kind, b'"ns%d"' % number if kind == KV_NAMESPACE else pieces[kind])
    data = writer.document()
    document = orjson.loads(data)  # one JSON document, whatever the pieces
    assert orjson.dumps(document) == data
    assert document["groups"] == [orjson.loads(pieces[GROUPS])] * kinds.count(GROUPS)
    namesrv = {REGISTRATIONS, TOPICS, KV_NAMESPACE} & set(kinds)
    assert ("config" in document) == (CONFIG in kinds) and ("namesrv" in document) == bool(namesrv)
    if namesrv:
        assert set(document["namesrv"]) == {"registrations", "topics", "kv"}
    assert decode(data).snapshot() == decode(version_1(data)).snapshot()


# ---- damage --------------------------------------------------------------------------------------


def pieces_of(data: bytes) -> list[tuple[int, int, int]]:
    located = read_index(data)
    assert located is not None
    return located[0]


def refused(live: ControllerState, data: bytes, match: str) -> None:
    """The stepped decode raises (after however many steps), restore too, and the live state is as
    it was."""
    before = live.snapshot()
    with pytest.raises(CommandDecodeError, match=match):
        for _ in ControllerState.decode_steps(data, items_per_step=2):
            pass
    with pytest.raises(CommandDecodeError, match=match):
        live.restore(data)
    assert live.snapshot() == before


def test_a_damaged_piece_is_named_and_refused_with_the_live_state_unchanged() -> None:
    live = a_state(groups=3, brokers=2, topics=2)
    *_, data = a_state().capture().encode_steps(groups_per_step=4)
    assert isinstance(data, bytes)
    pieces = pieces_of(data)
    assert {kind for kind, _, _ in pieces} == {GROUPS, CONFIG, REGISTRATIONS, TOPICS, KV_NAMESPACE, KV_ENTRIES}
    start = data.index(b"]") + 1
    for number, (kind, length, _crc) in enumerate(pieces):
        start += len(_chunks.glue(pieces[number - 1][0] if number else 0, kind))
        damaged = bytearray(data)
        damaged[start + length // 2] ^= 0x01
        refused(live, bytes(damaged), rf"snapshot chunk {number} \({_chunks.KIND_NAMES[kind]}, bytes {start}-"
                                      rf"{start + length}\): CRC-32 mismatch")
        start += length
    assert live.snapshot() == a_state(groups=3, brokers=2, topics=2).snapshot()


def test_a_piece_with_a_good_crc_but_bad_content_is_named() -> None:
    live = a_state(groups=2, brokers=1, topics=1)
    writer = ChunkWriter()
    writer.add(GROUPS, b'["C","a",2,[[1,"a","c"]],null,0,[],0],["C","b",2,[[1,"a","c"]],null,0,[],0]')
    writer.add(GROUPS, b'["C","c",2,[[1,"a","c"]],null,0,[],0],["C","d",2,[],null,"0",[],0]')
    refused(live, writer.document(), r"snapshot chunk 1 \(groups\): group 3 is malformed")
    for kind, piece, match in [(TOPICS, b'"t":{"n":[1,1,6,"0"]}', r"chunk 0 \(topics\) is malformed"),
                               (TOPICS, b'"t":{"n":[1,1,6', r"chunk 0 \(topics\) is not JSON"),
                               (REGISTRATIONS, b'["C","n",0,"a","h",[1,2]]', r"chunk 0 \(registrations\) is malformed"),
                               (KV_NAMESPACE, b"7", r"chunk 0 \(KV namespace\) is malformed"),
                               (CONFIG, b'{"k":1}', "config")]:
        writer = ChunkWriter()
        writer.add(kind, piece)
        refused(live, writer.document(), match)


def test_a_bad_index_or_glue_or_end_is_refused() -> None:
    live = a_state(groups=2, brokers=1, topics=1)
    data = a_state().snapshot()
    head, index_end = len(_chunks.CHUNKED_HEAD) - 1, data.index(b"]") + 1
    index = orjson.loads(data[head:index_end])
    for bad_index, match in [([3, *index[1:]], "chunk index is malformed"), (index[:-1], "chunk index is malformed"),
                             ([2, TOPICS, *index[2:]], "cannot follow"), ([2, 9, *index[2:]], "cannot follow"),
                             ([2, index[1], index[2] + 1, *index[3:]], r"chunk 0 \(groups.*CRC-32 mismatch")]:
        refused(live, data[:head] + orjson.dumps(bad_index) + data[index_end:], match)
    refused(live, data[:index_end] + b" " + data[index_end:], r"chunk 0 \(groups.*the bytes before it are not")
    refused(live, data[:-1], "does not end as")
    refused(live, data + b" ", "does not end as")
    refused(live, data[:index_end - 1], "chunk index")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_changed_byte_is_refused_or_changes_nothing(data: st.DataObject) -> None:
    """Every byte is checked (the index, each glue, each piece's CRC, the end): a change the reader
    accepts is one that the document means the same with (e.g. "chunks" spelled otherwise: then it
    is read as version 1)."""
    original = a_state(groups=3, brokers=3, topics=3)
    *_, snapshot = original.capture().encode_steps(groups_per_step=2)
    assert isinstance(snapshot, bytes)
    position = data.draw(st.integers(0, len(snapshot) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != snapshot[position]))
    damaged = snapshot[:position] + bytes((value,)) + snapshot[position + 1:]
    try:
        restored = decode(damaged, items_per_step=2)
    except CommandDecodeError:
        return
    assert restored.snapshot() == original.snapshot()


# ---- the bound of every step -----------------------------------------------------------------------


def records(value: Any) -> int:
    """The records one parse produced (a topic counts its broker names)."""
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        return sum(len(v) or 1 if isinstance(v, dict) else 1 for v in value.values())
    return 1


@pytest.mark.parametrize(("per_piece", "per_step"), [(4, 3), (3, 4), (1, 1), (5, 5), (4096, 2)])
def test_no_step_of_the_decode_parses_or_builds_more_than_its_bound(monkeypatch: pytest.MonkeyPatch,
                                                                     per_piece: int, per_step: int) -> None:
    state = a_state()
    *_, data = state.capture().encode_steps(groups_per_step=per_piece)
    assert isinstance(data, bytes)
    parsed, built = [0], [0]

    class CountingJson:
        JSONDecodeError = orjson.JSONDecodeError
        dumps = staticmethod(orjson.dumps)

        @staticmethod
        def loads(piece: Any) -> Any:
            value = orjson.loads(piece)
            parsed[0] += records(value)
            return value

    def counting(function: Any) -> Any:
        def counted(*args: Any) -> Any:
            built[0] += 1
            return function(*args)
        return counted

    restore_kv = _namesrv.NamesrvState.restore_kv

    def counted_kv(self: _namesrv.NamesrvState, namespace: object, table: dict[str, Any], *,
                   merge: bool = False) -> None:
        built[0] += len(table)
        restore_kv(self, namespace, table, merge=merge)

    monkeypatch.setattr(_state, "orjson", CountingJson)
    monkeypatch.setattr(_state, "_build_group", counting(_state._build_group))
    monkeypatch.setattr(_namesrv, "restored_registration", counting(_namesrv.restored_registration))
    monkeypatch.setattr(_namesrv, "restored_queue_data", counting(_namesrv.restored_queue_data))
    monkeypatch.setattr(_namesrv.NamesrvState, "restore_kv", counted_kv)
    per_step_counts = []
    for step in ControllerState.decode_steps(data, per_step):
        per_step_counts.append((parsed[0], built[0]))
        parsed[0] = built[0] = 0
        last = step
    assert isinstance(last, ControllerState) and last.snapshot() == state.snapshot()
    # a topic, here on 1 or 2 broker names, is never cut: a step with a topic of 2 holds 2 at least
    assert all(p <= max(per_piece, 2) and b <= max(per_step, 2) for p, b in per_step_counts), per_step_counts
    assert all(not (p and b) for p, b in per_step_counts)  # a step parses a piece, or builds records
    groups, queue_data = len(state), sum(len(q) for q in state.namesrv.topics.values())
    assert sum(b for _, b in per_step_counts) == groups + len(state.namesrv.registrations) + queue_data + 10


@pytest.mark.parametrize("per_piece", [1, 3, 4096])
def test_every_piece_of_the_encode_holds_at_most_its_bound(per_piece: int) -> None:
    state = a_state()
    *_, data = state.capture().encode_steps(groups_per_step=per_piece)
    assert isinstance(data, bytes)
    start = data.index(b"]") + 1
    pieces = pieces_of(data)
    for number, (kind, length, _crc) in enumerate(pieces):
        start += len(_chunks.glue(pieces[number - 1][0] if number else 0, kind))
        piece = data[start:start + length]
        value = orjson.loads(b"[%s]" % piece if kind in (GROUPS, REGISTRATIONS) else
                             b"{%s}" % piece if kind in (TOPICS, KV_ENTRIES) else piece)
        assert records(value) <= max(per_piece, 2 if kind == TOPICS else 1)
        start += length


def test_a_topic_on_more_broker_names_than_a_piece_holds_is_a_piece_alone() -> None:
    state = ControllerState()
    for broker in range(6):
        state.apply(register(broker, [("wide", 4), (f"own-{broker}", 4)]))
    *_, data = state.capture().encode_steps(groups_per_step=4)
    assert isinstance(data, bytes)
    start, topic_pieces = data.index(b"]") + 1, []
    pieces = pieces_of(data)
    for number, (kind, length, _crc) in enumerate(pieces):
        start += len(_chunks.glue(pieces[number - 1][0] if number else 0, kind))
        if kind == TOPICS:
            topic_pieces.append(sorted(orjson.loads(b"{%s}" % data[start:start + length])))
        start += length
    assert topic_pieces == [["own-0"], ["wide"], ["own-1", "own-2", "own-3", "own-4"], ["own-5"]]
    assert decode(data, items_per_step=2).snapshot() == state.snapshot()


def test_kv_pieces_end_at_the_byte_bound_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_namesrv, "SNAPSHOT_STEP_KV_BYTES", 100)
    state = ControllerState()
    for key in range(10):
        state.apply(PutKvConfig("ns", f"k{key}", "v" * 40, 0))
    data = state.snapshot()
    # a piece ends once it holds 100 bytes of keys and values: 3 entries of 42
    assert [kind for kind, _, _ in pieces_of(data)] == [KV_NAMESPACE] + [KV_ENTRIES] * 4
    assert decode(data, items_per_step=3).snapshot() == data


# ---- adopt, release, the collector ---------------------------------------------------------------


def test_adopt_swaps_every_attribute_and_release_empties_the_old_state_in_steps() -> None:
    live, other = a_state(groups=2, brokers=2, topics=2), a_state()
    expected, old = other.snapshot(), live.snapshot()
    live_parts, other_parts = dict(vars(live)), dict(vars(other))
    live.adopt(other)
    # every attribute swapped, by identity (one added to ControllerState must be added to adopt)
    assert all(getattr(live, name) is value for name, value in other_parts.items())
    assert all(getattr(other, name) is value for name, value in live_parts.items())
    assert live.snapshot() == expected and other.snapshot() == old

    def held(state: ControllerState) -> int:
        ns = state.namesrv
        return len(state) + sum(len(t) for t in (ns.topics, ns._topics_of_name, ns.registrations, ns._by_name, ns.kv))

    big = a_state()
    sizes = [held(big)]
    for _ in big.release_steps(items_per_step=3):
        sizes.append(held(big))
    assert sizes[-1] == 0 and all(0 < a - b <= 3 for a, b in itertools.pairwise(sizes))
    assert big.snapshot() == ControllerState().snapshot()


def steps_of(items: Iterator[Any]) -> Iterator[Any]:
    for item in items:
        assert gc.isenabled()  # paused within a step only
        yield item


def test_the_decode_pauses_the_collector_within_a_step_only_and_freezes_when_asked() -> None:
    data = a_state().snapshot()
    assert gc.isenabled()
    for _ in steps_of(ControllerState.decode_steps(data, items_per_step=2)):
        pass
    with pytest.raises(CommandDecodeError):
        for _ in steps_of(ControllerState.decode_steps(data[:-1], items_per_step=2)):
            pass
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        *_, state = steps_of(ControllerState.decode_steps(data, freeze=True))
        assert gc.get_freeze_count() > frozen and state is not None and state.snapshot() == data
    finally:
        gc.unfreeze()


def test_the_namesrv_restore_constructors_name_every_field() -> None:
    from dataclasses import fields

    from rmqc.fsm._namesrv import (
        QUEUE_DATA_FIELDS,
        REGISTRATION_FIELDS,
        QueueData,
        Registration,
        restored_queue_data,
        restored_registration,
    )

    assert tuple(f.name for f in fields(QueueData)) == QUEUE_DATA_FIELDS
    assert tuple(f.name for f in fields(Registration)) == REGISTRATION_FIELDS
    # They bypass __init__: a __post_init__ would be skipped on restore.
    assert not hasattr(QueueData, "__post_init__") and not hasattr(Registration, "__post_init__")
    assert restored_queue_data(8, 4, 6, 1) == QueueData(8, 4, 6, 1)
    assert hash(restored_queue_data(8, 4, 6, 1)) == hash(QueueData(8, 4, 6, 1))
    values = ("C", "b", 0, "h:1", "h:2", (1, 2, 3))
    assert restored_registration(*values) == Registration(*values)
    with pytest.raises(AttributeError):
        restored_queue_data(8, 4, 6, 1).perm = 2  # type: ignore[misc]  # still frozen
