"""Every node's status at once: RMQC_NODE_STATUS (60001) asked of a list of nodes concurrently, one
view per node in the order given. `rmqc status` and a node's status page both ask this way; what a
view says (and what a node that did not answer looks like) is each caller's own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import trio

from rmqc.client._errors import ClientError
from rmqc.remoting import RMQC_NODE_STATUS, RemotingCommand

__all__ = ["node_views"]

View = TypeVar("View")


async def node_views(client: Any, addresses: Sequence[str],
                     view_of: Callable[[str, RemotingCommand | ClientError], Awaitable[View]]) -> list[View]:
    """Ask each of `addresses` through `client` (a ControllerClient) at once; `view_of(address,
    answer)` makes a node's view from its answer, or from the ClientError it got instead."""
    views: dict[str, View] = {}

    async def ask(address: str) -> None:
        try:
            answer = await client.request(RMQC_NODE_STATUS, None, address=address)
        except ClientError as error:
            views[address] = await view_of(address, error)
            return
        assert answer is not None  # a two-way request
        views[address] = await view_of(address, answer)

    async with trio.open_nursery() as nursery:
        for address in addresses:
            nursery.start_soon(ask, address)
    return [views[address] for address in addresses]
