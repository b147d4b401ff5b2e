"""NOTIFY_BROKER_ROLE_CHANGED (1008) fan-out: one-way, best-effort, newest epoch wins (spec 5.4).

The leader submits (address, command) pairs after elections. Per address at most one notification
waits; a newer masterEpoch replaces an older one still waiting, an older one never replaces a newer.
A few worker tasks send them over cached connections to the brokers' listen addresses. A failure
drops the connection and the notification: brokers also converge by polling 1004 every 5 s.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque

import trio

from rmqc.remoting import RemotingCommand, encode

log = logging.getLogger("rmqc.node.notifier")

# Java sends notifications from a pool of 3 threads with a 3 s send timeout.
WORKERS = 4
SEND_TIMEOUT_S = 3.0
# Addresses with a notification waiting; past this the new notification is dropped and counted
# (each broker address has at most one waiting, so this is far above any real cluster's size).
MAX_PENDING_ADDRESSES = 100_000
# Open connections to brokers kept for reuse; the least recently used is closed beyond this.
MAX_CACHED_CONNECTIONS = 1024


def master_epoch_of(command: RemotingCommand) -> int:
    try:
        return int(command.ext("masterEpoch") or -1)
    except ValueError:
        return -1


class Notifier:
    def __init__(self) -> None:
        self._pending: dict[str, RemotingCommand] = {}
        self._order: deque[str] = deque()
        self._work = trio.Semaphore(0, max_value=MAX_PENDING_ADDRESSES)
        self._connections: OrderedDict[str, trio.SocketStream] = OrderedDict()
        self._connecting: dict[str, trio.Lock] = {}
        self.sent = 0
        self.failed = 0
        self.superseded = 0
        self.dropped = 0

    def submit(self, address: str, command: RemotingCommand) -> None:
        waiting = self._pending.get(address)
        if waiting is not None:
            if master_epoch_of(command) >= master_epoch_of(waiting):
                self._pending[address] = command
                self.superseded += 1
            return
        if len(self._pending) >= MAX_PENDING_ADDRESSES:
            self.dropped += 1
            return
        self._pending[address] = command
        self._order.append(address)
        self._work.release()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                for number in range(WORKERS):
                    nursery.start_soon(self._worker, name=f"notifier-{number}")
                task_status.started()
        finally:
            # shielded: we are usually here because of a cancellation, and every socket must close
            with trio.CancelScope(shield=True):
                for stream in self._connections.values():
                    await trio.aclose_forcefully(stream)
            self._connections.clear()

    async def _worker(self) -> None:
        while True:
            await self._work.acquire()
            address = self._order.popleft()
            command = self._pending.pop(address)
            await self._send(address, command)

    async def _send(self, address: str, command: RemotingCommand) -> None:
        lock = self._connecting.setdefault(address, trio.Lock())
        async with lock:
            try:
                with trio.fail_after(SEND_TIMEOUT_S):
                    stream = await self._connection(address)
                    await stream.send_all(encode(command))
                self.sent += 1
                log.info("sent 1008 to %s (masterEpoch %s)", address, command.ext("masterEpoch"))
            except (OSError, ValueError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as error:
                self.failed += 1
                log.info("1008 to %s failed: %s", address, error)
                await self._drop(address)
        if not lock.locked() and not lock.statistics().tasks_waiting:
            self._connecting.pop(address, None)

    async def _connection(self, address: str) -> trio.SocketStream:
        stream = self._connections.get(address)
        if stream is not None:
            self._connections.move_to_end(address)
            return stream
        host, _, port = address.rpartition(":")
        stream = await trio.open_tcp_stream(host, int(port))
        self._connections[address] = stream
        while len(self._connections) > MAX_CACHED_CONNECTIONS:
            _, oldest = self._connections.popitem(last=False)
            await trio.aclose_forcefully(oldest)
        return stream

    async def _drop(self, address: str) -> None:
        stream = self._connections.pop(address, None)
        if stream is not None:
            await trio.aclose_forcefully(stream)
