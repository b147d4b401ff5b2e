"""rmqc.storage: the durable Raft log, hard state, membership and snapshots of a node, on LMDB.

A node's data directory holds one LMDB environment (`data.mdb`, `lock.mdb`) with the named
databases `log` (big-endian u64 index -> term | type | payload | crc32), `hard_state`,
`membership`, `snapshot_meta` (the snapshot's index, term, membership and data checksum, plus the
compaction boundary) and `snapshot_data`; `node.lock`, the flock'd file naming the PID of the
node using the directory; and `node.json`, the id and controller group of the node that wrote it.
`LmdbStorage` implements rmqc.raft's Storage protocol (synchronous: the Trio server calls it from a
worker thread); `rmqc log` (rmqc.cli.log) is its operator tool. Snapshot files (`_snapshot_file`) carry one
committed state out of a cluster (`rmqc admin snapshot save`) and into a new one (`rmqc log restore`).
"""

from ._errors import (
    DAMAGE_ADVICE,
    IdentityMismatchError,
    LogGapError,
    NodeLockedError,
    NotAStorageError,
    NotCoveredBySnapshotError,
    StorageBusyError,
    StorageDamagedError,
    StorageFullError,
    StorageWriteFailed,
)
from ._faults import FAULT_FILE_ENV, FAULT_STALL_WORD
from ._identity import IDENTITY_FILE_NAME, NodeIdentity, claim_identity, read_identity
from ._inspect import StorageStats, VerifyReport, open_verified
from ._isolated import verify_isolated
from ._lmdb_storage import DATA_FILE_NAME, DEFAULT_MAP_SIZE_BYTES, LmdbStorage, rewrite_compactly
from ._lock import NodeLock, acquire_node_lock, is_locked_by_live_node, live_lock_holder
from ._repair import RepairStart, open_for_repair
from ._snapshot_file import (
    NotASnapshotFile,
    RestoreRefused,
    SnapshotFile,
    decode_snapshot_file,
    encode_snapshot_file,
    read_snapshot_file,
    restore_data_dir,
    write_snapshot_file,
)

__all__ = [
    "DAMAGE_ADVICE",
    "DATA_FILE_NAME",
    "DEFAULT_MAP_SIZE_BYTES",
    "FAULT_FILE_ENV",
    "FAULT_STALL_WORD",
    "IDENTITY_FILE_NAME",
    "IdentityMismatchError",
    "LmdbStorage",
    "LogGapError",
    "NodeIdentity",
    "NodeLock",
    "NodeLockedError",
    "NotASnapshotFile",
    "NotAStorageError",
    "NotCoveredBySnapshotError",
    "RepairStart",
    "RestoreRefused",
    "SnapshotFile",
    "StorageBusyError",
    "StorageDamagedError",
    "StorageFullError",
    "StorageStats",
    "StorageWriteFailed",
    "VerifyReport",
    "acquire_node_lock",
    "claim_identity",
    "decode_snapshot_file",
    "encode_snapshot_file",
    "is_locked_by_live_node",
    "live_lock_holder",
    "open_for_repair",
    "open_verified",
    "read_identity",
    "read_snapshot_file",
    "restore_data_dir",
    "rewrite_compactly",
    "verify_isolated",
    "write_snapshot_file",
]
