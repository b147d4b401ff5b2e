"""The one place the simulator's command line reads a real clock (to report wall_seconds); the
simulation itself never does."""

import time


def wall_seconds() -> float:
    return time.perf_counter()
