"""The controller client for asyncio programs, through trio-asyncio.

The asyncio program runs on trio-asyncio's loop (`run_asyncio(main)` instead of `asyncio.run(main())`)
and awaits the same calls as the Trio client:

    async def main() -> None:
        async with AsyncioControllerClient(["127.0.0.1:9878"]) as client:
            answer = await client.get_metadata()

    run_asyncio(main)

A Trio task ("host") owns the ControllerClient for the whole `async with`, because a Trio nursery must
be entered and left by one task; each call runs as its own Trio task through `trio_as_aio`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import trio
import trio_asyncio

from rmqc.client._client import ControllerClient
from rmqc.client._errors import ClientClosed

__all__ = ["AsyncioControllerClient", "run_asyncio"]

T = TypeVar("T")

# Every awaitable call of ControllerClient, offered with the same signature.
FORWARDED_CALLS = (
    "request",
    "get_metadata",
    "get_next_broker_id",
    "apply_broker_id",
    "register_broker",
    "get_replica_info",
    "elect_master",
    "alter_sync_state_set",
    "get_sync_state_data",
    "clean_broker_data",
    "heartbeat",
    "get_config",
    "update_config",
)


def run_asyncio(main: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run the asyncio coroutine function `main(*args)` on a trio-asyncio loop; its result."""
    result: T = trio_asyncio.run(trio_asyncio.aio_as_trio(main), *args)
    return result


class AsyncioControllerClient:
    """ControllerClient's calls, awaitable from asyncio code on a trio-asyncio loop.

    Takes the arguments of ControllerClient.
    """

    def __init__(self, addresses: Sequence[str], *args: Any, **options: Any) -> None:
        self._client_args = (addresses, *args)
        self._client_options = options
        self._client: ControllerClient | None = None
        self._started = trio.Event()
        self._stop = trio.Event()
        self._host: asyncio.Future[None] | None = None

    async def __aenter__(self) -> AsyncioControllerClient:
        self._host = asyncio.ensure_future(trio_asyncio.trio_as_aio(self._run_host)())
        await trio_asyncio.trio_as_aio(self._started.wait)()
        if self._host.done():
            self._host.result()  # the client failed to start: raise why
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await trio_asyncio.trio_as_aio(self._stop_host)()
        assert self._host is not None
        await self._host

    async def _run_host(self) -> None:
        try:
            async with ControllerClient(*self._client_args, **self._client_options) as client:
                self._client = client
                self._started.set()
                await self._stop.wait()
        finally:
            self._client = None
            self._started.set()

    async def _stop_host(self) -> None:
        self._stop.set()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._client is None:
            raise ClientClosed("use AsyncioControllerClient inside `async with`")
        method = getattr(self._client, name)
        return await trio_asyncio.trio_as_aio(functools.partial(method, *args, **kwargs))()


def _forwarding(name: str) -> Callable[..., Awaitable[Any]]:
    async def call(self: AsyncioControllerClient, *args: Any, **kwargs: Any) -> Any:
        return await self._call(name, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = getattr(ControllerClient, name).__doc__
    return call


for _name in FORWARDED_CALLS:
    setattr(AsyncioControllerClient, _name, _forwarding(_name))
