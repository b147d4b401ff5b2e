"""`@hot_record`: an immutable record for the types a replicated write builds many times (Raft's
messages, entries and Readies, the replica's actions, the processor's outcomes).

A `@dataclass(frozen=True)` stores each field in `__init__` through `object.__setattr__`, a call per
field: building a 12-field Raft message took 1.34 us, against 0.23 us with plain stores, and a
write builds a dozen such records on the three nodes (1.8M instructions per write at 1 client fell
by 13 %: bench/bench_logic_instructions.py, docs/benchmarks.md). A hot record is a slotted
dataclass with plain stores whose immutability the type checker enforces instead: the transform
below is declared frozen, so mypy refuses any assignment to a field outside `__init__`, as it does
for a frozen dataclass. Equality and the hash are the frozen dataclass's (all fields), so hot
records stay usable as keys.

Records whose immutability guards shared state at run time (the FSM's model and commands, the
configuration) stay `frozen=True`: a stray write there must fail at once, not only in mypy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

__all__ = ["hot_record"]

_Record = TypeVar("_Record", bound=type)


@dataclass_transform(frozen_default=True)
def hot_record(cls: _Record) -> _Record:
    return dataclass(slots=True, unsafe_hash=True)(cls)  # type: ignore[return-value]
