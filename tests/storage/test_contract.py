"""The shared storage contract, run against both storages."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqc.raft._memory_storage import MemoryStorage
from rmqc.raft._storage import Storage
from rmqc.storage import LmdbStorage
from rmqc.storage._journal import JOURNAL_FILE_NAME
from rmqc.testing.storage_contract import (
    PersistentStorageContract,
    StorageContract,
    StorageFactory,
)


class TestMemoryStorageContract(StorageContract):
    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        return MemoryStorage


class TestLmdbStorageContract(PersistentStorageContract):
    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        # A small map so that the map-growth path runs inside the contract too.
        return lambda: LmdbStorage(tmp_path / "node", map_size_bytes=256 << 10, sync=False)


class _KilledLmdbStorage(LmdbStorage):
    """An LmdbStorage whose close() is a kill -9: its files are first copied as they are (what the
    disk holds once the page cache is written back), journal records not yet moved into LMDB
    included; the next open reads the copy."""

    def __init__(self, path: Path, copies: Iterator[Path]) -> None:
        super().__init__(path, map_size_bytes=256 << 10, sync=False)
        self._copies = copies
        self.killed_to: Path | None = None

    def close(self) -> None:
        if self.killed_to is None:
            self.killed_to = next(self._copies)
            self.killed_to.mkdir()
            for name in ("data.mdb", JOURNAL_FILE_NAME):
                shutil.copyfile(self.path / name, self.killed_to / name)
        super().close()


class TestLmdbStorageKilledContract(PersistentStorageContract):
    """The contract again, every restart a kill -9 (the journal's records replayed from the copy)."""

    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        copies = (tmp_path / f"killed-{n}" for n in itertools.count())
        opened: list[_KilledLmdbStorage] = []

        def open_latest() -> Storage:
            path = opened[-1].killed_to if opened and opened[-1].killed_to else tmp_path / "node"
            opened.append(_KilledLmdbStorage(path, copies))
            return opened[-1]

        return open_latest
