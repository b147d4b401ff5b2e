"""NOTIFY_BROKER_ROLE_CHANGED (1008) fan-out: one-way, best-effort, newest epoch wins (spec 5.4).

The replica emits Notify(address, command) actions after elections; what waits, and which newer
masterEpoch supersedes which, is decided by rmqc.replica.PendingNotifications. This is the transport.

Each address with a notification waiting gets a sender of its own (up to MAX_SENDERS at once; more
addresses wait their turn in submission order), so a broker that refuses, hangs or is slow to
connect delays only its own notifications, never another broker's. Senders keep their connections
for reuse. A cached connection the broker closed (it was killed, perhaps restarted on the same port)
is noticed before use and replaced, not written into: a write on it would vanish without an error.
A failure drops the connection and the notification: brokers also converge by polling 1004 every 5 s.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections import OrderedDict, deque
from collections.abc import Callable

import trio

from rmqc.remoting import RemotingCommand, encode
from rmqc.replica import PendingNotifications

from ._tls import TlsStream, dial_tls

log = logging.getLogger("rmqc.node.notifier")

# Loopback and LAN connects finish in microseconds to milliseconds, and an unanswered SYN is only
# retried after 1 s: a broker that has not accepted within this is down or unreachable, and it learns
# the new master from its 1004 poll. Short, so a dead address holds its sender only briefly.
CONNECT_TIMEOUT_S = 0.5
# Java gives a one-way send 3 s; a send blocks only when the broker stopped reading (a full buffer).
SEND_TIMEOUT_S = 3.0
# Senders at once. Each holds at most one socket while it connects, so this bounds the descriptors
# and the connects in flight: 512 connects cost ~50 ms of CPU, well inside CONNECT_TIMEOUT_S even
# when all start together (with 2,000 at once, live loopback brokers timed out). A hanging broker
# holds one sender for CONNECT_TIMEOUT_S, so it takes 512 of them before live ones wait at all.
MAX_SENDERS = 512
# Open connections to brokers kept for reuse; the least recently used is closed beyond this. Above
# the broker count of a large cluster (1,000 groups of 3), so a mass failover reconnects nobody.
MAX_CACHED_CONNECTIONS = 4096
# What a failed connect or send raises (ValueError: an address without a numeric port).
# One read of what a TLS broker sent on its own (session tickets) before a notification.
RECEIVE_BYTES = 64 * 1024
SEND_ERRORS = (OSError, ValueError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError)


async def open_stream(address: str) -> trio.SocketStream:
    """One TCP connection to `host:port`, the first address the host resolves to. Not
    trio.open_tcp_stream: its happy-eyeballs machinery costs three times as much CPU per connect,
    and a mass failover connects to thousands of brokers at once."""
    host, _, port = address.rpartition(":")
    resolved = await trio.socket.getaddrinfo(host, int(port), type=trio.socket.SOCK_STREAM)  # numeric: no thread
    if not resolved:
        raise OSError(f"{address} resolves to no address")
    family, kind, protocol, _, socket_address = resolved[0]
    sock = trio.socket.socket(family, kind, protocol)
    try:
        await sock.connect(socket_address)
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


class Notifier:
    def __init__(self, ssl_context: ssl.SSLContext | None = None,
                 on_sent: Callable[[str, RemotingCommand], None] | None = None) -> None:
        self._ssl_context = ssl_context  # None: plain TCP (tls_notify off)
        self._on_sent = on_sent or _ignore_sent  # each 1008 written to its broker (a failover's step)
        self._pending = PendingNotifications()  # what waits, and which one supersedes which
        self._queued: deque[str] = deque()  # pending addresses without a sender, oldest first
        self._sending: set[str] = set()  # addresses a sender serves right now
        # least recently used first
        self._connections: OrderedDict[str, trio.SocketStream | TlsStream] = OrderedDict()
        self._nursery: trio.Nursery | None = None
        self.sent = 0
        self.failed = 0
        self.reconnected = 0  # cached connections found closed by the broker and replaced
        self.evicted = 0  # cached connections closed for MAX_CACHED_CONNECTIONS

    @property
    def superseded(self) -> int:
        return self._pending.superseded

    @property
    def dropped(self) -> int:
        return self._pending.dropped

    def submit(self, address: str, command: RemotingCommand) -> None:
        if not self._pending.offer(address, command):
            return
        if address not in self._sending:  # a busy sender takes it after its current send
            self._queued.append(address)
            self._start_senders()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._start_senders()  # what was submitted before the notifier ran
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            # shielded: we are usually here because of a cancellation, and every socket must close
            with trio.CancelScope(shield=True):
                for stream in self._connections.values():
                    await trio.aclose_forcefully(stream)
            self._connections.clear()

    def _start_senders(self) -> None:
        while self._queued and self._nursery is not None and len(self._sending) < MAX_SENDERS:
            address = self._take_queued()
            self._nursery.start_soon(self._sender, address, name="notifier-sender")

    def _take_queued(self) -> str:
        address = self._queued.popleft()
        self._sending.add(address)
        return address

    async def _sender(self, address: str) -> None:
        """Send what waits for `address` until nothing does, then serve the next queued address."""
        while True:
            while (command := self._pending.pop(address)) is not None:
                await self._send(address, command)
            self._sending.discard(address)
            if not self._queued:
                return
            address = self._take_queued()

    async def _send(self, address: str, command: RemotingCommand) -> None:
        frame = encode(command)
        try:
            if not await self._sent_on_cached(address, frame):
                stream = await self._connect(address)
                with trio.fail_after(SEND_TIMEOUT_S):
                    await stream.send_all(frame)
        except SEND_ERRORS as error:
            self.failed += 1
            log.info("1008 to %s failed: %s", address, error)
            await self._drop(address)
            return
        self.sent += 1
        log.debug("sent 1008 to %s (masterEpoch %s)", address, command.ext("masterEpoch"))
        self._on_sent(address, command)

    async def _sent_on_cached(self, address: str, frame: bytes) -> bool:
        """True once `frame` went out on the cached connection to `address`; False when there is no
        usable one (a connection the broker closed is dropped, for a new one to replace it)."""
        stream = self._connections.get(address)
        if stream is None:
            return False
        if _broker_gone(stream):
            return await self._replace(address)
        self._connections.move_to_end(address)
        try:
            with trio.fail_after(SEND_TIMEOUT_S):
                await stream.send_all(frame)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            return await self._replace(address)  # reset under the send: one try on a new connection
        return True

    async def _replace(self, address: str) -> bool:
        self.reconnected += 1
        await self._drop(address)
        return False

    async def _connect(self, address: str) -> trio.SocketStream | TlsStream:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            tcp = await open_stream(address)
        stream: trio.SocketStream | TlsStream = tcp
        if self._ssl_context is not None:
            try:
                stream = await dial_tls(tcp, self._ssl_context)  # its own deadline
            except BaseException:
                await trio.aclose_forcefully(tcp)
                raise
        self._connections[address] = stream
        while len(self._connections) > MAX_CACHED_CONNECTIONS:
            _, oldest = self._connections.popitem(last=False)
            self.evicted += 1
            await trio.aclose_forcefully(oldest)
        return stream

    async def _drop(self, address: str) -> None:
        stream = self._connections.pop(address, None)
        if stream is not None:
            await trio.aclose_forcefully(stream)


def _ignore_sent(_address: str, _command: RemotingCommand) -> None:
    pass


def _broker_gone(stream: trio.SocketStream | TlsStream) -> bool:
    """Brokers never write on a one-way connection, so readable means end of stream or a reset: the
    broker process that accepted it is gone, maybe restarted on the same port. Under TLS the
    broker's own TLS messages (session tickets after the handshake) are read and set aside first."""
    if not isinstance(stream, TlsStream):
        return stream.socket.is_readable()
    while stream.transport.socket.is_readable():
        try:
            data = os.read(stream.fd, RECEIVE_BYTES)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not data:
            return True
        try:
            stream.decrypt(data)
        except trio.BrokenResourceError:
            return True
        if stream.closed_by_peer:
            return True
    return False
