"""The asyncio adapter: an asyncio coroutine awaits the client's calls through trio-asyncio."""

from __future__ import annotations

import asyncio

import trio
import trio_asyncio
from client_fake_server import FakeController

from rmqc.client import ClientClosed, RequestTimeout
from rmqc.client.asyncio_client import AsyncioControllerClient, run_asyncio
from rmqc.errors import ConfigError
from rmqc.remoting import RemotingCommand, ResponseCode


async def asyncio_program(follower: str, leader: str) -> list[RemotingCommand]:
    """Plain asyncio code: asyncio.gather runs two calls at once through the adapter."""
    asyncio.get_running_loop()  # fails unless this really runs as asyncio
    async with AsyncioControllerClient([follower], timeout_ms=300) as client:
        metadata = await client.get_metadata(follower)
        replica, next_id = await asyncio.gather(
            client.get_replica_info("broker-a"), client.get_next_broker_id("c", broker_name="broker-a")
        )
        try:
            await client.request(1011, {"brokerName": "broker-a"}, address=leader)
        except RequestTimeout:
            timed_out = True
        else:
            timed_out = False
    assert timed_out
    return [metadata, replica, next_id]


def test_asyncio_program_uses_the_client_through_trio_asyncio() -> None:
    async def trio_main() -> list[RemotingCommand]:
        async with trio.open_nursery() as nursery:
            follower = await FakeController("follower").start(nursery)
            leader = await FakeController("leader").start(nursery)
            leader.become_leader()
            follower.follow(leader)
            leader.silent.add(1011)
            answers = await trio_asyncio.aio_as_trio(asyncio_program)(follower.address, leader.address)
            nursery.cancel_scope.cancel()
        return answers

    metadata, replica, next_id = trio_asyncio.run(trio_main)
    assert metadata.ext("isLeader") == "false" and metadata.ext("controllerLeaderAddress")
    assert replica.code == ResponseCode.SUCCESS and replica.ext("servedBy") == "leader"
    assert next_id.ext("brokerName") == "broker-a" and next_id.ext("servedBy") == "leader"


def test_asyncio_client_outside_its_block_and_run_asyncio() -> None:
    async def main(value: int) -> int:
        client = AsyncioControllerClient(["127.0.0.1:9878"])
        try:
            await client.get_metadata()
        except ClientClosed:
            return value * 2
        return -1

    assert run_asyncio(main, 21) == 42


def test_asyncio_client_reports_why_it_could_not_start() -> None:
    async def main() -> str:
        try:
            async with AsyncioControllerClient([], timeout_ms=100):
                return "started"
        except ConfigError as exc:
            return str(exc)

    assert "addresses must be a non-empty list" in run_asyncio(main)
