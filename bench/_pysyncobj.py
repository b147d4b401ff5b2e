"""The PySyncObj anchor: 3 node processes (bench/_pysyncobj_node.py) on loopback, installed into
the venv at run time when missing (it is not a project dependency). PySyncObj keeps its journal in
memory and never fsyncs, so its figures are an upper bound for a Python Raft without durability."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import trio

from rmqc.launcher import Process, ProcessFailed, free_ports

from ._load import LineConn, LoadError

START_TIMEOUT_S = 30.0
REPO = Path(__file__).resolve().parent.parent


def ensure_pysyncobj() -> str | None:
    """The installed version, installing it with pip first if needed; None if that failed."""
    if importlib.util.find_spec("pysyncobj") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "pysyncobj"], check=False, timeout=300)
    try:
        from importlib.metadata import version

        return version("pysyncobj")
    except Exception:  # any failure means "not available"
        return None


class PySyncObjCluster:
    def __init__(self, root: Path, nodes: int = 3) -> None:
        self.root = root
        ports = free_ports(2 * nodes)
        self.raft_addresses = [f"127.0.0.1:{p}" for p in ports[:nodes]]
        self.client_addresses = [f"127.0.0.1:{p}" for p in ports[nodes:]]
        self.procs: list[Process] = []

    async def start(self) -> None:
        for i, raft_address in enumerate(self.raft_addresses):
            partners = ",".join(a for a in self.raft_addresses if a != raft_address)
            port = self.client_addresses[i].rsplit(":", 1)[1]
            argv = [sys.executable, "-m", "bench._pysyncobj_node", raft_address, partners, port]
            self.procs.append(Process(f"pysyncobj-{i}", argv, self.root / "logs" / f"pysyncobj-{i}.log", cwd=REPO))
        for proc in self.procs:
            await proc.wait_for_output("serving on", START_TIMEOUT_S)
        await self.leader_address(START_TIMEOUT_S)

    async def leader_address(self, timeout_s: float = 10.0) -> str:
        """The client address of the node that is leader (bounded wait for an election)."""
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    conn = await LineConn.open(self.client_addresses[0])
                    try:
                        answer = await conn.ask("LEADER")
                    finally:
                        await conn.aclose()
                    leader = answer.removeprefix("OK").strip()
                    if leader in self.raft_addresses:
                        return self.client_addresses[self.raft_addresses.index(leader)]
                except (OSError, LoadError):
                    pass
                await trio.sleep(0.1)
        raise ProcessFailed(f"PySyncObj elected no leader within {timeout_s} s")

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()


async def put(conn: LineConn, key: str, value: str) -> bool:
    return (await conn.ask(f"PUT {key} {value}")) == "OK"
