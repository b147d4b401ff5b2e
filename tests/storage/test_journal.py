"""The journal in front of LMDB (rmqc.storage._journal, issue 21): appends cost one flush, and
whatever a crash leaves of it (the files as they are, a record cut anywhere, garbage after the
last record, an older generation's records) reopens as exactly the saves whose flush returned."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from rmqc.errors import CorruptionError
from rmqc.raft._types import Entry, HardState
from rmqc.storage import LmdbStorage
from rmqc.storage._journal import JOURNAL_BYTES, JOURNAL_FILE_NAME, encode_record


def crash_copy(data_dir: Path, into: Path) -> Path:
    """The data directory as a kill -9 leaves it: its files as they are now (the page cache is
    what the disk will hold), the open storage never closed."""
    into.mkdir()
    for name in ("data.mdb", JOURNAL_FILE_NAME):
        shutil.copyfile(data_dir / name, into / name)
    return into


def entry(index: int, term: int = 1) -> Entry:
    return Entry(index, term, data=b"e%d" % index)


def test_appends_are_in_the_journal_and_a_crash_keeps_every_one(tmp_path: Path) -> None:
    storage = LmdbStorage(tmp_path / "data")
    for index in range(1, 51):
        storage.save(HardState(term=1, vote="n1", commit=index - 1), [entry(index)])
    copy = crash_copy(tmp_path / "data", tmp_path / "crashed")
    storage.close()
    with LmdbStorage(copy, readonly=True) as reopened:
        assert reopened.journal_replayed.records == 50, "the saves went to the journal"
        assert reopened.last_index() == 50
        assert reopened.initial_state()[0] == HardState(term=1, vote="n1", commit=49)
        assert reopened.entries(1, 51) == [entry(i) for i in range(1, 51)]
        report = reopened.verify()
        assert reopened.term(50) == 1 and report.ok
        assert "journal: 50 records, 50 entries not yet in data.mdb" in report.checked  # then zeros
    with LmdbStorage(copy) as writable:  # a writable open moves them into LMDB
        assert writable.last_index() == 50
    with LmdbStorage(copy, readonly=True) as again:
        assert again.journal_replayed.records == 0, "older records are not replayed twice"
        assert again.entries(1, 51) == [entry(i) for i in range(1, 51)] and again.verify().ok


def test_a_record_cut_anywhere_reopens_as_the_saves_before_it(tmp_path: Path) -> None:
    storage = LmdbStorage(tmp_path / "data")
    for index in range(1, 4):
        storage.save(HardState(term=1, commit=index - 1), [entry(index)])
    before = (tmp_path / "data" / JOURNAL_FILE_NAME).read_bytes()
    storage.save(HardState(term=2, vote="n2", commit=3), [entry(4, 2), entry(5, 2)])
    crashed = crash_copy(tmp_path / "data", tmp_path / "crashed")
    storage.close()
    after = (crashed / JOURNAL_FILE_NAME).read_bytes()
    start = next(i for i in range(len(after)) if after[i] != before[i])
    end = max(i for i in range(len(after)) if after[i] != before[i]) + 1
    rng = random.Random(21)
    for cut in range(start, end):
        for tail in (bytes(end - cut), rng.randbytes(end - cut)):  # never written, or torn garbage
            copy = tmp_path / f"cut-{cut}-{tail[:1].hex()}"
            crash_copy(crashed, copy)
            (copy / JOURNAL_FILE_NAME).write_bytes(after[:cut] + tail + after[end:])
            with LmdbStorage(copy, readonly=True) as reopened:
                assert reopened.last_index() == 3, f"cut at byte {cut}"
                assert reopened.initial_state()[0] == HardState(term=1, commit=2)
                if cut > start:  # a record begun, not finished: verify says why replay ended there
                    assert any("; replay ended at " in line for line in reopened.verify().checked), cut
            shutil.rmtree(copy)


def test_the_journal_starts_over_once_full_and_nothing_is_lost(tmp_path: Path) -> None:
    storage = LmdbStorage(tmp_path / "data")
    payload = bytes(3000)
    count = 3 * JOURNAL_BYTES // len(payload)  # moved into LMDB about three times
    for index in range(1, count + 1):
        storage.save(HardState(term=1, commit=index - 1), [Entry(index, 1, data=payload)])
    copy = crash_copy(tmp_path / "data", tmp_path / "crashed")
    storage.close()
    with LmdbStorage(copy, readonly=True) as reopened:
        assert 0 < reopened.journal_replayed.records < count, "some in LMDB, the newest in the journal"
        assert reopened.last_index() == count
        assert [e.index for e in reopened.iter_entries()] == list(range(1, count + 1))
        assert reopened.verify().ok


def test_a_conflicting_suffix_moves_the_journal_and_replaces_the_tail(tmp_path: Path) -> None:
    storage = LmdbStorage(tmp_path / "data")
    storage.save(HardState(term=1, commit=0), [entry(i) for i in range(1, 11)])
    storage.save(HardState(term=2, vote="n2", commit=7), [entry(8, 2), entry(9, 2)])
    assert storage.last_index() == 9 and storage.term(8) == 2
    storage.save(None, [entry(10, 2)])  # back in the journal
    copy = crash_copy(tmp_path / "data", tmp_path / "crashed")
    storage.close()
    with LmdbStorage(copy, readonly=True) as reopened:
        assert reopened.journal_replayed.records == 1
        assert [(e.index, e.term) for e in reopened.iter_entries()] == [(i, 1) for i in range(1, 8)] + [
            (8, 2), (9, 2), (10, 2)]
        assert reopened.initial_state()[0] == HardState(term=2, vote="n2", commit=7)


def test_entries_read_across_lmdb_and_the_journal_keep_max_bytes(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path / "data") as storage:
        storage.save(None, [entry(1), entry(2)])
        storage.create_snapshot(1, storage.initial_state()[1], b"s")  # moves 1..2 into LMDB
        storage.save(None, [entry(3), entry(4)])
        assert storage.entries(1, 5) == [entry(i) for i in range(1, 5)]
        one = entry(1).size_bytes()
        assert storage.entries(1, 5, max_bytes=3 * one) == [entry(i) for i in range(1, 4)]
        assert storage.entries(3, 5, max_bytes=1) == [entry(3)], "at least one entry"


def test_a_record_that_does_not_follow_the_log_is_corruption(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path / "data") as storage:
        storage.save(None, [entry(1)])
    # a journal of the current generation whose record skips index 2: only a bug writes that
    copy = tmp_path / "data"
    generation = 1 + 1  # the first open raised 0 -> 1, closing with an entry moved it 1 -> 2
    with LmdbStorage(copy, readonly=True) as probe:
        assert probe.journal_replayed.records == 0
    journal = bytearray((copy / JOURNAL_FILE_NAME).read_bytes())
    record = encode_record(generation, None, [entry(5)])
    journal[: len(record)] = record
    (copy / JOURNAL_FILE_NAME).write_bytes(bytes(journal))
    with pytest.raises(CorruptionError, match="5, 2 was next"):
        LmdbStorage(copy, readonly=True)


def test_the_journal_file_is_created_full_and_keeps_its_size(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path / "data") as storage:
        storage.save(None, [entry(1)])
        assert os.path.getsize(tmp_path / "data" / JOURNAL_FILE_NAME) == JOURNAL_BYTES
