"""Simulated brokers register with 3 real `rmqc serve` processes as their NameServer (103): every
node routes every group's topics with the controller's master as brokerId 0, periodic
re-registrations write nothing to the log, and after a master's kill the routes name the new
master on every node."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from rmqc.brokersim import BrokerFleet, FleetTooLarge, SimTiming, topic_table
from rmqc.client import ControllerClient
from rmqc.remoting import RequestCode, ResponseCode
from rmqc.testing.cluster import Cluster, wait_until

GROUPS = 3
TOPICS = 2
# The fast timings, but re-registered every 0.5 s so that several periods pass within the test.
TIMING = dataclasses.replace(SimTiming.fast(), register_interval_ms=500)
CONVERGE_S = 60.0
ROUTE_S = 30.0
QUIET_PERIODS = 4  # re-registration periods watched for a log write


async def route(client: ControllerClient, node: str, topic: str, consistency: str) -> Any:
    """The node's 105 answer as (appliedIndex or None, route or None)."""
    answer = await client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                  {"topic": topic, "acceptStandardJsonOnly": "true", "consistency": consistency},
                                  address=node, leader=False)
    assert answer is not None
    applied = answer.ext("appliedIndex")
    body = orjson.loads(answer.body) if answer.code == ResponseCode.SUCCESS and answer.body else None
    return (int(applied) if applied else None), body


def master_and_queues(body: Any, group: str) -> tuple[str | None, set[str]]:
    brokers = {b["brokerName"]: b["brokerAddrs"] for b in body["brokerDatas"]} if body else {}
    queues = {q["brokerName"] for q in body["queueDatas"]} if body else set()
    return brokers.get(group, {}).get("0"), queues


async def every_node_routes(client: ControllerClient, nodes: list[str], fleet: BrokerFleet,
                            masters: dict[str, str]) -> bool:
    """Every node's linearizable 105 of every topic names `masters[group]` as brokerId 0, with queues."""
    for group in fleet.group_names:
        for topic, *_ in topic_table(group, TOPICS):
            for node in nodes:
                _, body = await route(client, node, topic, "linearizable")
                if master_and_queues(body, group) != (masters[group], {group}):
                    return False
    return True


async def committed_master(client: ControllerClient, group: str) -> str | None:
    """The group's master address as the controller committed it (1004 on the leader)."""
    answer = await client.get_replica_info(group)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext("masterAddress") or None


async def committed_masters(client: ControllerClient, fleet: BrokerFleet) -> dict[str, str]:
    masters = {}
    for group in fleet.group_names:
        address = await committed_master(client, group)
        assert address is not None, f"seed {fleet.seed}: {group} has no committed master"
        masters[group] = address
    return masters


async def applied_on_leader(client: ControllerClient, leader: str, fleet: BrokerFleet) -> int:
    applied, body = await route(client, leader, topic_table(fleet.group_names[0], 1)[0][0], "stale")
    assert applied is not None and body is not None
    return applied


async def run_fleet(cluster: Cluster, state_dir: Path) -> None:
    nodes = cluster.addresses
    async with ControllerClient(nodes, timeout_ms=3000) as client, \
            BrokerFleet(nodes, groups=GROUPS, replicas=3, state_dir=state_dir, timing=TIMING,
                        topics_per_broker=TOPICS, seed=20261127) as fleet:
        await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
        masters = await committed_masters(client, fleet)
        await wait_until(lambda: every_node_routes(client, nodes, fleet, masters), ROUTE_S,
                         f"seed {fleet.seed}: every node routes every topic to the controller's master")

        # registrations go on every period with the same DataVersion: nothing reaches the log
        leader = await cluster.wait_leader(client)
        before = await applied_on_leader(client, leader, fleet)
        counted = sum(b.route_registrations for b in fleet.brokers())
        with trio.fail_after(QUIET_PERIODS * TIMING.register_interval_ms / 1000 * 10):
            while sum(b.route_registrations for b in fleet.brokers()) < counted + QUIET_PERIODS * 3 * GROUPS * 3:
                await trio.sleep(0.05)
        assert fleet.problems() == [], f"seed {fleet.seed}: {fleet.problems()}"
        assert await applied_on_leader(client, leader, fleet) == before, \
            f"seed {fleet.seed}: unchanged re-registrations wrote to the log"

        victim = fleet.group_names[1]
        old_master = masters[victim]
        old_id = fleet.master_of(victim)
        assert old_id is not None
        fleet.kill(victim, old_id)

        async def new_master_routed() -> bool:
            address = await committed_master(client, victim)
            if address is None or address == old_master:
                return False
            return await every_node_routes(client, nodes, fleet, {**masters, victim: address})

        await wait_until(new_master_routed, ROUTE_S, f"seed {fleet.seed}: every node routes {victim}'s new master")


def test_simulated_brokers_register_routes_on_every_node(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path / "cluster", 3)
    cluster.start_blocking()
    try:
        trio.run(run_fleet, cluster, tmp_path / "sim")
    finally:
        cluster.stop_blocking()


def test_topics_per_broker_is_bounded_and_names_derive_from_the_group(tmp_path: Path) -> None:
    for bad in (-1, 65_537):
        with pytest.raises(FleetTooLarge, match="topics per broker"):
            BrokerFleet(["127.0.0.1:1"], groups=1, state_dir=tmp_path, topics_per_broker=bad)
    assert [row[0] for row in topic_table("broker-0007", 2)] == ["broker-0007-topic-0", "broker-0007-topic-1"]
