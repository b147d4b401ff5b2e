"""The simulator's event queue: virtual time in microseconds and callbacks in a heap.

Ties are broken by a sequence number, so two runs of one seed process events in exactly the same
order (no dependence on object ids or set order)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from rmqc.errors import BoundExceeded

# A simulated cluster has a few hundred timers and messages in flight; a million pending events
# means something schedules without bound (a retry loop), which must fail loudly, not eat memory.
EVENTS_PENDING_MAX = 1_000_000


class EventQueueFull(BoundExceeded):
    """More events were pending than `EVENTS_PENDING_MAX`."""


class EventQueue:
    def __init__(self) -> None:
        self.now_us = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, when_us: int, action: Callable[..., Any], *args: Any) -> None:
        """Run `action(*args)` at virtual time `when_us` (never earlier than now)."""
        if len(self._heap) >= EVENTS_PENDING_MAX:
            raise EventQueueFull(f"more than {EVENTS_PENDING_MAX} simulator events pending")
        self._seq += 1
        heapq.heappush(self._heap, (max(when_us, self.now_us), self._seq, action, args))

    def after(self, delay_us: int, action: Callable[..., Any], *args: Any) -> None:
        self.at(self.now_us + delay_us, action, *args)

    def run_next(self, until_us: int) -> bool:
        """Run the earliest event if it is due by `until_us`; False when none is."""
        if not self._heap or self._heap[0][0] > until_us:
            return False
        when, _, action, args = heapq.heappop(self._heap)
        self.now_us = when
        action(*args)
        return True
