"""Helpers for simulator tests: an in-process controller node on a free loopback port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from rmqc.cli.dev import free_ports
from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode

NODE_START_TIMEOUT_S = 30.0


@asynccontextmanager
async def single_node(tmp_path: Path, **changes: object) -> AsyncIterator[ControllerNode]:
    """One controller node serving as leader on 127.0.0.1, stopped when the block ends."""
    (port,) = free_ports(1)
    config = NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0"), **changes)
    node = ControllerNode(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        with trio.fail_after(NODE_START_TIMEOUT_S):
            while node.replica is None or not node.replica.serving_as_leader:
                await trio.sleep(0.01)
        yield node
        nursery.cancel_scope.cancel()
