"""Three replicas on one fake clock (tests/replica/replica_harness.Cluster): forwarding, waiters
and forwards that time out, the dead-leader takeover and its successor grace."""

from __future__ import annotations

import pytest
from replica_harness import Cluster

from rmqc.client import heartbeat_ext
from rmqc.fsm import decode_commands
from rmqc.liveness import BrokerKey
from rmqc.remoting import RequestCode, ResponseCode, make_request
from rmqc.replica import COMMIT_TIMEOUT_REMARK, SUCCESSOR_GRACE_MS, Answer
from rmqc.replica._proposals import ENTRY_REQUESTS
from rmqc.replica._reads import ReadPath

REQUEST_TIMEOUT_MS = 300


def apply_id(opaque: int, name: str = "g") -> object:
    return make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, opaque,
                        {"clusterName": "C", "brokerName": name, "appliedBrokerId": 1,
                         "registerCheckCode": f"10.0.0.{opaque}:1;1"})


def elected() -> tuple[Cluster, str, list[str]]:
    cluster = Cluster(request_timeout_ms=REQUEST_TIMEOUT_MS)
    cluster.run(3_000)
    leader = cluster.leader()
    assert leader is not None
    return cluster, leader, [node_id for node_id in cluster.replicas if node_id != leader]


def test_a_follower_forwards_a_write_and_answers_with_the_leaders_answer() -> None:
    cluster, leader, (follower, _) = elected()
    cluster.replicas[follower].client_request(apply_id(7, "fwd"), 1, "client")
    cluster.settle()
    answer = cluster.answered["client"]
    assert answer.code == ResponseCode.SUCCESS and answer.opaque == 7
    assert cluster.replicas[leader].state.group("fwd") is not None


def test_a_forward_to_a_silent_leader_times_out() -> None:
    cluster, leader, (follower, _) = elected()
    cluster.cut.add((leader, follower))  # the forward arrives, its answer never does
    cluster.replicas[follower].client_request(apply_id(8, "lost"), 1, "client")
    cluster.settle()
    assert "client" not in cluster.answered
    cluster.run(REQUEST_TIMEOUT_MS + 10)
    assert cluster.answered["client"].code == ResponseCode.SYSTEM_ERROR
    assert "forwarded to leader" in cluster.answered["client"].remark


def test_a_waiting_request_fails_once_its_commit_did_not_come_in_time() -> None:
    cluster, leader, _ = elected()
    cluster.isolate(leader)  # it keeps leading (CheckQuorum needs an election timeout) but commits nothing
    cluster.replicas[leader].client_request(apply_id(9, "stuck"), 1, "client")
    cluster.run(REQUEST_TIMEOUT_MS - 10)
    assert "client" not in cluster.answered
    cluster.run(20)
    assert cluster.answered["client"].remark == COMMIT_TIMEOUT_REMARK


def test_the_successor_takes_over_at_once_and_the_others_after_the_grace() -> None:
    cluster, leader, survivors = elected()
    successor, other = survivors  # peer order: the first survivor is the designated successor
    cluster.isolate(leader)
    cluster.cut |= {(successor, other), (other, successor)}  # the successor cannot win: no votes
    cluster.replicas[successor].peer_down(leader)
    cluster.replicas[other].peer_down(leader)
    cluster.settle()
    assert cluster.replicas[successor].status().role != "follower"  # campaigning at once
    assert cluster.replicas[other].next_wakeup_ms() <= cluster.clock.now_ms + SUCCESSOR_GRACE_MS
    cluster.run(SUCCESSOR_GRACE_MS - 10)
    assert cluster.replicas[other].status().role == "follower"  # still giving the successor its chance
    cluster.run(20)
    assert cluster.replicas[other].status().role != "follower"  # then it campaigns, long before a timeout


def read(opaque: int, name: str, level: str) -> object:
    return make_request(RequestCode.CONTROLLER_GET_REPLICA_INFO, opaque, {"brokerName": name, "consistency": level})


def test_a_linearizable_read_on_a_follower_sees_a_write_the_leader_just_acknowledged() -> None:
    assert follower_read_after_a_write() == ResponseCode.SUCCESS


def test_the_read_index_hook_is_what_makes_the_follower_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's `stale-read-as-linearizable` mutant replaces this hook: the same read is then
    answered from the follower's stale state (rmqc.replica._io names the hook)."""
    monkeypatch.setattr(ReadPath, "_read_index_reached", lambda self, index: True)
    assert follower_read_after_a_write() != ResponseCode.SUCCESS


def follower_read_after_a_write() -> int:
    """The answer code of a linearizable read on a follower that had not received the write."""
    cluster, leader, (follower, _) = elected()
    cluster.cut.add((leader, follower))  # the follower has not even heard of the write yet
    cluster.replicas[leader].client_request(apply_id(10, "fresh"), 1, "write")
    cluster.settle()
    assert cluster.answered["write"].code == ResponseCode.SUCCESS  # committed with the other follower
    assert cluster.replicas[follower].state.group("fresh") is None
    cluster.replicas[follower].client_request(read(11, "fresh", "stale"), 2, "stale")
    cluster.settle()
    assert cluster.answered["stale"].code != ResponseCode.SUCCESS  # stale: served at once, without it
    cluster.cut.clear()  # nothing is delivered until the next settle
    cluster.replicas[follower].client_request(read(12, "fresh", "linearizable"), 2, "linearizable")
    assert not any(isinstance(action, Answer) and action.token == "linearizable"
                   for action in cluster.outboxes[follower])  # it waits for a read index...
    cluster.settle()
    # ...and for its own applied index to reach it: the write is there when it answers
    return cluster.answered["linearizable"].code


def test_a_heartbeat_heard_by_a_follower_reaches_the_leader_in_a_digest() -> None:
    cluster, leader, (follower, _) = elected()
    for _ in range(3):  # within one digest interval: the digest is due once, at the interval's end
        ext = heartbeat_ext("C", "g", 1, "10.0.0.1:1", epoch=1)
        assert cluster.replicas[follower].heartbeat(make_request(RequestCode.BROKER_HEARTBEAT, 0, ext, oneway=True), 5)
    interval_ms = cluster.replicas[follower].config.digest_interval_ms
    assert cluster.replicas[follower].next_wakeup_ms() <= cluster.clock.now_ms + interval_ms
    cluster.run(interval_ms + 1)
    assert cluster.replicas[leader].liveness.table.live_info(BrokerKey("C", "g", 1)) is not None


def test_requests_waiting_together_share_entries_and_each_gets_its_own_answer() -> None:
    cluster, leader, _followers = elected()
    replica = cluster.replicas[leader]
    before = replica.raw.status().last_index
    count = ENTRY_REQUESTS + 3
    for opaque in range(1, count + 1):  # all before the driver runs: one append
        replica.client_request(apply_id(opaque, f"share-{opaque}"), 1, f"c{opaque}")
    # the same group twice in one entry: applied in order, as separate entries would be
    replica.client_request(apply_id(900, "share-1"), 1, "again")
    cluster.settle()
    assert replica.raw.status().last_index - before == 2, "129 requests in one entry, 3 in the next"
    for opaque in range(1, count + 1):
        answer = cluster.answered[f"c{opaque}"]
        assert answer.code == ResponseCode.SUCCESS and answer.opaque == opaque
        assert replica.state.group(f"share-{opaque}") is not None
    again = cluster.answered["again"]
    assert again.opaque == 900 and again.code != ResponseCode.SUCCESS, "the id was taken by the first"


def test_a_request_timing_out_in_a_shared_entry_leaves_the_other_to_its_commit() -> None:
    cluster, leader, followers = elected()
    for follower in followers:
        cluster.cut |= {(leader, follower)}  # the leader's appends are lost for now
    replica = cluster.replicas[leader]
    replica.client_request(apply_id(1, "early"), 1, "early")
    cluster.clock.now_ms += 200  # no drive meanwhile: both go out in one append, one entry
    replica.client_request(apply_id(2, "late"), 1, "late")
    cluster.settle()
    cluster.run(REQUEST_TIMEOUT_MS - 200 + 10)
    assert cluster.answered["early"].remark == COMMIT_TIMEOUT_REMARK and "late" not in cluster.answered
    cluster.cut.clear()
    cluster.run(200)
    assert cluster.answered["late"].code == ResponseCode.SUCCESS, "answered from its own part of the entry"
    assert cluster.answered["early"].remark == COMMIT_TIMEOUT_REMARK, "answered once"
    assert replica.state.group("early") is not None, "a timed-out write may still commit (as in Java)"


def test_the_leader_applies_its_own_entry_without_decoding_it_and_every_node_ends_equal(monkeypatch) -> None:
    """The followers decode the entry; the leader that proposed it applies the commands it encoded
    (the entry's index and term are those it proposed them at). All three states end the same."""
    import rmqc.replica._driver as driver

    cluster, leader, followers = elected()
    decoded: list[bytes] = []

    def counting_decode(data: bytes) -> list[object]:
        decoded.append(data)
        return decode_commands(data)

    monkeypatch.setattr(driver, "decode_commands", counting_decode)
    for opaque in range(20, 24):
        cluster.replicas[leader].client_request(apply_id(opaque, f"own{opaque}"), 1, f"client{opaque}")
    cluster.settle()
    assert [cluster.answered[f"client{opaque}"].code for opaque in range(20, 24)] == [ResponseCode.SUCCESS] * 4
    cluster.run(200)  # the followers learn the commit from the next append or heartbeat
    assert decoded and len(decoded) == 2 * len(set(decoded))  # each entry decoded by the two followers only
    captures = {node: cluster.replicas[node].state.capture().encode() for node in (leader, *followers)}
    assert len(set(captures.values())) == 1
