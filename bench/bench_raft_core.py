"""Committed proposals per second through a 3-node in-memory Raft cluster (pure core, no I/O).

Two shapes: one proposal per Ready cycle (the single-queue design), and group commit (propose_batch
of B payloads per cycle). Every cycle runs each node's Ready loop (persist to MemoryStorage -> send ->
apply -> advance) and delivers messages until the cluster is quiet.

Run: .venv/bin/python bench/bench_raft_core.py [--seconds S] [--payload-bytes N]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import deque

from rmqc.raft import Config, MemoryStorage, Message, RawNode, Role

IDS = ("n1", "n2", "n3")


class Cluster:
    def __init__(self) -> None:
        self.storages = {i: MemoryStorage() for i in IDS}
        self.nodes = {
            i: RawNode(Config(id=i), self.storages[i], random.Random(i), IDS) for i in IDS
        }
        self.applied = dict.fromkeys(IDS, 0)
        self.queue: deque[Message] = deque()

    def cycle(self) -> None:
        """Ready loops and deliveries until nothing moves."""
        while True:
            for node_id, node in self.nodes.items():
                while node.has_ready():
                    rd = node.ready()
                    self.storages[node_id].save(rd.hard_state, rd.entries, rd.snapshot)
                    self.queue.extend(rd.messages)
                    self.queue.extend(rd.persist_messages)
                    self.applied[node_id] += sum(1 for e in rd.committed_entries if e.data)
                    node.advance(rd)
            if not self.queue:
                return
            while self.queue:
                m = self.queue.popleft()
                self.nodes[m.to].step(m)


def run(batch: int, seconds: float, payload: bytes) -> tuple[float, float, int]:
    """Returns (committed per wall second, committed per CPU second, committed)."""
    cluster = Cluster()
    leader = cluster.nodes["n1"]
    leader.campaign()
    cluster.cycle()
    assert leader.raft.role is Role.LEADER
    proposed = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        if batch == 1:
            leader.propose(payload)
        else:
            leader.propose_batch([payload] * batch)
        proposed += batch
        cluster.cycle()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    committed = min(cluster.applied.values())
    assert committed == proposed, (committed, proposed)
    return committed / elapsed, committed / cpu, committed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--payload-bytes", type=int, default=128)
    args = parser.parse_args()
    payload = b"x" * args.payload_bytes
    print(f"3-node in-memory cluster, {args.payload_bytes} B payloads, {args.seconds:.1f} s per shape")
    print("(per CPU second is the figure to compare on a shared machine; wall is what you got)")
    base = None
    for batch in (1, 16, 128, 1024):
        wall_rate, cpu_rate, committed = run(batch, args.seconds, payload)
        base = base or cpu_rate
        label = "propose() per Ready cycle" if batch == 1 else f"propose_batch({batch})"
        print(f"{label:>28}: {cpu_rate:10,.0f}/CPU-s {wall_rate:10,.0f}/wall-s "
              f"({committed:,} committed, {cpu_rate / base:5.1f}x)")


if __name__ == "__main__":
    main()
