"""The simulated disk: a MemoryStorage whose `save` is watched (the checkers see every write before
and after it lands) and can lose power in the middle of a write.

`save` is synchronous, as the replica's contract has it (one transaction + fsync inside its driver
step). An armed crash raises `PowerCut` from inside the next `save` that carries entries: nothing of
that write is stored, and the replica's step ends there, so the actions it emitted before the save
happen and nothing after. Membership records, snapshots and compaction are separate small writes
and stay immediate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rmqc.errors import RmqcError
from rmqc.raft import MemoryStorage
from rmqc.raft._types import Entry, HardState, Snapshot


class PowerCut(RmqcError):
    """The simulated power cut, raised from inside `save` by an armed disk."""


class SaveWatcher(Protocol):
    def before_save(self, storage: CrashableStorage, entries: Sequence[Entry]) -> None: ...
    def after_save(self, storage: CrashableStorage, entries: Sequence[Entry], snapshot: Snapshot | None) -> None: ...


class CrashableStorage(MemoryStorage):
    def __init__(self, watcher: SaveWatcher) -> None:
        super().__init__()
        self._watcher = watcher
        self.arm_crash = False  # set by the nemesis: the next write with entries loses power

    def save(self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: Snapshot | None = None) -> None:
        if self.arm_crash and entries:
            self.arm_crash = False
            raise PowerCut("power lost during the fsync")
        self._watcher.before_save(self, entries)
        super().save(hard_state, entries, snapshot)
        self._watcher.after_save(self, entries, snapshot)
