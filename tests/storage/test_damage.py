"""Damaged storage is detected, named and refused, never silently cut and never a signal: each file
kind of a stopped node damaged each way, then `rmqc log verify/stats/dump/export` and `rmqc serve`
(real processes) on it. A crash's torn tail is the one thing that is still cut without a word."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rmqc.launcher import RMQC, free_ports
from rmqc.raft._types import ConfState, Entry, HardState
from rmqc.storage import (
    DATA_FILE_NAME,
    IDENTITY_FILE_NAME,
    LmdbStorage,
    StorageDamagedError,
    open_for_repair,
    verify_isolated,
)
from rmqc.storage._journal import JOURNAL_BYTES, JOURNAL_FILE_NAME

WRITES = 200
SNAPSHOT_STATE = b"controller state " * 400  # larger than a page: LMDB stores it on its own pages
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def killed_node(tmp_path: Path, name: str = "killed", moved_to_lmdb: int = 0) -> Path:
    """A data directory as kill -9 leaves it after WRITES acknowledged saves (the last
    `WRITES - moved_to_lmdb` of them still in the journal)."""
    source = tmp_path / f"{name}-live"
    storage = LmdbStorage(source)
    for index in range(1, WRITES + 1):
        storage.save(HardState(term=1, vote="n0", commit=index - 1), [Entry(index, 1, data=b"w%04d" % index * 20)])
        if index == moved_to_lmdb:  # a clean stop moves the journal's records into data.mdb
            storage.create_snapshot(index // 2, ConfState(voters=("n0",)), SNAPSHOT_STATE)
            storage.close()
            storage = LmdbStorage(source)
    copy = tmp_path / name
    shutil.copytree(source, copy)
    storage.close()
    return copy


def flip_journal_middle(data_dir: Path) -> None:
    journal = data_dir / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    used = len(data.rstrip(b"\0"))
    middle = used // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    journal.write_bytes(bytes(data))


def zero_journal_middle(data_dir: Path) -> None:
    journal = data_dir / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    used = len(data.rstrip(b"\0"))
    data[used // 3: used // 2] = bytes(used // 2 - used // 3)
    journal.write_bytes(bytes(data))


def flip_snapshot_data(data_dir: Path) -> None:
    """Flip bytes inside the stored snapshot's state (LMDB keeps it on an overflow page)."""
    data = bytearray((data_dir / DATA_FILE_NAME).read_bytes())
    at = data.index(SNAPSHOT_STATE) + len(SNAPSHOT_STATE) // 2
    data[at:at + 8] = bytes(byte ^ 0x55 for byte in data[at:at + 8])
    (data_dir / DATA_FILE_NAME).write_bytes(bytes(data))


def truncate(name: str, size: int) -> Callable[[Path], None]:
    def damage(data_dir: Path) -> None:
        os.truncate(data_dir / name, size)
    return damage


def remove_journal(data_dir: Path) -> None:
    (data_dir / JOURNAL_FILE_NAME).unlink()


def zero_data_pages(data_dir: Path) -> None:
    """Zero every page LMDB uses past its meta pages: its B-tree roots are gone."""
    size = (data_dir / DATA_FILE_NAME).stat().st_size
    with (data_dir / DATA_FILE_NAME).open("r+b") as data:
        data.seek(2 * PAGE_BYTES)
        data.write(bytes(size - 2 * PAGE_BYTES))


def zero_a_log_page(data_dir: Path) -> None:
    """Zero the leaf page that holds entry 100 (a page LMDB reaches only while reading the log)."""
    data = (data_dir / DATA_FILE_NAME).read_bytes()
    page = data.index(b"w0100" * 20) // PAGE_BYTES
    with (data_dir / DATA_FILE_NAME).open("r+b") as file:
        file.seek(page * PAGE_BYTES)
        file.write(bytes(PAGE_BYTES))


DAMAGE = {
    "journal: 16 bytes flipped in the middle": (flip_journal_middle, 0, "a valid record of generation"),
    "journal: a zeroed region in the middle": (zero_journal_middle, 0, "a valid record of generation 1 follows"),
    "journal: truncated to nothing": (truncate(JOURNAL_FILE_NAME, 0), 0, "the file is 0 bytes"),
    "journal: truncated mid-way": (truncate(JOURNAL_FILE_NAME, JOURNAL_BYTES // 2), 0, "truncated or overwritten"),
    "journal: deleted": (remove_journal, 0, "the file is missing"),
    "data.mdb: truncated to 24576 bytes": (truncate(DATA_FILE_NAME, 24576), WRITES, "the file was truncated"),
    "data.mdb: emptied": (truncate(DATA_FILE_NAME, 0), WRITES, "missing or empty"),
    "data.mdb: its pages zeroed": (zero_data_pages, WRITES, "LMDB finds it damaged: mdb_dbi_open: MDB_CORRUPTED"),
    "data.mdb: a log page zeroed": (zero_a_log_page, WRITES, "data.mdb is damaged"),
    "data.mdb: the snapshot's state flipped": (flip_snapshot_data, WRITES, "snapshot"),
}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("damaged")
    directories = {}
    for number, (kind, (damage, moved, _)) in enumerate(DAMAGE.items()):
        directories[kind] = killed_node(root, f"d{number}", moved_to_lmdb=moved)
        damage(directories[kind])
    return directories


def rmqc(*argv: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RMQC, *argv], capture_output=True, text=True, timeout=timeout_s)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_log_verify_names_the_damage_and_exits_1(damaged: dict[str, Path], kind: str) -> None:
    result = rmqc("log", "verify", str(damaged[kind]))
    assert result.returncode == 1, (kind, result.returncode, result.stdout, result.stderr)
    said = result.stdout + result.stderr
    assert DAMAGE[kind][2] in said, said
    assert "ok:" not in said


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_no_log_command_dies_of_a_signal(damaged: dict[str, Path], kind: str, tmp_path: Path) -> None:
    for argv in (("stats",), ("dump",), ("export", "--out", str(tmp_path / "out.jsonl"))):
        result = rmqc("log", *argv[:1], str(damaged[kind]), *argv[1:])
        assert result.returncode in (1, 2), (kind, argv, result.returncode, result.stderr)
        assert result.stderr.strip(), (kind, argv)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_serve_refuses_a_damaged_data_directory(damaged: dict[str, Path], kind: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    shutil.copytree(damaged[kind], data_dir)
    port = free_ports(1)[0]
    result = rmqc("serve", "--id", "n0", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir))
    assert result.returncode == 1, (kind, result.returncode, result.stdout, result.stderr[-2000:])
    assert "serving on" not in result.stdout
    assert DAMAGE[kind][2] in result.stderr and "--repair" in result.stderr, result.stderr[-2000:]


def test_the_issue_reproduction_loses_nothing_silently(tmp_path: Path) -> None:
    """200 acknowledged writes, kill -9, 16 bytes flipped mid-journal: refused with the offset and
    the first index that may be lost; before, replay stopped there and 101 entries were gone."""
    data_dir = killed_node(tmp_path)
    flip_journal_middle(data_dir)
    report = verify_isolated(data_dir)
    assert not report.ok and report.first_bad_index is not None
    assert 1 < report.first_bad_index <= WRITES
    assert f"entries from index {report.first_bad_index} on may be lost" in str(report.problem)
    with pytest.raises(StorageDamagedError, match="journal is damaged at byte"):
        LmdbStorage(data_dir)
    with LmdbStorage(data_dir, readonly=True) as storage:  # nothing was written over by the attempt
        assert storage.journal_replayed.damage is not None


def test_a_torn_last_record_is_still_the_crash_it_looks_like(tmp_path: Path) -> None:
    data_dir = killed_node(tmp_path)
    journal = data_dir / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    used = len(data.rstrip(b"\0"))
    data[used - 7: used] = bytes(7)  # the last record cut short
    journal.write_bytes(bytes(data))
    report = verify_isolated(data_dir)
    assert report.ok, report
    with LmdbStorage(data_dir) as storage:
        assert storage.last_index() == WRITES - 1


def test_a_damaged_identity_file_says_what_to_write(tmp_path: Path) -> None:
    data_dir = killed_node(tmp_path)
    (data_dir / IDENTITY_FILE_NAME).write_bytes(b'{"node_id": "n0", "gro')
    port = free_ports(1)[0]
    result = rmqc("serve", "--id", "n0", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir))
    assert result.returncode == 1
    assert f"{data_dir / IDENTITY_FILE_NAME} is damaged" in result.stderr, result.stderr[-2000:]
    assert '"node_id"' in result.stderr and '"group"' in result.stderr


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_open_for_repair_keeps_the_damaged_files_and_a_true_prefix(damaged: dict[str, Path], kind: str,
                                                                  tmp_path: Path) -> None:
    """--repair on each kind: the damaged files are set aside (nothing deleted), what is kept is a
    prefix of what the node held (a damaged journal's good records) or nothing, the repair is
    recorded, and the directory then verifies."""
    data_dir = tmp_path / "node"
    shutil.copytree(damaged[kind], data_dir)
    storage, started = open_for_repair(data_dir)
    try:
        assert started is not None and started.evidence.parent == data_dir
        assert storage.repair_reason() == started.reason
        assert started.reason in (started.evidence / "reason.txt").read_text()
        if kind != "journal: deleted":
            assert len(list(started.evidence.iterdir())) > 1, "the damaged files are kept"
        if kind.startswith("journal"):
            assert storage.last_index() <= WRITES
            kept = storage.entries(1, storage.last_index() + 1) if storage.last_index() else []
            assert [e.data for e in kept] == [b"w%04d" % i * 20 for i in range(1, storage.last_index() + 1)]
        else:
            assert storage.last_index() == 0, "the log is given up: the leader sends it again"
    finally:
        storage.close()
    assert verify_isolated(data_dir).ok
    again, restarted = open_for_repair(data_dir)  # a restart before the repair ended: it goes on
    with again:
        assert restarted is None and again.repair_reason() == started.reason
