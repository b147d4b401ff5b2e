"""The java-scenarios replayed over TCP against one fresh in-process node, with the fsm helper's
step checker (rmqc.testing.controller_harness)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from node_helpers import free_ports, wait_until

from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode
from rmqc.remoting import FrameDecoder, RemotingCommand, encode, make_request
from rmqc.testing.controller_harness import load_scenarios, replay_scenario_async

SCENARIOS = load_scenarios()
# A scenario's own pauses up to this long exist only to order a one-way frame before the next
# request; we wait for the node to be quiescent instead. Longer pauses are time that must pass
# (heartbeat expiry) and are kept.
ORDERING_PAUSE_MS = 200


class TcpDriver:
    """AsyncScenarioDriver over real sockets: one request connection, one per heartbeat key."""

    def __init__(self, node: ControllerNode, address: str) -> None:
        self._node = node
        self._host, port = address.rsplit(":", 1)
        self._port = int(port)
        self._main: trio.SocketStream | None = None
        self._decoder = FrameDecoder()
        self._heartbeat_streams: dict[str, trio.SocketStream] = {}
        self._opaque = 1000

    async def _open(self) -> trio.SocketStream:
        return await trio.open_tcp_stream(self._host, self._port)

    async def send(self, request: RemotingCommand) -> RemotingCommand:
        if self._main is None:
            self._main = await self._open()
        await self._main.send_all(encode(request))
        answers: list[RemotingCommand] = []
        with trio.fail_after(10):
            while not answers:
                data = await self._main.receive_some(65536)
                assert data, "node closed the request connection"
                answers = self._decoder.feed(data)
        (answer,) = answers
        assert answer.opaque == request.opaque
        return answer

    async def send_oneway(self, connection: str, request: RemotingCommand) -> None:
        stream = self._heartbeat_streams.get(connection)
        if stream is None:
            stream = self._heartbeat_streams[connection] = await self._open()
        self._opaque += 1
        barrier = make_request(1005, self._opaque)
        # the barrier's answer comes back only after the one-way frame before it was handled
        await stream.send_all(encode(request) + encode(barrier))
        decoder = FrameDecoder()
        with trio.fail_after(10):
            while not decoder.feed(await stream.receive_some(65536)):
                pass

    async def close_connection(self, connection: str) -> None:
        stream = self._heartbeat_streams.pop(connection, None)
        if stream is not None:
            server = self._node.server
            open_before = server.open_connections
            await stream.aclose()
            # the node handles a closed connection (the broker inactive at once) when it reads the EOF
            await wait_until(lambda: server.open_connections < open_before, what="the node to see the close")
        await self._settle()

    async def sleep(self, ms: int) -> None:
        if ms > ORDERING_PAUSE_MS:
            await trio.sleep(ms / 1000)  # the scenario needs this much time to pass (expiry)
        await self._settle()

    async def _settle(self) -> None:
        await wait_until(self._node.quiescent, what="node quiescent")

    async def aclose(self) -> None:
        for stream in [*self._heartbeat_streams.values(), *([self._main] if self._main else [])]:
            await stream.aclose()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario["name"] for scenario in SCENARIOS])
async def test_java_scenario_over_tcp(scenario: dict[str, Any], tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0"))
    node = ControllerNode(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await wait_until(lambda: node.replica.serving_as_leader, what="node serving")
        driver = TcpDriver(node, config.listen_address)
        try:
            problems = await replay_scenario_async(driver, scenario)
        finally:
            await driver.aclose()
        assert problems == [], "\n".join(problems)
        nursery.cancel_scope.cancel()
