"""How far behind its own schedule the simulator runs, and whether its results can be trusted.

A simulated broker that wakes up late sends its heartbeat late; past the controllers' heartbeat
timeout they rightly fail it over. Those failovers are the simulator's fault, not the
controllers', so every periodic step (heartbeat, 1004 poll, shrink check, 103 registration,
replication tick, and a probe that does nothing but wake up) records how late it woke against the time it asked for, and
the fleet's summary reports it. Pure bookkeeping: time enters as seconds of lateness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["INVALID_FRACTION", "KINDS", "Lateness", "next_due"]

KINDS = ("heartbeat", "poll", "shrink", "register", "replication", "probe")
# Results are not valid once a step ran later than this fraction of the heartbeat timeout: a
# heartbeat that late has used up a quarter of the controllers' margin (timeout minus interval),
# so any failover seen near then may be the simulator's doing. A quarter, not the whole margin,
# because the lateness of other steps we did not sample (1008 handling, the writer tasks) is of
# the same size, and a simulator that close to the edge is already not measuring the controllers.
INVALID_FRACTION = 0.25


def next_due(due_s: float, interval_s: float, now_s: float) -> float:
    """The next due time of a fixed-rate step that was due at `due_s` and ended at `now_s`: one
    interval on, or, if that has passed already (the step overran, or the process stalled), one
    interval from now, so a late schedule never fires a burst of catch-up steps."""
    due_s += interval_s
    return due_s if due_s > now_s else now_s + interval_s


@dataclass(slots=True)
class _Window:
    count: int = 0
    total_s: float = 0.0
    worst_s: float = 0.0

    def add(self, late_s: float) -> None:
        self.count += 1
        self.total_s += late_s
        if late_s > self.worst_s:
            self.worst_s = late_s

    def to_json(self) -> dict[str, Any]:
        mean_ms = 1000 * self.total_s / self.count if self.count else 0.0
        return {"steps": self.count, "meanMs": round(mean_ms, 1), "maxMs": round(1000 * self.worst_s, 1)}


class Lateness:
    """Per kind of step: the steps, mean and worst lateness of the current window (reset by each
    `take_window`) and the worst since the start. A window in which any step was later than
    `limit_s` is not valid: what the controllers did then may be the simulator's doing. Windows,
    not the whole run, because a fleet's start-up (thousands of registrations at once) may fall
    behind while the steady state that follows is sound; `invalid_windows` keeps the count."""

    def __init__(self, heartbeat_timeout_ms: int) -> None:
        self.limit_s = INVALID_FRACTION * heartbeat_timeout_ms / 1000
        self._window = {kind: _Window() for kind in KINDS}
        self.worst_s = {kind: 0.0 for kind in KINDS}
        self.last_s = {kind: 0.0 for kind in KINDS}  # the latest step of each kind
        self.invalid_windows = 0

    def record(self, kind: str, late_s: float) -> None:
        """One step of `kind` woke `late_s` after its due time (negative counts as on time)."""
        late_s = max(0.0, late_s)
        self.last_s[kind] = late_s
        self._window[kind].add(late_s)
        if late_s > self.worst_s[kind]:
            self.worst_s[kind] = late_s

    def window_steps(self, kind: str) -> int:
        """Steps of `kind` recorded in the current window (for waits on a fresh measurement)."""
        return self._window[kind].count

    @property
    def worst_ms(self) -> float:
        return round(1000 * max(self.worst_s.values()), 1)

    def take_window(self) -> dict[str, Any]:
        """This window's figures per kind and its verdict (then a new window starts)."""
        window, self._window = self._window, {kind: _Window() for kind in KINDS}
        kind, worst = max(((k, w.worst_s) for k, w in window.items()), key=lambda item: item[1])
        valid = worst <= self.limit_s
        self.invalid_windows += not valid
        return {
            "valid": valid,
            "windowMaxMs": round(1000 * worst, 1),
            "limitMs": round(1000 * self.limit_s, 1),
            "invalidWindows": self.invalid_windows,
            "worstMs": self.worst_ms,
            "worstMsByKind": {k: round(1000 * s, 1) for k, s in self.worst_s.items()},
            "window": {k: w.to_json() for k, w in window.items()},
            "invalidBecause": None if valid else (f"a {kind} step ran {1000 * worst:.0f} ms late (limit "
                                                  f"{1000 * self.limit_s:.0f} ms, "
                                                  f"{INVALID_FRACTION:.0%} of the heartbeat timeout)"),
        }
