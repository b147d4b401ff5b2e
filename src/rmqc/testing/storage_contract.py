"""The contract every rmqc.raft Storage must pass, run against MemoryStorage and LmdbStorage.

Use it by subclassing in a test module and providing a `storage_factory` fixture: a callable that
opens the storage under test and, for persistent storages, opens the same data again after close()
(derive those from PersistentStorageContract, which adds the restart tests):

    class TestLmdbContract(PersistentStorageContract):
        @pytest.fixture
        def storage_factory(self, tmp_path):
            return lambda: LmdbStorage(tmp_path / "data", sync=False)

Like trio.testing's stream checks, the suite states the semantics once (see the docstring of
rmqc.raft.Storage) so both storages are held to the same ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from rmqc.errors import CompactedError, SnapshotOutOfDateError, StorageError, UnavailableError
from rmqc.raft import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    Snapshot,
    SnapshotMeta,
    Storage,
)

StorageFactory = Callable[[], Storage]

# Seeds of the randomized model comparison; each runs MODEL_STEPS operations.
MODEL_SEEDS = range(12)
MODEL_STEPS = 150


def make_entries(lo: int, hi: int, term: int, *, size_bytes: int = 8) -> list[Entry]:
    """Entries lo..hi-1 of one term whose payload names them, so a misplaced one is visible."""
    entries = []
    for index in range(lo, hi):
        payload = f"e{index}t{term}".encode().ljust(size_bytes, b".")
        entries.append(Entry(index=index, term=term, data=payload))
    return entries


class StorageContract:
    """Base class of the contract tests; subclasses provide the `storage_factory` fixture."""

    persistent = False  # True: the randomized comparison also restarts the storage

    @pytest.fixture
    def storage(self, storage_factory: StorageFactory) -> Iterator[Storage]:
        opened = storage_factory()
        yield opened
        opened.close()  # closing twice (after reopen) must be harmless

    # ----- empty storage -----

    def test_empty_storage(self, storage: Storage) -> None:
        assert storage.initial_state() == (HardState(), ConfState())
        assert (storage.first_index(), storage.last_index()) == (1, 0)
        assert storage.term(0) == 0
        assert storage.entries(1, 1) == []
        assert storage.snapshot().is_empty

    def test_term_beyond_last_is_unavailable(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 4, 1))
        with pytest.raises(UnavailableError):
            storage.term(4)
        with pytest.raises(UnavailableError):
            storage.entries(2, 5)

    # ----- append and hard state -----

    def test_append_then_read(self, storage: Storage) -> None:
        entries = make_entries(1, 6, 1) + make_entries(6, 9, 2)
        storage.save(HardState(term=2, vote="n1", commit=3), entries)
        assert (storage.first_index(), storage.last_index()) == (1, 8)
        assert storage.entries(1, 9) == entries
        assert storage.entries(3, 7) == entries[2:6]
        assert [storage.term(i) for i in range(0, 9)] == [0, 1, 1, 1, 1, 1, 2, 2, 2]
        assert storage.initial_state()[0] == HardState(term=2, vote="n1", commit=3)

    def test_append_in_several_saves(self, storage: Storage) -> None:
        for lo in range(1, 31, 5):
            storage.save(None, make_entries(lo, lo + 5, 1))
        assert storage.last_index() == 30
        assert storage.entries(1, 31) == make_entries(1, 31, 1)

    def test_entry_types_and_payloads_round_trip(self, storage: Storage) -> None:
        entries = [
            Entry(1, 1, EntryType.NORMAL, b""),
            Entry(2, 1, EntryType.CONF_CHANGE, b"\x00\x01conf"),
            Entry(3, 1, EntryType.NORMAL, bytes(range(256)) * 40),
        ]
        storage.save(None, entries)
        assert storage.entries(1, 4) == entries

    def test_save_without_hard_state_keeps_the_previous_one(self, storage: Storage) -> None:
        storage.save(HardState(term=3, vote=None, commit=0), [])
        storage.save(None, make_entries(1, 3, 3))
        assert storage.initial_state()[0] == HardState(term=3, vote=None, commit=0)

    def test_truncates_conflicting_suffix(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 11, 1))
        replacement = make_entries(6, 8, 2)
        storage.save(None, replacement)
        assert storage.last_index() == 7
        assert storage.entries(1, 8) == make_entries(1, 6, 1) + replacement
        assert storage.term(7) == 2
        with pytest.raises(UnavailableError):
            storage.term(8)

    def test_append_leaving_a_gap_is_refused(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 4, 1))
        with pytest.raises(StorageError):
            storage.save(None, make_entries(6, 8, 1))
        assert storage.last_index() == 3

    def test_failed_save_writes_nothing(self, storage: Storage) -> None:
        storage.save(HardState(term=1, commit=1), make_entries(1, 4, 1))
        snapshot = storage.create_snapshot(2, ConfState(voters=("n1",)), b"state")
        with pytest.raises(SnapshotOutOfDateError):
            storage.save(HardState(term=9, commit=3), make_entries(4, 6, 9), snapshot)
        assert storage.last_index() == 3
        assert storage.initial_state()[0] == HardState(term=1, commit=1)

    # ----- max_bytes -----

    def test_max_bytes_limits_the_run(self, storage: Storage) -> None:
        entries = make_entries(1, 11, 1, size_bytes=100)
        storage.save(None, entries)
        one = entries[0].size_bytes()
        assert storage.entries(1, 11, max_bytes=None) == entries
        assert storage.entries(1, 11, max_bytes=3 * one) == entries[:3]
        assert storage.entries(1, 11, max_bytes=3 * one + one - 1) == entries[:3]
        assert storage.entries(1, 11, max_bytes=10 * one) == entries

    def test_max_bytes_returns_at_least_one_entry(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 4, 1, size_bytes=1000))
        assert len(storage.entries(2, 4, max_bytes=0)) == 1
        assert storage.entries(2, 4, max_bytes=10)[0].index == 2

    # ----- snapshots and compaction -----

    def test_create_snapshot_then_compact(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 6, 1) + make_entries(6, 11, 2))
        conf = ConfState(voters=("n1", "n2", "n3"), learners=("n4",))
        snapshot = storage.create_snapshot(7, conf, b"state at 7")
        assert snapshot.meta == SnapshotMeta(index=7, term=2, conf_state=conf)
        assert storage.snapshot() == snapshot
        assert storage.first_index() == 1  # creating a snapshot compacts nothing by itself
        storage.compact(7)
        assert (storage.first_index(), storage.last_index()) == (8, 10)
        assert storage.term(7) == 2
        assert storage.entries(8, 11) == make_entries(8, 11, 2)
        with pytest.raises(CompactedError):
            storage.term(6)
        with pytest.raises(CompactedError):
            storage.entries(7, 9)

    def test_compact_keeping_entries_behind_the_snapshot(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 21, 1))
        storage.create_snapshot(15, ConfState(voters=("n1",)), b"s")
        storage.compact(10)
        assert storage.first_index() == 11
        assert storage.term(10) == 1
        assert storage.entries(11, 21) == make_entries(11, 21, 1)
        storage.compact(15)
        assert storage.first_index() == 16

    def test_compact_twice_is_compacted_error(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 11, 1))
        storage.create_snapshot(8, ConfState(), b"s")
        storage.compact(5)
        with pytest.raises(CompactedError):
            storage.compact(5)
        with pytest.raises(CompactedError):
            storage.compact(3)

    def test_compact_beyond_the_snapshot_is_refused(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 11, 1))
        with pytest.raises(StorageError):
            storage.compact(5)
        storage.create_snapshot(4, ConfState(), b"s")
        with pytest.raises(StorageError):
            storage.compact(5)
        assert storage.first_index() == 1

    def test_create_snapshot_errors(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 11, 1))
        storage.create_snapshot(6, ConfState(), b"s")
        with pytest.raises(SnapshotOutOfDateError):
            storage.create_snapshot(6, ConfState(), b"again")
        with pytest.raises(SnapshotOutOfDateError):
            storage.create_snapshot(3, ConfState(), b"older")
        with pytest.raises(UnavailableError):
            storage.create_snapshot(11, ConfState(), b"beyond")
        assert storage.snapshot().data == b"s"

    def test_save_snapshot_replaces_the_log(self, storage: Storage) -> None:
        storage.save(HardState(term=1), make_entries(1, 6, 1))
        conf = ConfState(voters=("n1", "n2", "n3"))
        incoming = Snapshot(SnapshotMeta(index=50, term=4, conf_state=conf), b"leader state")
        storage.save(HardState(term=4, commit=50), [], incoming)
        assert (storage.first_index(), storage.last_index()) == (51, 50)
        assert storage.term(50) == 4
        assert storage.snapshot() == incoming
        assert storage.initial_state() == (HardState(term=4, commit=50), conf)
        with pytest.raises(CompactedError):
            storage.entries(5, 6)
        storage.save(None, make_entries(51, 54, 4))
        assert storage.entries(51, 54) == make_entries(51, 54, 4)

    def test_save_snapshot_behind_the_log_end_discards_the_suffix(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 21, 1))
        incoming = Snapshot(SnapshotMeta(index=10, term=3), b"x")
        storage.save(None, make_entries(11, 13, 3), incoming)
        assert (storage.first_index(), storage.last_index()) == (11, 12)
        assert storage.entries(11, 13) == make_entries(11, 13, 3)

    def test_save_older_snapshot_is_out_of_date(self, storage: Storage) -> None:
        storage.save(None, [], Snapshot(SnapshotMeta(index=20, term=2), b"new"))
        with pytest.raises(SnapshotOutOfDateError):
            storage.save(None, [], Snapshot(SnapshotMeta(index=20, term=2), b"same"))
        with pytest.raises(SnapshotOutOfDateError):
            storage.save(None, [], Snapshot(SnapshotMeta(index=10, term=1), b"old"))
        assert storage.snapshot().data == b"new"

    def test_empty_snapshot_in_save_is_ignored(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 3, 1), Snapshot())
        assert storage.last_index() == 2
        assert storage.snapshot().is_empty

    def test_entries_behind_the_compaction_point_are_dropped_on_append(
        self, storage: Storage
    ) -> None:
        storage.save(None, [], Snapshot(SnapshotMeta(index=10, term=2), b"s"))
        storage.save(None, make_entries(5, 9, 2))
        assert (storage.first_index(), storage.last_index()) == (11, 10)
        storage.save(None, make_entries(8, 14, 2))
        assert storage.entries(11, 14) == make_entries(11, 14, 2)

    def test_large_snapshot_data_round_trips(self, storage: Storage) -> None:
        storage.save(None, make_entries(1, 3, 1))
        data = random.Random(7).randbytes(3 << 20)
        storage.create_snapshot(2, ConfState(voters=("n1",)), data)
        assert storage.snapshot().data == data

    # ----- membership -----

    def test_save_conf_state(self, storage: Storage) -> None:
        conf = ConfState(voters=("n1", "n2"), learners=("n3",))
        storage.save_conf_state(conf)
        assert storage.initial_state()[1] == conf

    # ----- randomized comparison with a reference model -----

    @pytest.mark.parametrize("seed", MODEL_SEEDS)
    def test_matches_reference_model(
        self, storage_factory: StorageFactory, seed: int
    ) -> None:
        rng = random.Random(seed)
        storage = storage_factory()
        model = _ModelLog()
        try:
            for step in range(MODEL_STEPS):
                operation = rng.choice(_OPERATIONS)
                if operation is _restart and not self.persistent:
                    continue
                storage = operation(rng, storage, model, storage_factory)
                _check_against_model(rng, storage, model, f"seed {seed} step {step} {operation.__name__}")
        finally:
            storage.close()


class PersistentStorageContract(StorageContract):
    """The contract plus restarts: for storages whose factory reopens the same data."""

    persistent = True

    @pytest.fixture
    def reopen(self, storage_factory: StorageFactory) -> Iterator[Callable[[Storage], Storage]]:
        """reopen(storage): close it and open the same data again (persistent storages only)."""
        opened: list[Storage] = []

        def do_reopen(storage: Storage) -> Storage:
            storage.close()
            fresh = storage_factory()
            opened.append(fresh)
            return fresh

        yield do_reopen
        for storage in opened:
            storage.close()

    def test_restart_keeps_everything(
        self, storage: Storage, reopen: Callable[[Storage], Storage]
    ) -> None:
        storage.save(HardState(term=2, vote="n2", commit=15), make_entries(1, 21, 1))
        storage.save(None, make_entries(21, 26, 2))
        conf = ConfState(voters=("n1", "n2", "n3"))
        storage.save_conf_state(conf)
        snapshot = storage.create_snapshot(15, conf, b"state at 15")
        storage.compact(12)
        restarted = reopen(storage)
        assert restarted.initial_state() == (HardState(term=2, vote="n2", commit=15), conf)
        assert (restarted.first_index(), restarted.last_index()) == (13, 25)
        assert restarted.term(12) == 1
        assert restarted.term(25) == 2
        assert restarted.snapshot() == snapshot
        assert restarted.entries(13, 26) == make_entries(13, 21, 1) + make_entries(21, 26, 2)
        restarted.save(None, make_entries(24, 27, 3))
        assert restarted.entries(23, 27) == make_entries(23, 24, 2) + make_entries(24, 27, 3)

    def test_restart_keeps_the_address_book(
        self, storage: Storage, reopen: Callable[[Storage], Storage]
    ) -> None:
        """The membership's address book (issue 16) is saved with it and in snapshots."""
        book = (("n1", "10.0.0.1:9878"), ("n2", "10.0.0.2:9878"), ("n4", "10.0.0.4:9878"))
        conf = ConfState(voters=("n1", "n2"), learners=("n4",), addresses=book)
        storage.save(HardState(term=1, commit=5), make_entries(1, 6, 1))
        storage.save_conf_state(conf)
        snapshot = storage.create_snapshot(5, conf, b"state at 5")
        restarted = reopen(storage)
        assert restarted.initial_state()[1] == conf
        assert restarted.snapshot() == snapshot and restarted.snapshot().meta.conf_state.addresses == book
        installed = Snapshot(SnapshotMeta(index=50, term=3, conf_state=conf), b"from the leader")
        restarted.save(None, [], installed)
        again = reopen(restarted)
        assert again.initial_state()[1] == conf and again.snapshot() == installed

    def test_restart_after_installed_snapshot(
        self, storage: Storage, reopen: Callable[[Storage], Storage]
    ) -> None:
        storage.save(None, make_entries(1, 30, 1))
        storage.save(None, [], Snapshot(SnapshotMeta(index=100, term=5), b"s"))
        restarted = reopen(storage)
        assert (restarted.first_index(), restarted.last_index()) == (101, 100)
        assert restarted.term(100) == 5
        with pytest.raises(CompactedError):
            restarted.term(29)


@dataclass
class _ModelLog:
    """The obvious implementation of the semantics, for comparison."""

    entries: dict[int, Entry] = field(default_factory=dict)
    compacted: tuple[int, int] = (0, 0)
    snapshot: Snapshot = field(default_factory=Snapshot)
    hard_state: HardState = field(default_factory=HardState)
    conf_state: ConfState = field(default_factory=ConfState)
    term: int = 1

    @property
    def first_index(self) -> int:
        return self.compacted[0] + 1

    @property
    def last_index(self) -> int:
        return max(self.entries, default=self.compacted[0])

    def term_of(self, index: int) -> int:
        return self.compacted[1] if index == self.compacted[0] else self.entries[index].term

    def append(self, entries: Sequence[Entry]) -> None:
        if entries[-1].index < self.first_index:
            return  # all covered by the snapshot already
        for index in [i for i in self.entries if i >= entries[0].index]:
            del self.entries[index]
        for entry in entries:
            if entry.index >= self.first_index:
                self.entries[entry.index] = entry


def _append(rng: random.Random, storage: Storage, model: _ModelLog, _f: StorageFactory) -> Storage:
    # Raft only overwrites entries above the commit index, and snapshots lie at or below it.
    lo = rng.randint(max(model.first_index, model.snapshot.meta.index + 1), model.last_index + 1)
    if lo <= model.last_index and rng.random() < 0.5:
        model.term += 1  # a new leader overwrites a suffix with a newer term
    entries = make_entries(lo, lo + rng.randint(1, 8), model.term, size_bytes=rng.randint(0, 64))
    hard_state: HardState | None = HardState(term=model.term, vote=rng.choice([None, "n1", "n2"]), commit=0)
    hard_state = hard_state if rng.random() < 0.5 else None
    storage.save(hard_state, entries)
    model.append(entries)
    model.hard_state = hard_state or model.hard_state
    return storage


def _create_snapshot(
    rng: random.Random, storage: Storage, model: _ModelLog, _f: StorageFactory
) -> Storage:
    lo = max(model.snapshot.meta.index + 1, model.first_index)
    if lo > model.last_index:
        return storage
    index = rng.randint(lo, model.last_index)
    conf = ConfState(voters=tuple(f"n{i}" for i in range(rng.randint(1, 5))))
    data = f"state@{index}".encode()
    snapshot = storage.create_snapshot(index, conf, data)
    model.snapshot = Snapshot(SnapshotMeta(index, model.term_of(index), conf), data)
    assert snapshot == model.snapshot
    return storage


def _compact(rng: random.Random, storage: Storage, model: _ModelLog, _f: StorageFactory) -> Storage:
    if model.snapshot.meta.index <= model.compacted[0]:
        return storage
    index = rng.randint(model.compacted[0] + 1, model.snapshot.meta.index)
    storage.compact(index)
    model.compacted = (index, model.term_of(index))
    model.entries = {i: e for i, e in model.entries.items() if i > index}
    return storage


def _install_snapshot(
    rng: random.Random, storage: Storage, model: _ModelLog, _f: StorageFactory
) -> Storage:
    index = model.snapshot.meta.index + rng.randint(1, 20)
    model.term += 1
    snapshot = Snapshot(SnapshotMeta(index, model.term, ConfState(voters=("n1", "n2"))), b"in")
    storage.save(None, [], snapshot)
    model.snapshot, model.compacted, model.entries = snapshot, (index, model.term), {}
    model.conf_state = snapshot.meta.conf_state
    return storage


def _save_conf_state(
    rng: random.Random, storage: Storage, model: _ModelLog, _f: StorageFactory
) -> Storage:
    model.conf_state = ConfState(voters=("n1",), learners=tuple(f"l{rng.randint(0, 9)}" for _ in "ab"))
    storage.save_conf_state(model.conf_state)
    return storage


def _restart(
    _rng: random.Random, storage: Storage, _model: _ModelLog, factory: StorageFactory
) -> Storage:
    storage.close()
    return factory()


# Appends dominate so that logs grow long enough for compaction to matter.
_OPERATIONS = [_append] * 6 + [_create_snapshot, _compact, _install_snapshot, _save_conf_state, _restart]


def _check_against_model(rng: random.Random, storage: Storage, model: _ModelLog, where: str) -> None:
    assert (storage.first_index(), storage.last_index()) == (
        model.first_index,
        model.last_index,
    ), where
    assert storage.initial_state() == (model.hard_state, model.conf_state), where
    assert storage.snapshot() == model.snapshot, where
    for index in range(model.compacted[0], model.last_index + 1):
        assert storage.term(index) == model.term_of(index), f"{where}: term({index})"
    if model.first_index <= model.last_index:
        lo = rng.randint(model.first_index, model.last_index)
        hi = rng.randint(lo, model.last_index + 1)
        expected = [model.entries[i] for i in range(lo, hi)]
        assert storage.entries(lo, hi) == expected, f"{where}: entries({lo}, {hi})"
    if model.compacted[0] > 0:
        with pytest.raises(CompactedError):
            storage.term(model.compacted[0] - 1)
