"""In-memory Storage: the simulator's and the unit tests' log.

Layout: `_entries[0]` is a dummy entry at `_offset` (the compaction point) whose term is the term of
that index; real entries follow contiguously. After a snapshot is saved, `_offset` equals the
snapshot index, so first_index() == snapshot index + 1. `create_snapshot` records a snapshot
without compacting; `compact` then drops entries up to an index that snapshot covers.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmqc.errors import CompactedError, SnapshotOutOfDateError, StorageError, UnavailableError

from ._types import ConfState, Entry, HardState, Snapshot, SnapshotMeta

# Entry.size_bytes() is payload + a fixed overhead; taking the overhead once keeps the hot loops
# free of a method call per entry while staying defined by the shared type.
ENTRY_OVERHEAD_BYTES = Entry(0, 0).size_bytes()


def entries_size(entries: Sequence[Entry]) -> int:
    return sum(len(e.data) for e in entries) + ENTRY_OVERHEAD_BYTES * len(entries)


def limit_size(entries: list[Entry], max_bytes: int | None) -> list[Entry]:
    """The longest prefix within max_bytes; always at least one entry (progress over bounds)."""
    if max_bytes is None or len(entries) <= 1:
        return entries
    total = 0
    overhead = ENTRY_OVERHEAD_BYTES
    for count, entry in enumerate(entries):
        total += len(entry.data) + overhead
        if total > max_bytes and count > 0:
            return entries[:count]
    return entries


class MemoryStorage:
    def __init__(self) -> None:
        self._hard_state = HardState()
        self._conf_state = ConfState()
        self._snapshot = Snapshot()
        self._entries: list[Entry] = [Entry(index=0, term=0)]
        self._repair_reason: str | None = None
        self._closed = False

    # -- repair (a node whose storage was found damaged: see RaftCore, "repair") -------------
    def repair_reason(self) -> str | None:
        return self._repair_reason

    def begin_repair(self, reason: str) -> None:
        self._repair_reason = reason

    def end_repair(self) -> None:
        self._repair_reason = None

    # -- read side ---------------------------------------------------------------------------
    def initial_state(self) -> tuple[HardState, ConfState]:
        self._check_open()
        return self._hard_state, self._conf_state

    def first_index(self) -> int:
        self._check_open()
        return self._entries[0].index + 1

    def last_index(self) -> int:
        self._check_open()
        return self._entries[0].index + len(self._entries) - 1

    def term(self, index: int) -> int:
        self._check_open()
        offset = self._entries[0].index
        if index < offset:
            raise CompactedError(f"term({index}): compacted up to {offset}")
        if index > self.last_index():
            raise UnavailableError(f"term({index}): last index is {self.last_index()}")
        return self._entries[index - offset].term

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        self._check_open()
        offset = self._entries[0].index
        if lo <= offset:
            raise CompactedError(f"entries[{lo}, {hi}): compacted up to {offset}")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"entries[{lo}, {hi}): last index is {self.last_index()}")
        if lo > hi:
            raise ValueError(f"entries: lo {lo} > hi {hi}")
        return limit_size(self._entries[lo - offset : hi - offset], max_bytes)

    def snapshot(self) -> Snapshot:
        self._check_open()
        return self._snapshot

    # -- write side --------------------------------------------------------------------------
    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: Snapshot | None = None,
    ) -> None:
        self._check_open()
        if snapshot is not None and not snapshot.is_empty:
            self._apply_snapshot(snapshot)
        if entries:
            self._append(entries)
        if hard_state is not None:
            self._hard_state = hard_state

    def save_conf_state(self, conf_state: ConfState) -> None:
        self._check_open()
        self._conf_state = conf_state

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        self._check_open()
        if index <= self._snapshot.meta.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {index} is not newer than the stored one at {self._snapshot.meta.index}"
            )
        term = self.term(index)  # raises Compacted/Unavailable for indexes we cannot describe
        self._snapshot = Snapshot(SnapshotMeta(index, term, conf_state), data)
        return self._snapshot

    def compact(self, index: int) -> None:
        self._check_open()
        offset = self._entries[0].index
        if index <= offset:
            raise CompactedError(f"compact({index}): already compacted up to {offset}")
        if index > self._snapshot.meta.index:
            raise StorageError(
                f"compact({index}): no snapshot covers it (snapshot at {self._snapshot.meta.index})"
            )
        term = self.term(index)
        self._entries = [Entry(index=index, term=term), *self._entries[index - offset + 1:]]

    def close(self) -> None:
        self._closed = True

    # -- helpers -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("memory storage is closed")

    def _apply_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.meta.index <= self._snapshot.meta.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {snapshot.meta.index} is not newer than {self._snapshot.meta.index}"
            )
        self._snapshot = snapshot
        self._conf_state = snapshot.meta.conf_state
        self._entries = [Entry(index=snapshot.meta.index, term=snapshot.meta.term)]

    def _append(self, entries: Sequence[Entry]) -> None:
        offset = self._entries[0].index
        first_new = entries[0].index
        if first_new > self.last_index() + 1:
            raise StorageError(
                f"append at {first_new} would leave a gap after last index {self.last_index()}"
            )
        skip = max(0, offset + 1 - first_new)  # entries already compacted away are dropped
        kept = list(entries[skip:])
        if not kept:
            return
        cut = kept[0].index - offset
        del self._entries[cut:]  # the conflicting suffix (a no-op for a plain append)
        self._entries.extend(kept)
