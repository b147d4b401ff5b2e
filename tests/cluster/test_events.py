"""`rmqc events` on a real 3-node cluster of `rmqc serve` processes with simulated broker groups:
one master's connections are closed (a crashed process), another master hangs (its heartbeats stop,
its connections stay open). Every node, asked with the real `rmqc events --json` command, reports
each failover once with its reason, the candidates weighed and the committed timeline; every node
saw the new master's first heartbeat naming the new masterEpoch and the 1008 the leader sent each
live replica and the hung master (the leader commits a record of each). A `--follow` reader
started on a follower before the kills streams the failovers as they happen.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from rmqc.brokersim import BrokerFleet, SimTiming
from rmqc.cli.dev import LocalCluster
from rmqc.liveness import DEFAULT_ELECTION_PRIORITY

STARTUP_BOUND_S = 120.0
# The hung master is found by its heartbeat deadline (TIMING's 3 s), the closed one at once; the
# steps after the commit take one heartbeat interval of the new master.
EVENTS_BOUND_S = 60.0
POLL_S = 0.5  # between two `rmqc events` runs (each starts a Python process)
TIMING = dataclasses.replace(SimTiming.fast(), rpc_timeout_ms=5000)
RMQC = [str(Path(sys.executable).with_name("rmqc"))]  # the console script of this environment


@pytest.mark.slow
@pytest.mark.timeout(STARTUP_BOUND_S + 2 * EVENTS_BOUND_S + 60)
def test_every_node_explains_each_failover_with_its_timeline(tmp_path: Path) -> None:
    with LocalCluster(3, data_dir=tmp_path / "cluster") as cluster:
        trio.run(_fail_two_masters_and_read_events, cluster.addresses, tmp_path / "sim")


async def _fail_two_masters_and_read_events(controllers: list[str], state_dir: Path) -> None:
    async with BrokerFleet(controllers, groups=2, replicas=3, state_dir=state_dir, timing=TIMING,
                           seed=20261127) as fleet:
        await fleet.wait_converged(STARTUP_BOUND_S, full_sync_state_sets=True)
        closed, hung = fleet.group_names
        old_masters = {name: fleet.master_of(name) for name in (closed, hung)}
        assert None not in old_masters.values(), f"seed {fleet.seed}: a group without a master"
        async with trio.open_nursery() as nursery:
            follower = await _a_follower(controllers)
            followed: list[dict[str, Any]] = []
            await nursery.start(_follow, follower, followed)
            fleet.kill(closed, old_masters[closed])  # type: ignore[arg-type]
            fleet.hang(hung, old_masters[hung])  # type: ignore[arg-type]
            expected = {closed: "master_connection_closed", hung: "heartbeat_deadline_missed"}
            per_node = await _poll_until_complete(controllers, expected, fleet)
            with trio.fail_after(EVENTS_BOUND_S):  # the stream shows them too, as they happened
                while {e["brokerName"] for e in followed if e["kind"] == "failover"} != set(expected):
                    await trio.sleep(POLL_S)
            nursery.cancel_scope.cancel()
        for name, reason in expected.items():
            _check_failover(per_node, name, reason, old_masters[name], fleet)  # type: ignore[arg-type]
        text = await _rmqc("events", "-a", follower)  # the lines an operator reads, from a follower
        print(text)
        lines = text.splitlines()
        for name, reason in expected.items():
            assert any(f"failover {name}: master {old_masters[name]} -> {fleet.master_of(name)}" in line
                       and f"reason {reason}" in line and "committed +" in line for line in lines)
            assert any(f"{name} masterEpoch " in line and "1008 sent to broker" in line for line in lines)


async def _poll_until_complete(controllers: list[str], expected: dict[str, str],
                               fleet: BrokerFleet) -> dict[str, list[dict[str, Any]]]:
    """Every node's events, once each node has every failover with the new master heard and the
    1008 sent to every live replica."""
    with trio.fail_after(EVENTS_BOUND_S):
        while True:
            per_node = {address: await _events_of(address) for address in controllers}
            if all(_complete(per_node, name, fleet) for name in expected):
                return per_node
            await trio.sleep(POLL_S)


def _complete(per_node: dict[str, list[dict[str, Any]]], name: str, fleet: BrokerFleet) -> bool:
    new_master = fleet.master_of(name)
    if new_master is None:
        return False
    epoch = _new_epoch(fleet, name, new_master)
    heard = all(any(_is_step(e, name, "heartbeat", new_master, epoch) for e in events) for events in per_node.values())
    live = _live_ids(fleet, name)
    notified = all(all(any(_is_step(e, name, "notified", broker_id, epoch) for e in events) for broker_id in live)
                   for events in per_node.values())
    return heard and notified


def _check_failover(per_node: dict[str, list[dict[str, Any]]], name: str, reason: str, old_master: int,
                    fleet: BrokerFleet) -> None:
    """Checks what every node reports of the failover of `name`."""
    new_master = fleet.master_of(name)
    assert new_master is not None
    epoch = _new_epoch(fleet, name, new_master)
    live = _live_ids(fleet, name)
    for address, events in per_node.items():
        failovers = [e for e in events if e["kind"] == "failover" and e["brokerName"] == name
                     and e["oldMaster"] == old_master]
        assert len(failovers) == 1, f"{address}: {name}: {failovers}"
        [failover] = failovers
        assert failover["reason"] == reason and failover["trigger"] == "controller", f"{address}: {failover}"
        assert failover["newMaster"] == new_master
        assert sorted(c["brokerId"] for c in failover["candidates"]) == live, f"{address}: {failover}"
        for c in failover["candidates"]:  # the policy's inputs as last heard: at most what the broker has now
            broker = fleet.broker(name, c["brokerId"])
            assert c["inSyncStateSet"] and c["epoch"] <= broker.epoch and 0 <= c["maxOffset"] <= broker.max_offset
            assert c["priority"] == DEFAULT_ELECTION_PRIORITY, orjson.dumps(failover).decode()
        t = failover["timeline"]
        assert t["masterLastAliveMs"] <= t["detectedMs"] <= t["proposedMs"] <= t["committedMs"], f"{address}: {t}"
        if reason == "heartbeat_deadline_missed":
            # detected after the deadline (3 s of silence), and by how much it was missed
            assert t["detectedMs"] - t["masterLastAliveMs"] >= TIMING.heartbeat_timeout_ms
            assert failover["deadlineMissedByMs"] is not None and failover["deadlineMissedByMs"] >= 0
        else:
            assert failover["deadlineMissedByMs"] is None
        assert failover["masterEpoch"] == epoch
        [heard] = [e for e in events if _is_step(e, name, "heartbeat", new_master, epoch)]
        assert heard["masterEpoch"] == failover["masterEpoch"] == heard["epoch"]
        assert heard["afterCommitMs"] >= 0 and heard["seq"] > failover["seq"]
        # the leader's record of each 1008, the same on every node: once per live replica, and once
        # for the hung master too (deposed while it still runs, it is told at once; the killed one's
        # port refuses the 1008)
        notified = [e for e in events if e["kind"] == "failover_step" and e["step"] == "notified"
                    and e["brokerName"] == name and e["masterEpoch"] == epoch]
        told = sorted([*live, old_master]) if reason == "heartbeat_deadline_missed" else live
        assert sorted(e["brokerId"] for e in notified) == told, f"{address}: {notified}"
        assert all(e["afterCommitMs"] >= 0 and e["seq"] > failover["seq"] for e in notified)


def _is_step(event: dict[str, Any], name: str, step: str, broker_id: int, epoch: int) -> bool:
    return (event["kind"] == "failover_step" and event["brokerName"] == name and event["step"] == step
            and event["brokerId"] == broker_id and event["masterEpoch"] == epoch)


def _new_epoch(fleet: BrokerFleet, name: str, new_master: int) -> int:
    return fleet.broker(name, new_master).master_epoch


def _live_ids(fleet: BrokerFleet, name: str) -> list[int]:
    return sorted(b.broker_id for b in fleet.group(name) if b.serving)


async def _events_of(address: str) -> list[dict[str, Any]]:
    """What `rmqc events --json` prints for one node."""
    return [orjson.loads(line) for line in (await _rmqc("events", "--json", "-a", address)).splitlines() if line]


async def _rmqc(*args: str) -> str:
    """The real command's output, in a process of its own."""
    done = await trio.run_process([*RMQC, *args], capture_stdout=True, capture_stderr=True, check=False, env=_env())
    assert done.returncode == 0, done.stderr.decode()
    return str(done.stdout.decode())


async def _follow(address: str, into: list[dict[str, Any]], *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """`rmqc events --follow --json` on `address`; each line it prints lands in `into`."""
    async with trio.open_nursery() as nursery:
        process = await nursery.start(partial(trio.run_process, [*RMQC, "events", "--follow", "--json", "-a", address],
                                              stdout=subprocess.PIPE, check=False, env=_env()))
        task_status.started()
        buffer = b""
        assert process.stdout is not None
        async for chunk in process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            into.extend(orjson.loads(line) for line in lines if line.strip())


async def _a_follower(controllers: list[str]) -> str:
    from rmqc.client import ControllerClient

    async with ControllerClient(controllers) as client:
        metadata = await client.get_metadata(controllers[0])
    leader = metadata.ext("controllerLeaderAddress")
    return next(address for address in controllers if address != leader)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}
