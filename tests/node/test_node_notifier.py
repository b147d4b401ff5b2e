"""The 1008 notifier: one pending notification per broker address, the newest masterEpoch wins,
and notifications reach a listening broker one-way."""

from __future__ import annotations

import trio

from rmqc.node._notifier import Notifier
from rmqc.remoting import FrameDecoder, RemotingCommand, make_request

from node_helpers import wait_until


def notify(epoch: int) -> RemotingCommand:
    return make_request(1008, 0, {"masterEpoch": epoch, "masterBrokerId": 2}, b'{"syncStateSet":[2]}', oneway=True)


async def test_newest_epoch_supersedes_a_waiting_notification() -> None:
    notifier = Notifier()  # not running: everything submitted stays pending
    notifier.submit("10.0.0.1:30911", notify(2))
    notifier.submit("10.0.0.1:30911", notify(1))  # older: ignored
    notifier.submit("10.0.0.1:30911", notify(3))  # newer: replaces
    notifier.submit("10.0.0.2:30911", notify(1))
    assert {address: int(command.ext("masterEpoch")) for address, command in notifier._pending.items()} == {
        "10.0.0.1:30911": 3, "10.0.0.2:30911": 1}
    assert notifier.superseded == 1


async def test_notifications_reach_a_listening_broker_and_failures_are_counted() -> None:
    received: list[RemotingCommand] = []

    async def broker(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(4096):
                received.extend(decoder.feed(data))

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, broker, 0)
        address = "127.0.0.1:%d" % listeners[0].socket.getsockname()[1]
        notifier = Notifier()
        await nursery.start(notifier.run)
        notifier.submit(address, notify(5))
        notifier.submit("127.0.0.1:1", notify(5))  # nobody listens there
        await wait_until(lambda: received and notifier.failed == 1, what="one delivered, one failed")
        assert received[0].code == 1008 and received[0].is_oneway and received[0].ext("masterEpoch") == "5"
        assert notifier.sent == 1
        nursery.cancel_scope.cancel()
