"""One test per item of notes/raft-pitfalls.md, items 1-17 (elections, replication, persistence,
snapshots). The item number is in each test's name."""

from __future__ import annotations

import random

from rmqc.raft import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    MemoryStorage,
    MessageType,
    ProgressState,
    RawNode,
    Role,
    Snapshot,
    SnapshotMeta,
)
from rmqc.raft._core import CampaignType

from .raftnet import Network, drain, elected, msg, preloaded, single

MT = MessageType
ET = 10


# ------------------------------------------------------------------ 1. PreVote terms
def test_01_prevote_leaves_term_and_vote_alone_and_grant_echoes_request_term() -> None:
    node, storage = single("n3", check_quorum=False)
    drain(node, storage)
    before = (node.raft.term, node.raft.vote)
    node.step(msg(MT.PRE_VOTE, "n2", "n3", term=2, index=3, log_term=1))
    out = drain(node, storage)
    assert (node.raft.term, node.raft.vote) == before == (1, None)
    (resp,) = out
    assert resp.type is MT.PRE_VOTE_RESP and not resp.reject and resp.term == 2


def test_01_higher_term_voter_rejects_lower_prevote_with_its_term() -> None:
    node, storage = single("n3", storage=preloaded([1], term=7))
    node.step(msg(MT.PRE_VOTE, "n2", "n3", term=5, index=9, log_term=4))
    (resp,) = drain(node, storage)
    assert resp.type is MT.PRE_VOTE_RESP and resp.reject and resp.term == 7


def test_01_node_stranded_at_higher_term_with_short_log_does_not_deadlock() -> None:
    net = elected(["n1", "n2", "n3"])
    net.isolate("n3")
    for _ in range(5):  # elections from before PreVote: n3 climbs terms while cut off
        net.nodes["n3"].raft.campaign(CampaignType.ELECTION)
        net.stabilize()
    net.propose("n1", b"n3 misses this")
    net.recover()
    net.tick_until(
        lambda: net.leader() not in (None, "n3")
        and len({n.raft.term for n in net.nodes.values()}) == 1
        and all(n.raft.lead == net.leader() for n in net.nodes.values()),
        4 * ET,
    )
    assert net.nodes["n3"].raft.term >= 6


# ------------------------------------------------------------------ 2. vote counting
def test_02_candidate_does_not_count_late_prevote_grants() -> None:
    node, _storage = single("n1")
    node.raft.campaign(CampaignType.ELECTION)
    term = node.raft.term
    for voter in ("n2", "n3"):
        node.step(msg(MT.PRE_VOTE_RESP, voter, "n1", term=term))
    assert node.raft.role is Role.CANDIDATE
    node.step(msg(MT.VOTE_RESP, "n2", "n1", term=term))
    assert node.raft.role is Role.LEADER


# ------------------------------------------------------------------ 3. unapplied conf changes
def test_03_no_campaign_with_committed_but_unapplied_conf_change() -> None:
    from rmqc.raft import ConfChange, ConfChangeType, encode_conf_change

    storage = MemoryStorage()
    cc = encode_conf_change(ConfChange(ConfChangeType.ADD_VOTER, "n4"))
    storage.save(HardState(1, None, 2), [Entry(1, 1), Entry(2, 1, EntryType.CONF_CHANGE, cc)])
    storage.save_conf_state(ConfState(("n1", "n2", "n3")))
    node = RawNode(single("n1")[0].raft.config, storage, random.Random(3))
    for _ in range(3 * ET):
        node.tick()
    assert node.raft.role is Role.FOLLOWER
    assert not node.raft.msgs and not node.raft.msgs_after_persist  # no (pre-)vote went out
    drain(node, storage)  # apply: n4 becomes a voter
    assert node.conf_state.voters == ("n1", "n2", "n3", "n4")
    for _ in range(2 * ET):
        node.tick()
    assert node.raft.role is Role.PRE_CANDIDATE


# ------------------------------------------------------------------ 4. figure 8
def test_04_previous_term_entry_is_not_committed_by_counting_replicas() -> None:
    ids = ["n1", "n2", "n3", "n4", "n5"]
    storages = {
        "n1": preloaded([1, 2], term=3, voters=ids),
        "n2": preloaded([1, 2], term=3, voters=ids),
        "n3": preloaded([1], term=3, voters=ids),
        "n4": preloaded([1], term=3, voters=ids),
        "n5": preloaded([1, 3], term=3, voters=ids),
    }
    net = Network(ids, storages=storages, check_quorum=False)
    net.ignore(MT.APP)  # we hand-deliver the replication acks below
    net.elect("n1")
    leader = net.nodes["n1"].raft
    assert leader.term == 4 and leader.log.last_index() == 3  # [t1, t2, no-op t4]
    for voter in ("n2", "n3"):
        leader.step(msg(MT.APP_RESP, voter, "n1", term=4, index=2))
    assert leader.log.committed == 0, "i2 (term 2) is on 3 of 5 but must not commit yet"
    for voter in ("n2", "n3"):
        leader.step(msg(MT.APP_RESP, voter, "n1", term=4, index=3))
    assert leader.log.committed == 3


# ------------------------------------------------------------------ 5. follower commit bound
def test_05_follower_commits_only_what_the_message_matched() -> None:
    node, _storage = single("n1", storage=preloaded([1] * 10, term=1))
    node.step(msg(MT.APP, "n2", "n1", term=2, index=9, log_term=1, commit=11))
    assert node.raft.log.committed == 9
    node.step(msg(MT.APP, "n2", "n1", term=2, index=5, log_term=1, commit=5))
    assert node.raft.log.committed == 9, "commit must never go down"


# ------------------------------------------------------------------ 6. truncate only on conflict
def test_06_late_shorter_append_does_not_truncate() -> None:
    node, storage = single("n2", storage=preloaded([1] * 4, term=1))
    b = [Entry(i, 1) for i in range(5, 9)]
    node.step(msg(MT.APP, "n1", "n2", term=1, index=4, log_term=1, entries=tuple(b)))
    drain(node, storage)
    node.step(msg(MT.APP, "n1", "n2", term=1, index=4, log_term=1, entries=tuple(b[:2])))
    (resp,) = drain(node, storage)
    assert node.raft.log.last_index() == 8 and storage.last_index() == 8
    assert resp.type is MT.APP_RESP and not resp.reject and resp.index >= 6


# ------------------------------------------------------------------ 7. stale responses
def test_07_old_term_and_stale_responses_change_nothing() -> None:
    net = elected(["n1", "n2", "n3"], check_quorum=False)
    net.propose("n1", b"a")
    leader = net.nodes["n1"].raft
    pr = leader.progress["n2"]
    match, next_ = pr.match, pr.next
    assert pr.state is ProgressState.REPLICATE
    leader.step(msg(MT.APP_RESP, "n2", "n1", term=leader.term - 1, index=match + 5))
    leader.step(msg(MT.APP_RESP, "n2", "n1", term=leader.term, index=1, reject=True, reject_hint=0))
    leader.step(msg(MT.APP_RESP, "n2", "n1", term=leader.term, index=match - 1))
    assert (pr.match, pr.next) == (match, next_)


# ------------------------------------------------------------------ 8. contiguous batches
def test_08_batches_are_contiguous_and_bounded() -> None:
    rng = random.Random(8)
    net = Network(["n1", "n2", "n3"], seed=8, max_size_per_msg=300, check_quorum=False)
    net.elect("n1")
    net.isolate("n3")
    for _ in range(60):
        net.propose("n1", b"x" * rng.randrange(0, 400))
    net.recover()
    net.delivered.clear()
    net.tick(ticks=3)
    apps = [m for m in net.delivered if m.type is MT.APP and m.entries]
    assert apps
    for m in apps:
        indexes = [e.index for e in m.entries]
        assert indexes == list(range(m.index + 1, m.index + 1 + len(indexes)))
        size = sum(e.size_bytes() for e in m.entries)
        assert size <= 300 or len(m.entries) == 1
    assert net.nodes["n3"].raft.log.last_index() == net.nodes["n1"].raft.log.last_index()


# ------------------------------------------------------------------ 9. persist before send
def test_09_vote_and_term_persist_in_the_same_ready_before_replies() -> None:
    node, _storage = single("n2")
    node.step(msg(MT.VOTE, "n1", "n2", term=2, index=3, log_term=1))
    rd = node.ready()
    assert rd.hard_state == HardState(2, "n1", 3) and rd.must_sync
    assert [m.type for m in rd.persist_messages] == [MT.VOTE_RESP]
    assert not rd.messages
    node.advance(rd)
    candidate, _ = single("n1", pre_vote=False)
    candidate.campaign()
    rd = candidate.ready()
    assert rd.hard_state is not None and rd.hard_state.vote == "n1"
    assert {m.type for m in rd.persist_messages} == {MT.VOTE} and not rd.messages


# ------------------------------------------------------------------ 10. stable before counted
def test_10_single_node_entry_commits_only_in_a_later_ready() -> None:
    node, storage = single("n1", peers=("n1",))
    node.campaign()
    drain(node, storage)
    node.propose(b"x")
    rd = node.ready()
    assert [e.data for e in rd.entries] == [b"x"]
    assert b"x" not in [e.data for e in rd.committed_entries]
    storage.save(rd.hard_state, rd.entries, rd.snapshot)
    node.advance(rd)
    rd = node.ready()
    assert [e.data for e in rd.committed_entries] == [b"x"]


# ------------------------------------------------------------------ 11. restart with lagging commit
def test_11_restarted_leader_reads_cover_everything_exposed_before() -> None:
    node, storage = single("n1", peers=("n1",))
    node.campaign()
    drain(node, storage)
    node.propose(b"x")
    drain(node, storage)
    exposed = node.status().applied
    storage.save(HardState(storage.initial_state()[0].term, "n1", 1), [])  # commit persisted late
    storage.save_conf_state(ConfState(("n1",)))
    again = RawNode(node.raft.config, storage, random.Random(1))
    drain(again, storage)  # replay the log first: no campaign with unapplied conf entries
    again.campaign()
    drain(again, storage)
    again.read_index(b"r")
    states = []
    while again.has_ready():
        rd = again.ready()
        storage.save(rd.hard_state, rd.entries, rd.snapshot)
        states.extend(rd.read_states)
        again.advance(rd)
    assert [s.context for s in states] == [b"r"] and states[0].index > exposed


# ------------------------------------------------------------------ 12. wiped disk
def test_12_node_with_wiped_disk_is_no_voter_until_readded() -> None:
    from rmqc.raft import ConfChange, ConfChangeType

    net = elected(["n1", "n2", "n3"])
    net.propose("n1", b"a")
    net.storages["n3"] = MemoryStorage()  # the disk is gone
    net.restart("n3")
    assert net.nodes["n3"].conf_state == ConfState()
    for _ in range(5 * ET):
        net.nodes["n3"].tick()
    net.tick(ticks=3)
    n3 = net.nodes["n3"].raft
    assert n3.role is Role.FOLLOWER and not n3._promotable()
    # The leader still believes n3 holds what it acked, so n3 is never caught up as it is...
    assert n3.log.last_index() == 0
    # ...until it is removed and re-added (as a learner first), which resets its progress.
    leader = net.nodes["n1"]
    leader.propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, "n3"))
    net.stabilize()
    leader.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, "n3"))
    net.stabilize()
    net.tick(ticks=3)
    assert n3.log.last_index() == leader.raft.log.last_index()
    assert net.nodes["n3"].status().is_learner


# ------------------------------------------------------------------ 13. snapshot restore cases
def _snap(index: int, term: int, voters: tuple[str, ...] = ("n1", "n2", "n3")) -> Snapshot:
    return Snapshot(SnapshotMeta(index, term, ConfState(voters)), b"state")


def test_13_snapshot_matching_term_keeps_suffix_and_moves_commit() -> None:
    node, storage = single("n2", storage=preloaded([1] * 10, term=1))
    node.step(msg(MT.SNAP, "n1", "n2", term=1, snapshot=_snap(8, 1)))
    (resp,) = drain(node, storage)
    assert node.raft.log.last_index() == 10 and node.raft.log.committed == 8
    assert resp.index == 8 and not resp.reject


def test_13_snapshot_conflicting_term_resets_the_log() -> None:
    node, storage = single("n2", storage=preloaded([1] * 6 + [2, 2], term=2))
    node.step(msg(MT.SNAP, "n1", "n2", term=3, snapshot=_snap(8, 3)))
    (resp,) = drain(node, storage)
    assert storage.first_index() == 9 and storage.last_index() == 8 and storage.term(8) == 3
    assert node.raft.log.committed == 8 and node.status().applied == 8 and resp.index == 8


def test_13_stale_snapshot_is_ignored() -> None:
    node, storage = single("n2", storage=preloaded([1] * 10, term=1, commit=9))
    node.step(msg(MT.SNAP, "n1", "n2", term=1, snapshot=_snap(5, 1)))
    (resp,) = drain(node, storage)
    assert storage.snapshot().is_empty and node.raft.log.committed == 9 and resp.index == 9


# ------------------------------------------------------------------ 14. prev below snapshot
def test_14_append_below_compacted_prefix_is_acked_not_rejected() -> None:
    net = elected(["n1", "n2", "n3"], check_quorum=False)
    for i in range(5):
        net.propose("n1", b"e%d" % i)
    n2, s2 = net.nodes["n2"], net.storages["n2"]
    applied = n2.status().applied
    s2.create_snapshot(applied, n2.conf_state, b"")
    s2.compact(applied)
    leader = net.nodes["n1"].raft
    pr = leader.progress["n2"]
    pr.become_probe()
    pr.next = 3  # the leader re-sends from far behind (lost acks)
    pr.match = 2
    net.delivered.clear()
    net.tick(ticks=2)
    replies = [m for m in net.delivered if m.type is MT.APP_RESP and m.frm == "n2"]
    assert replies and not any(m.reject for m in replies)
    assert pr.match == leader.log.last_index()


# ------------------------------------------------------------------ 15. compaction vs in-flight
def test_15_leader_sends_snapshot_once_needed_entries_are_compacted() -> None:
    net = elected(["n1", "n2", "n3"], check_quorum=False)
    net.isolate("n3")
    for i in range(10):
        net.propose("n1", b"e%d" % i)
    leader_storage = net.storages["n1"]
    applied = net.nodes["n1"].status().applied
    leader_storage.create_snapshot(applied, net.nodes["n1"].conf_state, b"snap")
    leader_storage.compact(applied)
    net.recover()
    net.delivered.clear()
    net.tick(ticks=3)
    to_n3 = [m for m in net.delivered if m.to == "n3"]
    assert any(m.type is MT.SNAP for m in to_n3)
    assert all(not (m.type is MT.APP and m.index > 0 and m.log_term == 0) for m in to_n3)
    assert net.snapshots_applied["n3"] == applied
    assert net.nodes["n3"].raft.log.last_index() == net.nodes["n1"].raft.log.last_index()


# ------------------------------------------------------------------ 16. progress around snapshots
def test_16_older_applied_snapshot_still_resumes_replication() -> None:
    net = elected(["n1", "n2", "n3"], check_quorum=False)
    for i in range(12):
        net.propose("n1", b"e%d" % i)
    leader = net.nodes["n1"]
    net.storages["n1"].create_snapshot(10, leader.conf_state, b"")
    net.storages["n1"].compact(10)
    pr = leader.raft.progress["n3"]
    pr.match = 5
    pr.become_snapshot(12)
    leader.step(msg(MT.APP_RESP, "n3", "n1", term=leader.raft.term, index=11))
    assert pr.state is ProgressState.REPLICATE and pr.match == 11


def test_16_failed_snapshot_clears_pending_before_probing() -> None:
    net = elected(["n1", "n2", "n3"], check_quorum=False)
    leader = net.nodes["n1"]
    pr = leader.raft.progress["n3"]
    pr.match = 1
    pr.become_snapshot(40)
    leader.report_snapshot("n3", ok=False)
    assert pr.state is ProgressState.PROBE and pr.pending_snapshot == 0 and pr.next == 2
    assert pr.is_paused()  # waits for a heartbeat reply before probing


# ------------------------------------------------------------------ 17. snapshots carry membership
def test_17_snapshot_restores_membership_including_demotion() -> None:
    node, storage = single("n3")
    snap = Snapshot(SnapshotMeta(20, 2, ConfState(("n1", "n2"), ("n3",))), b"")
    node.step(msg(MT.SNAP, "n1", "n3", term=2, snapshot=snap))
    drain(node, storage)
    assert node.conf_state == ConfState(("n1", "n2"), ("n3",)) and node.status().is_learner
    assert storage.initial_state()[1] == ConfState(("n1", "n2"), ("n3",))


def test_17_snapshot_without_us_is_refused() -> None:
    node, storage = single("n3")
    snap = Snapshot(SnapshotMeta(20, 2, ConfState(("n1", "n2"))), b"")
    node.step(msg(MT.SNAP, "n1", "n3", term=2, snapshot=snap))
    drain(node, storage)
    assert storage.snapshot().is_empty and node.raft.log.committed == 3  # the bootstrap only


def test_16_lost_snapshot_report_does_not_strand_the_follower() -> None:
    from rmqc.raft._core import SNAPSHOT_REPORT_TIMEOUT_ELECTIONS

    net = elected(["n1", "n2", "n3"])
    net.isolate("n3")
    for i in range(5):
        net.propose("n1", b"e%d" % i)
    applied = net.nodes["n1"].status().applied
    net.storages["n1"].create_snapshot(applied, net.nodes["n1"].conf_state, b"snap")
    net.storages["n1"].compact(applied)
    net.recover()
    net.ignore(MT.SNAP)  # the snapshot is lost and nobody calls report_snapshot
    net.tick(ticks=2)
    pr = net.nodes["n1"].raft.progress["n3"]
    assert pr.state is ProgressState.SNAPSHOT
    net.tick(ticks=(SNAPSHOT_REPORT_TIMEOUT_ELECTIONS - 1) * ET)
    assert pr.state is ProgressState.SNAPSHOT and "n3" not in net.snapshots_applied
    net.recover()  # the next snapshot will arrive, once the leader gives up on the lost one
    net.tick_until(lambda: net.snapshots_applied.get("n3") == applied, 2 * ET)


def test_07_ack_beyond_the_leader_log_is_ignored() -> None:
    net = elected(["n1", "n2", "n3"])
    leader = net.nodes["n1"].raft
    pr = leader.progress["n2"]
    before = (pr.match, pr.next)
    leader.step(msg(MT.APP_RESP, "n2", "n1", term=leader.term, index=leader.log.last_index() + 9))
    assert (pr.match, pr.next) == before
