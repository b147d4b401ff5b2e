from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from rmqc.errors import CompactedError, UnavailableError
from rmqc.raft import ConfState, Entry, MemoryStorage, RaftInvariantError, Snapshot, SnapshotMeta
from rmqc.raft._log import RaftLog


def make_log(terms: list[int]) -> RaftLog:
    s = MemoryStorage()
    s.save(None, [Entry(i + 1, t) for i, t in enumerate(terms)])
    return RaftLog(s)


def test_term_lookup_fails_instead_of_guessing() -> None:
    log = make_log([1, 1, 2])
    log.storage.create_snapshot(2, ConfState(("n1",)), b"")
    log.storage.compact(2)
    assert log.term(2) == 1
    with pytest.raises(CompactedError):
        log.term(1)
    with pytest.raises(UnavailableError):
        log.term(4)
    assert not log.match_term(1, 0)


def test_maybe_append_skips_matching_and_truncates_at_conflict() -> None:
    log = make_log([1, 1, 1, 1])
    assert log.maybe_append(2, 1, 0, [Entry(3, 1), Entry(4, 1)]) == 4
    assert log.unstable.entries == []  # nothing changed
    assert log.maybe_append(2, 1, 0, [Entry(3, 2)]) == 3
    assert [log.term(i) for i in (1, 2, 3)] == [1, 1, 2] and log.last_index() == 3


def test_maybe_append_refuses_mismatched_prev() -> None:
    log = make_log([1, 1])
    assert log.maybe_append(2, 2, 0, [Entry(3, 2)]) is None
    assert log.maybe_append(3, 1, 0, []) is None


def test_conflict_at_or_below_commit_is_fatal() -> None:
    log = make_log([1, 1, 1])
    log.commit_to(3)
    with pytest.raises(RaftInvariantError):
        log.maybe_append(1, 1, 3, [Entry(2, 2)])


def test_commit_only_current_term_entries() -> None:
    log = make_log([1, 1, 2])
    assert not log.maybe_commit(2, 2)
    assert log.maybe_commit(3, 2) and log.committed == 3
    assert not log.maybe_commit(2, 1)  # never backwards
    assert log.committed == 3


def test_find_conflict_by_term_skips_a_whole_term() -> None:
    log = make_log([1, 3, 3, 3, 5, 5, 5, 5, 5])
    assert log.find_conflict_by_term(9, 4) == (4, 3)
    assert log.find_conflict_by_term(9, 1) == (1, 1)
    assert log.find_conflict_by_term(9, 0) == (0, 0)


def test_entries_span_storage_and_unstable_within_bytes() -> None:
    log = make_log([1, 1])
    log.append([Entry(3, 1, data=b"x" * 100), Entry(4, 1, data=b"y" * 100)])
    assert [e.index for e in log.entries(1, 5)] == [1, 2, 3, 4]
    assert [e.index for e in log.entries(2, 5, max_bytes=150)] == [2, 3]
    assert [e.index for e in log.entries(4, 9)] == [4]


def test_unstable_snapshot_replaces_the_log() -> None:
    log = make_log([1, 1, 1])
    log.restore(Snapshot(SnapshotMeta(10, 4, ConfState(("n1",)))))
    assert (log.first_index(), log.last_index(), log.term(10), log.committed) == (11, 10, 4, 10)
    assert log.next_committed_entries(1 << 20) == []
    log.storage.save(None, [], log.unstable.snapshot)
    log.stable_snapshot_to(10)
    assert log.applied == 10 and log.unstable.snapshot is None


def test_stable_to_ignores_a_completion_for_overwritten_entries() -> None:
    log = make_log([])
    log.append([Entry(1, 1), Entry(2, 1)])
    log.append([Entry(2, 2)])  # a newer term replaced index 2 before the write completed
    log.stable_to(2, 1)
    assert log.unstable.entries == [Entry(1, 1), Entry(2, 2)]
    log.storage.save(None, log.unstable.entries)
    log.stable_to(2, 2)
    assert log.unstable.entries == [] and log.stable_last_index() == 2


@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=40),
    split=st.integers(0, 40),
    lo_offset=st.integers(0, 39),
    max_bytes=st.integers(1, 2000),
)
def test_batches_are_contiguous_from_lo_and_within_bytes(
    sizes: list[int], split: int, lo_offset: int, max_bytes: int
) -> None:
    """Pitfall 8 as a property: part in storage, part unstable, any byte limit."""
    split = min(split, len(sizes))
    storage = MemoryStorage()
    entries = [Entry(i + 1, 1, data=b"x" * n) for i, n in enumerate(sizes)]
    storage.save(None, entries[:split])
    log = RaftLog(storage)
    if split < len(entries):
        log.append(entries[split:])
    lo = 1 + min(lo_offset, len(sizes) - 1)
    batch = log.entries(lo, len(sizes) + 1, max_bytes)
    assert [e.index for e in batch] == list(range(lo, lo + len(batch)))
    assert batch, "at least one entry"
    size = sum(e.size_bytes() for e in batch)
    assert size <= max_bytes or len(batch) == 1
    if lo + len(batch) <= len(sizes):  # stopped early: the next entry would not have fit
        assert size + entries[lo + len(batch) - 1].size_bytes() > max_bytes
