"""The simulated disk: a MemoryStorage whose `save` is watched (the checkers see every write before
and after it lands), that can lose power in the middle of a write, fill up, fail a write, and come
back from a crash damaged or short (the corruption faults).

`save` is synchronous, as the replica's contract has it (one transaction + fsync inside its driver
step). An armed crash raises `PowerCut` from inside the next `save` that carries entries: nothing of
that write is stored, and the replica's step ends there, so the actions it emitted before the save
happen and nothing after. Membership records, snapshots and compaction are separate small writes
and stay immediate.

Faults of a running disk (profile "corruption"), as LmdbStorage reports them:
- `full`: every write (a log save, a snapshot, the space probe `ensure_space`) raises
  StorageFullError and stores nothing, until the nemesis frees space: the replica raises its
  disk-full alarm, refuses writes, answers reads, and resumes by itself.
- `fail_next_write`: the next log save or snapshot raises StorageWriteFailed and stores nothing
  (EIO): the replica stops the process (StopProcess), and the simulated node crashes and restarts
  later.

Corruption faults, applied by the nemesis to a stopped node just before it restarts (the only time
a real node reads its files back):
- `damage`: damage that real storage detects (a bit flip, a torn write, a truncation or a zeroed
  region in the log beyond some index, or a snapshot failing its checksum). The storage becomes
  what `rmqc serve --repair` keeps: either the log up to just before the damage, with the hard state
  saved with that prefix (the term of its last entry, no vote, the commit index within it) and the
  membership record, or (a damaged snapshot, or at random) nothing at all; and the repair is
  recorded (`begin_repair`).
- `lose_tail`: a disk that lied about its fsyncs: the entries the last few `save`s wrote vanish
  silently and the node restarts normally with the shorter log (a prefix of what it held, never
  shorter than its snapshot). The term, vote, snapshot and membership record are kept (the model's
  mercy: a node that forgets its vote can elect two leaders in one term, and one whose disk brings
  back a suffix it had replaced applies an entry never committed when a leader's heartbeat says
  its commit index reached it; no protocol detects either); the commit index is cut to the log.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rmqc.errors import RmqcError
from rmqc.raft import ConfState, Entry, HardState, MemoryStorage, Snapshot
from rmqc.storage import StorageFullError, StorageWriteFailed

# How many recent saves the disk can still lose without noticing (the deepest `lose_tail`).
TAIL_SAVES_KEPT = 4


class PowerCut(RmqcError):
    """The simulated power cut, raised from inside `save` by an armed disk."""


class SaveWatcher(Protocol):
    def before_save(self, storage: CrashableStorage, entries: Sequence[Entry]) -> None: ...
    def after_save(self, storage: CrashableStorage, entries: Sequence[Entry], snapshot: Snapshot | None) -> None: ...
    def on_end_repair(self, storage: CrashableStorage) -> None: ...


@dataclass(frozen=True, slots=True)
class Damage:
    """What a corruption fault did: `kept_last` is the last index the storage still holds (its
    snapshot's index when only that is left; 0: nothing), `emptied` whether it was given up whole."""

    reason: str
    kept_last: int
    emptied: bool


class CrashableStorage(MemoryStorage):
    def __init__(self, watcher: SaveWatcher) -> None:
        super().__init__()
        self._watcher = watcher
        self.arm_crash = False  # set by the nemesis: the next write with entries loses power
        self.remember_saves = False  # set when the run may lose the tail (`lose_tail`)
        self.full = False  # set by the nemesis: every write is refused for lack of space until cleared
        self.fail_next_write = False  # set by the nemesis: the next log save or snapshot fails (EIO)
        self._save_starts: deque[int] = deque(maxlen=TAIL_SAVES_KEPT)  # first index each recent save wrote

    def save(self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: Snapshot | None = None) -> None:
        if self.arm_crash and entries:
            self.arm_crash = False
            raise PowerCut("power lost during the fsync")
        if self.full and (hard_state is not None or entries or snapshot is not None):
            raise StorageFullError("sim: no space left on the device")
        if self.fail_next_write and entries:
            self.fail_next_write = False
            raise StorageWriteFailed("sim: the write failed (EIO)")
        self._watcher.before_save(self, entries)
        if entries and self.remember_saves:
            self._save_starts.append(entries[0].index)
        super().save(hard_state, entries, snapshot)
        self._watcher.after_save(self, entries, snapshot)

    def ensure_space(self, needed_bytes: int | None = None) -> None:
        """LmdbStorage's space probe: StorageFullError while the disk is full."""
        if self.full:
            raise StorageFullError("sim: no space left on the device", needed_bytes)

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        if self.full:
            raise StorageFullError("sim: no space left on the device for the snapshot", len(data))
        if self.fail_next_write:
            self.fail_next_write = False
            raise StorageWriteFailed("sim: the snapshot's write failed (EIO)")
        return super().create_snapshot(index, conf_state, data)

    def end_repair(self) -> None:
        super().end_repair()
        self._watcher.on_end_repair(self)

    # -- corruption faults (the node is down) ------------------------------------------------
    def damage(self, rng: random.Random) -> Damage | None:
        """Detected damage, then what `rmqc serve --repair` keeps (None: nothing was stored that
        could be damaged)."""
        # the log the snapshot does not cover (entries it covers may not be compacted away yet)
        first, last = max(self.first_index(), self._snapshot.meta.index + 1), self.last_index()
        has_snapshot = not self._snapshot.is_empty
        if has_snapshot and rng.random() < 0.2:
            return self._give_up(f"the snapshot at {self._snapshot.meta.index} fails its checksum")
        if last < first:
            return None
        bad = rng.randint(first, last)
        what = rng.choice(("a flipped bit", "a torn write", "a truncation", "a zeroed region"))
        if rng.random() < 0.5:
            return self._give_up(f"{what} at index {bad} (the log is given up)")
        keep = bad - 1  # >= the snapshot's index: the entries before the damage, or the snapshot and what it covers
        commit = min(self._hard_state.commit, keep)
        self._entries = self._entries[: keep - self._entries[0].index + 1]
        self._hard_state = HardState(term=self.term(keep), vote=None, commit=commit)
        reason = f"{what} at index {bad} (the log before it is kept)"
        self._after_fault()
        self.begin_repair(f"sim: {reason}")
        return Damage(reason, keep, emptied=False)

    def _give_up(self, reason: str) -> Damage:
        self._hard_state, self._conf_state, self._snapshot = HardState(), ConfState(), Snapshot()
        self._entries = [Entry(index=0, term=0)]
        self._after_fault()
        self.begin_repair(f"sim: {reason}")
        return Damage(reason, 0, emptied=True)

    def lose_tail(self, saves: int) -> int:
        """The entries the last `saves` saves wrote (at most as many saves as are remembered)
        vanish: the log becomes a prefix of itself, never shorter than the snapshot; term, vote,
        snapshot and membership stay, the commit index is cut to the log. Returns how many saves
        were lost (0: nothing remembered, or nothing to lose)."""
        saves = min(saves, len(self._save_starts))
        if saves == 0:
            return 0
        # (the snapshot may be newer than the compaction point: create_snapshot does not compact)
        keep = max(min(list(self._save_starts)[-saves:]) - 1, self._entries[0].index, self._snapshot.meta.index)
        if keep >= self.last_index():
            return 0
        del self._entries[keep - self._entries[0].index + 1:]
        hard_state = self._hard_state
        self._hard_state = HardState(term=hard_state.term, vote=hard_state.vote, commit=min(hard_state.commit, keep))
        for _ in range(saves):  # the saves before the lost ones are still what the disk went through
            self._save_starts.pop()
        return saves

    def _after_fault(self) -> None:
        self._save_starts.clear()  # what is remembered described the disk before the damage
