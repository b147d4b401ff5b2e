"""The CPU of rmqc's own logic per replicated write, three nodes in one process (issue 36's CPU item).

`bench_cpu_floor.py` measures what the network and disk work of a replicated durable write costs
three minimal Trio processes (the floor); `bench_cpu_per_write.py` what rmqc's servers cost. This
measures the part in between: rmqc's logic alone. Three Replicas (the code `rmqc serve` runs, with
in-memory Raft storage and a fake clock) serve closed-loop 1013 writes, `--clients` in flight. Each
round, as the nodes would: the leader decodes the request frames, takes them (`client_request`),
drives; every Raft message goes through the peer codec (encoded by its sender, decoded by its
receiver, a frame per sender and receiver as the links batch them); the followers step, drive
and answer; the leader commits, applies and encodes the answers. No sockets, no Trio, no disk.

Each node's CPU time (process_time around its own work) is divided by the writes answered. The
floor plus this figure is the least CPU per write any I/O design around this logic can reach, on a
node whose caches stay warm between its steps.

`--count-calls` runs once more with each node's steps under cProfile and prints the function
calls per write, by node: Python functions (each a frame the interpreter builds) and built-ins, and
the packages and functions that make the most. A count does not drift with the machine's speed as
CPU time does, so it shows a cut of a few per cent in one run (tests/bench bounds it).

`--evict-kb N` writes over N KiB of memory before every node's step (outside the timed interval),
as the other processes sharing the machine's cores do between two of a node's resumes in
`rmqc serve`: the same logic, run cold. The figure rises with N (docs/cpu-per-write.md).

Run: PYTHONPATH=src .venv/bin/python bench/bench_replicated_logic.py [--clients 1,16] [--writes N] [--runs R]
      [--evict-kb 0,4096] [--count-calls]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._rmqc import write_ext
from bench.bench_request_path import Clock
from rmqc.config import NodeConfig, parse_peers
from rmqc.fsm import Origin
from rmqc.peerwire import decode_messages, encode_messages
from rmqc.raft import MemoryStorage, Message
from rmqc.remoting import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode, make_request
from rmqc.replica import Answer, Replica, SendRaft

NODES = ("n0", "n1", "n2")
CACHE_LINE_BYTES = 64
ELECTION_BOUND_MS = 10_000


class Nodes:
    """Three replicas on one fake clock, each with its outbox and the CPU time spent on its work."""

    def __init__(self, evict_kb: int = 0) -> None:
        peers = parse_peers(";".join(f"{node}-127.0.0.1:{i + 1}" for i, node in enumerate(NODES)))
        self.clock = Clock()
        self.outboxes: dict[str, list[Any]] = {node: [] for node in NODES}
        self.replicas = {node: Replica(NodeConfig(peers=peers, node_id=node, data_dir="/nonexistent/bench"),
                                       MemoryStorage(), self.clock, random.Random(i), self.outboxes[node])
                         for i, node in enumerate(NODES)}
        self.cpu_s: dict[str, float] = dict.fromkeys(NODES, 0.0)
        self.frames: dict[str, list[tuple[str, bytes]]] = defaultdict(list)  # receiver -> (sender, frame)
        self.answers: list[bytes] = []
        self.clock_read_s = clock_read_s()
        self._evicted = bytearray(evict_kb * 1024)  # written over before each step (--evict-kb)
        self._cache_lines = b"\1" * (len(self._evicted) // CACHE_LINE_BYTES)
        self.profiles: dict[str, cProfile.Profile] | None = None  # per node, with --count-calls

    def elect(self) -> str:
        for _ in range(ELECTION_BOUND_MS):
            self.clock.now_ms += 1
            for replica in self.replicas.values():
                replica.advance_time()
            self.settle()
            leaders = [node for node, replica in self.replicas.items() if replica.serving_as_leader]
            if len(leaders) == 1:
                return leaders[0]
        raise RuntimeError(f"no leader within {ELECTION_BOUND_MS} ms")

    def timed(self, node: str, work: Callable[..., None], *args: Any) -> None:
        """`work(*args)`, its CPU time added to `node`'s, less what the clock reading itself costs
        (a system call, about 0.7 us here: 5-10 % of the figure if counted)."""
        if self._evicted:
            self._evicted[::CACHE_LINE_BYTES] = self._cache_lines  # a byte in every cache line
        started = time.process_time()
        if self.profiles is None:
            work(*args)
        else:
            self.profiles[node].runcall(work, *args)
        self.cpu_s[node] += time.process_time() - started - self.clock_read_s

    def settle(self) -> None:
        """Step every node that has something to do until nothing moves."""
        moving = True
        while moving:
            moving = False
            for node in NODES:
                if self.frames[node] or self.outboxes[node] or self.replicas[node].drive_due:
                    frames, self.frames[node] = self.frames[node], []
                    self.timed(node, self._step, node, frames)
                    moving = True

    def _step(self, node: str, frames: list[tuple[str, bytes]]) -> None:
        """What the node received, its passes, then what it sends."""
        replica = self.replicas[node]
        for sender, frame in frames:
            replica.raft_messages(sender, decode_messages(frame))
        while replica.drive_due:
            replica.drive()
        self._emit(node)

    def _emit(self, node: str) -> None:
        """The node's actions: Raft messages encoded a frame per receiver, answers encoded."""
        outbox = self.outboxes[node]
        by_receiver: dict[str, list[Message]] = defaultdict(list)
        for action in outbox:
            if isinstance(action, SendRaft):
                for message in action.messages:
                    by_receiver[message.to].append(message)
            elif isinstance(action, Answer) and action.response is not None:
                self.answers.append(encode(action.response))
        outbox.clear()
        for receiver, messages in by_receiver.items():
            self.frames[receiver].append((node, encode_messages(messages)))


def clock_read_s(reads: int = 20_000) -> float:
    """The CPU time one process_time() reading costs, what each timed interval holds beyond its work."""
    started = time.process_time()
    for _ in range(reads):
        time.process_time()
    return (time.process_time() - started) / reads


def one_run(clients: int, writes: int, run: int, evict_kb: int = 0,
            profiles: dict[str, cProfile.Profile] | None = None) -> dict[str, float]:
    """CPU microseconds per write, by node (the leader first) and in all. With `profiles` (empty),
    each node's steps after the election run under a profile of its own, left there by part."""
    nodes = Nodes(evict_kb)
    leader = nodes.elect()
    nodes.cpu_s = dict.fromkeys(NODES, 0.0)
    if profiles is not None:
        nodes.profiles = {node: cProfile.Profile() for node in NODES}
    nodes.answers.clear()
    decoder, origin = FrameDecoder(), Origin(None, "127.0.0.1:40000", leader)
    replica = nodes.replicas[leader]

    def take_requests(first: int) -> None:
        frames = b"".join(encode(make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, first + client,
                                              write_ext(f"r{run}", client, first // clients)))
                          for client in range(clients))
        for command in decoder.iter_feed(frames):
            replica.client_request(command, 1, command.opaque, origin)

    rounds = range(0, writes, clients)
    for first in rounds:
        nodes.clock.now_ms += 1
        for node_replica in nodes.replicas.values():
            node_replica.advance_time()  # heartbeats and ticks, as the nodes' timers would
        nodes.timed(leader, take_requests, first)
        nodes.settle()
    check(nodes.answers, len(rounds) * clients)
    followers = [node for node in NODES if node != leader]
    parts = {"leader": leader, "follower 1": followers[0], "follower 2": followers[1]}
    per_write = {part: nodes.cpu_s[node] * 1e6 / len(nodes.answers) for part, node in parts.items()}
    if profiles is not None and nodes.profiles is not None:
        profiles.update({part: nodes.profiles[node] for part, node in parts.items()})
    per_write["all three"] = sum(per_write.values())
    return per_write


@dataclass(frozen=True)
class CallCount:
    """Function calls per write in one node's steps: Python functions (this harness's own left
    out) and built-ins (those the harness calls included: a few per step), and where they are."""

    python: float
    builtin: float
    by_package: dict[str, float]
    top: list[tuple[float, str]]  # (calls per write, "file:line function"), most first


def call_count(profile: cProfile.Profile, writes: int, top: int = 12) -> CallCount:
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    python = builtin = 0
    by_package: Counter[str] = Counter()
    functions: list[tuple[float, str]] = []
    for (path, line, name), (_, calls, *_rest) in stats.items():
        if path == "~":
            builtin += calls
            continue
        if path == __file__:
            continue
        python += calls
        package = path.split("/rmqc/")[1].split("/")[0] if "/rmqc/" in path else Path(path).name
        by_package[package] += calls
        functions.append((calls / writes, f"{Path(path).name}:{line} {name}"))
    functions.sort(reverse=True)
    return CallCount(python / writes, builtin / writes,
                     {package: calls / writes for package, calls in by_package.most_common()}, functions[:top])


def count_calls(clients: int, writes: int) -> dict[str, CallCount]:
    profiles: dict[str, cProfile.Profile] = {}
    one_run(clients, writes, 0, profiles=profiles)
    return {part: call_count(profile, writes) for part, profile in profiles.items()}


def print_call_counts(clients: int, counts: dict[str, CallCount]) -> None:
    print(f"{clients} clients, function calls per write (cProfile):")
    for part, count in counts.items():
        packages = ", ".join(f"{package} {calls:.0f}" for package, calls in list(count.by_package.items())[:6])
        print(f"  {part:12s} Python {count.python:6.1f}, built-in {count.builtin:6.1f}   ({packages})")
    print(f"  all three    Python {sum(c.python for c in counts.values()):6.1f}, "
          f"built-in {sum(c.builtin for c in counts.values()):6.1f}")
    for part, count in counts.items():
        print(f"  most called on the {part}: " + "; ".join(f"{where} {calls:.1f}" for calls, where in count.top[:8]))


def check(answers: list[bytes], expected: int) -> None:
    """Every write was answered SUCCESS: the figures are of the path that writes."""
    responses: list[RemotingCommand] = FrameDecoder().feed(b"".join(answers))
    refused = {(r.code, r.remark) for r in responses if r.code != ResponseCode.SUCCESS}
    if len(responses) != expected or refused:
        raise RuntimeError(f"{len(responses)} answers to {expected} writes; refused: {sorted(refused)[:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,16", help="comma-separated writes in flight")
    parser.add_argument("--writes", type=int, default=8_192)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--evict-kb", default="0", help="comma-separated KiB written over before each node's step")
    parser.add_argument("--count-calls", action="store_true", help="also the function calls per write, by node")
    args = parser.parse_args()
    print(f"rmqc's logic per replicated write, 3 nodes in one process, {args.writes:,} writes a run; "
          f"median of {args.runs} runs, us of CPU per write")
    evictions = [int(text) for text in args.evict_kb.split(",")]
    for clients in (int(text) for text in args.clients.split(",")):
        # the settings alternate run by run, so each sees the machine's speed drift alike
        runs: dict[int, list[dict[str, float]]] = {evict_kb: [] for evict_kb in evictions}
        for run in range(args.runs):
            for evict_kb in evictions:
                runs[evict_kb].append(one_run(clients, args.writes, run, evict_kb))
        for evict_kb, per_run in runs.items():
            print(f"{clients} clients" + (f", {evict_kb:,} KiB written over before each step:" if evict_kb else ":"))
            for part in per_run[0]:
                figures = [per_write[part] for per_write in per_run]
                print(f"  {part:12s} {statistics.median(figures):8.1f}   runs "
                      + " ".join(f"{f:.1f}" for f in figures))
        if args.count_calls:
            print_call_counts(clients, count_calls(clients, args.writes))

if __name__ == "__main__":
    main()
