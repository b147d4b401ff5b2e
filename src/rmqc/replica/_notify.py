"""The notifier's decisions (spec 5.4): NOTIFY_BROKER_ROLE_CHANGED (1008) is one-way and
best-effort, at most one notification waits per broker address, and a newer masterEpoch replaces
an older one still waiting, never the other way round; which addresses have a sender, when a
cached connection is reused and what a failed send costs (NotifierState). The transport
(rmqc.node._notifier) keeps its waiting notifications, senders and connections here, and only
connects, writes and runs the senders."""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Generic, TypeVar

from rmqc.remoting import RemotingCommand

# Addresses with a notification waiting; past this the new notification is dropped and counted
# (each broker address has at most one waiting, so this is far above any real cluster's size).
MAX_PENDING_ADDRESSES = 100_000
# Open connections to brokers kept for reuse; the least recently used is closed beyond this. Above
# the broker count of a large cluster (1,000 groups of 3), so a mass failover reconnects nobody.
MAX_CACHED_CONNECTIONS = 4096

Connection = TypeVar("Connection")


def master_epoch_of(command: RemotingCommand) -> int:
    try:
        return int(command.ext("masterEpoch") or -1)
    except ValueError:
        return -1


class PendingNotifications:
    """address -> the newest notification waiting for it."""

    def __init__(self, max_addresses: int = MAX_PENDING_ADDRESSES) -> None:
        self._max = max_addresses
        self._pending: dict[str, RemotingCommand] = {}
        self.superseded = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._pending)

    def offer(self, address: str, command: RemotingCommand) -> bool:
        """Keep `command` for `address`; True when the address had nothing waiting (it needs a sender)."""
        waiting = self._pending.get(address)
        if waiting is not None:
            if master_epoch_of(command) >= master_epoch_of(waiting):
                self._pending[address] = command
                self.superseded += 1
            return False
        if len(self._pending) >= self._max:
            self.dropped += 1
            return False
        self._pending[address] = command
        return True

    def pop(self, address: str) -> RemotingCommand | None:
        """The notification to send to `address` now (None: nothing waits)."""
        return self._pending.pop(address, None)


class NotifierState(Generic[Connection]):
    """The notifier's bookkeeping, apart from its sockets: what waits (PendingNotifications), which
    addresses have a sender and which wait for one, the connections kept for reuse (least recently
    used first; `Connection` is the transport's stream), and what became of each notification.

    Each address with a notification waiting gets a sender of its own, up to `max_senders` at once;
    more addresses wait their turn in submission order, so a broker that refuses, hangs or is slow to
    connect delays only its own notifications. A cached connection that broke (the broker closed or
    reset it: it was killed, perhaps restarted on the same port) is worth one more try on a new
    connection; any other failure drops the notification: brokers also converge by polling 1004.

    The transport is a subclass: its counters (what became of the notifications) are the node's."""

    def __init__(self, max_senders: int, max_connections: int = MAX_CACHED_CONNECTIONS) -> None:
        self._max_senders = max_senders
        self._max_connections = max_connections
        self._pending = PendingNotifications()
        self._queued: deque[str] = deque()  # pending addresses without a sender, oldest first
        self._sending: set[str] = set()  # addresses a sender serves right now
        self._connections: OrderedDict[str, Connection] = OrderedDict()
        self.sent = 0
        self.failed = 0
        self.reconnected = 0  # cached connections that broke and were replaced by a new one
        self.evicted = 0  # cached connections closed for max_connections

    @property
    def superseded(self) -> int:
        return self._pending.superseded

    @property
    def dropped(self) -> int:
        return self._pending.dropped

    def submit(self, address: str, command: RemotingCommand) -> None:
        """Keep `command` for `address`; its address joins the queue unless it waits already or a
        sender serves it (that sender takes it after its current send)."""
        if self._pending.offer(address, command) and address not in self._sending:
            self._queued.append(address)

    def senders_to_start(self) -> list[str]:
        """The queued addresses that get a new sender now (as many as max_senders allows)."""
        started = []
        while self._queued and len(self._sending) < self._max_senders:
            started.append(self._take_queued())
        return started

    def next_command(self, address: str) -> RemotingCommand | None:
        """What the sender of `address` sends next (None: nothing waits)."""
        return self._pending.pop(address)

    def served(self, address: str) -> str | None:
        """The sender of `address` found nothing more to send: the queued address it serves next
        (None: the sender ends)."""
        self._sending.discard(address)
        return self._take_queued() if self._queued else None

    def reuse(self, address: str) -> Connection | None:
        """The cached connection to `address`, now the most recently used (None: connect anew)."""
        connection = self._connections.get(address)
        if connection is not None:
            self._connections.move_to_end(address)
        return connection

    def connected(self, address: str, connection: Connection) -> list[Connection]:
        """Cache the new connection to `address`; the least recently used ones beyond
        max_connections, which the transport closes."""
        self._connections[address] = connection
        evicted = []
        while len(self._connections) > self._max_connections:
            evicted.append(self._connections.popitem(last=False)[1])
        self.evicted += len(evicted)
        return evicted

    def forget(self, address: str) -> Connection | None:
        """The connection to `address` that failed, out of the cache for the transport to close."""
        return self._connections.pop(address, None)

    def forget_all(self) -> list[Connection]:
        """Every cached connection, out of the cache for the transport to close (it stops)."""
        connections = list(self._connections.values())
        self._connections.clear()
        return connections

    def retry_after_failure(self, *, on_cached: bool, timed_out: bool) -> bool:
        """A send failed: True when it is tried once more on a new connection (a cached connection
        broke under it, or was found closed before it); False when the notification is dropped and
        counted (a new connection failed, or a write timed out: the broker stopped reading)."""
        if on_cached and not timed_out:
            self.reconnected += 1
            return True
        self.failed += 1
        return False

    def delivered(self) -> None:
        self.sent += 1

    def _take_queued(self) -> str:
        address = self._queued.popleft()
        self._sending.add(address)
        return address
