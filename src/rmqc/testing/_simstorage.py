"""The simulated disk: a MemoryStorage whose writes become durable only when their simulated fsync
completes. A crash before that loses them, as a power cut loses what was still in the page cache.

Reads (by the Raft core, after a restart too) see only durable data; the core itself keeps the
entries of a Ready that is not yet persisted, exactly as with a real disk. Membership records,
snapshots and compaction are separate small writes and stay immediate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rmqc.errors import StorageError
from rmqc.raft import MemoryStorage
from rmqc.raft._types import Entry, HardState, Snapshot


@dataclass(frozen=True, slots=True)
class _Write:
    hard_state: HardState | None
    entries: tuple[Entry, ...]
    snapshot: Snapshot | None


class CrashableStorage(MemoryStorage):
    """`stage()` a Ready's write, `flush()` it when the fsync completes, `crash()` to lose it."""

    def __init__(self) -> None:
        super().__init__()
        self._staged: _Write | None = None
        self.lost_writes = 0

    def stage(self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: Snapshot | None) -> None:
        # One write in flight at a time, as the Ready contract allows one outstanding Ready.
        if self._staged is not None:
            raise StorageError("a write is already waiting for its fsync")
        self._staged = _Write(hard_state, tuple(entries), snapshot)

    @property
    def staged_entries(self) -> tuple[Entry, ...]:
        return self._staged.entries if self._staged is not None else ()

    def flush(self) -> None:
        """The fsync completed: the staged write is durable now."""
        if self._staged is None:
            raise StorageError("flush without a staged write")
        write, self._staged = self._staged, None
        self.save(write.hard_state, write.entries, write.snapshot)

    def crash(self) -> None:
        """Power cut: whatever was staged and not flushed is gone."""
        if self._staged is not None:
            self.lost_writes += 1
        self._staged = None
