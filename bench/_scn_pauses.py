"""Issue 13: process pauses and long catch-ups must not take the cluster down.

- `pauses`: the leader, then a follower, alternately SIGSTOPped for 3 s and resumed, under a
  broker-like load of registrations (1012 then 1013; up to 300/s, ~180/s reached on the 2-core
  machine, so ~360 requests/s) (rmqc.testing.pauses); per pause the time until another
  node accepts a write (leader pauses) or the longest write gap (follower pauses), the longest
  silence of every node that was not paused, stale reads and lost writes.
- `catch_up`: a follower stopped while `catchup_entries` entries are written, then restarted
  (catching up from the log, and again with snapshots taken meanwhile): the write latency of a few
  clients while it catches up, against the same clients before it was stopped.
- `learner_catch_up`: a fourth, empty node joins a 3-node cluster holding `catchup_entries` entries
  (`rmqc serve --join`; from the log, and again from a snapshot):
  the same clients' write latency while the learner catches up, against before it joined.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
import trio

from rmqc.launcher import ServeNode, free_ports
from rmqc.testing.pauses import PauseConfig, PauseResult, PauseRun

from ._load import LoadError, RemotingConn
from ._rmqc import RMQC_PROGRAM, RmqcCluster, WriteSequence
from ._stats import fmt, summarise_ms
from ._suite import Suite, say

PAUSE_S = 3.0
PAUSE_WRITES_PER_S = 300.0
STATUS_REQUEST = 60001
FILL_CLIENTS = 64  # writes the backlog the stopped follower will have to catch up
PROBE_CLIENTS = 4  # whose latency is compared before and during the catch-up
BASELINE_S = 5.0
CATCH_UP_BOUND_S = 300.0
# The backlog is written at no less than this rate, or the fill is given up: 64 clients wrote
# ~310/s on the loaded 2-core machine (100,000 entries: 320 s, past a fixed 300 s bound)
FILL_MIN_WRITES_PER_S = 100.0
STATUS_POLL_S = 0.05


async def pauses(suite: Suite) -> dict[str, Any]:
    config = PauseConfig(pauses=suite.profile.pauses, pause_s=PAUSE_S, writes_per_s=PAUSE_WRITES_PER_S,
                         program=(RMQC_PROGRAM,))
    run = PauseRun(suite.work_dir("pauses"), config)

    def show(result: PauseResult) -> None:
        what = "write accepted elsewhere after" if result.kind == "leader" else "longest write gap"
        say(f"   pause {result.index + 1:>2} ({result.kind} {result.node}): {what} {result.recovery_ms:.0f} ms, "
            f"longest silence of the others {result.worst_silence_ms:.0f} ms (as seen "
            f"{max(result.raw_silence_ms.values(), default=0.0):.0f} ms, the harness late by up to "
            f"{result.harness_lag_ms:.0f} ms), stale reads {result.stale_reads}")

    await run.run(show)
    summary = run.summary()
    say(f"   worst over {summary['pauses']} pauses: leader pause -> write {summary['worst_leader_recovery_ms']} ms, "
        f"silence {summary['worst_silence_ms']} ms, lost {summary['lost']}, stale reads {summary['stale_reads']}")
    return {"conditions": suite.base_conditions(system="rmqc", nodes=3, fsync=suite.fsync, pause_s=PAUSE_S,
                                                writes_per_s=PAUSE_WRITES_PER_S, signal="SIGSTOP/SIGCONT",
                                                silence_probe="60001 every 10 ms per node"),
            "summary": summary, "pauses": [result.as_dict() for result in run.results],
            "stale_reads": run.stale_reads[:20], "lost": run.lost[:20], "timeline": run.timeline,
            "events": run.events}


async def _status(cluster: RmqcCluster, node: str) -> dict[str, Any] | None:
    try:
        with trio.fail_after(1):
            conn = await RemotingConn.open(cluster.address(node))
            try:
                answer = await conn.call(STATUS_REQUEST)
            finally:
                await conn.aclose()
    except (OSError, LoadError, trio.TooSlowError):
        return None
    return orjson.loads(answer.body) if answer.body else None


async def _lag(cluster: RmqcCluster, leader: str, follower: str) -> int | None:
    """How far `follower` trails, as the leader sees it: asked of `leader`, or of the node it names
    as leader if the leadership moved meanwhile (a loaded machine's fill can cost an election)."""
    status = await _status(cluster, leader)
    current = (status or {}).get("leader")
    if status is not None and status.get("role") != "leader" and current and current != leader:
        status = await _status(cluster, current)
    peer = (status or {}).get("peers", {}).get(follower)
    return None if peer is None else int(peer["lag"])


async def _timed_writes(cluster: RmqcCluster, leader: str, clients: int, stop: trio.Event,
                        samples: list[tuple[float, float]]) -> None:
    """`clients` closed loops of 1013 at the leader until `stop`: (completion time, latency ms)."""
    writes = WriteSequence(f"c{time.time_ns()}", collections.Counter())

    async def client(index: int) -> None:
        conn = await RemotingConn.open(cluster.address(leader))
        try:
            while not stop.is_set():
                sent = time.perf_counter()
                if await writes.write(conn, index):
                    done = time.perf_counter()
                    samples.append((done, (done - sent) * 1000))
        finally:
            await conn.aclose()

    async with trio.open_nursery() as nursery:
        for index in range(clients):
            nursery.start_soon(client, index)


async def _writes_for(cluster: RmqcCluster, leader: str, clients: int, seconds: float) -> list[float]:
    samples: list[tuple[float, float]] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_timed_writes, cluster, leader, clients, stop, samples)
        await trio.sleep(seconds)
        stop.set()
    return [ms for _, ms in samples]


async def _fill(cluster: RmqcCluster, leader: str, entries: int, filled: Callable[[], Awaitable[bool]]) -> float:
    """Write `entries` at the leader, until `filled()`; returns the seconds it took."""
    started = time.perf_counter()
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_timed_writes, cluster, leader, FILL_CLIENTS, stop, [])
        with trio.fail_after(max(CATCH_UP_BOUND_S, entries / FILL_MIN_WRITES_PER_S)):
            while not await filled():
                await trio.sleep(0.5)
        stop.set()
    return time.perf_counter() - started


def _lag_reached(cluster: RmqcCluster, leader: str, follower: str, entries: int) -> Callable[[], Awaitable[bool]]:
    async def filled() -> bool:
        return (await _lag(cluster, leader, follower) or 0) >= entries
    return filled


def _commit_reached(cluster: RmqcCluster, leader: str, entries: int) -> Callable[[], Awaitable[bool]]:
    async def filled() -> bool:
        return int((await _status(cluster, leader) or {}).get("commit", 0)) >= entries
    return filled


async def _during_catch_up(cluster: RmqcCluster, leader: str, follower: str,
                           start: Callable[[], Awaitable[object]]) -> tuple[list[float], float]:
    """`start()` the follower (or learner); write latencies until the leader sees it caught up, and
    how long (the start included)."""
    samples: list[tuple[float, float]] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_timed_writes, cluster, leader, PROBE_CLIENTS, stop, samples)
        started = time.perf_counter()
        await start()
        with trio.fail_after(CATCH_UP_BOUND_S):
            while await _lag(cluster, leader, follower) != 0:
                await trio.sleep(STATUS_POLL_S)
        caught_up_s = time.perf_counter() - started
        stop.set()
    return [ms for t, ms in samples if t <= started + caught_up_s], caught_up_s


async def _one_catch_up(suite: Suite, label: str, settings: Mapping[str, object]) -> dict[str, Any]:
    entries = suite.profile.catchup_entries
    cluster = RmqcCluster(suite.work_dir("catch_up"), 3, settings, name=label)
    await cluster.start()
    leader = await cluster.leader_id()
    follower = next(node for node in cluster.ids if node != leader)
    baseline = summarise_ms(await _writes_for(cluster, leader, PROBE_CLIENTS, BASELINE_S))
    cluster.procs[follower].stop()
    fill_s = await _fill(cluster, leader, entries, _lag_reached(cluster, leader, follower, entries))

    async def restart() -> None:
        cluster.spawn(follower)

    during_ms, caught_up_s = await _during_catch_up(cluster, leader, follower, restart)
    cluster.stop()
    return _catch_up_figures(label, entries, fill_s, caught_up_s, baseline, during_ms, settings)


def _catch_up_figures(label: str, entries: int, fill_s: float, caught_up_s: float, baseline: dict[str, Any],
                      during_ms: list[float], settings: Mapping[str, object]) -> dict[str, Any]:
    during = summarise_ms(during_ms)
    factor = {k: round(during[k] / baseline[k], 2) if baseline[k] else None for k in ("p50_ms", "p99_ms")}
    say(f"   {label}: {entries:,} entries behind (written in {fill_s:.0f} s), caught up in {caught_up_s:.1f} s; "
        f"write p50 {fmt(baseline['p50_ms'])} -> {fmt(during['p50_ms'])} ms, p99 {fmt(baseline['p99_ms'])} -> "
        f"{fmt(during['p99_ms'])} ms ({factor['p99_ms']}x)")
    return {"entries": entries, "fill_s": round(fill_s, 1), "caught_up_s": round(caught_up_s, 2),
            "baseline": baseline, "during": during, "factor": factor, "settings": settings}


def _catch_up_cases(entries: int) -> dict[str, dict[str, object]]:
    return {
        # no snapshot in between: every entry comes from the leader's log
        "from the log": {"snapshot_every_entries": 10 * entries},
        # snapshots (and compaction) meanwhile: a snapshot, then the log's tail
        "through a snapshot": {"snapshot_every_entries": max(1_000, entries // 10)},
    }


async def catch_up(suite: Suite) -> dict[str, Any]:
    figures = {label: await _one_catch_up(suite, label.replace(" ", "_"), settings)
               for label, settings in _catch_up_cases(suite.profile.catchup_entries).items()}
    return {"conditions": suite.base_conditions(system="rmqc", nodes=3, fsync=suite.fsync, probe_clients=PROBE_CLIENTS,
                                                fill_clients=FILL_CLIENTS, request="1013 at the leader"),
            "cases": figures}


async def _one_learner(suite: Suite, label: str, settings: Mapping[str, object]) -> dict[str, Any]:
    entries = suite.profile.catchup_entries
    cluster = RmqcCluster(suite.work_dir("learner_catch_up"), 3, settings, name=label)
    await cluster.start()
    leader = await cluster.leader_id()
    fill_s = await _fill(cluster, leader, entries, _commit_reached(cluster, leader, entries))
    # a loaded fill can cost an election: the baseline, the join and the probes go to the leader of now
    leader = await cluster.leader_id()
    baseline = summarise_ms(await _writes_for(cluster, leader, PROBE_CLIENTS, BASELINE_S))
    (port,) = free_ports(1)
    learner = ServeNode("n3", f"127.0.0.1:{port}", "", cluster.root / label / "n3", cluster.root / label / "n3.log",
                        tuple(f"{option}={value}" for option, value in cluster.settings.items()),
                        join=cluster.address(leader))
    cluster.nodes.append(learner)

    async def join() -> None:
        """`rmqc serve --join`: the empty node asks the leader to add it as a learner."""
        learner.spawn()
        with trio.fail_after(CATCH_UP_BOUND_S):
            while await _lag(cluster, leader, "n3") is None:  # not yet among the leader's peers
                await trio.sleep(STATUS_POLL_S)

    during_ms, caught_up_s = await _during_catch_up(cluster, leader, "n3", join)
    cluster.stop()
    return _catch_up_figures(label, entries, fill_s, caught_up_s, baseline, during_ms, settings)


async def learner_catch_up(suite: Suite) -> dict[str, Any]:
    figures = {label: await _one_learner(suite, "learner_" + label.replace(" ", "_"), settings)
               for label, settings in _catch_up_cases(suite.profile.catchup_entries).items()}
    return {"conditions": suite.base_conditions(system="rmqc", nodes="3 voters + 1 learner", fsync=suite.fsync,
                                                probe_clients=PROBE_CLIENTS, fill_clients=FILL_CLIENTS,
                                                request="1013 at the leader",
                                                join="rmqc serve --join (60005 from the new node)"),
            "cases": figures}
