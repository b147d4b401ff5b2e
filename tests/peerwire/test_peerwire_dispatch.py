"""Where received peer frames go: each kind to its PeerHandler call, a lying sender refused, stale
appends decoded without entries, long runs paused in slices, snapshot fates reported."""

from __future__ import annotations

import pytest

from rmqc.peerwire import (
    FrameKind,
    PeerFrame,
    PeerProtocolError,
    dispatch_frame,
    dispatch_frames,
    dispatch_in_slices,
    encode_messages,
    encode_tagged,
    report_snapshots,
)
from rmqc.raft import Entry, Message, MessageType


class Calls:
    """A PeerHandler that records each call as a tuple, the method's name first."""

    def __init__(self, term: int = 0) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.term = term

    def on_raft_messages(self, sender: str, messages: list[Message]) -> None:
        self.calls.append(("raft", sender, messages))

    def raft_term(self) -> int:
        return self.term

    def on_forward_request(self, sender: str, tag: int, frame: bytes, reply: object) -> None:
        self.calls.append(("request", sender, tag, frame, reply))

    def on_forward_response(self, sender: str, tag: int, frame: bytes) -> None:
        self.calls.append(("response", sender, tag, frame))

    def on_digest(self, sender: str, payload: bytes) -> None:
        self.calls.append(("digest", sender, payload))

    def on_peer_unreachable(self, peer_id: str) -> None:
        self.calls.append(("unreachable", peer_id))

    def on_peer_down(self, peer_id: str) -> None:
        self.calls.append(("down", peer_id))

    def on_snapshot_sent(self, peer_id: str, ok: bool) -> None:
        self.calls.append(("snapshot", peer_id, ok))


async def reply(kind: FrameKind, payload: bytes) -> None:
    raise AssertionError("dispatch only hands the reply on")


def append(term: int, frm: str = "n1") -> Message:
    return Message(type=MessageType.APP, to="n0", frm=frm, term=term, index=4, entries=(Entry(5, term, data=b"x"),))


def test_each_kind_of_frame_goes_to_its_handler_call() -> None:
    handler = Calls()
    message = append(term=2)
    dispatch_frames([
        PeerFrame(FrameKind.RAFT, encode_messages([message])),
        PeerFrame(FrameKind.FORWARD_REQUEST, encode_tagged(7, b"request")),
        PeerFrame(FrameKind.FORWARD_RESPONSE, encode_tagged(8, b"response")),
        PeerFrame(FrameKind.DIGEST, b"digest"),
    ], "n1", handler, reply)
    assert handler.calls == [("raft", "n1", [message]), ("request", "n1", 7, b"request", reply),
                             ("response", "n1", 8, b"response"), ("digest", "n1", b"digest")]


def test_a_raft_message_that_names_another_sender_than_the_link_is_refused() -> None:
    handler = Calls()
    with pytest.raises(PeerProtocolError, match="claims to be from 'n2'"):
        dispatch_frame(PeerFrame(FrameKind.RAFT, encode_messages([append(term=2, frm="n2")])), "n1", handler, reply)
    assert handler.calls == []


def test_appends_of_a_term_older_than_the_nodes_arrive_without_their_entries() -> None:
    handler = Calls(term=3)
    dispatch_frame(PeerFrame(FrameKind.RAFT, encode_messages([append(term=2), append(term=3)])), "n1", handler, reply)
    (_raft, _sender, messages), = handler.calls
    assert [len(message.entries) for message in messages] == [0, 1]


def test_a_long_run_of_frames_pauses_after_each_slice_of_payload_bytes() -> None:
    handler = Calls()
    frames = [PeerFrame(FrameKind.DIGEST, bytes([number]) * 40) for number in range(7)]
    handled_at_pauses = [len(handler.calls) for _pause in dispatch_in_slices(frames, "n1", handler, reply, 100)]
    assert handled_at_pauses == [3, 6]  # 120 bytes, then 120 again; the seventh's 40 need no pause
    assert [call[2] for call in handler.calls] == [frame.payload for frame in frames]


def test_snapshot_fates_are_reported_for_each_target() -> None:
    handler = Calls()
    report_snapshots(handler, ["n1", "n2"], False)
    assert handler.calls == [("snapshot", "n1", False), ("snapshot", "n2", False)]
