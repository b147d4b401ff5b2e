"""Leadership transfer under load (issue 16): a 3-node `rmqc serve` cluster, --writers clients
registering brokers (1013 of fresh ids, rmqc.testing.writer) as fast as they are answered, and
--transfers `transfer-leader` requests one after another (to the most up-to-date voter). For each
transfer: how long the request took until the new leader served (the answer), and the write pause,
the longest stretch without an acknowledged write from the request until the first write the new
leader acknowledged. Prints p50/p99/max of both and checks that no acknowledged write was lost.

Run: .venv/bin/python bench/bench_transfer.py [--transfers N] [--writers N] [--settle-ms MS]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stats import fmt, summarise_ms
from rmqc.client import ControllerClient
from rmqc.remoting import RMQC_TRANSFER_LEADER
from rmqc.testing.cluster import Cluster
from rmqc.testing.writer import WriteLoad

ACK_WAIT_S = 10.0  # for the new leader's first acknowledged write


async def measure(root: Path, transfers: int, writers: int, settle_s: float) -> dict[str, object]:
    cluster = Cluster.create(root, 3)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=8000, max_retries=10) as admin:
            await cluster.wait_leader(admin)
            load = WriteLoad(cluster.addresses, clients=writers)
            async with trio.open_nursery() as nursery:
                await nursery.start(load.run)
                took_ms, pauses_ms = [], []
                for _ in range(transfers):
                    await trio.sleep(settle_s)  # steady writes before each transfer
                    started = time.perf_counter()
                    answer = await admin.request(RMQC_TRANSFER_LEADER)
                    answered = time.perf_counter()
                    assert answer is not None, "a two-way request is answered"
                    if answer.code != 0:
                        raise SystemExit(f"transfer refused: {answer.code} {answer.remark}")
                    with trio.fail_after(ACK_WAIT_S):
                        while load.ack_times[-1] <= answered:
                            await trio.sleep(0.005)
                    took_ms.append((answered - started) * 1000)
                    pauses_ms.append(load.pause_s(started, answered) * 1000)
                    if answer.body is None:
                        raise SystemExit("transfer answered without its body")
                    moved = orjson.loads(answer.body)
                    print(f"{moved['from']} -> {moved['to']} term {moved['term']}: answered in "
                          f"{took_ms[-1]:.1f} ms, writes paused {pauses_ms[-1]:.1f} ms", file=sys.stderr)
                nursery.cancel_scope.cancel()
            lost = await load.lost_writes(admin)
        return {"transfers": transfers, "writers": writers, "acknowledged_writes": len(load.ack_times),
                "lost_writes": lost, "answer": summarise_ms(took_ms), "write_pause": summarise_ms(pauses_ms)}
    finally:
        await cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transfers", type=int, default=40)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--settle-ms", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-transfer-") as root:
        result = trio.run(measure, Path(root), args.transfers, args.writers, args.settle_ms / 1000)
    for name in ("answer", "write_pause"):
        figures = result[name]
        assert isinstance(figures, dict)
        print(f"{name:12} n={figures['n']} p50 {fmt(figures['p50_ms'])} ms  p99 {fmt(figures['p99_ms'])} ms  "
              f"max {fmt(figures['max_ms'])} ms")
    print(orjson.dumps(result).decode())
    if result["lost_writes"]:
        raise SystemExit(f"acknowledged writes lost: {result['lost_writes']}")


if __name__ == "__main__":
    main()
