"""A controller whose own event loop stalls (here: a task that blocks it, as a long GC pause or a
long synchronous step would) for longer than the brokers' heartbeat timeout, while the brokers keep
heartbeating from another thread over real TCP: the node must not fail over the live master for
heartbeats it could not read. A master that really stopped heartbeating is still failed over.

After a stall, the heartbeats sent meanwhile wait in the kernel, and whether the readers or the
liveness loop run first is up to the scheduler (with thousands of connections, some readers run
after it). The test takes the order that fails without the fix every time: the master's heartbeats
are held during the stall and resume once the liveness loop has run after it.

Bounds: HEARTBEAT_TIMEOUT_MS is short so the stall (STALL_S) exceeds it twice over; every wait on
the node is bounded by wait_until.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from node_helpers import wait_until
from test_node_single import CLUSTER, register, single_config, start

from rmqc.client import ControllerClient, heartbeat_ext
from rmqc.liveness import BrokerKey
from rmqc.node import ControllerNode
from rmqc.remoting import RequestCode, encode, make_request

HEARTBEAT_TIMEOUT_MS = 1000
HEARTBEAT_EVERY_S = 0.1
STALL_S = 2.5  # the node's loop is blocked this long: 2.5 heartbeat timeouts
GROUP = "broker-stall"
ADDRESSES = {1: "127.0.0.1:1", 2: "127.0.0.1:2"}  # nothing listens: 1008s fail, which is fine here
JOIN_TIMEOUT_S = 5.0


class HeartbeatThread:
    """Brokers outside the node's event loop: one blocking TCP connection each, a 904 every
    HEARTBEAT_EVERY_S, until `stop()` (a broker id in `silent` stops sending, still connected)."""

    def __init__(self, node_address: str, broker_ids: list[int]) -> None:
        host, port = node_address.rsplit(":", 1)
        self.frames = {i: encode(make_request(RequestCode.BROKER_HEARTBEAT, 0, heartbeat_ext(
            CLUSTER, GROUP, i, ADDRESSES[i], epoch=1, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS), oneway=True))
            for i in broker_ids}
        self.sockets = {i: socket.create_connection((host, int(port))) for i in broker_ids}
        self.silent: set[int] = set()
        self.rounds = 0  # sending rounds done (tests wait on it)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HeartbeatThread:
        return self

    def start(self) -> None:
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_TIMEOUT_S)
        for sock in self.sockets.values():
            sock.close()

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY_S):
            for broker_id, sock in self.sockets.items():
                if broker_id not in self.silent:
                    sock.sendall(self.frames[broker_id])
            self.rounds += 1


def key(broker_id: int) -> BrokerKey:
    return BrokerKey(CLUSTER, GROUP, broker_id)


@asynccontextmanager
async def master_with_replica(node: ControllerNode, address: str) -> AsyncIterator[HeartbeatThread]:
    """Broker 1 master of GROUP, broker 2 in its SyncStateSet (so an election would pick 2), both
    heartbeating from a HeartbeatThread. The set-up client's connection closes only once both
    brokers' heartbeats arrive on the thread's connections (a close would be a death seen)."""
    with HeartbeatThread(address, [1, 2]) as brokers:
        async with ControllerClient([address]) as client:
            assert await register(client, GROUP, ADDRESSES[1]) == 1
            await client.heartbeat(CLUSTER, GROUP, 1, ADDRESSES[1], heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
            assert (await client.elect_master(CLUSTER, GROUP, 1)).code == 0
            assert await register(client, GROUP, ADDRESSES[2]) == 2
            await client.heartbeat(CLUSTER, GROUP, 2, ADDRESSES[2], heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
            await wait_until(lambda: len(node.replica.liveness.table) == 2, what="two live brokers")
            assert (await client.alter_sync_state_set(GROUP, 1, 1, [1, 2], 1)).code == 0
            setup_channel = node.replica.liveness.table.live_info(key(1)).channel_id
            brokers.start()
            await wait_until(lambda: all(node.replica.liveness.table.live_info(key(i)).channel_id
                                         not in (None, setup_channel) for i in (1, 2)),
                             what="heartbeats on the thread's connections")
        yield brokers


def master_epoch(node: ControllerNode) -> tuple[int | None, int]:
    group = node.replica.state.group(GROUP)
    assert group is not None
    return group.master_id, group.master_epoch


async def test_a_stalled_loop_fails_over_no_live_master(tmp_path: Path) -> None:
    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with master_with_replica(node, config.listen_address) as brokers:
            # the liveness loop is on its deadline schedule (its first wake-up may be the first scan)
            rounds = node.replica.liveness.rounds
            await wait_until(lambda: node.replica.liveness.rounds >= rounds + 2, timeout_s=10, what="liveness rounds")
            brokers.silent.add(1)
            sent = brokers.rounds
            await wait_until(lambda: brokers.rounds >= sent + 2, what="broker 1's last heartbeat read")
            rounds = node.replica.liveness.rounds
            time.sleep(STALL_S)  # noqa: ASYNC251 - the fault: this node's event loop is blocked, the brokers are not
            await wait_until(lambda: node.replica.liveness.stalls.stalls >= 1 and node.replica.liveness.rounds > rounds,
                             what="the stall seen and a liveness round after it")
            brokers.silent.discard(1)
            assert node.replica.liveness.stalls.longest_s >= STALL_S - 0.5
            # two heartbeat timeouts after the stall: anything the stall would have expired is due
            resumed = trio.current_time()
            await wait_until(lambda: trio.current_time() - resumed > 2 * HEARTBEAT_TIMEOUT_MS / 1000
                             and node.quiescent(), timeout_s=10, what="two heartbeat timeouts after the stall")
            assert master_epoch(node) == (1, 1)
            assert node.replica.liveness.table.forgiven_ms >= (STALL_S - 0.5) * 1000
        nursery.cancel_scope.cancel()


async def test_a_master_that_really_went_silent_is_still_failed_over(tmp_path: Path) -> None:
    config = single_config(tmp_path)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        async with master_with_replica(node, config.listen_address) as brokers:
            brokers.silent.add(1)  # a hung master: connection open, no heartbeats
            await wait_until(lambda: master_epoch(node) == (2, 2), timeout_s=10,
                             what="broker 2 elected once broker 1's heartbeats stopped")
            assert node.replica.liveness.stalls.total_s < HEARTBEAT_TIMEOUT_MS / 1000
        nursery.cancel_scope.cancel()
