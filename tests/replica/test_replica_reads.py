"""The read path of the replica on a fake clock: levels, and the lease refused when the core's
tick clock fell behind the monotonic clock (ticks dropped after a stall)."""

from __future__ import annotations

import itertools

import pytest
from replica_harness import Cluster, Harness, harness, leader

from rmqc.fsm import ApplyBrokerId
from rmqc.remoting import RequestCode, ResponseCode, make_request
from rmqc.replica import Answer
from rmqc.replica._reads import READS_ANSWERED_AT_ONCE

_opaques = itertools.count(1)


def read(h: Harness | Cluster, node_id: str, level: str) -> object:
    opaque = next(_opaques)
    request = make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, opaque, {"consistency": level})
    h.replicas[node_id].client_request(request, 1, opaque)
    h.settle()
    return h.answered[opaque]


def leader_of_three(**options: object) -> tuple[Cluster, str]:
    cluster = Cluster(**options)
    cluster.run(3_000)
    leader = cluster.leader()
    assert leader is not None
    return cluster, leader


def test_a_lease_read_is_served_locally_by_the_leader() -> None:
    cluster, leader = leader_of_three(idle_heartbeat_tick=0)  # a heartbeat every tick, idle or not
    reads = cluster.replicas[leader].reads
    before = (reads.lease_reads, reads.index_reads)
    assert read(cluster, leader, "lease").code == ResponseCode.SUCCESS
    assert (reads.lease_reads, reads.index_reads) == (before[0] + 1, before[1])


def test_an_idle_leaders_first_lease_read_renews_the_lease_and_the_next_are_local() -> None:
    cluster, leader = leader_of_three(idle_heartbeat_tick=3)  # idle: its lease lapses between heartbeats
    replica = cluster.replicas[leader]
    assert replica.raw.lease.remaining_ticks == 0
    assert read(cluster, leader, "lease").code == ResponseCode.SUCCESS
    assert (replica.reads.lease_reads, replica.reads.index_reads) == (0, 1)  # one ReadIndex round
    for _ in range(5):  # a read every tick: the leader heartbeats every tick again, the lease holds
        cluster.run(replica.config.tick_ms)
        assert read(cluster, leader, "lease").code == ResponseCode.SUCCESS
    assert (replica.reads.lease_reads, replica.reads.index_reads) == (5, 1)


def test_a_steady_lease_read_load_on_an_idle_configured_leader_stays_on_the_lease() -> None:
    """A read every millisecond for a second: after the first (a ReadIndex round renews the
    idle leader's lease) the leader heartbeats every tick again, and no tick boundary makes a
    read fall back to ReadIndex."""
    cluster, leader = leader_of_three(idle_heartbeat_tick=3)
    replica = cluster.replicas[leader]
    for _ in range(1_000):
        cluster.run(1)
        assert read(cluster, leader, "lease").code == ResponseCode.SUCCESS
    assert (replica.reads.lease_reads, replica.reads.index_reads) == (999, 1)


def test_the_lease_is_refused_after_ticks_were_dropped_in_a_stall() -> None:
    cluster, leader = leader_of_three(idle_heartbeat_tick=0)  # the lease holds while idle
    replica = cluster.replicas[leader]
    cluster.clock.now_ms += 2_000  # stalled: far more than MAX_TICK_BURST ticks are dropped
    replica.advance_time()
    cluster.settle()
    before = (replica.reads.lease_reads, replica.reads.index_reads)
    assert read(cluster, leader, "lease").code == ResponseCode.SUCCESS  # served after a read index round
    assert (replica.reads.lease_reads, replica.reads.index_reads) == (before[0], before[1] + 1)
    cluster.run(2 * 10 * 50)  # one election timeout later the lease is trusted again
    assert read(cluster, leader, "lease").code == ResponseCode.SUCCESS
    assert replica.reads.lease_reads == before[0] + 1


def test_a_stale_read_on_a_follower_is_served_at_once_and_says_how_old_it_is() -> None:
    cluster, leader = leader_of_three()
    follower = next(node_id for node_id in cluster.replicas if node_id != leader)
    answer = read(cluster, follower, "stale")
    assert answer.code == ResponseCode.SUCCESS
    assert int(answer.ext("appliedIndex")) == cluster.replicas[follower].applied_index


def test_a_restarted_node_answers_no_stale_read_before_it_applied_its_own_log() -> None:
    """Its state starts empty: a stale read answered from it would go back in time against what the
    node served before the restart. It waits for the node's own passes (no leader needed)."""
    h = leader()
    done: list[object] = []
    h.replica.enqueue([ApplyBrokerId("C", "g", 1, "10.0.0.1:1", "10.0.0.1:1;1", 0)],
                      lambda results, error: done.append(error))
    h.advance(100)
    assert done == [None]
    committed = h.replica.applied_index
    h.replica.close()  # a graceful stop saves the commit index that rides with the next write
    restarted = harness(storage=h.replica.storage)
    request = make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, 1, {"consistency": "stale"})
    restarted.replica.client_request(request, 1, "stale read")
    assert restarted.answers() == {}  # nothing applied yet
    restarted.settle()
    answer = restarted.answers()["stale read"]
    assert answer.code == ResponseCode.SUCCESS and int(answer.ext("appliedIndex")) >= committed > 0


def test_a_follower_answers_a_large_confirmed_batch_a_slice_per_pass_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 linearizable reads on a follower share one read index; once it is back they are answered
    READS_ANSWERED_AT_ONCE per pass, each pass made due by the one before, in the order they came.
    Before, one pass answered all of them: at 1,000 reads that held the node's loop 200-450 ms."""
    cluster, leader = leader_of_three()
    follower = next(node_id for node_id in cluster.replicas if node_id != leader)
    replica, outbox = cluster.replicas[follower], cluster.outboxes[follower]
    answers_per_pass: list[int] = []
    drive = replica.drive

    def counted_drive() -> bool:
        before = sum(isinstance(action, Answer) for action in outbox)
        more = drive()
        answers_per_pass.append(sum(isinstance(action, Answer) for action in outbox) - before)
        return more

    monkeypatch.setattr(replica, "drive", counted_drive)
    opaques = [next(_opaques) for _ in range(300)]
    for opaque in opaques:
        request = make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, opaque, {"consistency": "linearizable"})
        replica.client_request(request, 1, opaque)
    cluster.settle()
    assert [opaque for opaque in cluster.answered if opaque in set(opaques)] == opaques
    assert all(cluster.answered[opaque].code == ResponseCode.SUCCESS for opaque in opaques)
    assert replica.reads.batches_sent == 1  # one read index for all of them
    assert max(answers_per_pass) == READS_ANSWERED_AT_ONCE
    assert sum(answers_per_pass) == 300
