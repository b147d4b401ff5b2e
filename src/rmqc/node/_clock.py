"""The node's two clocks, kept apart on purpose.

`monotonic_ms` never steps: every deadline, timeout, lease, age and scan of the node reads it (and
the heartbeat table holds it), so an NTP step of the wall clock, back or forth, neither freezes
failure detection nor makes every broker look dead. `wall_ms` is only stamped into replicated
commands (`leader_ts_ms`, `liveness_lost_ms`, ...) and so into histories, for people and for
`rmqc analyze`, which orders by log index and flags a stamp that goes backwards.
"""

from __future__ import annotations

import time

__all__ = ["monotonic_ms", "wall_ms"]


def monotonic_ms() -> int:
    """Milliseconds on CLOCK_MONOTONIC: only differences mean anything."""
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    """Milliseconds since the epoch, as Java stamps them; may step back or forth at any time."""
    return time.time_ns() // 1_000_000
