"""The NameServer role's second slice through the controller harness (Java-free): the cached 105
answer dropped by every kind of change, 224, 217, 205/327, 318/319, and bounds refused before a
huge registration body is decoded (docs/namesrv.md)."""

from __future__ import annotations

import json
import random
import struct
import zlib

import pytest

from rmqc.controller._namesrv_bodies import MAX_REGISTER_BODY_BYTES, register_body
from rmqc.fsm import MAX_TOPICS_PER_REGISTRATION, SetWritePermOfBroker, decode_commands, encode_commands
from rmqc.remoting import RemotingCommand
from rmqc.testing.controller_harness import ControllerHarness

C, N = "C", "broker-a"
A, B = "10.0.0.1:30911", "10.0.0.2:30921"
STANDARD = 513  # a 5.5.0 client: standard JSON routes


def ask(h: ControllerHarness, code: int, ext: dict | None = None, body: bytes | None = None,
        version: int = 0) -> RemotingCommand:
    response = h.request(code, ext, body, version=version)
    assert response is not None
    return response


def register(h: ControllerHarness, address: str, broker_id: int, counter: int, topics: list,
             name: str = N) -> RemotingCommand:
    body = register_body((0, 1, counter), topics)
    ext = {"brokerName": name, "brokerAddr": address, "clusterName": C, "haServerAddr": address,
           "brokerId": broker_id, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    return ask(h, 103, ext, body)


def cached_route(h: ControllerHarness, topic: str = "TopicA") -> dict | None:
    """105 twice: the second answer is the cached bytes (the same object), and equal to the route
    computed afresh from the state (a stale cache would differ)."""
    first = ask(h, 105, {"topic": topic}, version=STANDARD)
    if first.code == 17:
        assert h.processor.namesrv.encoded_route(topic, True) is None
        return None
    second = ask(h, 105, {"topic": topic}, version=STANDARD)
    assert second.body is first.body, "a second lookup with nothing changed is served from the cache"
    assert first.body == h.processor.namesrv.encoded_route(topic, True)
    route: dict = json.loads(first.body)
    return route


def addrs(route: dict | None) -> dict[str, str]:
    assert route is not None
    return dict(route["brokerDatas"][0]["brokerAddrs"])


def queue(route: dict | None) -> dict:
    assert route is not None
    return dict(route["queueDatas"][0])


def test_cached_route_is_dropped_by_every_kind_of_change() -> None:
    h = ControllerHarness()
    assert h.register(C, N, A) == 1 and h.register(C, N, B) == 2
    h.heartbeat(C, N, 1, A)
    h.heartbeat(C, N, 2, B)
    assert ask(h, 1002, {"clusterName": C, "brokerName": N, "brokerId": 2, "designateElect": False}).code == 0
    assert register(h, B, 0, 1, [("TopicA", 4, 4, 6, 0)]).code == 0
    assert addrs(cached_route(h)) == {"0": B}

    # topic change: the master's new topic table
    assert register(h, B, 0, 2, [("TopicA", 8, 8, 6, 0)]).code == 0
    assert queue(cached_route(h))["readQueueNums"] == 8
    # registration change: the slave registers
    assert register(h, A, 1, 1, []).code == 0
    assert addrs(cached_route(h)) == {"0": B, "1": A}
    # write permission (205 then 327), replicated commands answered with the count
    wiped = ask(h, 205, {"brokerName": N})
    assert wiped.code == 0 and wiped.ext("wipeTopicCount") == "1"
    assert queue(cached_route(h))["perm"] == 4
    assert ask(h, 327, {"brokerName": N}).ext("addTopicCount") == "1"
    assert queue(cached_route(h))["perm"] == 6
    # 217: an operator's queue data
    body = json.dumps({"queueDatas": [{"brokerName": N, "perm": 6, "readQueueNums": 2, "writeQueueNums": 2,
                                       "topicSysFlag": 0}]}).encode()
    assert ask(h, 217, {"topic": "TopicA"}, body).code == 0
    assert queue(cached_route(h))["writeQueueNums"] == 2
    # master change and liveness change: B's connection closes; the controller deposes it, and
    # the cached answer must not name it as master for one more lookup
    inactive = h.close_connection(f"{N}#2")
    assert inactive and h.state.group(N) is not None and h.state.group(N).master_address != B
    assert addrs(cached_route(h)).get("0") != B
    # the inactive broker leaves the routes (what the replica's liveness proposes)
    h.commit(h.processor.namesrv.inactive(inactive, h.now_ms))
    assert B not in addrs(cached_route(h)).values()
    # topic deleted
    assert ask(h, 216, {"topic": "TopicA"}).code == 0
    assert cached_route(h) is None


def test_route_cache_keeps_the_two_json_dialects_apart() -> None:
    h = ControllerHarness()
    assert register(h, A, 0, 1, [("TopicA", 4, 4, 6, 0)]).code == 0
    fastjson = ask(h, 105, {"topic": "TopicA"})
    standard = ask(h, 105, {"topic": "TopicA"}, version=STANDARD)
    assert b'{0:"' in (fastjson.body or b"") and b'{"0":"' in (standard.body or b"")
    assert ask(h, 105, {"topic": "TopicA"}).body is fastjson.body


def test_topics_by_cluster_config_and_refused_update() -> None:
    h = ControllerHarness()
    assert register(h, A, 0, 1, [("TopicA", 4, 4, 6, 0), ("TopicB", 4, 4, 6, 0)]).code == 0
    assert register(h, B, 0, 1, [("TopicC", 4, 4, 6, 0)], name="broker-b").code == 0
    assert ask(h, 224, {"cluster": C}).body == b'{"topicList":["TopicA","TopicB","TopicC"]}'
    assert ask(h, 224, {"cluster": "nope"}).body == b'{"topicList":[]}'
    config = ask(h, 319)
    lines = dict(line.split("=", 1) for line in (config.body or b"").decode().splitlines())
    assert lines["orderMessageEnable"] == "false" and lines["rmqcMaxTopics"] == "1000000"
    refused = ask(h, 318, body=b"orderMessageEnable=true\n")
    assert refused.code == 16 and "cannot be changed" in (refused.remark or "")
    entries = len(h.log)
    unknown = json.dumps({"queueDatas": [{"brokerName": "nobody", "perm": 6, "readQueueNums": 1,
                                          "writeQueueNums": 1}]}).encode()
    assert ask(h, 217, {"topic": "T2"}, unknown).code == 0  # Java: success, nothing registered
    assert len(h.log) == entries and ask(h, 105, {"topic": "T2"}).code == 17
    too_long = ask(h, 217, {"topic": "t" * 2000}, unknown)
    assert too_long.code == 1 and "1024 bytes" in (too_long.remark or "")


def test_write_perm_command_round_trips_the_log() -> None:
    command = SetWritePermOfBroker(N, True, 5)
    assert decode_commands(encode_commands([command])) == [command]


def test_huge_registration_bodies_are_refused_before_they_are_decoded() -> None:
    h = ControllerHarness()
    ext = {"brokerName": N, "brokerAddr": A, "clusterName": C, "haServerAddr": A, "brokerId": 0}
    # not even JSON: were it parsed, the answer would say so; the topic count refuses it first
    many = b'"topicName"' * (MAX_TOPICS_PER_REGISTRATION + 1)
    answer = ask(h, 103, ext, many)
    assert answer.code == 1 and "exceed the bound of 65536" in (answer.remark or "")
    compressed = zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", MAX_TOPICS_PER_REGISTRATION + 1))
    answer = ask(h, 103, {**ext, "compressed": True}, compressed)
    assert answer.code == 1 and "exceed the bound of 65536" in (answer.remark or "")
    answer = ask(h, 103, ext, b" " * (MAX_REGISTER_BODY_BYTES + 1))
    assert answer.code == 1 and f"exceeds the bound of {MAX_REGISTER_BODY_BYTES}" in (answer.remark or "")
    assert h.state.namesrv.registrations == {}


TOPICS = ["T0", "T1", "T2", "T3"]
MANAGED = {1: A, 2: B, 3: "10.0.0.3:30931"}
UNMANAGED = ["10.0.1.1:30911", "10.0.1.2:30921"]


def random_step(h: ControllerHarness, rng: random.Random, counter: int) -> None:
    """One change of any kind a route depends on, chosen by `rng`."""
    kind = rng.randrange(7)
    if kind == 0:  # a registration (managed or not), with a new topic table
        name, address, claimed = rng.choice([(N, a, rng.choice([0, i])) for i, a in MANAGED.items()]
                                            + [("broker-u", a, i) for i, a in enumerate(UNMANAGED)])
        topics = [(t, rng.randint(1, 8), rng.randint(1, 8), 6, 0) for t in rng.sample(TOPICS, rng.randint(0, 3))]
        register(h, address, claimed, counter, topics, name=name)
    elif kind == 1:  # a broker unregisters
        address = rng.choice([*MANAGED.values(), *UNMANAGED])
        name = N if address in MANAGED.values() else "broker-u"
        ask(h, 104, {"brokerName": name, "brokerAddr": address, "clusterName": C, "brokerId": 0})
    elif kind == 2:
        ask(h, rng.choice([205, 327]), {"brokerName": rng.choice([N, "broker-u"])})
    elif kind == 3:
        body = json.dumps({"queueDatas": [{"brokerName": rng.choice([N, "broker-u"]), "perm": 6,
                                           "readQueueNums": rng.randint(1, 8), "writeQueueNums": 4}]}).encode()
        ask(h, 217, {"topic": rng.choice(TOPICS)}, body)
    elif kind == 4:
        ask(h, 216, {"topic": rng.choice(TOPICS)})
    elif kind == 5:  # the controller elects (or fails to: nothing changes then)
        broker_id = rng.choice(list(MANAGED))
        h.heartbeat(C, N, broker_id, MANAGED[broker_id])
        ask(h, 1002, {"clusterName": C, "brokerName": N, "brokerId": broker_id, "designateElect": False})
    else:  # a managed broker's connection closes: deposed if master, and out of the routes
        inactive = h.close_connection(f"{N}#{rng.choice(list(MANAGED))}")
        h.commit(h.processor.namesrv.inactive(inactive, h.now_ms))


@pytest.mark.parametrize("seed", range(5))
def test_cached_routes_equal_fresh_ones_and_name_only_the_committed_master(seed: int) -> None:
    rng = random.Random(seed)
    h = ControllerHarness()
    for broker_id, address in MANAGED.items():
        assert h.register(C, N, address) == broker_id
        h.heartbeat(C, N, broker_id, address)
    for counter in range(1, 150):
        random_step(h, rng, counter)
        group = h.state.group(N)
        for topic in TOPICS:
            for version in (0, STANDARD):
                answer = ask(h, 105, {"topic": topic}, version=version)
                fresh = h.processor.namesrv.encoded_route(topic, version == STANDARD)
                assert (answer.body if answer.code == 0 else None) == fresh, (seed, counter, topic)
            route = json.loads(answer.body) if answer.code == 0 and answer.body else {"brokerDatas": []}
            master = next((b["brokerAddrs"].get("0") for b in route["brokerDatas"] if b["brokerName"] == N), None)
            assert master is None or (group is not None and master == group.master_address), (seed, counter)


def test_route_cache_and_its_index_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import rmqc.fsm._namesrv as fsm_namesrv

    monkeypatch.setattr(fsm_namesrv, "MAX_CACHED_ROUTES", 4)
    h = ControllerHarness()
    assert register(h, A, 0, 1, [("TopicA", 4, 4, 6, 0)]).code == 0
    queues = json.dumps({"queueDatas": [{"brokerName": N, "perm": 6, "readQueueNums": 1,
                                         "writeQueueNums": 1}]}).encode()
    for i in range(20):  # topics created, looked up and deleted without the registration changing
        assert ask(h, 217, {"topic": f"X{i}"}, queues).code == 0
        assert ask(h, 105, {"topic": f"X{i}"}).code == 0
        assert ask(h, 105, {"topic": f"X{i}"}, version=STANDARD).code == 0
        if i % 2:
            assert ask(h, 216, {"topic": f"X{i}"}).code == 0
        answers, index = h.state.namesrv.cache_size()
        assert answers <= 4 and index <= 4, (i, answers, index)
    assert ask(h, 105, {"topic": "X18"}).body == h.processor.namesrv.encoded_route("X18", False)


def test_a_wiped_write_permission_outlives_the_brokers_unchanged_registrations() -> None:
    """As Java: the master's periodic 103 (every 30 s, same data version) does not put back the
    write permission an operator took away (205); a new data version does, as it does in Java."""
    h = ControllerHarness()
    assert h.register(C, N, B) == 1
    h.heartbeat(C, N, 1, B)
    assert ask(h, 1002, {"clusterName": C, "brokerName": N, "brokerId": 1, "designateElect": False}).code == 0
    assert register(h, B, 0, 1, [("TopicA", 4, 4, 6, 0)]).code == 0
    assert ask(h, 205, {"brokerName": N}).ext("wipeTopicCount") == "1"
    entries = len(h.log)
    assert register(h, B, 0, 1, [("TopicA", 4, 4, 6, 0)]).code == 0  # the periodic one
    assert queue(cached_route(h))["perm"] == 4 and len(h.log) == entries  # nothing written
    assert register(h, B, 0, 2, [("TopicA", 4, 4, 6, 0)]).code == 0  # its topic table changed
    assert queue(cached_route(h))["perm"] == 6
