"""MemoryStorage semantics (the storage contract suite runs against it too)."""

from __future__ import annotations

import pytest

from rmqc.errors import CompactedError, SnapshotOutOfDateError, StorageError, UnavailableError
from rmqc.raft import ConfState, Entry, HardState, MemoryStorage, Snapshot, SnapshotMeta


def entries(lo: int, hi: int, term: int = 1, size: int = 0) -> list[Entry]:
    return [Entry(i, term, data=b"x" * size) for i in range(lo, hi)]


def test_empty_storage_indexes() -> None:
    s = MemoryStorage()
    assert (s.first_index(), s.last_index()) == (1, 0)
    assert s.term(0) == 0
    assert s.initial_state() == (HardState(), ConfState())


def test_save_appends_then_truncates_conflicting_suffix() -> None:
    s = MemoryStorage()
    s.save(HardState(1, "n1", 0), entries(1, 6))
    s.save(None, [Entry(4, 2), Entry(5, 2)])
    assert [e.term for e in s.entries(1, 6)] == [1, 1, 1, 2, 2]
    s.save(None, [Entry(3, 3)])
    assert s.last_index() == 3 and s.term(3) == 3
    assert s.initial_state()[0] == HardState(1, "n1", 0)


def test_gap_is_refused() -> None:
    s = MemoryStorage()
    s.save(None, entries(1, 3))
    with pytest.raises(StorageError):
        s.save(None, [Entry(5, 1)])


def test_term_and_entries_bounds() -> None:
    s = MemoryStorage()
    s.save(None, entries(1, 11))
    s.create_snapshot(5, ConfState(("n1",)), b"state")
    s.compact(5)
    assert s.first_index() == 6
    assert s.term(5) == 1  # answered from the snapshot point
    with pytest.raises(CompactedError):
        s.term(4)
    with pytest.raises(UnavailableError):
        s.term(11)
    with pytest.raises(CompactedError):
        s.entries(5, 7)
    with pytest.raises(UnavailableError):
        s.entries(6, 12)
    assert [e.index for e in s.entries(6, 11)] == [6, 7, 8, 9, 10]


def test_entries_max_bytes_returns_at_least_one() -> None:
    s = MemoryStorage()
    s.save(None, entries(1, 6, size=100))  # 124 B each
    assert len(s.entries(1, 6, max_bytes=10)) == 1
    assert len(s.entries(1, 6, max_bytes=250)) == 2
    assert len(s.entries(1, 6, max_bytes=None)) == 5


def test_snapshot_save_resets_log_and_membership() -> None:
    s = MemoryStorage()
    s.save(None, entries(1, 4))
    snap = Snapshot(SnapshotMeta(10, 3, ConfState(("a", "b"), ("c",))), b"data")
    s.save(HardState(3, None, 10), [], snap)
    assert (s.first_index(), s.last_index(), s.term(10)) == (11, 10, 3)
    assert s.snapshot() == snap
    assert s.initial_state()[1] == ConfState(("a", "b"), ("c",))
    with pytest.raises(SnapshotOutOfDateError):
        s.save(None, [], Snapshot(SnapshotMeta(9, 3)))
    s.save(None, [Entry(11, 3)])
    assert s.last_index() == 11


def test_create_snapshot_and_compact_rules() -> None:
    s = MemoryStorage()
    s.save(None, entries(1, 6))
    with pytest.raises(StorageError):
        s.compact(3)  # no snapshot covers 3 yet
    s.create_snapshot(4, ConfState(("n1",)), b"")
    with pytest.raises(SnapshotOutOfDateError):
        s.create_snapshot(3, ConfState(("n1",)), b"")
    with pytest.raises(UnavailableError):
        s.create_snapshot(9, ConfState(("n1",)), b"")
    s.compact(4)
    with pytest.raises(CompactedError):
        s.compact(4)
    assert s.first_index() == 5 and s.last_index() == 5


def test_appending_already_compacted_entries_keeps_the_rest() -> None:
    s = MemoryStorage()
    s.save(None, entries(1, 6))
    s.create_snapshot(3, ConfState(("n1",)), b"")
    s.compact(3)
    s.save(None, entries(2, 8, term=1))
    assert (s.first_index(), s.last_index()) == (4, 7)


def test_closed_storage_refuses_use() -> None:
    s = MemoryStorage()
    s.close()
    with pytest.raises(StorageError):
        s.last_index()
