"""Telling "the broker is dead" from "I could not look": how long this node's event loop stalled.

A task that asked to run at `due` and ran at `now` shows that nothing of this process ran in
between, heartbeat readers included (a GC pause, a CPU-starved or stopped process, a long
synchronous step in the driver). The node feeds every such observation here and forgives the stall
to its heartbeat table, so brokers are not failed over for heartbeats it did not get to read.
Pure: time enters as monotonic seconds.
"""

from __future__ import annotations

from collections import deque

__all__ = ["MASS_EXPIRY_MASTERS", "MASS_EXPIRY_WINDOW_S", "STALL_TOLERANCE_S", "MassExpiry", "StallMeter"]

# Lateness up to this much is ordinary scheduling on a busy machine and is not forgiven: it delays
# an expiry by as much but never adds up (a late wake-up does not make the next heartbeat later),
# and forgiving it would stretch every deadline on a node that is merely busy.
STALL_TOLERANCE_S = 0.1
# The mass-expiry guard: this many masters expiring by deadline within this window is a sign of
# trouble on our side or the network's (or the load generator's), not of that many broker deaths.
# Ten groups: a single broker host holds a few masters at most; a rack holding ten masters while
# all of their replicas (in other racks) fall silent at the same time is not a broker failure.
MASS_EXPIRY_MASTERS = 10
MASS_EXPIRY_WINDOW_S = 3.0


class StallMeter:
    """Stalls seen by any number of observers, each second of stall counted once."""

    def __init__(self, tolerance_s: float = STALL_TOLERANCE_S) -> None:
        self.tolerance_s = tolerance_s
        self.total_s = 0.0
        self.longest_s = 0.0
        self.stalls = 0
        self._counted_until_s = float("-inf")  # stall time before this is already counted

    def observe(self, due_s: float, now_s: float) -> float:
        """A task due at `due_s` runs at `now_s`: the stall seconds not counted before (0 if on time)."""
        start_s = max(due_s + self.tolerance_s, self._counted_until_s)
        if now_s <= start_s:
            return 0.0
        stalled_s = now_s - start_s
        self._counted_until_s = now_s
        self.total_s += stalled_s
        self.longest_s = max(self.longest_s, stalled_s)
        self.stalls += 1
        return stalled_s


class MassExpiry:
    """Masters expired by deadline (not by a closed connection) in the last MASS_EXPIRY_WINDOW_S.

    While `suspect()`, the node elects only in groups where some replica is still alive: there a
    new master can be chosen, and hearing the replicas shows this node can look. A group whose
    replicas are silent too waits for the periodic inactive-master scan, which elects as soon as
    any replica is heard again. What that wait costs is nothing: with no live replica the
    election has no candidate, and would only clear the master and bump its epoch (spec 3.7
    step 6, retried up to electMasterMaxRetryCount times, each bumping it again), which is what
    turned a late load generator into dozens of epochs per group."""

    def __init__(self, masters: int = MASS_EXPIRY_MASTERS, window_s: float = MASS_EXPIRY_WINDOW_S) -> None:
        self.masters = masters
        self.window_s = window_s
        self._times: deque[float] = deque(maxlen=masters)  # bounded: only the last `masters` matter
        self.deferred = 0  # elections left to the scan while suspect

    def note(self, count: int, now_s: float) -> None:
        """`count` masters expired by deadline at `now_s`."""
        for _ in range(min(count, self.masters)):
            self._times.append(now_s)

    def suspect(self, now_s: float) -> bool:
        return len(self._times) == self.masters and now_s - self._times[0] <= self.window_s
