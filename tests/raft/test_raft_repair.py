"""A node whose storage lost what it had acknowledged (found damaged, repaired: rmqc.storage) must
not vote or campaign with that state, and rejoins once its log holds the commit index of a leader
that forgot the acks it had counted for it (RaftCore, "repair")."""

from __future__ import annotations

import random

import pytest

from rmqc.raft import Config, HardState, MemoryStorage, MessageType, RawNode, Role
from rmqc.raft._types import ConfState, Snapshot, SnapshotMeta

from .raftnet import Network, elected, msg


def damaged_copy(storage: MemoryStorage, keep_last: int) -> MemoryStorage:
    """What survives of `storage` when its log after `keep_last` is lost, with the hard state
    saved with that prefix (its term, no vote, commit within it), and the membership."""
    hard_state, conf_state = storage.initial_state()
    survivor = MemoryStorage()
    survivor.save(HardState(term=storage.term(keep_last), vote=None, commit=min(hard_state.commit, keep_last)),
                  storage.entries(1, keep_last + 1))
    survivor.save_conf_state(conf_state)
    return survivor


def restart_damaged(net: Network, node_id: str, keep_last: int, *, repair: bool) -> None:
    storage = damaged_copy(net.storages[node_id], keep_last)
    if repair:
        storage.begin_repair(f"test: log lost after {keep_last}")
    net.storages[node_id] = storage
    restart_as_the_replica_does(net, node_id)


def restart_as_the_replica_does(net: Network, node_id: str) -> None:
    """A restart from storage that reads the repair record, as rmqc.replica does; the app's end
    of a repair (storage.end_repair) is done by the test's Ready loop below."""
    storage = net.storages[node_id]
    net.queue = type(net.queue)(m for m in net.queue if m.to != node_id)
    net.applied[node_id] = []
    config = Config(id=node_id, repairing=storage.repair_reason() is not None, **net.config)  # type: ignore[arg-type]
    net.nodes[node_id] = RawNode(config, storage, random.Random(f"{net.seed}/{node_id}/{storage.last_index()}"))


def record_ended_repairs(net: Network) -> None:
    for node_id, node in net.nodes.items():
        if node.take_ended_repair() is not None:
            net.storages[node_id].end_repair()


def committed_with_n3_only(seed: int = 0) -> tuple[Network, int]:
    """n1 leads; n2 is cut off while n1 commits entries 'w0'..'w4' with n3's acks alone. Returns
    the network and the last of those committed indexes."""
    net = elected(["n1", "n2", "n3"], seed=seed)
    net.propose("n1", b"before")
    net.cut("n1", "n2")
    for number in range(5):
        net.propose("n1", b"w%d" % number)
    committed = net.node("n1").raft.log.committed
    assert committed > net.node("n2").raft.log.last_index(), net.describe()
    return net, committed


def lost_after_leader_dies(net: Network, keep_last: int, *, repair: bool) -> Network:
    """n3 loses its log after `keep_last` and restarts; n1 dies (cut off for good); n2 and n3
    tick for many election timeouts."""
    restart_damaged(net, "n3", keep_last, repair=repair)
    net.recover()
    net.isolate("n1")
    net.unstick()
    for _ in range(60):
        net.tick(["n2", "n3"])
    return net


def test_without_the_fence_a_damaged_node_elects_a_leader_that_lacks_committed_entries() -> None:
    """The bug the fence prevents: n3's vote, cast with the log it lost, elects n2, and the
    entries committed with n3's acks are gone from the group."""
    net, committed = committed_with_n3_only()
    keep_last = net.node("n2").raft.log.last_index()
    lost_after_leader_dies(net, keep_last, repair=False)
    leader = net.leader()
    assert leader in ("n2", "n3"), net.describe()
    assert net.node(leader).raft.log.committed > 0
    assert b"w0" not in [entry.data for entry in net.storages[leader].entries(1, net.storages[leader].last_index() + 1)]
    assert committed > keep_last


def test_a_repairing_node_never_votes_or_campaigns_so_no_leader_lacks_what_it_lost() -> None:
    net, committed = committed_with_n3_only()
    keep_last = net.node("n2").raft.log.last_index()
    before_damage = len(net.delivered)
    lost_after_leader_dies(net, keep_last, repair=True)
    since = net.delivered[before_damage:]
    # n2 alone is no quorum: unavailable, not wrong (n1, cut off and not ticked, still thinks it leads)
    assert Role.LEADER not in (net.node("n2").raft.role, net.node("n3").raft.role), net.describe()
    n3 = net.node("n3").raft
    assert n3.role is Role.FOLLOWER and n3.repair is not None and n3.repair.votes_refused > 0
    assert not [m for m in since if m.frm == "n3" and m.type in (MessageType.VOTE, MessageType.PRE_VOTE)]
    grants = [m for m in since if m.frm == "n3" and not m.reject
              and m.type in (MessageType.VOTE_RESP, MessageType.PRE_VOTE_RESP)]
    assert grants == []
    # n1 comes back: it leads again, n3 catches up past `committed` and votes again
    net.recover()
    net.tick_until(lambda: net.node("n3").raft.repair is None, 200)
    record_ended_repairs(net)
    assert net.leader() is not None
    assert net.storages["n3"].last_index() >= committed and net.storages["n3"].repair_reason() is None
    entries = net.storages["n3"].entries(1, committed + 1)
    assert [e.data for e in entries if e.data.startswith(b"w")] == [b"w%d" % n for n in range(5)]


def test_the_leader_forgets_the_acks_it_counted_and_resends_what_was_lost() -> None:
    """Without the REPAIR message the leader's match for n3 stays above what n3 holds, and it
    never sends the lost entries again (rejections at or below match are stale to it)."""
    net, committed = committed_with_n3_only()
    net.recover()
    net.stabilize()
    match_before = net.node("n1").raft.progress["n3"].match
    keep_last = 2
    restart_damaged(net, "n3", keep_last, repair=True)
    net.tick(ticks=2)  # the term probe, then a heartbeat: n3 answers with what it holds
    repairs = [m for m in net.delivered if m.type is MessageType.REPAIR]
    assert repairs and repairs[0].index == keep_last
    acks = [m for m in net.delivered if m.type is MessageType.REPAIR_ACK]
    assert acks and acks[0].commit >= committed
    assert match_before >= committed
    net.tick_until(lambda: net.node("n3").raft.repair is None, 50)
    assert net.node("n1").raft.progress["n3"].match >= committed
    assert net.storages["n3"].last_index() >= committed


def test_a_repair_interrupted_by_a_restart_goes_on() -> None:
    net, _committed = committed_with_n3_only()
    net.recover()
    net.stabilize()
    restart_damaged(net, "n3", 2, repair=True)
    net.isolate("n3")
    net.tick(ticks=3)
    # a crash before any leader answered: the storage still records the repair, and the node
    # restarted from it repairs on
    restart_as_the_replica_does(net, "n3")
    assert net.storages["n3"].repair_reason() is not None and net.node("n3").raft.repair is not None
    net.recover()
    net.tick_until(lambda: net.node("n3").raft.repair is None, 100)
    record_ended_repairs(net)
    restart_as_the_replica_does(net, "n3")
    assert net.node("n3").raft.repair is None, "an ended repair stays ended"


@pytest.mark.parametrize("seed", range(20))
def test_repair_under_random_leader_changes_keeps_every_committed_entry(seed: int) -> None:
    """Random kills of the leader while n3 repairs: whoever leads has every entry committed
    before the damage, and n3 ends its repair holding them."""
    rng = random.Random(seed)
    net, committed = committed_with_n3_only(seed)
    before = [e.data for e in net.storages["n1"].entries(1, committed + 1)]
    restart_damaged(net, "n3", rng.randint(1, committed), repair=True)
    net.recover()
    for _round in range(6):
        leader = net.leader()
        if leader is not None and rng.random() < 0.5:
            net.isolate(leader)
        net.unstick()
        for _ in range(rng.randint(5, 30)):
            net.tick()
        net.recover()
        leader = net.leader()
        if leader is not None:
            have = [e.data for e in net.storages[leader].entries(1, committed + 1)]
            assert have == before, (seed, net.describe())
    net.tick_until(lambda: net.node("n3").raft.repair is None, 400)
    assert [e.data for e in net.storages["n3"].entries(1, committed + 1)] == before



def test_a_stale_leader_cannot_end_a_repair_or_commit_with_the_repairing_nodes_acks() -> None:
    """n1 leads term 2 and is cut off; n2 wins term 3 with n3 and commits e0..e2 with n3's acks.
    n3's storage loses everything after term 2 (its term goes back to 2) and it repairs; then only
    n1 and n3 can talk. n1 never heard of term 3: n3 must neither help it commit nor end its repair
    with n1's commit index, since e0..e2 are intact on n2 and n3 can no longer vote them away.
    (Found by the simulator's corruption model; the fix: a repairing node first takes the highest
    term a majority of the voters reports, so n1's term-2 appends are refused as stale.)"""
    net = elected(["n1", "n2", "n3"])
    net.propose("n1", b"before")
    old_term, keep_last = net.node("n1").raft.term, net.storages["n3"].last_index()
    net.isolate("n1")
    net.unstick()
    net.elect("n2")
    for number in range(3):
        net.propose("n2", b"e%d" % number)
    committed_by_n2 = net.storages["n2"].entries(1, net.node("n2").raft.log.committed + 1)
    restart_damaged(net, "n3", keep_last, repair=True)
    assert net.node("n3").raft.term == old_term
    net.recover()
    net.isolate("n2")
    for _ in range(5):
        net.tick(["n1", "n3"])
        record_ended_repairs(net)
    net.propose("n1", b"stale")
    for _ in range(5):
        net.tick(["n1", "n3"])
    assert net.node("n3").raft.repair is not None, "ended with a stale leader's commit index"
    committed_by_n1 = net.storages["n1"].entries(1, net.node("n1").raft.log.committed + 1)
    common = min(len(committed_by_n1), len(committed_by_n2))
    assert committed_by_n1[:common] == committed_by_n2[:common], "two entries committed at one index"
    # n2 reachable again: n3 learns term 3 from a majority, repairs from n2, and holds e0..e2
    net.recover()
    net.tick_until(lambda: net.node("n3").raft.repair is None, 200)
    held = [e.data for e in net.storages["n3"].entries(1, net.storages["n3"].last_index() + 1)]
    assert [b"e0", b"e1", b"e2"] == [d for d in held if d.startswith(b"e")]


def test_a_repairing_node_answers_no_append_before_a_majority_told_it_their_terms() -> None:
    net = elected(["n1", "n2", "n3"])
    net.propose("n1", b"x")
    restart_damaged(net, "n3", 1, repair=True)
    net.isolate("n3")
    start = len(net.delivered)
    net.tick(ticks=3)
    net.recover()
    net.cut("n3", "n2")  # only n1 answers the probe: one voter of three is no majority
    net.tick(ticks=3)
    since = net.delivered[start:]
    assert not [m for m in since if m.frm == "n3" and m.type in (MessageType.APP_RESP, MessageType.HEARTBEAT_RESP,
                                                                  MessageType.REPAIR)]
    assert net.node("n3").raft.repair is not None and net.node("n3").raft.repair.fence_term is None
    net.recover()
    net.tick_until(lambda: net.node("n3").raft.repair is None, 50)


def test_a_repair_ends_only_once_the_leaders_snapshot_is_saved() -> None:
    """A node that gave its log up gets the leader's snapshot and then its REPAIR_ACK (reordered on
    the way): the repair must not end (and be recorded over) before that snapshot is durable, else
    a crash in between restarts it empty and voting. Found by the simulator's corruption profile
    (seed 5219): the core counted the unsaved snapshot as its stable log."""
    storage = MemoryStorage()
    storage.begin_repair("test: the log was given up")
    node = RawNode(Config(id="n3", repairing=True, repair_peers=("n1", "n2", "n3")), storage, random.Random(3))
    for voter in ("n1", "n2"):  # the term probe answered by a majority: the node acts on appends
        node.step(msg(MessageType.REPAIR_PROBE_RESP, voter, "n3", 3))
    conf = ConfState(voters=("n1", "n2", "n3"))
    snapshot = Snapshot(SnapshotMeta(20, 3, conf), b"state at 20")
    for message in (msg(MessageType.APP, "n1", "n3", 3, index=20, log_term=3, commit=20),
                    msg(MessageType.SNAP, "n1", "n3", 3, snapshot=snapshot),
                    msg(MessageType.REPAIR_ACK, "n1", "n3", 3, commit=20, log_term=3)):
        node.step(message)
    assert node.raft.repair is not None and node.take_ended_repair() is None
    rd = node.ready()
    assert rd.snapshot is not None and rd.snapshot.meta.index == 20
    assert node.take_ended_repair() is None, "ended before the snapshot was saved"
    storage.save(rd.hard_state, rd.entries, rd.snapshot)
    node.advance(rd)
    assert node.raft.repair is None and node.take_ended_repair() is not None
