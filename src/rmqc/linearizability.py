"""Linearizability checking of key-value register histories.

A history is a list of `Op`s, each a read or a write of one key by one client process, with the
time it was invoked and the time its answer came back. The history is linearizable if every op can
be given one instant inside its [invoke, complete] interval such that, in that order, every read
returns the value of the latest write before it (or the initial value).

The search is Wing & Gong's, with Lowe's memoisation, in the shape Porcupine uses: walk the list of
call/return events; linearize the first call that the register model accepts, remembering
(set of linearized ops, register value) pairs already explored so that no configuration is searched
twice; when a return is reached whose op is not yet linearized, backtrack. Histories are split per
key first (P-compositionality: a history is linearizable iff each per-key sub-history is), which
keeps the bitsets small and the search fast.

Outcomes:
- `ok=False`: the op definitely failed and had no effect; it is left out.
- `complete_ns=None`: the outcome is unknown. A write may or may not have taken effect, at any time
  after its invocation: it is given a completion at +infinity, and since a register write is always
  legal, linearizing it after everything else is the same as "it never happened". A read whose
  answer never came back tells nothing and is left out.

This module is pure (no clock, no I/O except `write_history`/`read_history`) so the simulator, the
Spark pipeline and the real-process tests can all use it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqc.errors import BoundExceeded, RmqcError

READ = "read"
WRITE = "write"
OP_FIELDS = ("process", "key", "kind", "value", "invoke_ns", "complete_ns", "ok")

# Each memo entry is a (bitset, value) pair of roughly 100-200 bytes; a million of them keeps the
# checker under a few hundred MB while being far above what a well-behaved history needs (the
# simulator's per-key histories explore a few thousand).
DEFAULT_MAX_STATES = 1_000_000

# How many ops a success witness spells out before it abbreviates.
WITNESS_OPS_SHOWN = 12


class SearchBoundExceeded(BoundExceeded):
    """The linearizability search explored more configurations than allowed."""

    def __init__(self, key: str, max_states: int) -> None:
        super().__init__(f"linearizability search for key {key!r} exceeded {max_states} states")
        self.key = key
        self.max_states = max_states


class HistoryFormatError(RmqcError):
    """A history file line is not a valid op; the message names the line and the field."""


@dataclass(frozen=True, slots=True)
class Op:
    process: str
    key: str
    kind: str  # READ or WRITE
    value: Any  # the written value, or the value the read returned; JSON-able
    invoke_ns: int
    complete_ns: int | None  # None: outcome unknown (may or may not have taken effect)
    ok: bool = True  # False: definitely failed, had no effect


@dataclass(frozen=True, slots=True)
class KeyResult:
    key: str
    ok: bool
    ops_checked: int
    witness: str  # a linearization (abbreviated) if ok, else why none exists


def describe_op(op: Op) -> str:
    """One-line text of an op, e.g. `c1 write x=5 [10, 20]`."""
    end = "?" if op.complete_ns is None else str(op.complete_ns)
    verb = "wrote" if op.kind == WRITE else "read"
    return f"{op.process} {verb} {op.key}={op.value!r} [{op.invoke_ns}, {end}]"


def _hashable(value: Any) -> Any:
    """A hashable stand-in for a JSON value, so register states can go into the memo set."""
    if isinstance(value, dict):
        return ("{}", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("[]", tuple(_hashable(v) for v in value))
    return value


def _relevant(ops: Iterable[Op]) -> list[Op]:
    """The ops that constrain the search: no failed ops, no reads without an answer, and no
    unknown-outcome writes whose value no read returned.

    Why the last rule is exact: such a write can always be linearized at the very end (its
    completion is unbounded), and in any linearization it can be removed, since no read returns its
    value and so no read sits between it and the next write. Dropping these writes keeps the search
    from trying every subset of them, which is what makes histories with many timeouts explode."""
    kept = []
    for op in ops:
        if op.kind not in (READ, WRITE):
            raise HistoryFormatError(f"op kind must be 'read' or 'write', got {op.kind!r}")
        if not op.ok or (op.kind == READ and op.complete_ns is None):
            continue
        kept.append(op)
    values_read = {_hashable(op.value) for op in kept if op.kind == READ}
    return [
        op
        for op in kept
        if op.kind == READ or op.complete_ns is not None or _hashable(op.value) in values_read
    ]


class _EventList:
    """Call and return events in time order, as a doubly linked list that ops can be lifted out of
    and put back into (dancing links), which is what makes backtracking cheap."""

    def __init__(self, ops: Sequence[Op]) -> None:
        events: list[tuple[float, int, int]] = []  # (time, call 0 / return 1, op); math.inf: no return
        for i, op in enumerate(ops):
            end = math.inf if op.complete_ns is None else op.complete_ns
            # Calls sort before returns at the same instant: touching intervals count as
            # concurrent, the permissive reading of a tie.
            events.append((op.invoke_ns, 0, i))
            events.append((end, 1, i))
        events.sort()
        count = len(events)
        self.op_of = [0] * (count + 1)
        self.is_call = [False] * (count + 1)
        self.match = [0] * (count + 1)  # call node -> its return node
        call_node: dict[int, int] = {}
        for node, (_, kind, i) in enumerate(events, start=1):
            self.op_of[node] = i
            self.is_call[node] = kind == 0
            if kind == 0:
                call_node[i] = node
            else:
                self.match[call_node[i]] = node
        # Node 0 is the head sentinel; -1 ends the list.
        self.next: list[int] = [*range(1, count + 1), -1]
        self.prev: list[int] = [-1, *range(0, count)]

    def first(self) -> int:
        return self.next[0]

    def _unlink(self, node: int) -> None:
        self.next[self.prev[node]] = self.next[node]
        if self.next[node] != -1:
            self.prev[self.next[node]] = self.prev[node]

    def _relink(self, node: int) -> None:
        self.next[self.prev[node]] = node
        if self.next[node] != -1:
            self.prev[self.next[node]] = node

    def lift(self, call: int) -> None:
        self._unlink(call)
        self._unlink(self.match[call])

    def unlift(self, call: int) -> None:
        self._relink(self.match[call])
        self._relink(call)


def _step(state: Any, op: Op, value: Any) -> tuple[bool, Any]:
    """The register model: a write always succeeds; a read must return the current value."""
    if op.kind == WRITE:
        return True, value
    return value == state, state


def check_key(
    ops: Sequence[Op], initial: Any = None, *, max_states: int = DEFAULT_MAX_STATES
) -> KeyResult:
    """Check the history of one key (all ops must name the same key).

    Raises:
        SearchBoundExceeded: the search needed more than `max_states` memoised configurations.
    """
    history = _relevant(ops)
    keys = {op.key for op in history}
    if len(keys) > 1:
        raise HistoryFormatError(f"check_key got several keys: {sorted(keys)}")
    key = next(iter(keys)) if keys else (ops[0].key if ops else "")
    if not history:
        return KeyResult(key, True, 0, "empty history")
    return _Search(key, history, _hashable(initial), max_states).run()


class _Search:
    def __init__(self, key: str, history: list[Op], initial: Any, max_states: int) -> None:
        self.key = key
        self.history = history
        self.values = [_hashable(op.value) for op in history]
        self.initial = initial
        self.max_states = max_states
        self.best_order: list[int] = []
        self.best_state: Any = initial

    def run(self) -> KeyResult:
        events = _EventList(self.history)
        state = self.initial
        linearized = 0
        memo: set[tuple[int, Any]] = set()
        stack: list[tuple[int, Any]] = []  # (call node, state before it)
        node = events.first()
        while events.first() != -1:
            if events.is_call[node]:
                i = events.op_of[node]
                legal, new_state = _step(state, self.history[i], self.values[i])
                if legal:
                    config = (linearized | (1 << i), new_state)
                    if config not in memo:
                        if len(memo) >= self.max_states:
                            raise SearchBoundExceeded(self.key, self.max_states)
                        memo.add(config)
                        stack.append((node, state))
                        linearized, state = config
                        events.lift(node)
                        self._remember_progress(events, stack, state)
                        node = events.first()
                        continue
                node = events.next[node]
            else:
                if not stack:
                    return KeyResult(self.key, False, len(self.history), self._failure())
                node, state = stack.pop()
                linearized &= ~(1 << events.op_of[node])
                events.unlift(node)
                node = events.next[node]
        order = [events.op_of[call] for call, _ in stack]
        return KeyResult(self.key, True, len(self.history), self._success(order))

    def _remember_progress(self, events: _EventList, stack: list[tuple[int, Any]], state: Any) -> None:
        if len(stack) > len(self.best_order):
            self.best_order = [events.op_of[call] for call, _ in stack]
            self.best_state = state

    def _success(self, order: list[int]) -> str:
        shown = [describe_op(self.history[i]) for i in order[:WITNESS_OPS_SHOWN]]
        more = len(order) - len(shown)
        tail = f"; ... {more} more" if more > 0 else ""
        return "linearizable as: " + "; ".join(shown) + tail

    def _failure(self) -> str:
        done = set(self.best_order)
        pending = [i for i in range(len(self.history)) if i not in done]
        # The op that had to come next and could not: the earliest completion among the rest.
        blocker = min(pending, key=lambda i: (self.history[i].complete_ns or math.inf, i))
        prefix = [describe_op(self.history[i]) for i in self.best_order[-WITNESS_OPS_SHOWN:]]
        return (
            f"not linearizable: at most {len(self.best_order)} of {len(self.history)} ops "
            f"linearize (last: {'; '.join(prefix) or 'none'}), leaving the value "
            f"{self.best_state!r}; then {describe_op(self.history[blocker])} cannot be placed"
        )


def check_history(
    ops: Iterable[Op], initial: Any = None, *, max_states: int = DEFAULT_MAX_STATES
) -> list[KeyResult]:
    """Check every key of a history separately (P-compositionality); results sorted by key."""
    by_key: dict[str, list[Op]] = {}
    for op in ops:
        by_key.setdefault(op.key, []).append(op)
    return [check_key(by_key[key], initial, max_states=max_states) for key in sorted(by_key)]


def op_to_json(op: Op) -> dict[str, Any]:
    return {name: getattr(op, name) for name in OP_FIELDS}


def op_from_json(record: Any, where: str = "op") -> Op:
    if not isinstance(record, dict):
        raise HistoryFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [name for name in OP_FIELDS if name not in record]
    if missing:
        raise HistoryFormatError(f"{where}: missing field(s) {missing}")
    _require(isinstance(record["invoke_ns"], int), where, "invoke_ns", "an integer")
    complete = record["complete_ns"]
    _require(complete is None or isinstance(complete, int), where, "complete_ns", "an integer or null")
    _require(record["kind"] in (READ, WRITE), where, "kind", "'read' or 'write'")
    _require(isinstance(record["ok"], bool), where, "ok", "a boolean")
    _require(isinstance(record["key"], str), where, "key", "a string")
    _require(isinstance(record["process"], str), where, "process", "a string")
    return Op(**{name: record[name] for name in OP_FIELDS})


def _require(condition: bool, where: str, field_name: str, expected: str) -> None:
    if not condition:
        raise HistoryFormatError(f"{where}: field {field_name!r} must be {expected}")


def write_history(path: str | Path, ops: Iterable[Op]) -> None:
    """Write ops as JSON lines, one object per op with exactly the `Op` field names."""
    with open(path, "w", encoding="utf-8") as out:
        for op in ops:
            out.write(json.dumps(op_to_json(op), separators=(",", ":")) + "\n")


def read_history(path: str | Path) -> list[Op]:
    """Read a JSON-lines history written by `write_history` (blank lines are skipped)."""
    ops = []
    with open(path, encoding="utf-8") as source:
        for number, line in enumerate(source, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HistoryFormatError(f"{where}: invalid JSON ({exc.msg})") from exc
            ops.append(op_from_json(record, where))
    return ops
