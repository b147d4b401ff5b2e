"""The storage interface the Raft core reads from and the application writes through.

Two implementations pass one contract suite (`rmqc.testing.storage_contract`): the in-memory
`MemoryStorage` (simulator, unit tests) and `rmqc.storage.LmdbStorage` (production).

Read side (used by the core): `initial_state`, `entries`, `term`, `first_index`, `last_index`,
`snapshot`. Index rules: `first_index()` is the first index still in the log (snapshot index + 1);
`term(snapshot_index)` is answered from the snapshot metadata; asking below that raises
`CompactedError`, beyond `last_index()` raises `UnavailableError`.

Write side (used by the application, in Ready order): `save` persists one Ready atomically and
durably (snapshot first, then entries truncating any conflicting suffix, then hard state) and returns
only once durable; `save_conf_state` records membership after a conf change is applied;
`create_snapshot` records the application's state at an applied index; `compact` drops entries up
to and including an index that a snapshot covers; `begin_repair`/`end_repair` record whether the
node is repairing after its storage was found damaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ._types import ConfState, Entry, HardState, Snapshot


class Storage(Protocol):
    def initial_state(self) -> tuple[HardState, ConfState]: ...

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries in [lo, hi); at least one entry is returned even if it exceeds max_bytes."""
        ...

    def term(self, index: int) -> int: ...

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def snapshot(self) -> Snapshot: ...

    def save(
        self,
        hard_state: HardState | None,
        entries: Sequence[Entry],
        snapshot: Snapshot | None = None,
    ) -> None: ...

    def save_conf_state(self, conf_state: ConfState) -> None: ...

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot: ...

    def compact(self, index: int) -> None: ...

    def close(self) -> None: ...

    # Repair: why the node's storage is being repaired after damage (None: it is not), recorded
    # durably until the repair is over (RaftCore, "repair").
    def repair_reason(self) -> str | None: ...

    def begin_repair(self, reason: str) -> None: ...

    def end_repair(self) -> None: ...
