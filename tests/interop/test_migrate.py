"""Migration off Apache RocketMQ's own controller onto rmqc, with real processes only: three Java
DLedger controller nodes, a Java NameServer, three Java brokers of one group in controller mode,
`mqadmin`, and three `rmqc serve` nodes. `rmqc migrate from-java` runs as its own process.

The switch follows docs/operations.md "Migrating from the Java controller": import and verify,
stop the Java controllers, restart the master first (rmqc never heard it, so a slave restarted
first would find no live master and have itself elected: two masters), then the slaves, each on
its own store with only `controllerAddr` changed. Then mqadmin must say what it said before, and a
master kill must fail over through rmqc."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.remoting import loads_fastjson
from rmqc.testing.cluster import RMQC, Cluster
from rmqc.testing.interop import (
    ALL,
    GROUP,
    bring_up,
    broker_epochs,
    cluster_list,
    consume_all,
    failover,
    mqadmin_ok,
    now_ms,
    replica_state,
    wait_for,
)
from rmqc.testing.rocketmq import CLUSTER, Broker, RocketMQ, parse_sync_state_set

# about 4 minutes on a quiet 2-core machine (10 JVMs, 3 rmqc nodes): more than the default bound
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
BEFORE_TOPIC = "rmqc-migrate-before"  # written while the Java controllers decide, read after the switch

MIGRATE_TIMEOUT_S = 120.0  # one CLI process: Python start, ~10 requests to each side
STOP_TIMEOUT_S = 60.0  # a broker's shutdown hook joins its threads one by one (~9 s here, more under load)
REJOIN_S = 120.0  # a restarted broker: JVM start, register (retried every 5 s), HA catch-up


async def mqadmin_view(rmq: RocketMQ, controllers: list[str]) -> dict[str, Any]:
    """What mqadmin says about GROUP: getSyncStateSet (from `controllers`), getBrokerEpoch (the
    brokers' epoch files) and clusterList (the NameServer)."""
    assert rmq.namesrv is not None
    state = parse_sync_state_set(await mqadmin_ok(rmq, "getSyncStateSet", "-a", ";".join(controllers), "-b", GROUP))
    epochs = broker_epochs(await mqadmin_ok(rmq, "getBrokerEpoch", "-n", rmq.namesrv.address, "-b", GROUP))
    rows = cluster_list(await mqadmin_ok(rmq, "clusterList", "-n", rmq.namesrv.address))
    return {"master": (state["MasterBrokerId"], state["MasterAddr"], state["MasterEpoch"]),
            "sync_state_set_epoch": state["SyncStateSetEpoch"],
            "in_sync": sorted(state["in_sync"]), "not_in_sync": sorted(state["not_in_sync"]),
            "epochs": {bid: [entry[0] for entry in entries] for bid, entries in epochs.items()},
            "epoch_entries": epochs, "cluster_list": rows}


async def live_replicas(admin: ControllerClient) -> list[int]:
    """The ids of GROUP that rmqc counts alive (1006)."""
    answer = await admin.get_sync_state_data([GROUP])
    info = loads_fastjson(answer.body or b"{}").get("replicasInfoTable", {}).get(GROUP, {})
    replicas = (info.get("inSyncReplicas") or []) + (info.get("notInSyncReplicas") or [])
    return sorted(r["brokerId"] for r in replicas if r.get("alive"))


async def run_migration(java: list[str], rmqc: list[str], namesrv: str) -> dict[str, Any]:
    with trio.fail_after(MIGRATE_TIMEOUT_S):
        process = await trio.run_process(
            [RMQC, "migrate", "from-java", "--controllers", ";".join(java), "--to", ",".join(rmqc),
             "--namesrv", namesrv, "--cluster", CLUSTER, "--json"], capture_stdout=True, capture_stderr=True,
            check=False)
    assert process.returncode == 0, (process.returncode, process.stdout.decode(), process.stderr.decode())
    document: dict[str, Any] = json.loads(process.stdout)
    return document


async def restart_on(broker: Broker, controllers: list[str]) -> None:
    """Stop (SIGTERM: the rolling restart an operator does) and start again on the same store,
    `controllerAddr` changed."""
    broker.kill(signal.SIGTERM)
    await broker.wait_exit(STOP_TIMEOUT_S)
    broker.config["controllerAddr"] = ";".join(controllers)
    await broker.start()


async def test_migrate_from_the_java_controller_keeps_ids_master_and_epochs(tmp_path: Path) -> None:
    rmq = RocketMQ(tmp_path)
    cluster = Cluster.create(tmp_path / "rmqc", 3)
    java = rmq.java_controllers(3)
    try:
        async with rmq:
            await java.start()
            async with ControllerClient(java.addresses, max_retries=10) as java_admin:
                await java.wait_leader(java_admin)
                brokers = await bring_up(rmq, java, java_admin)
                assert rmq.namesrv is not None
                await mqadmin_ok(rmq, "updateTopic", "-n", rmq.namesrv.address, "-c", CLUSTER, "-t", BEFORE_TOPIC,
                                 "-r", "4", "-w", "4")
                written = rmq.producer(BEFORE_TOPIC, count=100, interval_ms=5, name="producer-before")
                await written.wait_exit(120)
                before = await mqadmin_view(rmq, java.addresses)
            master_id, master_address, master_epoch = before["master"]
            ids = {b.broker_id(): b for b in brokers}
            assert sorted(ids) == ALL

            await cluster.start()
            async with ControllerClient(cluster.addresses, max_retries=10) as admin:
                await cluster.wait_leader(admin)
                timeline = {"migrate": now_ms()}
                migration = await run_migration(java.addresses, cluster.addresses, rmq.namesrv.address)
                timeline["migrated"] = now_ms()
                assert (migration["imported"], migration["verified"], migration["differences"]) == (True, True, []), \
                    migration
                (group,) = migration["groups"]
                assert (group["brokerName"], group["masterBrokerId"], group["masterEpoch"]) == \
                    (GROUP, master_id, master_epoch)
                assert group["replicas"] == {str(i): b.address for i, b in ids.items()}
                assert await replica_state(admin) == (master_id, master_epoch, ALL)

                await java.stop()  # from here no controller fails anything over until the brokers are on rmqc
                timeline["java_stopped"] = now_ms()
                master = ids[master_id]
                await restart_on(master, cluster.addresses)

                async def master_kept() -> bool:
                    return await live_replicas(admin) == [master_id] and \
                        (await replica_state(admin))[:2] == (master_id, master_epoch)

                await wait_for(master_kept, REJOIN_S, "the master heard by rmqc, master of the same masterEpoch", 0.2)
                timeline["master_back"] = now_ms()
                for slave in (b for i, b in sorted(ids.items()) if i != master_id):
                    await restart_on(slave, cluster.addresses)

                async def all_back_in_sync() -> bool:
                    return await replica_state(admin) == (master_id, master_epoch, ALL) and \
                        await live_replicas(admin) == ALL

                await wait_for(all_back_in_sync, REJOIN_S, "all three on rmqc, back in the SyncStateSet", 0.2)
                timeline["all_back"] = now_ms()
                assert sorted(b.broker_id() for b in brokers) == ALL  # no id reassigned

                async def same_as_before() -> bool:
                    return _comparable(await mqadmin_view(rmq, cluster.addresses)) == _comparable(before)

                # clusterList follows the registrations the restarted brokers send every 10 s
                await wait_for(same_as_before, REJOIN_S, "mqadmin answering as before the switch", 1.0)
                after = await mqadmin_view(rmq, cluster.addresses)
                assert after["sync_state_set_epoch"] >= before["sync_state_set_epoch"]
                read_back = await consume_all(rmq, written, "consumer-before", BEFORE_TOPIC)
                assert read_back["lost"] == 0 and read_back["acknowledged"] == 100, read_back
                print("interop migration:", {"before": before, "after": after, "written_before": read_back,
                                             "migrate_cli_ms": timeline["migrated"] - timeline["migrate"],
                                             "java_stop_to_master_back_ms":
                                                 timeline["master_back"] - timeline["java_stopped"],
                                             "java_stop_to_all_back_in_sync_ms":
                                                 timeline["all_back"] - timeline["java_stopped"]})

                report = await failover(rmq, cluster, admin, brokers)
                print("interop failover after the migration:", report)
                assert report["lost"] == 0 and report["acknowledged"] >= 250
    except BaseException:
        print(cluster.logs())
        print(java.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()


def _comparable(view: dict[str, Any]) -> dict[str, Any]:
    """The answers that must not change: master id, address and epoch, the replicas in and out of
    the SyncStateSet (alive or not), every broker's epochs, the NameServer's rows. The
    syncStateSetEpoch may grow (the restarted master reports its set again) and the master's last
    epoch entry starts where it restarted (a broker's changeToMaster rewrites its last entry)."""
    return {key: view[key] for key in ("master", "in_sync", "not_in_sync", "epochs", "cluster_list")}

