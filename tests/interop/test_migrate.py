"""Migration off Apache RocketMQ's own controller onto rmqc, with real processes only: three Java
DLedger controller nodes, a Java NameServer, three Java brokers of one group in controller mode
holding messages, `mqadmin`, and three `rmqc serve` nodes. `rmqc migrate from-java` runs as its
own process.

The switch follows docs/operations.md "Migrating from the Java controller": import and verify,
pause rmqc's own failovers, stop the Java controllers, point every broker at rmqc with `mqadmin
updateBrokerConfig` (no restart: a master restarted onto its own masterEpoch rewrites its epoch
entry and its slaves never find a consistent point again), wait until rmqc hears all three,
resume failovers. Then mqadmin must say what it said before, a slave restarted on its persisted
configuration comes back on rmqc, the messages written under Java are all read back, and a master
kill fails over through rmqc with nothing lost."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.javapeers import ALL, CLUSTER, GROUP, Broker, RocketMQ, bring_up, mqadmin_ok, now_ms, replica_state, wait_for
from rmqc.remoting import loads_fastjson
from rmqc.testing.cluster import RMQC, Cluster
from rmqc.testing.interop import broker_epochs, cluster_list, consume_all, failover, mqadmin_sync_state_set

# about 6 minutes on a quiet 2-core machine (10 JVMs, 3 rmqc nodes; up to 2 of them waiting for the
# brokers' own 2-minute re-read of controllerAddr): more than the default bound
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

BEFORE_TOPIC = "rmqc-migrate-before"  # written while the Java controllers decide, read after the switch
MIGRATE_TIMEOUT_S = 120.0  # one CLI process: Python start, ~10 requests to each side
STOP_TIMEOUT_S = 60.0  # a broker's shutdown hook joins its threads one by one (~9 s here, more under load)
# A broker re-reads controllerAddr every 2 minutes (ReplicasManager.updateControllerAddr), then
# finds the new leader within syncControllerMetadataPeriod (10 s): up to ~130 s, more under load.
SWITCH_S = 240.0
REJOIN_S = 180.0  # a restarted broker: JVM start, register, HA catch-up, on a loaded machine
ELECTIONS_OFF = {"electMasterMaxRetryCount": "0"}
ELECTIONS_ON = {"electMasterMaxRetryCount": "3"}


async def mqadmin_view(rmq: RocketMQ, controllers: list[str]) -> dict[str, Any]:
    """What mqadmin says about GROUP: getSyncStateSet (from `controllers`), getBrokerEpoch (the
    brokers' epoch files) and clusterList (the NameServer)."""
    assert rmq.namesrv is not None
    state = await mqadmin_sync_state_set(rmq, ";".join(controllers))
    epochs = broker_epochs(await mqadmin_ok(rmq, "getBrokerEpoch", "-n", rmq.namesrv.address, "-b", GROUP))
    rows = cluster_list(await mqadmin_ok(rmq, "clusterList", "-n", rmq.namesrv.address))
    return {"master": (state["MasterBrokerId"], state["MasterAddr"], state["MasterEpoch"]),
            "sync_state_set_epoch": state["SyncStateSetEpoch"],
            "in_sync": sorted(state["in_sync"]), "not_in_sync": sorted(state["not_in_sync"]),
            "epoch_entries": epochs, "cluster_list": rows}


def _comparable(view: dict[str, Any], *, epoch_ends: bool = True) -> dict[str, Any]:
    """The answers that must not change: master id, address and epoch, the replicas in and out of
    the SyncStateSet (alive or not), every broker's epoch entries, the NameServer's rows. The
    syncStateSetEpoch may grow (a restarted slave leaves the set and comes back); without
    `epoch_ends`, the end offsets of the epoch entries too (messages written since)."""
    entries = {bid: [e if epoch_ends else e[:2] for e in es] for bid, es in view["epoch_entries"].items()}
    return {key: view[key] for key in ("master", "in_sync", "not_in_sync", "cluster_list")} | {"epochs": entries}


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


async def set_rmqc_config(admin: ControllerClient, leader: str, properties: dict[str, str]) -> None:
    """A 1009 through the leader: replicated, so every rmqc node applies it."""
    answer = await admin.update_config(leader, properties)
    assert answer.code == 0, (answer.code, answer.remark)


async def point_at(rmq: RocketMQ, broker: Broker, controllers: list[str]) -> None:
    """`mqadmin updateBrokerConfig controllerAddr` on the running broker (it persists the change in
    its broker.conf, so a restart keeps it)."""
    value = ";".join(controllers)
    await mqadmin_ok(rmq, "updateBrokerConfig", "-b", broker.address, "-k", "controllerAddr", "-v", value)
    assert f"controllerAddr={value}" in (broker.directory / "broker.conf").read_text()
    broker.config["controllerAddr"] = value  # what the next spawn writes into broker.conf


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
            master_id, _master_address, master_epoch = before["master"]
            ids = {b.broker_id(): b for b in brokers}
            assert sorted(ids) == ALL

            await cluster.start()
            async with ControllerClient(cluster.addresses, max_retries=10) as admin:
                leader = await cluster.wait_leader(admin)
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

                # rmqc has heard no broker yet: until it hears all three, it must not fail the group
                # over (the first broker it hears would look like the only live replica)
                await set_rmqc_config(admin, leader, ELECTIONS_OFF)
                await java.stop()
                timeline["java_stopped"] = now_ms()
                for broker in brokers:
                    await point_at(rmq, broker, cluster.addresses)

                async def all_heard() -> bool:
                    return await live_replicas(admin) == ALL

                await wait_for(all_heard, SWITCH_S, "rmqc hearing all three brokers", 0.5)
                timeline["all_heard"] = now_ms()
                await set_rmqc_config(admin, leader, ELECTIONS_ON)
                assert await replica_state(admin) == (master_id, master_epoch, ALL)

                async def same_as_before() -> bool:
                    return _comparable(await mqadmin_view(rmq, cluster.addresses)) == _comparable(before)

                await wait_for(same_as_before, REJOIN_S, "mqadmin answering as before the switch", 1.0)
                switched = await mqadmin_view(rmq, cluster.addresses)
                assert switched["sync_state_set_epoch"] == before["sync_state_set_epoch"]  # nothing moved

                # a rolling restart of a slave afterwards: it comes back on rmqc from its broker.conf
                slave_id = next(i for i in ALL if i != master_id)
                slave = ids[slave_id]
                slave.kill(signal.SIGTERM)
                await slave.wait_exit(STOP_TIMEOUT_S)
                await slave.start()

                async def slave_back() -> bool:
                    return await replica_state(admin) == (master_id, master_epoch, ALL) and \
                        await live_replicas(admin) == ALL and slave.broker_id() == slave_id

                await wait_for(slave_back, REJOIN_S, f"slave {slave_id} restarted, back in the SyncStateSet", 0.5)

                async def same_after_restart() -> bool:
                    view = await mqadmin_view(rmq, cluster.addresses)
                    return _comparable(view, epoch_ends=False) == _comparable(before, epoch_ends=False)

                await wait_for(same_after_restart, REJOIN_S, "mqadmin answering as before after the restart", 1.0)
                read_back = await consume_all(rmq, written, "consumer-before", BEFORE_TOPIC)
                assert read_back["lost"] == 0 and read_back["acknowledged"] == 100, read_back
                print("interop migration:", {
                    "before": before, "switched": switched, "written_before": read_back,
                    "migrate_cli_ms": timeline["migrated"] - timeline["migrate"],
                    "java_stopped_to_all_heard_ms": timeline["all_heard"] - timeline["java_stopped"]})

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


async def test_migrate_reads_a_jraft_controller_exactly(tmp_path: Path) -> None:
    """The same import and verification from the Java controller in JRaft mode (5.2+; one node, to
    keep the run short: the reads go to its leader either way), with three live brokers."""
    rmq = RocketMQ(tmp_path)
    cluster = Cluster.create(tmp_path / "rmqc", 3)
    java = rmq.java_controllers(1, mode="jraft")
    try:
        async with rmq:
            await java.start()
            async with ControllerClient(java.addresses, max_retries=10) as java_admin:
                await java.wait_leader(java_admin)
                brokers = await bring_up(rmq, java, java_admin)
                master_id, master_epoch, in_sync = await replica_state(java_admin)
            await cluster.start()
            async with ControllerClient(cluster.addresses, max_retries=10) as admin:
                await cluster.wait_leader(admin)
                assert rmq.namesrv is not None
                migration = await run_migration(java.addresses, cluster.addresses, rmq.namesrv.address)
                assert (migration["imported"], migration["verified"], migration["differences"]) == (True, True, []), \
                    migration
                assert await replica_state(admin) == (master_id, master_epoch, in_sync)
                (group,) = migration["groups"]
                assert group["replicas"] == {str(b.broker_id()): b.address for b in brokers}
    except BaseException:
        print(cluster.logs())
        print(java.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()
