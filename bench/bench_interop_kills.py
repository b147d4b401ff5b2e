"""Master-broker kills under a producer, against rmqc and Apache RocketMQ's own controller (DLedger
and JRaft modes), in one run (issue 29, docs/interop.md "20 master kills").

For each controller in turn (never two at once: the machine has 2 shared cores): 3 controller
nodes, a Java NameServer, three Java brokers of one group in controller mode
(`allAckInSyncStateSet=true`) and the interop Producer (one synchronous send every 10 ms). Then
--kills times: SIGKILL the current master, wait until the controller has elected a slave of the
SyncStateSet (1004, polled every 50 ms) and a send succeeds, restart the killed broker on its store
and wait until all three are in the SyncStateSet again. At the end the Consumer reads the topic
from the start: lost = acknowledged (SEND_OK) minus consumed, which must be 0.

Reported per controller: kills done, messages acknowledged / lost / failed sends, kill -> first
successful send (the send's start time) p50 / p99 and kill -> controller elected p50 / p99, in ms.
--budget-s bounds each controller's kill loop (the report says how many kills ran).

Run: make interop && .venv/bin/python bench/bench_interop_kills.py [--kills 20]
     [--controllers rmqc,java,jraft] [--budget-s 600] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import trio

from rmqc.testing.interop import run_kills


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--controllers", default="rmqc,java,jraft",
                        help="comma-separated: rmqc, java (DLedger), jraft")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="stop a controller's kill loop after this long (default: no limit)")
    parser.add_argument("--keep", type=Path, help="run under this directory and keep it")
    args = parser.parse_args()
    kinds = args.controllers.split(",")
    assert set(kinds) <= {"rmqc", "java", "jraft"}, kinds
    with tempfile.TemporaryDirectory(prefix="rmqc-kills-") as tmp:
        root = args.keep or Path(tmp)
        results = []
        for kind in kinds:
            started = time.monotonic()
            (root / kind).mkdir(parents=True, exist_ok=True)
            result = trio.run(run_kills, kind, root / kind, args.kills, args.budget_s)
            result["wall_s"] = round(time.monotonic() - started, 1)
            print(json.dumps(result), flush=True)
            results.append(result)
    print("\n| controller | kills | acknowledged | lost | failed sends | kill -> first ok send p50 / p99 ms "
          "| kill -> elected p50 / p99 ms | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['controller']} | {r['kills']} | {r['acknowledged']} | {r['lost']} | {r['failed_sends']} "
              f"| {r['kill_to_first_ok_send_p50_ms']} / {r['kill_to_first_ok_send_p99_ms']} "
              f"| {r['kill_to_elected_p50_ms']} / {r['kill_to_elected_p99_ms']} | {r['wall_s']} |")
    return 1 if any(r["lost"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
