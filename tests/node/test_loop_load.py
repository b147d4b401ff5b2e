"""rmqc.node._loop_load: the event loop's busy time and its long busy stretches, measured by a
Trio instrument, on a real Trio loop (the stretches are made by blocking the loop's thread)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest
import trio

from rmqc.metrics import LoopCounter, LoopHistogram
from rmqc.metrics._node_metrics import LOOP_STRETCH_BUCKETS_S
from rmqc.node._loop_load import LoopLoad


def measured(body: Callable[[], Awaitable[None]]) -> tuple[LoopCounter, LoopHistogram]:
    """Run `body` in a fresh Trio loop under a LoopLoad."""
    busy, stretches = LoopCounter(), LoopHistogram(LOOP_STRETCH_BUCKETS_S)

    async def main() -> None:
        trio.lowlevel.add_instrument(LoopLoad(busy, stretches))
        await trio.sleep(0.01)  # the first wait: measuring starts when it returns
        await body()
        await trio.sleep(0.01)  # the last stretch ends at the next wait

    trio.run(main)
    return busy, stretches


def test_an_idle_loop_is_not_busy() -> None:
    async def idle() -> None:
        await trio.sleep(0.3)

    busy, stretches = measured(idle)
    assert busy.value < 0.15  # the 0.3 s in the I/O wait are not counted (the rest: margin for a loaded CPU)
    assert stretches.counts == [0] * len(stretches.counts)


def test_a_blocked_loop_is_one_busy_stretch_counted_by_length() -> None:
    async def blocked() -> None:
        time.sleep(0.06)  # noqa: ASYNC251 - the point: the loop's thread held, no socket looked at for 60 ms

    busy, stretches = measured(blocked)
    assert busy.value >= 0.06
    assert sum(stretches.counts) == 1
    assert stretches.counts[LOOP_STRETCH_BUCKETS_S.index(0.05)] == 0  # in a bucket above 0.05 s
    assert stretches.sum >= 0.06


class FakeClock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 100.0
        monkeypatch.setattr("rmqc.node._loop_load.time.perf_counter", lambda: self.now)


def test_zero_timeout_polls_do_not_end_a_stretch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks still runnable make Trio poll for I/O with a zero timeout between batches: the loop is
    busy throughout, and the stretch ends only at a wait that may block."""
    clock, busy, stretches = FakeClock(monkeypatch), LoopCounter(), LoopHistogram(LOOP_STRETCH_BUCKETS_S)
    load = LoopLoad(busy, stretches)
    load.after_io_wait(0.5)  # woke: a stretch begins
    for _ in range(4):
        clock.now += 0.03
        load.before_io_wait(0.0)
        load.after_io_wait(0.0)
    clock.now += 0.03
    load.before_io_wait(0.5)  # 150 ms after the wake
    clock.now += 1.0  # waiting: not busy
    load.after_io_wait(0.5)
    clock.now += 0.004
    load.before_io_wait(0.5)  # a 4 ms stretch: busy time, too short to count by length
    assert busy.value == pytest.approx(0.154)
    assert sum(stretches.counts) == 1 and stretches.sum == pytest.approx(0.15)
    assert stretches.counts[LOOP_STRETCH_BUCKETS_S.index(0.25)] == 1
