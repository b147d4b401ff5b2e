"""How long an event loop was held: a task that sleeps a tick again and again and records every
gap between two wake-ups (benchmarks of work that must not stall a node's loop)."""

from __future__ import annotations

import time

import trio

__all__ = ["record_gaps"]


async def record_gaps(gaps: list[float], cancel: trio.CancelScope, tick_s: float) -> None:
    """Until `cancel` is cancelled: sleep `tick_s`, append the ms since the last wake-up to `gaps`."""
    last = time.perf_counter()
    while not cancel.cancel_called:
        await trio.sleep(tick_s)
        now = time.perf_counter()
        gaps.append((now - last) * 1000)
        last = now
