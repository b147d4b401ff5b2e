"""Real Apache RocketMQ (the release pinned in interop/java/pom.xml, built by `make interop`)
against real `rmqc serve` nodes: a Java NameServer, three Java brokers of one group in controller
mode, `mqadmin`, and the Producer/Consumer programs of interop/java. The scenarios live in
rmqc.testing.interop, which also runs them against Apache RocketMQ's own controller for
docs/interop.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqc.client import ControllerClient
from rmqc.testing.cluster import Cluster
from rmqc.testing.interop import bring_up, check_bring_up, failover
from rmqc.testing.rocketmq import RocketMQ

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
