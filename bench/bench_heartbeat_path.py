"""CPU cost of one one-way BROKER_HEARTBEAT (904) inside a node (issue 8), without sockets or Raft.

The frames are built exactly as the load generator builds them (bench/_heartbeats.py) for `--brokers`
brokers, 500 frames per chunk (one chunk per connection, as one receive). The table is filled with
one round first, so every figure is the steady state: each heartbeat refreshes a known broker.

Stages, each timed alone (CPU time, median of `--runs` runs, one round over all brokers per run):
  feed      FrameDecoder.feed over the chunks (bytes -> RemotingCommand)
  decode    heartbeat_of (extFields -> Heartbeat) over the decoded commands; before it existed this
            stage timed HEARTBEAT.decode alone (extFields -> dict of typed fields)
  update    HeartbeatTable.update with prebuilt Heartbeat tuples
  handle    ControllerProcessor.handle over the decoded commands (decode + Heartbeat + update)
  path      feed -> handle, what the node's reader runs per 904 (RequestContext built per request,
            as the node builds one)
  fast      feed -> processor.handle_heartbeat, the node's inline entry point for one-way 904s
            (only when the processor has one)
  stream    iter_feed -> handle_heartbeat: each command handled right after its frame is decoded,
            while still in the CPU cache (only when the decoder has iter_feed)

Run: .venv/bin/python bench/bench_heartbeat_path.py [--brokers N] [--runs R] [--only path,fast]
         [--baseline REV]
Prints heartbeats per CPU-second per stage; "path" is the figure issue 8 is about. `--baseline REV`
(e.g. d1d5697, the commit before the 904 work) runs the same stages against `src/` of that commit
and against this tree, one run per process, alternately, so a loaded machine skews both alike.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._heartbeats import Broker, heartbeat_chunks
from rmqc.controller import ControllerConfig, ControllerProcessor, RequestContext

try:
    from rmqc.controller._heartbeat import heartbeat_of
except ImportError:  # a --baseline tree from before the specialised decoder
    from rmqc.controller._processor import HEARTBEAT  # type: ignore[attr-defined]  # old trees only
    from rmqc.liveness import BrokerKey, Heartbeat

    def heartbeat_of(request: RemotingCommand) -> Heartbeat | None:
        h = HEARTBEAT.decode(request)
        return Heartbeat(BrokerKey(h["clusterName"], h["brokerName"], h["brokerId"]), h["brokerAddr"],
                         h["heartbeatTimeoutMills"], h["epoch"], h["maxOffset"], h["confirmOffset"],
                         h["electionPriority"])
from rmqc.fsm import ControllerState
from rmqc.liveness import HeartbeatTable
from rmqc.remoting import FrameDecoder, RemotingCommand

CLUSTER = "rmqc-bench"
START_MS = 1_700_000_000_000
ROUND_MS = 1_000  # brokers heartbeat once a second


def brokers_like_the_load(count: int) -> list[Broker]:
    """Names and addresses as bench/_scn_brokers.py makes them: three replicas per group."""
    return [Broker(CLUSTER, f"hb-{i // 3:05d}", i % 3 + 1, f"10.1.{i // 250 % 250}.{i % 250}:10911")
            for i in range(count)]


class Fixture:
    """A processor with a table already holding every broker (one round served)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.table = HeartbeatTable()
        self.processor = ControllerProcessor(ControllerConfig(), ControllerState(), self.table)
        self.commands = [decode_chunk(chunk) for chunk in chunks]
        self.now_ms = START_MS
        self.handle_commands()

    def next_round_ms(self) -> int:
        self.now_ms += ROUND_MS
        return self.now_ms

    def handle_commands(self) -> None:
        handle, now_ms = self.processor.handle, self.next_round_ms()
        for channel_id, commands in enumerate(self.commands, start=1):
            for command in commands:
                handle(command, RequestContext(now_ms, channel_id))


def decode_chunk(chunk: bytes) -> list[RemotingCommand]:
    return FrameDecoder().feed(chunk)


def stage_feed(fx: Fixture) -> Callable[[], None]:
    def run() -> None:
        for chunk in fx.chunks:
            FrameDecoder().feed(chunk)
    return run


def stage_decode(fx: Fixture) -> Callable[[], None]:
    def run() -> None:
        for commands in fx.commands:
            for command in commands:
                heartbeat_of(command)
    return run


def stage_update(fx: Fixture) -> Callable[[], None]:
    heartbeats = []
    for channel_id, commands in enumerate(fx.commands, start=1):
        for command in commands:
            heartbeat = heartbeat_of(command)
            assert heartbeat is not None, "the fixture's heartbeats all carry a brokerId"
            heartbeats.append((heartbeat, channel_id))

    def run() -> None:
        update, now_ms = fx.table.update, fx.next_round_ms()
        for heartbeat, channel_id in heartbeats:
            update(heartbeat, now_ms, channel_id)
    return run


def stage_handle(fx: Fixture) -> Callable[[], None]:
    return fx.handle_commands


def stage_path(fx: Fixture) -> Callable[[], None]:
    def run() -> None:
        handle, now_ms = fx.processor.handle, fx.next_round_ms()
        for channel_id, chunk in enumerate(fx.chunks, start=1):
            for command in FrameDecoder().feed(chunk):
                handle(command, RequestContext(now_ms, channel_id))
    return run


def stage_fast(fx: Fixture) -> Callable[[], None]:
    def run() -> None:
        handle_heartbeat, now_ms = fx.processor.handle_heartbeat, fx.next_round_ms()
        for channel_id, chunk in enumerate(fx.chunks, start=1):
            for command in FrameDecoder().feed(chunk):
                handle_heartbeat(command, now_ms, channel_id)
    return run


def stage_stream(fx: Fixture) -> Callable[[], None]:
    def run() -> None:
        handle_heartbeat, now_ms = fx.processor.handle_heartbeat, fx.next_round_ms()
        for channel_id, chunk in enumerate(fx.chunks, start=1):
            for command in FrameDecoder().iter_feed(chunk):
                handle_heartbeat(command, now_ms, channel_id)
    return run


STAGES: dict[str, Callable[[Fixture], Callable[[], None]]] = {
    "feed": stage_feed, "decode": stage_decode, "update": stage_update,
    "handle": stage_handle, "path": stage_path, "fast": stage_fast, "stream": stage_stream,
}
# What each stage needs beyond the baseline's API (a --baseline tree may not have it).
_NEEDS = {"fast": ("processor", "handle_heartbeat"), "stream": ("decoder", "iter_feed")}


def median_cpu_s(run: Callable[[], None], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return statistics.median(times)


def measure(brokers: int, runs: int, stages: list[str]) -> dict[str, float]:
    """CPU seconds per heartbeat of each stage (median of `runs`), in this process's rmqc."""
    fx = Fixture(heartbeat_chunks(brokers_like_the_load(brokers)))
    assert len(fx.table) == brokers, "every frame must reach the table"
    figures = {}
    for name in stages:
        owner, attribute = _NEEDS.get(name, ("", ""))
        if owner and not hasattr(fx.processor if owner == "processor" else FrameDecoder, attribute):
            continue  # a baseline from before the entry point existed
        figures[name] = median_cpu_s(STAGES[name](fx), runs) / brokers
    assert len(fx.table) == brokers
    return figures


def compare_with(revision: str, brokers: int, runs: int, stages: list[str]) -> None:
    """Run `src/` of `revision` and this tree alternately, one run per fresh process, `runs` times
    each, so load from elsewhere on the machine falls on both sides alike; print the medians."""
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(repo), "archive", revision, "src"], check=True,
                                 capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        sides = {f"baseline {revision}": Path(tmp) / "src", "this tree": repo / "src"}
        samples: dict[str, dict[str, list[float]]] = {label: {} for label in sides}
        for _ in range(runs):
            for label, src in sides.items():
                argv = [sys.executable, __file__, "--brokers", str(brokers), "--runs", "1",
                        "--only", ",".join(stages), "--json"]
                env = {**os.environ, "PYTHONPATH": str(src)}
                out = subprocess.run(argv, check=True, env=env, capture_output=True, text=True).stdout
                for name, seconds in json.loads(out).items():
                    samples[label].setdefault(name, []).append(seconds)
    (base_label, base), (_, this) = samples.items()
    print(f"{'stage':7s} {base_label + ' us':>22s} {'this tree us':>14s} {'speed-up':>9s}   "
          f"(median of {runs} alternating runs, {brokers} brokers)")
    for name in stages:
        before = statistics.median(base[name]) * 1e6 if name in base else None
        after = statistics.median(this[name]) * 1e6 if name in this else None
        ratio = f"{before / after:8.2f}x" if before and after else ""
        print(f"{name:7s} {before or 0:22.2f} {after or 0:14.2f} {ratio:>9s}")


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU cost of the in-process 904 path")
    parser.add_argument("--brokers", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default=",".join(STAGES), help="comma-separated stages")
    parser.add_argument("--baseline", metavar="REV", help="A/B against src/ of this git revision")
    parser.add_argument("--json", action="store_true", help="print {stage: CPU s per heartbeat} only")
    args = parser.parse_args()
    stages = args.only.split(",")
    if args.baseline:
        compare_with(args.baseline, args.brokers, args.runs, stages)
        return
    figures = measure(args.brokers, args.runs, stages)
    if args.json:
        print(json.dumps(figures))
        return
    for name, seconds in figures.items():
        print(f"{name:7s} {1 / seconds:>11,.0f} heartbeats/CPU-s  {seconds * 1e6:6.2f} us each  "
              f"(median of {args.runs} runs, {args.brokers} brokers)")


if __name__ == "__main__":
    main()
