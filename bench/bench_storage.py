"""LmdbStorage figures: durable appends per second, and restart time of a 1,000,000-entry log.

1. Appends with fsync: save(hard_state, batch) with sync=True for batches of 1, 10, 100 and 1000
   entries of --payload-bytes each; prints saves/s (= fsync'd transactions/s) and entries/s.
2. Restart: a log of --entries entries (written unsynced, in batches, to save time), then the time
   a restarting node spends in storage: open + initial_state + snapshot + the last 100 entries.
   Measured twice: on the full log, and after a snapshot (the controller state of --groups broker
   groups) plus compaction keeping --keep entries, with the file rewritten compactly as
   `rmqc log compact` does. The snapshot's restore into ControllerState is timed separately.

Run: .venv/bin/python bench/bench_storage.py [--dir DIR] [--seconds S] [--entries N]
The directory must be on the disk being measured (default: bench-out/storage under the repo; /tmp
can be tmpfs on some machines, where fsync costs nothing).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rmqc import fsm
from rmqc.raft import ConfState, Entry, HardState
from rmqc.storage import LmdbStorage, rewrite_compactly

BATCH_SIZES = (1, 10, 100, 1000)
BUILD_BATCH_ENTRIES = 10_000
RESTART_RUNS = 9


def bench_appends(directory: Path, batch: int, seconds: float, payload: bytes) -> tuple[float, float]:
    """(saves per second, entries per second) with one fsync'd transaction per save."""
    shutil.rmtree(directory, ignore_errors=True)
    with LmdbStorage(directory, sync=True) as storage:
        index, saves = 1, 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            entries = [Entry(i, 1, data=payload) for i in range(index, index + batch)]
            storage.save(HardState(term=1, vote="n1", commit=index - 1), entries)
            index += batch
            saves += 1
        elapsed = time.perf_counter() - start
    shutil.rmtree(directory, ignore_errors=True)
    return saves / elapsed, saves * batch / elapsed


def build_log(directory: Path, entries: int, payload: bytes) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    with LmdbStorage(directory, sync=False) as storage:
        for lo in range(1, entries + 1, BUILD_BATCH_ENTRIES):
            hi = min(entries + 1, lo + BUILD_BATCH_ENTRIES)
            batch = [Entry(i, 1 + i // 100_000, data=payload) for i in range(lo, hi)]
            storage.save(HardState(term=batch[-1].term, vote="n1", commit=hi - 1), batch)
        storage.save_conf_state(ConfState(voters=("n1", "n2", "n3")))


def restart_once(directory: Path) -> float:
    """Seconds for what a restarting node asks of its storage before it can run Raft again."""
    start = time.perf_counter()
    with LmdbStorage(directory) as storage:
        storage.initial_state()
        storage.snapshot()
        last = storage.last_index()
        storage.entries(max(storage.first_index(), last - 99), last + 1)
        storage.term(last)
    return time.perf_counter() - start


def timing_ms(measure: Callable[[], float], runs: int) -> str:
    """Median and minimum of `runs` measurements (the machine is shared: the minimum is the cost)."""
    samples = [measure() * 1000 for _ in range(runs)]
    return f"median {statistics.median(samples):8.2f} ms, min {min(samples):8.2f} ms ({runs} runs)"


def controller_state_snapshot(groups: int) -> bytes:
    """The snapshot of a controller holding `groups` broker groups of 3 replicas each."""
    state = fsm.ControllerState()
    for g in range(groups):
        name = f"broker-{g}"
        for broker_id in (1, 2, 3):
            state.apply(fsm.ApplyBrokerId("DefaultCluster", name, broker_id,
                                          f"10.{g // 250}.{g % 250}.{broker_id}:10911",
                                          f"{name}-{broker_id}", 0))
        state.apply(fsm.ElectMaster("DefaultCluster", name, fsm.Trigger.BROKER, 1, 0, 0, 0, 1))
    return state.snapshot()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent.parent / "bench-out" / "storage")
    parser.add_argument("--seconds", type=float, default=3.0, help="per batch size")
    parser.add_argument("--payload-bytes", type=int, default=200)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--keep", type=int, default=1_000)
    args = parser.parse_args()
    payload = bytes(args.payload_bytes)
    args.dir.mkdir(parents=True, exist_ok=True)

    print(f"appends with fsync ({args.payload_bytes}-byte entries, {args.seconds:.0f} s each), dir {args.dir}")
    for batch in BATCH_SIZES:
        saves, entries = bench_appends(args.dir / "appends", batch, args.seconds, payload)
        print(f"  batch {batch:>5}: {saves:>9,.0f} saves/s  {entries:>11,.0f} entries/s")

    log_dir = args.dir / "restart"
    started = time.perf_counter()
    build_log(log_dir, args.entries, payload)
    size_mb = (log_dir / "data.mdb").stat().st_size / 1e6
    print(f"restart, {args.entries:,}-entry log (built in {time.perf_counter() - started:.1f} s, {size_mb:.0f} MB)")
    print(f"  full log:                  {timing_ms(lambda: restart_once(log_dir), RESTART_RUNS)}")

    data = controller_state_snapshot(args.groups)
    started = time.perf_counter()
    with LmdbStorage(log_dir) as storage:
        index = storage.last_index()
        storage.create_snapshot(index, ConfState(voters=("n1", "n2", "n3")), data)
        storage.compact(index - args.keep)
    before, after = rewrite_compactly(log_dir)
    print(f"  snapshot ({args.groups:,} groups, {len(data) / 1e6:.1f} MB) + compaction keeping {args.keep:,}: "
          f"{time.perf_counter() - started:.1f} s, file {before / 1e6:.0f} MB -> {after / 1e6:.1f} MB")
    print(f"  snapshot + compacted log:  {timing_ms(lambda: restart_once(log_dir), RESTART_RUNS)}")

    def restore() -> float:
        start = time.perf_counter()
        fsm.ControllerState().restore(data)
        return time.perf_counter() - start

    print(f"  + ControllerState.restore: {timing_ms(restore, RESTART_RUNS)}")
    shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
