"""The cyclic garbage collector's settings for a serving node, and one helper shared by code that
builds many long-lived, acyclic objects in one synchronous go (snapshot restore and encoding): the
collector would otherwise re-traverse the growing heap many times meanwhile and find nothing to
free."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Net container allocations between two young collections (CPython's default is 700). A request
# waits across a round trip to the followers, and at 700 it lived through two young collections
# and was promoted, so full collections walked every request and the state they hold: the collector
# was 15-30 % of the leader's CPU per write (bench/bench_request_path.py --gc-threshold). Only
# cyclic garbage waits longer to be freed: reference counting frees the rest at once.
SERVING_YOUNG_THRESHOLD = 10_000


def tune_for_serving() -> None:
    """What the imports built lives as long as the process: full collections skip it (freeze),
    and young collections come every SERVING_YOUNG_THRESHOLD allocations."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(SERVING_YOUNG_THRESHOLD, middle, old)


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
