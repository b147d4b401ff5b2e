"""The Raft core under the flows of `rmqc admin members` (issue 16): a node joining with an empty
disk (through a snapshot that predates its addition), a removed node that does not know it, the
vote of a learner, a removed leader. Pitfall numbers of notes/raft-pitfalls.md are in the names."""

from __future__ import annotations

from rmqc.raft import ConfChange, ConfChangeType, ConfState, MessageType, Role, Snapshot, SnapshotMeta

from .raftnet import Network, elected, msg, single

MT = MessageType
CC = ConfChangeType
ET = 10


def compact_leader(net: Network, leader: str) -> int:
    """Snapshot the leader's applied state and drop its log up to there."""
    storage = net.storages[leader]
    applied = net.nodes[leader].status().applied
    storage.create_snapshot(applied, net.nodes[leader].conf_state, b"snap")
    storage.compact(applied)
    return applied


def test_17_a_joining_node_installs_a_snapshot_that_predates_its_addition() -> None:
    net = elected(["n1", "n2", "n3"], check_quorum=False)
    for i in range(10):
        net.propose("n1", b"e%d" % i)
    snapshot_index = compact_leader(net, "n1")  # taken before n4 is a member
    net.add_node("n4")
    joiner = net.nodes["n4"]
    assert joiner.conf_state == ConfState()
    net.nodes["n1"].propose_conf_change(ConfChange(CC.ADD_LEARNER, "n4", b"127.0.0.1:4"))
    net.stabilize()
    net.tick(ticks=3)  # the heartbeat marks n4 active, so the leader ships its snapshot
    assert net.snapshots_applied["n4"] == snapshot_index
    assert joiner.conf_state == ConfState(("n1", "n2", "n3"), ("n4",)), "its own addition followed the snapshot"
    assert joiner.raft.log.last_index() == net.nodes["n1"].raft.log.last_index()


def test_17_a_member_still_refuses_a_snapshot_without_it() -> None:
    node, _storage = single("n3", peers=("n1", "n2", "n3"))
    node.step(msg(MT.SNAP, "n1", "n3", term=2,
                  snapshot=Snapshot(SnapshotMeta(20, 2, ConfState(("n1", "n2"))), b"")))
    assert node.raft.log.committed < 20 and "n3" in node.conf_state.voters


def test_22_a_joining_node_never_campaigns() -> None:
    net = elected(["n1", "n2", "n3"])
    net.add_node("n4")
    net.isolate("n4")
    net.delivered.clear()
    for _ in range(5 * ET):
        net.nodes["n4"].tick()
    net.stabilize()
    joiner = net.nodes["n4"]
    assert joiner.raft.role is Role.FOLLOWER and joiner.raft.term == 0
    assert not [m for m in net.queue if m.frm == "n4"]


def test_22_a_learner_given_timeout_now_does_not_campaign() -> None:
    net = Network(["n1", "n2", "n3"], voters=["n1", "n2"])
    net.elect("n1")
    net.nodes["n1"].propose_conf_change(ConfChange(CC.ADD_LEARNER, "n3"))
    net.stabilize()
    learner = net.nodes["n3"]
    term = learner.raft.term
    learner.step(msg(MT.TIMEOUT_NOW, "n1", "n3", term=term, index=learner.raft.log.last_index()))
    assert learner.raft.role is Role.FOLLOWER and learner.raft.term == term


def test_21_a_removed_node_that_missed_its_removal_is_not_elected_once_the_leader_dies() -> None:
    """n3 has the REMOVE n3 entry but never learned it committed; the leader dies. Outside any
    lease, n2 (which applied the removal) must not elect n3 with the old membership's quorum."""
    net = elected(["n1", "n2", "n3"])
    leader = net.nodes["n1"]
    leader.propose_conf_change(ConfChange(CC.REMOVE_NODE, "n3"))
    removal = leader.raft.log.last_index()
    # n3 gets the entry but never a commit index that covers it
    net.hook = lambda m: None if m.to == "n3" and (m.type is MT.HEARTBEAT or m.commit >= removal) else m
    net.stabilize()
    assert net.nodes["n2"].conf_state.voters == ("n1", "n2")
    assert "n3" in net.nodes["n3"].conf_state.voters, "n3 does not know"
    net.isolate("n1")  # the leader is gone
    net.unstick()
    net.nodes["n3"].campaign()
    net.stabilize()
    assert net.nodes["n3"].raft.role is not Role.LEADER
    assert net.nodes["n2"].raft.vote != "n3"


def test_22_a_voter_grants_its_vote_to_a_learner_it_knows() -> None:
    """The candidate may have been promoted without this node having applied it yet."""
    node, _storage = single("n2", peers=("n1", "n2"))
    node.apply_conf_change(ConfChange(CC.ADD_LEARNER, "n3"))
    node.raft.leader_contact_elapsed = ET  # outside any lease
    node.step(msg(MT.VOTE, "n3", "n2", term=5, index=10, log_term=4))
    assert node.raft.vote == "n3"


def test_20_a_leader_that_applies_its_own_removal_never_campaigns_again() -> None:
    net = elected(["n1", "n2", "n3"])
    n1 = net.nodes["n1"]
    n1.propose_conf_change(ConfChange(CC.REMOVE_NODE, "n1"))
    net.stabilize()
    assert n1.raft.role is Role.FOLLOWER
    net.isolate("n1")
    for _ in range(5 * ET):
        n1.tick()
    net.stabilize()
    assert n1.raft.role is Role.FOLLOWER and not any(m.frm == "n1" for m in net.queue)


def test_21_a_node_that_applied_its_own_removal_votes_no_more() -> None:
    node, _storage = single("n3", peers=("n1", "n2", "n3"))
    node.apply_conf_change(ConfChange(CC.REMOVE_NODE, "n3"))
    node.raft.leader_contact_elapsed = ET  # outside any lease
    node.step(msg(MT.VOTE, "n2", "n3", term=5, index=10, log_term=4))
    assert node.raft.vote is None
    assert [m.reject for m in node.raft.msgs_after_persist if m.type is MT.VOTE_RESP] == [True]
