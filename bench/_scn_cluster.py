"""Controller failover and restart: the leader killed with SIGKILL until a write is accepted again,
and a node restarted on a long history until it serves again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import trio

from rmqc import fsm
from rmqc.raft import ConfState, Entry, HardState
from rmqc.remoting import RequestCode, ResponseCode
from rmqc.storage import LmdbStorage

from ._java import Controllers
from ._load import LoadError, RemotingConn
from ._rmqc import IDS_PER_GROUP, RmqcCluster, write_ext
from ._stats import fmt, summarise_ms
from ._suite import Suite, say

WRITE_ATTEMPT_TIMEOUT_S = 0.25  # one write attempt during a failover; a lost one is retried
RETRY_PAUSE_S = 0.002
FAILOVER_BOUND_S = 30.0  # a failover slower than this is reported as a failure, not waited for


async def first_write_after(cluster: Controllers, survivors: list[str], t0: float,
                            timeline: list[tuple[float, str, str]]) -> float:
    """Seconds from t0 until any survivor accepts a durable write; every attempt goes to `timeline`."""
    run = f"k{int(time.time() * 1000)}"
    accepted_at: list[float] = []

    async def keep_writing(node: str, index: int, cancel: trio.CancelScope) -> None:
        conn = None
        seq = 0
        while True:
            outcome = "ok"
            try:
                if conn is None:
                    conn = await RemotingConn.open(cluster.address(node))
                with trio.fail_after(WRITE_ATTEMPT_TIMEOUT_S):
                    ext = write_ext(run, index, seq * IDS_PER_GROUP)  # id 1 of a fresh set: valid whatever came before
                    response = await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext)
                outcome = "accepted" if response.code == ResponseCode.SUCCESS else f"code {response.code}"
            except (OSError, LoadError, trio.TooSlowError) as error:
                outcome = type(error).__name__
                conn = None
            seq += 1
            now = time.perf_counter()
            timeline.append((round((now - t0) * 1000, 2), node, outcome))
            if outcome == "accepted":
                accepted_at.append(now)
                cancel.cancel()
                return
            await trio.sleep(RETRY_PAUSE_S)

    with trio.move_on_after(FAILOVER_BOUND_S):
        async with trio.open_nursery() as nursery:
            for index, node in enumerate(survivors):
                nursery.start_soon(keep_writing, node, index, nursery.cancel_scope)
    if not accepted_at:
        raise RuntimeError(f"no write accepted within {FAILOVER_BOUND_S} s of the kill")
    return min(accepted_at) - t0


async def leader_kill(suite: Suite) -> dict[str, Any]:
    cluster = RmqcCluster(suite.work_dir("leader_kill"), 3)
    await cluster.start()
    samples_ms: list[float] = []
    timelines: list[list[tuple[float, str, str]]] = []
    for kill in range(suite.profile.leader_kills):
        leader = await cluster.leader_id()
        survivors = [node for node in cluster.ids if node != leader]
        timeline: list[tuple[float, str, str]] = []
        t0 = time.perf_counter()
        cluster.procs[leader].kill()  # SIGKILL, a crash
        samples_ms.append(await first_write_after(cluster, survivors, t0, timeline) * 1000)
        timelines.append(timeline)
        say(f"   kill {kill + 1:>2}: leader {leader} -> write accepted after {samples_ms[-1]:.0f} ms")
        await cluster.restart(leader)
        await cluster.leader_id()
    cluster.stop()
    summary = summarise_ms(samples_ms)
    say(f"   leader kill -> first write accepted: p50 {fmt(summary['p50_ms'])} ms  p99 {fmt(summary['p99_ms'])} ms "
        f"over {len(samples_ms)} kills")
    middle = sorted(range(len(samples_ms)), key=samples_ms.__getitem__)[len(samples_ms) // 2]
    return {"conditions": suite.base_conditions(system="rmqc", nodes=3, fsync=suite.fsync, kills=len(samples_ms),
                                                signal="SIGKILL", probe="1013 to both survivors every ~2 ms"),
            "summary": summary, "samples_ms": [round(s, 2) for s in samples_ms],
            "timeline_median_kill": timelines[middle]}


def build_history(directory: Path, entries: int, groups: int, snapshot: bool, keep: int = 1_000) -> dict[str, Any]:
    """A single-node history of `entries` entries (1013 for each broker of `groups` groups, then
    1003 address changes), written with LmdbStorage; with `snapshot`, the state at the last entry
    is saved as a snapshot and the log compacted to the last `keep` entries."""
    shutil.rmtree(directory, ignore_errors=True)
    started = time.perf_counter()
    state = fsm.ControllerState()
    batch: list[Entry] = []
    with LmdbStorage(directory, sync=False) as storage:
        storage.save_conf_state(ConfState(voters=("n0",)))
        for index in range(1, entries + 1):
            command = history_command(index, groups)
            state.apply(command)
            batch.append(Entry(index, 1, data=fsm.encode_commands([command])))
            if len(batch) == 10_000 or index == entries:
                storage.save(HardState(term=1, vote="n0", commit=index), batch)
                batch = []
        if snapshot:
            storage.create_snapshot(entries, ConfState(voters=("n0",)), state.snapshot())
            storage.compact(max(1, entries - keep))
    return {"entries": entries, "groups": groups, "snapshot": snapshot,
            "build_s": round(time.perf_counter() - started, 1),
            "file_mb": round((directory / "data.mdb").stat().st_size / 1e6, 1), "state_groups": len(state)}


def history_command(index: int, groups: int) -> fsm.Command:
    registrations = groups * 3
    slot = (index - 1) % registrations
    group, broker_id = divmod(slot, 3)
    name = f"broker-{group:05d}"
    address = f"10.{group // 250 % 250}.{group % 250}.{broker_id + 1}:{10911 + (index // registrations) % 2}"
    if index <= registrations:
        return fsm.ApplyBrokerId("DefaultCluster", name, broker_id + 1, address, f"{address};{index}", index)
    return fsm.UpdateBrokerAddress("DefaultCluster", name, broker_id + 1, address, index)


async def serve_time(suite: Suite, name: str, directory: Path) -> dict[str, float]:
    """Seconds from spawning `rmqc serve` on `directory` until it listens and until it accepts a write."""
    cluster = RmqcCluster(suite.work_dir("restart"), 1, name=name)
    cluster.node("n0").data_dir = directory
    t0 = time.perf_counter()
    proc = cluster.spawn("n0")
    await cluster.wait_listening("n0", timeout_s=300)
    listening_s = time.perf_counter() - t0
    await cluster.wait_writable(300)
    serving_s = time.perf_counter() - t0
    rss = proc.rss_mb()
    cluster.stop()
    return {"listening_s": round(listening_s, 3), "serving_s": round(serving_s, 3), "rss_mb": rss or 0.0}


async def serve_time_in_process(directory: Path) -> dict[str, float]:
    """The same, with the node started inside this process: what the history costs without the
    interpreter start-up and imports that dominate a process start on a loaded machine."""
    from rmqc.config import NodeConfig, parse_peers
    from rmqc.launcher import free_ports
    from rmqc.node import ControllerNode

    (port,) = free_ports(1)
    config = NodeConfig(node_id="n0", peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(directory))
    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        await nursery.start(ControllerNode(config).run)
        listening_s = time.perf_counter() - t0
        with trio.fail_after(300):
            while not await _accepts_write(f"127.0.0.1:{port}"):
                await trio.sleep(0.005)
        serving_s = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    return {"listening_s": round(listening_s, 3), "serving_s": round(serving_s, 3)}


async def _accepts_write(address: str) -> bool:
    try:
        conn = await RemotingConn.open(address)
        try:
            ext = write_ext(f"r{time.time_ns()}", 0, 0)
            return (await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext)).code == ResponseCode.SUCCESS
        finally:
            await conn.aclose()
    except (OSError, LoadError):
        return False


async def restart_history(suite: Suite) -> dict[str, Any]:
    work = suite.work_dir("restart")
    entries = suite.profile.restart_entries
    groups = min(10_000, max(10, entries // 100))
    figures: dict[str, Any] = {}
    empty = work / "empty"
    shutil.rmtree(empty, ignore_errors=True)
    figures["empty"] = await serve_time(suite, "empty", empty)
    shutil.rmtree(empty, ignore_errors=True)
    figures["empty"]["in_process"] = await serve_time_in_process(empty)
    say(f"   empty data dir: listening {figures['empty']['listening_s']:.2f} s, "
        f"serving {figures['empty']['serving_s']:.2f} s (interpreter start-up included)")
    for label, snapshot in (("snapshot + compacted log", True), ("full log, no snapshot", False)):
        directory = work / ("snap" if snapshot else "full")
        built = await trio.to_thread.run_sync(build_history, directory, entries, groups, snapshot)
        timing = await serve_time(suite, "snap" if snapshot else "full", directory)
        history_cost_s = round(timing["serving_s"] - figures["empty"]["serving_s"], 3)
        figures[label] = {**built, **timing, "history_cost_s": history_cost_s}
        if snapshot:
            figures[label]["in_process"] = await serve_time_in_process(directory)
            say(f"   {label}, node started inside the harness process: serving after "
                f"{figures[label]['in_process']['serving_s']:.3f} s")
        say(f"   {entries:,} entries, {label}: serving after {timing['serving_s']:.2f} s "
            f"({figures[label]['history_cost_s']:+.2f} s vs empty), built in {built['build_s']} s, "
            f"file {built['file_mb']} MB, RSS {fmt(timing['rss_mb'])} MB")
        shutil.rmtree(directory, ignore_errors=True)
    return {"conditions": suite.base_conditions(system="rmqc", nodes=1, entries=entries, groups=groups,
                                                fsync=suite.fsync, disk_free_gb=round(_free_gb(work), 1),
                                                serving="first 1013 accepted (an entry of the new term applied)"),
            "figures": figures}


def _free_gb(path: Path) -> float:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize / 1e9
