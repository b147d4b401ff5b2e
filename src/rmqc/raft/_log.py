"""The Raft log: durable entries in Storage plus an unstable tail not yet handed to persistence.

Indexes: storage holds [first_index, unstable.offset); the unstable tail holds [offset, last].
An unstable snapshot (received from the leader, not yet persisted) replaces everything before it.
`committed` only grows; `applied <= committed` is asserted on every move.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmqc.errors import CompactedError, UnavailableError

from ._errors import RaftInvariantError
from ._memory_storage import limit_size
from ._storage import Storage
from ._types import Entry, Snapshot


class Unstable:
    """Entries (and maybe a snapshot) accepted by the core but not yet persisted by the app."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.entries: list[Entry] = []
        self.snapshot: Snapshot | None = None

    def term(self, index: int) -> int | None:
        if index < self.offset:
            if self.snapshot is not None and index == self.snapshot.meta.index:
                return self.snapshot.meta.term
            return None
        pos = index - self.offset
        return self.entries[pos].term if pos < len(self.entries) else None

    def truncate_and_append(self, entries: Sequence[Entry]) -> None:
        first = entries[0].index
        if first == self.offset + len(self.entries):
            self.entries.extend(entries)
        elif first <= self.offset:
            self.offset = first  # replaces the whole tail; storage's suffix is truncated on save
            self.entries = list(entries)
        else:
            self.entries = self.entries[: first - self.offset] + list(entries)

    def stable_to(self, index: int, term: int) -> None:
        """Entries up to index were persisted; drop them unless a newer term overwrote them."""
        if self.term(index) != term or index < self.offset:
            return
        self.entries = self.entries[index + 1 - self.offset :]
        self.offset = index + 1

    def restore(self, snapshot: Snapshot) -> None:
        self.offset = snapshot.meta.index + 1
        self.entries = []
        self.snapshot = snapshot


class RaftLog:
    def __init__(self, storage: Storage, applied: int = 0) -> None:
        self.storage = storage
        first = storage.first_index()
        self.unstable = Unstable(storage.last_index() + 1)
        self.committed = first - 1
        self.applied = max(applied, first - 1)

    # -- indexes and terms ---------------------------------------------------------------------
    def first_index(self) -> int:
        if self.unstable.snapshot is not None:
            return self.unstable.snapshot.meta.index + 1
        return self.storage.first_index()

    def last_index(self) -> int:
        # Read from the unstable tail alone: storage's last index is the tail's offset - 1 (what the
        # app has persisted, stable_last_index). Raft asks this about ten times per pass; every
        # call saved is Python saved on each write's path.
        unstable = self.unstable
        if unstable.entries:
            return unstable.offset + len(unstable.entries) - 1
        if unstable.snapshot is not None:
            return unstable.snapshot.meta.index
        return unstable.offset - 1

    def stable_last_index(self) -> int:
        """The last index the app has persisted (what a leader may count for itself)."""
        return self.unstable.offset - 1

    def last_term(self) -> int:
        return self.term(self.last_index())

    def term(self, index: int) -> int:
        """The term at index; raises CompactedError/UnavailableError instead of guessing 0."""
        unstable = self.unstable
        position = index - unstable.offset
        if position >= 0:  # in the unstable tail, or past the last index
            if position < len(unstable.entries):
                return unstable.entries[position].term
            raise UnavailableError(f"term({index}): last index is {self.last_index()}")
        snapshot = unstable.snapshot
        if snapshot is not None:  # nothing before an unstable snapshot is kept
            if index == snapshot.meta.index:
                return snapshot.meta.term
            raise CompactedError(f"term({index}): first index is {self.first_index()}")
        return self.storage.term(index)  # raises CompactedError itself below its first index - 1

    def match_term(self, index: int, term: int) -> bool:
        try:
            return self.term(index) == term
        except (CompactedError, UnavailableError):
            return False

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft 5.4.1: the other log is at least as up to date as ours."""
        our_term = self.last_term()
        return last_term > our_term or (last_term == our_term and last_index >= self.last_index())

    # -- reading entries -------------------------------------------------------------------------
    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries in [lo, hi), at least one if lo < hi, within max_bytes otherwise."""
        if lo < self.first_index():
            raise CompactedError(f"entries from {lo}: first index is {self.first_index()}")
        hi = min(hi, self.last_index() + 1)
        if lo >= hi:
            return []
        offset = self.unstable.offset
        result: list[Entry] = []
        if lo < offset:
            result = self.storage.entries(lo, min(hi, offset), max_bytes)
            if len(result) < min(hi, offset) - lo:
                return result  # the byte limit stopped us inside storage
        if hi > offset:
            start = max(lo, offset) - offset
            result = result + self.unstable.entries[start : hi - offset]
        return limit_size(result, max_bytes)

    def next_committed_entries(self, max_bytes: int) -> list[Entry]:
        if self.applied >= self.committed or self.unstable.snapshot is not None:
            return []
        return self.entries(self.applied + 1, self.committed + 1, max_bytes)

    def has_next_committed_entries(self) -> bool:
        return self.applied < self.committed and self.unstable.snapshot is None

    # -- writing ---------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> int:
        if entries:
            if entries[0].index - 1 < self.committed:
                raise RaftInvariantError(
                    f"append at {entries[0].index} would overwrite committed {self.committed}"
                )
            self.unstable.truncate_and_append(entries)
        return self.last_index()

    def find_conflict(self, entries: Sequence[Entry]) -> int:
        """Index of the first entry whose term differs from ours (or that is new); 0 if none."""
        for entry in entries:
            if not self.match_term(entry.index, entry.term):
                return entry.index
        return 0

    def maybe_append(
        self, prev_index: int, prev_term: int, commit: int, entries: Sequence[Entry]
    ) -> int | None:
        """Figure 2, AppendEntries receiver rules 2-5. Returns the last index this message matched."""
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        conflict = self.find_conflict(entries)
        if conflict and conflict <= self.committed:
            raise RaftInvariantError(
                f"entry {conflict} conflicts with the log at or below commit {self.committed}"
            )
        if conflict:
            self.append(entries[conflict - (prev_index + 1) :])
        self.commit_to(min(commit, last_new))  # never past what this message matched (pitfall 5)
        return last_new

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """Largest i <= index whose term is <= term, for fast backtracking (etcd raft 3984dc6)."""
        while index > 0:
            try:
                our = self.term(index)
            except (CompactedError, UnavailableError):
                return index, 0
            if our <= term:
                return index, our
            index -= 1
        return 0, 0

    def commit_to(self, index: int) -> None:
        if index > self.committed:
            if index > self.last_index():
                raise RaftInvariantError(f"commit {index} beyond last index {self.last_index()}")
            self.committed = index

    def maybe_commit(self, index: int, term: int) -> bool:
        """Commit index only if its entry is of `term` (Raft 5.4.2: never count old-term replicas)."""
        if index > self.committed and self.match_term(index, term):
            self.commit_to(index)
            return True
        return False

    def applied_to(self, index: int) -> None:
        if index == 0:
            return
        assert self.applied <= index <= self.committed, (self.applied, index, self.committed)
        self.applied = index

    def restore(self, snapshot: Snapshot) -> None:
        self.committed = snapshot.meta.index
        self.unstable.restore(snapshot)

    def stable_to(self, index: int, term: int) -> None:
        self.unstable.stable_to(index, term)

    def stable_snapshot_to(self, index: int) -> None:
        snap = self.unstable.snapshot
        if snap is not None and snap.meta.index == index:
            self.unstable.snapshot = None
            self.applied = max(self.applied, index)
