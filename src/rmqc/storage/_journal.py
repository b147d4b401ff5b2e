"""The journal in front of LMDB: a save is one write and one fdatasync (issue 21).

An LMDB commit flushes twice (its data pages, then its meta page through an O_DSYNC descriptor),
and three nodes on one disk wait on each other's journal commits. A save that only appends
entries (and a hard state) is instead written as one record into this file, which was filled with
zeros when created: the write changes no file size or block map, so `fdatasync` has no metadata to
commit. Once the file is full (or before any other kind of write: a snapshot, a conflicting
suffix, a compaction), LmdbStorage moves the records' contents into LMDB in one ordinary
transaction that also raises the journal's generation, then writes over the file from its start.

A record: magic `RJ01`, payload length (u32), generation (u64), CRC32 of generation and payload
(u32), then the payload: a flag byte (1: a hard state follows), the hard state as _codec seals
it (u32 length first), the entry count (u32), and each entry as `index (u64) | length (u32) |`
the sealed log value of _codec. Replay reads records of the current generation from the start and
stops at the first that is not one (zeros, a torn write, an older generation's leftovers): only
a record whose fdatasync returned was ever acknowledged, and every record after a torn one was
written after it.

What replay may cut is only the tail a crash can leave: each record is flushed before the next is
written, so at most the last record of a generation is torn, and nothing of that generation follows
it. A record that fails its check with a valid record of the same generation anywhere after it is
damage (a flipped bit, a lost or zeroed write), not a crash: the records after it were acknowledged,
so replay reports it (`JournalContents.damage`) and the storage refuses to open for writing. So does
a journal of the wrong size (it is created full size, durably, before its generation is first
committed) or a missing one once LMDB records a generation (see LmdbStorage's open).
"""

from __future__ import annotations

import errno
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rmqc.errors import CorruptionError
from rmqc.raft import Entry, HardState

from . import _codec
from ._errors import StorageDamagedError, StorageFullError, StorageWriteFailed

JOURNAL_FILE_NAME = "journal"
# Large enough that moving its records into LMDB is rare (about 4,000 controller writes), small
# enough that the move (one LMDB transaction) stays a few milliseconds and small disks keep room.
JOURNAL_BYTES = 1 << 20
MAGIC = b"RJ01"
_HEADER = struct.Struct("<4sIQI")
_U32 = struct.Struct("<I")
_ENTRY_HEAD = struct.Struct("<QI")
_ZEROS_CHUNK_BYTES = 1 << 20


@dataclass
class JournalContents:
    """What the records of the current generation add to LMDB: entries after its last index and
    the newest hard state; `stopped` says why replay ended (None: at the end of the file)."""

    hard_state: HardState | None = None
    entries: list[Entry] = field(default_factory=list)
    records: int = 0
    stopped: str | None = None
    damage: JournalDamage | None = None


@dataclass(frozen=True)
class JournalDamage:
    """Where the journal failed a check that a crash cannot explain, and what was found there."""

    offset: int  # byte offset in the file
    next_index: int  # the first log index the damage may have taken
    what: str

    def error(self, path: Path) -> StorageDamagedError:
        return StorageDamagedError(path, self._what_and_loss(), self.offset)

    def describe(self, path: Path) -> str:
        """One line: the file, the offset, what was found and what may be lost."""
        return f"{path} is damaged at byte {self.offset}: {self._what_and_loss()}"

    def _what_and_loss(self) -> str:
        return self.what + (f"; entries from index {self.next_index} on may be lost" if self.next_index else "")


def encode_record(generation: int, hard_state: HardState | None, entries: Sequence[Entry]) -> bytes:
    parts = [b"\x01" + _U32.pack(len(sealed)) + sealed if (sealed := _hard_state_bytes(hard_state)) else b"\x00",
             _U32.pack(len(entries))]
    for entry in entries:
        value = _codec.encode_entry_value(entry)
        parts.append(_ENTRY_HEAD.pack(entry.index, len(value)) + value)
    payload = b"".join(parts)
    crc = zlib.crc32(payload, zlib.crc32(generation.to_bytes(8, "little")))
    return _HEADER.pack(MAGIC, len(payload), generation, crc) + payload


def _hard_state_bytes(hard_state: HardState | None) -> bytes:
    return b"" if hard_state is None else _codec.encode_hard_state(hard_state)


def decode_records(data: bytes, generation: int) -> tuple[list[tuple[HardState | None, list[Entry]]], int, str | None]:
    """The records of `generation` from the start of `data`, the offset after the last one, and why
    reading stopped (None: the file ended exactly there)."""
    records: list[tuple[HardState | None, list[Entry]]] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        magic, length, record_generation, crc = _HEADER.unpack_from(data, offset)
        if magic != MAGIC:
            return records, offset, "no record here" if any(data[offset:offset + _HEADER.size]) else None
        if record_generation != generation:
            return records, offset, f"a record of generation {record_generation} (an earlier file's)"
        payload = _checked_payload(data, offset, length, generation, crc)
        if payload is None:
            return records, offset, "a torn or damaged record"
        records.append(_decode_payload(payload))
        offset += _HEADER.size + length
    return records, offset, None


def _checked_payload(data: bytes, offset: int, length: int, generation: int, crc: int) -> bytes | None:
    """The payload of the record whose header is at `offset`, if all of it is there and its checksum holds."""
    payload = data[offset + _HEADER.size: offset + _HEADER.size + length]
    if len(payload) != length or zlib.crc32(payload, zlib.crc32(generation.to_bytes(8, "little"))) != crc:
        return None
    return payload


def next_valid_record(data: bytes, start: int, generation: int) -> int | None:
    """The offset of the first record of `generation` at or after `start` whose checksum holds."""
    offset = data.find(MAGIC, start)
    while offset >= 0:
        if offset + _HEADER.size <= len(data):
            _magic, length, record_generation, crc = _HEADER.unpack_from(data, offset)
            if record_generation == generation and _checked_payload(data, offset, length, generation, crc):
                return offset
        offset = data.find(MAGIC, offset + 1)
    return None


def _decode_payload(payload: bytes) -> tuple[HardState | None, list[Entry]]:
    offset = 1
    hard_state = None
    if payload[0] == 1:
        (length,) = _U32.unpack_from(payload, offset)
        hard_state = _codec.decode_hard_state(payload[offset + 4: offset + 4 + length])
        offset += 4 + length
    (count,) = _U32.unpack_from(payload, offset)
    offset += 4
    entries = []
    for _ in range(count):
        index, length = _ENTRY_HEAD.unpack_from(payload, offset)
        offset += _ENTRY_HEAD.size
        entries.append(_codec.decode_entry(_codec.index_key(index), payload[offset: offset + length]))
        offset += length
    return hard_state, entries


class Journal:
    """The journal file of one data directory; appends are written at `offset` and flushed."""

    def __init__(self, directory: Path, generation: int) -> None:
        self.path = directory / JOURNAL_FILE_NAME
        self.generation = generation
        self.offset = 0
        self._fd = -1

    def open_for_writes(self) -> None:
        """After replay (and after LMDB took what replay found): a file of JOURNAL_BYTES to write
        in, created full of zeros if missing or of another size."""
        try:
            if not self.path.exists() or self.path.stat().st_size != JOURNAL_BYTES:
                _create_zeroed(self.path)
                self.offset = 0
            self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            if error.errno == errno.ENOSPC:
                raise StorageFullError(f"no space left on the device of {self.path} for the journal "
                                       f"({JOURNAL_BYTES} bytes)", JOURNAL_BYTES) from error
            raise StorageWriteFailed(f"creating the journal {self.path} failed: {error}") from error

    def replay(self, last_index: int) -> JournalContents:
        """The records of the current generation, as they extend a log ending at `last_index`; the
        next append goes after the last of them."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return JournalContents()
        records, self.offset, stopped = decode_records(data, self.generation)
        contents = JournalContents(records=len(records), stopped=stopped)
        expected = last_index + 1
        contents.damage = self._damage(data, records, stopped, last_index)
        for number, (hard_state, entries) in enumerate(records, 1):
            if entries and entries[0].index != expected:
                # its checksum holds, so we wrote it: only a bug makes a journal record skip or
                # overlap the log, and what it held must not be guessed at
                raise CorruptionError(entries[0].index, f"journal record {number} of generation {self.generation} "
                                                        f"starts at index {entries[0].index}, {expected} was next")
            contents.hard_state = hard_state or contents.hard_state
            contents.entries += entries
            expected += len(entries)
        return contents

    def _damage(self, data: bytes, records: list[tuple[HardState | None, list[Entry]]], stopped: str | None,
                last_index: int) -> JournalDamage | None:
        next_index = last_index + 1 + sum(len(entries) for _, entries in records)
        if len(data) != JOURNAL_BYTES:
            return JournalDamage(min(len(data), self.offset), next_index,
                                 f"the file is {len(data)} bytes, not the {JOURNAL_BYTES} it was created with "
                                 "(truncated or overwritten)")
        follower = next_valid_record(data, self.offset + 1, self.generation)
        if follower is None:
            return None  # zeros after the last record, or a torn tail: the one record a crash may cut
        found = stopped or "zeros where a record was expected"
        return JournalDamage(self.offset, next_index,
                             f"{found}, but a valid record of generation {self.generation} follows at byte "
                             f"{follower} (only the last record may be torn by a crash)")

    def check_present(self, last_index: int) -> JournalDamage | None:
        """A missing journal is damage once a generation was committed: the file was created
        (durably) before that, and only a deletion removes it."""
        if self.generation > 0 and not self.path.exists():
            return JournalDamage(0, last_index + 1, "the file is missing (it existed when generation "
                                                    f"{self.generation} was committed)")
        return None

    @property
    def writable(self) -> bool:
        return self._fd >= 0

    def fits(self, record_bytes: int) -> bool:
        return self.offset + record_bytes <= JOURNAL_BYTES

    def append(self, record: bytes) -> None:
        """Write one record and flush it; StorageWriteFailed if either fails (never retried: the
        kernel may have dropped the pages it had accepted)."""
        try:
            written = os.pwrite(self._fd, record, self.offset)
            if written != len(record):
                raise OSError(f"short write ({written} of {len(record)} bytes)")
            os.fdatasync(self._fd)
        except OSError as error:
            raise StorageWriteFailed(f"write to the journal of the data directory {self.path.parent} failed: "
                                    f"{error}") from error
        self.offset += len(record)

    def restart(self, generation: int) -> None:
        """LMDB now holds everything written so far, under `generation` (committed): write from the
        start again; the old records no longer replay (their generation is older)."""
        self.generation = generation
        self.offset = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _create_zeroed(path: Path) -> None:
    """A journal file of JOURNAL_BYTES zeros, durable (file and directory) before first use."""
    temporary = path.with_suffix(".new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        zeros = bytes(_ZEROS_CHUNK_BYTES)
        for _ in range(JOURNAL_BYTES // _ZEROS_CHUNK_BYTES):
            os.write(fd, zeros)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
