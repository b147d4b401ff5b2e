"""The NameServer role through the controller harness (Java-free): 103/104/105/106/206/322 and KV,
golden bodies derived from the 5.5.0 sources (docs/namesrv.md), fencing by the committed master."""

from __future__ import annotations

import json
import zlib

import pytest

from rmqc.controller._namesrv_bodies import compressed_register_body, register_body
from rmqc.fsm import ControllerState, PutKvConfig
from rmqc.remoting import RemotingCommand, loads_fastjson
from rmqc.testing.controller_harness import ControllerHarness

C, N = "C", "broker-a"
A, B = "10.0.0.1:30911", "10.0.0.2:30921"
TOPICS = [("TopicA", 4, 4, 6, 0)]


def ask(h: ControllerHarness, code: int, ext: dict | None = None, body: bytes | None = None,
        version: int = 0) -> RemotingCommand:
    response = h.request(code, ext, body) if version == 0 else h.request(code, ext, body, version=version)
    assert response is not None
    return response


def register(h: ControllerHarness, address: str, broker_id: int, version: tuple[int, int, int] = (0, 1, 1),
             topics: list | None = None, crc: bool = True, compressed: bool = False) -> RemotingCommand:
    rows = TOPICS if topics is None else topics
    body = compressed_register_body(version, rows) if compressed else register_body(version, rows)
    ext = {"brokerName": N, "brokerAddr": address, "clusterName": C, "haServerAddr": address.replace("309", "409"),
           "brokerId": broker_id, "compressed": compressed,
           "bodyCrc32": (zlib.crc32(body) & 0x7FFFFFFF) if crc else 0}
    return ask(h, 103, ext, body)


@pytest.fixture
def h() -> ControllerHarness:
    return ControllerHarness()


def test_unmanaged_broker_name_follows_java_brokerid_zero_is_master(h: ControllerHarness) -> None:
    assert register(h, A, 0).code == 0
    answer = register(h, B, 1)
    assert answer.code == 0 and answer.ext("masterAddr") == A and answer.ext("haServerAddr") == "10.0.0.1:40911"
    route = ask(h, 105, {"topic": "TopicA"})
    # golden, fastjson default dialect (request version < V4_9_4): bare numeric keys, fields sorted
    assert route.body == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:30911",1:"10.0.0.2:30921"},"brokerName":"broker-a",'
        b'"cluster":"C","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
    standard = ask(h, 105, {"topic": "TopicA"}, version=513)  # a 5.5.0 client: standard JSON
    assert json.loads(standard.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A, "1": B}
    missing = ask(h, 105, {"topic": "Nope"})
    assert missing.code == 17 and "Nope" in (missing.remark or "")
    cluster = ask(h, 106)
    assert cluster.body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:30911",1:"10.0.0.2:30921"},'
        b'"brokerName":"broker-a","cluster":"C","enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a"]}}')
    assert ask(h, 206).body == b'{"topicList":["TopicA"]}'


def test_unchanged_registration_writes_nothing_and_322_says_unchanged(h: ControllerHarness) -> None:
    assert register(h, A, 0).code == 0
    entries = len(h.log)
    assert register(h, A, 0).code == 0
    assert len(h.log) == entries  # only liveness refreshed
    ext = {"brokerName": N, "brokerAddr": A, "clusterName": C, "brokerId": 0}
    same = ask(h, 322, ext, b'{"counter":1,"stateVersion":0,"timestamp":1}')
    assert same.code == 0 and same.ext("changed") == "false"
    assert loads_fastjson(same.body) == {"counter": 1, "stateVersion": 0, "timestamp": 1}
    newer = ask(h, 322, ext, b'{"counter":2,"stateVersion":0,"timestamp":1}')
    assert newer.ext("changed") == "true"
    assert register(h, A, 0, version=(0, 1, 2), topics=[("TopicB", 8, 8, 6, 0)]).code == 0
    assert len(h.log) == entries + 1
    assert ask(h, 206).body == b'{"topicList":["TopicA","TopicB"]}'  # merged as Java merges


def test_crc_mismatch_and_compressed_body(h: ControllerHarness) -> None:
    body = register_body((0, 1, 1), TOPICS)
    ext = {"brokerName": N, "brokerAddr": A, "clusterName": C, "haServerAddr": A, "brokerId": 0, "bodyCrc32": 12345}
    refused = ask(h, 103, ext, body)
    assert refused.code == 1 and refused.remark == "crc32 not match"
    assert register(h, A, 0, compressed=True, topics=[("Zipped", 2, 3, 6, 0)]).code == 0
    queue = json.loads(ask(h, 105, {"topic": "Zipped"}, version=513).body)["queueDatas"][0]
    assert (queue["readQueueNums"], queue["writeQueueNums"]) == (2, 3)


def test_fencing_route_master_is_the_committed_master(h: ControllerHarness) -> None:
    # the controller manages broker-a: A is id 1, B id 2, B is the committed master
    assert h.register(C, N, A) == 1
    assert h.register(C, N, B) == 2
    h.heartbeat(C, N, 2, B)
    assert ask(h, 1002, {"clusterName": C, "brokerName": N, "brokerId": 2, "designateElect": False}).code == 0
    # A (deposed, still claiming brokerId 0) and B (the master, registered as 0 too) both register
    assert register(h, A, 0, topics=[("Stale", 1, 1, 6, 0)]).code == 0
    assert register(h, B, 0).code == 0
    route = json.loads(ask(h, 105, {"topic": "TopicA"}, version=513).body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": B, "1": A}
    assert ask(h, 105, {"topic": "Stale"}).code == 17  # a deposed master's topics never become routes
    answer = register(h, A, 1)  # A learns it is a slave: its answer names B as master
    assert answer.ext("masterAddr") == B


def test_kv_put_get_delete_and_order_topic_config_in_103_answer(h: ControllerHarness) -> None:
    assert ask(h, 101, {"namespace": "ns", "key": "k"}).code == 22
    assert ask(h, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}).code == 0
    assert ask(h, 101, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}).ext("value") == "broker-a:4"
    assert register(h, A, 0).body == b'{"table":{"T":"broker-a:4"}}'
    assert ask(h, 219, {"namespace": "ORDER_TOPIC_CONFIG"}).body == b'{"table":{"T":"broker-a:4"}}'
    assert ask(h, 102, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}).code == 0
    assert ask(h, 101, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}).code == 22
    too_big = ask(h, 100, {"namespace": "ns", "key": "k", "value": "x" * 70_000})
    assert too_big.code == 1 and "exceeds the bound" in (too_big.remark or "")


def test_unregister_and_delete_topic(h: ControllerHarness) -> None:
    assert register(h, A, 0).code == 0
    assert ask(h, 216, {"topic": "TopicA"}).code == 0
    assert ask(h, 105, {"topic": "TopicA"}).code == 17
    assert register(h, A, 0, version=(0, 1, 2)).code == 0
    assert ask(h, 104, {"brokerName": N, "brokerAddr": A, "clusterName": C, "brokerId": 0}).code == 0
    assert ask(h, 105, {"topic": "TopicA"}).code == 17
    assert ask(h, 106).body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


def test_snapshot_keeps_namesrv_state_and_old_snapshots_restore_empty() -> None:
    state = ControllerState()
    state.apply(PutKvConfig("ns", "k", "v", 1))
    restored = ControllerState()
    restored.restore(state.snapshot())
    assert restored.namesrv.kv == {"ns": {"k": "v"}}
    old = ControllerState()
    old.restore(b'{"version":1,"groups":[]}')  # written before the NameServer role
    assert not old.namesrv
    assert b"namesrv" not in ControllerState().snapshot()
