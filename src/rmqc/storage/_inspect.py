"""Operator views of an LmdbStorage: stats() and verify(). Both read in short batched transactions,
so they can run against a live node's data directory."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rmqc.errors import CorruptionError

from . import _codec
from ._journal import JOURNAL_FILE_NAME

if TYPE_CHECKING:
    from ._lmdb_storage import LmdbStorage

# LMDB keeps two meta pages at the start of the file; they are neither data nor free.
_META_PAGES = 2


@dataclass(frozen=True, slots=True)
class StorageStats:
    first_index: int
    last_index: int
    entry_count: int
    snapshot_index: int
    snapshot_term: int
    first_term: int | None  # None when the log holds no entries
    last_term: int | None
    entries_by_type: dict[str, int]
    payload_bytes: int
    hard_state_term: int
    hard_state_commit: int
    bytes_on_disk: int
    map_size_bytes: int
    page_size_bytes: int
    used_pages: int
    free_pages: int


@dataclass(frozen=True, slots=True)
class VerifyReport:
    entries_checked: int
    first_bad_index: int | None = None
    problem: str | None = None
    checked: list[str] = field(default_factory=list)
    journal_damaged: bool = False  # the problem is the journal's (its records before it are good)

    @property
    def ok(self) -> bool:
        return self.problem is None


def collect_stats(storage: LmdbStorage) -> StorageStats:
    hard_state, _conf_state = storage.initial_state()
    snapshot_meta = storage.snapshot_meta()
    by_type: Counter[str] = Counter()
    payload_bytes = 0
    first_term = last_term = None
    for entry in storage.iter_entries():
        by_type[entry.type.name.lower()] += 1
        payload_bytes += len(entry.data)
        first_term = entry.term if first_term is None else first_term
        last_term = entry.term
    env = storage.environment_info()
    total_pages = env["last_page"] + 1
    return StorageStats(
        first_index=storage.first_index(),
        last_index=storage.last_index(),
        entry_count=sum(by_type.values()),
        snapshot_index=snapshot_meta.index,
        snapshot_term=snapshot_meta.term,
        first_term=first_term,
        last_term=last_term,
        entries_by_type=dict(sorted(by_type.items())),
        payload_bytes=payload_bytes,
        hard_state_term=hard_state.term,
        hard_state_commit=hard_state.commit,
        bytes_on_disk=storage.bytes_on_disk(),
        map_size_bytes=env["map_size_bytes"],
        page_size_bytes=env["page_size_bytes"],
        used_pages=env["used_pages"],
        free_pages=max(0, total_pages - _META_PAGES - env["used_pages"]),
    )


def verify_storage(storage: LmdbStorage) -> VerifyReport:
    """Check metadata, the snapshot's data and every entry; stop at the first problem."""
    checked: list[str] = []
    try:
        hard_state, _conf_state = storage.initial_state()
        checked.append("hard state and membership")
        storage.snapshot()
        checked.append("snapshot")
    except CorruptionError as exc:
        return VerifyReport(0, exc.index, exc.what, checked)
    count = 0
    try:
        for _entry in _checked_log(storage):
            count += 1
    except CorruptionError as exc:
        return VerifyReport(count, exc.index, exc.what, checked)
    checked.append("entries")
    journal = storage.journal_replayed
    if journal.damage is not None:
        problem = journal.damage.describe(storage.path / JOURNAL_FILE_NAME)
        return VerifyReport(count, journal.damage.next_index, problem, checked, journal_damaged=True)
    if journal.records:  # a node that did not stop cleanly: its newest saves are still there
        ended = f"; replay ended at {journal.stopped}" if journal.stopped else ""
        checked.append(f"journal: {journal.records} records, {len(journal.entries)} entries not yet in data.mdb{ended}")
    if count != storage.last_index() - storage.first_index() + 1:
        return VerifyReport(count, storage.first_index() + count, "entry missing", checked)
    if hard_state.commit > storage.last_index():
        problem = f"commit index {hard_state.commit} beyond last entry {storage.last_index()}"
        return VerifyReport(count, hard_state.commit, problem, checked)
    return VerifyReport(count, checked=checked)


def _checked_log(storage: LmdbStorage) -> Iterator[object]:
    """Every entry from first_index, decoded with all checks; leftovers behind the boundary skipped."""
    boundary = storage.first_index() - 1
    records = (r for r in storage.raw_log_records() if _codec.key_index(r[0]) > boundary)
    return _codec.decode_run(records, boundary + 1, storage.term(boundary))


def open_verified(path: str | os.PathLike[str]) -> LmdbStorage:
    """Open a node's storage for writing after `verify` passed, so a node never announces that it
    serves a log it cannot read (the log is compacted every snapshot_every_entries, so this reads a
    bounded number of entries). The check runs in a child process (_isolated): a damaged page
    aborts LMDB. Raises CorruptionError naming the first bad index, or StorageDamagedError."""
    from ._isolated import verify_isolated
    from ._lmdb_storage import DATA_FILE_NAME, LmdbStorage

    if (Path(path) / DATA_FILE_NAME).exists() or (Path(path) / JOURNAL_FILE_NAME).exists():
        report = verify_isolated(path)
        if not report.ok:
            assert report.first_bad_index is not None and report.problem is not None
            raise CorruptionError(report.first_bad_index, report.problem)
    storage = LmdbStorage(path)
    storage.clear_stale_readers()  # a reading child killed by a signal leaves its reader slot
    return storage
