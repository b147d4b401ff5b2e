"""What installing a big snapshot costs the event loop: the one-piece restore against the stepped
decode of the chunked snapshot (format 2, rmqc.fsm._chunks).

A state of --groups broker groups (3 replicas, a master) and a NameServer part of --topics topics
(brokers of --topics-per-broker topics each, in sets of 4 brokers sharing their topics, as
bench._namesrv_fleet registers them) is encoded in steps, as format 2 (StateCapture.encode_steps)
and as version 1 (the encoder of before format 2, copied here; its bytes are format 2's without the
chunk index). Then, --runs times, a live state of the same size (a lagging follower's) is replaced
by the snapshot while a Trio task ticks every 10 ms; the ticker's longest gap (less its 10 ms) is
the longest time the event loop could not run:

- one piece, thread: ControllerState.restore(version-1 bytes), the old path, in a worker thread
  (trio.to_thread.run_sync): one orjson.loads of the whole document holds the GIL throughout.
- steps, thread: ControllerState.decode_steps(format-2 bytes) run to the end in a worker thread,
  adopt() in the loop (O(1)), then the old state freed by release_steps() in a worker thread.
- steps, loop: decode_steps in the loop itself with a checkpoint between two steps (as the node
  encodes a snapshot), adopt, release_steps the same way.
- steps, thread, freeze: as "steps, thread", with decode_steps(freeze=True): gc.freeze() after
  each step.
- steps, loop, freeze: as "steps, loop", with decode_steps(freeze=True).
- steps, freeze+unfreeze: as "steps, thread, freeze", and gc.unfreeze() in the loop once the state is adopted (the
  new state then lies in the oldest generation, as a restored one does, and nothing stays frozen).

"decode" is the time until the new state is live, "release" the old state's freeing after it (the
one-piece restore frees it within); "longest gc" the longest collection in the window (the window
ends after 100,000 allocations and 50 ms more, so that a collection the install left for later is
in it). The collector is set as `rmqc serve` sets it (rmqc._gc.tune_for_serving); between two
installs the process's objects (the bytes, the imports) are frozen again. Medians over the runs
(and the largest value).

Run: .venv/bin/python bench/bench_snapshot_install.py [--groups 100000] [--topics 250000] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time
from collections.abc import Iterator
from functools import partial
from typing import TypeVar

import orjson
import trio

from rmqc import fsm
from rmqc._gc import collector_paused, tune_for_serving
from rmqc.fsm._state import _group_to_row
from rmqc.testing.loop_gaps import record_gaps
from rmqc.testing.states import add_groups

TICK_S = 0.010
BROKERS_PER_TOPIC = 4  # as bench._namesrv_fleet
MODES = ("one piece, thread", "steps, thread", "steps, loop", "steps, thread, freeze", "steps, loop, freeze",
         "steps, freeze+unfreeze")
T = TypeVar("T")


def build_state(groups: int, topics: int, topics_per_broker: int) -> fsm.ControllerState:
    state = add_groups(fsm.ControllerState(), groups)
    for broker in range(topics * BROKERS_PER_TOPIC // topics_per_broker):
        address = f"10.{broker // 62_500 % 250}.{broker // 250 % 250}.{broker % 250}:10911"
        rows = tuple((f"nsb-topic-{broker // BROKERS_PER_TOPIC:05d}-{index:03d}", 8, 8, 6, 0)
                     for index in range(topics_per_broker))
        state.apply(fsm.RegisterBrokerRoute("DefaultCluster", f"nsb-broker-{broker:05d}", 0, address, address, 1,
                                            1_700_000_000_000, 1, rows, 0))
    return state


def encode_version_1_steps(state: fsm.ControllerState) -> Iterator[bytes | None]:
    """The version-1 encoder as the node ran it before format 2 (StateCapture.encode_steps and
    NamesrvCapture.encode_steps of then, merged): groups and topics 4,096 a step, joined."""
    capture = state.capture()
    groups, config, namesrv = capture._groups, capture._config, capture._namesrv
    parts = []
    for start in range(0, len(groups), 4096):
        with collector_paused():
            parts.append(orjson.dumps([_group_to_row(g) for g in groups[start:start + 4096]])[1:-1])
        yield None
    pieces = [b'{"version":1,"groups":[', b",".join(parts), b"]"]
    if config:
        pieces += [b',"config":', orjson.dumps(config)]
    if namesrv:
        topics = iter(namesrv.topics.items())
        topic_parts = []
        while True:
            with collector_paused():
                chunk = {topic: {name: [q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag]
                                 for name, q in queues.items()}
                         for topic, queues in itertools.islice(topics, 4096)}
                if not chunk:
                    break
                topic_parts.append(orjson.dumps(chunk)[1:-1])
            yield None
        with collector_paused():
            registrations = orjson.dumps([[r.cluster_name, r.broker_name, r.broker_id, r.address, r.ha_address,
                                           list(r.data_version)] for r in namesrv.registrations])
            pieces += [b',"namesrv":{"registrations":', registrations, b',"topics":{', b",".join(topic_parts),
                       b'},"kv":', orjson.dumps(namesrv.kv), b"}"]
    with collector_paused():
        yield b"".join([*pieces, b"}"])


def stepped_ms(steps: Iterator[bytes | None]) -> tuple[bytes, float, float]:
    """(the bytes, total ms, longest step ms) of a stepped encode."""
    longest, start = 0.0, time.perf_counter()
    while True:
        step_start = time.perf_counter()
        data = next(steps)
        longest = max(longest, time.perf_counter() - step_start)
        if data is not None:
            return data, (time.perf_counter() - start) * 1000, longest * 1000


def drain(steps: Iterator[T]) -> T | None:
    """Runs `steps` to the end (in a worker thread): the last one."""
    last = None
    for step in steps:
        last = step
    return last


async def install(live: fsm.ControllerState, v1: bytes, v2: bytes, mode: str) -> dict[str, float]:
    """One install in `mode` while a ticker runs: longest gap less 10 ms, decode and release ms,
    longest collection ms."""
    gaps: list[float] = []
    times: dict[str, float] = {}
    collections: list[float] = []
    started = [0.0]

    def timed_collection(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collections.append((time.perf_counter() - started[0]) * 1000)

    async def replace() -> None:
        start = time.perf_counter()
        if mode == "one piece, thread":
            await trio.to_thread.run_sync(live.restore, v1)
            times["decode"] = (time.perf_counter() - start) * 1000
            times["release"] = 0.0
            return
        if mode.startswith("steps, loop"):
            steps = fsm.ControllerState.decode_steps(v2, freeze=mode.endswith("freeze"))
            while (decoded := next(steps)) is None:
                await trio.lowlevel.checkpoint()
        else:
            freeze = "freeze" in mode
            decoded = await trio.to_thread.run_sync(drain, fsm.ControllerState.decode_steps(v2, freeze=freeze))
        assert isinstance(decoded, fsm.ControllerState)
        live.adopt(decoded)
        if mode.endswith("unfreeze"):
            gc.unfreeze()
        times["decode"] = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        if mode.startswith("steps, loop"):
            for _ in decoded.release_steps():
                await trio.lowlevel.checkpoint()
        else:
            await trio.to_thread.run_sync(drain, decoded.release_steps())
        del decoded
        times["release"] = (time.perf_counter() - start) * 1000

    gc.callbacks.append(timed_collection)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(record_gaps, gaps, nursery.cancel_scope, TICK_S)
            await trio.sleep(3 * TICK_S)  # the ticker runs
            await replace()
            for _ in range(100_000):  # the loop's allocations after the install
                [[]]  # noqa: B018
            await trio.sleep(5 * TICK_S)
            nursery.cancel_scope.cancel()
    finally:
        gc.callbacks.remove(timed_collection)
    return {"gap": max(gaps) - TICK_S * 1000, **times, "gc": max(collections, default=0.0)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=250_000)
    parser.add_argument("--topics-per-broker", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    state = build_state(args.groups, args.topics, args.topics_per_broker)
    built_s = time.perf_counter() - start
    registrations = len(state.namesrv.registrations)
    tune_for_serving()  # as `rmqc serve` (what exists now, the state among it, is frozen)
    encodes: dict[str, list[float]] = {}
    encoded: dict[str, bytes] = {}
    for _ in range(args.runs):
        for name, steps in (("format 2", state.capture().encode_steps),
                            ("version 1 (before)", partial(encode_version_1_steps, state))):
            gc.collect()
            encoded[name], total, longest = stepped_ms(steps())
            encodes.setdefault(f"{name}: total", []).append(total)
            encodes.setdefault(f"{name}: longest step", []).append(longest)
    v1, v2 = encoded["version 1 (before)"], encoded["format 2"]
    assert v1 == b'{"version":1' + v2[v2.index(b"]") + 1:]  # the same document, without the index
    del state
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    results: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    for _ in range(args.runs):
        for mode in MODES:
            live = fsm.ControllerState()
            live.restore(v2)  # a lagging follower's state, as big
            gc.collect()
            for part, value in trio.run(install, live, v1, v2, mode).items():
                results[mode].setdefault(part, []).append(value)
            assert live.snapshot() == v2
            del live
            gc.unfreeze()  # what the freezing mode froze is collected as usual again
            gc.collect()
            gc.freeze()
    print(f"{args.groups:,} groups, {args.topics:,} topics on {registrations:,} brokers (built in {built_s:.0f} s); "
          f"median of {args.runs} runs (max)")
    print(f"  snapshot size: version 1 {len(v1):,} B, format 2 {len(v2):,} B "
          f"(+{len(v2) - len(v1):,} B, {100 * (len(v2) - len(v1)) / len(v1):.3f} %)")
    for part, values in encodes.items():
        print(f"  encode, {part:32s} {statistics.median(values):8.1f} ms  ({max(values):.1f})")
    print(f"  {'install':22s} {'loop gap ms':>17s} {'decode ms':>17s} {'release ms':>17s} {'longest gc ms':>17s}")
    for mode, parts in results.items():
        cells = [f"{statistics.median(parts[p]):7.1f} ({max(parts[p]):7.1f})"
                 for p in ("gap", "decode", "release", "gc")]
        print(f"  {mode:22s} " + " ".join(cells))


if __name__ == "__main__":
    main()
