"""Real `rmqc serve` processes: a 3-node cluster elects a leader, brokers of several groups
register and get masters, the leader is killed with SIGKILL and nothing committed is lost, a dead
broker master is replaced from the sync state set with 1008 to the other replica, and a node that
was down catches up through a snapshot."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.fsm import ControllerState, decode_commands
from rmqc.raft import EntryType
from rmqc.storage import LmdbStorage
from rmqc.testing.cluster import CLUSTER, Cluster, FakeBroker, replica_info, start_group, wait_until

pytestmark = pytest.mark.slow
GROUPS = ("broker-a", "broker-b", "broker-c")


async def test_three_nodes_survive_leader_kill_and_broker_master_crash(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            groups = {name: await start_group(nursery, cluster, name) for name in GROUPS}
            before = {name: await replica_info(admin, name) for name in GROUPS}
            assert all(info[0] == "1" for info in before.values())

            cluster.node(leader).kill(signal.SIGKILL)
            await cluster.node(leader).wait_exit()
            survivors = [node for node in cluster.nodes if node.running]
            new_leader = await cluster.wait_leader(admin, among=survivors)
            assert new_leader != leader
            # writes work on the new leader, and nothing committed before the kill is lost
            extra = FakeBroker("broker-d", cluster.addresses)
            await nursery.start(extra.run)
            await extra.register()
            assert extra.broker_id == 1
            for name in GROUPS:
                assert await replica_info(admin, name) == before[name], name
                answer = await admin.get_next_broker_id(CLUSTER, name)
                assert answer.ext("nextBrokerId") == "3"

            # broker-a's master process dies: the leader elects replica 2 from the sync state set
            master, replica = groups["broker-a"]
            master.crash()

            async def replica_promoted() -> bool:
                info = await replica_info(admin, "broker-a")
                return info[0] == str(replica.broker_id)

            await wait_until(replica_promoted, 10, "broker-a master moved to replica 2")
            await wait_until(_async(lambda: any(c.ext("masterBrokerId") == str(replica.broker_id)
                                                for c in replica.notifications())), 5, "1008 at replica 2")
            notice = next(c for c in replica.notifications() if c.ext("masterBrokerId") == str(replica.broker_id))
            assert notice.is_oneway and notice.ext("masterAddress") == replica.address
            _, epoch, body = await replica_info(admin, "broker-a")
            assert int(epoch) == int(before["broker-a"][1]) + 1
            assert body["syncStateSet"] == [replica.broker_id]
            for name in ("broker-b", "broker-c"):  # other groups keep their masters
                assert (await replica_info(admin, name))[0] == "1"
            nursery.cancel_scope.cancel()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()


def _async(condition):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return bool(condition())

    return check


async def test_restarted_node_catches_up_through_a_snapshot(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3, settings=("snapshot_every_entries=20",))
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            follower = next(node for node in cluster.nodes if node.address != leader)
            follower.kill(signal.SIGTERM)
            assert await follower.wait_exit() == 0  # graceful shutdown
            with LmdbStorage(follower.data_dir, readonly=True) as storage:
                follower_last = storage.last_index()
            for number in range(60):
                address = f"10.0.0.{number}:30911"
                answer = await admin.apply_broker_id(CLUSTER, f"group-{number}", 1, f"{address};1")
                assert answer.code == 0, answer.remark
            with LmdbStorage(cluster.node(leader).data_dir, readonly=True) as storage:
                # the entries the follower misses are gone from the leader's log: only a snapshot helps
                assert storage.first_index() > follower_last + 1
                leader_last = storage.last_index()
            await follower.start()

            async def caught_up() -> bool:
                with LmdbStorage(follower.data_dir, readonly=True) as storage:
                    return storage.last_index() >= leader_last
            await wait_until(caught_up, 15, "restarted follower's log reaching the leader's")
            state = _replay(follower.data_dir)
            assert {f"group-{number}" for number in range(60)} <= {group.broker_name for group in state.groups()}
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()


def _replay(data_dir: Path) -> ControllerState:
    """The controller state a node's files hold: its snapshot plus the entries after it."""
    state = ControllerState()
    with LmdbStorage(data_dir, readonly=True) as storage:
        snapshot = storage.snapshot()
        if not snapshot.is_empty:
            state.restore(snapshot.data)
        for entry in storage.entries(storage.first_index(), storage.last_index() + 1):
            if entry.type == EntryType.NORMAL and entry.data:
                state.apply_all(decode_commands(entry.data))
    return state
