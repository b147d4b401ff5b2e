"""The 1008 notifier: one pending notification per broker address, the newest masterEpoch wins,
and notifications reach a listening broker one-way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
from node_helpers import wait_until

from rmqc.node import _notifier
from rmqc.node._notifier import Notifier
from rmqc.node._tls import TlsStream
from rmqc.remoting import FrameDecoder, RemotingCommand, make_request


def unread_bytes_on(notifier: Notifier, address: str) -> bool:
    """Whether the notifier's cached connection to `address` has bytes (or its end) to read."""
    stream = notifier._connections[address]
    socket = stream.transport.socket if isinstance(stream, TlsStream) else stream.socket
    return socket.is_readable()


def notify(epoch: int) -> RemotingCommand:
    return make_request(1008, 0, {"masterEpoch": epoch, "masterBrokerId": 2}, b'{"syncStateSet":[2]}', oneway=True)


async def test_notifications_reach_a_listening_broker_and_failures_are_counted() -> None:
    received: list[RemotingCommand] = []

    async def broker(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(4096):
                received.extend(decoder.feed(data))

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, broker, 0)
        address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        notifier = Notifier()
        await nursery.start(notifier.run)
        notifier.submit(address, notify(5))
        notifier.submit("127.0.0.1:1", notify(5))  # nobody listens there
        await wait_until(lambda: received and notifier.failed == 1, what="one delivered, one failed")
        assert received[0].code == 1008 and received[0].is_oneway and received[0].ext("masterEpoch") == "5"
        assert notifier.sent == 1
        nursery.cancel_scope.cancel()


class Receiver:
    """A broker's listening port on loopback that records the 1008s it reads."""

    def __init__(self) -> None:
        self.received: list[RemotingCommand] = []
        self.port = 0
        self._scope = trio.CancelScope()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, port: int = 0, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until `kill()`: then the listener and every accepted connection close, as when the
        broker process dies."""
        self._scope = trio.CancelScope()
        with self._scope:
            listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            task_status.started()
            await trio.serve_listeners(self._read, listeners)

    async def _read(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(4096):
                self.received.extend(decoder.feed(data))

    def kill(self) -> None:
        self._scope.cancel()

    def epochs(self) -> list[int]:
        return [int(command.ext("masterEpoch")) for command in self.received]


async def hanging_address() -> tuple[str, trio.socket.SocketType, trio.SocketStream]:
    """An address whose connects hang: a listener that never accepts, its backlog already full, so the
    kernel drops further SYNs (as from a broker host that is down or unreachable)."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = await trio.open_tcp_stream("127.0.0.1", port)
    return f"127.0.0.1:{port}", listener, filler


async def test_a_broker_restarted_on_its_port_gets_the_next_notification() -> None:
    """The connection cached from before the broker died is not written into (that write would vanish
    without an error: the old process's socket is closed); a new connection carries the 1008."""
    broker = Receiver()
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        notifier = Notifier()
        await nursery.start(notifier.run)
        notifier.submit(broker.address, notify(1))
        await wait_until(lambda: broker.epochs() == [1], what="the first 1008")
        broker.kill()
        restarted = Receiver()
        await nursery.start(restarted.serve, broker.port)
        notifier.submit(restarted.address, notify(2))
        await wait_until(lambda: restarted.epochs() == [2], what="the 1008 after the restart")
        assert notifier.sent == 2 and notifier.failed == 0 and notifier.reconnected == 1
        nursery.cancel_scope.cancel()


async def test_cached_connections_are_reused_while_the_broker_lives() -> None:
    broker = Receiver()
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        notifier = Notifier()
        await nursery.start(notifier.run)
        for epoch in (1, 2, 3):
            notifier.submit(broker.address, notify(epoch))
            # awaited within this iteration, so the lambda always sees this epoch
            await wait_until(lambda: len(broker.received) == epoch, what=f"1008 of epoch {epoch}")  # noqa: B023
        assert broker.epochs() == [1, 2, 3] and notifier.reconnected == 0 and len(notifier._connections) == 1
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def live_behind_hanging(hanging_count: int) -> AsyncIterator[tuple[Notifier, Receiver, list[str]]]:
    """A running notifier, one live broker, and `hanging_count` addresses whose connects hang;
    a 1008 of epoch 1 is submitted to each hanging address and then to the live one."""
    hanging = [await hanging_address() for _ in range(hanging_count)]
    broker = Receiver()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            notifier = Notifier()
            await nursery.start(notifier.run)
            for address, _listener, _filler in hanging:
                notifier.submit(address, notify(1))
            notifier.submit(broker.address, notify(1))
            yield notifier, broker, [address for address, _, _ in hanging]
            nursery.cancel_scope.cancel()
    finally:
        for _address, listener, filler in hanging:
            listener.close()
            await filler.aclose()


async def test_brokers_that_hang_do_not_hold_back_a_live_one(monkeypatch) -> None:
    """Every address gets its own sender at once: the live broker's 1008 goes out while the connects
    to the hanging ones are still waiting (the old four workers made it wait behind them)."""
    monkeypatch.setattr(_notifier, "CONNECT_TIMEOUT_S", 30.0)  # longer than this test may run
    async with live_behind_hanging(8) as (notifier, broker, hanging):
        await wait_until(lambda: broker.epochs() == [1], what="the live broker's 1008")
        assert notifier.sent == 1 and notifier.failed == 0 and len(notifier._sending) == len(hanging)


async def test_senders_are_bounded_and_a_hanging_connect_gives_up(monkeypatch) -> None:
    """Past MAX_SENDERS an address waits its turn; a connect that hangs fails after CONNECT_TIMEOUT_S."""
    monkeypatch.setattr(_notifier, "MAX_SENDERS", 2)
    monkeypatch.setattr(_notifier, "CONNECT_TIMEOUT_S", 0.05)
    async with live_behind_hanging(2) as (notifier, broker, _hanging):
        assert list(notifier._queued) == [broker.address]  # both senders busy: it waits
        await wait_until(lambda: broker.epochs() == [1], what="the queued broker's 1008")
        assert notifier.failed == 2 and notifier.sent == 1 and not notifier._sending


async def test_notifications_over_tls_reuse_the_connection_and_follow_a_restarted_broker(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """tls_notify: the broker's certificate is checked, the connection is kept although the broker
    sent its TLS session tickets on it, and a broker that closed it is reconnected to."""
    from rmqc.config import NodeConfig, parse_peers
    from rmqc.node._tls import accept_tls, notify_client_context, server_context
    from rmqc.testing.certs import make_certs

    certs = make_certs(tmp_path)
    broker_side = NodeConfig(peers=parse_peers("n0-127.0.0.1:1"), tls_mode="enforcing",
                             tls_cert_path=str(certs.node_cert), tls_key_path=str(certs.node_key),
                             tls_trust_cert_path=str(certs.ca))
    ours = NodeConfig(peers=parse_peers("n0-127.0.0.1:1"), tls_notify=True, tls_trust_cert_path=str(certs.ca))
    strangers = NodeConfig(peers=parse_peers("n0-127.0.0.1:1"), tls_notify=True,
                           tls_trust_cert_path=str(certs.other_ca))
    received: list[RemotingCommand] = []
    accepted: list[trio.SocketStream] = []
    broker_context = server_context(broker_side)
    assert broker_context is not None

    async def broker(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        try:
            tls = await accept_tls(stream, await stream.receive_some(4), broker_context)
            decoder = FrameDecoder()
            while data := await tls.receive_some(4096):
                received.extend(decoder.feed(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the stranger's handshake refused on its side; the test closing the connection

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, broker, 0)
        address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        notifier = Notifier(notify_client_context(ours))
        await nursery.start(notifier.run)
        notifier.submit(address, notify(5))
        await wait_until(lambda: len(received) == 1, what="the first 1008 over TLS")
        # the broker's session tickets wait unread on the notifier's connection
        await wait_until(lambda: unread_bytes_on(notifier, address), what="the session tickets")
        notifier.submit(address, notify(6))
        await wait_until(lambda: len(received) == 2, what="the second 1008")
        assert [c.ext("masterEpoch") for c in received] == ["5", "6"] and len(accepted) == 1
        assert notifier.reconnected == 0  # the tickets did not read as a closed connection
        await accepted[0].aclose()  # the broker goes away; the next notification reconnects
        await wait_until(lambda: unread_bytes_on(notifier, address), what="the broker's close to arrive")
        notifier.submit(address, notify(7))
        await wait_until(lambda: len(received) == 3, what="the 1008 after the broker closed")
        assert notifier.reconnected == 1 and len(accepted) == 2
        # a notifier that does not trust the broker's CA sends nothing
        distrustful = Notifier(notify_client_context(strangers))
        await nursery.start(distrustful.run)
        distrustful.submit(address, notify(8))
        await wait_until(lambda: distrustful.failed == 1, what="the refused handshake")
        assert len(received) == 3 and distrustful.sent == 0
        nursery.cancel_scope.cancel()
