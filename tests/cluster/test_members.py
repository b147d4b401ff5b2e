"""Membership changes on real `rmqc serve` processes (issue 16), through `rmqc admin members`:
grow 3 -> 5 and shrink 5 -> 3 while a broker group heartbeats and a writer registers brokers (every
change answered, no acknowledged write lost, the group keeps its master, one leader per term);
replace a SIGKILLed node by a new one on another port; remove the leader, then down to the last
voter; and the refusals (a second change while one is pending, the last voter, a lagging learner,
an unknown id, an address in use), each exit 1 with the reason on stderr and nothing changed; a
node started with --join that the group refuses exits 1 with the reason."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.launcher import ServeNode, rmqc_argv
from rmqc.remoting import RMQC_NODE_STATUS, RequestCode, ResponseCode
from rmqc.testing.cluster import Cluster, free_ports, replica_info, start_group, wait_until
from rmqc.testing.writer import WriteLoad

pytestmark = pytest.mark.slow
CATCH_UP_S = 30.0
WATCH_EVERY_S = 0.05
LAGGING_ENTRIES = 100  # more than a learner may trail the commit index and be promoted (64)


async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process([*rmqc_argv(), *args], capture_stdout=True, capture_stderr=True, check=False)


async def members(controllers: str) -> dict[str, dict[str, Any]]:
    listed = await cli("admin", "members", "list", "-a", controllers, "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["id"]: row for row in orjson.loads(listed.stdout)}


async def change(*args: str, controllers: str) -> dict[str, Any]:
    done = await cli("admin", "members", *args, "-a", controllers, "--json")
    assert done.returncode == 0, (args, done.stderr)
    return dict(orjson.loads(done.stdout))


async def refused(*args: str, controllers: str, reason: str) -> None:
    """`rmqc admin members ARGS` exits 1 with `reason` (and what to do) on stderr."""
    done = await cli("admin", "members", *args, "-a", controllers)
    assert done.returncode == 1 and reason.encode() in done.stderr, (args, done.returncode, done.stderr)
    assert b"what to do:" in done.stderr


async def start_joiner(cluster: Cluster, root: Path, node_id: str, join: str) -> ServeNode:
    """A new node on a fresh port and an empty data directory, started with --join."""
    (port,) = free_ports(1)
    node = ServeNode(node_id, f"127.0.0.1:{port}", "", root / node_id, root / f"{node_id}.log", join=join)
    cluster.nodes.append(node)
    await node.start()
    return node


async def promote_when_caught_up(node_id: str, controllers: str) -> dict[str, Any]:
    """`members promote`, asked again while the leader says the learner has not caught up."""
    promoted: list[dict[str, Any]] = []

    async def promote() -> bool:
        done = await cli("admin", "members", "promote", node_id, "-a", controllers, "--json")
        if done.returncode == 0:
            promoted.append(dict(orjson.loads(done.stdout)))
        else:
            assert b"has not caught up" in done.stderr, done.stderr
        return bool(promoted)

    await wait_until(promote, CATCH_UP_S, f"{node_id} to catch up and be promoted", interval_s=0.1)
    return promoted[0]


class LeaderWatch:
    """Asks every running node for its status every WATCH_EVERY_S: at most one leader per term."""

    def __init__(self, cluster: Cluster, client: ControllerClient) -> None:
        self.cluster, self.client = cluster, client
        self.leaders: dict[int, set[str]] = {}

    async def run(self) -> None:
        while True:
            for node in [node for node in self.cluster.nodes if node.running]:
                try:
                    answer = await self.client.request(RMQC_NODE_STATUS, None, address=node.address)
                except ClientError:
                    continue
                status = orjson.loads(answer.body or b"{}")
                if status.get("role") == "leader":
                    self.leaders.setdefault(status["term"], set()).add(status["nodeId"])
            await trio.sleep(WATCH_EVERY_S)  # the sampling rate, not a wait for a condition

    def check(self) -> None:
        assert self.leaders, "no leader seen"
        assert all(len(ids) == 1 for ids in self.leaders.values()), self.leaders


async def cancellable(scope: trio.CancelScope, run: Callable[..., Awaitable[None]], *,
                      task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    with scope:
        await run(task_status=task_status)


async def test_grow_to_five_and_shrink_to_three_under_load(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, timeout_ms=12_000,
                                                                    max_retries=10) as admin:
            leader = cluster.node(await cluster.wait_leader(admin))
            await start_group(nursery, cluster, "broker-a")
            master_before = await replica_info(admin, "broker-a")
            load, writing = WriteLoad(cluster.addresses), trio.CancelScope()
            await nursery.start(cancellable, writing, load.run)
            watch = LeaderWatch(cluster, admin)
            nursery.start_soon(watch.run)
            controllers = cluster.controllers

            # n3 the operator's way (add, then start it: it finds itself added), n4 by --join alone
            (port,) = free_ports(1)
            added = await change("add", "n3", f"127.0.0.1:{port}", controllers=controllers)
            assert added["change"] == "add_learner" and "n3" in added["learners"]
            n3 = ServeNode("n3", f"127.0.0.1:{port}", "", tmp_path / "n3", tmp_path / "n3.log", join=controllers)
            cluster.nodes.append(n3)
            await n3.start()
            await start_joiner(cluster, tmp_path, "n4", join=leader.address)
            for node_id in ("n3", "n4"):
                assert node_id in (await promote_when_caught_up(node_id, controllers))["voters"]
            rows = await members(controllers)
            assert sorted(rows) == ["n0", "n1", "n2", "n3", "n4"] and {r["role"] for r in rows.values()} == {"voter"}
            assert sum(row["isLeader"] for row in rows.values()) == 1

            removed = [node for node in cluster.nodes[:3] if node is not leader]
            for node in removed:
                assert node.node_id not in (await change("remove", node.node_id, controllers=controllers))["voters"]
                node.kill(signal.SIGTERM)  # then stop the removed node's process (docs/operations.md)
                await node.wait_exit()
            rows = await members(controllers)
            assert sorted(rows) == sorted([leader.node_id, "n3", "n4"])
            await load.wait_acks(100, after=time.perf_counter(), timeout_s=15)  # the three left take writes
            writing.cancel()
            assert await load.lost_writes(admin) == {}
            assert await replica_info(admin, "broker-a") == master_before  # the brokers kept their master
            watch.check()
            nursery.cancel_scope.cancel()
    finally:
        await cluster.stop()


async def test_replace_a_killed_node_by_a_new_one_on_another_port(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=12_000, max_retries=10) as admin:
            leader = cluster.node(await cluster.wait_leader(admin))
            controllers = cluster.controllers
            dead = next(node for node in cluster.nodes if node is not leader)
            dead.kill(signal.SIGKILL)
            await dead.wait_exit()
            await refusals_with_three_voters(cluster, controllers)
            await joiner_refused_at_a_members_address(tmp_path, dead, leader)

            new = await start_joiner(cluster, tmp_path, "n3", join=leader.address)
            done = await cli("admin", "members", "replace", dead.node_id, "n3", new.address, "-a", controllers,
                             "--json")
            assert done.returncode == 0, done.stderr
            replaced = orjson.loads(done.stdout)
            assert replaced["replaced"] and [step["change"] for step in replaced["steps"]] == [
                "promote", "remove"]  # --join had added it already: replace went on from there
            rows = await members(controllers)
            assert sorted(rows) == sorted(node.node_id for node in cluster.nodes if node is not dead)
            assert rows["n3"] == {**rows["n3"], "address": new.address, "role": "voter"}
            # the group commits with the new node: a write through it, then its own applied state
            async with ControllerClient([new.address], timeout_ms=8000, max_retries=10) as through_new:
                applied = await through_new.apply_broker_id("C", "broker-r", 1, "10.0.0.9:10911;1")
                assert applied.code == 0, applied.remark
                answer = await through_new.get_next_broker_id("C", "broker-r", address=new.address)
                assert answer.ext("nextBrokerId") == "2"
    finally:
        await cluster.stop()


async def joiner_refused_at_a_members_address(root: Path, dead: ServeNode, member: ServeNode) -> None:
    """A new id started with --join on the dead member's port: the group refuses it (the address
    belongs to a member) and the node exits 1 with the reason, instead of waiting forever."""
    wrong = ServeNode("n9", dead.address, "", root / "n9", root / "n9.log", join=member.address)
    wrong.spawn()
    assert await wrong.wait_exit(30) == 1
    assert f"refused to add n9 at {dead.address}: address {dead.address} is already used by member " \
           f"{dead.node_id}" in wrong.log_tail()


async def refusals_with_three_voters(cluster: Cluster, controllers: str) -> None:
    """Unknown id, an address in use, a learner that cannot catch up: refused, nothing changed."""
    async with ControllerClient(cluster.addresses, timeout_ms=8000, max_retries=10) as writer:
        for broker_id in range(1, LAGGING_ENTRIES + 1):  # a log the lagging learner is far behind
            applied = await writer.apply_broker_id("C", "broker-l", broker_id, f"10.0.0.8:10911;{broker_id}")
            assert applied.code == 0, applied.remark
    before = {node_id: (row["address"], row["role"]) for node_id, row in (await members(controllers)).items()}
    await refused("remove", "n9", controllers=controllers, reason="unknown id 'n9'")
    await refused("add", "n9", cluster.nodes[0].address, controllers=controllers, reason="is already used by member")
    (port,) = free_ports(1)  # nothing will listen there: the learner never catches up
    await change("add", "n8", f"127.0.0.1:{port}", controllers=controllers)
    await refused("promote", "n8", controllers=controllers, reason="has not caught up")
    await change("remove", "n8", controllers=controllers)
    after = {node_id: (row["address"], row["role"]) for node_id, row in (await members(controllers)).items()}
    assert after == before


async def test_remove_the_leader_then_down_to_the_last_voter(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, timeout_ms=12_000,
                                                                    max_retries=10) as admin:
            old = cluster.node(await cluster.wait_leader(admin))
            controllers = cluster.controllers
            await second_change_while_one_is_pending(cluster, old, controllers)
            load, writing = WriteLoad(cluster.addresses), trio.CancelScope()
            await nursery.start(cancellable, writing, load.run)

            gone = await change("remove", old.node_id, controllers=controllers)
            assert old.node_id not in gone["voters"] and len(gone["voters"]) == 2
            # the removed node sends clients to the leader (it no longer forwards anything) ...
            refused_write = await admin.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": "C", "brokerName": "broker-x", "appliedBrokerId": 1,
                "registerCheckCode": "10.0.0.7:10911;1"}, address=old.address)
            assert refused_write is not None and refused_write.code == ResponseCode.CONTROLLER_NOT_LEADER
            old.kill(signal.SIGTERM)  # ... until its process is stopped, as docs/operations.md says
            await old.wait_exit()
            others = [node for node in cluster.nodes if node is not old]
            new = cluster.node(await cluster.wait_leader(admin, among=others))
            assert new is not old
            rows = await members(controllers)
            assert sorted(rows) == sorted(node.node_id for node in others) and rows[new.node_id]["isLeader"]
            await load.wait_acks(50, after=time.perf_counter(), timeout_s=15)  # the two left take writes
            writing.cancel()
            assert await load.lost_writes(admin) == {}

            follower = next(node for node in others if node is not new)
            await change("remove", follower.node_id, controllers=controllers)
            await refused("remove", new.node_id, controllers=controllers, reason="is the last voter")
            assert sorted(await members(controllers)) == [new.node_id]
            nursery.cancel_scope.cancel()
    finally:
        await cluster.stop()


async def second_change_while_one_is_pending(cluster: Cluster, leader: ServeNode, controllers: str) -> None:
    """With both followers paused the leader's change cannot commit: it stays pending, and a second
    change meanwhile is refused (in-process requests: the pause must stay well inside an election
    timeout, or CheckQuorum deposes the leader). Resumed, the first one is applied."""
    followers = [node for node in cluster.nodes if node is not leader]
    first_port, second_port = free_ports(2)
    first: list[Any] = []
    async with ControllerClient([leader.address], timeout_ms=8000, max_retries=0) as client, \
            trio.open_nursery() as nursery:  # the nursery ends first: the first add is answered
        for node in followers:
            node.kill(signal.SIGSTOP)
        try:
            async def add_first() -> None:
                first.append(await client.add_member("n8", f"127.0.0.1:{first_port}"))

            nursery.start_soon(add_first)
            async def pending() -> bool:
                return await pending_change(client, leader) is not None

            await wait_until(pending, 2, "the first change to be pending", interval_s=0.005)
            second = await client.add_member("n9", f"127.0.0.1:{second_port}")
        finally:
            for node in followers:
                node.kill(signal.SIGCONT)
    assert second.code == 1 and "is pending" in (second.remark or ""), second.remark
    assert first[0].code == 0, first[0].remark
    assert "n9" not in await members(controllers)
    await change("remove", "n8", controllers=controllers)


async def pending_change(client: ControllerClient, node: ServeNode) -> dict[str, Any] | None:
    answer = await client.request(RMQC_NODE_STATUS, None, address=node.address)
    return orjson.loads(answer.body or b"{}").get("pendingConfChange")


async def test_a_node_joining_behind_a_snapshot_catches_up_and_is_promoted(tmp_path: Path) -> None:
    """The group snapshots every 100 entries and compacts its log, so a node that joins empty gets a
    snapshot first. The snapshot carries the address book: without it (peer protocol 2) the new
    node knew no member's address once it installed the snapshot, refused every link, and never
    caught up."""
    cluster = Cluster.create(tmp_path, 3, ("snapshot_every_entries=100",))
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses) as admin:
            leader = cluster.node(await cluster.wait_leader(admin))
            load, writing = WriteLoad(cluster.addresses), trio.CancelScope()
            await nursery.start(cancellable, writing, load.run)
            await load.wait_acks(400, timeout_s=60)  # several snapshots, the early log compacted away
            joiner = await start_joiner(cluster, tmp_path, "n3", join=leader.address)
            assert "n3" in (await promote_when_caught_up("n3", cluster.controllers))["voters"]
            writing.cancel()
            assert "installed snapshot" in joiner.log_path.read_text()
            assert await load.lost_writes(admin) == {}
            nursery.cancel_scope.cancel()
    finally:
        await cluster.stop()
