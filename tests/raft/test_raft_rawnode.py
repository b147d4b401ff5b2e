"""The RawNode / Ready contract: one outstanding Ready, what each field holds, restarts, batching."""

from __future__ import annotations

import random

import pytest

from rmqc.raft import (
    Config,
    EntryType,
    HardState,
    MemoryStorage,
    MessageType,
    ProgressState,
    RawNode,
    ReadyMisuse,
    Role,
    SoftState,
    decode_conf_change,
)

from .raftnet import Network, drain, msg, single

MT = MessageType


def test_bootstrap_hands_its_membership_entries_and_hard_state_to_persist() -> None:
    storage = MemoryStorage()
    node = RawNode(Config(id="n1"), storage, random.Random(1), ("n1", "n2"))
    rd = node.ready()
    assert rd.hard_state == HardState(1, None, 2) and rd.must_sync
    assert [e.type for e in rd.entries] == [EntryType.CONF_CHANGE] * 2
    assert [decode_conf_change(e.data).node_id for e in rd.entries] == ["n1", "n2"]
    assert rd.committed_entries == ()  # already known to the core: not re-applied
    storage.save(rd.hard_state, rd.entries, rd.snapshot)
    node.advance(rd)
    assert not node.has_ready()


def test_only_one_ready_outstanding() -> None:
    node, _storage = single("n1")
    node.campaign()
    assert node.has_ready()
    rd = node.ready()
    assert not node.has_ready()
    with pytest.raises(ReadyMisuse):
        node.ready()
    with pytest.raises(ReadyMisuse):
        node.advance(type(rd)())
    node.advance(rd)


def test_soft_state_reported_only_on_change() -> None:
    node, storage = single("n1", peers=("n1",))
    node.campaign()
    rd = node.ready()
    assert rd.soft_state == SoftState("n1", Role.LEADER)
    storage.save(rd.hard_state, rd.entries, rd.snapshot)
    node.advance(rd)
    rd = node.ready()
    assert rd.soft_state is None


def test_commit_only_change_does_not_need_sync() -> None:
    node, storage = single("n2")
    node.step(msg(MT.APP, "n1", "n2", term=1, index=3, log_term=1, commit=3))
    drain(node, storage)
    node.step(msg(MT.HEARTBEAT, "n1", "n2", term=1, commit=3))
    rd = node.ready()
    assert not rd.must_sync and rd.persist_messages == ()


def test_leader_appends_leave_before_persistence_follower_acks_after() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.nodes["n1"].propose(b"x")
    rd = net.nodes["n1"].ready()
    assert {m.type for m in rd.messages} == {MT.APP} and rd.persist_messages == ()
    net.storages["n1"].save(rd.hard_state, rd.entries, rd.snapshot)
    net.nodes["n1"].advance(rd)
    n2 = net.nodes["n2"]
    for m in rd.messages:
        if m.to == "n2":
            n2.step(m)
    rd2 = n2.ready()
    assert rd2.messages == () and [m.type for m in rd2.persist_messages] == [MT.APP_RESP]
    n2.advance(rd2)


def test_propose_batch_is_one_append_and_one_broadcast() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    leader = net.nodes["n1"]
    leader.propose_batch([b"a", b"b", b"c"])
    rd = leader.ready()
    assert [e.data for e in rd.entries] == [b"a", b"b", b"c"]
    apps = [m for m in rd.messages if m.type is MT.APP]
    assert len(apps) == 2 and all(len(m.entries) == 3 for m in apps)
    leader.advance(rd)
    leader.propose_batch([])
    assert not leader.has_ready() or leader.ready().entries == ()


def test_restart_resumes_term_vote_commit_and_membership() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.propose("n1", b"a")
    before = net.nodes["n2"].status()
    net.restart("n2")
    after = net.nodes["n2"].status()
    assert (after.term, after.vote, after.commit) == (before.term, before.vote, before.commit)
    assert after.voters == ("n1", "n2", "n3") and after.role is Role.FOLLOWER
    net.stabilize()
    assert net.payloads("n2") == [b"a"]  # replayed from the log after the restart


def test_config_applied_skips_replay() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.propose("n1", b"a")
    applied = net.nodes["n2"].status().applied
    node = RawNode(Config(id="n2", applied=applied), net.storages["n2"], random.Random(0))
    assert not node.has_ready()
    assert node.status().applied == applied


def test_status_reports_progress_and_lease() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.tick(ticks=2)
    s = net.nodes["n1"].status()
    assert s.role is Role.LEADER and s.leader == "n1" and s.lease_valid
    assert set(s.progress) == {"n1", "n2", "n3"}
    assert s.progress["n2"].state is ProgressState.REPLICATE and s.progress["n2"].match == s.last_index
    follower = net.nodes["n2"].status()
    assert follower.progress == {} and not follower.lease_valid and follower.leader == "n1"


def test_the_reads_the_replica_makes_agree_with_status_and_the_core() -> None:
    """RawNode's cheap reads (what the replica and the simulator use instead of `raw.raft`)."""
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.propose("n1", b"a")
    net.tick(ticks=2)
    for node_id, node in net.nodes.items():
        s, core = node.status(), node.raft
        assert (node.role, node.term, node.leader) == (s.role, s.term, s.leader)
        assert (node.committed, node.applied, node.last_index()) == (s.commit, s.applied, s.last_index)
        assert node.entries(1, node.last_index() + 1) == core.log.entries(1, core.log.last_index() + 1)
        assert node.ticks == core.ticks == 2 and node.quiet_ticks() == core.quiet_ticks()
        assert node.commit_blocked_until_tick == 0
        assert node.pending_conf_index == core.pending_conf_index and not node.conf_change_pending()
        lease = node.lease
        assert (lease.start_tick, lease.duration_ticks) == (core.lease.start_tick, core.lease.duration_ticks)
        assert lease.remaining_ticks == core.lease.remaining_ticks(core.ticks)
        assert (lease.remaining_ticks > 0) == (node_id == "n1") == s.lease_valid
        assert node.progress_of("n4") is None
    leader = net.nodes["n1"]
    for peer in ("n1", "n2", "n3"):
        assert leader.progress_of(peer) == leader.status().progress[peer]


def test_same_seed_same_run() -> None:
    def run() -> list[tuple[str, int, str]]:
        net = Network(["n1", "n2", "n3"], seed=7)
        net.drop("n1", "n2", 0.3)
        net.tick_until(lambda: net.leader() is not None, 60)
        for _ in range(30):
            net.tick()
        return [(m.type.name, m.term, m.to) for m in net.delivered]

    assert run() == run()


def test_applied_ahead_of_persisted_commit_moves_commit() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.propose("n1", b"a")
    applied = net.nodes["n2"].status().applied
    hs = net.storages["n2"].initial_state()[0]
    net.storages["n2"].save(HardState(hs.term, hs.vote, 1), [])  # commit persisted late
    node = RawNode(Config(id="n2", applied=applied), net.storages["n2"], random.Random(0))
    assert node.status().commit == applied == node.status().applied


def test_follower_forwards_a_transfer_request_to_the_leader() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.nodes["n2"].transfer_leader("n2")
    net.stabilize()
    assert net.leader() == "n2"


def test_a_ready_not_persisted_comes_again_and_acknowledges_nothing() -> None:
    """A follower whose disk is full: its ack must wait for the write; the leader commits without it."""
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    leader, n2 = net.nodes["n1"], net.nodes["n2"]
    leader.propose(b"x")
    rd = leader.ready()
    net.storages["n1"].save(rd.hard_state, rd.entries, rd.snapshot)
    leader.advance(rd)
    for m in rd.messages:
        if m.to == "n2":
            n2.step(m)
    failed = n2.ready()
    assert [e.data for e in failed.entries] == [b"x"] and [m.type for m in failed.persist_messages] == [MT.APP_RESP]
    n2.not_persisted(failed)  # the disk was full: nothing stored, no ack sent
    with pytest.raises(ReadyMisuse):
        n2.not_persisted(failed)
    again = n2.ready()
    assert again.entries == failed.entries and again.persist_messages == ()
    assert n2.status().applied < n2.status().last_index
    net.storages["n2"].save(again.hard_state, again.entries, again.snapshot)  # space is back
    n2.advance(again)
    assert net.storages["n2"].last_index() == n2.status().last_index


def test_a_ready_not_persisted_hands_out_the_committed_entries_already_durable() -> None:
    """A single node whose disk filled between two writes: the Ready that fails holds the new entry
    and the earlier one, committed since. That one is durable: the app applies it at once (reads and
    answers wait for it); only the new entry comes again."""
    node, storage = single("n1", peers=("n1",))
    node.campaign()
    while node.has_ready():
        rd = node.ready()
        storage.save(rd.hard_state, rd.entries, rd.snapshot)
        node.advance(rd)
    node.propose(b"a")
    rd = node.ready()
    storage.save(rd.hard_state, rd.entries, rd.snapshot)
    node.advance(rd)
    node.propose(b"b")
    failed = node.ready()
    assert [e.data for e in failed.entries] == [b"b"] and [e.data for e in failed.committed_entries][-1:] == [b"a"]
    durable = node.not_persisted(failed)
    assert [e.data for e in durable][-1:] == [b"a"] and node.status().applied == durable[-1].index
    again = node.ready()
    assert again.entries == failed.entries and again.committed_entries == ()


def test_a_leader_that_cannot_persist_applies_what_its_followers_commit() -> None:
    """The leader's disk is full: its own write fails, the two followers save the entry and
    acknowledge it, which commits it (a leader counts itself only once persisted). The entry is
    handed out for apply from memory: the write is answered without waiting for the disk."""
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    leader = net.nodes["n1"]
    leader.propose(b"x")
    failed = leader.ready()
    assert [e.data for e in failed.entries] == [b"x"]
    leader.not_persisted(failed)
    acks = []
    for follower_id in ("n2", "n3"):
        follower = net.nodes[follower_id]
        for m in failed.messages:
            if m.to == follower_id:
                follower.step(m)
        rd = follower.ready()
        net.storages[follower_id].save(rd.hard_state, rd.entries, rd.snapshot)
        acks += [m for m in (*rd.messages, *rd.persist_messages) if m.to == "n1"]
        follower.advance(rd)
    for ack in acks:
        leader.step(ack)
    again = leader.ready()
    assert again.entries == failed.entries  # still not saved here
    applied = leader.not_persisted(again)
    assert [e.data for e in applied] == [b"x"] and leader.status().applied == applied[-1].index
