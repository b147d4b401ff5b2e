"""Rate-limited warnings: a flood of refused connections or requests must not become a flood of log
lines (the disk and the operator's attention are resources an attacker could otherwise exhaust)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    """At most one line per `every_s`; the next says how many were suppressed meanwhile."""

    def __init__(self, logger: logging.Logger, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._every_s = every_s
        self._clock = clock
        self._next_s = 0.0
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        self.log(logging.WARNING, message, *args)

    def log(self, level: int, message: str, *args: object) -> None:
        now = self._clock()
        if now < self._next_s:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" (and {self._suppressed} more since the last such line)"
        self._log.log(level, message, *args)
        self._next_s, self._suppressed = now + self._every_s, 0
