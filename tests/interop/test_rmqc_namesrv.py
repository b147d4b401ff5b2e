"""rmqc as NameServer AND controller (docs/namesrv.md), on real processes: three Java brokers of
RocketMQ 5.5.0 with `namesrvAddr` = `controllerAddr` = the three rmqc nodes (no Java NameServer),
mqadmin (updateTopic, clusterList, topicRoute, topicList) and the Java Producer and Consumer pointed
at one rmqc follower; then the broker master is SIGKILLed and every rmqc node's route must name
the newly elected master as brokerId 0 and never the old one again.

The same test runs with Apache RocketMQ's own NameServer in rmqc's place (rmqc stays the
controller), with the same assertions: where the two differ it says so (docs/namesrv.md)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.javapeers import CLUSTER, GROUP, RocketMQ, bring_up, mqadmin_ok, replica_state, wait_for
from rmqc.remoting import loads_fastjson
from rmqc.testing.cluster import Cluster
from rmqc.testing.interop import cluster_list

pytestmark = pytest.mark.slow

TOPIC = "rmqc-ns-topic"
SENDS = 20
ROUTE_WAIT_S = 60.0


async def route_on(admin: ControllerClient, address: str, topic: str = TOPIC) -> dict[str, Any] | None:
    """105 from one node (in standard JSON, as a 5.5.0 client gets it); None while it has no route."""
    try:
        answer = await admin.request(105, {"topic": topic, "acceptStandardJsonOnly": True}, address=address,
                                     leader=False)
    except ClientError:
        return None
    if answer is None or answer.code != 0 or answer.body is None:
        return None
    route: dict[str, Any] = json.loads(answer.body)
    return route


def master_of(route: dict[str, Any] | None) -> str | None:
    if route is None:
        return None
    addrs = next((b["brokerAddrs"] for b in route["brokerDatas"] if b["brokerName"] == GROUP), {})
    master: str | None = addrs.get("0") or addrs.get(0)
    return master


async def namesrv_under_test(kind: str, rmq: RocketMQ, cluster: Cluster, leader: str) -> tuple[list[str], str]:
    """(every NameServer address, the one clients and mqadmin are given): rmqc's nodes and one of its
    followers, or the one Java NameServer."""
    if kind == "java":
        namesrv = await rmq.start_namesrv()
        return [namesrv.address], namesrv.address
    rmq.use_rmqc_namesrv(cluster.addresses)
    return list(cluster.addresses), next(a for a in cluster.addresses if a != leader)


@pytest.mark.parametrize("namesrv_kind", ["rmqc", "java"])
async def test_brokers_clients_and_mqadmin_use_the_namesrv_and_routes_follow_the_failover(
        tmp_path: Path, namesrv_kind: str) -> None:
    started = time.monotonic()
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    rmq = RocketMQ(tmp_path)
    timeline: dict[str, float] = {}
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            namesrvs, follower = await namesrv_under_test(namesrv_kind, rmq, cluster, leader)
            brokers = await bring_up(rmq, cluster, admin)
            timeline["in_sync_s"] = time.monotonic() - started
            master_id, _, _ = await replica_state(admin)
            master = next(b for b in brokers if b.broker_id() == master_id)

            # the topic, created through the NameServer (106 finds the master, which registers it)
            await mqadmin_ok(rmq, "updateTopic", "-n", follower, "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4")

            async def routed_everywhere() -> bool:
                return all([master_of(await route_on(admin, a)) == master.address for a in namesrvs])

            await wait_for(routed_everywhere, ROUTE_WAIT_S, "the topic's route on every NameServer")
            timeline["routed_s"] = time.monotonic() - started

            producer = rmq.producer(TOPIC, count=SENDS, interval_ms=10, namesrv=follower)
            consumer = rmq.consumer(TOPIC, namesrv=follower)

            def received() -> set[str]:
                return {line["body"] for line in consumer.json_lines() if line["event"] == "recv"}

            async def all_sent() -> bool:
                return len([1 for line in producer.json_lines()
                            if line["event"] == "send" and line["result"] == "ok"]) >= SENDS

            await wait_for(all_sent, 60.0, f"{SENDS} acknowledged sends through the NameServer", 0.2)

            async def all_received() -> bool:
                return len(received()) >= SENDS

            await wait_for(all_received, 60.0, f"{SENDS} messages consumed through the NameServer", 0.2)
            timeline["sent_and_received_s"] = time.monotonic() - started

            # mqadmin against the NameServer (an rmqc follower)
            rows = cluster_list(await mqadmin_ok(rmq, "clusterList", "-n", follower))
            assert rows[0] == (master.address, True), rows
            assert {bid: row[0] for bid, row in rows.items() if bid} == \
                {b.broker_id(): b.address for b in brokers if b is not master}, rows
            route_text = await mqadmin_ok(rmq, "topicRoute", "-n", follower, "-t", TOPIC)
            assert master.address in route_text and '"writeQueueNums":4' in route_text.replace(" ", ""), route_text
            topics = await mqadmin_ok(rmq, "topicList", "-n", follower)
            assert TOPIC in topics.split(), topics
            timeline["mqadmin_s"] = time.monotonic() - started

            # the broker master dies: every node's route must move to the new master, never back
            old = master.address
            master.kill(signal.SIGKILL)
            killed = time.monotonic()
            named_new: dict[str, bool] = {a: False for a in namesrvs}
            new_master: dict[str, str] = {}

            async def moved_everywhere() -> bool:
                new_id, _, _ = await replica_state(admin)
                if new_id is None or new_id == master_id:
                    return False
                expected = next(b.address for b in brokers if b.broker_id() == new_id)
                for address in namesrvs:
                    for level in ("stale", "linearizable"):  # the Java NameServer ignores the level
                        answer = await admin.request(105, {"topic": TOPIC, "consistency": level},
                                                     address=address, leader=False)
                        assert answer is not None
                        route = loads_fastjson(answer.body) if answer.code == 0 and answer.body else None
                        named = master_of(route)
                        if named_new[address]:
                            assert named != old, f"{address} named the old master {old} again: {route}"
                        if named == expected:
                            named_new[address] = True
                            new_master[address] = named
                return all(named_new.values())

            await wait_for(moved_everywhere, ROUTE_WAIT_S, "every NameServer's route naming the new master")
            timeline["route_moved_ms"] = (time.monotonic() - killed) * 1000
            # and it stays so: a few more rounds on every node
            for _ in range(5):
                for address in namesrvs:
                    assert master_of(await route_on(admin, address)) == new_master[address] != old
                await trio.sleep(0.1)  # rounds spread over time: the route must stay, not just appear
            timeline["total_s"] = time.monotonic() - started
            print(f"{namesrv_kind} as NameServer:", timeline)
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()
