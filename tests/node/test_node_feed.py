"""The driver works off a backlog of peer messages in slices (issue 13): one pass steps at most
FEED_MESSAGES messages or FEED_ENTRIES entries, then persists, sends and lets other tasks run."""

from __future__ import annotations

from pathlib import Path

import trio

from rmqc.node import ControllerNode, NodeConfig, parse_peers
from rmqc.node._node import FEED_ENTRIES, FEED_MESSAGES
from rmqc.raft._types import Entry, Message, MessageType


class CountingRaw:
    def __init__(self) -> None:
        self.stepped: list[Message] = []

    def step(self, message: Message) -> None:
        self.stepped.append(message)


def node(tmp_path: Path) -> ControllerNode:
    return ControllerNode(NodeConfig(peers=parse_peers("n0-127.0.0.1:1;n1-127.0.0.1:2"), data_dir=str(tmp_path)))


def heartbeat() -> Message:
    return Message(type=MessageType.HEARTBEAT_RESP, to="n0", frm="n1", term=1)


def append(entries: int) -> Message:
    return Message(type=MessageType.APP, to="n0", frm="n1", term=1,
                   entries=tuple(Entry(i + 1, 1, data=b"x") for i in range(entries)))


def test_a_backlog_of_messages_is_stepped_in_slices(tmp_path: Path) -> None:
    async def main() -> None:
        controller, raw = node(tmp_path), CountingRaw()
        controller.on_raft_messages("n1", [heartbeat() for _ in range(3 * FEED_MESSAGES)])
        controller._wakeup = trio.Event()
        controller._step_inbound(raw)  # type: ignore[arg-type]
        assert len(raw.stepped) == FEED_MESSAGES
        assert controller._wakeup.is_set()  # the next pass is due at once
        controller._step_inbound(raw)  # type: ignore[arg-type]
        controller._step_inbound(raw)  # type: ignore[arg-type]
        assert len(raw.stepped) == 3 * FEED_MESSAGES and not controller._inbound

    trio.run(main)


def test_a_slice_is_also_bounded_in_entries(tmp_path: Path) -> None:
    async def main() -> None:
        controller, raw = node(tmp_path), CountingRaw()
        per_message = FEED_ENTRIES // 4
        controller.on_raft_messages("n1", [append(per_message) for _ in range(10)])
        controller._step_inbound(raw)  # type: ignore[arg-type]
        assert len(raw.stepped) == 4

    trio.run(main)
