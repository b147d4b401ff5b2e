"""Real Apache RocketMQ (the release pinned in interop/java/pom.xml, built by `make interop`)
against real `rmqc serve` nodes: a Java NameServer, three Java brokers of one group in controller
mode, `mqadmin`, and the Producer/Consumer programs of interop/java (docs/interop.md)."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from rmqc.client import ControllerClient
from rmqc.remoting import loads_fastjson
from rmqc.testing.cluster import Cluster, wait_until
from rmqc.testing.rocketmq import CLUSTER, Broker, RocketMQ, parse_sync_state_set

pytestmark = pytest.mark.slow
GROUP = "broker-a"
TOPIC = "rmqc-interop"
ALL = [1, 2, 3]
BRING_UP_S = 120  # three broker JVMs registering on a loaded 2-core machine


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _replica_state(admin: ControllerClient) -> tuple[int | None, int, list[int]]:
    """(master id, master epoch, SyncStateSet) of GROUP from the controller (1004)."""
    answer = await admin.get_replica_info(GROUP)
    if answer.code != 0 or answer.body is None:
        return None, 0, []
    master = answer.ext("masterBrokerId")
    body = loads_fastjson(answer.body)
    return (int(master) if master not in (None, "") else None, int(answer.ext("masterEpoch") or 0),
            sorted(body.get("syncStateSet") or []))


async def _bring_up(rmq: RocketMQ, cluster: Cluster, admin: ControllerClient) -> list[Broker]:
    """The NameServer and three brokers (started together); returns once they have ids 1-3, one
    master and all three in the SyncStateSet."""
    await rmq.start_namesrv()
    brokers = [rmq.broker(index, cluster.addresses, GROUP) for index in range(len(ALL))]
    for broker in brokers:
        broker.spawn()
    for broker in brokers:
        await broker.wait_booted()

    async def all_in_sync() -> bool:
        master, _, in_sync = await _replica_state(admin)
        return master is not None and in_sync == ALL and all(b.broker_id() for b in brokers)

    await wait_until(all_in_sync, BRING_UP_S, "three brokers registered, a master, all in the SyncStateSet",
                     interval_s=0.2)
    return brokers


def _cluster_list(text: str) -> dict[int, tuple[str, bool]]:
    """`mqadmin clusterList` rows of GROUP: {BID: (address, ACTIVATED)}."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[0] == CLUSTER and fields[1] == GROUP:
            rows[int(fields[2])] = (fields[3], fields[-1] == "true")
    return rows


def _broker_epochs(text: str) -> dict[int, list[tuple[int, int, int]]]:
    """`mqadmin getBrokerEpoch` output: {brokerId (0 = master): [(epoch, startOffset, endOffset)]}."""
    epochs: dict[int, list[tuple[int, int, int]]] = {}
    current = None
    for line in text.splitlines():
        if match := re.match(r"#brokerId\s+(\d+)", line):
            current = int(match.group(1))
            epochs[current] = []
        elif (match := re.search(r"EpochEntry\{epoch=(\d+), startOffset=(\d+), endOffset=(\d+)\}", line)) and \
                current is not None:
            epochs[current].append((int(match.group(1)), int(match.group(2)), int(match.group(3))))
    return epochs


async def _mqadmin_ok(rmq: RocketMQ, *args: str) -> str:
    code, out = await rmq.mqadmin(*args)
    assert code == 0, f"mqadmin {' '.join(args)} exited with {code}: {out[-3000:]}"
    return out


async def test_three_java_brokers_come_up_against_rmqc(tmp_path: Path) -> None:
    """Ids 1-3 from the controller (1012/1013), one master, the SyncStateSet expanded to all three
    (1001 from the master as slaves catch up), and mqadmin agrees."""
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    rmq = RocketMQ(tmp_path)
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
            await cluster.wait_leader(admin)
            brokers = await _bring_up(rmq, cluster, admin)
            assert sorted(b.broker_id() or 0 for b in brokers) == ALL
            master_id, epoch, in_sync = await _replica_state(admin)
            assert master_id is not None and in_sync == ALL
            master = next(b for b in brokers if b.broker_id() == master_id)
            assert rmq.namesrv is not None
            controllers = ";".join(cluster.addresses)

            out = await _mqadmin_ok(rmq, "getSyncStateSet", "-a", controllers, "-b", GROUP)
            state = parse_sync_state_set(out)
            assert (state["brokerName"], state["MasterBrokerId"], state["MasterAddr"]) == \
                (GROUP, master_id, master.address), out
            assert state["MasterEpoch"] == epoch and state["SyncStateSetNums"] == 3, out
            assert sorted(state["in_sync"]) == sorted((b.broker_id(), b.address, True) for b in brokers), out
            assert state["not_in_sync"] == [], out

            out = await _mqadmin_ok(rmq, "getControllerMetaData", "-a", cluster.addresses[0])
            leader = re.search(r"#ControllerLeaderAddress\s+(\S+)", out)
            assert leader is not None and leader.group(1) == await cluster.wait_leader(admin), out
            peers = re.findall(r"#Peer:\s+(\S+)", out)
            assert sorted(peer.split(":", 1)[1] for peer in peers) == sorted(cluster.addresses), out

            # the brokers' own epoch files (1007, served by the brokers): every replica has the
            # master's epoch entry
            out = await _mqadmin_ok(rmq, "getBrokerEpoch", "-n", rmq.namesrv.address, "-b", GROUP)
            epochs = _broker_epochs(out)
            assert sorted(epochs) == sorted([0, *(b.broker_id() or 0 for b in brokers if b is not master)]), out
            assert all(entries and entries[-1][0] == epoch for entries in epochs.values()), out

            # the NameServer's view: the master registered as BID 0, the slaves by their ids
            out = await _mqadmin_ok(rmq, "clusterList", "-n", rmq.namesrv.address)
            rows = _cluster_list(out)
            assert rows[0] == (master.address, True), out
            assert {bid: row[0] for bid, row in rows.items() if bid} == \
                {b.broker_id(): b.address for b in brokers if b is not master}, out
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()


async def test_master_killed_under_producer_fails_over_without_loss(tmp_path: Path) -> None:
    """SIGKILL the master while the Producer sends: rmqc elects a slave of the SyncStateSet, it
    becomes master, sends succeed again; the old master, restarted, rejoins as a slave and is back
    in the SyncStateSet; every message acknowledged (SEND_OK) is consumed afterwards."""
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    rmq = RocketMQ(tmp_path)
    timeline: dict[str, int] = {}
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10) as admin:
            await cluster.wait_leader(admin)
            brokers = await _bring_up(rmq, cluster, admin)
            old_master_id, old_epoch, _ = await _replica_state(admin)
            old_master = next(b for b in brokers if b.broker_id() == old_master_id)
            assert rmq.namesrv is not None
            await _mqadmin_ok(rmq, "updateTopic", "-n", rmq.namesrv.address, "-c", CLUSTER, "-t", TOPIC,
                              "-r", "4", "-w", "4")

            producer = rmq.producer(TOPIC, interval_ms=10)

            def sends() -> list[dict[str, Any]]:
                return [line for line in producer.json_lines() if line["event"] == "send"]

            def acked() -> list[dict[str, Any]]:
                return [line for line in sends() if line["result"] == "ok"]

            async def acked_at_least(count: int) -> bool:
                assert producer.running, producer.tail()
                return len(acked()) >= count

            await wait_until(lambda: acked_at_least(200), 60, "200 messages acknowledged before the kill",
                             interval_s=0.1)

            timeline["kill"] = _now_ms()
            old_master.kill(signal.SIGKILL)
            await old_master.wait_exit()

            async def new_master() -> bool:
                master, epoch, in_sync = await _replica_state(admin)
                if master is not None and master != old_master_id:
                    timeline.setdefault("controller_elected", _now_ms())
                    return epoch > old_epoch and old_master_id not in in_sync
                return False

            await wait_until(new_master, 30, "rmqc elects a slave of the SyncStateSet", interval_s=0.05)
            new_master_id, new_epoch, in_sync = await _replica_state(admin)
            assert new_master_id in ALL and new_master_id != old_master_id
            promoted = next(b for b in brokers if b.broker_id() == new_master_id)

            def first_ok_after_kill() -> dict[str, Any] | None:
                return next((line for line in acked() if line["sendMs"] > timeline["kill"]), None)

            async def resumed() -> bool:
                assert producer.running, producer.tail()
                return first_ok_after_kill() is not None

            await wait_until(resumed, 60, "a send acknowledged after the kill", interval_s=0.1)
            first = first_ok_after_kill()
            assert first is not None and first["broker"] == GROUP
            timeline["first_ok_send_after_kill"] = first["sendMs"]
            timeline["first_ok_ack_after_kill"] = first["ackMs"]
            last_before = max((line["ackMs"] for line in acked() if line["ackMs"] <= timeline["kill"]), default=0)
            timeline["last_ok_ack_before_kill"] = last_before
            failed_sends = [line for line in sends() if line["result"] != "ok"]

            # the NameServer now lists the promoted slave as BID 0
            out = await _mqadmin_ok(rmq, "clusterList", "-n", rmq.namesrv.address)
            assert _cluster_list(out).get(0, ("", False))[0] == promoted.address, out

            # the old master comes back on its store: a slave of the new master, back in the set
            old_master.spawn()
            await old_master.wait_booted()

            async def old_master_back_in_sync() -> bool:
                master, _, members = await _replica_state(admin)
                return master == new_master_id and members == ALL

            await wait_until(old_master_back_in_sync, 90, "the old master back in the SyncStateSet", interval_s=0.2)
            timeline["old_master_back_in_sync"] = _now_ms()
            controllers = ";".join(cluster.addresses)
            state = parse_sync_state_set(await _mqadmin_ok(rmq, "getSyncStateSet", "-a", controllers, "-b", GROUP))
            assert state["MasterBrokerId"] == new_master_id and state["MasterAddr"] == promoted.address, state
            assert state["MasterEpoch"] == new_epoch and state["SyncStateSetNums"] == 3, state
            epochs = _broker_epochs(await _mqadmin_ok(rmq, "getBrokerEpoch", "-n", rmq.namesrv.address,
                                                      "-b", GROUP))
            assert sorted(epochs) == sorted([0, *(i for i in ALL if i != new_master_id)]), epochs
            assert all(entries[-1][0] == new_epoch for entries in epochs.values()), epochs

            # a few more sends with all three in sync, then stop the producer and consume
            sent_before = len(acked())
            await wait_until(lambda: acked_at_least(sent_before + 50), 60, "sends after the rejoin", interval_s=0.1)
            producer.kill(signal.SIGTERM)
            await producer.wait_exit()
            acknowledged = {f"rmqc-{line['seq']}" for line in acked()}
            consumer = rmq.consumer(TOPIC)

            def consumed() -> set[str]:
                return {line["body"] for line in consumer.json_lines() if line["event"] == "recv"}

            async def all_consumed() -> bool:
                assert consumer.running, consumer.tail()
                return acknowledged <= consumed()

            with contextlib.suppress(AssertionError):  # the count of lost messages says it better
                await wait_until(all_consumed, 90, "every acknowledged message consumed", interval_s=0.2)
            lost = sorted(acknowledged - consumed(), key=lambda body: int(body.split("-")[1]))
            report = {
                "acknowledged": len(acknowledged), "failed_sends": len(failed_sends), "consumed": len(consumed()),
                "lost": len(lost),
                "kill_to_controller_elected_ms": timeline["controller_elected"] - timeline["kill"],
                "kill_to_first_ok_send_ms": timeline["first_ok_send_after_kill"] - timeline["kill"],
                "kill_to_first_ok_ack_ms": timeline["first_ok_ack_after_kill"] - timeline["kill"],
                "write_gap_ms": timeline["first_ok_ack_after_kill"] - timeline["last_ok_ack_before_kill"],
                "restart_to_back_in_sync_ms": timeline["old_master_back_in_sync"] - timeline["first_ok_ack_after_kill"],
            }
            print("interop failover timeline:", report)
            assert not lost, f"{len(lost)} acknowledged messages never consumed, e.g. {lost[:10]}"
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        print("timeline:", timeline)
        raise
    finally:
        await cluster.stop()
