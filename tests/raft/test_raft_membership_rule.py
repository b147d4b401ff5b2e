"""The membership rule, written once (`rmqc.raft.conf_state_after`): unit cases, and the Raft core
and the offline replay (`rmqc.fsm.replay`, what `rmqc log compact` runs) agreeing on a real
network's committed membership changes."""

from __future__ import annotations

import pytest

from rmqc import fsm
from rmqc.raft import conf_state_after
from rmqc.raft._types import ConfChange, ConfChangeType, ConfState, EntryType

from .raftnet import Network

CC = ConfChangeType
THREE = ConfState(voters=("n1", "n2", "n3"))


@pytest.mark.parametrize(("change", "after"), [
    (ConfChange(CC.ADD_VOTER, "n0"), ConfState(voters=("n0", "n1", "n2", "n3"))),  # sorted
    (ConfChange(CC.ADD_LEARNER, "n4"), ConfState(voters=("n1", "n2", "n3"), learners=("n4",))),
    (ConfChange(CC.ADD_LEARNER, "n2"), ConfState(voters=("n1", "n3"), learners=("n2",))),  # demoted
    (ConfChange(CC.REMOVE_NODE, "n3"), ConfState(voters=("n1", "n2"))),
    (ConfChange(CC.REMOVE_NODE, "n9"), THREE),  # not a member: nothing changes
    (ConfChange(CC.ADD_VOTER, "n2"), THREE),  # already a voter
])
def test_conf_state_after(change: ConfChange, after: ConfState) -> None:
    assert conf_state_after(THREE, change) == after


def test_a_learner_promoted_to_voter_leaves_the_learners() -> None:
    with_learner = ConfState(voters=("n1",), learners=("n2",))
    assert conf_state_after(with_learner, ConfChange(CC.ADD_VOTER, "n2")) == ConfState(voters=("n1", "n2"))


def test_a_change_that_leaves_no_voter_is_refused() -> None:
    alone = ConfState(voters=("n1",), learners=("n2",))
    assert conf_state_after(alone, ConfChange(CC.REMOVE_NODE, "n1")) is None
    assert conf_state_after(alone, ConfChange(CC.ADD_LEARNER, "n1")) is None
    # the replay keeps the membership, as the core does
    assert fsm.replay([], fsm.ControllerState(), alone) == alone


def test_the_core_and_the_offline_replay_agree_on_every_node() -> None:
    net = Network(["n1", "n2", "n3", "n4"], voters=["n1", "n2", "n3"])
    net.elect("n1")
    leader = net.nodes["n1"]
    for change in [ConfChange(CC.ADD_LEARNER, "n4"), ConfChange(CC.ADD_VOTER, "n4"),
                   ConfChange(CC.ADD_LEARNER, "n2"), ConfChange(CC.REMOVE_NODE, "n3")]:
        leader.propose_conf_change(change)
        net.stabilize()  # applied before the next may be proposed
    expected = ConfState(voters=("n1", "n4"), learners=("n2",))
    assert leader.conf_state == expected
    for node_id in ("n1", "n2", "n4"):
        # what each node applied (the election's no-op and the four changes), replayed offline
        # from the bootstrap membership
        applied = net.applied[node_id]
        assert [e.type for e in applied].count(EntryType.CONF_CHANGE) == 4, node_id
        replayed = fsm.replay(applied, fsm.ControllerState(), THREE)
        assert replayed == net.nodes[node_id].conf_state == expected, node_id
