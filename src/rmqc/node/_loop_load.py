"""How loaded the node's event loop is: the time it spends away from its I/O wait, measured by a
Trio instrument in the loop's own thread (no thread beside it, no sampling).

The loop is *busy* from the moment its wait for sockets and timers returns until it next waits
with a timeout: running tasks, or runnable and waiting for a CPU (or the GIL). A wait with a zero
timeout (tasks still runnable) does not end a busy stretch. So the rate of the busy seconds is the
loop's utilisation, and it counts what CPU time alone does not: a loop that gets only half a core
on a saturated machine is busy all the time at 50 % CPU. Near a utilisation of 1 every request
queues behind the others, and a read batch or a heartbeat round that waits for the loop grows the
next one (docs/benchmarks.md, "Holding a fleet with no fault").

Stretches of STRETCH_FLOOR_S or more are also counted by length: the ones that make a broker's
request wait. Shorter ones (most are microseconds) are left out, so each loop turn costs two clock
reads and a comparison.
"""

from __future__ import annotations

import time

import trio

from rmqc.metrics import LoopCounter, LoopHistogram

__all__ = ["LoopLoad"]

STRETCH_FLOOR_S = 0.01


class LoopLoad(trio.abc.Instrument):
    """Adds the loop's busy seconds to `busy` and each busy stretch of STRETCH_FLOOR_S or more to
    `stretches`; `trio.lowlevel.add_instrument` it in the loop it measures."""

    def __init__(self, busy: LoopCounter, stretches: LoopHistogram) -> None:
        self._busy = busy
        self._stretches = stretches
        self._since: float | None = None  # when the current busy stretch began (None: waiting)

    def before_io_wait(self, timeout: float) -> None:
        since = self._since
        if timeout > 0 and since is not None:
            stretch = time.perf_counter() - since
            self._since = None
            self._busy.inc(stretch)
            if stretch >= STRETCH_FLOOR_S:
                self._stretches.observe(stretch)

    def after_io_wait(self, timeout: float) -> None:
        if self._since is None:
            self._since = time.perf_counter()
