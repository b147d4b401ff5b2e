"""The replica's monotonic-time lease check (`ReadPath._lease_holds_in_monotonic_time`): the lease
counts from when its start tick was fed to the Raft core, found among the remembered (tick, time)
entries, each of which stands for the burst of ticks fed after the previous one."""

from __future__ import annotations

import random
from collections import deque
from types import SimpleNamespace

from rmqc.replica._reads import ReadPath

TICK_MS = 50


NOW_MS = 1_000_000


def read_path(entries: list[tuple[int, int]]) -> ReadPath:
    path = ReadPath.__new__(ReadPath)  # only the clock bookkeeping is under test
    path._node = SimpleNamespace(config=SimpleNamespace(tick_ms=TICK_MS), now_ms=lambda: NOW_MS)
    path._tick_times = deque(entries, maxlen=64)
    return path


def fed_time_of(entries: list[tuple[int, int]], start: int) -> int | None:
    """Reference: the time the burst holding `start` was fed, None if no entry surely holds it."""
    previous = None
    for tick, fed_s in entries:
        if tick >= start:
            return fed_s if tick == start or (previous is not None and previous < start) else None
        previous = tick
    return None


def test_lease_runs_from_when_its_start_tick_was_fed() -> None:
    now = NOW_MS
    # ticks 1..3 fed one by one, then 4..7 in one burst 20 ms ago (after a stall)
    entries = [(1, now - 200), (2, now - 150), (3, now - 100), (7, now - 20)]
    assert read_path(entries)._lease_holds_in_monotonic_time(5, 1)  # fed 20 ms ago, lasts 50
    assert not read_path(entries)._lease_holds_in_monotonic_time(3, 2)  # 100 ms of a 100 ms lease
    assert read_path(entries)._lease_holds_in_monotonic_time(3, 3)
    assert not read_path(entries)._lease_holds_in_monotonic_time(0, 10)  # older than all remembered
    assert not read_path(entries)._lease_holds_in_monotonic_time(None, 10)


def test_lookup_agrees_with_a_scan_from_the_oldest_entry() -> None:
    rng = random.Random(19)
    now = NOW_MS
    for _ in range(2000):
        tick, entries = rng.randint(0, 5), []
        for i in range(rng.randint(0, 10)):
            tick += rng.randint(1, 3)
            entries.append((tick, now - 1000 + i))
        start = rng.randint(0, tick + 1)
        expected = fed_time_of(entries, start) is not None
        assert read_path(entries)._lease_holds_in_monotonic_time(start, 10**6) == expected, (entries, start)
