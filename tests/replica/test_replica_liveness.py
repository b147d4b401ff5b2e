"""Liveness on the replica, on a fake clock: expiry by deadline, a close acted on at once, stall
forgiveness, digests from a follower."""

from __future__ import annotations

import itertools

from replica_harness import Harness, leader

from rmqc.client import heartbeat_ext
from rmqc.remoting import RequestCode, ResponseCode, dumps_fastjson, make_request
from rmqc.replica import Notify

CLUSTER, GROUP = "C", "g"
ADDRESSES = {1: "10.0.0.1:1", 2: "10.0.0.2:1"}
CHANNELS = {1: 11, 2: 12}
TIMEOUT_MS = 3_000
_opaques = itertools.count(1)


def ask(h: Harness, code: int, ext: dict[str, object], body: bytes | None = None) -> object:
    opaque = next(_opaques)
    h.replica.client_request(make_request(code, opaque, ext, body), 1, opaque)
    h.settle()
    response = h.answers()[opaque]
    assert response.code == ResponseCode.SUCCESS, response.remark
    return response


def heartbeat(h: Harness, broker_id: int) -> None:
    ext = heartbeat_ext(CLUSTER, GROUP, broker_id, ADDRESSES[broker_id], epoch=1, heartbeat_timeout_ms=TIMEOUT_MS)
    assert h.replica.heartbeat(make_request(RequestCode.BROKER_HEARTBEAT, 0, ext, oneway=True), CHANNELS[broker_id])


def group_with_master() -> Harness:
    """Broker 1 master of GROUP, broker 2 a live replica, both heard on their own connections."""
    h = leader()
    for broker_id, address in ADDRESSES.items():
        ask(h, RequestCode.CONTROLLER_APPLY_BROKER_ID, {"clusterName": CLUSTER, "brokerName": GROUP,
                                                       "appliedBrokerId": broker_id,
                                                       "registerCheckCode": f"{address};1"})
        ask(h, RequestCode.CONTROLLER_REGISTER_BROKER, {"clusterName": CLUSTER, "brokerName": GROUP,
                                                        "brokerId": broker_id, "brokerAddress": address})
        heartbeat(h, broker_id)
        if broker_id == 1:
            ask(h, RequestCode.CONTROLLER_ELECT_MASTER, {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": 1,
                                                           "designateElect": False, "invokeTime": 1})
    ask(h, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": GROUP, "masterBrokerId": 1, "masterEpoch": 1, "invokeTime": 1},
        dumps_fastjson({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}))
    assert master_epoch(h) == (1, 1)
    h.outbox.clear()
    return h


def master_epoch(h: Harness) -> tuple[int | None, int]:
    group = h.replica.state.group(GROUP)
    assert group is not None
    return group.master_id, group.master_epoch


def keep_alive(h: Harness, broker_ids: tuple[int, ...], ms: int) -> None:
    for _ in range(ms // 500):
        for broker_id in broker_ids:
            heartbeat(h, broker_id)
        h.advance(500)


def test_a_silent_master_expires_at_its_deadline_and_an_election_is_committed() -> None:
    h = group_with_master()
    keep_alive(h, (2,), TIMEOUT_MS - 500)
    assert master_epoch(h) == (1, 1)  # not before its deadline
    keep_alive(h, (2,), 1_500)
    assert master_epoch(h) == (2, 2)  # broker 2, in the SyncStateSet and alive


def test_a_closed_connection_is_acted_on_at_once_and_the_replicas_are_notified() -> None:
    h = group_with_master()
    h.replica.connection_closed(CHANNELS[1])
    h.settle()  # no time passes: the election went into the log in the same input
    assert master_epoch(h) == (2, 2)
    notified = {action.address for action in h.take(Notify)}
    assert ADDRESSES[2] in notified


def test_a_stall_longer_than_the_timeout_is_forgiven_to_every_broker() -> None:
    h = group_with_master()
    h.clock.now_ms += 3 * TIMEOUT_MS  # the node could not run; the brokers' heartbeats wait unread
    h.replica.advance_time()  # the first thing to run after the stall
    h.settle()
    heartbeat(h, 1)
    heartbeat(h, 2)
    keep_alive(h, (1, 2), 2 * TIMEOUT_MS)
    assert master_epoch(h) == (1, 1)
    stalls = h.replica.liveness.stalls
    assert stalls.stalls == 1 and stalls.longest_s >= 3 * TIMEOUT_MS / 1000 - 0.2
    assert h.replica.status().counters["stalls"] == 1

