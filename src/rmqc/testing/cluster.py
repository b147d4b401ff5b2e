"""Real `rmqc serve` processes on 127.0.0.1 for cluster tests: started by PID, killed with real
signals, waited on with bounded timeouts. Also fake brokers (a remoting listener that records the
1008 notifications it receives) and helpers that follow the broker side of spec section 7."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.remoting import FrameDecoder, RemotingCommand

RMQC = str(Path(sys.executable).parent / "rmqc")
CLUSTER = "C"
START_TIMEOUT_S = 30.0
# Shorter than a real broker's 10 s so that a silent broker expires within a test's patience.
HEARTBEAT_TIMEOUT_MS = 3000


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports the kernel handed out a moment ago (released at once; fine on a
    loopback-only machine where nothing else races for them)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str,
                     interval_s: float = 0.05) -> None:
    """Poll an async condition until it holds; fail after `timeout_s` (never a fixed sleep)."""
    with trio.move_on_after(timeout_s):
        while not await condition():
            await trio.sleep(interval_s)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@dataclass
class NodeProcess:
    node_id: str
    address: str
    peers: str
    data_dir: Path
    log_path: Path
    settings: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        args = [RMQC, "serve", "--id", self.node_id, "--peers", self.peers, "--data-dir", str(self.data_dir)]
        for setting in self.settings:
            args += ["--set", setting]
        return args

    async def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=log)
        finally:
            log.close()
        line = await trio.to_thread.run_sync(self._read_ready_line, abandon_on_cancel=True)
        assert f"rmqc {self.node_id} serving on {self.address}" in line, (line, self.log_tail())

    def _read_ready_line(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        return self.process.stdout.readline().decode()

    def kill(self, signum: int = signal.SIGKILL) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    async def wait_exit(self, timeout_s: float = 10.0) -> int:
        assert self.process is not None
        process = self.process
        with trio.fail_after(timeout_s):
            while process.poll() is None:
                await trio.sleep(0.02)
        if process.stdout is not None:
            process.stdout.close()
        self.process = None
        return process.returncode

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Cluster:
    nodes: list[NodeProcess]

    @classmethod
    def create(cls, tmp_path: Path, size: int, settings: tuple[str, ...] = ()) -> Cluster:
        ports = free_ports(size)
        peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
        return cls([NodeProcess(f"n{i}", f"127.0.0.1:{port}", peers, tmp_path / f"n{i}",
                                tmp_path / f"n{i}.log", settings) for i, port in enumerate(ports)])

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in self.nodes]

    def node(self, address: str) -> NodeProcess:
        return next(node for node in self.nodes if node.address == address)

    async def start(self) -> None:
        async with trio.open_nursery() as nursery:
            for node in self.nodes:
                nursery.start_soon(node.start)

    async def stop(self) -> None:
        for node in self.nodes:
            if node.running:
                node.kill(signal.SIGTERM)
        for node in self.nodes:
            if node.process is not None:
                await node.wait_exit()

    async def leader(self, client: ControllerClient, among: list[NodeProcess] | None = None) -> str | None:
        """The leader address if every running node asked agrees on it and it says isLeader."""
        seen = set()
        for node in among or [n for n in self.nodes if n.running]:
            try:
                answer = await client.get_metadata(address=node.address)
            except ClientError:
                return None
            seen.add(answer.ext("controllerLeaderAddress"))
        if len(seen) != 1 or None in seen:
            return None
        (leader,) = seen
        try:
            answer = await client.get_metadata(address=leader)
        except ClientError:
            return None
        return leader if answer.ext("isLeader") == "true" else None

    async def wait_leader(self, client: ControllerClient, timeout_s: float = 15.0,
                          among: list[NodeProcess] | None = None) -> str:
        found: list[str] = []

        async def agreed() -> bool:
            leader = await self.leader(client, among)
            if leader is not None:
                found.append(leader)
            return leader is not None

        await wait_until(agreed, timeout_s, "the nodes to agree on a leader")
        return found[-1]

    def logs(self) -> str:
        return "\n".join(f"--- {node.node_id} ---\n{node.log_tail()}" for node in self.nodes)


@dataclass
class FakeBroker:
    """One broker replica: a listen port that records 1008s, its own ControllerClient (its
    connections), and a heartbeat task to every controller (spec 6.4), like a real broker."""

    broker_name: str
    controllers: list[str]
    received: list[RemotingCommand] = field(default_factory=list)
    address: str = ""
    broker_id: int = 0
    client: ControllerClient | None = None
    _scope: trio.CancelScope | None = None
    _registered: trio.Event = field(default_factory=trio.Event)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.address = "127.0.0.1:%d" % listeners[0].socket.getsockname()[1]
        with trio.CancelScope() as self._scope:
            async with ControllerClient(self.controllers, timeout_ms=3000, max_retries=5) as client:
                self.client = client
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.serve_listeners, self._handle, listeners)
                    nursery.start_soon(self._heartbeat_forever)
                    task_status.started()
                    await trio.sleep_forever()
        self.client = None

    def crash(self) -> None:
        """The broker process dies: its connections close and its heartbeats stop."""
        assert self._scope is not None
        self._scope.cancel()

    async def _handle(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                self.received.extend(decoder.feed(data))

    async def _heartbeat_forever(self, interval_s: float = 0.5) -> None:
        """Once registered: one loop per controller, so a dead controller never delays heartbeats
        to the others. Runs inside `run`, so `crash` stops it together with the connections."""
        await self._registered.wait()
        async with trio.open_nursery() as nursery:
            for controller in self.controllers:
                nursery.start_soon(self._heartbeat_loop, controller, interval_s)

    async def _heartbeat_loop(self, controller: str, interval_s: float) -> None:
        assert self.client is not None
        while True:
            try:
                await self.client.heartbeat(CLUSTER, self.broker_name, self.broker_id, self.address,
                                            address=controller, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
            except ClientError:
                pass  # that controller is down; the others still hear us
            await trio.sleep(interval_s)

    async def register(self) -> None:
        """Spec 7.2 steps b-e: 1012, 1013, 1003 through the leader."""
        assert self.client is not None
        next_id = int((await self.client.get_next_broker_id(CLUSTER, self.broker_name)).ext("nextBrokerId"))
        applied = await self.client.apply_broker_id(CLUSTER, self.broker_name, next_id, f"{self.address};1700000000000")
        assert applied.code == 0, applied.remark
        self.broker_id = next_id
        self._registered.set()
        registered = await self.client.register_broker(CLUSTER, self.broker_name, next_id, self.address)
        assert registered.code == 0, registered.remark

    def notifications(self) -> list[RemotingCommand]:
        return [command for command in self.received if command.code == 1008]
