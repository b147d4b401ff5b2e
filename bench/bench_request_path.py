"""CPU per durable write (1013 APPLY_BROKER_ID) on the leader's request path, in-process (issue 21).

A one-node leader Replica (in-memory Raft storage, fake clock) serves rounds of `--clients`
requests the way the node does at that many clients: their frames are decoded from one buffer,
each goes to `client_request` (processor, command, proposal), one driver pass proposes them as one
append, persists, applies and answers them, and every answer is encoded. Each stage's CPU time is
summed over all rounds; the figures printed are microseconds of CPU per request, the median of
`--runs` runs; "of which gc" is the cyclic collector's part of the total (`--no-gc` turns it off
for steadier stage figures). No sockets, no trio, no fsync: only the Python a request costs on
its way through.

Run: PYTHONPATH=src .venv/bin/python bench/bench_request_path.py [--requests N] [--clients C]
      [--runs R] [--groups G] [--no-gc | --gc-threshold T] [--profile] [--against COMMIT]
`--against COMMIT` prints COMMIT's figures first, then this tree's: the before/after of a change.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._rmqc import write_ext
from rmqc.config import NodeConfig, parse_peers
from rmqc.fsm import ApplyBrokerId, Origin
from rmqc.raft import MemoryStorage
from rmqc.remoting import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode, make_request
from rmqc.replica import Answer, Replica

STAGES = ("decode", "client_request", "drive", "encode_answer")


@dataclass
class Clock:
    now_ms: int = 1_000_000

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_ms(self) -> int:
        return 1_700_000_000_000 + self.now_ms


@dataclass
class Run:
    cpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    requests: int = 0
    gc_s: float = 0.0  # the cyclic collector's share of the stages' time
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])  # by generation


class CollectorTime:
    """CPU time spent in the cyclic collector while in use (a gc callback)."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self.collections = [0, 0, 0]  # by generation
        self._started_s = 0.0

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started_s = time.process_time()
        else:
            self.total_s += time.process_time() - self._started_s
            self.collections[info["generation"]] += 1


def leader() -> tuple[Replica, list[object], Clock]:
    clock, outbox = Clock(), cast(list[object], [])
    config = NodeConfig(peers=parse_peers("n0-127.0.0.1:9878"), data_dir="/nonexistent/bench")
    replica = Replica(config, MemoryStorage(), clock, random.Random(1), outbox)
    for _ in range(200):
        clock.now_ms += 10
        replica.advance_time()
        while replica.drive_due:
            replica.drive()
        if replica.serving_as_leader:
            outbox.clear()
            return replica, outbox, clock
    raise RuntimeError("the one-node replica did not become leader")


def rounds_of_frames(requests: int, clients: int, run: int) -> list[bytes]:
    """The request frames, `clients` per round (each client has one request in flight), each
    round in one buffer as the connections' reads would bring them."""
    rounds = []
    for first in range(0, requests, clients):
        frames = []
        for client in range(min(clients, requests - first)):
            seq = first // clients
            ext = write_ext(f"r{run}", client, seq)
            frames.append(encode(make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, first + client, ext)))
        rounds.append(b"".join(frames))
    return rounds


def hold_groups(replica: Replica, groups: int) -> None:
    """Give the leader's state `groups` broker groups of 3 brokers (as a controller holding a
    fleet has): the heap the cyclic collector's full collections walk."""
    replica.state.apply_all([ApplyBrokerId("held", f"held-{n}", broker_id, f"10.9.{n % 250}.{broker_id}:10911",
                                           f"10.9.{n % 250}.{broker_id}:10911;1", 1)
                             for n in range(groups) for broker_id in (1, 2, 3)])


def one_run(requests: int, clients: int, run: int, groups: int = 0, profiler: cProfile.Profile | None = None) -> Run:
    replica, outbox, clock = leader()
    hold_groups(replica, groups)
    gc.collect()  # the garbage of the run before is not this run's
    rounds = rounds_of_frames(requests, clients, run)
    decoder = FrameDecoder()
    origin = Origin(None, "127.0.0.1:40000", "n0")
    result = Run()
    answered: list[bytes] = []

    def deliver(response: RemotingCommand | None) -> None:
        # the node's Answer action: the token is the connection's respond callback
        if response is not None:
            answered.append(encode(response))

    if profiler is not None:
        profiler.enable()
    with CollectorTime() as collector:
        serve_rounds(replica, outbox, clock, rounds, decoder, origin, deliver, result)
    result.gc_s, result.collections = collector.total_s, collector.collections
    if profiler is not None:
        profiler.disable()
    check(answered, requests)
    return result


def serve_rounds(replica: Replica, outbox: list[object], clock: Clock, rounds: list[bytes], decoder: FrameDecoder,
                 origin: Origin, deliver: Callable[[RemotingCommand | None], None], result: Run) -> None:
    """Each round as the node serves it (decode, client_request, driver passes, answers); the CPU
    time of each stage added to `result`."""
    tick = time.process_time
    for frames in rounds:
        clock.now_ms += 1
        t0 = tick()
        commands = list(decoder.iter_feed(frames))
        t1 = tick()
        for command in commands:
            replica.client_request(command, 1, deliver, origin)
        t2 = tick()
        while replica.drive_due:
            replica.drive()
        t3 = tick()
        for action in outbox:
            if isinstance(action, Answer):
                token: Callable[[RemotingCommand | None], None] = action.token  # type: ignore[assignment]
                token(action.response)
        outbox.clear()
        t4 = tick()
        for stage, seconds in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            result.cpu_s[stage] += seconds
        result.requests += len(commands)


def check(answered: list[bytes], requests: int) -> None:
    """Every request was answered SUCCESS (the figures are of the path that writes)."""
    responses = FrameDecoder().feed(b"".join(answered))
    if len(responses) != requests or any(r.code != ResponseCode.SUCCESS for r in responses):
        codes = sorted({(r.code, r.remark) for r in responses if r.code != ResponseCode.SUCCESS})
        raise RuntimeError(f"{len(responses)} answers to {requests} requests; refused: {codes[:3]}")


def run_against(commit: str, argv: list[str]) -> None:
    """The same figures for `commit`'s src (git archive into a temporary directory), then for
    this tree's: each in a process of its own, with the same arguments."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "-C", str(root), "archive", commit, "src"], check=True,
                             capture_output=True, timeout=60).stdout
    with tempfile.TemporaryDirectory(prefix="rmqc-bench-") as before:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(before, filter="data")
        for label, src in ((f"before: {commit}", Path(before) / "src"), ("after: this tree", root / "src")):
            print(label, flush=True)
            subprocess.run([sys.executable, __file__, *argv], env={**os.environ, "PYTHONPATH": str(src)},
                           check=True, timeout=3600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_480)
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="one more run under cProfile; print its top")
    parser.add_argument("--groups", type=int, default=0, help="broker groups (3 brokers each) the state holds")
    parser.add_argument("--no-gc", action="store_true", help="cyclic collector off (steadier stage figures)")
    parser.add_argument("--gc-threshold", type=int, default=0,
                        help="the collector's first threshold (0: Python's default), what serve would set")
    parser.add_argument("--against", metavar="COMMIT", default="",
                        help="print the figures of COMMIT's src first, then this tree's (same arguments)")
    args = parser.parse_args()
    if args.against:
        at = sys.argv.index("--against")
        run_against(args.against, sys.argv[1:at] + sys.argv[at + 2:])
        return
    if args.no_gc:
        gc.disable()
    if args.gc_threshold:
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    runs = [one_run(args.requests, args.clients, run, args.groups) for run in range(args.runs)]
    print(f"{args.requests:,} requests, {args.clients} per round, {args.groups:,} groups held, gc thresholds "
          f"{gc.get_threshold()} (median of {args.runs} runs, us CPU per request)")
    for stage in STAGES:
        per_request = [r.cpu_s[stage] / r.requests * 1e6 for r in runs]
        print(f"  {stage:16s} {statistics.median(per_request):7.2f}   runs "
              + " ".join(f"{v:.2f}" for v in per_request))
    totals = [sum(r.cpu_s.values()) / r.requests * 1e6 for r in runs]
    print(f"  {'total':16s} {statistics.median(totals):7.2f}   runs " + " ".join(f"{v:.2f}" for v in totals))
    collector = [r.gc_s / r.requests * 1e6 for r in runs]
    print(f"  {'of which gc':16s} {statistics.median(collector):7.2f}   runs "
          + " ".join(f"{v:.2f}" for v in collector))
    # steadier than the time: how often the objects requests keep alive fill the young generation
    per_thousand = [count * 1000 / runs[-1].requests for count in runs[-1].collections]
    print("  collections per 1,000 requests, by generation: " + " / ".join(f"{v:.1f}" for v in per_thousand))
    if args.profile:
        profiler = cProfile.Profile()
        one_run(args.requests, args.clients, args.runs, args.groups, profiler)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
