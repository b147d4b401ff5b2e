"""In-process CPU of a route lookup (105) through the NameServer processor: served from the node's
cache of encoded answers, and built afresh (what every lookup cost before the cache). A fleet of
broker names with a master and two slaves each (controller-managed, so the fencing lookups run);
every topic on every broker name. Prints the figures; asserts nothing about time.

    .venv/bin/python bench/bench_route_cache.py [--names 16] [--topics 1000]
"""

from __future__ import annotations

import argparse
import time

from rmqc.controller._namesrv_bodies import register_body
from rmqc.testing.controller_harness import ControllerHarness

CLUSTER = "bench"
STANDARD_JSON_CLIENT = 513  # a 5.5.0 client's request version


def build(names: int, topics: int) -> ControllerHarness:
    h = ControllerHarness()
    rows = [(f"topic-{t:05d}", 8, 8, 6, 0) for t in range(topics)]
    for n in range(names):
        name = f"broker-{n:03d}"
        addresses = [f"10.0.{n}.{r}:10911" for r in range(1, 4)]
        ids = [h.register(CLUSTER, name, address) for address in addresses]
        for broker_id, address in zip(ids, addresses, strict=True):
            h.heartbeat(CLUSTER, name, broker_id, address)
        h.request(1002, {"clusterName": CLUSTER, "brokerName": name, "brokerId": ids[0], "designateElect": False})
        for broker_id, address in zip(ids, addresses, strict=True):
            body = register_body((0, 1, 1), rows if broker_id == ids[0] else [])
            h.request(103, {"brokerName": name, "brokerAddr": address, "clusterName": CLUSTER,
                            "haServerAddr": address, "brokerId": 0 if broker_id == ids[0] else broker_id}, body)
    return h


def lookups(h: ControllerHarness, topics: int, rounds: int) -> float:
    """CPU microseconds per 105 answered."""
    cpu = time.process_time()
    for _ in range(rounds):
        for t in range(topics):
            answer = h.request(105, {"topic": f"topic-{t:05d}"}, version=STANDARD_JSON_CLIENT)
            assert answer is not None and answer.code == 0
    return (time.process_time() - cpu) / (rounds * topics) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=16)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    h = build(args.names, args.topics)
    lookups(h, args.topics, 1)  # fills the cache
    cached = lookups(h, args.topics, args.rounds)
    namesrv = h.state.namesrv

    def uncached_round() -> None:
        for t in range(args.topics):
            namesrv.forget_broker_name("broker-000")  # every topic names it: drops all answers
            h.request(105, {"topic": f"topic-{t:05d}"}, version=STANDARD_JSON_CLIENT)

    cpu = time.process_time()
    for _ in range(args.rounds):
        uncached_round()
    uncached = (time.process_time() - cpu) / (args.rounds * args.topics) * 1e6
    print(f"105 route lookup, {args.names} broker names x 3 replicas, {args.topics} topics: "
          f"cached {cached:.1f} us CPU, built afresh {uncached:.1f} us CPU ({uncached / cached:.1f}x)")


if __name__ == "__main__":
    main()
