"""rmqc.storage: the durable Raft log, hard state, membership and snapshots of a node, on LMDB."""

from ._errors import (
    LogGapError,
    NodeLockedError,
    NotAStorageError,
    NotCoveredBySnapshotError,
    StorageBusyError,
    StorageFullError,
)
from ._inspect import StorageStats, VerifyReport
from ._lmdb_storage import DATA_FILE_NAME, DEFAULT_MAP_SIZE_BYTES, LmdbStorage, rewrite_compactly
from ._lock import NodeLock, acquire_node_lock, is_locked_by_live_node, live_lock_holder

__all__ = [
    "DATA_FILE_NAME",
    "DEFAULT_MAP_SIZE_BYTES",
    "LmdbStorage",
    "LogGapError",
    "NodeLock",
    "NodeLockedError",
    "NotAStorageError",
    "NotCoveredBySnapshotError",
    "StorageBusyError",
    "StorageFullError",
    "StorageStats",
    "VerifyReport",
    "acquire_node_lock",
    "is_locked_by_live_node",
    "live_lock_holder",
    "rewrite_compactly",
]
