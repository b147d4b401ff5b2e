"""Errors of the LMDB storage, under rmqc.errors.StorageError."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, StorageError


class LogGapError(StorageError):
    """Entries handed to save() would leave a hole in the log (or are not consecutive)."""


class NotCoveredBySnapshotError(StorageError):
    """compact() was asked to drop entries that no stored snapshot covers."""


class StorageFullError(StorageError, BoundExceeded):
    """The LMDB map reached its maximum size even after growing."""


class NodeLockedError(StorageError):
    """The data directory is locked by a running node."""

    def __init__(self, path: str, pid: int | None) -> None:
        holder = f"PID {pid}" if pid is not None else "another process"
        super().__init__(f"data directory {path} is in use by a running node ({holder})")
        self.path = path
        self.pid = pid


class StorageBusyError(StorageError, BoundExceeded):
    """Readers kept the map busy longer than the bound while it had to grow."""


class NotAStorageError(StorageError):
    """The directory holds no rmqc log (opened read-only, nothing to read)."""
