"""One test per rule of the Raft paper's figure 2 (and section 5), init / act / check, plus the
membership and ReadIndex rules of the thesis (chapters 4 and 6)."""

from __future__ import annotations

import random

import pytest

from rmqc.raft import (
    ConfChange,
    ConfChangeType,
    Config,
    Entry,
    MemoryStorage,
    MessageType,
    RawNode,
    Role,
)
from rmqc.raft._core import CampaignType

from .raftnet import Network, drain, msg, preloaded, single

MT = MessageType
ET = 10
CC = ConfChangeType


# ================================================================= All servers
def test_all_servers_apply_committed_entries_in_order() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    for i in range(5):
        net.propose("n1", b"%d" % i)
    for node_id in net.ids:
        applied = net.applied[node_id]
        assert [e.index for e in applied] == sorted(e.index for e in applied)
        assert net.payloads(node_id) == [b"0", b"1", b"2", b"3", b"4"]


@pytest.mark.parametrize("kind", [MT.APP, MT.HEARTBEAT, MT.VOTE, MT.APP_RESP, MT.VOTE_RESP])
def test_all_servers_adopt_a_higher_term_and_become_follower(kind: MessageType) -> None:
    node, _storage = single("n1", check_quorum=False)
    node.raft.campaign(CampaignType.ELECTION)
    term = node.raft.term
    node.step(msg(kind, "n2", "n1", term=term + 3, index=3, log_term=1))
    assert node.raft.term == term + 3 and node.raft.role is Role.FOLLOWER


# ================================================================= Followers
def test_follower_answers_rpcs_from_leader_and_candidates() -> None:
    node, storage = single("n2", check_quorum=False)  # no stickiness: a candidate gets an answer
    node.step(msg(MT.APP, "n1", "n2", term=2, index=3, log_term=1, entries=(Entry(4, 2),)))
    node.step(msg(MT.VOTE, "n3", "n2", term=3, index=4, log_term=2))
    kinds = {m.type for m in drain(node, storage)}
    assert kinds == {MT.APP_RESP, MT.VOTE_RESP}


def test_follower_times_out_into_an_election_within_randomised_bounds() -> None:
    for seed in range(20):
        storage = MemoryStorage()
        node = RawNode(Config(id="n1", pre_vote=False), storage, random.Random(seed), ("n1", "n2", "n3"))
        ticks = 0
        while node.raft.role is Role.FOLLOWER:
            node.tick()
            ticks += 1
            assert ticks < 2 * ET, f"seed {seed}"
        assert ET <= ticks < 2 * ET and node.raft.role is Role.CANDIDATE


def test_follower_heartbeats_reset_the_election_timer() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    for _ in range(10 * ET):
        net.tick()
    assert net.leader() == "n1" and net.nodes["n2"].raft.role is Role.FOLLOWER


# ================================================================= Candidates
def test_candidate_increments_term_votes_for_itself_and_requests_votes() -> None:
    node, _storage = single("n1", pre_vote=False)
    term = node.raft.term
    node.campaign()
    rd = node.ready()
    assert rd.hard_state is not None and (rd.hard_state.term, rd.hard_state.vote) == (term + 1, "n1")
    votes = [m for m in rd.persist_messages if m.type is MT.VOTE]
    assert sorted(m.to for m in votes) == ["n2", "n3"]
    assert all((m.term, m.index, m.log_term) == (term + 1, 3, 1) for m in votes)


def test_candidate_with_majority_becomes_leader() -> None:
    node, _ = single("n1", peers=("n1", "n2", "n3", "n4", "n5"), pre_vote=False)
    node.campaign()
    term = node.raft.term
    node.step(msg(MT.VOTE_RESP, "n2", "n1", term=term))
    assert node.raft.role is Role.CANDIDATE
    node.step(msg(MT.VOTE_RESP, "n3", "n1", term=term, reject=True))
    node.step(msg(MT.VOTE_RESP, "n4", "n1", term=term))
    assert node.raft.role is Role.LEADER


def test_candidate_loses_with_majority_rejections() -> None:
    node, _ = single("n1", pre_vote=False)
    node.campaign()
    term = node.raft.term
    node.step(msg(MT.VOTE_RESP, "n2", "n1", term=term, reject=True))
    node.step(msg(MT.VOTE_RESP, "n3", "n1", term=term, reject=True))
    assert node.raft.role is Role.FOLLOWER


def test_candidate_steps_down_on_append_from_leader_of_same_term() -> None:
    node, _ = single("n1", pre_vote=False)
    node.campaign()
    term = node.raft.term
    node.step(msg(MT.APP, "n2", "n1", term=term, index=3, log_term=1))
    assert node.raft.role is Role.FOLLOWER and node.raft.lead == "n2" and node.raft.vote == "n1"


def test_candidate_starts_a_new_election_when_the_timeout_elapses() -> None:
    node, _ = single("n1", pre_vote=False)
    node.campaign()
    term = node.raft.term
    for _ in range(2 * ET):
        node.tick()
    assert node.raft.role is Role.CANDIDATE and node.raft.term > term


# ================================================================= Leaders
def test_leader_sends_heartbeats_on_election_and_when_idle() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.delivered.clear()
    net.tick(["n1"])
    assert sorted(m.to for m in net.delivered if m.type is MT.HEARTBEAT) == ["n2", "n3"]


def test_leader_appends_client_command_and_it_is_applied_after_commit() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.ignore(MT.APP_RESP)
    net.propose("n1", b"cmd")
    assert net.nodes["n1"].raft.log.entries(net.nodes["n1"].raft.log.last_index(), 99)[0].data == b"cmd"
    assert b"cmd" not in net.payloads("n1")
    net.recover()
    net.tick()
    assert b"cmd" in net.payloads("n1")


def test_leader_sends_entries_from_next_index() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.delivered.clear()
    pr = net.nodes["n1"].raft.progress["n2"]
    next_index = pr.next
    net.propose("n1", b"a")
    (app,) = [m for m in net.delivered if m.type is MT.APP and m.to == "n2" and m.entries]
    assert app.entries[0].index == next_index and app.index == next_index - 1


def test_leader_updates_next_and_match_on_success() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.propose("n1", b"a")
    leader = net.nodes["n1"].raft
    last = leader.log.last_index()
    assert all((leader.progress[p].match, leader.progress[p].next) == (last, last + 1) for p in ("n2", "n3"))


def test_leader_decrements_next_and_retries_on_inconsistency() -> None:
    ids = ["n1", "n2", "n3"]
    storages = {
        "n1": preloaded([1, 1, 2, 2], term=2, voters=ids),
        "n2": preloaded([1, 1, 2, 2], term=2, voters=ids),
        "n3": preloaded([1, 1], term=2, voters=ids),
    }
    net = Network(ids, storages=storages, check_quorum=False)
    net.elect("n1")
    rejects = [m for m in net.delivered if m.type is MT.APP_RESP and m.reject]
    assert rejects
    assert net.nodes["n3"].raft.log.last_index() == net.nodes["n1"].raft.log.last_index()


def test_leader_commits_only_current_term_entries_on_a_majority() -> None:
    ids = ["n1", "n2", "n3"]
    storages = {i: preloaded([1, 2], term=2, voters=ids) for i in ids}
    net = Network(ids, storages=storages, check_quorum=False)
    net.ignore(MT.APP)
    net.elect("n1")
    leader = net.nodes["n1"].raft
    leader.step(msg(MT.APP_RESP, "n2", "n1", term=leader.term, index=2))
    assert leader.log.committed == 0
    leader.step(msg(MT.APP_RESP, "n2", "n1", term=leader.term, index=3))
    assert leader.log.committed == 3


# ================================================================= AppendEntries receiver
def test_append_receiver_1_rejects_lower_term() -> None:
    node, storage = single("n2", storage=preloaded([1, 1], term=5))
    node.step(msg(MT.APP, "n1", "n2", term=3, index=2, log_term=1, entries=(Entry(3, 3),)))
    (resp,) = drain(node, storage)
    assert resp.term == 5 and node.raft.log.last_index() == 2


def test_append_receiver_2_rejects_missing_prev_entry_with_a_hint() -> None:
    node, storage = single("n2", storage=preloaded([1, 1], term=1))
    node.step(msg(MT.APP, "n1", "n2", term=2, index=5, log_term=2, entries=(Entry(6, 2),)))
    (resp,) = drain(node, storage)
    assert resp.reject and resp.index == 5 and resp.reject_hint == 2 and resp.log_term == 1


def test_append_receiver_3_deletes_conflicting_entry_and_all_after() -> None:
    node, storage = single("n2", storage=preloaded([1, 1, 1, 1], term=1))
    node.step(msg(MT.APP, "n1", "n2", term=2, index=2, log_term=1, entries=(Entry(3, 2),)))
    drain(node, storage)
    assert storage.last_index() == 3 and storage.term(3) == 2


def test_append_receiver_4_appends_new_entries() -> None:
    node, storage = single("n2", storage=preloaded([1, 1], term=1))
    node.step(msg(MT.APP, "n1", "n2", term=1, index=2, log_term=1,
                  entries=(Entry(3, 1, data=b"a"), Entry(4, 1, data=b"b"))))
    drain(node, storage)
    assert [e.data for e in storage.entries(3, 5)] == [b"a", b"b"]


def test_append_receiver_5_commit_is_min_of_leader_commit_and_last_new() -> None:
    node, _storage = single("n2", storage=preloaded([1, 1], term=1))
    node.step(msg(MT.APP, "n1", "n2", term=1, index=2, log_term=1, commit=9, entries=(Entry(3, 1),)))
    assert node.raft.log.committed == 3
    node.step(msg(MT.APP, "n1", "n2", term=1, index=3, log_term=1, commit=3))
    assert node.raft.log.committed == 3


# ================================================================= RequestVote receiver
def test_vote_receiver_1_rejects_lower_term() -> None:
    node, storage = single("n2", storage=preloaded([1], term=5), pre_vote=False)
    node.step(msg(MT.VOTE, "n1", "n2", term=4, index=9, log_term=4))
    assert drain(node, storage) == [] and node.raft.vote is None


def test_vote_receiver_2_grants_once_per_term_to_an_up_to_date_log() -> None:
    node, storage = single("n2", storage=preloaded([1, 2], term=2), check_quorum=False)
    node.step(msg(MT.VOTE, "n1", "n2", term=3, index=1, log_term=2))  # shorter log, same last term
    node.step(msg(MT.VOTE, "n3", "n2", term=3, index=2, log_term=1))  # older last term
    node.step(msg(MT.VOTE, "n1", "n2", term=3, index=2, log_term=2))  # up to date: granted
    node.step(msg(MT.VOTE, "n3", "n2", term=3, index=5, log_term=3))  # already voted this term
    node.step(msg(MT.VOTE, "n1", "n2", term=3, index=2, log_term=2))  # same candidate again: yes
    replies = [(m.to, m.reject) for m in drain(node, storage)]
    assert replies == [("n1", True), ("n3", True), ("n1", False), ("n3", True), ("n1", False)]
    assert node.raft.vote == "n1"


# ================================================================= Membership (thesis ch. 4)
def test_membership_add_voter_through_the_log_then_it_counts() -> None:
    net = Network(["n1", "n2", "n3", "n4"], voters=["n1", "n2", "n3"])
    net.elect("n1")
    net.nodes["n1"].propose_conf_change(ConfChange(CC.ADD_VOTER, "n4"))
    net.stabilize()
    for node_id in net.ids:
        assert net.nodes[node_id].conf_state.voters == ("n1", "n2", "n3", "n4")
    net.cut("n1", "n2")
    net.cut("n1", "n3")
    net.propose("n1", b"x")
    assert b"x" not in net.payloads("n1"), "1 of 4 is no quorum"
    net.recover()
    net.cut("n1", "n3")
    net.tick()
    assert b"x" in net.payloads("n1"), "n1+n2+n4 is 3 of 4"


def test_membership_learner_replicates_and_is_promoted() -> None:
    net = Network(["n1", "n2", "n3", "n4"], voters=["n1", "n2", "n3"])
    net.elect("n1")
    net.propose("n1", b"before")
    net.nodes["n1"].propose_conf_change(ConfChange(CC.ADD_LEARNER, "n4"))
    net.stabilize()
    net.tick()
    assert net.payloads("n4") == [b"before"] and net.nodes["n4"].status().is_learner
    net.nodes["n1"].propose_conf_change(ConfChange(CC.ADD_VOTER, "n4"))
    net.stabilize()
    assert not net.nodes["n4"].status().is_learner
    assert "n4" in net.nodes["n1"].conf_state.voters


def test_membership_remove_follower_shrinks_the_quorum() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.nodes["n1"].propose_conf_change(ConfChange(CC.REMOVE_NODE, "n3"))
    net.stabilize()
    assert "n3" not in net.nodes["n1"].raft.progress
    net.isolate("n3")
    net.propose("n1", b"two of two")
    assert b"two of two" in net.payloads("n2")


def test_membership_refuses_to_remove_the_last_voter() -> None:
    node, storage = single("n1", peers=("n1",))
    node.campaign()
    drain(node, storage)
    with pytest.raises(Exception, match="leaves no voter"):
        node.propose_conf_change(ConfChange(CC.REMOVE_NODE, "n1"))


# ================================================================= ReadIndex (thesis 6.4)
def test_read_index_one_heartbeat_round_serves_a_batch() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.delivered.clear()
    leader = net.nodes["n1"]
    for i in range(5):
        leader.read_index(b"r%d" % i)
    net.stabilize()
    heartbeats = [m for m in net.delivered if m.type is MT.HEARTBEAT]
    assert len(heartbeats) == 4  # two rounds to 2 peers: one for r0, one for r1..r4
    assert [s.context for s in net.read_states["n1"]] == [b"r%d" % i for i in range(5)]
    commit = leader.raft.log.committed
    assert all(s.index == commit for s in net.read_states["n1"])


def test_read_index_released_only_on_quorum_acks_of_that_round() -> None:
    net = Network(["n1", "n2", "n3", "n4", "n5"])
    net.elect("n1")
    for peer in ("n3", "n4", "n5"):
        net.cut("n1", peer)
    net.nodes["n1"].read_index(b"r")
    net.stabilize()
    assert net.read_states["n1"] == [], "only n1+n2 acked: 2 of 5"
    net.cuts.discard(("n1", "n3"))
    net.cuts.discard(("n3", "n1"))
    net.tick(["n1"])
    assert [s.context for s in net.read_states["n1"]] == [b"r"]


def test_read_index_on_single_voter_is_immediate_after_own_commit() -> None:
    node, storage = single("n1", peers=("n1",))
    node.campaign()
    drain(node, storage)
    node.read_index(b"x")
    rd = node.ready()
    assert [(s.index, s.context) for s in rd.read_states] == [(node.raft.log.committed, b"x")]


def test_read_index_forwarded_by_follower_and_answered() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.delivered.clear()
    net.nodes["n3"].read_index(b"f")
    net.stabilize()
    kinds = [m.type for m in net.delivered]
    assert MT.READ_INDEX in kinds and MT.READ_INDEX_RESP in kinds
    assert [s.context for s in net.read_states["n3"]] == [b"f"]


def test_read_index_pending_reads_dropped_on_step_down() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.isolate("n1")
    net.nodes["n1"].read_index(b"lost")
    net.tick(["n1"], ticks=2 * ET)
    assert net.nodes["n1"].raft.role is Role.FOLLOWER
    assert net.nodes["n1"].raft.reads.pending_reads == 0 and net.read_states["n1"] == []


def test_check_quorum_leader_steps_down_when_a_quorum_is_silent() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.isolate("n1")
    for _ in range(2 * ET):
        net.tick(["n1"])
        if net.nodes["n1"].raft.role is not Role.LEADER:
            break
    assert net.nodes["n1"].raft.role is Role.FOLLOWER  # stepped down within 2 election timeouts


def test_membership_learner_acks_never_count_toward_commit() -> None:
    net = Network(["n1", "n2", "n3", "n4"], voters=["n1", "n2", "n3"])
    net.elect("n1")
    net.nodes["n1"].propose_conf_change(ConfChange(CC.ADD_LEARNER, "n4"))
    net.stabilize()
    net.cut("n1", "n2")
    net.cut("n1", "n3")
    net.propose("n1", b"x")
    leader = net.nodes["n1"].raft
    assert leader.progress["n4"].match == leader.log.last_index()
    assert leader.log.committed < leader.log.last_index(), "leader + learner is no quorum"
