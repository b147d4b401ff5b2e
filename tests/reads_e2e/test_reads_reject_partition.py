"""Issue 19 on real `rmqc serve` processes: the leader is cut off REJECT-style (every peer link of it
reset, reconnections refused both ways, so the survivors take it for dead and take over at once)
while its process and its client port stay up. A client applies broker ids (1013) through the
other nodes and reads nextBrokerId (1012) with `lease` and `linearizable` reads on every node, the
old leader included. The history must be linearizable, round after round: no node may answer from
state that a write acknowledged before the read began had already changed.

The register is one broker group per round: 1013 of id k (one writer, ids in order, a failed id
retried until acknowledged) makes nextBrokerId k + 1, and a 1012 read returns it (1 before any)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from reads_helpers import CLUSTER, MAX_OPS, now_ns
from test_reads_cluster import proxied_cluster, wait_leader

from rmqc.chaos._tcp_proxy import ProxyMesh
from rmqc.client import ClientError, ControllerClient
from rmqc.node._peers import STABLE_CONNECTION_S
from rmqc.remoting import RequestCode
from rmqc.testing import Op, check_history, write_history
from rmqc.testing.cluster import Cluster, NodeProcess, free_ports, wait_until

pytestmark = pytest.mark.slow
ROUNDS = 4
LEVELS = ("lease", "linearizable")
READERS_PER_NODE_AND_LEVEL = 2
WRITES_BEFORE_CUT = 5
WRITES_AFTER_CUT = 10
ROUND_BOUND_S = 20.0  # a round takes about 1.5 s; this bound only turns a hang into a failure
# what a survivor logs when it takes over from a leader whose port refuses it: the designated
# successor at once, the others after a grace period if no leader appeared
TAKEOVER_LOGS = ("campaigning at once as its successor", "went down; campaigning")


class RoundLoad:
    """One round's writer and readers; every op lands in the shared history."""

    def __init__(self, client: ControllerClient, group: str, ops: list[Op]) -> None:
        self.client = client
        self.group = group
        self.ops = ops
        self.acked_ids = 0  # the writer's last acknowledged broker id
        self.cut_ns: int | None = None
        self.old_leader: str | None = None
        self.old_leader_lease_reads_after_cut = 0

    def add(self, op: Op) -> None:
        if len(self.ops) >= MAX_OPS:
            raise AssertionError(f"more than {MAX_OPS} ops recorded")
        self.ops.append(op)

    async def writer(self, nodes: list[NodeProcess], rng: random.Random) -> None:
        """1013 for ids 1, 2, ... through the nodes other than the old leader (forwarded to the
        leader). An id whose answer was not a success is retried until acknowledged: 1013 is
        idempotent per id, so all attempts at one id are ONE write, in effect at some instant
        between the first attempt and the acknowledged one (or with an unknown outcome if the
        round ends first). Recording each failed attempt as a write of unknown outcome instead
        would make the checker's search explode over equivalent orders."""
        first_invoke: int | None = None
        try:
            while True:
                broker_id = self.acked_ids + 1
                node = rng.choice([n for n in nodes if n.node_id != self.old_leader])
                ext = {"clusterName": CLUSTER, "brokerName": self.group, "appliedBrokerId": broker_id,
                       "registerCheckCode": f"10.0.0.{broker_id}:1;1700000000000"}
                if first_invoke is None:
                    first_invoke = now_ns()
                try:
                    answer = await self.client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext,
                                                       address=node.address)
                except ClientError:
                    answer = None
                if answer is not None and answer.code == 0:
                    self.add(Op("writer", self.group, "write", str(broker_id + 1), first_invoke, now_ns()))
                    self.acked_ids, first_invoke = broker_id, None
                else:
                    await trio.sleep(0.01)  # a failover is under way: do not spin on refusals
        finally:
            if first_invoke is not None:  # tried, never acknowledged: it may still take effect
                self.add(Op("writer", self.group, "write", str(self.acked_ids + 2), first_invoke, None))

    async def reader(self, node: NodeProcess, level: str, name: str) -> None:
        ext = {"clusterName": CLUSTER, "brokerName": self.group, "consistency": level}
        while True:
            invoke = now_ns()
            try:
                answer = await self.client.request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, ext,
                                                   address=node.address)
            except ClientError:
                answer = None
            if answer is not None and answer.code == 0:
                self.add(Op(f"{name}@{level}", self.group, "read", answer.ext("nextBrokerId"), invoke, now_ns()))
                if level == "lease" and node.node_id == self.old_leader and self.cut_ns and invoke > self.cut_ns:
                    self.old_leader_lease_reads_after_cut += 1
            else:
                await trio.sleep(0.005)  # refused (no leader reachable yet): ask again shortly


async def test_reads_stay_linearizable_when_the_leader_is_cut_off_reject_style(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    mesh = ProxyMesh({f"n{i}": port for i, port in enumerate(free_ports(3))})
    ops: list[Op] = []
    lease_reads_on_old_leader = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(mesh.run)
        cluster = proxied_cluster(tmp_path, mesh)
        await cluster.start()
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=3000, max_retries=0,
                                        max_in_flight=1024) as client:
                for round_no in range(ROUNDS):
                    load = RoundLoad(client, f"g{round_no}", ops)
                    with trio.fail_after(ROUND_BOUND_S):
                        await one_round(cluster, mesh, client, load, rng)
                    lease_reads_on_old_leader += load.old_leader_lease_reads_after_cut
        finally:
            await cluster.stop()
        nursery.cancel_scope.cancel()
    write_history(tmp_path / "history.jsonl", ops)
    report_and_check(cluster, ops, lease_reads_on_old_leader, tmp_path, seed)


async def one_round(cluster: Cluster, mesh: ProxyMesh, client: ControllerClient, load: RoundLoad,
                    rng: random.Random) -> None:
    # A peer link that failed within STABLE_CONNECTION_S of connecting reconnects with backoff
    # (up to 0.75 s), and a survivor in backoff may only notice the refusals after the election
    # timeout: let the links healed by the last round age first, so every round takes the fast path.
    links_stable_at = trio.current_time() + STABLE_CONNECTION_S
    leader = await wait_leader(cluster, client)
    load.old_leader = leader.node_id
    async with trio.open_nursery() as round_load:
        round_load.start_soon(load.writer, cluster.nodes, rng)
        for node in cluster.nodes:
            for level in LEVELS:
                for i in range(READERS_PER_NODE_AND_LEVEL):
                    round_load.start_soon(load.reader, node, level, f"{node.node_id}.{i}")
        await until(lambda: load.acked_ids >= WRITES_BEFORE_CUT and trio.current_time() >= links_stable_at,
                    "writes before the cut, on links past their reconnection backoff")
        load.cut_ns = now_ns()
        mesh.reject(leader.node_id)  # its process and client port stay up
        acked_at_cut = load.acked_ids
        await until(lambda: load.acked_ids >= acked_at_cut + WRITES_AFTER_CUT, "writes after the cut")
        await wait_until(lambda: stepped_down(client, leader), ROUND_BOUND_S, "the old leader to step down")
        mesh.heal_all()
        await wait_leader(cluster, client)
        round_load.cancel_scope.cancel()


async def until(condition: Callable[[], bool], what: str, interval_s: float = 0.005) -> None:
    async def check() -> bool:
        return bool(condition())

    await wait_until(check, ROUND_BOUND_S, what, interval_s)


async def stepped_down(client: ControllerClient, node: NodeProcess) -> bool:
    """The old leader no longer names itself leader (CheckQuorum stepped it down)."""
    try:
        answer = await client.get_metadata(address=node.address)
    except ClientError:
        return False
    return answer.ext("controllerLeaderId") != node.node_id


def report_and_check(cluster: Cluster, ops: list[Op], lease_reads_on_old_leader: int, tmp_path: Path,
                     seed: int) -> None:
    reads: dict[str, int] = defaultdict(int)
    for op in ops:
        if op.kind == "read":
            reads[op.process.split(".")[0] + "@" + op.process.rsplit("@", 1)[1]] += 1
    stale = stale_reads(ops)
    takeovers = sum(node.log_path.read_text().count(line) for node in cluster.nodes for line in TAKEOVER_LOGS)
    print("reads per node@level:", dict(sorted(reads.items())))
    print("writes acknowledged:", sum(op.kind == "write" and op.complete_ns is not None for op in ops),
          "| lease reads the old leaders answered after the cut:", lease_reads_on_old_leader,
          "| takeovers:", takeovers, "| stale reads:", len(stale))
    assert takeovers >= ROUNDS, "the survivors did not take over at once (the fast path under test)"
    assert lease_reads_on_old_leader > 0, "no lease read reached an old leader inside its lease"
    for node in cluster.nodes:
        for level in LEVELS:
            assert reads[f"{node.node_id}@{level}"] > 0, (node.node_id, level)
    assert not stale, f"seed {seed}: {len(stale)} stale reads, e.g. {stale[:3]}"
    results = check_history(ops, initial="1")
    bad = [result for result in results if not result.ok]
    assert not bad, (f"seed {seed}; history in {tmp_path / 'history.jsonl'}: "
                     + "; ".join(f"{r.key}: {r.witness}" for r in bad))


def stale_reads(ops: list[Op]) -> list[Op]:
    """Reads that returned less than a write acknowledged before the read was sent (the values of
    one group only grow), as the issue counted them."""
    acked = sorted((op.complete_ns, int(op.value), op.key) for op in ops
                   if op.kind == "write" and op.complete_ns is not None)
    stale = []
    for op in ops:
        if op.kind != "read":
            continue
        floor = max((value for done, value, key in acked if key == op.key and done < op.invoke_ns), default=1)
        if int(op.value) < floor:
            stale.append(op)
    return stale
