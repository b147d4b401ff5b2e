"""Real Apache RocketMQ (the release pinned in interop/java/pom.xml, built by `make interop`)
against real `rmqc serve` nodes: a Java NameServer, three Java brokers of one group in controller
mode, `mqadmin`, and the Producer/Consumer programs of interop/java. The scenarios live in
rmqc.testing.interop, which also runs them against Apache RocketMQ's own controller for
docs/interop.md."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from rmqc.chaos._tcp_proxy import ProxyMesh
from rmqc.client import ControllerClient
from rmqc.javapeers import RocketMQ, bring_up
from rmqc.launcher import free_ports
from rmqc.testing.cluster import Cluster, NodeProcess
from rmqc.testing.interop import check_bring_up, controller_partition, failover, mqadmin_controller_commands

pytestmark = pytest.mark.slow


async def test_three_java_brokers_come_up_against_rmqc(tmp_path: Path) -> None:
    """Ids 1-3 from rmqc (1012/1013), one master, the SyncStateSet expanded to all three (1001 from
    the master as the slaves catch up); mqadmin getSyncStateSet, getControllerMetaData,
    getBrokerEpoch and clusterList agree."""
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    rmq = RocketMQ(tmp_path)
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
            await cluster.wait_leader(admin)
            brokers = await bring_up(rmq, cluster, admin)
            print("interop bring-up:", await check_bring_up(rmq, cluster, admin, brokers))
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()


async def test_master_killed_under_producer_fails_over_without_loss(tmp_path: Path) -> None:
    """Under the Producer, SIGKILL rmqc's leader (no broker group may change, no send may fail),
    then the broker master: the new rmqc leader elects a slave of the SyncStateSet, sends resume,
    the old master restarted rejoins as a slave and re-enters the set, and every acknowledged
    message is consumed afterwards (0 lost). Prints the timeline."""
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    rmq = RocketMQ(tmp_path)
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
            await cluster.wait_leader(admin)
            brokers = await bring_up(rmq, cluster, admin)
            report = await failover(rmq, cluster, admin, brokers, controller_leader_kill=True)
            print("interop failover timeline:", report)
            assert report["lost"] == 0 and report["acknowledged"] >= 250
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()


async def test_rmqc_node_partitioned_then_mqadmin_controller_commands(tmp_path: Path) -> None:
    """One broker group bring-up shared by two checks. (3) Under the Producer, rmqc's leader is
    isolated from its peers by the chaos proxies, then healed: a new leader, no failed send, no
    broker demoted or promoted, 0 lost. (4) mqadmin getControllerConfig / updateControllerConfig /
    electMaster (a slave designated: the brokers follow) / cleanBrokerMetadata (refused for a
    living broker) against rmqc."""
    mesh = ProxyMesh({f"n{i}": port for i, port in enumerate(free_ports(3))})
    async with trio.open_nursery() as nursery:
        await nursery.start(mesh.run)
        cluster = Cluster([NodeProcess(node_id, f"127.0.0.1:{port}", mesh.peers_for(node_id), tmp_path / node_id,
                                       tmp_path / f"{node_id}.log") for node_id, port in mesh.listen_ports.items()])
        await cluster.start()
        rmq = RocketMQ(tmp_path)
        try:
            async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
                brokers = await bring_up(rmq, cluster, admin)
                print("interop partition:", await controller_partition(rmq, cluster, mesh, admin, brokers))
                print("interop mqadmin:", await mqadmin_controller_commands(rmq, cluster, admin, brokers))
        except BaseException:
            print(cluster.logs())
            print(rmq.logs())
            raise
        finally:
            await cluster.stop()
            nursery.cancel_scope.cancel()
