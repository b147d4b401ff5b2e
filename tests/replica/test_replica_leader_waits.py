"""A leader-only request that reaches the elected leader before it serves (its first commit; after
a takeover, the old leader's lease) waits for it (replica/_forwarding.LeaderWaits) instead of being
refused 2007, whether it came from a client or forwarded by a follower; refused 2007 when the node
does not serve within the wait. A member that knows no leader refuses at once, as Java does."""

from __future__ import annotations

import pytest
from replica_harness import Cluster

import rmqc.replica._forwarding as forwarding
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, make_request
from rmqc.replica import Answer

REQUEST_TIMEOUT_MS = 5_000
WAIT_MS = 10 * 50  # the election timeout (election_tick 10, tick_ms 50)


def apply_id(opaque: int, name: str) -> RemotingCommand:
    return make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, opaque,
                        {"clusterName": "C", "brokerName": name, "appliedBrokerId": 1,
                         "registerCheckCode": f"10.0.0.{opaque}:1;1"})


def elected(request_timeout_ms: int = REQUEST_TIMEOUT_MS) -> tuple[Cluster, str, list[str]]:
    cluster = Cluster(request_timeout_ms=request_timeout_ms)
    cluster.run(3_000)
    leader = cluster.leader()
    assert leader is not None
    return cluster, leader, [node_id for node_id in cluster.replicas if node_id != leader]


def taken_over(request_timeout_ms: int = REQUEST_TIMEOUT_MS) -> tuple[Cluster, str, str]:
    """The leader's port refused the others (its process died): the first survivor took over at
    once, and commits nothing until the old leader's lease has run out (150-200 ms). Returns the
    new leader, elected and not serving, and the other survivor, which names it."""
    cluster, leader, (successor, other) = elected(request_timeout_ms)
    cluster.isolate(leader)
    for survivor in (successor, other):
        cluster.replicas[survivor].peer_down(leader)
    cluster.settle()
    assert cluster.replicas[successor].leader_id == successor and not cluster.replicas[successor].serving_as_leader
    assert cluster.replicas[other].leader_id == successor
    return cluster, successor, other


def test_the_new_leader_holds_writes_until_the_old_leases_end_then_decides_them() -> None:
    cluster, successor, other = taken_over()
    cluster.replicas[successor].client_request(apply_id(7, "direct"), 1, "direct")
    cluster.replicas[other].client_request(apply_id(8, "forwarded"), 1, "forwarded")
    cluster.settle()
    assert cluster.answered == {}  # held, not refused 2007
    assert cluster.replicas[successor].counters()["requests_held_until_serving"] == 2
    cluster.run(WAIT_MS - 10)
    assert cluster.replicas[successor].serving_as_leader
    for token, opaque in (("direct", 7), ("forwarded", 8)):
        answer = cluster.answered[token]
        assert (answer.code, answer.opaque) == (ResponseCode.SUCCESS, opaque), answer.remark
    assert cluster.replicas[successor].state.group("forwarded") is not None
    assert cluster.replicas[successor].counters()["requests_held_until_serving"] == 0


def test_a_leader_that_does_not_serve_within_the_wait_refuses_2007() -> None:
    # the wait is also bounded by the request timeout: here 100 ms, less than the lease wait
    cluster, successor, _ = taken_over(request_timeout_ms=100)
    cluster.replicas[successor].client_request(apply_id(11, "short"), 1, "client")
    cluster.run(90)
    assert "client" not in cluster.answered
    cluster.run(20)
    answer = cluster.answered["client"]
    assert answer.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert "elected, and not serving within 100 ms" in (answer.remark or "")
    assert not cluster.replicas[successor].serving_as_leader  # the lease wait was not over yet


def test_a_member_that_knows_no_leader_refuses_at_once() -> None:
    cluster, _, (follower, _) = elected()
    cluster.cut = {(a, b) for a in cluster.replicas for b in cluster.replicas if a != b}
    cluster.run(2_500)
    assert cluster.replicas[follower].leader_id is None
    cluster.replicas[follower].client_request(apply_id(12, "cut-off"), 1, "client")
    cluster.settle()
    assert cluster.answered["client"].code == ResponseCode.CONTROLLER_NOT_LEADER  # the client tries another


def test_without_forwarding_a_follower_refuses_at_once_as_java_does() -> None:
    cluster = Cluster(request_timeout_ms=REQUEST_TIMEOUT_MS, forward_writes=False)
    cluster.run(3_000)
    follower = next(node_id for node_id, replica in cluster.replicas.items() if not replica.serving_as_leader)
    cluster.replicas[follower].client_request(apply_id(13, "java"), 1, "client")
    cluster.settle()
    assert cluster.answered["client"].code == ResponseCode.CONTROLLER_NOT_LEADER


def test_a_forward_reaching_a_member_that_is_not_the_leader_is_refused_not_held() -> None:
    cluster, leader, (follower, _) = elected()
    cluster.replicas[follower].forwarded_request(leader, apply_id(14, "fwd"), (leader, 1))
    # a forward is never forwarded again
    (answer,) = [action for action in cluster.outboxes[follower] if isinstance(action, Answer)]
    assert answer.token == (leader, 1) and answer.response.code == ResponseCode.CONTROLLER_NOT_LEADER


def test_past_the_bound_a_request_is_answered_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forwarding, "MAX_WAITING_FOR_LEADER", 2)
    cluster, successor, _ = taken_over()
    for opaque in (15, 16, 17):
        cluster.replicas[successor].client_request(apply_id(opaque, f"g{opaque}"), 1, f"client{opaque}")
    cluster.settle()
    assert set(cluster.answered) == {"client17"}
    assert cluster.answered["client17"].code == ResponseCode.SYSTEM_BUSY


def test_stopping_answers_every_held_request() -> None:
    cluster, successor, _ = taken_over()
    cluster.replicas[successor].client_request(apply_id(18, "stop"), 1, "client")
    cluster.replicas[successor].stop("shutting down")
    cluster.settle()
    answer = cluster.answered["client"]
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "shutting down")
