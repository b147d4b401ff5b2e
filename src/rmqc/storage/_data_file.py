"""Checks of `data.mdb` made before LMDB maps it.

LMDB maps the file and trusts it: a file shorter than its meta page says (a truncated copy, a
filesystem that lost its tail) makes the first read past the end a SIGBUS, which kills the process
without a word. So the meta pages are read with plain reads first: both must carry LMDB's magic
and version (one may be torn by a crash in the middle of a commit, and LMDB then uses the other),
and the file must reach the last page that the newest valid meta page names.

The layout read here is LMDB 0.9's (the one python-lmdb bundles): each meta page is a 16-byte page
header, then MDB_meta: magic (u32), version (u32), address (pointer), map size (size_t), the free
and main databases' MDB_db records (48 bytes each; the free one's first u32 holds the page size),
the last page number (u64) and the transaction id (u64). Native byte order, 64-bit.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ._errors import StorageDamagedError

_MAGIC = 0xBEEFC0DE
_DATA_VERSION = 1
_PAGE_HEADER_BYTES = 16
# magic, version, address, map size, free db's md_pad (the page size), then at fixed offsets
# past the two 48-byte MDB_db records: last page number and transaction id
_META_HEAD = struct.Struct("=IIQQI")
_META_TAIL = struct.Struct("=QQ")
_META_TAIL_OFFSET = _PAGE_HEADER_BYTES + 4 + 4 + 8 + 8 + 2 * 48
_MIN_PAGE_BYTES = 512
_MAX_PAGE_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class MetaPage:
    page_bytes: int
    last_page: int
    txn_id: int


def check_data_file(path: Path, journal_exists: bool) -> None:
    """Raise StorageDamagedError if `path` cannot be mapped safely, or is missing or empty while
    the journal, created only after LMDB first committed, exists."""
    if journal_exists and (not path.exists() or path.stat().st_size == 0):
        raise StorageDamagedError(path, "it is missing or empty, but the journal beside it exists (LMDB had "
                                        "committed before the journal was created): the file was lost or truncated")
    if not path.exists():
        return
    try:
        with path.open("rb") as source:
            size = os.fstat(source.fileno()).st_size
            first = source.read(_MAX_PAGE_BYTES)
            meta0 = _read_meta(first)
            page_bytes = meta0.page_bytes if meta0 else os.sysconf("SC_PAGE_SIZE")  # as LMDB chose it
            source.seek(page_bytes)
            meta1 = _read_meta(source.read(page_bytes))
    except OSError as error:
        raise StorageDamagedError(path, f"it cannot be read: {error}") from error
    newest = max((meta for meta in (meta0, meta1) if meta is not None), key=lambda m: m.txn_id, default=None)
    if newest is None:
        return  # not an LMDB file at all (or both meta pages gone): LMDB's own open refuses it
    needed = (newest.last_page + 1) * newest.page_bytes
    if size < needed:
        raise StorageDamagedError(
            path, f"it is {size} bytes but its meta page (transaction {newest.txn_id}) uses pages up to "
                  f"{newest.last_page}, {needed} bytes: the file was truncated", offset=size)


def _read_meta(page: bytes) -> MetaPage | None:
    if len(page) < _META_TAIL_OFFSET + _META_TAIL.size:
        return None
    magic, version, _address, _map_size, page_bytes = _META_HEAD.unpack_from(page, _PAGE_HEADER_BYTES)
    if magic != _MAGIC or version != _DATA_VERSION or not _MIN_PAGE_BYTES <= page_bytes <= _MAX_PAGE_BYTES:
        return None
    last_page, txn_id = _META_TAIL.unpack_from(page, _META_TAIL_OFFSET)
    return MetaPage(page_bytes, last_page, txn_id)

