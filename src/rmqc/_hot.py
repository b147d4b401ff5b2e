"""Two costs of CPython 3.11 that the write path avoids, for the types and constants it uses many
times a write.

`@hot_record`: an immutable record for the types a replicated write builds many times (Raft's
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

`enum_members(E)`: E's members, read in a fifth of the time. Every `E.MEMBER` read goes through
the enum metaclass's `__getattr__` hook (Python 3.11; 3.12 dropped it): 90-130 ns against 18 ns
from a plain class, and the Raft core reads a message type, a role or a progress state several
times per message. The result is typed as E itself, so mypy checks and narrows `X.MEMBER` as the
enum's own; only members may be read from it (it is not the enum: no call, no iteration).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar, dataclass_transform

__all__ = ["enum_members", "hot_record"]

_Record = TypeVar("_Record", bound=type)
_Enum = TypeVar("_Enum", bound=Enum)


@dataclass_transform(frozen_default=True)
def hot_record(cls: _Record) -> _Record:
    return dataclass(slots=True, unsafe_hash=True)(cls)  # type: ignore[return-value]


def enum_members(enum: type[_Enum]) -> type[_Enum]:
    return type(f"{enum.__name__}Members", (), dict(enum.__members__))
