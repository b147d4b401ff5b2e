"""LmdbStorage: the Raft log, hard state, membership and snapshots of one node in one LMDB environment,
with a journal in front of it for appends (rmqc.storage._journal: one flush per save, not LMDB's two).

Synchronous; the Trio server calls it from a worker thread. Readers may run in other threads (and
other processes, e.g. `rmqc log dump` on a live node) while one save() writes.

Compaction works in two steps so that dropping a million entries never needs one huge transaction:
the compaction boundary (index and term of the last dropped entry) is written first, durably, and
from then on everything reads through it; the entries behind it are then deleted in batches. If the
process dies in between, the leftovers are invisible and the next open or compact sweeps them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import lmdb

from rmqc.errors import CompactedError, CorruptionError, SnapshotOutOfDateError, StorageError, UnavailableError
from rmqc.raft import ConfState, Entry, HardState, Snapshot, SnapshotMeta

from . import _codec
from ._data_file import check_data_file
from ._errors import (
    LogGapError,
    NotAStorageError,
    NotCoveredBySnapshotError,
    StorageFullError,
    StorageWriteFailed,
)
from ._faults import FaultHook, fault_hook_from_env
from ._gate import ResizeGate
from ._inspect import StorageStats, VerifyReport, collect_stats, verify_storage
from ._journal import JOURNAL_FILE_NAME, Journal, encode_record
from ._lock import make_dirs_durably

_T = TypeVar("_T")

DEFAULT_MAP_SIZE_BYTES = 8 << 30
# The map doubles on "map full" up to this size; beyond it the disk, not the map, is the problem.
DEFAULT_MAX_MAP_SIZE_BYTES = 1 << 40
# Entries deleted per transaction when sweeping behind the compaction boundary: keeps each
# transaction's dirty pages far below LMDB's per-transaction limit and each fsync short.
SWEEP_BATCH_ENTRIES = 20_000
# Entries read per read transaction by iter_entries(): long-lived readers pin old pages, so bulk
# reads use a fresh, short transaction per batch.
READ_BATCH_ENTRIES = 2_000
# How long a map resize waits for this process's open transactions to finish.
RESIZE_DRAIN_TIMEOUT_S = 30.0
# Space reserved (posix_fallocate) in the data file beyond LMDB's last page, so that LMDB's own
# writes never meet a full filesystem: it reports a short write there as EIO, which cannot be told
# from a failing disk. A reservation that finds no space is a clean "disk full" instead.
RESERVE_AHEAD_BYTES = 1 << 20
# What one transaction may need beyond its payload (copied branch pages, the free list).
TXN_OVERHEAD_BYTES = 256 << 10

_DB_NAMES = {
    "log": b"log",
    "hard_state": b"hard_state",
    "membership": b"membership",
    "snapshot_meta": b"snapshot_meta",
    "snapshot_data": b"snapshot_data",
}
_KEY = b"v"  # the one key of each single-record database
_BOUNDARY_KEY = b"boundary"  # in snapshot_meta, beside the snapshot's own metadata
_JOURNAL_GENERATION_KEY = b"journal_generation"  # in hard_state: records of older ones are moved in
_REPAIR_KEY = b"repair"  # in hard_state: why the node is repairing (rmqc.storage._repair); absent: it is not
DATA_FILE_NAME = "data.mdb"


@dataclass(frozen=True, slots=True)
class _Bounds:
    """Cached log bounds, swapped as one object so readers in other threads see a consistent view."""

    compacted_index: int = 0  # last index dropped from the log (0: nothing dropped)
    compacted_term: int = 0
    last_index: int = 0
    last_term: int | None = 0  # None: not read yet (open does not decode the last entry)

    @property
    def first_index(self) -> int:
        return self.compacted_index + 1


@dataclass(frozen=True, slots=True)
class _SnapshotState:
    meta: SnapshotMeta = SnapshotMeta()  # noqa: RUF009 (frozen: one shared empty meta is safe)
    data_crc: int = 0


class LmdbStorage:
    """Durable Storage (see rmqc.raft.Storage) on LMDB."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        map_size_bytes: int = DEFAULT_MAP_SIZE_BYTES,
        sync: bool = True,
        *,
        readonly: bool = False,
        max_map_size_bytes: int = DEFAULT_MAX_MAP_SIZE_BYTES,
        keep_journal_prefix: bool = False,
    ) -> None:
        """keep_journal_prefix: a damaged journal's records before the damage are taken, the rest
        given up (only a repair does this, once it kept a copy of the file: rmqc.storage._repair);
        otherwise a damaged journal refuses a writable open."""
        self.path = Path(path)
        self.readonly = readonly
        self._max_map_size_bytes = max_map_size_bytes
        check_data_file(self.path / DATA_FILE_NAME, journal_exists=(self.path / JOURNAL_FILE_NAME).exists())
        if readonly and not (self.path / DATA_FILE_NAME).exists():
            raise NotAStorageError(f"no rmqc log in {self.path} (no {DATA_FILE_NAME})")
        if not readonly:
            make_dirs_durably(self.path)  # its name survives a power cut
        try:
            self._env = lmdb.open(
                str(self.path),
                map_size=map_size_bytes,
                max_dbs=len(_DB_NAMES),
                sync=sync,
                readonly=readonly,
            )
        except (lmdb.InvalidError, lmdb.VersionMismatchError) as exc:
            raise NotAStorageError(f"{self.path} is not an rmqc data directory: its {DATA_FILE_NAME} is not "
                                   f"an LMDB file ({type(exc).__name__})") from None
        self._gate = ResizeGate(RESIZE_DRAIN_TIMEOUT_S)
        # None in production: the hook exists for tests only (see _faults.py)
        self.fault_hook: FaultHook | None = None if readonly else fault_hook_from_env()
        # Writers (save, snapshots, compaction) may come from different worker threads: each
        # checks and updates the cached bounds under this lock, so no update is lost.
        self._writer = threading.RLock()
        # Entries and the hard state saved in the journal since LMDB last took them: after LMDB's
        # last entry, consecutive; every reader sees them (the bounds include them).
        self._journal_entries: list[Entry] = []
        self._journal_hard_state: HardState | None = None
        try:
            self._dbs = {name: self._open_db(raw) for name, raw in _DB_NAMES.items()}
            self._bounds, self._snapshot = self._load_cached_state()
            self._journal = Journal(self.path, self._read(self._journal_generation))
            self.journal_replayed = self._journal.replay(self._bounds.last_index)
            self.journal_replayed.damage = (self.journal_replayed.damage
                                            or self._journal.check_present(self._bounds.last_index))
            if self.journal_replayed.damage and not (readonly or keep_journal_prefix):
                # before anything is written: a new generation would hide the records after the damage
                raise self.journal_replayed.damage.error(self._journal.path)
            self._take_journal_contents()
        except BaseException:
            self._env.close()
            raise
        self._reserve_fd = fd = None if readonly else os.open(self.path / DATA_FILE_NAME, os.O_RDWR | os.O_CLOEXEC)
        # The data file's size as of our last reservation: LMDB only grows it by writing past it,
        # and then a stale (smaller) value merely costs one needless posix_fallocate.
        self._file_bytes = 0 if fd is None else os.fstat(fd).st_size
        self._page_bytes = int(self._env.stat()["psize"])
        if not readonly:
            # the file first (a committed generation promises it exists), then a new generation
            # even when nothing is moved, so no append ever follows a record that replay did not
            # take (a torn one)
            self._journal.open_for_writes()
            self._move_journal_into_lmdb(always=True)
        if not readonly and self._has_leftovers():
            self._sweep_compacted()

    # ----- opening -----

    def _open_db(self, name: bytes) -> lmdb._Database:
        try:
            return self._env.open_db(name, create=not self.readonly)
        except lmdb.NotFoundError as exc:
            raise NotAStorageError(f"no rmqc log in {self.path} (database {name!r} missing)") from exc

    def _load_cached_state(self) -> tuple[_Bounds, _SnapshotState]:
        with self._env.begin() as txn:
            snapshot = _SnapshotState()
            raw_meta = _get(txn, _KEY, self._dbs["snapshot_meta"])
            if raw_meta is not None:
                snapshot = _SnapshotState(*_codec.decode_snapshot_meta(raw_meta))
            compacted_index, compacted_term = 0, 0
            last_term: int | None  # None: the last entry's term is read when first asked for
            raw_boundary = txn.get(_BOUNDARY_KEY, db=self._dbs["snapshot_meta"])
            if raw_boundary is not None:
                compacted_index, compacted_term = _codec.decode_boundary(raw_boundary)
            last_index, last_term = compacted_index, compacted_term
            cursor = txn.cursor(db=self._dbs["log"])
            if cursor.last() and _codec.key_index(cursor.key()) > compacted_index:
                # Only the key: a corrupt last entry is reported when read, so verify can run.
                last_index, last_term = _codec.key_index(cursor.key()), None
        return _Bounds(compacted_index, compacted_term, last_index, last_term), snapshot

    def _journal_generation(self, txn: lmdb.Transaction) -> int:
        raw = txn.get(_JOURNAL_GENERATION_KEY, db=self._dbs["hard_state"])
        return 0 if raw is None else int.from_bytes(raw, "big")

    def _take_journal_contents(self) -> None:
        contents = self.journal_replayed
        self._journal_hard_state = contents.hard_state
        self._journal_holds(contents.entries)

    def _journal_holds(self, entries: Sequence[Entry]) -> None:
        """`entries`, saved in the journal, now end the log."""
        if entries:
            self._journal_entries.extend(entries)
            bounds, last = self._bounds, entries[-1]
            self._bounds = _Bounds(bounds.compacted_index, bounds.compacted_term, last.index, last.term)

    # ----- the journal -----

    def _lmdb_last_index(self) -> int:
        entries = self._journal_entries
        return entries[0].index - 1 if entries else self._bounds.last_index

    def _save_to_journal(self, hard_state: HardState | None, entries: Sequence[Entry]) -> bool:
        """Save an append (and/or a hard state) as one journal record; False when it is not one
        the journal takes (it conflicts with the log, or is larger than the whole journal)."""
        if not self._journal.writable or (entries and entries[0].index != self._bounds.last_index + 1):
            return False
        if entries:
            _check_consecutive(entries)
        record = encode_record(self._journal.generation, hard_state, entries)
        if not self._journal.fits(len(record)):
            self._move_journal_into_lmdb()
            record = encode_record(self._journal.generation, hard_state, entries)
            if not self._journal.fits(len(record)):
                return False
        if self.fault_hook is not None:
            _as_storage_error(self.path, self.fault_hook.before_commit)
        self._journal.append(record)
        self._journal_holds(entries)
        if hard_state is not None:
            self._journal_hard_state = hard_state
        return True

    def _move_journal_into_lmdb(self, *, always: bool = False) -> None:
        """One LMDB transaction takes the journal's entries and hard state and raises its
        generation; the journal then starts over. Before any write the journal does not take."""
        entries, hard_state = self._journal_entries, self._journal_hard_state
        if not (entries or hard_state or always):
            return
        generation = self._journal.generation + 1
        bounds = self._bounds
        lmdb_bounds = _Bounds(bounds.compacted_index, bounds.compacted_term, self._lmdb_last_index(), None)

        def move(txn: lmdb.Transaction) -> None:
            if entries:
                self._append_in_txn(txn, lmdb_bounds, entries)
            if hard_state is not None:
                txn.put(_KEY, _codec.encode_hard_state(hard_state), db=self._dbs["hard_state"])
            txn.put(_JOURNAL_GENERATION_KEY, generation.to_bytes(8, "big"), db=self._dbs["hard_state"])

        self._write(move, sum(len(entry.data) for entry in entries))
        self._journal.restart(generation)
        self._journal_entries, self._journal_hard_state = [], None

    # ----- transactions -----

    def _read(self, fn: Callable[[lmdb.Transaction], _T]) -> _T:
        try:
            with self._gate, self._env.begin(buffers=False) as txn:
                return fn(txn)
        except lmdb.MapResizedError:
            # Another process (the live node) grew the map: adopt its size and read again.
            with self._gate.exclusive():
                self._env.set_mapsize(0)
            with self._gate, self._env.begin(buffers=False) as txn:
                return fn(txn)

    def _write(self, fn: Callable[[lmdb.Transaction], _T], payload_bytes: int = 0, *,
               reserve_bytes: int | None = None) -> _T:
        """Run fn in one write transaction (one fsync on commit), growing the map when it is full.

        fn must not touch the in-memory caches: on "map full" the transaction is aborted and fn
        runs again from scratch in a bigger map, so the write is never lost. A full filesystem
        raises StorageFullError before anything is written (the space the transaction may need,
        `reserve_bytes` or else twice `payload_bytes` plus overhead, is reserved first; may be
        tried again later); any
        other failure of the write or its fsync raises StorageWriteFailed (never to be retried).
        """
        if self.readonly:
            raise StorageError(f"storage at {self.path} was opened read-only")
        with self._writer:
            self._reserve(2 * payload_bytes + TXN_OVERHEAD_BYTES if reserve_bytes is None else reserve_bytes)
            while True:
                try:
                    return _as_storage_error(self.path, lambda: self._commit(fn))
                except lmdb.MapFullError:
                    self._grow_map()

    def _commit(self, fn: Callable[[lmdb.Transaction], _T]) -> _T:
        with self._gate, self._env.begin(write=True) as txn:
            result = fn(txn)
            if self.fault_hook is not None:
                self.fault_hook.before_commit()
            return result

    def ensure_space(self, needed_bytes: int = TXN_OVERHEAD_BYTES) -> None:
        """Reserve `needed_bytes` and commit an empty transaction (LMDB writes nothing for it):
        StorageFullError while the filesystem has no room (how a node whose disk was full finds
        out that there is room again for the write that failed, `StorageFullError.needed_bytes`)."""
        self._write(lambda _txn: None, reserve_bytes=needed_bytes)

    def _reserve(self, needed_bytes: int) -> None:
        """Make sure the data file has `needed_bytes` allocated beyond LMDB's last page (plus
        RESERVE_AHEAD_BYTES when the filesystem has them), so the next transaction writes only
        into space the filesystem already gave."""
        assert self._reserve_fd is not None
        used = (self._env.info()["last_pgno"] + 1) * self._page_bytes
        size = self._file_bytes
        if size - used >= needed_bytes:
            return
        try:
            try:
                os.posix_fallocate(self._reserve_fd, size, used + needed_bytes + RESERVE_AHEAD_BYTES - size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                os.posix_fallocate(self._reserve_fd, size, used + needed_bytes - size)  # just this write
            self._file_bytes = os.fstat(self._reserve_fd).st_size
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise StorageFullError(f"no space left on the device of {self.path}: {needed_bytes} bytes needed",
                                       needed_bytes) from exc
            raise StorageWriteFailed(f"reserving space in the data directory {self.path} failed: {exc}") from exc

    def _grow_map(self) -> None:
        current = self._env.info()["map_size"]
        if current >= self._max_map_size_bytes:
            raise StorageFullError(
                f"LMDB map at {self.path} is full at its maximum of {self._max_map_size_bytes} bytes"
            )
        with self._gate.exclusive():
            self._env.set_mapsize(min(current * 2, self._max_map_size_bytes))

    @property
    def map_size_bytes(self) -> int:
        return int(self._env.info()["map_size"])

    # ----- read side -----

    def initial_state(self) -> tuple[HardState, ConfState]:
        def read(txn: lmdb.Transaction) -> tuple[HardState, ConfState]:
            raw_hard = _get(txn, _KEY, self._dbs["hard_state"])
            raw_conf = _get(txn, _KEY, self._dbs["membership"])
            hard_state = HardState() if raw_hard is None else _codec.decode_hard_state(raw_hard)
            conf_state = ConfState() if raw_conf is None else _codec.decode_conf_state(raw_conf)
            return self._journal_hard_state or hard_state, conf_state

        return self._read(read)

    def first_index(self) -> int:
        return self._bounds.first_index

    def last_index(self) -> int:
        return self._bounds.last_index

    def term(self, index: int) -> int:
        bounds = self._bounds
        if index == bounds.compacted_index:
            return bounds.compacted_term
        if index == bounds.last_index and bounds.last_term is not None:
            return bounds.last_term
        if index < bounds.compacted_index:
            raise CompactedError(f"term of index {index}: compacted up to {bounds.compacted_index}")
        if index > bounds.last_index:
            raise UnavailableError(f"term of index {index}: last index is {bounds.last_index}")
        journal = self._journal_entries
        if journal and index >= journal[0].index:
            return journal[index - journal[0].index].term
        key = _codec.index_key(index)
        value = self._read(lambda txn: _get(txn, key, self._dbs["log"]))
        if value is None:
            if index <= self._bounds.compacted_index:  # compacted meanwhile: ask the new bounds
                return self.term(index)
            raise _missing(index)
        return _codec.decode_term(key, value)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        self._check_range(lo, hi)
        run: list[Entry] = []
        journal = self._journal_entries
        lmdb_hi = min(hi, journal[0].index) if journal else hi
        if lo < lmdb_hi:
            try:
                self._read(lambda txn: self._read_run(txn, lo, lmdb_hi, max_bytes, 0, run))
            except CorruptionError:
                self._raise_if_compacted_meanwhile(lo)
                raise
            if len(run) < lmdb_hi - lo:
                return run  # max_bytes reached
        if hi > lmdb_hi:
            _take_within(run, journal[max(lo, lmdb_hi) - journal[0].index: hi - journal[0].index], max_bytes)
        return run

    def _raise_if_compacted_meanwhile(self, index: int) -> None:
        """A compaction in another thread (a node's snapshot) may move the boundary past `index`
        and sweep it between our bounds check and our read: that is CompactedError, as if the
        check had come a moment later, not a damaged log."""
        if index < self._bounds.first_index:
            raise CompactedError(f"index {index}: compacted up to {self._bounds.compacted_index} meanwhile")

    def _check_range(self, lo: int, hi: int) -> None:
        bounds = self._bounds
        if lo < bounds.first_index:
            raise CompactedError(f"entries from {lo}: compacted up to {bounds.compacted_index}")
        if hi > bounds.last_index + 1:
            raise UnavailableError(f"entries up to {hi - 1}: last index is {bounds.last_index}")
        if lo > hi:
            raise StorageError(f"entries: empty range lo={lo} > hi={hi}")

    def _read_run(
        self,
        txn: lmdb.Transaction,
        lo: int,
        hi: int,
        max_bytes: int | None,
        prev_term: int,
        run: list[Entry],
    ) -> None:
        """Append entries [lo, hi) to `run` (which keeps the good prefix if a check fails)."""
        if lo == hi:
            return
        cursor = txn.cursor(db=self._dbs["log"])
        if not cursor.set_range(_codec.index_key(lo)):
            raise _missing(lo)
        size_bytes = 0
        for entry in _codec.decode_run(_records(cursor), lo, prev_term):
            size_bytes += entry.size_bytes()
            if run and max_bytes is not None and size_bytes > max_bytes:
                return
            run.append(entry)
            if entry.index == hi - 1:
                return
        raise _missing(lo + len(run))

    def iter_entries(
        self, lo: int | None = None, hi: int | None = None, batch_entries: int = READ_BATCH_ENTRIES
    ) -> Iterator[Entry]:
        """Entries in [lo, hi) (default: the whole log), read in batches of short transactions.

        Checks checksums, continuity and term order across the whole range.
        """
        bounds = self._bounds
        lo = bounds.first_index if lo is None else lo
        hi = bounds.last_index + 1 if hi is None else hi
        self._check_range(lo, hi)
        prev_term = bounds.compacted_term if lo == bounds.first_index else 0
        journal = self._journal_entries
        journal_lo = journal[0].index if journal else hi
        if journal and hi > journal_lo:
            yield from self.iter_entries(lo, journal_lo, batch_entries) if lo < journal_lo else ()
            yield from journal[max(lo, journal_lo) - journal_lo: hi - journal_lo]
            return
        while lo < hi:
            batch_hi = min(hi, lo + batch_entries)
            batch: list[Entry] = []
            start, previous = lo, prev_term
            try:
                # the lambda runs at once, inside this iteration: the loop variables cannot move under it
                self._read(lambda txn: self._read_run(txn, start, batch_hi, None, previous, batch))  # noqa: B023
            except CorruptionError:
                yield from batch  # the good entries before the bad one, then the error
                raise
            yield from batch
            lo, prev_term = batch_hi, batch[-1].term

    def snapshot(self) -> Snapshot:
        if self._snapshot.meta.index == 0:
            return Snapshot(meta=self._snapshot.meta)
        # Metadata and data from one transaction: a node's create_snapshot in a worker thread may
        # replace both between two reads, and the cached metadata is updated after its commit.
        state, data = self._read(self._read_snapshot)
        if data is None:
            raise CorruptionError(state.meta.index, "snapshot data missing")
        return Snapshot(state.meta, _codec.check_snapshot_data(state.meta, data, state.data_crc))

    def _read_snapshot(self, txn: lmdb.Transaction) -> tuple[_SnapshotState, bytes | None]:
        raw_meta = _get(txn, _KEY, self._dbs["snapshot_meta"])
        state = self._snapshot if raw_meta is None else _SnapshotState(*_codec.decode_snapshot_meta(raw_meta))
        return state, _get(txn, _KEY, self._dbs["snapshot_data"])

    # ----- write side -----

    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: Snapshot | None = None,
    ) -> None:
        """Persist one Ready in one durable transaction: snapshot, then entries, then hard state."""
        if snapshot is not None and snapshot.is_empty:
            snapshot = None
        if hard_state is None and not entries and snapshot is None:
            return
        payload_bytes = sum(len(entry.data) for entry in entries) + (len(snapshot.data) if snapshot else 0)
        with self._writer:
            if snapshot is None and self._save_to_journal(hard_state, entries):
                return
            self._move_journal_into_lmdb()
            bounds, snapshot_state = self._write(
                lambda txn: self._save_in_txn(txn, hard_state, entries, snapshot), payload_bytes
            )
            self._bounds, self._snapshot = bounds, snapshot_state
        if snapshot is not None and self._has_leftovers():
            self._sweep_compacted()

    def _save_in_txn(
        self,
        txn: lmdb.Transaction,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: Snapshot | None,
    ) -> tuple[_Bounds, _SnapshotState]:
        bounds, snapshot_state = self._bounds, self._snapshot
        if snapshot is not None:
            bounds, snapshot_state = self._apply_snapshot_in_txn(txn, snapshot)
        if entries:
            bounds = self._append_in_txn(txn, bounds, entries)
        if hard_state is not None:
            txn.put(_KEY, _codec.encode_hard_state(hard_state), db=self._dbs["hard_state"])
        return bounds, snapshot_state

    def _apply_snapshot_in_txn(
        self, txn: lmdb.Transaction, snapshot: Snapshot
    ) -> tuple[_Bounds, _SnapshotState]:
        """Replace the log by the snapshot: entries after it go now, entries behind it via sweep."""
        meta = snapshot.meta
        if meta.index <= self._snapshot.meta.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {meta.index} is not newer than the stored one at "
                f"{self._snapshot.meta.index}"
            )
        snapshot_state = self._put_snapshot(txn, meta, snapshot.data)
        txn.put(_KEY, _codec.encode_conf_state(meta.conf_state), db=self._dbs["membership"])
        self._put_boundary(txn, meta.index, meta.term)
        _delete_keys(txn.cursor(db=self._dbs["log"]), meta.index + 1, None, None)
        return _Bounds(meta.index, meta.term, meta.index, meta.term), snapshot_state

    def _append_in_txn(
        self, txn: lmdb.Transaction, bounds: _Bounds, entries: Sequence[Entry]
    ) -> _Bounds:
        _check_consecutive(entries)
        if entries[-1].index < bounds.first_index:
            return bounds  # all behind the compaction boundary: already covered by a snapshot
        if entries[0].index < bounds.first_index:
            entries = entries[bounds.first_index - entries[0].index :]
        start = entries[0].index
        if start > bounds.last_index + 1:
            raise LogGapError(f"append at {start} would leave a gap after last index {bounds.last_index}")
        cursor = txn.cursor(db=self._dbs["log"])
        if start <= bounds.last_index:
            _delete_keys(cursor, start, None, None)  # the conflicting suffix
        items = [(_codec.index_key(e.index), _codec.encode_entry_value(e)) for e in entries]
        _consumed, added = cursor.putmulti(items, append=True)
        if added != len(items):
            raise StorageError(f"append at {start}: LMDB stored {added} of {len(items)} entries")
        last = entries[-1]
        return _Bounds(bounds.compacted_index, bounds.compacted_term, last.index, last.term)

    def _put_snapshot(self, txn: lmdb.Transaction, meta: SnapshotMeta, data: bytes) -> _SnapshotState:
        raw_meta = _codec.encode_snapshot_meta(meta, data)
        txn.put(_KEY, raw_meta, db=self._dbs["snapshot_meta"])
        txn.put(_KEY, data, db=self._dbs["snapshot_data"])
        return _SnapshotState(*_codec.decode_snapshot_meta(raw_meta))

    def _put_boundary(self, txn: lmdb.Transaction, index: int, term: int) -> None:
        txn.put(_BOUNDARY_KEY, _codec.encode_boundary(index, term), db=self._dbs["snapshot_meta"])

    def save_conf_state(self, conf_state: ConfState) -> None:
        encoded = _codec.encode_conf_state(conf_state)
        self._write(lambda txn: txn.put(_KEY, encoded, db=self._dbs["membership"]))

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        with self._writer:
            return self._create_snapshot_locked(index, conf_state, data)

    def _create_snapshot_locked(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        self._move_journal_into_lmdb()  # a snapshot and the compaction after it work on LMDB alone
        if index <= self._snapshot.meta.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {index} is not newer than the stored one at {self._snapshot.meta.index}"
            )
        if index > self._bounds.last_index:
            raise UnavailableError(f"snapshot at {index}: last index is {self._bounds.last_index}")
        meta = SnapshotMeta(index=index, term=self.term(index), conf_state=conf_state)
        self._snapshot = self._write(lambda txn: self._put_snapshot(txn, meta, data), len(data))
        return Snapshot(meta, data)

    def compact(self, index: int, *, progress: Callable[[int, int], None] | None = None,
                sweep: bool = True) -> None:
        """Drop entries up to `index` (covered by the snapshot); progress(done, total) per batch.
        sweep=False only moves the boundary (the entries are gone for readers at once): the
        caller deletes them with sweep_batch, one short transaction per call."""
        with self._writer:
            self._move_journal_into_lmdb()
            dropped = self._move_boundary_locked(index)
        if sweep:
            self._sweep_compacted(progress, total=dropped)  # batches, letting saves in between

    def sweep_batch(self, limit: int) -> int:
        """Delete up to `limit` entries behind the compaction boundary; the number deleted."""
        stop = self._bounds.compacted_index
        return self._write(lambda txn: _delete_keys(txn.cursor(db=self._dbs["log"]), 0, stop, limit))

    def _move_boundary_locked(self, index: int) -> int:
        """Write the compaction boundary durably; the number of entries it hides."""
        bounds = self._bounds
        if index <= bounds.compacted_index:
            raise CompactedError(f"compact to {index}: already compacted up to {bounds.compacted_index}")
        if index > self._snapshot.meta.index:
            raise NotCoveredBySnapshotError(
                f"compact to {index}: the latest snapshot only covers up to {self._snapshot.meta.index}"
            )
        term = self.term(index)
        self._write(lambda txn: self._put_boundary(txn, index, term))
        self._bounds = _Bounds(index, term, bounds.last_index, bounds.last_term)
        return index - bounds.compacted_index

    def _has_leftovers(self) -> bool:
        def first_key(txn: lmdb.Transaction) -> int | None:
            cursor = txn.cursor(db=self._dbs["log"])
            return _codec.key_index(_key(cursor)) if cursor.first() else None

        first = self._read(first_key)
        return first is not None and first <= self._bounds.compacted_index

    def _sweep_compacted(
        self, progress: Callable[[int, int], None] | None = None, total: int = 0
    ) -> None:
        """Delete entries behind the compaction boundary, SWEEP_BATCH_ENTRIES per transaction."""
        done = 0
        while deleted := self.sweep_batch(SWEEP_BATCH_ENTRIES):
            done += deleted
            if progress is not None:
                progress(done, max(total, done))

    # ----- operator helpers -----

    def snapshot_meta(self) -> SnapshotMeta:
        """The stored snapshot's metadata without reading its data."""
        return self._snapshot.meta

    def stats(self) -> StorageStats:
        return collect_stats(self)

    def verify(self) -> VerifyReport:
        return verify_storage(self)

    def repair_reason(self) -> str | None:
        """Why the node is repairing (its storage was found damaged), or None."""
        raw = self._read(lambda txn: txn.get(_REPAIR_KEY, db=self._dbs["hard_state"]))
        return None if raw is None else bytes(raw).decode()

    def begin_repair(self, reason: str) -> None:
        """Record, durably, that the node repairs: it stays so across restarts until end_repair."""
        self._write(lambda txn: txn.put(_REPAIR_KEY, reason.encode(), db=self._dbs["hard_state"]))

    def end_repair(self) -> None:
        self._write(lambda txn: txn.delete(_REPAIR_KEY, db=self._dbs["hard_state"]))

    def clear_stale_readers(self) -> int:
        """Free the reader slots of processes that died holding them (they keep old pages from
        being reused); the number freed."""
        return int(self._env.reader_check())

    def bytes_on_disk(self) -> int:
        return (self.path / DATA_FILE_NAME).stat().st_size

    def raw_log_records(self, batch_entries: int = READ_BATCH_ENTRIES) -> Iterator[tuple[bytes, bytes]]:
        """Every stored (key, value) of the log, unchecked, in batches (for verify and stats)."""
        next_key = b""
        while True:
            # the lambda runs at once, inside this iteration: next_key cannot move under it
            batch = self._read(lambda txn: _raw_batch(txn.cursor(db=self._dbs["log"]), next_key, batch_entries))  # noqa: B023
            if not batch:
                yield from ((_codec.index_key(e.index), _codec.encode_entry_value(e)) for e in self._journal_entries)
                return
            yield from batch
            next_key = _codec.index_key(_codec.key_index(batch[-1][0]) + 1)

    def environment_info(self) -> dict[str, int]:
        """Page counts and sizes of the LMDB file, for stats()."""

        def read(txn: lmdb.Transaction) -> dict[str, int]:
            used_pages = _pages(self._env.stat())
            for db in self._dbs.values():
                used_pages += _pages(txn.stat(db))
            info = self._env.info()
            return {
                "page_size_bytes": self._env.stat()["psize"],
                "map_size_bytes": info["map_size"],
                "last_page": info["last_pgno"],
                "used_pages": used_pages,
            }

        return self._read(read)

    def copy_compacted(self, destination: str | os.PathLike[str]) -> None:
        """Write a compact copy of the environment (no free pages) into the empty directory; what
        the journal holds is moved into LMDB first (a read-only storage's copy lacks it)."""
        if not self.readonly:
            with self._writer:
                self._move_journal_into_lmdb()
        with self._gate:
            self._env.copy(str(destination), compact=True)


    def close(self) -> None:
        """Closes; a writable storage first moves what its journal holds into LMDB (a stopped
        node's data file is then complete; if that fails the journal still holds it)."""
        if self._journal.writable:
            with contextlib.suppress(StorageError):
                self._move_journal_into_lmdb()
        self._journal.close()
        if self._reserve_fd is not None:
            os.close(self._reserve_fd)
            self._reserve_fd = None
        self._env.close()

    def __enter__(self) -> LmdbStorage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        b = self._bounds
        return f"LmdbStorage({str(self.path)!r}, first={b.first_index}, last={b.last_index})"


def rewrite_compactly(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Rewrite the data file of a closed, locked data directory without free pages.

    Copies with LMDB's compacting copy, makes the copy durable, then swaps it in with one rename,
    so a crash leaves either the old file or the new one. Returns (bytes before, bytes after).
    """
    path = Path(path)
    data_file = path / DATA_FILE_NAME
    scratch = path / ".compact-tmp"
    shutil.rmtree(scratch, ignore_errors=True)  # a leftover of an interrupted rewrite
    scratch.mkdir()
    try:
        bytes_before = data_file.stat().st_size
        with LmdbStorage(path, sync=True) as storage:
            storage.copy_compacted(scratch)
        copy = scratch / DATA_FILE_NAME
        fsync_path(copy)
        os.replace(copy, data_file)
        fsync_path(path)
        return bytes_before, data_file.stat().st_size
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pages(stat: lmdb._StatDict) -> int:
    return stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]


def _raw_batch(cursor: lmdb.Cursor, start_key: bytes, limit: int) -> list[tuple[bytes, bytes]]:
    if not cursor.set_range(start_key):
        return []
    batch = []
    for record in _records(cursor):
        batch.append(record)
        if len(batch) == limit:
            break
    return batch


def _check_consecutive(entries: Sequence[Entry]) -> None:
    first = entries[0].index
    for offset, entry in enumerate(entries):
        if entry.index != first + offset:
            raise LogGapError(f"entries to append are not consecutive at {first + offset} ({entry.index})")


def _delete_keys(cursor: lmdb.Cursor, lo: int, hi: int | None, limit: int | None) -> int:
    """Delete log keys in [lo, hi] (hi None: to the end), at most `limit`; the number deleted."""
    deleted = 0
    if not cursor.set_range(_codec.index_key(lo)):
        return 0
    while cursor.key():
        if hi is not None and _codec.key_index(_key(cursor)) > hi:
            break
        if limit is not None and deleted == limit:
            break
        cursor.delete()
        deleted += 1
    return deleted


def _take_within(run: list[Entry], more: Sequence[Entry], max_bytes: int | None) -> None:
    """Append `more` to `run` while the whole stays within max_bytes (at least one entry)."""
    size_bytes = sum(entry.size_bytes() for entry in run)
    for entry in more:
        size_bytes += entry.size_bytes()
        if run and max_bytes is not None and size_bytes > max_bytes:
            return
        run.append(entry)


def _as_storage_error(path: Path, action: Callable[[], _T]) -> _T:
    """Run a write; LMDB's (or the fault hook's) errors become the storage's: ENOSPC a StorageFullError
    (nothing was written; may be tried again), anything else StorageWriteFailed (never retried).
    lmdb.MapFullError passes through: the caller grows the map and tries again."""
    try:
        return action()
    except lmdb.MapFullError:
        raise
    except lmdb.DiskError as exc:  # ENOSPC: LMDB aborted the transaction, nothing was written over
        raise StorageFullError(f"no space left on the device of {path}: {exc}") from exc
    except lmdb.Error as exc:
        raise StorageWriteFailed(f"write to the data directory {path} failed: {exc}") from exc


def _missing(index: int) -> CorruptionError:
    return CorruptionError(index, "entry missing")


# py-lmdb hands out bytes: the environments are opened without buffers=True. Its stubs type every
# read as `bytes | memoryview` (what buffers=True would give); these say what this module gets.
def _get(txn: lmdb.Transaction, key: bytes, db: lmdb._Database) -> bytes | None:
    return cast("bytes | None", txn.get(key, db=db))


def _key(cursor: lmdb.Cursor) -> bytes:
    return cast(bytes, cursor.key())


def _records(cursor: lmdb.Cursor) -> Iterator[tuple[bytes, bytes]]:
    return cast(Iterator[tuple[bytes, bytes]], cursor.iternext())
