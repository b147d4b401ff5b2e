"""A broker registers (103) with every NameServer address at once and again every 30 s: the leader
receives each new topic table once per node, the copies while the first is still in flight (one
entry carries the table, the copies wait for it and are answered by its outcome), and a follower
answers the unchanged ones itself, relaying their liveness to the leader in its digest."""

from __future__ import annotations

import zlib

from replica_harness import Cluster, Harness, leader

from rmqc.controller._namesrv_bodies import register_body
from rmqc.fsm import RegisterBrokerRoute, decode_commands
from rmqc.raft import EntryType, MemoryStorage
from rmqc.remoting import RemotingCommand, ResponseCode, make_request
from rmqc.replica import ForwardRequest

CLUSTER, NAME = "C", "broker-a"
A, B = "10.0.0.1:30911", "10.0.0.2:30911"
TOPICS = [("TopicA", 4, 4, 6, 0), ("TopicB", 8, 8, 6, 0)]
_opaque = iter(range(1, 1_000_000))


def registration(address: str, broker_id: int, version: tuple[int, int, int]) -> RemotingCommand:
    body = register_body(version, TOPICS)
    ext = {"brokerName": NAME, "brokerAddr": address, "clusterName": CLUSTER, "haServerAddr": address,
           "brokerId": broker_id, "compressed": False, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    return make_request(103, next(_opaque), ext, body)


def send_together(h: Harness, requests: list[RemotingCommand]) -> list[RemotingCommand]:
    """All of `requests` received before the replica is driven (none applied yet), then their answers."""
    for request in requests:
        h.replica.client_request(request, 1, request.opaque)
    h.settle()
    answers = h.answers()
    return [answers[request.opaque] for request in requests]


def registrations_in_the_log(h: Harness) -> list[RegisterBrokerRoute]:
    storage = h.replica.storage
    assert isinstance(storage, MemoryStorage)
    entries = storage.entries(storage.first_index(), storage.last_index() + 1)
    return [command for entry in entries if entry.type == EntryType.NORMAL
            for command in decode_commands(entry.data) if isinstance(command, RegisterBrokerRoute)]


def test_copies_of_a_registration_in_flight_share_its_one_write() -> None:
    h = leader()
    answers = send_together(h, [registration(A, 0, (0, 1, 1)) for _ in range(3)])
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 3
    assert len(registrations_in_the_log(h)) == 1
    assert h.replica.state.namesrv.registration(CLUSTER, A) is not None
    # a changed table is a write of its own, even while an older one of the same broker is in flight
    answers = send_together(h, [registration(A, 0, (0, 1, 2)), registration(A, 0, (0, 1, 3))])
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 2
    assert [c.data_counter for c in registrations_in_the_log(h)] == [1, 2, 3]


def test_a_copy_of_a_registration_that_was_refused_is_refused_too() -> None:
    h = leader()
    assert send_together(h, [registration(A, 1, (5, 1, 1))])[0].code == ResponseCode.SUCCESS
    # broker id 1 moved to B with an older stateVersion: Java keeps the newer (apply refuses it)
    first, copy = send_together(h, [registration(B, 1, (3, 1, 1)), registration(B, 1, (3, 1, 1))])
    assert first.code == copy.code == ResponseCode.SYSTEM_ERROR
    assert "stateVersion" in (first.remark or "")
    assert "not applied" in (copy.remark or "")
    assert h.replica.state.namesrv.registration(CLUSTER, B) is None


def forwards_of(cluster: Cluster, node_id: str, request: RemotingCommand) -> int:
    """Send `request` to `node_id`; how many ForwardRequests it made (the cluster then delivers them)."""
    outbox = cluster.outboxes[node_id]
    cluster.replicas[node_id].client_request(request, 1, request.opaque)
    made = sum(isinstance(action, ForwardRequest) for action in outbox)
    cluster.settle()
    return made


def test_a_follower_answers_an_unchanged_registration_itself_and_relays_its_liveness() -> None:
    cluster = Cluster()
    cluster.run(1_000)
    leader_id = cluster.leader()
    assert leader_id is not None
    follower = next(node for node in cluster.replicas if node != leader_id)
    leader_ns = cluster.replicas[leader_id].processor.namesrv
    # a new table changes the follower's state: the leader decides it
    assert forwards_of(cluster, follower, registration(A, 0, (0, 1, 1))) == 1
    cluster.run(100)  # the follower applies it
    heard_before = leader_ns._heard[(CLUSTER, A)][0]
    cluster.run(5_000)
    # the same table again changes nothing: answered by the follower, nothing forwarded or written
    again = registration(A, 0, (0, 1, 1))
    log_before = cluster.replicas[leader_id].storage.last_index()
    assert forwards_of(cluster, follower, again) == 0
    assert cluster.answered[again.opaque].code == ResponseCode.SUCCESS
    query = make_request(322, next(_opaque), {"brokerName": NAME, "brokerAddr": A, "clusterName": CLUSTER,
                                              "brokerId": 0}, b'{"counter":1,"stateVersion":0,"timestamp":1}')
    assert forwards_of(cluster, follower, query) == 0
    assert cluster.answered[query.opaque].ext("changed") == "false"
    cluster.run(100)  # the follower's digest (every 30 ms) reaches the leader
    assert leader_ns._heard[(CLUSTER, A)][0] >= heard_before + 5_000
    assert cluster.replicas[leader_id].storage.last_index() == log_before
