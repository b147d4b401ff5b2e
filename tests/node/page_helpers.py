"""Helpers for the status page's tests: an in-process node holding many broker groups."""

from __future__ import annotations

from pathlib import Path

import trio
from node_helpers import free_ports, wait_until

from bench.bench_fsm import CLUSTER, group_commands
from rmqc.config import NodeConfig, parse_peers
from rmqc.liveness import BrokerKey, Heartbeat
from rmqc.node import ControllerNode

# The brokers' heartbeat timeout: none expires during a test (an expiry would elect new masters).
ALIVE_MS = 600_000


async def start_node(nursery: trio.Nursery, tmp_path: Path) -> ControllerNode:
    (port,) = free_ports(1)
    node = ControllerNode(NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0")))
    await nursery.start(node.run)
    await wait_until(lambda: node.replica.serving_as_leader, timeout_s=30, what="the node serving as leader")
    return node


async def fill(node: ControllerNode, groups: int) -> None:
    """`groups` groups of 3 brokers (bench.bench_fsm), each with a master and a full SyncStateSet,
    all alive (heard a moment ago)."""
    register, elect, alter = group_commands(groups)
    for commands in (register, elect, alter):
        await node.propose(commands)
    now_ms = node.replica.now_ms()
    for command in register:
        key = BrokerKey(CLUSTER, command.broker_name, command.broker_id)
        node.replica.liveness.table.update(Heartbeat(key, command.broker_address, ALIVE_MS), now_ms)
