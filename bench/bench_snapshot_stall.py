"""What a node's snapshot costs, part by part, and whether it starves the event loop.

A log of --entries entries (--payload-bytes each, written unsynced to save time) and a controller
state of --groups broker groups; then, as ControllerNode does at `snapshot_every_entries`:
state.snapshot(), create_snapshot, compact's boundary write and its sweep (in the node's batches,
each one transaction holding the writer lock), each timed alone, with fsync on. The longest gap of
a 10 ms ticker (less its 10 ms) while the state is encoded in one piece, and captured and encoded
in steps as the node does now (StateCapture.encode_steps). Last, the old path
(create_snapshot + a whole compact in one trio.to_thread.run_sync) while a trio task ticks every
10 ms: its longest gap is how long the loop was starved (GIL; 0 when the write ended before the
first tick).

Run: .venv/bin/python bench/bench_snapshot_stall.py [--dir DIR] [--entries N] [--runs R]
Run a busy process beside it (e.g. `yes > /dev/null`) for the loaded figures; medians are printed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from functools import partial
from pathlib import Path

import trio

from rmqc import fsm
from rmqc.node._node import NODE_SWEEP_BATCH_ENTRIES
from rmqc.raft import ConfState, Entry, HardState
from rmqc.storage import LmdbStorage
from rmqc.testing.loop_gaps import record_gaps
from rmqc.testing.states import add_groups

CONF = ConfState(voters=("n0", "n1", "n2"))
TICK_S = 0.010


def build_state(groups: int) -> fsm.ControllerState:
    return add_groups(fsm.ControllerState(), groups)


def build_log(directory: Path, entries: int, payload: bytes) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    with LmdbStorage(directory, sync=False) as storage:
        for lo in range(1, entries + 1, 10_000):
            batch = [Entry(i, 1, data=payload) for i in range(lo, min(entries, lo + 9_999) + 1)]
            storage.save(HardState(term=1, vote="n0", commit=batch[-1].index), batch)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def parts_ms(directory: Path, state: fsm.ControllerState, entries: int) -> dict[str, float]:
    compact_to = entries - 1_000  # COMPACTION_LAG_ENTRIES behind, as the node does
    with LmdbStorage(directory, sync=True) as storage:
        data: list[bytes] = []
        result = {"state.snapshot": timed(lambda: data.append(state.snapshot()))}
        result["create_snapshot"] = timed(lambda: storage.create_snapshot(entries, CONF, data[0]))
        result["boundary write"] = timed(lambda: storage.compact(compact_to, sweep=False))
        batches = []
        while (batch := timed_count(lambda: storage.sweep_batch(NODE_SWEEP_BATCH_ENTRIES)))[1]:
            batches.append(batch[0])
        result["sweep (all batches)"] = sum(batches)
        result[f"sweep: longest {NODE_SWEEP_BATCH_ENTRIES:,}-batch"] = max(batches)
    return result


def timed_count(fn) -> tuple[float, int]:
    start = time.perf_counter()
    count = fn()
    return (time.perf_counter() - start) * 1000, count


async def longest_gap_ms(directory: Path, state: fsm.ControllerState, entries: int) -> tuple[float, float]:
    """(longest gap of a 10 ms ticker, total ms) while the snapshot write runs in a worker thread."""
    data = state.snapshot()
    gaps: list[float] = []
    with LmdbStorage(directory, sync=True) as storage:
        def write() -> None:
            storage.create_snapshot(entries, CONF, data)
            storage.compact(entries - 1_000)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(record_gaps, gaps, nursery.cancel_scope, TICK_S)
            await trio.to_thread.run_sync(write)
            total = (time.perf_counter() - start) * 1000
            nursery.cancel_scope.cancel()
    return max(gaps, default=0.0), total


async def encode_gap_ms(state: fsm.ControllerState, *, in_steps: bool) -> float:
    """The longest gap of a 10 ms ticker while the state is encoded: in one piece (what the driver
    did before), or captured and encoded a step at a time with a checkpoint between two (what the
    node's snapshot task does now)."""
    gaps: list[float] = []

    async with trio.open_nursery() as nursery:
        nursery.start_soon(record_gaps, gaps, nursery.cancel_scope, TICK_S)
        await trio.sleep(2 * TICK_S)  # the ticker runs
        if in_steps:
            steps = state.capture().encode_steps()
            while next(steps) is None:
                await trio.lowlevel.checkpoint()
        else:
            state.snapshot()
        await trio.sleep(2 * TICK_S)
        nursery.cancel_scope.cancel()
    return max(gaps, default=0.0) - TICK_S * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, default=Path("bench-out/snapshot-stall"))
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--payload-bytes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    state = build_state(args.groups)
    payload = b"x" * args.payload_bytes
    runs: dict[str, list[float]] = {}
    for _ in range(args.runs):
        build_log(args.dir, args.entries, payload)
        for part, ms in parts_ms(args.dir, state, args.entries).items():
            runs.setdefault(part, []).append(ms)
        build_log(args.dir, args.entries, payload)
        gap, total = trio.run(longest_gap_ms, args.dir, state, args.entries)
        runs.setdefault("old path, one thread: total", []).append(total)
        runs.setdefault("old path: longest loop gap", []).append(gap)
        for in_steps, part in ((False, "encode in one piece: loop gap"), (True, "encode in steps: loop gap")):
            runs.setdefault(part, []).append(trio.run(partial(encode_gap_ms, state, in_steps=in_steps)))
    shutil.rmtree(args.dir, ignore_errors=True)
    print(f"{args.entries:,} entries, {args.groups:,} groups, median of {args.runs} (ms):")
    for part, values in runs.items():
        print(f"  {part:26s} {statistics.median(values):8.1f}   (max {max(values):.1f})")


if __name__ == "__main__":
    main()
