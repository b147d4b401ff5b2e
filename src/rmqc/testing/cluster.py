"""Real `rmqc serve` processes on 127.0.0.1 for cluster tests (started, signalled by PID and
stopped by rmqc.launcher), fake brokers (a remoting listener that records the 1008
notifications it receives) and helpers that follow the broker side of spec section 7."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.launcher import (
    RMQC as RMQC,
    START_TIMEOUT_S as START_TIMEOUT_S,
    ServeCluster,
    ServeNode as NodeProcess,
    consecutive_free_ports as consecutive_free_ports,
    free_ports as free_ports,
    serve_nodes,
)
from rmqc.remoting import FrameDecoder, RemotingCommand, loads_fastjson

__all__ = ["CLUSTER", "HEARTBEAT_TIMEOUT_MS", "RMQC", "START_TIMEOUT_S", "Cluster", "FakeBroker", "NodeProcess",
           "consecutive_free_ports", "free_ports", "replica_info", "start_group", "wait_until"]

CLUSTER = "C"
# Shorter than a real broker's 10 s so that a silent broker expires within a test's patience.
HEARTBEAT_TIMEOUT_MS = 3000


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str,
                     interval_s: float = 0.05) -> None:
    """Poll an async condition until it holds; fail after `timeout_s` (never a fixed sleep)."""
    with trio.move_on_after(timeout_s):
        while not await condition():
            await trio.sleep(interval_s)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class Cluster(ServeCluster):
    """`Cluster.create(tmp_path, 3)`, then `await cluster.start()` ... `await cluster.stop()`."""

    @classmethod
    def create(cls, tmp_path: Path, size: int, settings: tuple[str, ...] = ()) -> Cluster:
        return cls(serve_nodes(tmp_path, free_ports(size), settings=settings))

    async def start(self) -> None:
        await self.start_async()

    async def stop(self) -> None:
        """SIGTERM to every node (SIGKILL after the grace period)."""
        await self.stop_async(signal.SIGTERM)


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
    # wall-clock ms when the latest heartbeat was sent, and when each 1008 arrived
    last_heartbeat_ms: int | None = None
    notified_ms: list[int] = field(default_factory=list)
    _scope: trio.CancelScope | None = None
    _heartbeats: trio.CancelScope = field(default_factory=trio.CancelScope)
    _registered: trio.Event = field(default_factory=trio.Event)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        with trio.CancelScope() as self._scope:
            async with ControllerClient(self.controllers, timeout_ms=3000, max_retries=5) as client:
                self.client = client
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.serve_listeners, self._handle, listeners)
                    nursery.start_soon(self._heartbeat_forever)
                    task_status.started()
                    await trio.sleep_forever()
        self.client = None

    def hang(self) -> None:
        """The broker stops heartbeating with its connections open (a hung process): only the
        heartbeat deadline can tell the controller."""
        self._heartbeats.cancel()

    def crash(self) -> None:
        """The broker process dies: its connections close and its heartbeats stop."""
        assert self._scope is not None
        self._scope.cancel()

    async def _handle(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                commands = decoder.feed(data)
                self.received.extend(commands)
                self.notified_ms += [time.time_ns() // 1_000_000 for c in commands if c.code == 1008]

    async def _heartbeat_forever(self, interval_s: float = 0.5) -> None:
        """Once registered: one loop per controller, so a dead controller never delays heartbeats
        to the others. Runs inside `run`, so `crash` stops it together with the connections."""
        await self._registered.wait()
        with self._heartbeats:
            async with trio.open_nursery() as nursery:
                for controller in self.controllers:
                    nursery.start_soon(self._heartbeat_loop, controller, interval_s)

    async def _heartbeat_loop(self, controller: str, interval_s: float) -> None:
        assert self.client is not None
        while True:
            self.last_heartbeat_ms = time.time_ns() // 1_000_000
            with contextlib.suppress(ClientError):  # that controller is down; the others still hear us
                await self.client.heartbeat(CLUSTER, self.broker_name, self.broker_id, self.address,
                                            address=controller, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
            await trio.sleep(interval_s)

    async def register(self) -> None:
        """Spec 7.2 steps b-e: 1012, 1013, 1003 through the leader."""
        assert self.client is not None
        next_id_text = (await self.client.get_next_broker_id(CLUSTER, self.broker_name)).ext("nextBrokerId")
        assert next_id_text is not None, "1012 answers nextBrokerId"
        next_id = int(next_id_text)
        applied = await self.client.apply_broker_id(CLUSTER, self.broker_name, next_id, f"{self.address};1700000000000")
        assert applied.code == 0, applied.remark
        self.broker_id = next_id
        self._registered.set()
        registered = await self.client.register_broker(CLUSTER, self.broker_name, next_id, self.address)
        assert registered.code == 0, registered.remark

    def notifications(self) -> list[RemotingCommand]:
        return [command for command in self.received if command.code == 1008]


async def start_group(nursery: trio.Nursery, cluster: ServeCluster, name: str) -> tuple[FakeBroker, FakeBroker]:
    """Two replicas of one group, registered, heartbeating, the first elected master, both in sync."""
    first, second = FakeBroker(name, cluster.addresses), FakeBroker(name, cluster.addresses)
    for broker in (first, second):
        await nursery.start(broker.run)
        await broker.register()  # heartbeats start once registered (spec 7.2 step 4)
    assert first.client is not None
    elected = await first.client.elect_master(CLUSTER, name, first.broker_id)
    assert elected.code == 0, elected.remark
    epoch = int(elected.ext("masterEpoch") or 0)  # a successful 1002 always carries it

    async def both_live() -> bool:
        assert first.client is not None
        answer = await first.client.alter_sync_state_set(name, first.broker_id, epoch,
                                                         [first.broker_id, second.broker_id], 1)
        return answer.code == 0  # 2006 until the leader has heard second's heartbeat

    await wait_until(both_live, 10, f"{name}: sync state set {{1, 2}}")
    return first, second


async def replica_info(client: ControllerClient, name: str) -> tuple[str | None, str | None, Any]:
    """1004's masterBrokerId, masterEpoch and body (the SyncStateSet)."""
    answer = await client.get_replica_info(name)
    assert answer.code == 0 and answer.body is not None, answer.remark
    return answer.ext("masterBrokerId"), answer.ext("masterEpoch"), loads_fastjson(answer.body)
