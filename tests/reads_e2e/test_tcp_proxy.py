"""The fault-injecting proxy: relays both ways, swallows a cut direction, delays in order, loses
chunks as TCP does (held for retransmission, reset after repeated losses), heals."""

from __future__ import annotations

import random

import trio

from rmqc.chaos._tcp_proxy import LOSS_RESET_AFTER, RTO_MIN_S, ProxyMesh, TcpProxy
from rmqc.peerwire import is_refusal as _is_refusal


async def echo_server(nursery: trio.Nursery) -> int:
    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                while data := await stream.receive_some(4096):
                    await stream.send_all(data)
            except trio.BrokenResourceError:
                pass  # reset by the proxy (reject)

    listeners = await nursery.start(trio.serve_tcp, echo, 0)
    return listeners[0].socket.getsockname()[1]


async def closed(proxy: TcpProxy, timeout_s: float = 5.0) -> None:
    """Wait (bounded) until the proxy has torn down every connection, so none is cut mid-setup."""
    with trio.fail_after(timeout_s):
        while proxy.open_connections:
            await trio.sleep(0.005)


async def round_trip(port: int, payload: bytes, timeout_s: float = 1.0) -> bytes | None:
    """What comes back for `payload` within `timeout_s` (None: nothing)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(payload)
        received = b""
        with trio.move_on_after(timeout_s):
            while len(received) < len(payload):
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                received += chunk
        return received or None


async def test_relays_cuts_and_heals() -> None:
    async with trio.open_nursery() as nursery:
        port = await echo_server(nursery)
        proxy = TcpProxy("127.0.0.1", port)
        await nursery.start(proxy.run)
        assert await round_trip(proxy.port, b"hello") == b"hello"

        proxy.cut(forward=False, backward=True)  # the answer is lost, the request arrives
        assert await round_trip(proxy.port, b"lost answer", 0.2) is None
        proxy.heal()
        proxy.cut(forward=True, backward=False)  # black-holed at accept
        assert await round_trip(proxy.port, b"lost request", 0.2) is None
        assert proxy.stats.dropped_bytes >= len(b"lost answer") + len(b"lost request")

        proxy.heal()
        assert await round_trip(proxy.port, b"again") == b"again"
        await closed(proxy)
        nursery.cancel_scope.cancel()


async def test_delay_keeps_order_and_holds_each_chunk() -> None:
    async with trio.open_nursery() as nursery:
        port = await echo_server(nursery)
        proxy = TcpProxy("127.0.0.1", port)
        await nursery.start(proxy.run)
        proxy.delay(50)
        started = trio.current_time()
        assert await round_trip(proxy.port, b"0123456789") == b"0123456789"
        assert trio.current_time() - started >= 0.1  # held 50 ms each way
        await closed(proxy)
        nursery.cancel_scope.cancel()


class ScriptedRandom(random.Random):
    """random() returns the scripted draws, then `rest` for ever: which chunk is lost, decided."""

    def __init__(self, draws: list[float], rest: float) -> None:
        super().__init__(0)
        self.draws, self.rest = list(draws), rest

    def random(self) -> float:
        return self.draws.pop(0) if self.draws else self.rest


async def test_a_lost_chunk_is_held_one_rto_and_arrives_in_order() -> None:
    async with trio.open_nursery() as nursery:
        port = await echo_server(nursery)
        proxy = TcpProxy("127.0.0.1", port)
        await nursery.start(proxy.run)
        # the request goes through (0.9 >= 0.5); its echo is lost once (0.1), then delivered (0.9)
        proxy.lose(0.5, ScriptedRandom([0.9, 0.1, 0.9], rest=0.9))
        started = trio.current_time()
        assert await round_trip(proxy.port, b"0123456789", timeout_s=5) == b"0123456789"
        assert RTO_MIN_S <= trio.current_time() - started < 2 * RTO_MIN_S
        assert proxy.stats.resets == 0
        await closed(proxy)
        nursery.cancel_scope.cancel()


async def test_a_chunk_lost_again_and_again_resets_the_connection() -> None:
    async with trio.open_nursery() as nursery:
        port = await echo_server(nursery)
        proxy = TcpProxy("127.0.0.1", port)
        await nursery.start(proxy.run)
        proxy.lose(0.5, ScriptedRandom([0.0] * LOSS_RESET_AFTER, rest=0.9))
        stream = await trio.open_tcp_stream("127.0.0.1", proxy.port)
        await stream.send_all(b"never")
        with trio.fail_after(5):
            try:
                assert await stream.receive_some(16) == b""
            except trio.BrokenResourceError as error:
                assert isinstance(error.__cause__, ConnectionResetError)
        await stream.aclose()
        assert proxy.stats.resets == 1
        assert await round_trip(proxy.port, b"next one") == b"next one"  # the rest get through
        proxy.heal()
        await closed(proxy)
        nursery.cancel_scope.cancel()


async def test_mesh_peers_lists_and_isolation() -> None:
    mesh = ProxyMesh({"n0": 1001, "n1": 1002, "n2": 1003})
    async with trio.open_nursery() as nursery:
        await nursery.start(mesh.run)
        peers = mesh.peers_for("n1").split(";")
        assert peers[1] == "n1-127.0.0.1:1002"
        assert peers[0] == f"n0-{mesh.proxies[('n1', 'n0')].address}"
        mesh.isolate("n1")
        cut = {pair for pair, proxy in mesh.proxies.items() if proxy.is_cut}
        assert cut == {("n0", "n1"), ("n1", "n0"), ("n1", "n2"), ("n2", "n1")}
        mesh.heal_all()
        assert not any(proxy.is_cut for proxy in mesh.proxies.values())
        nursery.cancel_scope.cancel()


async def test_reject_resets_connections_refuses_new_ones_and_heals() -> None:
    async with trio.open_nursery() as nursery:
        port = await echo_server(nursery)
        proxy = TcpProxy("127.0.0.1", port)
        await nursery.start(proxy.run)
        stream = await trio.open_tcp_stream("127.0.0.1", proxy.port)
        await stream.send_all(b"up")
        assert await stream.receive_some(16) == b"up"

        proxy.reject()  # as a REJECT rule: the open connection is reset...
        with trio.fail_after(5):
            try:
                assert await stream.receive_some(16) == b""
            except trio.BrokenResourceError as error:
                assert isinstance(error.__cause__, ConnectionResetError)
        await stream.aclose()
        with trio.fail_after(5):  # ...and reconnecting is refused, not timed out
            while True:
                try:
                    refused = await trio.open_tcp_stream("127.0.0.1", proxy.port)
                except OSError as error:
                    assert _is_refusal(error), error  # what makes a node take over
                    break
                await refused.aclose()  # accepted just before the listener stopped: reset
                await trio.sleep(0.005)
        assert proxy.is_cut

        proxy.heal()
        with trio.fail_after(5):
            while True:
                try:
                    assert await round_trip(proxy.port, b"again") == b"again"
                    break
                except OSError:
                    await trio.sleep(0.005)  # the listener comes back in the proxy's own task
        await closed(proxy)
        nursery.cancel_scope.cancel()
