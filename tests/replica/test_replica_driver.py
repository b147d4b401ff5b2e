"""The driver of the replica: the order of its actions, group commit, feed slices, snapshots."""

from __future__ import annotations

from replica_harness import harness, leader

from rmqc.fsm import ControllerState
from rmqc.raft._types import Entry, Message, MessageType
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqc.replica import (
    FEED_ENTRIES,
    FEED_MESSAGES,
    Answer,
    MembersChanged,
    SendRaft,
    SnapshotOutcome,
    WriteSnapshot,
)


def heartbeat_response() -> Message:
    return Message(type=MessageType.HEARTBEAT_RESP, to="n0", frm="n1", term=1)


def test_a_backlog_of_messages_is_stepped_in_slices() -> None:
    h = harness("n0-127.0.0.1:1;n1-127.0.0.1:2")
    h.settle()  # the bootstrap's Ready
    stepped: list[Message] = []
    h.replica.raw.step = stepped.append  # type: ignore[method-assign]  # count, do not step
    h.replica.raft_messages("n1", [heartbeat_response() for _ in range(3 * FEED_MESSAGES)])
    h.replica.drive()
    assert len(stepped) == FEED_MESSAGES
    assert h.replica.drive_due  # the next pass is due at once
    h.replica.drive()
    h.replica.drive()
    assert len(stepped) == 3 * FEED_MESSAGES and not h.replica.inbound and not h.replica.drive_due


def test_a_slice_is_also_bounded_in_entries() -> None:
    h = harness("n0-127.0.0.1:1;n1-127.0.0.1:2")
    h.settle()  # the bootstrap's Ready
    stepped: list[Message] = []
    h.replica.raw.step = stepped.append  # type: ignore[method-assign]
    entries = tuple(Entry(i + 1, 1, data=b"x") for i in range(FEED_ENTRIES // 4))
    h.replica.raft_messages("n1", [Message(type=MessageType.APP, to="n0", frm="n1", term=1, entries=entries)
                                   for _ in range(10)])
    h.replica.drive()
    assert len(stepped) == 4


def test_persist_comes_before_the_answer_and_waiting_requests_commit_together() -> None:
    h = leader()
    saves: list[int] = []
    storage = h.replica.storage
    real_save = storage.save

    def save(hard_state, entries, snapshot) -> None:  # type: ignore[no-untyped-def]
        saves.append(len(h.outbox))  # how many actions were out when the write happened
        real_save(hard_state, entries, snapshot)

    storage.save = save  # type: ignore[method-assign]
    h.outbox.clear()
    for opaque in range(1, 4):
        h.replica.client_request(get_next_id(opaque), 1, opaque)
    h.settle()
    answers = [action for action in h.outbox if isinstance(action, Answer)]
    assert sorted(a.token for a in answers) == [1, 2, 3]
    assert all(a.response.code == ResponseCode.SUCCESS for a in answers)
    assert len(saves) >= 1 and saves[0] == 0  # the write came before any answer
    assert h.replica.applied_index == h.replica.status().commit


def get_next_id(opaque: int) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.CONTROLLER_APPLY_BROKER_ID, opaque=opaque,
                           ext_fields={"clusterName": "c", "brokerName": f"g{opaque}", "appliedBrokerId": "1",
                                       "registerCheckCode": f"10.0.0.{opaque}:1;1"})


def test_a_crash_inside_the_save_leaves_only_the_actions_emitted_before_it() -> None:
    h = harness("n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3")

    class Crash(Exception):
        pass

    def crash(*_args: object) -> None:
        raise Crash

    h.replica.storage.save = crash  # type: ignore[method-assign]
    try:
        h.advance(5_000)  # the first Ready (bootstrap, then a campaign) must be written
    except Crash:
        pass
    else:
        raise AssertionError("the save was never called")
    assert not any(isinstance(action, Answer) for action in h.outbox)
    # messages that may leave before the write are out (and the membership announced at start);
    # nothing that needed the write is
    assert isinstance(h.outbox[0], MembersChanged)
    for action in h.outbox[1:]:
        assert isinstance(action, SendRaft)
        assert all(m.type not in (MessageType.VOTE_RESP, MessageType.APP_RESP) for m in action.messages)


def test_a_snapshot_is_written_every_n_entries_off_the_driver() -> None:
    h = leader(snapshot_every_entries=4)
    for opaque in range(1, 7):
        h.replica.client_request(get_next_id(opaque), 1, opaque)
        h.settle()
    (write,) = h.take(WriteSnapshot)  # one at a time: the next waits for snapshot_written
    assert write.index >= 4 and write.compact_to < write.index
    # captured at write.index: the groups registered later are not in it
    captured = ControllerState()
    captured.restore(write.state.encode())
    assert 0 < len(captured) < len(h.replica.state) == 6
    h.replica.snapshot_written(write.index, SnapshotOutcome.OK)
    assert h.replica.snapshot_index == write.index
