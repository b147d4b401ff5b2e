"""rmqc as NameServer, operated with rmqc's own CLI and through faults, on real processes: three
rmqc nodes, three Java 5.5.0 brokers with `namesrvAddr` = `controllerAddr` = the rmqc nodes
(docs/namesrv.md).

1. `rmqc admin topic create`, then the Java Producer and Consumer find the topic through a follower;
2. `rmqc admin kv put`, read back from every node with `rmqc admin kv get --node`; mqadmin
   wipeWritePerm / addWritePerm / getNamesrvConfig against a follower, `rmqc admin topic update`;
3. the broker master SIGSTOPped: the controller elects another; every node's route names the new
   master from then on. Then SIGCONT: the old master, still believing it is master, re-registers
   as brokerId 0, and every node lists it under its controller id, never as master;
4. every rmqc node restarted while the brokers are SIGSTOPped (they cannot re-register): each
   node answers the topic's route at once, from its own log and snapshot;
5. `rmqc admin topic delete`: no node routes the topic any more."""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.javapeers import CLUSTER, GROUP, Broker, RocketMQ, bring_up, mqadmin_ok, replica_state, wait_for
from rmqc.testing.cluster import RMQC, Cluster

pytestmark = pytest.mark.slow

TOPIC = "rmqc-ops-topic"
SENDS = 10
ROUTE_WAIT_S = 60.0
FAILOVER_WAIT_S = 90.0  # the broker's controller heartbeat timeout (10 s) on a loaded machine
REREGISTER_WAIT_S = 60.0  # registerNameServerPeriod is 10 s in the test brokers


async def rmqc_cli(*args: str) -> str:
    """`rmqc admin ...` as an operator runs it (a subprocess: the CLI runs its own Trio loop)."""
    done = await trio.run_process([RMQC, "admin", *args], capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, f"rmqc admin {' '.join(args)}: {done.returncode} {done.stderr.decode()}"
    return str(done.stdout.decode())


async def route_on(admin: ControllerClient, address: str, consistency: str = "stale") -> dict[str, Any] | None:
    try:
        answer = await admin.request(105, {"topic": TOPIC, "acceptStandardJsonOnly": "true",
                                           "consistency": consistency}, address=address, leader=False)
    except ClientError:
        return None
    if answer is None or answer.code != 0 or not answer.body:
        return None
    route: dict[str, Any] = json.loads(answer.body)
    return route


def addrs_of(route: dict[str, Any] | None) -> dict[str, str]:
    if route is None:
        return {}
    return dict(next((b["brokerAddrs"] for b in route["brokerDatas"] if b["brokerName"] == GROUP), {}))


async def routes_everywhere(admin: ControllerClient, cluster: Cluster) -> dict[str, dict[str, str]]:
    return {address: addrs_of(await route_on(admin, address)) for address in cluster.addresses}


async def create_topic_and_exchange_messages(rmq: RocketMQ, cluster: Cluster, follower: str,
                                             master: Broker) -> None:
    out = await rmqc_cli("topic", "create", TOPIC, "--cluster", CLUSTER, "-r", "4", "-w", "4",
                         "-a", cluster.controllers, "--json")
    route = json.loads(out)["route"]
    assert addrs_of(route)["0"] == master.address and route["queueDatas"][0]["writeQueueNums"] == 4, route
    described = json.loads(await rmqc_cli("topic", "describe", TOPIC, "-a", cluster.controllers, "--node", follower,
                                          "--json"))
    assert addrs_of(described["route"])["0"] == master.address
    listed = json.loads(await rmqc_cli("topic", "list", "--cluster", CLUSTER, "-a", cluster.controllers, "--json"))
    assert TOPIC in listed["topics"]

    producer = rmq.producer(TOPIC, count=SENDS, interval_ms=10, namesrv=follower)
    consumer = rmq.consumer(TOPIC, namesrv=follower)

    async def all_sent() -> bool:
        return sum(1 for line in producer.json_lines() if line["event"] == "send" and line["result"] == "ok") >= SENDS

    async def all_received() -> bool:
        return len({line["body"] for line in consumer.json_lines() if line["event"] == "recv"}) >= SENDS

    await wait_for(all_sent, 60.0, f"{SENDS} sends through a follower as NameServer", 0.2)
    await wait_for(all_received, 60.0, f"{SENDS} messages consumed through a follower as NameServer", 0.2)
    consumer.kill(signal.SIGTERM)


async def kv_read_back_everywhere(cluster: Cluster) -> None:
    await rmqc_cli("kv", "put", "ops-ns", "key", "value-1", "-a", cluster.controllers)
    for address in cluster.addresses:
        got = json.loads(await rmqc_cli("kv", "get", "ops-ns", "key", "-a", cluster.controllers, "--node", address,
                                        "--json"))
        assert got["value"] == "value-1", (address, got)


def _topic_count(mqadmin_out: str) -> int:
    """The count mqadmin prints after "OK, " (wipeWritePerm, addWritePerm)."""
    match = re.search(r"OK, (\d+)", mqadmin_out)
    assert match is not None, mqadmin_out
    return int(match.group(1))


async def write_perm_config_and_update(rmq: RocketMQ, admin: ControllerClient, cluster: Cluster,
                                       follower: str) -> None:
    """mqadmin's 205 / 327 / 319 read the answers' headers and bodies as Java does."""

    async def perm_everywhere(perm: int) -> bool:
        routes = [await route_on(admin, address, "linearizable") for address in cluster.addresses]
        return all(route is not None and route["queueDatas"][0]["perm"] == perm for route in routes)

    # wipeTopicCount / addTopicCount: every topic of the broker name, the test's and, once the
    # broker's periodic registration came (30 s; CI's loaded run: 17), its system topics
    wiped = await mqadmin_ok(rmq, "wipeWritePerm", "-b", GROUP, "-n", follower)
    assert await perm_everywhere(4)
    added = await mqadmin_ok(rmq, "addWritePerm", "-b", GROUP, "-n", follower)
    assert _topic_count(wiped) >= 1 and _topic_count(added) == _topic_count(wiped), (wiped, added)
    assert await perm_everywhere(6)
    config = await mqadmin_ok(rmq, "getNamesrvConfig", "-n", follower)
    assert "rmqcMaxTopics" in config and "orderMessageEnable" in config, config
    out = await rmqc_cli("topic", "update", TOPIC, "--cluster", CLUSTER, "-r", "2", "-w", "2",
                         "-a", cluster.controllers, "--json")
    assert json.loads(out)["route"]["queueDatas"][0]["writeQueueNums"] == 2


async def delete_topic_everywhere(admin: ControllerClient, cluster: Cluster) -> None:
    await rmqc_cli("topic", "delete", TOPIC, "--cluster", CLUSTER, "-a", cluster.controllers)
    for address in cluster.addresses:
        assert await route_on(admin, address, "linearizable") is None, address
    listed = json.loads(await rmqc_cli("topic", "list", "-a", cluster.controllers, "--json"))
    assert TOPIC not in listed["topics"]


async def paused_master_is_fenced(admin: ControllerClient, cluster: Cluster, brokers: list[Broker],
                                  master: Broker, master_id: int) -> dict[str, float]:
    """SIGSTOP the master for the election, SIGCONT it after: no node names it as master again."""
    old = master.address
    master.kill(signal.SIGSTOP)
    paused = time.monotonic()
    new_master: list[str] = []
    try:
        async def elected() -> bool:
            new_id, _, _ = await replica_state(admin)
            if new_id is None or new_id == master_id:
                return False
            new_master[:] = [next(b.address for b in brokers if b.broker_id() == new_id)]
            return True

        await wait_for(elected, FAILOVER_WAIT_S, "a new master elected while the old one is paused", 0.2)
        elected_s = time.monotonic() - paused

        async def moved() -> bool:
            routes = await routes_everywhere(admin, cluster)
            return all(addrs.get("0") == new_master[0] for addrs in routes.values())

        await wait_for(moved, ROUTE_WAIT_S, "every node's route naming the new master")
        moved_s = time.monotonic() - paused
    finally:
        master.kill(signal.SIGCONT)

    async def old_master_relisted_never_as_master() -> bool:
        relisted = True
        for address in cluster.addresses:
            for level in ("stale", "linearizable"):
                addrs = addrs_of(await route_on(admin, address, level))
                assert addrs.get("0") != old, f"{address} ({level}) names the paused old master {old}: {addrs}"
                relisted = relisted and old in addrs.values()
        return relisted

    await wait_for(old_master_relisted_never_as_master, REREGISTER_WAIT_S,
                   "the resumed old master listed again, under its controller id", 0.1)
    routes = await routes_everywhere(admin, cluster)
    assert all(addrs.get("0") == new_master[0] and addrs.get(str(master_id)) == old for addrs in routes.values()), \
        routes
    return {"elected_s": elected_s, "route_moved_s": moved_s}


async def restart_answers_routes_at_once(admin: ControllerClient, cluster: Cluster,
                                         brokers: list[Broker]) -> dict[str, float]:
    """Brokers paused (no registration can arrive), every rmqc node restarted: routes at once."""
    before = await routes_everywhere(admin, cluster)
    for broker in brokers:
        broker.kill(signal.SIGSTOP)
    try:
        await cluster.stop()
        started = time.monotonic()
        await cluster.start()
        serving_s = time.monotonic() - started
        for address in cluster.addresses:  # the first request each node gets after it serves
            addrs = addrs_of(await route_on(admin, address))
            assert addrs == before[address], (address, addrs, before[address])
        await cluster.wait_leader(admin)
        after = {address: addrs_of(await route_on(admin, address, "linearizable")) for address in cluster.addresses}
        assert after == before, (after, before)
        return {"restart_serving_s": serving_s}
    finally:
        for broker in brokers:
            broker.kill(signal.SIGCONT)


async def test_cli_topic_kv_paused_master_fenced_and_restart_keeps_routes(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    rmq = RocketMQ(tmp_path)
    timeline: dict[str, float] = {}
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            follower = next(a for a in cluster.addresses if a != leader)
            rmq.use_rmqc_namesrv(cluster.addresses)
            # the timer wheel on: a 5.5.0 broker's 215 (deleteTopic) fails without it (a null
            # TimerMessageStore), for mqadmin deleteTopic too
            brokers = await bring_up(rmq, cluster, admin, {"timerWheelEnable": "true"})
            master_id, _, _ = await replica_state(admin)
            assert master_id is not None
            master = next(b for b in brokers if b.broker_id() == master_id)

            await create_topic_and_exchange_messages(rmq, cluster, follower, master)
            await kv_read_back_everywhere(cluster)
            await write_perm_config_and_update(rmq, admin, cluster, follower)
            timeline |= await paused_master_is_fenced(admin, cluster, brokers, master, master_id)
            timeline |= await restart_answers_routes_at_once(admin, cluster, brokers)
            await delete_topic_everywhere(admin, cluster)
            print("rmqc as NameServer, operated:", timeline, file=sys.stderr)
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()
