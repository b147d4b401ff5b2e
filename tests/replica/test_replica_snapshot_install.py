"""A snapshot from the leader is decoded a bounded step per driver pass into a new state while the
live one is untouched and the follower keeps answering heartbeats; it is acknowledged only once
saved and adopted, and the state it held before is then freed a step per pass."""

from __future__ import annotations

from replica_harness import harness

from rmqc import fsm
from rmqc.raft import ConfState, Message, MessageType, Snapshot, SnapshotMeta
from rmqc.replica import SendRaft
from rmqc.testing.states import add_groups

GROUPS = 3_000  # several decode steps (fsm.DECODE_STEP_ITEMS records a step)
PEERS = "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"


def big_state(groups: int) -> fsm.ControllerState:
    return add_groups(fsm.ControllerState(), groups)


def sent(outbox: list[object]) -> list[Message]:
    messages = [m for action in outbox if isinstance(action, SendRaft) for m in action.messages]
    outbox.clear()
    return messages


def test_a_leaders_snapshot_is_decoded_in_steps_and_acknowledged_once_adopted() -> None:
    h = harness(PEERS, seed=3, node_id="n1")
    follower = h.replica
    source = big_state(GROUPS)
    meta = SnapshotMeta(index=5_000, term=2, conf_state=ConfState(voters=("n0", "n1", "n2")))
    snapshot = Snapshot(meta, source.snapshot())
    h.outbox.clear()
    follower.raft_messages("n0", [Message(MessageType.SNAP, to=follower.config.node_id, frm="n0", term=2,
                                          snapshot=snapshot)])
    passes_decoding = 0
    while follower.drive_due:
        follower.drive()
        if follower.driver.decoding is not None:
            passes_decoding += 1
            assert follower.state.snapshot() != source.snapshot()  # the live state is untouched
            assert not [m for m in sent(h.outbox) if m.type is MessageType.APP_RESP]
            follower.raft_messages("n0", [Message(MessageType.HEARTBEAT, to=follower.config.node_id, frm="n0",
                                                  term=2)])
            follower.drive()
            assert [m for m in sent(h.outbox) if m.type is MessageType.HEARTBEAT_RESP]  # still answering
    assert passes_decoding >= 3
    assert follower.state.snapshot() == source.snapshot()
    assert follower.applied_index == meta.index
    assert follower.driver._releasing is None  # the state it held before was freed, a step per pass
