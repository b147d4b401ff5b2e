"""Errors of the LMDB storage, under rmqc.errors.StorageError."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, StorageError


class LogGapError(StorageError):
    """Entries handed to save() would leave a hole in the log (or are not consecutive)."""


class NotCoveredBySnapshotError(StorageError):
    """compact() was asked to drop entries that no stored snapshot covers."""


class StorageFullError(StorageError, BoundExceeded):
    """No room to write: the filesystem is full (ENOSPC), or the LMDB map reached its maximum size
    even after growing. The failed transaction was aborted before its commit, so nothing of it is
    stored and everything committed before is intact: the same write may be tried again, and
    succeeds once space returns. `needed_bytes`: the room the write asked for, when known."""

    def __init__(self, message: str, needed_bytes: int | None = None) -> None:
        super().__init__(message)
        self.needed_bytes = needed_bytes


class StorageWriteFailed(StorageError):
    """A write or fsync of the data directory failed for another reason than space: EIO, a
    filesystem turned read-only, permission lost. The kernel may have dropped pages it had
    accepted (PostgreSQL's "fsyncgate"), so the write must never be retried and nothing after it
    acknowledged: the process stops, and a restart recovers from what is durable."""


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


class IdentityMismatchError(StorageError):
    """A node was started on the data directory of another node (or controller group)."""


DAMAGE_ADVICE = ("The node must not serve from this data directory: start it with `rmqc serve --repair` to "
                 "rejoin it from its cluster, or restore a snapshot (docs/operations.md, \"Damaged storage\")")


class StorageDamagedError(StorageError):
    """A file of the data directory failed a check that a crash cannot explain (truncated, a
    checksum mismatch with valid data after it, missing): what the node acknowledged or voted on
    may be lost, so nothing is served from it. Names the file, the offset when known, and what to do."""

    def __init__(self, path: object, what: str, offset: int | None = None) -> None:
        where = "" if offset is None else f" at byte {offset}"
        super().__init__(f"{path} is damaged{where}: {what}. {DAMAGE_ADVICE}")
        self.path = path
        self.what = what
        self.offset = offset

    def __reduce__(self) -> tuple[type, tuple[object, str, int | None]]:  # crosses processes (_isolated)
        return type(self), (self.path, self.what, self.offset)
