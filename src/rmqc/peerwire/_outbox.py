"""The bounded queue of one peer link (pure, no I/O).

Raft messages and control frames (forwarded requests and responses, liveness digests) wait here
until the link's sender task writes them. The two kinds are bounded differently on purpose:
- Raft tolerates lost messages (it retries by heartbeats and probes), so when the Raft queue is full
  the OLDEST message is dropped and counted: the newest state is the most useful one to deliver.
- A control frame has a waiter (a forwarded request) or is replaced by the next one (a digest), so a
  full control queue refuses the new frame and the caller answers SYSTEM_BUSY instead of a silent loss.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rmqc.raft import Message, MessageType

from ._codec import FrameKind, encode_frame, encode_messages

# Raft messages are batched into frames of at most this many bytes and entries (a message larger
# than that, e.g. a snapshot, goes alone): the receiver decodes a frame in one go, so a frame must
# stay a few milliseconds of work whatever the sender has queued.
RAFT_FRAME_BYTES = 512 * 1024
RAFT_FRAME_ENTRIES = 4096
# Control frames per peer: forwarded requests are additionally bounded by the node's pending-request
# bound; this only stops a stalled link from growing without limit.
MAX_CONTROL_FRAMES = 8192


@dataclass(slots=True)
class OutboxStats:
    raft_dropped: int = 0
    control_refused: int = 0


class PeerOutbox:
    def __init__(self, max_messages: int, max_control_frames: int, max_batch_bytes: int,
                 max_batch_entries: int = RAFT_FRAME_ENTRIES) -> None:
        self._raft: deque[Message] = deque()
        self._control: deque[bytes] = deque()
        self._max_messages = max_messages
        self._max_control_frames = max_control_frames
        # A frame is decoded in one go by the receiver: both bounds keep that a few milliseconds.
        self._max_batch_bytes = max_batch_bytes
        self._max_batch_entries = max_batch_entries
        self.stats = OutboxStats()

    def __len__(self) -> int:
        return len(self._raft) + len(self._control)

    def put_message(self, message: Message) -> None:
        if len(self._raft) >= self._max_messages:
            self._raft.popleft()
            self.stats.raft_dropped += 1
        self._raft.append(message)

    def put_control(self, kind: FrameKind, payload: bytes) -> bool:
        if len(self._control) >= self._max_control_frames:
            self.stats.control_refused += 1
            return False
        self._control.append(encode_frame(kind, payload))
        return True

    def clear_raft(self) -> int:
        """Forget queued Raft messages (the link is down: they would be stale when it is back)."""
        dropped = len(self._raft)
        self._raft.clear()
        self.stats.raft_dropped += dropped
        return dropped

    def take_batch(self) -> tuple[bytes, list[str]]:
        """Bytes for one write: control frames first, then Raft messages batched into frames of at
        most max_batch_bytes and max_batch_entries (a single larger message still goes alone).
        Also returns a note per snapshot message included, so the caller can report the snapshot's
        fate to Raft."""
        chunks = list(self._control)
        self._control.clear()
        snapshots: list[str] = []
        while self._raft:
            batch = self._take_raft_batch()
            snapshots.extend(message.to for message in batch if message.type == MessageType.SNAP)
            chunks.append(encode_frame(FrameKind.RAFT, encode_messages(batch)))
        return b"".join(chunks), snapshots

    def _take_raft_batch(self) -> list[Message]:
        batch: list[Message] = []
        size = entries = 0
        while self._raft:
            message = self._raft[0]
            message_size = _approximate_size(message)
            if batch and (size + message_size > self._max_batch_bytes
                          or entries + len(message.entries) > self._max_batch_entries):
                break
            batch.append(self._raft.popleft())
            size += message_size
            entries += len(message.entries)
        return batch


def link_outbox(max_messages: int, max_peer_frame_bytes: int) -> PeerOutbox:
    """The outbox of one peer link: `max_messages` Raft messages (peer_outbox_messages), batched
    into frames of at most RAFT_FRAME_BYTES, or half the peer frame bound (max_peer_frame_bytes)
    when that is less."""
    return PeerOutbox(max_messages, MAX_CONTROL_FRAMES, min(RAFT_FRAME_BYTES, max_peer_frame_bytes // 2),
                      RAFT_FRAME_ENTRIES)


def _approximate_size(message: Message) -> int:
    size = 96 + len(message.context) + sum(entry.size_bytes() for entry in message.entries)
    if message.snapshot is not None:
        size += len(message.snapshot.data) + 64
    return size
