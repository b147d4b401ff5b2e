"""The peer protocol codec: round trips, incremental decoding, and named errors on bad bytes."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from rmqc.errors import BoundExceeded, ProtocolError
from rmqc.peerwire import (
    FrameKind,
    Handshake,
    PeerFrame,
    PeerFrameDecoder,
    PeerProtocolError,
    decode_handshake,
    decode_messages,
    decode_tagged,
    encode_frame,
    encode_handshake,
    encode_messages,
    encode_tagged,
)
from rmqc.peerwire._codec import _NODE_IDS, MAX_CACHED_NODE_IDS, _decode_batch
from rmqc.raft import ConfState, Entry, EntryType, Message, MessageType, Snapshot, SnapshotMeta

ids = st.sampled_from(["n0", "n1", "n2", "node-long-id-é"])
u64 = st.integers(min_value=0, max_value=2**64 - 1)
entries = st.builds(Entry, index=u64, term=u64, type=st.sampled_from(list(EntryType)),
                    data=st.binary(max_size=64))
snapshots = st.builds(
    Snapshot,
    meta=st.builds(SnapshotMeta, index=u64, term=u64,
                   conf_state=st.builds(ConfState, voters=st.tuples(ids, ids), learners=st.tuples(ids),
                                        addresses=st.lists(st.tuples(ids, st.sampled_from(["127.0.0.1:9876",
                                                                                          "[::1]:65535"])),
                                                           max_size=3).map(tuple))),
    data=st.binary(max_size=128),
)
messages = st.builds(
    Message, type=st.sampled_from(list(MessageType)), to=ids, frm=ids, term=u64, log_term=u64, index=u64,
    entries=st.lists(entries, max_size=4).map(tuple), commit=u64, reject=st.booleans(), reject_hint=u64,
    snapshot=st.none() | snapshots, context=st.binary(max_size=16),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, max_size=5))
def test_messages_round_trip(batch: list[Message]) -> None:
    assert decode_messages(encode_messages(batch)) == batch


def test_a_typical_append_round_trips_exactly() -> None:
    message = Message(
        type=MessageType.APP, to="n1", frm="n0", term=3, log_term=2, index=41,
        entries=(Entry(42, 3, EntryType.NORMAL, b"cmd"), Entry(43, 3, EntryType.CONF_CHANGE, b"cc")),
        commit=40,
    )
    assert decode_messages(encode_messages([message])) == [message]


@given(st.lists(messages, min_size=1, max_size=3), st.integers(min_value=1, max_value=50))
@settings(max_examples=50, deadline=None)
def test_truncated_batches_raise_protocol_error(batch: list[Message], cut: int) -> None:
    data = encode_messages(batch)
    with pytest.raises(PeerProtocolError):
        decode_messages(data[:max(0, len(data) - cut)])


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_only_ever_raises_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_messages(data)
    with contextlib.suppress(ProtocolError, BoundExceeded):
        PeerFrameDecoder(1024).feed(data)


def test_unknown_message_type_is_named() -> None:
    data = bytearray(encode_messages([Message(type=MessageType.APP, to="a", frm="b")]))
    data[4] = 99
    with pytest.raises(PeerProtocolError, match="message type 99"):
        decode_messages(bytes(data))


def test_handshake_round_trip_whole_and_byte_by_byte() -> None:
    handshake = Handshake("n1", "group1", "n0", bytes(range(32)))
    data = encode_handshake(handshake) + b"rest"
    assert data[:4] == b"RMQP"
    assert decode_handshake(data) == (handshake, len(data) - 4)
    for end in range(len(data) - 4):
        assert decode_handshake(data[:end]) is None


def test_handshake_rejects_wrong_magic_version_and_nonce() -> None:
    with pytest.raises(PeerProtocolError, match="magic"):
        decode_handshake(b"\x00\x00\x00\x10rest")
    bad_version = b"RMQP" + b"\x00\x07" + encode_handshake(Handshake("n1", "g", "n0", bytes(32)))[6:]
    with pytest.raises(PeerProtocolError, match="version 7"):
        decode_handshake(bad_version[:6])  # refused as soon as the version is read
    with pytest.raises(PeerProtocolError, match="nonce of 8 bytes"):
        encode_handshake(Handshake("n1", "g", "n0", bytes(8)))


def test_frames_decode_whole_byte_by_byte_and_with_trailing_data() -> None:
    frames = [PeerFrame(FrameKind.RAFT, b"abc"), PeerFrame(FrameKind.DIGEST, b""),
              PeerFrame(FrameKind.FORWARD_REQUEST, encode_tagged(7, b"frame"))]
    data = b"".join(encode_frame(frame.kind, frame.payload) for frame in frames)
    assert PeerFrameDecoder(1024).feed(data) == frames
    decoder = PeerFrameDecoder(1024)
    collected = [frame for byte in data for frame in decoder.feed(bytes([byte]))]
    assert collected == frames
    decoder = PeerFrameDecoder(1024)
    assert decoder.feed(data + encode_frame(FrameKind.RAFT, b"xyz")[:3]) == frames
    assert decoder.feed(encode_frame(FrameKind.RAFT, b"xyz")[3:]) == [PeerFrame(FrameKind.RAFT, b"xyz")]


def test_frame_bound_and_unknown_kind() -> None:
    with pytest.raises(BoundExceeded, match="exceeds 8"):
        PeerFrameDecoder(8).feed(encode_frame(FrameKind.RAFT, b"0123456789"))
    with pytest.raises(PeerProtocolError, match="kind 9"):
        PeerFrameDecoder(64).feed(b"\x00\x00\x00\x02\x09x")


def test_tagged_payload_round_trip_and_short_payload() -> None:
    assert decode_tagged(encode_tagged(2**40, b"data")) == (2**40, b"data")
    with pytest.raises(PeerProtocolError, match="no id"):
        decode_tagged(b"abc")


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, max_size=5), u64)
def test_appends_of_a_stale_term_arrive_without_entries(batch: list[Message], current_term: int) -> None:
    """A stale leader's backlog is dropped cheaply (issue 13): its appends keep everything Raft
    answers from (type, term, sender) but are decoded without their entries; nothing else changes."""
    expected = [replace(m, entries=()) if m.type is MessageType.APP and m.term < current_term else m
                for m in batch]
    assert decode_messages(encode_messages(batch), stale_below=current_term) == expected


def test_a_truncated_stale_append_still_raises() -> None:
    stale = Message(type=MessageType.APP, to="n1", frm="n0", term=1,
                    entries=(Entry(1, 1, EntryType.NORMAL, b"x" * 100),))
    data = encode_messages([stale])
    with pytest.raises(PeerProtocolError):
        decode_messages(data[:-50], stale_below=2)


def _reader_outcome(data: bytes, stale_below: int) -> list[Message] | str:
    try:
        return _decode_batch(data, stale_below)
    except PeerProtocolError:
        return "refused"


def _outcome(data: bytes, stale_below: int) -> list[Message] | str:
    try:
        return decode_messages(data, stale_below)
    except PeerProtocolError:
        return "refused"


@settings(max_examples=300, deadline=None)
@given(st.lists(messages, max_size=4), st.integers(min_value=0, max_value=400), st.integers(0, 255), u64,
       st.sampled_from(["whole", "cut", "byte changed", "bytes added"]))
def test_the_plain_path_and_the_reader_agree_on_every_input(batch: list[Message], at: int, value: int,
                                                            stale_below: int, damage: str) -> None:
    """decode_messages reads plain batches with unpacks and slices (_decode_plain_batch) and
    everything else with the reader: whole, cut short, with a byte changed or bytes added, both
    give the same messages or both refuse."""
    data = encode_messages(batch)
    at = min(at, len(data))
    data = {"whole": data, "cut": data[:at], "byte changed": data[:at] + bytes([value]) + data[at + 1:],
            "bytes added": data[:at] + bytes([value]) * 3 + data[at:]}[damage]
    assert _outcome(data, stale_below) == _reader_outcome(data, stale_below)


def test_a_plain_batch_takes_the_plain_path_and_a_snapshot_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    import rmqc.peerwire._codec as codec

    plain = Message(type=MessageType.APP, to="n1", frm="n0", term=3, log_term=3, index=7, commit=6,
                    entries=(Entry(8, 3, EntryType.NORMAL, b"cmd"),))
    with_snapshot = Message(type=MessageType.SNAP, to="n1", frm="n0", term=3,
                            snapshot=Snapshot(SnapshotMeta(9, 3, ConfState(voters=("n0",))), b"state"))
    read_by_the_reader: list[int] = []

    def reader(payload: bytes, stale_below: int) -> list[Message]:
        read_by_the_reader.append(len(payload))
        return _decode_batch(payload, stale_below)

    monkeypatch.setattr(codec, "_decode_batch", reader)
    assert decode_messages(encode_messages([plain, plain])) == [plain, plain]
    assert read_by_the_reader == []
    assert decode_messages(encode_messages([plain, with_snapshot])) == [plain, with_snapshot]
    assert len(read_by_the_reader) == 1


def test_node_ids_past_the_cache_bound_still_encode_and_the_cache_stops_growing() -> None:
    ids = [f"node-{i}" for i in range(MAX_CACHED_NODE_IDS + 50)]
    messages = [Message(MessageType.HEARTBEAT, to=node, frm="n0", term=3) for node in ids]
    assert decode_messages(encode_messages(messages)) == messages
    assert len(_NODE_IDS) <= MAX_CACHED_NODE_IDS
    with pytest.raises(ProtocolError, match="longer than 255 bytes"):  # a cached id is never a long one
        encode_messages([Message(MessageType.HEARTBEAT, to="x" * 256, frm="n0")])
