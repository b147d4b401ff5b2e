"""One broker group of three real Java brokers brought up against a set of controllers (rmqc nodes
or the Java controller), and the few reads every user of it needs: the group's replica state
from the controller, an mqadmin command that must succeed, a poll with a deadline. The interop
tests, the benchmarks and `rmqc chaos run --brokers java` share them.

The two errors subclass AssertionError so that a test reports a failed bring-up as a failed check."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from rmqc.acl import Credentials
from rmqc.client import ClientError, ControllerClient
from rmqc.remoting import loads_fastjson

from ._processes import Broker, RocketMQ

__all__ = ["ALL", "BRING_UP_S", "GROUP", "POLL_S", "TOPIC", "Addressed", "MqAdminFailed", "WaitTimedOut", "bring_up",
           "mqadmin_ok", "now_ms", "replica_state", "wait_for"]

GROUP = "broker-a"
TOPIC = "rmqc-interop"
ALL = [1, 2, 3]
BRING_UP_S = 120.0  # three broker JVMs registering on a loaded 2-core machine
POLL_S = 0.05


class WaitTimedOut(AssertionError):
    """A condition polled by `wait_for` did not hold within its deadline."""


class MqAdminFailed(AssertionError):
    """An mqadmin command that had to succeed exited non-zero (its output is in the message)."""


class Addressed(Protocol):
    """Where brokers dial the controllers: all bring_up needs of them."""

    @property
    def addresses(self) -> list[str]: ...


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def wait_for(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str,
                   interval_s: float = POLL_S) -> None:
    """Poll until `condition` holds (never a fixed sleep); WaitTimedOut after `timeout_s`."""
    with trio.move_on_after(timeout_s):
        while not await condition():
            await trio.sleep(interval_s)
        return
    raise WaitTimedOut(f"timed out after {timeout_s} s waiting for {what}")


async def replica_state(admin: ControllerClient) -> tuple[int | None, int, list[int]]:
    """(master id, master epoch, SyncStateSet) of GROUP from the controller (1004); (None, 0, [])
    while it has none or does not answer."""
    try:
        answer = await admin.get_replica_info(GROUP)
    except ClientError:
        return None, 0, []
    if answer.code != 0 or answer.body is None:
        return None, 0, []
    master = answer.ext("masterBrokerId")
    body = loads_fastjson(answer.body)
    return (int(master) if master else None, int(answer.ext("masterEpoch") or 0),
            sorted(body.get("syncStateSet") or []))


async def mqadmin_ok(rmq: RocketMQ, *args: str, credentials: Credentials | bool | None = True) -> str:
    """The output of an mqadmin command that must succeed (signed as RocketMQ.mqadmin's `credentials`)."""
    code, out = await rmq.mqadmin(*args, credentials=credentials)
    if code != 0:
        raise MqAdminFailed(f"mqadmin {' '.join(args)} exited with {code}: {out[-3000:]}")
    return out


async def bring_up(rmq: RocketMQ, controllers: Addressed, admin: ControllerClient,
                   broker_config: dict[str, object] | None = None,
                   dial: Callable[[int], list[str]] | None = None) -> list[Broker]:
    """A Java NameServer (unless the brokers have one already: `rmq.use_rmqc_namesrv`, or one
    started) and three brokers of GROUP (started together); returns once they have ids 1-3 from
    the controller, one master and all three in the SyncStateSet. Broker `index` dials the
    controllers at `dial(index)` (a chaos run's fault proxies), by default at their addresses."""
    if rmq.namesrv is None and rmq.namesrv_addr is None:
        await rmq.start_namesrv()
    brokers = [rmq.broker(index, dial(index) if dial else controllers.addresses, GROUP, broker_config)
               for index in range(len(ALL))]
    for broker in brokers:
        broker.spawn()
    for broker in brokers:
        await broker.wait_booted()

    async def all_in_sync() -> bool:
        master, _, in_sync = await replica_state(admin)
        return master is not None and in_sync == ALL and all(b.broker_id() for b in brokers)

    await wait_for(all_in_sync, BRING_UP_S, "three brokers registered, a master, all in the SyncStateSet", 0.2)
    return brokers
