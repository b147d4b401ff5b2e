"""A full disk, a failing write and a stalled fsync, at the storage layer: on a real small filesystem where the test
may mount one (root), else through the test-only fault hook (rmqc.testing.disk)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rmqc.chaos._faults import libfaketime
from rmqc.raft._types import Entry, HardState
from rmqc.storage import (
    FAULT_FILE_ENV,
    FAULT_STALL_WORD,
    LmdbStorage,
    StorageFullError,
    StorageWriteFailed,
)
from rmqc.testing.disk import small_disk

PAYLOAD = os.urandom(900)
# A 4 MiB filesystem holds a few thousand such entries: the bound of any loop waiting for "full".
MAX_ENTRIES = 50_000


def save_one(storage: LmdbStorage, index: int) -> None:
    storage.save(HardState(term=1, vote="n0", commit=index - 1), [Entry(index=index, term=1, data=PAYLOAD)])


def test_a_full_disk_refuses_the_write_keeps_what_was_stored_and_takes_it_once_space_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with small_disk(tmp_path / "disk", size_mb=4) as disk:
        for name, value in disk.env.items():
            monkeypatch.setenv(name, value)
        storage = LmdbStorage(disk.root / "data")
        try:
            for index in range(1, 101):
                save_one(storage, index)
            disk.fill()
            index = 101
            with pytest.raises(StorageFullError, match="no space left on the device"):
                while index < MAX_ENTRIES:  # LMDB first reuses the free pages its file already has
                    save_one(storage, index)
                    index += 1
            stored = storage.last_index()
            assert stored == index - 1 and storage.entries(stored, stored + 1)[0].data == PAYLOAD
            with pytest.raises(StorageFullError) as full:
                save_one(storage, index)  # still full: refused again, nothing half-written
            with pytest.raises(StorageFullError):
                storage.ensure_space(full.value.needed_bytes or 0)
            disk.free()
            storage.ensure_space(full.value.needed_bytes or 0)  # how a node finds out space is back
            save_one(storage, index)  # the same write, once space is back
            assert storage.last_index() == index
            assert storage.verify().ok
        finally:
            storage.close()
        with LmdbStorage(disk.root / "data", readonly=True) as reopened:
            assert reopened.last_index() == index and reopened.verify().ok


@pytest.mark.parametrize("fault", ["eio", "erofs"])
def test_a_failing_write_is_a_write_failure_not_a_full_disk_and_stores_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    with small_disk(tmp_path / "disk", hook=True) as disk:
        for name, value in disk.env.items():
            monkeypatch.setenv(name, value)
        with LmdbStorage(disk.root / "data") as storage:
            save_one(storage, 1)
            disk.fail_writes(fault)
            expected = f"write to the data directory {disk.root / 'data'} failed"
            with pytest.raises(StorageWriteFailed, match=expected) as failure:
                save_one(storage, 2)
            assert not isinstance(failure.value, StorageFullError)
        with LmdbStorage(disk.root / "data", readonly=True) as reopened:
            assert reopened.last_index() == 1 and reopened.verify().ok


def test_a_stalled_disk_holds_the_commit_until_released_and_then_stores_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`stall` in the control file holds a commit (its fsync) in place, as a hung disk does; the
    write lands once the word is gone. Reads go on meanwhile (LMDB readers never wait for a writer)."""
    control = tmp_path / "faults"
    monkeypatch.setenv(FAULT_FILE_ENV, str(control))
    with LmdbStorage(tmp_path / "data") as storage:
        save_one(storage, 1)
        control.write_text(FAULT_STALL_WORD)
        saved = threading.Event()
        writer = threading.Thread(target=lambda: (save_one(storage, 2), saved.set()))
        writer.start()
        try:
            assert not saved.wait(0.3)  # held
            assert storage.last_index() == 1  # readers are not held
        finally:
            control.write_text("")
            writer.join(5)
        assert saved.is_set() and storage.last_index() == 2


HOLD_UNDER_FAKETIME = """
import sys, threading
from pathlib import Path
from rmqc.storage._faults import FaultHook
control = Path(sys.argv[1])
control.write_text("stall")
threading.Timer(0.2, control.write_text, [""]).start()
FaultHook(control).before_commit()
print("released")
"""


@pytest.mark.skipif(libfaketime() is None, reason="needs libfaketime (Debian package faketime)")
def test_a_held_commit_survives_libfaketime(tmp_path: Path) -> None:
    """Regression (a chaos run with clock and disk-stall): under libfaketime with the real monotonic
    clock, time.sleep fails with EINVAL, and a node whose commit was held stopped at once."""
    (tmp_path / "clock").write_text("+0\n")
    env = {**os.environ, "LD_PRELOAD": str(libfaketime()), "FAKETIME_TIMESTAMP_FILE": str(tmp_path / "clock"),
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    done = subprocess.run([sys.executable, "-c", HOLD_UNDER_FAKETIME, str(tmp_path / "faults")], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "released", done.stderr
