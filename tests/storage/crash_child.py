"""Child process of test_crash_safety: appends entries durably and reports each durable index.

Usage: python crash_child.py DATA_DIR TERM SEED. Prints "durable LAST_INDEX TERM" after each save()
returns (fsync done), so the parent knows which indexes must survive a SIGKILL. Every few hundred
entries it also snapshots and compacts, so kills land inside compactions too.
"""

from __future__ import annotations

import random
import sys

from rmqc.raft._types import ConfState, Entry, HardState
from rmqc.storage import LmdbStorage

# A small initial map, so that map growth happens (and gets killed) during the test as well.
CHILD_MAP_SIZE_BYTES = 256 << 10
COMPACT_EVERY_ENTRIES = 300
KEEP_BEHIND_SNAPSHOT = 40


def payload(index: int, term: int) -> bytes:
    return f"crash-entry {index} term {term} ".encode() * (1 + index % 7)


def main(data_dir: str, term: int, seed: int) -> None:
    rng = random.Random(seed)
    with LmdbStorage(data_dir, map_size_bytes=CHILD_MAP_SIZE_BYTES, sync=True) as storage:
        while True:
            lo = storage.last_index() + 1
            batch = [Entry(i, term, data=payload(i, term)) for i in range(lo, lo + rng.randint(1, 25))]
            storage.save(HardState(term=term, vote="n1", commit=lo - 1), batch)
            print(f"durable {batch[-1].index} {term}", flush=True)
            snapshot_index = storage.last_index() - KEEP_BEHIND_SNAPSHOT
            if snapshot_index - storage.snapshot_meta().index >= COMPACT_EVERY_ENTRIES:
                storage.create_snapshot(snapshot_index, ConfState(voters=("n1",)), b"state")
                storage.compact(snapshot_index - KEEP_BEHIND_SNAPSHOT)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
