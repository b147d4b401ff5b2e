"""Snapshot files: `rmqc admin snapshot save` writes one, `rmqc log restore` starts a new data
directory from one, `rmqc log verify FILE` checks one.

Layout (every part checked on read, so a flipped bit or a truncated copy is refused):

    b"RMQCSNAP" | u32 format version | u32 n | snapshot metadata (n bytes) | u32 m | origin (m bytes)
    | u64 k | state (k bytes)

The metadata record is the one the data directory stores for its own snapshots (`_codec`: index,
term, membership and the CRC32 of the state, itself sealed with a CRC32), so the file and the store
share one encoding. The origin is a sealed JSON object: the controller group, the node that
answered and the wall time it did (for people; restore only defaults the group from it).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rmqc.errors import CorruptionError, RmqcError
from rmqc.raft import ConfState, HardState, Snapshot, SnapshotMeta

from . import _codec
from ._identity import NodeIdentity, _write_atomically, claim_identity
from ._lock import make_dirs_durably

MAGIC = b"RMQCSNAP"
FORMAT_VERSION = 1
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class NotASnapshotFile(RmqcError):
    """The file is not an rmqc snapshot file (wrong magic or version)."""


class RestoreRefused(RmqcError):
    """A restore that would overwrite data or start a node outside its own group."""


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    meta: SnapshotMeta  # index, term and membership of the committed state
    origin: dict[str, Any]  # {"group", "nodeId", "savedAtMs"}
    data: bytes  # ControllerState.snapshot() at meta.index

    @property
    def group(self) -> str | None:
        group = self.origin.get("group")
        return group if isinstance(group, str) else None


def encode_snapshot_file(meta: SnapshotMeta, data: bytes, origin: dict[str, Any]) -> bytes:
    meta_record = _codec.encode_snapshot_meta(meta, data)
    origin_record = _codec._seal(orjson.dumps(origin))
    return b"".join((MAGIC, _U32.pack(FORMAT_VERSION), _U32.pack(len(meta_record)), meta_record,
                     _U32.pack(len(origin_record)), origin_record, _U64.pack(len(data)), data))


def decode_snapshot_file(content: bytes) -> SnapshotFile:
    """The file's parts after every check; NotASnapshotFile or CorruptionError (index 0 until the
    metadata is read, then the snapshot's index) naming what is wrong."""
    if not content.startswith(MAGIC):
        raise NotASnapshotFile("not an rmqc snapshot file (no RMQCSNAP header)")
    reader = _Reader(content, len(MAGIC))
    version = reader.u32("format version")
    if version != FORMAT_VERSION:
        raise NotASnapshotFile(f"snapshot file format {version}; this rmqc reads format {FORMAT_VERSION}")
    meta, data_crc = _codec.decode_snapshot_meta(reader.part(reader.u32("metadata length"), "metadata"))
    origin_body = _codec._unseal(reader.part(reader.u32("origin length"), "origin"), "origin")
    data = reader.part(reader.u64("state length"), "state")
    if reader.offset != len(content):
        raise CorruptionError(meta.index, f"{len(content) - reader.offset} unexpected bytes after the state")
    _codec.check_snapshot_data(meta, data, data_crc)
    origin = orjson.loads(origin_body)
    return SnapshotFile(meta, origin if isinstance(origin, dict) else {}, data)


class _Reader:
    def __init__(self, content: bytes, offset: int) -> None:
        self.content, self.offset = content, offset

    def part(self, length: int, what: str) -> bytes:
        end = self.offset + length
        if end > len(self.content):
            raise CorruptionError(_codec.METADATA_INDEX, f"snapshot file truncated in its {what}")
        chunk, self.offset = self.content[self.offset:end], end
        return chunk

    def u32(self, what: str) -> int:
        value: int = _U32.unpack(self.part(_U32.size, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = _U64.unpack(self.part(_U64.size, what))[0]
        return value


def read_snapshot_file(path: str | os.PathLike[str]) -> SnapshotFile:
    return decode_snapshot_file(Path(path).read_bytes())


def write_snapshot_file(path: str | os.PathLike[str], content: bytes) -> None:
    """Check `content`, then write it atomically (a temporary file, fsync, rename, fsync of the
    directory): a crash leaves the old file or the whole new one, never half of it."""
    decode_snapshot_file(content)
    _write_atomically(Path(path), content)


def restore_data_dir(snapshot: SnapshotFile, data_dir: str | os.PathLike[str], identity: NodeIdentity,
                     voters: tuple[str, ...]) -> None:
    """A new data directory whose node starts a new group from `snapshot`: the state at its index
    and term, an empty log after it, and `voters` as the membership (the snapshot's own membership
    belongs to the old group). Refuses a directory that is not empty."""
    from ._lmdb_storage import LmdbStorage

    path = Path(data_dir)
    if path.exists() and any(path.iterdir()):
        raise RestoreRefused(f"{path} is not empty: restore writes a new data directory only")
    if identity.node_id not in voters:
        raise RestoreRefused(f"node {identity.node_id} is not one of the voters {', '.join(voters)}")
    meta = SnapshotMeta(index=snapshot.meta.index, term=snapshot.meta.term, conf_state=ConfState(voters=voters))
    make_dirs_durably(path)  # the new directory's name survives a power cut too, not just its files
    with LmdbStorage(path) as storage:
        storage.save(HardState(term=meta.term, vote=None, commit=meta.index), [], Snapshot(meta, snapshot.data))
    claim_identity(path, identity)
