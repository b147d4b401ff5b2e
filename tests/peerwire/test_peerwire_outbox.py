"""PeerOutbox: drop-oldest for Raft messages, refusal for control frames, batching by bytes."""

from __future__ import annotations

from rmqc.peerwire import FrameKind, PeerFrameDecoder, PeerOutbox, decode_messages
from rmqc.raft import Entry, Message, MessageType, Snapshot, SnapshotMeta


def app(index: int, size: int = 0) -> Message:
    return Message(type=MessageType.APP, to="n1", frm="n0", index=index,
                   entries=(Entry(index + 1, 1, data=b"x" * size),) if size else ())


def decode_all(data: bytes) -> list[tuple[FrameKind, bytes]]:
    return [(frame.kind, frame.payload) for frame in PeerFrameDecoder(1 << 20).feed(data)]


def test_full_raft_queue_drops_oldest_and_counts() -> None:
    outbox = PeerOutbox(max_messages=3, max_control_frames=2, max_batch_bytes=1 << 20)
    for index in range(5):
        outbox.put_message(app(index))
    assert outbox.stats.raft_dropped == 2
    data, _ = outbox.take_batch()
    (kind, payload), = decode_all(data)
    assert kind == FrameKind.RAFT
    assert [message.index for message in decode_messages(payload)] == [2, 3, 4]
    assert len(outbox) == 0


def test_full_control_queue_refuses_new_frames() -> None:
    outbox = PeerOutbox(max_messages=3, max_control_frames=2, max_batch_bytes=1 << 20)
    assert outbox.put_control(FrameKind.DIGEST, b"a")
    assert outbox.put_control(FrameKind.DIGEST, b"b")
    assert not outbox.put_control(FrameKind.DIGEST, b"c")
    assert outbox.stats.control_refused == 1
    outbox.put_message(app(1))
    data, _ = outbox.take_batch()
    assert [kind for kind, _ in decode_all(data)] == [FrameKind.DIGEST, FrameKind.DIGEST, FrameKind.RAFT]


def test_batches_split_by_bytes_but_never_split_a_message() -> None:
    outbox = PeerOutbox(max_messages=100, max_control_frames=2, max_batch_bytes=1100)
    for index in range(6):
        outbox.put_message(app(index, size=400))
    outbox.put_message(app(99, size=5000))  # alone larger than a batch: still sent, alone
    data, _ = outbox.take_batch()
    batches = [decode_messages(payload) for _, payload in decode_all(data)]
    assert [[m.index for m in batch] for batch in batches] == [[0, 1], [2, 3], [4, 5], [99]]


def test_snapshot_messages_are_reported_and_clear_counts_drops() -> None:
    outbox = PeerOutbox(max_messages=10, max_control_frames=2, max_batch_bytes=1 << 20)
    outbox.put_message(Message(type=MessageType.SNAP, to="n2", frm="n0",
                               snapshot=Snapshot(SnapshotMeta(index=5, term=1), b"state")))
    _, snapshots = outbox.take_batch()
    assert snapshots == ["n2"]
    outbox.put_message(app(1))
    outbox.put_message(app(2))
    assert outbox.clear_raft() == 2
    assert outbox.stats.raft_dropped == 2
    assert outbox.take_batch() == (b"", [])


def test_batches_split_by_entries_too() -> None:
    """A frame is decoded in one go: it is bounded in entries as well as bytes (issue 13)."""
    outbox = PeerOutbox(max_messages=100, max_control_frames=2, max_batch_bytes=1 << 20, max_batch_entries=5)
    for index in range(4):
        outbox.put_message(Message(type=MessageType.APP, to="n1", frm="n0", index=index,
                                   entries=tuple(Entry(i, 1, data=b"y") for i in range(3))))
    data, _ = outbox.take_batch()
    batches = [decode_messages(payload) for _, payload in decode_all(data)]
    assert [[m.index for m in batch] for batch in batches] == [[0], [1], [2], [3]]
