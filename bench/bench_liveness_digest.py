"""CPU cost of the follower -> leader liveness digest, per broker row: a follower's take_digest +
to_bytes, and the leader's Digest.from_bytes + merge_digest into a table that knows every broker
(the steady state: each heartbeat a follower hears is relayed once). Median of --runs.

Run: .venv/bin/python bench/bench_liveness_digest.py [--brokers 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rmqc.liveness import BrokerKey, Digest, Heartbeat, HeartbeatTable


def heartbeats(count: int) -> list[Heartbeat]:
    return [Heartbeat(BrokerKey("C", f"g{i // 3:05d}", i % 3 + 1), f"10.0.{i // 250 % 250}.{i % 250}:10911",
                      10_000, 1, 100, 100, 1) for i in range(count)]


def one_round(follower: HeartbeatTable, leader: HeartbeatTable, beats: list[Heartbeat],
              now_ms: int) -> tuple[float, float]:
    for beat in beats:
        follower.update(beat, now_ms, channel_id=1)
    started = time.process_time()
    data = follower.take_digest(now_ms + 1).to_bytes()
    taken = time.process_time()
    leader.merge_digest(Digest.from_bytes(data), now_ms + 5)
    merged = time.process_time()
    return (taken - started) / len(beats) * 1e6, (merged - taken) / len(beats) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    beats = heartbeats(args.brokers)
    follower, leader = HeartbeatTable(), HeartbeatTable()
    for beat in beats:
        leader.update(beat, 0)
    rounds = [one_round(follower, leader, beats, 10 * (run + 1)) for run in range(args.runs)]
    take = statistics.median(r[0] for r in rounds)
    merge = statistics.median(r[1] for r in rounds)
    print(f"{args.brokers:,} rows: follower take+encode {take:.2f} us/row, leader decode+merge {merge:.2f} us/row "
          f"(median of {args.runs}, CPU time)")


if __name__ == "__main__":
    main()
