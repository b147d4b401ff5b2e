"""The register linearizability checker: hand-made histories and generated ones."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from rmqc.linearizability import (
    HistoryFormatError,
    Op,
    SearchBoundExceeded,
    check_history,
    check_key,
    read_history,
    write_history,
)


def w(process: str, value: object, start: int, end: int | None, ok: bool = True, key: str = "x") -> Op:
    return Op(process, key, "write", value, start, end, ok)


def r(process: str, value: object, start: int, end: int | None, ok: bool = True, key: str = "x") -> Op:
    return Op(process, key, "read", value, start, end, ok)


def test_sequential_history_is_linearizable() -> None:
    ops = [w("a", 1, 0, 1), r("b", 1, 2, 3), w("a", 2, 4, 5), r("b", 2, 6, 7)]
    result = check_key(ops)
    assert result.ok and result.ops_checked == 4
    assert result.witness.startswith("linearizable as: a wrote x=1")


def test_read_of_initial_value_after_write_completed_is_not() -> None:
    result = check_key([w("a", 1, 0, 1), r("b", None, 2, 3)])
    assert not result.ok
    assert "b read x=None" in result.witness


def test_initial_value_is_used() -> None:
    assert check_key([r("b", 7, 0, 1)], initial=7).ok
    assert not check_key([r("b", 7, 0, 1)]).ok


def test_concurrent_read_may_see_old_or_new_value() -> None:
    write = w("a", 1, 0, 10)
    assert check_key([write, r("b", 1, 2, 3)]).ok
    assert check_key([write, r("b", None, 2, 3)]).ok


def test_new_then_old_inside_one_write_is_not_linearizable() -> None:
    # Both reads overlap the write, but once a read saw 1 a later read may not see the old value.
    ops = [w("a", 1, 0, 100), r("b", 1, 10, 20), r("c", None, 30, 40)]
    assert not check_key(ops).ok
    # Reordering the reads' outcomes is fine: old, then new.
    ops = [w("a", 1, 0, 100), r("b", None, 10, 20), r("c", 1, 30, 40)]
    assert check_key(ops).ok


def test_touching_intervals_count_as_concurrent() -> None:
    assert check_key([w("a", 1, 0, 5), r("b", None, 5, 6)]).ok


def test_concurrent_writes_order_chosen_by_reads() -> None:
    ops = [w("a", 1, 0, 10), w("b", 2, 0, 10), r("c", 2, 11, 12), r("c", 2, 13, 14)]
    assert check_key(ops).ok
    ops = [w("a", 1, 0, 10), w("b", 2, 0, 10), r("c", 2, 11, 12), r("c", 1, 13, 14)]
    assert not check_key(ops).ok


def test_failed_ops_have_no_effect() -> None:
    ops = [w("a", 1, 0, 1, ok=False), r("b", 1, 2, 3)]
    assert not check_key(ops).ok
    assert check_key([w("a", 1, 0, 1, ok=False), r("b", None, 2, 3)]).ok


def test_unknown_write_may_or_may_not_take_effect() -> None:
    assert check_key([w("a", 1, 0, None), r("b", 1, 50, 60)]).ok
    assert check_key([w("a", 1, 0, None), r("b", None, 50, 60)]).ok
    # ...but it cannot take effect before it was invoked,
    assert not check_key([r("b", 1, 0, 5), w("a", 1, 10, None)]).ok
    # and once seen it cannot be unseen.
    assert not check_key([w("a", 1, 0, None), r("b", 1, 50, 60), r("b", None, 70, 80)]).ok


def test_unanswered_read_is_ignored() -> None:
    result = check_key([w("a", 1, 0, 1), r("b", None, 2, None)])
    assert result.ok and result.ops_checked == 1


def test_check_history_splits_per_key() -> None:
    ops = [
        w("a", 1, 0, 1, key="x"),
        w("a", 2, 0, 1, key="y"),
        r("b", 2, 2, 3, key="x"),
        r("b", 2, 2, 3, key="y"),
    ]
    results = check_history(ops)
    assert [(res.key, res.ok) for res in results] == [("x", False), ("y", True)]


def test_check_key_rejects_mixed_keys() -> None:
    with pytest.raises(HistoryFormatError):
        check_key([w("a", 1, 0, 1, key="x"), w("a", 1, 0, 1, key="y")])


def test_search_bound_raises_named_error() -> None:
    # Many fully concurrent writes and one impossible read force a long search.
    ops = [w(f"p{i}", i, 0, 100) for i in range(14)] + [r("z", 99, 0, 100)]
    with pytest.raises(SearchBoundExceeded):
        check_key(ops, max_states=500)


def test_json_values_compare_structurally() -> None:
    assert check_key([w("a", {"b": [1, 2]}, 0, 1), r("b", {"b": [1, 2]}, 2, 3)]).ok
    assert not check_key([w("a", {"b": [1, 2]}, 0, 1), r("b", {"b": [2, 1]}, 2, 3)]).ok


def test_history_round_trips_through_json_lines(tmp_path) -> None:
    ops = [w("a", {"v": 1}, 0, 5), r("b", None, 1, None), w("c", 3, 2, 4, ok=False)]
    path = tmp_path / "history.jsonl"
    write_history(path, ops)
    assert read_history(path) == ops
    first = path.read_text().splitlines()[0]
    assert first == '{"process":"a","key":"x","kind":"write","value":{"v":1},"invoke_ns":0,"complete_ns":5,"ok":true}'


@pytest.mark.parametrize(
    "line",
    ["not json", "[1]", '{"process":"a"}',
     '{"process":"a","key":"x","kind":"cas","value":1,"invoke_ns":0,"complete_ns":1,"ok":true}'],
)
def test_bad_history_lines_are_named(tmp_path, line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(HistoryFormatError, match=r"bad.jsonl:1"):
        read_history(path)


def atomic_register_history(seed: int, op_count: int, process_count: int) -> list[Op]:
    """Ops of an atomic register: each takes effect at a random instant inside its interval.

    Writes carry unique values. Some writes get an unknown outcome (they took effect or not)."""
    rng = random.Random(seed)
    planned = []
    clock = [0] * process_count
    for n in range(op_count):
        p = rng.randrange(process_count)
        start = clock[p] + rng.randrange(0, 5)
        end = start + rng.randrange(1, 30)
        point = rng.uniform(start, end)
        clock[p] = end + 1
        kind = rng.choice(("read", "write"))
        unknown = kind == "write" and rng.random() < 0.1
        happened = not unknown or rng.random() < 0.5
        planned.append((point, n, p, kind, start, None if unknown else end, happened))
    ops = []
    value = None
    for _point, n, p, kind, start, end, happened in sorted(planned):
        if kind == "write":
            if happened:
                value = f"v{n}"
            ops.append(Op(f"p{p}", "x", "write", f"v{n}", start, end))
        else:
            ops.append(Op(f"p{p}", "x", "read", value, start, end))
    return sorted(ops, key=lambda op: op.invoke_ns)


def make_stale(ops: list[Op]) -> list[Op]:
    """Return a history with one read made stale: it returns w1's value although w2 completed
    after w1 and before the read began. Writes are unique, so no linearization exists."""
    writes = [op for op in ops if op.kind == "write" and op.complete_ns is not None]
    for i, read in enumerate(ops):
        if read.kind != "read":
            continue
        for w2 in writes:
            if w2.complete_ns >= read.invoke_ns:
                continue
            for w1 in writes:
                if w1.complete_ns < w2.invoke_ns:
                    stale = Op(read.process, "x", "read", w1.value, read.invoke_ns, read.complete_ns)
                    return [*ops[:i], stale, *ops[i + 1:]]
    # No such triple in this history: add one after everything else.
    end = max((op.complete_ns or op.invoke_ns) for op in ops) + 10 if ops else 0
    return [*ops, Op("s", "x", "write", "old", end, end + 1), Op("s", "x", "write", "new", end + 2, end + 3),
            Op("s", "x", "read", "old", end + 4, end + 5)]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), op_count=st.integers(1, 40), process_count=st.integers(1, 5))
def test_atomic_register_histories_are_linearizable(seed: int, op_count: int, process_count: int) -> None:
    ops = atomic_register_history(seed, op_count, process_count)
    result = check_key(ops)
    assert result.ok, f"seed={seed}: {result.witness}"


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), op_count=st.integers(1, 40), process_count=st.integers(1, 5))
def test_stale_read_is_caught(seed: int, op_count: int, process_count: int) -> None:
    ops = make_stale(atomic_register_history(seed, op_count, process_count))
    result = check_key(ops)
    assert not result.ok, f"seed={seed}: stale read not caught"
    assert result.witness.startswith("not linearizable")


def test_unread_unknown_writes_are_dropped_but_read_ones_kept() -> None:
    ops = [w(f"p{i}", f"v{i}", i, None) for i in range(40)] + [r("z", "v3", 100, 101), r("z", "v3", 102, 103)]
    result = check_key(ops, max_states=10_000)
    assert result.ok and result.ops_checked == 3
    ops.append(r("z", "v5", 104, 105))
    ops.append(r("z", "v3", 106, 107))  # v3 again after v5: both writes are known to be unique
    assert not check_key(ops, max_states=10_000).ok
