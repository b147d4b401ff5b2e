from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from rmqc.raft import InflightsFull, ProgressState
from rmqc.raft._progress import Inflights, Progress


def test_inflights_bounded_by_count_and_bytes() -> None:
    inf = Inflights(max_count=3, max_bytes=100)
    inf.add(1, 10)
    inf.add(2, 10)
    assert not inf.full()
    inf.add(3, 10)
    assert inf.full()
    with pytest.raises(InflightsFull):
        inf.add(4, 1)
    inf.free_le(2)
    assert len(inf) == 1 and inf.bytes == 10
    inf.add(4, 95)
    assert inf.full()  # the byte bound alone


@given(st.lists(st.tuples(st.sampled_from(["add", "free", "reset"]), st.integers(1, 50)), max_size=60))
def test_inflights_bytes_equal_sum_of_tracked(ops: list[tuple[str, int]]) -> None:
    inf = Inflights(max_count=8, max_bytes=200)
    tracked: list[tuple[int, int]] = []
    next_index = 1
    for op, n in ops:
        if op == "add" and not inf.full():
            inf.add(next_index, n)
            tracked.append((next_index, n))
            next_index += 1
        elif op == "free":
            inf.free_le(n)
            tracked = [t for t in tracked if t[0] > n]
        elif op == "reset":
            inf.reset()
            tracked = []
        assert inf.bytes == sum(size for _, size in tracked)
        assert len(inf) == len(tracked)


def test_progress_match_never_decreases_and_stale_rejects_ignored() -> None:
    pr = Progress(next_index=11, max_inflight=4, max_inflight_bytes=1000)
    assert pr.maybe_update(10)
    assert not pr.maybe_update(5)
    assert pr.match == 10
    pr.become_replicate()
    assert not pr.maybe_decrease_to(rejected=3, match_hint=0)  # rejected <= match: stale
    assert pr.next == 11
    assert pr.maybe_decrease_to(rejected=12, match_hint=0)
    assert pr.next == 11


def test_probe_reject_uses_hint_but_never_below_match() -> None:
    pr = Progress(next_index=20, max_inflight=4, max_inflight_bytes=1000)
    pr.match = 5
    assert not pr.maybe_decrease_to(rejected=10, match_hint=3)  # not next-1: stale
    assert pr.maybe_decrease_to(rejected=19, match_hint=3)
    assert pr.next == 6


def test_replicate_pauses_when_window_full_and_acks_resume() -> None:
    pr = Progress(next_index=1, max_inflight=2, max_inflight_bytes=1000)
    pr.become_replicate()
    pr.sent_append(1, 10, tick=0, heartbeat_round=0)
    pr.sent_append(2, 10, tick=0, heartbeat_round=0)
    assert pr.is_paused() and pr.next == 3
    pr.acked_replicate(1)
    assert not pr.is_paused()


def test_snapshot_state_transitions() -> None:
    pr = Progress(next_index=1, max_inflight=2, max_inflight_bytes=1000)
    pr.become_snapshot(50)
    assert pr.is_paused() and pr.state is ProgressState.SNAPSHOT
    pr.become_probe()
    assert pr.next == 51 and pr.state is ProgressState.PROBE
    pr.become_snapshot(50)
    pr.pending_snapshot = 0  # a failed snapshot clears it first
    pr.become_probe()
    assert pr.next == 1
