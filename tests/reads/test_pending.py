from __future__ import annotations

import pytest

from rmqc.reads import PendingReads, ReadQueueFull


def test_release_in_index_order_when_applied_reaches() -> None:
    p = PendingReads()
    p.add("c", 7)
    p.add("a", 3)
    p.add("b", 3)
    assert p.release(2) == []
    assert p.release(5) == ["a", "b"]
    assert p.release(7) == ["c"] and len(p) == 0


def test_bounded_and_clear() -> None:
    p = PendingReads(max_waiting=1)
    p.add("x", 1)
    with pytest.raises(ReadQueueFull):
        p.add("y", 2)
    assert p.clear() == ["x"] and len(p) == 0
