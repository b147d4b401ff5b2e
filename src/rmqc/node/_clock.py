"""The node's one clock, handed to its replica.

Monotonic time is Trio's clock (`trio.current_time()`), so every deadline, timeout, lease, age and
scan of the node runs on it, and `trio.testing.MockClock` drives a whole node in tests. Wall time
is derived from it (the wall clock read once at start, plus the monotonic time elapsed): it is only
stamped into replicated commands (`leader_ts_ms`, `liveness_lost_ms`, ...) and so into histories,
for people and `rmqc analyze`; an NTP step of the system clock, back or forth, can neither freeze
failure detection nor make every broker look dead.
"""

from __future__ import annotations

import time

import trio

__all__ = ["TrioClock"]


class TrioClock:
    """Build inside `trio.run` (it reads Trio's clock)."""

    def __init__(self, wall_at_start_ms: int | None = None) -> None:
        # the run's clock object itself: what trio.current_time() reads, without its two call
        # layers (the replica reads the time about ten times per write)
        self._trio_clock = trio.lowlevel.current_clock()
        self._started_ms = self.monotonic_ms()
        self._wall_at_start_ms = time.time_ns() // 1_000_000 if wall_at_start_ms is None else wall_at_start_ms

    def monotonic_ms(self) -> int:
        return int(self._trio_clock.current_time() * 1000)

    def wall_ms(self) -> int:
        return self._wall_at_start_ms + self.monotonic_ms() - self._started_ms

    @staticmethod
    def trio_time_of(monotonic_ms: int) -> float:
        """The Trio time at which `monotonic_ms()` reads `monotonic_ms` (half a ms in, so that float
        rounding never makes it read one less, which would wake a sleeper too early forever)."""
        return (monotonic_ms + 0.5) / 1000
