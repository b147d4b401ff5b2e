"""What a peer's frames mean to the node: each decoded frame goes to the PeerHandler call of its kind.
The shell reads the bytes and decodes them (PeerFrameDecoder); this decides where each frame goes,
and where a long run of frames pauses so the shell can let its other tasks run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

from rmqc.raft import Message

from ._auth import check_senders
from ._codec import FrameKind, PeerFrame, decode_messages, decode_tagged

Reply = Callable[[FrameKind, bytes], Awaitable[None]]


class PeerHandler(Protocol):
    """What the node does with peer traffic. Called from link tasks; must not block for long."""

    def on_raft_messages(self, sender: str, messages: list[Message]) -> None: ...

    def raft_term(self) -> int:
        """The node's current term: appends of older terms are decoded without their entries."""
        ...

    def on_forward_request(self, sender: str, tag: int, frame: bytes, reply: Reply) -> None: ...

    def on_forward_response(self, sender: str, tag: int, frame: bytes) -> None: ...

    def on_digest(self, sender: str, payload: bytes) -> None: ...

    def on_peer_unreachable(self, peer_id: str) -> None: ...

    def on_peer_down(self, peer_id: str) -> None:
        """The peer's connection was lost and its port now refuses connections: its process is
        gone (not merely slow or partitioned)."""
        ...

    def on_snapshot_sent(self, peer_id: str, ok: bool) -> None: ...


def dispatch_frames(frames: Iterable[PeerFrame], sender: str, handler: PeerHandler, reply: Reply) -> None:
    for frame in frames:
        dispatch_frame(frame, sender, handler, reply)


def dispatch_in_slices(frames: Iterable[PeerFrame], sender: str, handler: PeerHandler, reply: Reply,
                       slice_bytes: int) -> Iterator[None]:
    """Dispatch `frames`, pausing (yielding) after each `slice_bytes` of payload: a chunk of many
    frames (a peer's backlog after a pause) must not keep the node's other tasks (the driver,
    heartbeats, client answers) from running until all of it is handled."""
    since_pause = 0
    for frame in frames:
        dispatch_frame(frame, sender, handler, reply)
        since_pause += len(frame.payload)
        if since_pause >= slice_bytes:
            yield
            since_pause = 0


def dispatch_frame(frame: PeerFrame, sender: str, handler: PeerHandler, reply: Reply) -> None:
    if frame.kind == FrameKind.RAFT:
        handler.on_raft_messages(sender, check_senders(decode_messages(frame.payload, handler.raft_term()), sender))
    elif frame.kind == FrameKind.FORWARD_REQUEST:
        tag, data = decode_tagged(frame.payload)
        handler.on_forward_request(sender, tag, data, reply)
    elif frame.kind == FrameKind.FORWARD_RESPONSE:
        tag, data = decode_tagged(frame.payload)
        handler.on_forward_response(sender, tag, data)
    else:
        handler.on_digest(sender, frame.payload)


def report_snapshots(handler: PeerHandler, targets: Iterable[str], ok: bool) -> None:
    """Tell Raft the fate of the snapshot messages of a write (`targets`, from PeerOutbox.take_batch)."""
    for target in targets:
        handler.on_snapshot_sent(target, ok)
