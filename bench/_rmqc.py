"""rmqc clusters for the suite: `rmqc serve` processes on loopback, one data directory each, and
the requests the scenarios make of them (a cheap repeatable durable write, reads, metadata)."""

from __future__ import annotations

import collections
import os
import ssl
import time
from collections.abc import Mapping
from pathlib import Path

import trio

from rmqc.acl import Credentials
from rmqc.launcher import RMQC as RMQC_BIN, Process, ProcessFailed, ServeCluster, free_ports, serve_nodes
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode

from ._load import LoadError, RemotingConn

SERVE_TIMEOUT_S = 60.0
# The program that runs `rmqc serve` (its first argument is "serve"): the venv's by default. A
# before/after comparison points it at a wrapper that runs another tree's rmqc, e.g.
# `PYTHONPATH=/tmp/old/src exec .venv/bin/rmqc "$@"`, with the same harness and load.
RMQC_PROGRAM = os.environ.get("RMQC_BENCH_PROGRAM", RMQC_BIN)
CLUSTER = "BenchCluster"
# Ids a benchmark client gives one broker-set before moving to the next (1013 of fresh ids).
IDS_PER_GROUP = 100


def write_ext(run: str, client: int, seq: int) -> dict[str, object]:
    """1013 APPLY_BROKER_ID of a fresh id: one Raft entry, same size every time. Client `client`
    fills broker-set `w<run>-<client>-<n>` with ids 1..IDS_PER_GROUP in order; `seq` must count
    the client's accepted writes (id 1 creates the set, later ids need it), and repeating a `seq`
    is an idempotent retry (same registerCheckCode), so a lost answer does no harm."""
    group, broker_id = divmod(seq, IDS_PER_GROUP)
    address = f"10.{client // 250}.{client % 250}.{broker_id % 250}:10911"
    return {"clusterName": CLUSTER, "brokerName": f"w{run}-{client}-{group}", "appliedBrokerId": broker_id + 1,
            "registerCheckCode": f"{address};{1_700_000_000_000 + seq}"}


async def durable_write(conn: RemotingConn, run: str, client: int, seq: int) -> bool:
    response = await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, write_ext(run, client, seq))
    return response.code == ResponseCode.SUCCESS


class WriteSequence:
    """Per-client count of accepted writes, the `seq` for the next write_ext of that client;
    refusals are counted by response code in `refusals`."""

    def __init__(self, run: str, refusals: collections.Counter[str]) -> None:
        self.run = run
        self.accepted: dict[int, int] = {}
        self.refusals = refusals

    async def write(self, conn: RemotingConn, client: int) -> bool:
        seq = self.accepted.get(client, 0)
        response = await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, write_ext(self.run, client, seq))
        if response.code == ResponseCode.SUCCESS:
            self.accepted[client] = seq + 1
            return True
        self.refusals[f"{response.code} {(response.remark or '')[:40]}"] += 1
        return False


class RmqcCluster(ServeCluster):
    """`nodes` rmqc serve processes (rmqc.launcher's ServeCluster, run by RMQC_PROGRAM) named by
    node id; `settings` are --set OPTION=VALUE for every node. Data and logs of node nI in
    root/<name>/nI (nI.log: stderr, nI.out: stdout)."""

    def __init__(self, root: Path, nodes: int = 3, settings: Mapping[str, object] | None = None,
                 name: str = "rmqc", ssl_context: ssl.SSLContext | None = None,
                 credentials: Credentials | None = None, program: str = RMQC_PROGRAM) -> None:
        self.root = root
        # how the harness's own connections (metadata, probes, the loads) reach the nodes
        self.ssl_context = ssl_context
        self.credentials = credentials
        self.name = name
        self.settings = dict(settings or {})
        super().__init__(serve_nodes(root / name, free_ports(nodes), settings=[
            f"{option}={value}" for option, value in self.settings.items()], program=[program]))
        self.ids = [node.node_id for node in self.nodes]

    def address(self, node: str) -> str:
        return self.node(node).address

    async def open_conn(self, node: str) -> RemotingConn:
        return await RemotingConn.open(self.address(node), self.ssl_context, self.credentials)

    @property
    def procs(self) -> dict[str, Process]:
        """The processes of the nodes started so far, by node id."""
        return {node.node_id: node.process for node in self.nodes if node.process is not None}

    def spawn(self, node: str) -> Process:
        return self.node(node).spawn()

    async def start(self) -> None:
        await self.start_async(SERVE_TIMEOUT_S)
        await self.wait_writable(SERVE_TIMEOUT_S)

    async def wait_listening(self, node: str, timeout_s: float = SERVE_TIMEOUT_S) -> None:
        await self.node(node).wait_serving(timeout_s)

    async def restart(self, node: str) -> None:
        await self.node(node).start(SERVE_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM to every node at once (SIGCONT too, should one be paused), SIGKILL after the grace."""
        self.stop_blocking()

    async def metadata(self, node: str) -> RemotingCommand:
        conn = await self.open_conn(node)
        try:
            return await conn.call(RequestCode.CONTROLLER_GET_METADATA_INFO)
        finally:
            await conn.aclose()

    async def leader_id(self, timeout_s: float = 10.0) -> str:
        """The node every live node names as leader (bounded wait until they agree)."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            seen = set()
            for node, proc in self.procs.items():
                if not proc.alive:
                    continue
                try:
                    with trio.fail_after(1):
                        fields = (await self.metadata(node)).ext_fields or {}  # none: names no leader
                        seen.add(fields.get("controllerLeaderId"))
                except (OSError, LoadError, trio.TooSlowError, trio.BrokenResourceError):
                    seen.add(None)
            if len(seen) == 1 and None not in seen and "" not in seen:
                return str(seen.pop())
            await trio.sleep(0.05)
        raise ProcessFailed(f"{self.name}: nodes do not agree on a leader within {timeout_s} s")

    async def wait_writable(self, timeout_s: float) -> float:
        """Seconds until some node accepts a durable write (tries every live node in turn)."""
        start = time.perf_counter()
        seq = 0
        while time.perf_counter() - start < timeout_s:
            for node, proc in list(self.procs.items()):
                if not proc.alive:
                    continue
                seq += 1
                if await self._try_write(node, seq):
                    return time.perf_counter() - start
            await trio.sleep(0.01)
        raise ProcessFailed(f"{self.name}: no write accepted within {timeout_s} s")

    async def _try_write(self, node: str, seq: int) -> bool:
        try:
            with trio.fail_after(1):
                conn = await self.open_conn(node)
                try:
                    # id 1 of a fresh broker-set: valid whatever earlier attempts did
                    return await durable_write(conn, f"probe{int(time.time() * 1000)}", 0, seq * IDS_PER_GROUP)
                finally:
                    await conn.aclose()
        except (OSError, LoadError, trio.TooSlowError, trio.BrokenResourceError):
            return False

    def rss_mb(self) -> dict[str, float | None]:
        return {node: proc.rss_mb() for node, proc in self.procs.items()}

    def cpu_s(self) -> dict[str, float | None]:
        return {node: proc.cpu_s() for node, proc in self.procs.items()}
