"""The history of a chaos run: every operation with its invoke and complete times (monotonic ns of
the runner's process), fault window boundaries, and samples of what nodes and brokers believe.

One record is one JSON object with a `type`:
- `write`: one logical 1013 of broker id `id` in group `key` (retried until acknowledged: every
  attempt at one id is one write, since 1013 is idempotent per id); `complete` None = outcome unknown.
- `attempt`: one request of the writer or a reader (`ok` or not), for throughput and errors over time.
- `read`: a 1012 read answered at `level` by `node` (`value` = nextBrokerId, `incarnation` = how
  many times that node had been restarted when it answered).
- `window`: a fault window's `kind`, `start`/`heal`/`end` and what it did (`detail`).
- `role`: every node's answer to 1005 (leader, follower or down) at `t`.
- `masters`: per broker group, the (broker id, masterEpoch) of every live broker in role MASTER.
- `converged`: whether every broker group had one agreed, notified master at `t`.
- `designate`: the admin's 1002 (designateElect) of broker `id` in group `key` through `node`: the
  answer's `code` (None: no answer), and the `master` and `epoch` (masterEpoch) it named.
- `send` (Java brokers): one send of the Java Producer, message body `rmqc-<seq>`, `ok` when it
  was acknowledged (SEND_OK), `invoke`/`complete` its send and answer times.
- `recv` (Java brokers): one message body the Consumer read back at the end; `consumed` once the
  Consumer is done (without it, nothing was verified).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rmqc.errors import BoundExceeded

# Records held in one run: a 100-window run makes about 1-2 million; past this bound the run stops
# loudly instead of eating the machine's memory.
MAX_RECORDS = 5_000_000


class HistoryTooLong(BoundExceeded):
    """More than MAX_RECORDS records in one run."""


def now_ns() -> int:
    return time.monotonic_ns()


class History:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, type_: str, **fields: Any) -> dict[str, Any]:
        if len(self.records) >= MAX_RECORDS:
            raise HistoryTooLong(f"more than {MAX_RECORDS} history records")
        record = {"type": type_, **fields}
        self.records.append(record)
        return record

    def of(self, type_: str) -> Iterator[dict[str, Any]]:
        return (record for record in self.records if record["type"] == type_)


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    with open(path, "w") as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
