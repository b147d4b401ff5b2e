"""Takeovers (a node campaigns at once because its leader's port refuses it, issue 19) and the
lease: a refused connection does not prove a dead leader, so the winner must not commit while the
old leader, alive behind a REJECT-style partition, may still serve lease reads. Also the transfer
rule: a leader that transfers stops serving lease reads before its TimeoutNow leaves."""

from __future__ import annotations

import pytest

from rmqc.raft import CAMPAIGN_TAKEOVER, Message, MessageType, Role
from rmqc.reads import decode_lease_age, encode_lease_age

from .raftnet import Network, elected, msg, preloaded

MT = MessageType
ET = 10
LEASE_TICKS = 4  # a short lease, as the node runs it (lease_ticks=3 of 10 in 50 ms ticks)


def committed_own_term(net: Network, node_id: str) -> bool:
    raft = net.nodes[node_id].raft
    return raft.role is Role.LEADER and raft.own_term_committed


@pytest.mark.parametrize("lease_ticks", [None, LEASE_TICKS])
@pytest.mark.parametrize("ticks_before_cut", [0, 1, 2, 3])
def test_takeover_commits_only_after_the_old_leaders_lease_ran_out(lease_ticks: int | None,
                                                                   ticks_before_cut: int) -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=lease_ticks)
    net.tick(ticks=2)
    old = net.nodes["n1"]
    net.tick(["n1", "n2", "n3"], ticks=ticks_before_cut)
    assert old.lease_read() is not None
    net.isolate("n1")  # the old leader lives on, its links refused: it still serves lease reads
    net.nodes["n2"].take_over("n1")
    net.stabilize()
    assert net.nodes["n2"].raft.role is Role.LEADER, "voters grant a takeover despite stickiness"
    served_after_commit = []
    for tick in range(3 * ET):
        if old.lease_read() is not None and committed_own_term(net, "n2"):
            served_after_commit.append(tick)
        net.tick(["n1", "n2", "n3"])
    assert committed_own_term(net, "n2")
    assert not served_after_commit, f"old leader served lease reads at ticks {served_after_commit}"


def test_takeover_wait_is_the_lease_plus_one_tick_when_the_leader_was_just_heard() -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.tick(ticks=2)
    net.isolate("n1")
    n2 = net.nodes["n2"]
    n2.take_over("n1")
    net.stabilize()
    won_at = n2.raft.ticks
    assert n2.raft.commit_blocked_until_tick == won_at + LEASE_TICKS + 1
    used = net.tick_until(lambda: committed_own_term(net, "n2"), 2 * ET)
    assert used == LEASE_TICKS + 1


def test_takeover_reads_and_writes_wait_too() -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.tick(ticks=2)
    net.isolate("n1")
    n2 = net.nodes["n2"]
    n2.take_over("n1")
    net.stabilize()
    n2.propose(b"w")
    n2.read_index(b"r")
    net.stabilize()
    assert n2.lease_read() is None and net.read_states["n2"] == []
    assert b"w" not in net.payloads("n2") and b"w" not in net.payloads("n3")
    net.tick_until(lambda: b"w" in net.payloads("n3") and net.read_states["n2"] != [], 2 * ET)


def test_takeover_without_recent_leader_contact_does_not_wait() -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.isolate("n1")
    net.tick(["n2", "n3"], ticks=LEASE_TICKS + 1)  # ages LEASE_TICKS + 1: every lease ran out
    net.nodes["n2"].take_over("n1")
    net.stabilize()
    assert committed_own_term(net, "n2")


def test_normal_election_with_a_short_lease_does_not_wait() -> None:
    # Stickiness: voters grant only once they have not heard a leader for election_tick >= lease.
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.isolate("n1")
    net.tick_until(lambda: net.leader() not in (None, "n1") or any(
        n.raft.role is Role.LEADER for i, n in net.nodes.items() if i != "n1"), 4 * ET)
    new = next(i for i, n in net.nodes.items() if i != "n1" and n.raft.role is Role.LEADER)
    assert net.nodes[new].raft.commit_blocked_until_tick == 0 and committed_own_term(net, new)


def test_takeover_is_ignored_while_another_leader_is_known() -> None:
    net = elected(["n1", "n2", "n3"])
    term = net.nodes["n2"].raft.term
    net.nodes["n2"].take_over("n3")  # n3 is not our leader: nothing to take over
    net.stabilize()
    assert net.nodes["n2"].raft.term == term and net.leader() == "n1"


def test_takeover_votes_carry_the_takeover_flag_and_grants_carry_lease_ages() -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.tick(ticks=2)
    net.isolate("n1")
    net.tick(["n2", "n3"], ticks=2)
    net.delivered.clear()
    net.nodes["n2"].take_over("n1")
    net.stabilize()
    votes = [m for m in net.delivered if m.type is MT.VOTE]
    grants = [m for m in net.delivered if m.type is MT.VOTE_RESP and not m.reject]
    assert votes and all(m.context == CAMPAIGN_TAKEOVER for m in votes)
    assert [decode_lease_age(m.context) for m in grants] == [2]


def test_grant_without_a_lease_age_counts_as_just_heard() -> None:
    assert decode_lease_age(b"") == 0 and decode_lease_age(b"\x01") == 0
    assert decode_lease_age(encode_lease_age(7)) == 7
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.isolate("n1")
    net.tick(["n2", "n3"], ticks=LEASE_TICKS + 2)  # long enough not to wait, with ages
    net.hook = lambda m: Message(m.type, m.to, m.frm, term=m.term) if m.type is MT.VOTE_RESP else m
    n2 = net.nodes["n2"]
    n2.take_over("n1")
    net.stabilize()
    assert n2.raft.commit_blocked_until_tick == n2.raft.ticks + LEASE_TICKS + 1


def test_restarted_voter_makes_the_takeover_wait() -> None:
    # It may have acked the old leader's round just before crashing: age 0 after a restart.
    ids = ["n1", "n2", "n3"]
    storages = {i: preloaded([1] * 3, term=1, commit=3, voters=ids) for i in ids}
    net = Network(ids, storages=storages, lease_ticks=LEASE_TICKS)
    assert all(n.raft.lease_age == 0 for n in net.nodes.values())
    net.nodes["n2"].take_over("n1")
    net.stabilize()
    n2 = net.nodes["n2"].raft
    assert n2.role is Role.LEADER and n2.commit_blocked_until_tick == n2.ticks + LEASE_TICKS + 1


def test_takeover_leader_refuses_to_transfer_until_its_wait_is_over() -> None:
    # A TimeoutNow would let the target skip the wait while n1's lease may still run.
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.tick(ticks=2)
    net.isolate("n1")
    n2 = net.nodes["n2"]
    n2.take_over("n1")
    net.stabilize()
    n2.transfer_leader("n3")
    assert n2.raft.lead_transferee is None
    net.tick_until(lambda: committed_own_term(net, "n2"), 2 * ET)
    n2.transfer_leader("n3")
    net.stabilize()
    assert net.leader() == "n3" and committed_own_term(net, "n3"), "a consented transfer needs no wait"


@pytest.mark.parametrize("caught_up", [True, False])
def test_transferring_leader_stops_lease_reads_before_timeout_now_leaves(caught_up: bool) -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS)
    net.tick(ticks=2)
    leader = net.nodes["n1"]
    if not caught_up:
        net.isolate("n2")
        net.propose("n1", b"x")
        net.recover()
    assert leader.lease_read() is not None
    lease_at_timeout_now: list[int | None] = []

    def record(m: Message) -> Message:
        if m.type is MT.TIMEOUT_NOW:
            lease_at_timeout_now.append(leader.lease_read())
        return m

    leader.transfer_leader("n2")
    assert leader.lease_read() is None, "off from the transfer request on"
    net.hook = record
    net.stabilize()
    assert lease_at_timeout_now == [None]
    assert net.leader() == "n2"


def test_lease_ticks_validated() -> None:
    from rmqc.raft import Config

    for bad in (1, 2, ET + 1):
        with pytest.raises(Exception, match="lease_ticks"):
            Config(id="n1", election_tick=ET, lease_drift_ticks=2, lease_ticks=bad)
    assert Config(id="n1", election_tick=ET, lease_drift_ticks=2, lease_ticks=3).lease_bound_ticks == 3
    assert Config(id="n1", election_tick=ET).lease_bound_ticks == ET


def test_old_leader_lease_is_lease_ticks_minus_drift() -> None:
    net = elected(["n1", "n2", "n3"], lease_ticks=LEASE_TICKS, lease_drift_ticks=1)
    net.tick(ticks=1)
    leader = net.nodes["n1"]
    net.isolate("n1")
    served = 0
    while leader.lease_read() is not None:
        leader.tick()
        served += 1
        assert served <= LEASE_TICKS
    assert served == LEASE_TICKS - 1


def test_lease_age_counts_ticks_since_any_leader_was_heard_in_every_role() -> None:
    net = elected(["n1", "n2", "n3"])
    node = net.nodes["n2"]
    net.isolate("n2")
    net.tick(["n2"], ticks=3)
    assert node.raft.lease_age == 3
    node.campaign()  # becoming a (pre-)candidate forgets the leader, not the age
    net.tick(["n2"], ticks=1)
    assert node.raft.lease_age == 4
    node.step(msg(MT.HEARTBEAT, "n1", "n2", term=node.raft.term, commit=0))
    assert node.raft.lease_age == 0


@pytest.mark.parametrize("pre_vote", [True, False])
def test_a_node_cut_off_from_everyone_taking_over_raises_its_term_only_without_pre_vote(pre_vote: bool) -> None:
    """A REJECT-style partition of a follower makes its leader's port refuse it too: it takes over,
    but can reach no one. With PreVote its takeover asks for pre-votes first, so its term stays and
    the healed cluster keeps its leader (a chaos run saw the leader deposed for ~0.9 s on heal)."""
    net = elected(["n1", "n2", "n3"], pre_vote=pre_vote, check_quorum=True)
    term = net.nodes["n1"].raft.term
    net.isolate("n3")
    net.nodes["n3"].take_over("n1")
    net.stabilize()
    assert (net.nodes["n3"].raft.term == term) is pre_vote
    net.recover()
    net.tick(ticks=3 * ET)
    net.stabilize()
    if pre_vote:
        assert net.leader() == "n1" and net.nodes["n1"].raft.term == term, net.describe()


def test_a_takeover_with_pre_vote_still_wins_when_the_others_can_vote() -> None:
    net = elected(["n1", "n2", "n3"], pre_vote=True, check_quorum=True)
    term = net.nodes["n1"].raft.term
    net.isolate("n1")
    net.nodes["n2"].take_over("n1")
    net.stabilize()
    assert net.nodes["n2"].raft.role is Role.LEADER and net.nodes["n2"].raft.term == term + 1
