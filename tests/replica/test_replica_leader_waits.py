"""A leader-only request that reaches a member while no leader serves waits for one
(replica/_forwarding.LeaderWaits) instead of being refused at once: then it is forwarded, or
decided where it waited; refused 2007 only when no leader came within the wait."""

from __future__ import annotations

import pytest
from replica_harness import Cluster, harness

import rmqc.replica._forwarding as forwarding
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, make_request
from rmqc.replica import Answer

REQUEST_TIMEOUT_MS = 5_000
WAIT_MS = 10 * 50 // 2  # half the election timeout (election_tick 10, tick_ms 50)


def apply_id(opaque: int, name: str) -> RemotingCommand:
    return make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, opaque,
                        {"clusterName": "C", "brokerName": name, "appliedBrokerId": 1,
                         "registerCheckCode": f"10.0.0.{opaque}:1;1"})


def leaderless() -> tuple[Cluster, str]:
    """Three replicas that elected a leader, then lost every link: each follower's election timer
    ran out, so no member knows a leader. Returns a follower of the lost leader."""
    cluster = Cluster(request_timeout_ms=REQUEST_TIMEOUT_MS)
    cluster.run(3_000)
    leader = cluster.leader()
    assert leader is not None
    follower = next(node_id for node_id in cluster.replicas if node_id != leader)
    cluster.cut = {(a, b) for a in cluster.replicas for b in cluster.replicas if a != b}
    cluster.run(2_500)
    assert cluster.replicas[follower].leader_id is None
    return cluster, follower


def test_a_write_to_a_member_without_a_leader_is_forwarded_once_one_is_elected() -> None:
    cluster, follower = leaderless()
    cluster.replicas[follower].client_request(apply_id(7, "waits"), 1, "client")
    cluster.run(100)
    assert "client" not in cluster.answered  # held, not refused
    assert cluster.replicas[follower].counters()["requests_waiting_for_leader"] == 1
    cluster.cut.clear()
    cluster.run(WAIT_MS - 100)
    answer = cluster.answered["client"]
    assert (answer.code, answer.opaque) == (ResponseCode.SUCCESS, 7), answer.remark
    leader = cluster.leader()
    assert leader is not None and cluster.replicas[leader].state.group("waits") is not None
    assert cluster.replicas[follower].counters()["requests_waiting_for_leader"] == 0


def test_a_write_waits_for_a_leader_at_most_the_wait_then_is_refused_2007() -> None:
    cluster, follower = leaderless()
    cluster.replicas[follower].client_request(apply_id(8, "cut-off"), 1, "client")
    cluster.run(WAIT_MS - 10)
    assert "client" not in cluster.answered
    cluster.run(20)
    answer = cluster.answered["client"]
    assert answer.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert f"no leader known for {WAIT_MS} ms" in (answer.remark or "")


def test_the_wait_never_outlasts_the_request_timeout() -> None:
    h = harness(peers="n0-127.0.0.1:1;n1-127.0.0.1:2", request_timeout_ms=200)  # n1 never answers
    h.replica.client_request(apply_id(9, "short"), 1, "client")
    h.advance(190)
    assert h.answers() == {}
    h.advance(20)
    assert h.answers()["client"].code == ResponseCode.CONTROLLER_NOT_LEADER


def test_an_elected_leader_holds_writes_until_its_first_commit_then_decides_them() -> None:
    h = harness()  # a single voter that has not campaigned yet
    assert not h.replica.serving_as_leader
    h.replica.client_request(apply_id(10, "early"), 1, "client")
    assert h.answers() == {}
    h.advance(100)
    assert h.replica.serving_as_leader
    assert h.answers()["client"].code == ResponseCode.SUCCESS
    assert h.replica.state.group("early") is not None


def test_without_forwarding_a_follower_refuses_at_once_as_java_does() -> None:
    cluster = Cluster(request_timeout_ms=REQUEST_TIMEOUT_MS, forward_writes=False)
    cluster.run(3_000)
    follower = next(node_id for node_id, replica in cluster.replicas.items() if not replica.serving_as_leader)
    cluster.replicas[follower].client_request(apply_id(11, "java"), 1, "client")
    cluster.settle()
    assert cluster.answered["client"].code == ResponseCode.CONTROLLER_NOT_LEADER


def test_a_forward_reaching_a_member_that_lost_its_leadership_is_refused_not_held() -> None:
    cluster, follower = leaderless()
    sender = next(node_id for node_id in cluster.replicas if node_id != follower)
    cluster.replicas[follower].forwarded_request(sender, apply_id(12, "fwd"), (sender, 1))
    # a forward is never forwarded again, so it cannot wait for a leader elsewhere
    (answer,) = [action for action in cluster.outboxes[follower] if isinstance(action, Answer)]
    assert answer.token == (sender, 1) and answer.response.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert cluster.replicas[follower].counters()["requests_waiting_for_leader"] == 0


def test_past_the_bound_a_request_is_answered_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forwarding, "MAX_WAITING_FOR_LEADER", 2)
    cluster, follower = leaderless()
    for opaque in (13, 14, 15):
        cluster.replicas[follower].client_request(apply_id(opaque, f"g{opaque}"), 1, f"client{opaque}")
    cluster.settle()
    assert set(cluster.answered) == {"client15"}
    assert cluster.answered["client15"].code == ResponseCode.SYSTEM_BUSY


def test_stopping_answers_every_held_request() -> None:
    cluster, follower = leaderless()
    cluster.replicas[follower].client_request(apply_id(16, "stop"), 1, "client")
    cluster.replicas[follower].stop("shutting down")
    cluster.settle()
    answer = cluster.answered["client"]
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "shutting down")
