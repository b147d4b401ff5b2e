"""The shared storage contract, run against both storages."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqc.raft._memory_storage import MemoryStorage
from rmqc.storage import LmdbStorage
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
