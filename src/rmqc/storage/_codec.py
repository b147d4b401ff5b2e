"""Byte layouts of everything LmdbStorage writes, each with a CRC32 so that a flipped bit is caught
on read and reported with the index it belongs to.

Log keys are big-endian u64 indexes, so LMDB's byte order is index order and cursors walk the log.
A log value is `term (u64) | type (u8) | payload | crc32 (u32)`; the CRC also covers the key, so a
value that ends up under the wrong index fails its check too.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

import orjson

from rmqc.errors import CorruptionError
from rmqc.raft import ConfState, Entry, EntryType, HardState, SnapshotMeta

_ENTRY_HEAD = struct.Struct(">QB")
_CRC = struct.Struct(">I")
_HARD_STATE_HEAD = struct.Struct(">QQ")
_SNAPSHOT_META_HEAD = struct.Struct(">QQI")
_BOUNDARY = struct.Struct(">QQ")
_ENTRY_OVERHEAD_BYTES = _ENTRY_HEAD.size + _CRC.size
_ENTRY_TYPES = {member.value: member for member in EntryType}

# Metadata records are not log entries; a corrupt one is reported at index 0 with its name.
METADATA_INDEX = 0


def index_key(index: int) -> bytes:
    return index.to_bytes(8, "big")


def key_index(key: bytes) -> int:
    return int.from_bytes(key, "big")


def encode_entry_value(entry: Entry) -> bytes:
    body = _ENTRY_HEAD.pack(entry.term, entry.type) + entry.data
    return body + _CRC.pack(zlib.crc32(body, zlib.crc32(index_key(entry.index))))


def _checked_body(key: bytes, value: bytes) -> bytes:
    """The value without its CRC, after checking the CRC (which also covers the key)."""
    if len(key) != 8:
        raise CorruptionError(key_index(key), f"log key has {len(key)} bytes, expected 8")
    if len(value) < _ENTRY_OVERHEAD_BYTES:
        raise CorruptionError(key_index(key), f"entry value truncated to {len(value)} bytes")
    body, (stored_crc,) = value[: -_CRC.size], _CRC.unpack(value[-_CRC.size :])
    if zlib.crc32(body, zlib.crc32(key)) != stored_crc:
        raise CorruptionError(key_index(key), "entry checksum mismatch")
    return body


def decode_entry(key: bytes, value: bytes) -> Entry:
    """Decode one stored entry, raising CorruptionError naming the index when a check fails."""
    body = _checked_body(key, value)
    term, type_code = _ENTRY_HEAD.unpack_from(body)
    entry_type = _ENTRY_TYPES.get(type_code)
    if entry_type is None:
        raise CorruptionError(key_index(key), f"unknown entry type {type_code}")
    return Entry(index=key_index(key), term=term, type=entry_type, data=body[_ENTRY_HEAD.size :])


def decode_term(key: bytes, value: bytes) -> int:
    """The term of one stored entry (checksum checked), without building the Entry."""
    term: int = _ENTRY_HEAD.unpack_from(_checked_body(key, value))[0]
    return term


def decode_run(
    records: Iterable[tuple[bytes, bytes]], start_index: int, prev_term: int
) -> Iterator[Entry]:
    """Decode consecutive records starting at `start_index`, checking continuity and term order.

    `prev_term` is the term of the entry before `start_index` (0 if unknown), so a term going
    backwards across a batch boundary is caught too.
    """
    expected = start_index
    for key, value in records:
        index = key_index(key)
        if index != expected:
            raise CorruptionError(expected, f"entry missing (next stored index is {index})")
        entry = decode_entry(key, value)
        if entry.term < prev_term:
            raise CorruptionError(index, f"term goes backwards ({prev_term} -> {entry.term})")
        prev_term = entry.term
        expected += 1
        yield entry


def _seal(body: bytes) -> bytes:
    return body + _CRC.pack(zlib.crc32(body))


def _unseal(value: bytes, what: str) -> bytes:
    if len(value) < _CRC.size:
        raise CorruptionError(METADATA_INDEX, f"{what} record truncated")
    body, (stored_crc,) = value[: -_CRC.size], _CRC.unpack(value[-_CRC.size :])
    if zlib.crc32(body) != stored_crc:
        raise CorruptionError(METADATA_INDEX, f"{what} checksum mismatch")
    return body


def encode_hard_state(hard_state: HardState) -> bytes:
    vote = (hard_state.vote or "").encode()
    return _seal(_HARD_STATE_HEAD.pack(hard_state.term, hard_state.commit) + vote)


def decode_hard_state(value: bytes) -> HardState:
    body = _unseal(value, "hard state")
    term, commit = _HARD_STATE_HEAD.unpack_from(body)
    vote = body[_HARD_STATE_HEAD.size :].decode()
    return HardState(term=term, vote=vote or None, commit=commit)


def _conf_state_json(conf_state: ConfState) -> bytes:
    document: dict[str, object] = {"voters": list(conf_state.voters), "learners": list(conf_state.learners)}
    if conf_state.addresses:
        document["addresses"] = dict(conf_state.addresses)
    return orjson.dumps(document)


def _conf_state_from_json(raw: bytes, what: str) -> ConfState:
    """Records written before issue 16 have no "addresses": their book is empty (the replica then
    takes the addresses of the `peers` option)."""
    try:
        obj = orjson.loads(raw)
        addresses = obj.get("addresses", {})
        if not isinstance(addresses, dict):
            raise TypeError(f"addresses is a {type(addresses).__name__}, not an object")
        return ConfState(voters=tuple(obj["voters"]), learners=tuple(obj["learners"]),
                         addresses=tuple(sorted((str(k), str(v)) for k, v in addresses.items())))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptionError(METADATA_INDEX, f"{what} undecodable: {exc}") from exc


def encode_conf_state(conf_state: ConfState) -> bytes:
    return _seal(_conf_state_json(conf_state))


def decode_conf_state(value: bytes) -> ConfState:
    return _conf_state_from_json(_unseal(value, "membership"), "membership")


def encode_snapshot_meta(meta: SnapshotMeta, data: bytes) -> bytes:
    head = _SNAPSHOT_META_HEAD.pack(meta.index, meta.term, zlib.crc32(data))
    return _seal(head + _conf_state_json(meta.conf_state))


def decode_snapshot_meta(value: bytes) -> tuple[SnapshotMeta, int]:
    """The snapshot's metadata and the CRC32 its data must have."""
    body = _unseal(value, "snapshot metadata")
    index, term, data_crc = _SNAPSHOT_META_HEAD.unpack_from(body)
    conf_state = _conf_state_from_json(body[_SNAPSHOT_META_HEAD.size :], "snapshot metadata")
    return SnapshotMeta(index=index, term=term, conf_state=conf_state), data_crc


def check_snapshot_data(meta: SnapshotMeta, data: bytes, data_crc: int) -> bytes:
    if zlib.crc32(data) != data_crc:
        raise CorruptionError(meta.index, "snapshot data checksum mismatch")
    return data


def encode_boundary(index: int, term: int) -> bytes:
    return _seal(_BOUNDARY.pack(index, term))


def decode_boundary(value: bytes) -> tuple[int, int]:
    index, term = _BOUNDARY.unpack(_unseal(value, "compaction boundary"))
    return index, term
