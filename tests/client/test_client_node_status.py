"""rmqc.client's node_views, shared by `rmqc status` and the status page: every node is asked at
once, a node that gives no answer is shown from the client's error, and the views keep the order
of the addresses whatever order the answers come in."""

from __future__ import annotations

import trio
import trio.testing

from rmqc.client import ClientError, ConnectionLost, node_views
from rmqc.remoting import RMQC_NODE_STATUS, RemotingCommand, make_request, make_response


class Nodes:
    """Answers RMQC_NODE_STATUS after `delays_s[address]` (autojumped), or fails for an address in `down`."""

    def __init__(self, delays_s: dict[str, float], down: frozenset[str] = frozenset()) -> None:
        self.delays_s, self.down = delays_s, down
        self.in_flight = 0
        self.most_in_flight = 0

    async def request(self, code: int, ext: object, *, address: str) -> RemotingCommand:
        assert code == RMQC_NODE_STATUS and ext is None
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await trio.sleep(self.delays_s[address])
        finally:
            self.in_flight -= 1
        if address in self.down:
            raise ConnectionLost(f"connect failed: {address}")
        return make_response(make_request(code, 1), 0, address, None, None)


async def view_of(address: str, answer: RemotingCommand | ClientError) -> str:
    return f"{address}: {answer}" if isinstance(answer, ClientError) else f"{address} answered {answer.remark}"


async def test_every_node_is_asked_at_once_and_the_views_keep_the_order_given(
        autojump_clock: trio.testing.MockClock) -> None:
    nodes = Nodes({"a:1": 3.0, "b:1": 1.0, "c:1": 2.0}, down=frozenset({"c:1"}))
    started = trio.current_time()
    views = await node_views(nodes, ["a:1", "b:1", "c:1"], view_of)
    assert views == ["a:1 answered a:1", "b:1 answered b:1", "c:1: connect failed: c:1"]
    assert nodes.most_in_flight == 3 and trio.current_time() - started == 3.0  # the slowest, not the sum


async def test_no_addresses_no_views() -> None:
    assert await node_views(Nodes({}), [], view_of) == []
