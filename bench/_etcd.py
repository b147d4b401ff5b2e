"""The etcd 3.4 anchor: 3 members on loopback ports, started and stopped by PID, loaded through
its v3 gRPC gateway (HTTP/1.1 JSON: /v3/kv/put, /v3/kv/range) by the same closed-loop generator
that loads rmqc (bench_cpu_per_write.py loads it over gRPC instead: bench._etcd_grpc). Skipped
with a clear message when the `etcd` binary is not installed (Debian: apt-get install etcd-server
etcd-client)."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import trio

from rmqc.launcher import Process, ProcessFailed, free_ports

from ._load import HttpConn, LoadError

START_TIMEOUT_S = 60.0


def etcd_binary() -> str | None:
    return shutil.which("etcd")


def etcd_version() -> str:
    import subprocess

    binary = etcd_binary()
    if binary is None:
        return "not installed"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    return out.splitlines()[0].replace("etcd Version:", "").strip() if out else "unknown"


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


class EtcdCluster:
    def __init__(self, root: Path, members: int = 3) -> None:
        self.root = root
        self.names = [f"e{i}" for i in range(members)]
        ports = free_ports(2 * members)
        self.client_ports = dict(zip(self.names, ports[:members], strict=True))
        self.peer_ports = dict(zip(self.names, ports[members:], strict=True))
        self.procs: dict[str, Process] = {}
        self.member_ids: dict[str, str] = {}

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.client_ports[name]}"

    @property
    def addresses(self) -> list[str]:
        return [self.address(name) for name in self.names]

    def argv(self, name: str) -> list[str]:
        initial = ",".join(f"{n}=http://127.0.0.1:{self.peer_ports[n]}" for n in self.names)
        client_url = f"http://127.0.0.1:{self.client_ports[name]}"
        peer_url = f"http://127.0.0.1:{self.peer_ports[name]}"
        return [etcd_binary() or "etcd", "--name", name, "--data-dir", str(self.root / "etcd" / name),
                "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", "rmqc-bench", "--log-level", "warn", "--logger", "zap"]

    async def start(self) -> None:
        shutil.rmtree(self.root / "etcd", ignore_errors=True)
        for name in self.names:
            self.procs[name] = Process(f"etcd-{name}", self.argv(name), self.root / "logs" / f"etcd-{name}.log")
        await self.wait_writable(START_TIMEOUT_S)

    async def status(self, name: str) -> dict:
        conn = await HttpConn.open(self.address(name))
        try:
            status, document = await conn.post_json("/v3/maintenance/status", {})
        finally:
            await conn.aclose()
        if status != 200:
            raise LoadError(f"status {status}")
        return document

    async def leader(self) -> str:
        """The member name of the current leader."""
        by_id = {}
        leader_id = None
        for name in self.names:
            document = await self.status(name)
            by_id[document["header"]["member_id"]] = name
            leader_id = document.get("leader")
        if leader_id not in by_id:
            raise ProcessFailed(f"etcd leader {leader_id} is not one of {by_id}")
        return by_id[leader_id]

    async def wait_writable(self, timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            while True:
                for proc in self.procs.values():
                    if not proc.alive:
                        raise ProcessFailed(f"{proc.name} exited: {proc.tail()}")
                try:
                    conn = await HttpConn.open(self.address(self.names[0]))
                    try:
                        status, _ = await conn.post_json("/v3/kv/put", {"key": b64("probe"), "value": b64("x")})
                    finally:
                        await conn.aclose()
                    if status == 200:
                        return
                except (OSError, LoadError):
                    pass
                await trio.sleep(0.1)
        raise ProcessFailed(f"etcd not writable within {timeout_s} s")

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()


async def put(conn: HttpConn, key: str, value: str) -> bool:
    status, _ = await conn.post_json("/v3/kv/put", {"key": b64(key), "value": b64(value)})
    return status == 200


async def get(conn: HttpConn, key: str, serializable: bool) -> bool:
    status, _ = await conn.post_json("/v3/kv/range", {"key": b64(key), "serializable": serializable})
    return status == 200
