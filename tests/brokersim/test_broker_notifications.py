"""One simulated broker's 1008 port: a hung broker reads nothing until it resumes, then applies what
waited (a SIGSTOPped broker's kernel keeps the bytes), and an older masterEpoch changes nothing."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import trio
import trio.testing

from rmqc.brokersim import Role, SimBroker, SimTiming, Status
from rmqc.remoting import encode, make_request

SETTLE_S = 0.05  # every task idle this long: a running reader would have read what was sent
WAIT_S = 5.0


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(WAIT_S):
        while not condition():
            await trio.sleep(0.005)
        return
    raise AssertionError(f"timed out after {WAIT_S} s waiting for {what}")


def notify(epoch: int, master_id: int) -> bytes:
    return encode(make_request(1008, 0, {"masterEpoch": epoch, "masterBrokerId": master_id,
                                         "masterAddress": "127.0.0.1:1"}, b'{"syncStateSet":[2]}', oneway=True))


def running_broker(tmp_path: Path) -> SimBroker:
    broker = SimBroker("DefaultCluster", "broker-0000", 0, tmp_path, SimTiming.fast(), random.Random(1),
                       lambda master: ())
    broker.broker_id, broker.status = 2, Status.RUNNING
    return broker


async def test_a_hung_broker_applies_a_waiting_notification_when_it_resumes(tmp_path: Path) -> None:
    broker = running_broker(tmp_path)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(broker._serve_notifications, 0)
        host, _, port = address.rpartition(":")
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            broker.hang()
            await stream.send_all(notify(5, 2))
            await trio.testing.wait_all_tasks_blocked(SETTLE_S)
            assert broker.master_epoch == 0 and broker.notifications == 0  # stopped: nothing read
            broker.resume()
            await wait_until(lambda: broker.master_epoch == 5, what="the 1008 applied after the resume")
            assert broker.role is Role.MASTER and broker.master_id == 2 and broker.notifications == 1
            await stream.send_all(notify(4, 3))  # older than what it knows: counted, not applied
            await wait_until(lambda: broker.notifications == 2, what="the older 1008 read")
            assert broker.master_epoch == 5 and broker.master_id == 2
        nursery.cancel_scope.cancel()
