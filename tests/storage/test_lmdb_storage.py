"""LmdbStorage beyond the shared contract: map growth, corruption found in real files, verify,
stats, batched reads, interrupted compaction, read-only opening and the node lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from rmqc.errors import CompactedError, CorruptionError, StorageError
from rmqc.raft._types import ConfState, Entry, HardState
from rmqc.storage import (
    DATA_FILE_NAME,
    LmdbStorage,
    LogGapError,
    NodeLockedError,
    NotAStorageError,
    NotCoveredBySnapshotError,
    _codec,
    acquire_node_lock,
    is_locked_by_live_node,
    live_lock_holder,
)
from rmqc.testing.storage_contract import make_entries


def known_payload(index: int) -> bytes:
    return f"<<payload-{index:06d}>>".encode() * 3


def write_log(path: Path, count: int, **kwargs: object) -> None:
    entries = [Entry(i, 1 + i // 50, data=known_payload(i)) for i in range(1, count + 1)]
    with LmdbStorage(path, sync=False, **kwargs) as storage:  # type: ignore[arg-type]
        storage.save(HardState(term=entries[-1].term, commit=count), entries)


def flip_byte_of(path: Path, needle: bytes, offset_in_needle: int = 5) -> None:
    """Flip one byte in every copy of `needle` (stale copies may sit in unused page space)."""
    data_file = path / DATA_FILE_NAME
    raw = bytearray(data_file.read_bytes())
    at = raw.find(needle)
    assert at >= 0, f"{needle!r} not found in {data_file}"
    while at >= 0:
        raw[at + offset_in_needle] ^= 0x40
        at = raw.find(needle, at + 1)
    data_file.write_bytes(bytes(raw))


def raw_db(path: Path, name: bytes) -> tuple[lmdb.Environment, lmdb._Database]:
    env = lmdb.open(str(path), max_dbs=8)
    return env, env.open_db(name)


# ----- map growth -----


def test_map_full_grows_the_map_without_losing_the_write(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, map_size_bytes=64 << 10, sync=False) as storage:
        initial_map = storage.map_size_bytes
        big = [Entry(i, 1, data=bytes(2000)) for i in range(1, 2001)]
        storage.save(HardState(term=1, commit=2000), big)
        assert storage.map_size_bytes > initial_map
        assert storage.last_index() == 2000
    with LmdbStorage(tmp_path, map_size_bytes=64 << 10, sync=False) as reopened:
        assert reopened.entries(1, 2001) == big


def test_map_stops_growing_at_its_maximum(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, map_size_bytes=64 << 10, sync=False, max_map_size_bytes=256 << 10) as storage:
        storage.save(None, make_entries(1, 3, 1))
        with pytest.raises(StorageError, match="maximum"):
            # more than the journal holds (JOURNAL_BYTES), so it goes to LMDB itself
            storage.save(None, [Entry(i, 1, data=bytes(4000)) for i in range(3, 400)])
        assert storage.last_index() == 2  # the refused write left nothing behind


# ----- corruption in a real file -----


def test_flipped_payload_byte_is_reported_with_its_index(tmp_path: Path) -> None:
    write_log(tmp_path, 300)
    flip_byte_of(tmp_path, known_payload(137))
    with LmdbStorage(tmp_path, sync=False) as storage:
        assert storage.entries(1, 137)[-1].index == 136  # entries before it read fine
        with pytest.raises(CorruptionError) as caught:
            storage.entries(100, 200)
        assert caught.value.index == 137
        assert "checksum" in caught.value.what
        with pytest.raises(CorruptionError, match="index 137"):
            storage.term(137)
        report = storage.verify()
    assert not report.ok
    assert (report.first_bad_index, report.entries_checked) == (137, 136)


def test_corrupt_last_entry_does_not_prevent_opening(tmp_path: Path) -> None:
    write_log(tmp_path, 40)
    flip_byte_of(tmp_path, known_payload(40))
    with LmdbStorage(tmp_path, sync=False) as storage:
        assert storage.last_index() == 40
        with pytest.raises(CorruptionError, match="index 40"):
            storage.term(40)
        assert storage.verify().first_bad_index == 40


def test_missing_entry_is_a_gap(tmp_path: Path) -> None:
    write_log(tmp_path, 100)
    env, log_db = raw_db(tmp_path, b"log")
    with env.begin(write=True) as txn:
        assert txn.delete(_codec.index_key(61), db=log_db)
    env.close()
    with LmdbStorage(tmp_path, sync=False) as storage:
        with pytest.raises(CorruptionError) as caught:
            storage.entries(50, 70)
        assert caught.value.index == 61
        assert "missing" in caught.value.what
        assert storage.verify().first_bad_index == 61


def test_term_going_backwards_is_reported(tmp_path: Path) -> None:
    write_log(tmp_path, 200)  # terms rise every 50 entries
    env, log_db = raw_db(tmp_path, b"log")
    with env.begin(write=True) as txn:
        rewritten = Entry(160, 1, data=known_payload(160))  # valid checksum, old term
        txn.put(_codec.index_key(160), _codec.encode_entry_value(rewritten), db=log_db)
    env.close()
    with LmdbStorage(tmp_path, sync=False) as storage:
        with pytest.raises(CorruptionError, match="term goes backwards"):
            storage.entries(150, 170)
        report = storage.verify()
    assert (report.first_bad_index, report.problem) == (160, "term goes backwards (4 -> 1)")


def test_corrupt_snapshot_data_is_reported(tmp_path: Path) -> None:
    marker = b"SNAPSHOT-DATA-MARKER" * 4
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.save(None, make_entries(1, 10, 1))
        storage.create_snapshot(9, ConfState(voters=("n1",)), marker)
    flip_byte_of(tmp_path, marker)
    with LmdbStorage(tmp_path, sync=False) as storage:
        with pytest.raises(CorruptionError, match="snapshot data checksum"):
            storage.snapshot()
        assert storage.verify().first_bad_index == 9


def test_corrupt_hard_state_is_reported(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.save(HardState(term=3, vote="node-with-a-findable-name", commit=0), [])
    flip_byte_of(tmp_path, b"node-with-a-findable-name")
    with LmdbStorage(tmp_path, sync=False) as storage:
        with pytest.raises(CorruptionError, match="hard state checksum"):
            storage.initial_state()
        assert storage.verify().problem == "hard state checksum mismatch"


# ----- verify, stats, batched reads -----


def test_verify_clean_log(tmp_path: Path) -> None:
    write_log(tmp_path, 500)
    with LmdbStorage(tmp_path, sync=False) as storage:
        report = storage.verify()
    assert report.ok and report.entries_checked == 500


def test_verify_reports_commit_beyond_the_log(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.save(HardState(term=1, commit=9), make_entries(1, 5, 1))
        report = storage.verify()
    assert report.first_bad_index == 9
    assert "beyond last entry 4" in (report.problem or "")


def test_stats(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.save(HardState(term=3, commit=30), make_entries(1, 21, 2) + make_entries(21, 41, 3))
        storage.save(None, [Entry(41, 3, type=1, data=b"conf")])  # type: ignore[arg-type]
        storage.create_snapshot(30, ConfState(voters=("n1",)), b"s")
        storage.compact(10)
        stats = storage.stats()
    assert (stats.first_index, stats.last_index, stats.entry_count) == (11, 41, 31)
    assert (stats.snapshot_index, stats.snapshot_term) == (30, 3)
    assert (stats.first_term, stats.last_term) == (2, 3)
    assert stats.entries_by_type == {"conf_change": 1, "normal": 30}
    assert stats.bytes_on_disk == (tmp_path / DATA_FILE_NAME).stat().st_size
    assert stats.used_pages > 0 and stats.free_pages >= 0
    assert (stats.hard_state_term, stats.hard_state_commit) == (3, 30)


def test_iter_entries_crosses_batches(tmp_path: Path) -> None:
    write_log(tmp_path, 1000)
    with LmdbStorage(tmp_path, sync=False) as storage:
        indexes = [e.index for e in storage.iter_entries(5, 900, batch_entries=64)]
        whole = list(storage.iter_entries(batch_entries=300))
    assert indexes == list(range(5, 900))
    assert [e.data for e in whole] == [known_payload(i) for i in range(1, 1001)]


def test_append_of_non_consecutive_entries_is_refused(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, sync=False) as storage:
        with pytest.raises(LogGapError, match="not consecutive at 3"):
            storage.save(None, [Entry(1, 1), Entry(2, 1), Entry(4, 1)])
        assert storage.last_index() == 0


def test_compact_refuses_what_no_snapshot_covers(tmp_path: Path) -> None:
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.save(None, make_entries(1, 10, 1))
        with pytest.raises(NotCoveredBySnapshotError, match="only covers up to 0"):
            storage.compact(3)


# ----- compaction in batches -----


def test_compaction_interrupted_after_the_boundary_is_finished_on_open(tmp_path: Path) -> None:
    write_log(tmp_path, 300)
    env, meta_db = raw_db(tmp_path, b"snapshot_meta")
    with env.begin(write=True) as txn:  # what a crash right after writing the boundary leaves
        txn.put(b"boundary", _codec.encode_boundary(250, 6), db=meta_db)
    env.close()
    with LmdbStorage(tmp_path, sync=False) as storage:
        assert (storage.first_index(), storage.term(250)) == (251, 6)
        assert [r[0] for r in storage.raw_log_records()] == [
            _codec.index_key(i) for i in range(251, 301)
        ]
        assert storage.verify().ok


def test_large_compaction_runs_in_several_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqc.storage import _lmdb_storage

    monkeypatch.setattr(_lmdb_storage, "SWEEP_BATCH_ENTRIES", 7)
    write_log(tmp_path, 100)
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.create_snapshot(90, ConfState(), b"s")
        storage.compact(85)
        assert storage.first_index() == 86
        assert len(list(storage.raw_log_records())) == 15


def test_a_sweep_in_batches_leaves_the_entries_before_the_boundary(tmp_path: Path) -> None:
    write_log(tmp_path, 100)
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.create_snapshot(90, ConfState(), b"s")
        storage.compact(85, sweep=False)
        assert storage.first_index() == 86  # gone for readers before the sweep
        assert [storage.sweep_batch(40), storage.sweep_batch(40), storage.sweep_batch(40)] == [40, 40, 5]
        assert [r[0] for r in storage.raw_log_records()] == [_codec.index_key(i) for i in range(86, 101)]


@pytest.mark.parametrize("read", ["entries", "term"])
def test_a_read_overtaken_by_a_compaction_in_another_thread_is_compacted_not_corrupt(
        tmp_path: Path, read: str) -> None:
    # A node compacts in a worker thread while Raft reads in the event loop's: the boundary may
    # move and the sweep delete the entries between a read's bounds check and its transaction.
    write_log(tmp_path, 100)
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.create_snapshot(90, ConfState(), b"s")
        check_range, read_term = storage._check_range, storage._read

        def compact_after_the_check(lo: int, hi: int) -> None:
            check_range(lo, hi)
            storage.compact(85)

        def compact_before_the_read(fn: object) -> object:
            storage._read = read_term  # type: ignore[method-assign]  # once: compact reads too
            storage.compact(85)
            return read_term(fn)  # type: ignore[arg-type]

        if read == "entries":
            storage._check_range = compact_after_the_check  # type: ignore[method-assign]
            with pytest.raises(CompactedError):
                storage.entries(10, 20)
        else:
            storage._read = compact_before_the_read  # type: ignore[method-assign]
            with pytest.raises(CompactedError):
                storage.term(10)
            assert storage.term(85) == 2  # the new boundary's term, no longer stored as an entry


def test_a_snapshot_read_while_another_thread_replaces_it_is_one_snapshot(tmp_path: Path) -> None:
    write_log(tmp_path, 100)
    with LmdbStorage(tmp_path, sync=False) as storage:
        storage.create_snapshot(50, ConfState(), b"older")
        cached = storage._snapshot
        storage.create_snapshot(90, ConfState(), b"newer")
        storage._snapshot = cached  # the writer thread committed but has not updated the cache yet
        snapshot = storage.snapshot()
        assert (snapshot.meta.index, snapshot.data) == (90, b"newer")


# ----- read-only opening -----


def test_readonly_reads_while_a_writer_is_open(tmp_path: Path) -> None:
    # LMDB allows one environment handle per file and process, so the reader is another process.
    reader = (
        "import sys\n"
        "from rmqc.storage import LmdbStorage\n"
        "with LmdbStorage(sys.argv[1], readonly=True) as s:\n"
        "    print(s.last_index(), [e.data.decode() for e in s.entries(1, s.last_index() + 1)])\n"
        "    try:\n"
        "        s.save(None, [])\n"
        "        s.save_conf_state(s.initial_state()[1])\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    with LmdbStorage(tmp_path, sync=False) as writer:
        writer.save(HardState(term=1, commit=2), make_entries(1, 3, 1))
        done = subprocess.run(
            [sys.executable, "-c", reader, str(tmp_path)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2 ['e1t1....', 'e2t1....']"
    assert lines[1].startswith("StorageError") and "read-only" in lines[1]


def test_readonly_on_an_empty_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(NotAStorageError, match="no rmqc log"):
        LmdbStorage(tmp_path, readonly=True)


# ----- node lock -----


def test_node_lock(tmp_path: Path) -> None:
    assert not is_locked_by_live_node(tmp_path)
    with acquire_node_lock(tmp_path):
        assert is_locked_by_live_node(tmp_path)
        assert live_lock_holder(tmp_path) == os.getpid()
        with pytest.raises(NodeLockedError, match=f"PID {os.getpid()}"):
            acquire_node_lock(tmp_path)
    assert not is_locked_by_live_node(tmp_path)
    assert live_lock_holder(tmp_path) is None


# ----- threads: readers while the map grows -----


def test_readers_in_other_threads_while_the_map_grows(tmp_path: Path) -> None:
    """The Trio server saves from a worker thread while the Raft core reads: a map resize must
    wait for open read transactions instead of remapping under them."""
    import threading
    import time

    storage = LmdbStorage(tmp_path, map_size_bytes=64 << 10, sync=False)
    storage.save(None, [Entry(1, 1, data=known_payload(1))])
    stop = threading.Event()
    failures: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                last = storage.last_index()
                entries = storage.entries(max(1, last - 20), last + 1)
                assert [e.index for e in entries] == list(range(entries[0].index, last + 1))
                reads[0] += 1
                time.sleep(0)  # hand the GIL over: two spinning readers could starve the writer for minutes
        except BaseException as exc:  # reported to the test thread below
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for lo in range(2, 1502, 100):
            storage.save(None, [Entry(i, 1, data=known_payload(i) * 20) for i in range(lo, lo + 100)])
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not failures, failures
    assert storage.map_size_bytes >= 1 << 20  # it did grow, several times
    assert reads[0] > 0
    storage.close()


def test_reader_follows_a_map_grown_by_another_process(tmp_path: Path) -> None:
    """`rmqc log dump` on a live node: the node grows the map while the reader has it open."""
    write_log(tmp_path, 10, map_size_bytes=64 << 10)
    grower = (
        "import sys\n"
        "from rmqc.raft._types import Entry\n"
        "from rmqc.storage import LmdbStorage\n"
        "with LmdbStorage(sys.argv[1], map_size_bytes=64 << 10, sync=False) as s:\n"
        "    s.save(None, [Entry(i, 5, data=bytes(3000)) for i in range(11, 1011)])\n"
        "    print(s.map_size_bytes)\n"
    )
    with LmdbStorage(tmp_path, map_size_bytes=64 << 10, readonly=True) as reader:
        assert reader.entries(1, 11)[-1].data == known_payload(10)
        done = subprocess.run(
            [sys.executable, "-c", grower, str(tmp_path)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) > 64 << 10
        assert reader.entries(1, 11)[-1].data == known_payload(10)
        assert reader.raw_log_records().__next__()[0] == _codec.index_key(1)
        assert sum(1 for _ in reader.raw_log_records()) == 1010


def test_resize_gate_refuses_to_resize_under_an_open_transaction() -> None:
    from rmqc.storage import StorageBusyError
    from rmqc.storage._gate import ResizeGate

    gate = ResizeGate(drain_timeout_s=0.01)
    with gate, pytest.raises(StorageBusyError, match="stayed open"), gate.exclusive():
        pytest.fail("resized while a transaction was open")
    entered = []
    with gate.exclusive():  # with nothing open, a resize goes through at once
        entered.append("exclusive")
    with gate:  # and the gate is usable again afterwards
        entered.append("shared")
    assert entered == ["exclusive", "shared"]


# ----- the membership's address book (issue 16) -----


def test_membership_records_written_before_the_address_book_still_decode() -> None:
    old = _codec._seal(b'{"voters":["n0","n1"],"learners":["n2"]}')
    assert _codec.decode_conf_state(old) == ConfState(("n0", "n1"), ("n2",))


def test_a_snapshot_file_carries_the_address_book_and_an_old_one_still_reads() -> None:
    from rmqc.raft._types import SnapshotMeta
    from rmqc.storage import decode_snapshot_file, encode_snapshot_file

    conf = ConfState(("n0", "n1"), (), (("n0", "10.0.0.1:9878"), ("n1", "10.0.0.2:9878")))
    content = encode_snapshot_file(SnapshotMeta(7, 2, conf), b"state", {"group": "g"})
    assert decode_snapshot_file(content).meta.conf_state == conf
    without_book = encode_snapshot_file(SnapshotMeta(7, 2, ConfState(("n0", "n1"))), b"state", {"group": "g"})
    assert b"addresses" not in without_book, "a membership without a book is written as before issue 16"
    assert decode_snapshot_file(without_book).meta.conf_state == ConfState(("n0", "n1"))


def test_a_malformed_address_book_is_reported_as_corruption() -> None:
    with pytest.raises(CorruptionError, match="membership undecodable"):
        _codec.decode_conf_state(_codec._seal(b'{"voters":["n0"],"learners":[],"addresses":["n0"]}'))
