"""Rolling restarts with graceful stops (issue 33): a 3-node `rmqc serve` cluster, --writers clients
registering brokers (rmqc.testing.writer) as fast as they are answered, and --rounds rolling
restarts, each restarting every node once, followers first and the leader last, with SIGTERM only
(no `transfer-leader` first: the leader's graceful stop hands its role over). For each node
restart: the write pause (the longest stretch without an acknowledged write from the SIGTERM until
the first write acknowledged after the node was back and caught up), split by followers and
leaders, and how long the process took to stop. Prints p50/p99/max; fails on a lost acknowledged
write or a write answered with an error.

Run: .venv/bin/python bench/bench_rolling_restart.py [--rounds N] [--writers N] [--settle-ms MS]
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stats import fmt, summarise_ms
from rmqc.client import ControllerClient
from rmqc.remoting import RMQC_NODE_STATUS
from rmqc.testing.cluster import Cluster, NodeProcess
from rmqc.testing.writer import WriteLoad

CATCH_UP_S = 30.0
ACK_WAIT_S = 10.0


async def status_of(client: ControllerClient, address: str) -> dict[str, object]:
    answer = await client.request(RMQC_NODE_STATUS, None, address=address)
    assert answer is not None and answer.body is not None
    return dict(orjson.loads(answer.body))


async def caught_up(client: ControllerClient, node: NodeProcess) -> None:
    """`node` follows a serving leader and has applied what that leader had committed."""
    with trio.fail_after(CATCH_UP_S):
        while True:
            status = await status_of(client, node.address)
            leader = status.get("leaderAddress")
            if status.get("role") == "follower" and isinstance(leader, str):
                target = await status_of(client, leader)
                if target.get("servingAsLeader") and int(str(status["applied"])) >= int(str(target["commit"])):
                    return
            await trio.sleep(0.02)


async def measure(root: Path, rounds: int, writers: int, settle_s: float) -> dict[str, object]:
    cluster = Cluster.create(root, 3)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=8000, max_retries=10) as admin:
            load = WriteLoad(cluster.addresses, clients=writers)
            pauses: dict[str, list[float]] = {"follower": [], "leader": []}
            stops: dict[str, list[float]] = {"follower": [], "leader": []}
            failures: list[str] = []
            async with trio.open_nursery() as nursery:
                await nursery.start(load.run)
                for number in range(rounds):
                    leader = await cluster.wait_leader(admin)
                    order = [n for n in cluster.nodes if n.address != leader] + [cluster.node(leader)]
                    for node in order:
                        role = "leader" if node.address == leader else "follower"
                        await trio.sleep(settle_s)  # steady writes before each restart
                        started = time.perf_counter()
                        node.kill(signal.SIGTERM)
                        code = await node.wait_exit()
                        stopped = time.perf_counter()
                        if code != 0:
                            raise SystemExit(f"{node.node_id} exited {code}: {node.log_tail()}")
                        await node.start()
                        await caught_up(admin, node)
                        back = time.perf_counter()
                        with trio.fail_after(ACK_WAIT_S):
                            while load.ack_times[-1] <= back:
                                await trio.sleep(0.005)
                        pauses[role].append(load.pause_s(started, back) * 1000)
                        stops[role].append((stopped - started) * 1000)
                        failures += load.failures_between(started, time.perf_counter())
                        print(f"round {number + 1}: {role} {node.node_id} stopped in {stops[role][-1]:.0f} ms, "
                              f"writes paused {pauses[role][-1]:.1f} ms", file=sys.stderr)
                nursery.cancel_scope.cancel()
            lost = await load.lost_writes(admin)
        return {"rounds": rounds, "writers": writers, "acknowledged_writes": len(load.ack_times),
                "lost_writes": lost, "failed_writes": failures,
                "write_pause_follower": summarise_ms(pauses["follower"]),
                "write_pause_leader": summarise_ms(pauses["leader"]),
                "write_pause_any": summarise_ms(pauses["follower"] + pauses["leader"]),
                "stop_follower": summarise_ms(stops["follower"]), "stop_leader": summarise_ms(stops["leader"])}
    finally:
        await cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--settle-ms", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rolling-") as root:
        result = trio.run(measure, Path(root), args.rounds, args.writers, args.settle_ms / 1000)
    for name in ("write_pause_follower", "write_pause_leader", "write_pause_any", "stop_follower", "stop_leader"):
        figures = result[name]
        assert isinstance(figures, dict)
        print(f"{name:21} n={figures['n']} p50 {fmt(figures['p50_ms'])} ms  p99 {fmt(figures['p99_ms'])} ms  "
              f"max {fmt(figures['max_ms'])} ms")
    print(orjson.dumps(result).decode())
    if result["lost_writes"]:
        raise SystemExit(f"acknowledged writes lost: {result['lost_writes']}")
    failed = result["failed_writes"]
    if failed:
        assert isinstance(failed, list)
        raise SystemExit(f"writes answered with an error: {failed[:10]}")


if __name__ == "__main__":
    main()
