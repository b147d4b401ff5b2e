"""Hold: G broker groups x 3 brokers against a 3-node cluster (default options) for N minutes with
no fault, and count what should not happen: elections after the first convergence (target 0) and
brokers of one group that both believe they are master (target 0). Reports the load's own worst
lateness (a late load makes failovers that are not the controllers' fault) and every node's RSS and
CPU over time (flat).

Two loads:
- `rmqc sim brokers --processes P` (the default): real broker lifecycles, each broker its own
  connections to every node, its own 1004 polls and 1008 port; beliefs and lateness come from the
  simulator's JSON summaries. One process carries about 1,500 brokers on this machine.
- `--generator`: the pre-encoded heartbeat generator of the scale scenario (registrations and
  elections as plain requests, then one 904 per broker per second, each broker to one node, spread
  over all 3), so that 10,000 groups fit on 2 cores. Each of its brokers holds a belief
  (bench/_beliefs.py): seeded from the set-up's election, then learned from its own 1004 poll every
  `--poll-period` seconds (5 s, Java's syncBrokerMetadataPeriod), pipelined on a few connections
  per node (bench/_replica_polls.py); two-master episodes are counted from those beliefs. Its
  brokers receive no 1008: their registered addresses refuse connections at once (see
  `group_brokers`), so a belief is what the poll shows, and how long a stale belief lasts is an
  upper bound on a real broker's, which also learns from the 1008 when it is reachable. Before the
  polls start, the nodes' and the generator's CPU is sampled for POLLS_OFF_WINDOW_S with
  heartbeats only (`cpu_percent_polls_off`), so every run says what the polls cost.

Elections are counted from the controllers: the sum of every group's masterEpoch (each election,
even one that finds no candidate, adds one), read with 1004 at convergence and every
EPOCH_SCAN_EVERY_S after.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from rmqc.cli.dev import rmqc_argv
from rmqc.launcher import STOP_GRACE_S, cpu_s, rss_mb
from rmqc.remoting import RequestCode, ResponseCode

from ._beliefs import FleetBeliefs
from ._heartbeats import heartbeat_chunks
from ._load import RemotingConn
from ._replica_polls import POLL_PERIOD_S, ReplicaPolls
from ._rmqc import RmqcCluster
from ._scn_scale import elect_group, for_each_group, group_brokers, notifier_drained, register_group
from ._suite import say

SAMPLE_S = 30.0  # RSS and CPU of every process, this often
EPOCH_SCAN_EVERY_S = 300.0
EPOCH_SCAN_CONNECTIONS = 8
REPORT_EVERY_S = 10.0  # the simulator's summaries
CONVERGE_BOUND_S = 600.0  # start-up of the whole fleet, on a loaded machine
GENERATOR_CONNECTIONS_PER_NODE = 2
# CPU with heartbeats only, after the set-up's 1008s have left the leader, before the polls start
POLLS_OFF_WINDOW_S = 30.0


@dataclass(frozen=True)
class HoldOptions:
    groups: int = 1000
    minutes: float = 30.0
    processes: int = 2
    generator: bool = False
    poll_period_s: float = POLL_PERIOD_S  # the generator's 1004 polls; 0: none (beliefs stay as seeded)


# ---- the controllers' side --------------------------------------------------------------------


async def epochs(cluster: RmqcCluster, names: list[str]) -> dict[str, tuple[str | None, int]]:
    """(masterBrokerId, masterEpoch) of every group, by 1004 on the leader."""
    address = cluster.address(await cluster.leader_id())
    queue, found = list(names), {}

    async def worker() -> None:
        conn = await RemotingConn.open(address)
        try:
            while queue:
                name = queue.pop()
                answer = await conn.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": name})
                if answer.code == ResponseCode.SUCCESS:
                    found[name] = (answer.ext("masterBrokerId"), int(answer.ext("masterEpoch") or 0))
        finally:
            await conn.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(EPOCH_SCAN_CONNECTIONS):
            nursery.start_soon(worker)
    return found


def elections_between(before: dict[str, tuple[str | None, int]],
                      after: dict[str, tuple[str | None, int]]) -> dict[str, Any]:
    changed = {name: (before[name], after[name]) for name in before if name in after and after[name] != before[name]}
    return {"elections": sum(after[n][1] - before[n][1] for n in before if n in after),
            "groups_changed": len(changed), "examples": dict(list(changed.items())[:5])}


class Sampler:
    """RSS (MB) and CPU (% of one core over each interval) of the nodes and the load processes."""

    def __init__(self, cluster: RmqcCluster, load_pids: Callable[[], list[int]]) -> None:
        self.cluster = cluster
        self.load_pids = load_pids
        self.samples: list[dict[str, Any]] = []
        self._last: tuple[float, dict[str, float | None]] | None = None

    def take(self, elapsed_s: float) -> dict[str, Any]:
        pids = self.load_pids()
        cpu = {**self.cluster.cpu_s(), **{f"load-{pid}": cpu_s(pid) for pid in pids}}
        rss = {**self.cluster.rss_mb(), **{f"load-{pid}": rss_mb(pid) for pid in pids}}
        now = time.perf_counter()
        percent = {}
        if self._last is not None:
            then, before = self._last
            percent = {k: round(100 * (used - was) / (now - then), 1)
                       for k, used in cpu.items() if used is not None and (was := before.get(k)) is not None}
        self._last = (now, cpu)
        sample = {"t_s": round(elapsed_s), "rss_mb": {k: v and round(v, 1) for k, v in rss.items()},
                  "cpu_percent": percent}
        self.samples.append(sample)
        return sample


def _proc_pids(pid: int) -> list[int]:
    """`pid` and its children (the simulator's parent relays, its children carry the brokers); of
    every thread, since a child is listed under the thread that spawned it."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return [pid, *sorted(children)]


# ---- the simulator load -------------------------------------------------------------------------


class SimLoad:
    """`rmqc sim brokers --json` as a process; its latest summary per child process."""

    def __init__(self, cluster: RmqcCluster, options: HoldOptions, work: Path) -> None:
        self.total = options.groups * 3
        argv = [*rmqc_argv(), "sim", "brokers", "--groups", str(options.groups), "--replicas", "3",
                "--processes", str(options.processes), "--controllers", ";".join(cluster.addresses),
                "--state-dir", str(work / "sim"), "--json", "--report-every", str(REPORT_EVERY_S), "--seed", "1",
                "--quit-at-eof"]  # so it ends with this process however that ends
        (work / "logs").mkdir(parents=True, exist_ok=True)
        self.out_path = work / "logs" / "sim.jsonl"
        with open(self.out_path, "wb") as out, open(work / "logs" / "sim.err", "wb") as err:
            # stdin stays open (a pipe, not /dev/null): at EOF on stdin, `sim brokers --processes P`
            # has been seen to end its children after ~10 s
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err)
        self._read = 0
        self.latest: dict[int, dict[str, Any]] = {}
        self.windows: list[dict[str, Any]] = []  # (time, child, lateness window, two-masters) of every summary

    def poll(self, elapsed_s: float) -> None:
        text = self.out_path.read_text(errors="replace")
        lines, self._read = text[self._read:].split("\n"), self._read
        complete = lines[:-1]
        self._read += sum(len(line) + 1 for line in complete)
        for line in complete:
            if not line.startswith("{"):
                continue
            document = json.loads(line)
            child, document = (document["process"], document["line"]) if "process" in document else (0, document)
            summary = document.get("summary")
            if summary is None:
                continue
            self.latest[child] = summary
            self.windows.append({"t_s": round(elapsed_s), "child": child, "lateness": summary["lateness"],
                                 "twoMasters": summary["twoMasters"], "notConverged": summary["notConverged"],
                                 "masters": summary["masters"]})

    def converged(self) -> bool:
        summaries = list(self.latest.values())
        return (sum(s["brokers"] for s in summaries) == self.total and all(s["notConverged"] == 0 for s in summaries)
                and sum(s["running"] for s in summaries) == self.total)

    def two_master_episodes(self) -> int:
        return sum(s["twoMasters"]["episodes"] for s in self.latest.values())

    def pids(self) -> list[int]:
        return _proc_pids(self.proc.pid)

    def stop(self) -> None:
        """`quit` on stdin (every child ends), SIGKILL after the grace; reaped by PID."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"quit\n")
            self.proc.stdin.close()
            self.proc.wait(STOP_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(STOP_GRACE_S)


# ---- the generator load -------------------------------------------------------------------------


class GeneratorLoad:
    """Pre-encoded heartbeats, paced; records how late each send ran against its schedule. Its
    brokers' beliefs, seeded from the set-up and learned from their 1004 polls."""

    def __init__(self, options: HoldOptions) -> None:
        self.groups = [group_brokers(g, None) for g in range(options.groups)]
        self.names = [group[0].name for group in self.groups]
        self.worst_late_s = 0.0
        self.late_over_1s = 0
        self.beliefs = FleetBeliefs(self.names)
        self.polls = ReplicaPolls(self.beliefs, options.poll_period_s) if options.poll_period_s > 0 else None

    def seed(self, controllers: dict[str, tuple[str | None, int]]) -> None:
        """Every broker believes what the controllers hold after the set-up's election."""
        now_ms = int(trio.current_time() * 1000)
        for group, name in enumerate(self.names):
            master, epoch = controllers.get(name, (None, 0))
            self.beliefs.seed(group, int(master) if master else None, epoch, now_ms)

    async def start_polls(self, cluster: RmqcCluster, nursery: trio.Nursery) -> None:
        if self.polls is not None:
            await self.polls.run({node: cluster.address(node) for node in cluster.ids}, nursery)

    async def set_up(self, cluster: RmqcCluster) -> int:
        refused = await for_each_group(cluster, self.groups, register_group)
        return len(refused)

    async def elect(self, cluster: RmqcCluster) -> int:
        return len(await for_each_group(cluster, self.groups, elect_group))

    async def run(self, cluster: RmqcCluster, nursery: trio.Nursery) -> None:
        brokers = [b for group in self.groups for b in group]
        conns = [await RemotingConn.open(cluster.address(n)) for n in cluster.ids
                 for _ in range(GENERATOR_CONNECTIONS_PER_NODE)]
        for index, conn in enumerate(conns):
            nursery.start_soon(self._paced, conn, heartbeat_chunks(brokers[index::len(conns)]))

    async def _paced(self, conn: RemotingConn, chunks: list[bytes]) -> None:
        gap_s = 1.0 / len(chunks)
        due = trio.current_time()
        while True:
            for chunk in chunks:
                late_s = trio.current_time() - due
                self.worst_late_s = max(self.worst_late_s, late_s)
                self.late_over_1s += late_s > 1.0
                await conn.stream.send_all(chunk)
                due += gap_s
                await trio.sleep_until(due)


# ---- the run ------------------------------------------------------------------------------------


async def hold(options: HoldOptions, work: Path) -> dict[str, Any]:
    cluster = RmqcCluster(work, 3)
    await cluster.start()
    started = time.perf_counter()
    load: Any = GeneratorLoad(options) if options.generator else SimLoad(cluster, options, work)
    names = load.names if options.generator else [f"broker-{i:04d}" for i in range(options.groups)]
    result: dict[str, Any] = {"options": options.__dict__}
    sampler = Sampler(cluster, (lambda: [os.getpid()]) if options.generator else load.pids)
    try:
        async with trio.open_nursery() as nursery:
            await _start_load(cluster, load, nursery, result, started)
            result["converged_s"] = await _converge(load, started)
            before = await epochs(cluster, names)
            leaderships_before = _leaderships(cluster)
            episodes_before = load.beliefs.episodes if options.generator else load.two_master_episodes()
            say(f"   converged after {result['converged_s']} s; holding {options.minutes} min")
            result["timeline"] = await _hold(cluster, options, load, sampler, names, before, started)
            after = await epochs(cluster, names)
            result["after_convergence"] = elections_between(before, after)
            result["groups_read"] = len(after)
            result["raft_leader_changes_after_convergence"] = _leaderships(cluster) - leaderships_before
            if options.generator:
                result["beliefs_at_end"] = load.beliefs.against(after)
            result.update(_load_figures(load, episodes_before, result["converged_s"]))
            nursery.cancel_scope.cancel()
    finally:
        if isinstance(load, SimLoad):
            load.stop()
        cluster.stop()
    result["samples"] = sampler.samples
    return result


async def _start_load(cluster: RmqcCluster, load: Any, nursery: trio.Nursery, result: dict[str, Any],
                      started: float) -> None:
    """The simulator started itself; the generator registers, heartbeats, then elects, seeds its
    brokers' beliefs from the controllers, samples CPU with heartbeats only, then starts the polls."""
    if isinstance(load, SimLoad):
        return
    result["setup_refused_groups"] = await load.set_up(cluster)
    await load.run(cluster, nursery)
    await trio.sleep(3)  # heartbeats (and followers' digests of them) reach the leader before elections
    result["setup_refused_groups"] += await load.elect(cluster)
    result["setup_s"] = round(time.perf_counter() - started, 1)
    load.seed(await epochs(cluster, load.names))
    await notifier_drained(cluster, await cluster.leader_id(), 3 * len(load.names))
    window = Sampler(cluster, lambda: [os.getpid()])
    window.take(0)
    await trio.sleep(POLLS_OFF_WINDOW_S)
    result["cpu_percent_polls_off"] = window.take(POLLS_OFF_WINDOW_S)["cpu_percent"]
    say(f"   set up in {result['setup_s']} s; heartbeats only, CPU % {result['cpu_percent_polls_off']}")
    await load.start_polls(cluster, nursery)


async def _converge(load: Any, started: float) -> float | None:
    """Seconds until every group first converged; None if not within CONVERGE_BOUND_S (the hold
    then runs anyway, counting from there: what a fleet that never settles does is the finding)."""
    if isinstance(load, GeneratorLoad):
        return round(time.perf_counter() - started, 1)
    with trio.move_on_after(CONVERGE_BOUND_S):
        while not load.converged():
            await trio.sleep(1)
            load.poll(time.perf_counter() - started)
        return round(time.perf_counter() - started, 1)
    say(f"   not converged within {CONVERGE_BOUND_S:.0f} s; holding anyway")
    return None


async def _hold(cluster: RmqcCluster, options: HoldOptions, load: Any, sampler: Sampler, names: list[str],
                before: dict[str, tuple[str | None, int]], started: float) -> list[dict[str, Any]]:
    timeline = []
    hold_start = time.perf_counter()
    next_scan = hold_start + EPOCH_SCAN_EVERY_S
    sampler.take(0)
    while time.perf_counter() - hold_start < options.minutes * 60:
        await trio.sleep(min(SAMPLE_S, max(0.1, options.minutes * 60 - (time.perf_counter() - hold_start))))
        elapsed = time.perf_counter() - hold_start
        if isinstance(load, SimLoad):
            load.poll(time.perf_counter() - started)
        sample = sampler.take(elapsed)
        if time.perf_counter() >= next_scan:
            next_scan += EPOCH_SCAN_EVERY_S
            sample["elections_so_far"] = elections_between(before, await epochs(cluster, names))["elections"]
        say(f"   t={elapsed:.0f} s cpu% {sample['cpu_percent']} rss {sample['rss_mb']}"
            + (f" elections {sample['elections_so_far']}" if "elections_so_far" in sample else ""))
        timeline.append(sample)
    return timeline


def _leaderships(cluster: RmqcCluster) -> int:
    """Terms some node has served as Raft leader, from the nodes' logs."""
    return sum(proc.log_text().count("serving as leader of term") for proc in cluster.procs.values())


def _load_figures(load: Any, episodes_before: int, converged_s: float | None) -> dict[str, Any]:
    if isinstance(load, GeneratorLoad):
        now = trio.current_time()
        beliefs = load.beliefs
        return {"load": "generator",
                "two_master_beliefs_after_convergence": beliefs.episodes - episodes_before,
                "two_master_longest_ms": beliefs.longest_ms(int(now * 1000)),
                "beliefs_changed": beliefs.changes, "poll_answers_without_master": beliefs.answers_without_master,
                "poll_answers_older_than_belief": beliefs.answers_older,
                **(load.polls.figures(now) if load.polls is not None else {"poll_period_s": 0}),
                "load_worst_lateness_ms": round(1000 * load.worst_late_s, 1),
                "load_sends_late_over_1s": load.late_over_1s}
    hold_from_s = converged_s if converged_s is not None else CONVERGE_BOUND_S
    held = [w for w in load.windows if w["t_s"] > hold_from_s]
    return {
        "load": "rmqc sim brokers",
        "two_master_beliefs_after_convergence": load.two_master_episodes() - episodes_before,
        "two_master_longest_ms": max((s["twoMasters"]["longestMs"] for s in load.latest.values()), default=0),
        "load_worst_lateness_ms": max((w["lateness"]["windowMaxMs"] for w in held), default=None),
        "load_invalid_windows_after_convergence": sum(1 for w in held if not w["lateness"]["valid"]),
        "load_windows_after_convergence": len(held),
        "load_worst_lateness_in_start_up_ms": max((w["lateness"]["windowMaxMs"] for w in load.windows
                                                   if w["t_s"] <= hold_from_s), default=None),
        "windows_not_converged_after_convergence": sum(1 for w in held if w["notConverged"]),
    }
