"""`rmqc status` shows a membership change in the log and not yet applied (rmqc.replica._status reads
it from the core), and nothing after an election, whose inherited tail the core only assumes may
hold one."""

from __future__ import annotations

from rmqc.raft._types import ConfChange, ConfChangeType
from rmqc.replica._status import pending_conf_change

from .raftnet import Network


def test_pending_conf_change_is_shown_until_applied() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    leader = net.nodes["n1"]
    assert pending_conf_change(leader, leader.raft.log.applied) is None  # the election's no-op only
    net.cut("n1", "n2")
    net.cut("n1", "n3")  # the change cannot commit
    leader.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, "n4"))
    index = leader.raft.log.last_index()
    assert pending_conf_change(leader, leader.raft.log.applied) == {"index": index, "type": "add_learner",
                                                                     "node": "n4"}
    assert pending_conf_change(net.nodes["n2"], 0) is None  # followers do not know
    net.recover()
    net.stabilize()
    assert pending_conf_change(leader, leader.raft.log.applied) is None
