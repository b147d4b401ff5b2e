"""Apache RocketMQ's own controller (DLedger or JRaft mode) as the suite's scenarios see a cluster:
node ids, addresses, processes, start, the leader, restart, stop; the same members as RmqcCluster,
so rmqc's load generators and failover probes drive either one over the same remoting wire.

The JVMs are started by rmqc.javapeers (its JVM flags, `make interop` builds the jars)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import trio

from rmqc.client import ControllerClient
from rmqc.javapeers import JVM_FLAGS, RocketMQ
from rmqc.launcher import Process, ProcessFailed, cpu_s

from ._load import LoadError, RemotingConn
from ._rmqc import durable_write

ROCKETMQ_VERSION = "5.5.0"  # interop/java/pom.xml pins it
MODES = ("dledger", "jraft")
LEADER_TIMEOUT_S = 60.0
# The launcher's JVM flags without -XX:TieredStopAtLevel=1: tests want a fast start (C1 only), a
# benchmark wants the code the JVM runs in production (C2 compiles the hot paths).
BENCH_JVM_FLAGS = tuple(flag for flag in JVM_FLAGS if not flag.startswith("-XX:TieredStopAtLevel"))


class Controllers(Protocol):
    """What a scenario needs of a 3-node controller, rmqc's or Java's."""

    ids: list[str]

    def address(self, node: str) -> str: ...

    @property
    def procs(self) -> dict[str, Process]: ...

    async def leader_id(self, timeout_s: float = ...) -> str: ...

    async def restart(self, node: str) -> None: ...

    def stop(self) -> None: ...


class JavaCluster:
    """`nodes` Java controller JVMs in `mode` ("dledger" or "jraft") under `root`, ids n0..n{nodes-1}."""

    def __init__(self, root: Path, mode: str, nodes: int = 3) -> None:
        if mode not in MODES:
            raise ValueError(f"Java controller mode {mode!r}: one of {MODES}")
        self.mode = mode
        self.rocketmq = RocketMQ(root)
        self.controllers = self.rocketmq.java_controllers(nodes, mode=mode)
        for node in self.controllers.nodes:
            node.jvm_flags = BENCH_JVM_FLAGS
        self.by_id = {node.node_id: node for node in self.controllers.nodes}
        self.ids = list(self.by_id)

    @property
    def system(self) -> str:
        return f"Apache RocketMQ {ROCKETMQ_VERSION} controller, {self.mode}"

    @staticmethod
    def jvm_flags() -> str:
        return " ".join(BENCH_JVM_FLAGS)

    def address(self, node: str) -> str:
        return self.by_id[node].address

    @property
    def addresses(self) -> list[str]:
        return self.controllers.addresses

    @property
    def procs(self) -> dict[str, Process]:
        return {node_id: node.process for node_id, node in self.by_id.items() if node.process is not None}

    async def start(self) -> None:
        """Until the leader accepts a write: a DLedger node names itself leader in 1005 a moment
        before its controller turns active and stops answering 2007 (not in leader state)."""
        await self.controllers.start()
        with trio.fail_after(LEADER_TIMEOUT_S):
            while not await self._leader_accepts_write():
                await trio.sleep(0.05)

    async def _leader_accepts_write(self) -> bool:
        leader = await self.leader_id()
        try:
            conn = await RemotingConn.open(self.address(leader))
            try:
                return await durable_write(conn, f"probe{time.time_ns()}", 0, 0)
            finally:
                await conn.aclose()
        except (OSError, LoadError):
            return False

    async def leader_id(self, timeout_s: float = LEADER_TIMEOUT_S) -> str:
        """The node every running node names as leader in its 1005 answer (controllerLeaderAddress)."""
        async with ControllerClient(self.addresses, max_retries=0) as client:
            address = await self.controllers.wait_leader(client, timeout_s)
        by_address = {node.address: node_id for node_id, node in self.by_id.items()}
        if address not in by_address:
            raise ProcessFailed(f"the Java controllers name {address!r} as leader, none of {by_address}")
        return by_address[address]

    async def restart(self, node: str) -> None:
        """Start the JVM again on its store, wait for its `boot success`."""
        await self.by_id[node].start()

    def stop(self) -> None:
        self.rocketmq.close()


def cpu_of(procs: Mapping[str, Process]) -> dict[str, float]:
    """CPU seconds (user + system, /proc/PID/stat) each process used so far; a gone one counts 0."""
    return {name: cpu_s(proc.pid) or 0.0 for name, proc in procs.items()}

