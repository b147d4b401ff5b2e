"""Helpers for node tests: free loopback ports (shared with the process tests), bounded waits on
synchronous conditions, and a remoting handler that answers in async code."""

from __future__ import annotations

from collections.abc import Callable

import trio

from rmqc.node._server import Channel, Respond
from rmqc.remoting import RemotingCommand
from rmqc.testing.acl_accounts import ADMIN as ADMIN, BROKER as BROKER, PLAIN_ACL_YML
from rmqc.testing.cluster import free_ports as free_ports

ACL = PLAIN_ACL_YML  # tests with ACL on: one broker account and one admin


async def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail after `timeout_s` (never a fixed sleep)."""
    with trio.move_on_after(timeout_s):
        while not condition():
            await trio.sleep(0.005)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class AsyncHandler:
    """The remoting port's handler (rmqc.node._server.RequestHandler) for tests that answer in an
    async `handle_request(request, channel)`: each request is answered in a task of the test's
    nursery, so requests on one connection are answered as they complete."""

    def __init__(self, nursery: trio.Nursery | None = None) -> None:
        self.nursery = nursery  # None: a handler that never serves (a server that must not start)

    async def handle_request(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        raise NotImplementedError

    def serve_now(self, request: RemotingCommand, channel: Channel, respond: Respond) -> None:
        assert self.nursery is not None, "a handler that serves needs the test's nursery"
        self.nursery.start_soon(self._answer, request, channel, respond)

    async def _answer(self, request: RemotingCommand, channel: Channel, respond: Respond) -> None:
        respond(await self.handle_request(request, channel))

    def handle_oneway_now(self, request: RemotingCommand, channel: Channel) -> bool:
        return False

    def on_channel_closed(self, channel: Channel) -> None:
        pass
