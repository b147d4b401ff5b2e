"""`rmqc serve` that also writes, every second, what its event loop did: a diagnostic program for
`RMQC_BENCH_PROGRAM` when a benchmark's nodes fall behind and nothing they log says why.

    cat > /tmp/rmqc-loop-log <<EOF
    #!/bin/sh
    RMQC_LOOP_LOG_DIR=/tmp/looplog exec $PWD/.venv/bin/python $PWD/bench/loop_log.py "\\$@"
    EOF
    chmod +x /tmp/rmqc-loop-log
    RMQC_BENCH_PROGRAM=/tmp/rmqc-loop-log .venv/bin/python -m bench hold --groups 10000 --generator

Each node appends one JSON line a second to `$RMQC_LOOP_LOG_DIR/<node id>.jsonl`: the loop's busy
share of that second (rmqc_event_loop_busy_seconds) and its busy stretches over 100 ms, the
process's CPU share and RSS, Trio's runnable tasks, the requests the node holds, its reads
waiting and ReadIndex batches so far (docs/benchmarks.md, "Holding a fleet with no fault", read
these). The logger is a task in the node's own loop: no thread takes the GIL from a busy loop (a
sampling watchdog thread did, and spoiled the run it watched).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import trio

from rmqc.cli.main import app
from rmqc.launcher import rss_mb
from rmqc.metrics import LoopHistogram
from rmqc.node import _node

LOG_DIR_ENV = "RMQC_LOOP_LOG_DIR"
LONG_STRETCH_S = 0.1


def _stretches_over(histogram: LoopHistogram, seconds: float) -> int:
    """Stretches longer than `seconds`, which must be one of the histogram's bounds."""
    return sum(histogram.counts[histogram.bounds.index(seconds) + 1:])


def _record(node: Any, busy_s: float, long_stretches: int, cpu_share: float) -> dict[str, Any]:
    stats = trio.lowlevel.current_statistics()
    record: dict[str, Any] = {
        "t": round(time.time(), 1), "busy": round(busy_s, 3), "stretches_over_100ms": long_stretches,
        "cpu": round(cpu_share, 3), "rss_mb": round(rss_mb(os.getpid()) or 0.0, 1), "gc": gc.get_count(),
        "runnable": stats.tasks_runnable, "requests_in_flight": node.runner.requests_in_flight,
    }
    if node.replica is not None:
        reads = node.replica.reads.metrics()
        record["reads_waiting"] = int(reads["reads_waiting"])
        record["read_index_batches"] = int(reads["read_index_batches"])
    return record


async def _log_every_second(node: Any, log: TextIO) -> None:
    metrics = node.node_metrics
    busy, stretches = metrics.loop_busy, metrics.loop_stretches
    last_busy, last_long, last_cpu, last = busy.value, _stretches_over(stretches, LONG_STRETCH_S), \
        time.process_time(), trio.current_time()
    while True:
        await trio.sleep(1.0)
        now, cpu, long_stretches = trio.current_time(), time.process_time(), _stretches_over(stretches, LONG_STRETCH_S)
        elapsed = now - last
        log.write(json.dumps(_record(node, (busy.value - last_busy) / elapsed, long_stretches - last_long,
                                     (cpu - last_cpu) / elapsed)) + "\n")
        last_busy, last_long, last_cpu, last = busy.value, long_stretches, cpu, now


def _logging_run(run: Any, log_dir: Path) -> Any:
    async def run_with_log(node: Any, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        # a local file, opened once and written a line a second: blocking is harmless here
        with open(log_dir / f"{node.config.node_id}.jsonl", "a", buffering=1) as log:  # noqa: ASYNC230
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_log_every_second, node, log)
                task_status.started(await nursery.start(_until_done, run, node, nursery.cancel_scope))

    return run_with_log


async def _until_done(run: Any, node: Any, logger: trio.CancelScope,
                      task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    await run(node, task_status=task_status)
    logger.cancel()  # the node is done: so is its log


def main() -> None:
    if not os.environ.get(LOG_DIR_ENV):
        sys.exit(f"{LOG_DIR_ENV} is not set: the directory for the nodes' logs")
    log_dir = Path(os.environ[LOG_DIR_ENV])
    log_dir.mkdir(parents=True, exist_ok=True)
    _node.ControllerNode.run = _logging_run(_node.ControllerNode.run, log_dir)  # type: ignore[method-assign]
    sys.argv[0] = "rmqc"
    app()


if __name__ == "__main__":
    main()
