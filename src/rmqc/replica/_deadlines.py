"""The replica's deadlines, in one place: every part whose timeouts the clock drives registers here
once, and `Replica.next_wakeup_ms()` and `Replica.advance_time()` both read this one list, so a part
cannot be woken for a deadline it is never asked to expire, nor asked to expire what no wake-up
brings (the two used to poll their sources by hand, each its own list).

Not here, on purpose: the Raft core's ticks (planned by the driver after each pass: quiet ticks
need no wake-up); the waits the driver itself expires on its passes (proposals and reads: while
any waits, the replica ticks, so a pass comes every tick); and the heartbeat table (rmqc.replica.
_liveness), whose round must be judged due BEFORE the replica forgives a stall to the brokers and
run after it, which a plain `expire(now_ms)` cannot say.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["DeadlineSource", "Deadlines"]


class DeadlineSource(Protocol):
    def next_deadline_ms(self) -> int | None:
        """The next monotonic ms at which `expire` has work (None: nothing waits)."""

    def expire(self, now_ms: int) -> None:
        """Do what is due at `now_ms` (called by advance_time, whatever next_deadline_ms said)."""


class Deadlines:
    def __init__(self) -> None:
        self._sources: list[DeadlineSource] = []

    def register(self, source: DeadlineSource) -> None:
        self._sources.append(source)

    def next_ms(self) -> int | None:
        soonest: int | None = None
        for source in self._sources:
            deadline = source.next_deadline_ms()
            if deadline is not None and (soonest is None or deadline < soonest):
                soonest = deadline
        return soonest

    def expire(self, now_ms: int) -> None:
        """Every source, in the order they registered (the replica's order of old)."""
        for source in self._sources:
            source.expire(now_ms)
