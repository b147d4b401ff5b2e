"""Membership requests (RMQC_MEMBERS_*, replica/_membership.py) on replicas on one fake clock: a
node joins with an empty storage, catches up, is promoted; every refusal of the contract; the
leader removing itself; the address book the shell hears of (MembersChanged) and that survives a
restart."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from replica_harness import Cluster, harness, leader

from rmqc.raft import MemoryStorage
from rmqc.remoting import (
    RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_LIST,
    RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    make_request,
)
from rmqc.replica import MembersChanged, Replica
from rmqc.replica._membership import CATCH_UP_ENTRIES
from rmqc.storage import LmdbStorage
from rmqc.testing._simreplica import NodeKnobs, sim_node_config

JOINER = "n3"
JOINER_ADDRESS = "127.0.0.1:4"
_opaque = iter(range(1, 1_000_000))


def elected() -> tuple[Cluster, str]:
    cluster = Cluster(request_timeout_ms=1_000)
    cluster.run(3_000)
    leader = cluster.leader()
    assert leader is not None
    return cluster, leader


def ask(cluster: Cluster, node_id: str, code: int, **ext: str) -> RemotingCommand:
    """Send one request to `node_id` and let the cluster run until it is answered (bounded)."""
    token = f"req{next(_opaque)}"
    cluster.replicas[node_id].client_request(make_request(code, 1, ext), 1, token)
    for _ in range(100):
        cluster.settle()
        if token in cluster.answered:
            answer: RemotingCommand = cluster.answered.pop(token)
            return answer
        cluster.run(20)
    raise AssertionError(f"no answer to {code} {ext} from {node_id} within 2 s")


def body(answer: RemotingCommand) -> Any:
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return orjson.loads(answer.body or b"null")


def refusal(answer: RemotingCommand) -> str:
    assert answer.code == ResponseCode.SYSTEM_ERROR, (answer.code, answer.remark)
    return answer.remark or ""


def start_joiner(cluster: Cluster, storage: MemoryStorage | None = None) -> Replica:
    """A node started with `join` and (by default) an empty storage, linked to the cluster."""
    config = sim_node_config(JOINER, {JOINER: JOINER_ADDRESS}, NodeKnobs(), join_addresses=["127.0.0.1:1"])
    outbox: list[Any] = []
    cluster.outboxes[JOINER] = outbox
    replica = Replica(config, storage or MemoryStorage(), cluster.clock, random.Random(9), outbox)
    cluster.replicas[JOINER] = replica
    return replica


def members_changed(cluster: Cluster, node_id: str) -> list[MembersChanged]:
    return [action for action in cluster.outboxes[node_id] if isinstance(action, MembersChanged)]


def add_and_promote_joiner(cluster: Cluster, leader: str) -> Replica:
    joiner = start_joiner(cluster)
    added = body(ask(cluster, leader, RMQC_MEMBERS_ADD, id=JOINER, address=JOINER_ADDRESS))
    assert added["change"] == "add_learner" and added["learners"] == [JOINER] and added["address"] == JOINER_ADDRESS
    cluster.run(500)
    promoted = body(ask(cluster, leader, RMQC_MEMBERS_PROMOTE, id=JOINER))
    assert promoted["voters"] == ["n0", "n1", "n2", JOINER] and promoted["learners"] == []
    return joiner


def test_a_joining_node_starts_with_no_membership_and_never_campaigns() -> None:
    cluster, _leader = elected()
    joiner = start_joiner(cluster)
    cluster.isolate(JOINER)
    announced = members_changed(cluster, JOINER)
    cluster.run(3_000)
    assert announced and announced[0].voters == () and announced[0].learners == ()
    assert joiner.raw.term == 0 and joiner.leader_id is None


def test_add_then_promote_a_joining_node_and_every_node_learns_its_address() -> None:
    cluster, leader = elected()
    joiner = add_and_promote_joiner(cluster, leader)
    cluster.run(300)
    for node_id, replica in cluster.replicas.items():
        assert replica.status().members[JOINER] == JOINER_ADDRESS, node_id
        assert replica.conf_state.voters == ("n0", "n1", "n2", JOINER), node_id
    assert joiner.status().members == {"n0": "127.0.0.1:1", "n1": "127.0.0.1:2", "n2": "127.0.0.1:3",
                                       JOINER: JOINER_ADDRESS}
    rows = body(ask(cluster, leader, RMQC_MEMBERS_LIST))
    assert [row["id"] for row in rows] == ["n0", "n1", "n2", JOINER]
    assert all(row["role"] == "voter" and row["lag"] == 0 for row in rows)
    assert [row["isLeader"] for row in rows].count(True) == 1


def test_idempotent_requests_answer_zero_and_change_nothing() -> None:
    cluster, leader = elected()
    add_and_promote_joiner(cluster, leader)
    index = cluster.replicas[leader].raw.last_index()
    again = body(ask(cluster, leader, RMQC_MEMBERS_ADD, id=JOINER, address=JOINER_ADDRESS))
    assert again["change"] == "add_learner" and JOINER in again["voters"]
    assert body(ask(cluster, leader, RMQC_MEMBERS_PROMOTE, id=JOINER))["change"] == "promote"
    assert cluster.replicas[leader].raw.last_index() == index, "nothing proposed"


def test_a_follower_names_the_leader_and_its_address() -> None:
    cluster, leader = elected()
    follower = next(node_id for node_id in cluster.replicas if node_id != leader)
    answer = ask(cluster, follower, RMQC_MEMBERS_LIST)
    assert answer.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert answer.ext("leaderId") == leader
    assert answer.ext("leaderAddress") == f"127.0.0.1:{int(leader[1:]) + 1}"


@pytest.mark.parametrize(("code", "ext", "expected"), [
    (RMQC_MEMBERS_ADD, {"id": "bad-id", "address": "127.0.0.1:9"}, "malformed id"),
    (RMQC_MEMBERS_ADD, {"id": "n7", "address": "no port"}, "malformed address"),
    (RMQC_MEMBERS_ADD, {"id": "n7", "address": "127.0.0.1:2"}, "already used by member n1"),
    (RMQC_MEMBERS_ADD, {"id": "n1", "address": "127.0.0.1:9"}, "already a member with address 127.0.0.1:2"),
    (RMQC_MEMBERS_PROMOTE, {"id": "n7"}, "unknown id 'n7'"),
    (RMQC_MEMBERS_REMOVE, {"id": "n7"}, "unknown id 'n7'"),
])
def test_refusals_say_what_and_what_to_do(code: int, ext: dict[str, str], expected: str) -> None:
    cluster, leader = elected()
    assert expected in refusal(ask(cluster, leader, code, **ext))


def test_removing_the_last_voter_is_refused() -> None:
    cluster = Cluster(size=1)
    cluster.run(1_000)
    assert "n0 is the last voter" in refusal(ask(cluster, "n0", RMQC_MEMBERS_REMOVE, id="n0"))


def test_a_second_change_while_one_is_pending_is_refused() -> None:
    cluster, leader = elected()
    start_joiner(cluster)
    cluster.replicas[leader].client_request(
        make_request(RMQC_MEMBERS_ADD, 1, {"id": JOINER, "address": JOINER_ADDRESS}), 1, "first")
    second = ask(cluster, leader, RMQC_MEMBERS_ADD, id="n8", address="127.0.0.1:8")
    assert "is pending" in refusal(second)
    assert cluster.answered["first"].code == ResponseCode.SUCCESS


def test_promoting_a_learner_that_lags_is_refused() -> None:
    cluster, leader = elected()
    start_joiner(cluster)
    body(ask(cluster, leader, RMQC_MEMBERS_ADD, id=JOINER, address=JOINER_ADDRESS))
    cluster.run(300)
    cluster.isolate(JOINER)  # it caught up once, then falls behind
    for i in range(CATCH_UP_ENTRIES + 5):
        cluster.replicas[leader].client_request(
            make_request(1013, i + 10, {"clusterName": "C", "brokerName": f"g{i}", "appliedBrokerId": 1,
                                         "registerCheckCode": f"10.0.0.1:{i};1"}), 1, f"w{i}")
        cluster.settle()  # one append each: requests waiting together share entries
    cluster.run(200)
    remark = refusal(ask(cluster, leader, RMQC_MEMBERS_PROMOTE, id=JOINER))
    assert "has not caught up" in remark and "trails the commit index" in remark
    assert JOINER in cluster.replicas[leader].conf_state.learners


def test_the_leader_removing_itself_hands_over_and_the_new_leader_removes_it() -> None:
    cluster, leader = elected()
    redirect = ask(cluster, leader, RMQC_MEMBERS_REMOVE, id=leader)
    assert redirect.code == ResponseCode.CONTROLLER_NOT_LEADER, redirect.remark
    new_leader = redirect.ext("leaderId")
    assert new_leader not in (None, leader) and "retry the removal" in (redirect.remark or "")
    removed = body(ask(cluster, new_leader, RMQC_MEMBERS_REMOVE, id=leader))
    assert removed["change"] == "remove" and leader not in removed["voters"]
    cluster.run(500)
    old = cluster.replicas[leader]
    assert leader not in old.conf_state.members and leader not in old.status().members
    cluster.isolate(leader)
    term = old.term
    cluster.run(3_000)
    assert old.term == term and old.leader_id != leader, "a removed node never campaigns"


def test_a_restart_rebuilds_the_same_address_book() -> None:
    cluster, leader = elected()
    joiner = add_and_promote_joiner(cluster, leader)
    storage = joiner.storage
    assert isinstance(storage, MemoryStorage)
    before = joiner.conf_state
    restarted = start_joiner(cluster, storage)  # the same disk, `join` still set: it is ignored
    assert restarted.conf_state == before
    cluster.run(500)
    assert restarted.conf_state == before and restarted.status().members[JOINER] == JOINER_ADDRESS


def test_a_restart_on_lmdb_rebuilds_the_same_membership_and_book(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path / "n0") as storage:
        h = leader(storage=storage)
        token = "add"
        h.replica.client_request(make_request(RMQC_MEMBERS_ADD, 1, {"id": "n5", "address": "10.0.0.5:9878"}), 1, token)
        h.advance(100)
        assert h.answers()[token].code == ResponseCode.SUCCESS
        before = h.replica.conf_state
        h.replica.close()
    assert before.learners == ("n5",) and dict(before.addresses)["n5"] == "10.0.0.5:9878"
    with LmdbStorage(tmp_path / "n0") as storage:
        restarted = harness(storage=storage)
        (announced,) = restarted.take(MembersChanged)
        assert restarted.replica.conf_state == before
        assert announced.addresses == dict(before.addresses) and announced.learners == ("n5",)
        restarted.advance(100)
        assert restarted.replica.conf_state == before


def test_a_restart_takes_the_bootstrap_membership_from_storage_not_from_peers() -> None:
    storage = MemoryStorage()
    first = leader(storage=storage)
    assert storage.initial_state()[1].voters == ("n0",), "saved once the bootstrap entries were durable"
    first.replica.close()
    restarted = harness("n0-127.0.0.1:9878;n9-127.0.0.1:9999", storage=storage)  # peers edited since
    assert restarted.replica.conf_state.voters == ("n0",)
    restarted.advance(100)
    assert restarted.replica.serving_as_leader, "still the sole voter"


def test_a_learner_that_never_answered_is_not_promoted() -> None:
    cluster, leader = elected()  # a young group: its commit index is far below CATCH_UP_ENTRIES
    cluster.cut |= {(node_id, "n8") for node_id in cluster.replicas}
    body(ask(cluster, leader, RMQC_MEMBERS_ADD, id="n8", address="127.0.0.1:8"))  # nobody runs n8
    cluster.run(200)
    remark = refusal(ask(cluster, leader, RMQC_MEMBERS_PROMOTE, id="n8"))
    assert "has not caught up" in remark and "not acknowledged anything" in remark


def test_a_removed_node_answers_leader_only_requests_with_2007_naming_the_leader() -> None:
    cluster, leader = elected()
    removed = next(node_id for node_id in cluster.replicas if node_id != leader)
    body(ask(cluster, leader, RMQC_MEMBERS_REMOVE, id=removed))
    cluster.run(200)
    answer = ask(cluster, removed, RequestCode.CONTROLLER_APPLY_BROKER_ID, clusterName="C", brokerName="g",
                 appliedBrokerId="1", registerCheckCode="10.0.0.1:1;1")
    assert answer.code == ResponseCode.CONTROLLER_NOT_LEADER and "not a member" in (answer.remark or "")
    assert answer.ext("leaderId") == leader
