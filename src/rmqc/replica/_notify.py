"""The notifier's decisions (spec 5.4): NOTIFY_BROKER_ROLE_CHANGED (1008) is one-way and
best-effort, at most one notification waits per broker address, and a newer masterEpoch replaces
an older one still waiting, never the other way round. The transport (rmqc.node._notifier) keeps
its waiting notifications here and only decides when and how to send them."""

from __future__ import annotations

from rmqc.remoting import RemotingCommand

# Addresses with a notification waiting; past this the new notification is dropped and counted
# (each broker address has at most one waiting, so this is far above any real cluster's size).
MAX_PENDING_ADDRESSES = 100_000


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
