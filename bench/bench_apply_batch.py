"""Would a follower that applies committed entries in batches, rather than as each commit arrives,
save CPU per write? The CPU of decoding and applying one 1013 (APPLY_BROKER_ID) entry, by how many
entries are applied in one go, with the caches hot or written over before each go.

In `rmqc serve` a follower at 1 client applies one entry per resume, with its caches cold (the other
processes on the two cores ran in between: docs/cpu-per-write.md). Applying in batches would run the
apply code hot. This measures what that is worth per entry: the state machine's real decode and
apply (rmqc.fsm), each entry a new broker group, as the write load's.

Run: PYTHONPATH=src .venv/bin/python bench/bench_apply_batch.py [--entries 2048] [--runs 5]
      [--batches 1,4,16,64] [--evict-kb 0,16384]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rmqc.fsm import ApplyBrokerId, ControllerState, decode_commands, encode_commands

CACHE_LINE_BYTES = 64


def apply_cpu_us(entries: int, batch: int, evict_kb: int, run: int = 0) -> float:
    """CPU microseconds per entry to decode and apply `entries` 1013 entries, `batch` at a time,
    with `evict_kb` KiB written over before each batch (outside the timed interval)."""
    state = ControllerState()
    payloads = [encode_commands([ApplyBrokerId("C", f"b{run}-{i}", 1, "10.0.0.1:1", "10.0.0.1:1;0", 1)])
                for i in range(entries)]
    evicted = bytearray(evict_kb * 1024)
    cache_lines = b"\1" * (len(evicted) // CACHE_LINE_BYTES)
    cpu_s = 0.0
    for first in range(0, entries, batch):
        if evicted:
            evicted[::CACHE_LINE_BYTES] = cache_lines  # a byte in every cache line
        started = time.process_time()
        for payload in payloads[first:first + batch]:
            state.apply_all(decode_commands(payload))
        cpu_s += time.process_time() - started
    groups = sum(1 for _ in state.groups())
    if groups != entries:  # every entry applied: the figure is of the path that writes
        raise RuntimeError(f"{groups} groups after applying {entries} entries")
    return cpu_s * 1e6 / entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batches", default="1,4,16,64", help="comma-separated entries applied in one go")
    parser.add_argument("--evict-kb", default="0,16384", help="comma-separated KiB written over before each go")
    args = parser.parse_args()
    print(f"decode + apply of one 1013 entry, us of CPU per entry; median of {args.runs} runs of {args.entries}")
    for evict_kb in (int(kb) for kb in args.evict_kb.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            runs = [apply_cpu_us(args.entries, batch, evict_kb, run) for run in range(args.runs)]
            print(f"  {evict_kb:6d} KiB written over, {batch:3d} a go: {statistics.median(runs):6.2f} us   "
                  f"runs {' '.join(f'{us:.2f}' for us in runs)}")


if __name__ == "__main__":
    main()
