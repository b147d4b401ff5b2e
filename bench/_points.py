"""Load points: one closed-loop run per client count, summarised the same way for every system;
or one point run by several generator processes with the CPU every process used (spread_point)."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rmqc.launcher import Process

from ._generators import SpreadRun, run_generators
from ._load import LoadResult, Workload, closed_loop
from ._loadworker import WorkloadSpec
from ._stats import fmt, summarise_ms
from ._suite import Suite, say


async def load_points(suite: Suite, label: str, workload: Workload[Any],
                      clients: Iterable[int]) -> list[dict[str, Any]]:
    points = []
    for count in clients:
        workload.refusals.clear()
        result = await closed_loop(workload, count, suite.profile.seconds, suite.profile.warmup_s)
        points.append(point_summary(label, result, workload.refusals))
    return points


async def spread_point(suite: Suite, label: str, spec: WorkloadSpec, clients: int, work: Path,
                       nodes: Mapping[str, Process]) -> dict[str, Any]:
    """One load point of `clients` run by the profile's `read_generators` processes, with the CPU
    (cores busy over the window, CPU microseconds per accepted op) of each node and generator."""
    generators = suite.profile.read_generators
    run = await run_generators(spec, clients, generators, suite.profile.warmup_s, suite.profile.seconds,
                               work / f"{label.replace(' ', '_').replace(',', '')}-g{generators}", nodes)
    point = point_summary(label, run.result, run.refusals)
    point.update(generators=generators, **cpu_figures(run))
    cores = point["cpu_cores"]
    say(f"   {'':<34} CPU cores: nodes {' + '.join(f'{c:.2f}' for c in cores['nodes'].values())}, "
        f"generators {' + '.join(f'{c:.2f}' for c in cores['generators'])}, interrupts {cores['interrupts']:.2f}, "
        f"steal {cores['steal']:.2f}, others {cores['others']:.2f}, busy {cores['machine']:.2f} of "
        f"{suite.machine['nproc']}; "
        f"CPU us/op: nodes {fmt(point['cpu_us_per_op']['nodes'])}, generators "
        f"{fmt(point['cpu_us_per_op']['generators'])}; busiest node at 1 core: "
        f"{fmt(point['busiest_node_bound_ops_per_s'], 0)} ops/s")
    return point


def cpu_figures(run: SpreadRun) -> dict[str, Any]:
    """Cores busy (CPU seconds / window seconds) per process, the whole machine's, its interrupts'
    and steal, and the rest of it (other work on the shared machine); CPU microseconds per accepted
    op of the nodes together and of the generators together."""
    window = run.window_s or float("nan")
    ops = run.result.ops or float("nan")
    accounted = (sum(run.node_cpu_s.values()) + sum(run.generator_cpu_s) + run.harness_cpu_s
                 + run.interrupt_cpu_s + run.steal_cpu_s)
    busiest = max(run.node_cpu_s.values(), default=0.0) / window
    return {"window_s": round(run.window_s, 3),
            # a projection, not a measurement: the rate if the busiest node had a whole core to itself
            # and its cost per op stayed as measured (what the nodes allow once no other process
            # competes). An rmqc node is one Python process on one Trio loop, so about one core is its
            # ceiling; etcd's Go nodes can use more than one core, so for etcd it understates them
            "busiest_node_bound_ops_per_s": round(run.result.ops_per_s / busiest, 0) if busiest else None,
            "cpu_cores": {"nodes": {name: round(used / window, 3) for name, used in run.node_cpu_s.items()},
                          "generators": [round(used / window, 3) for used in run.generator_cpu_s],
                          "harness": round(run.harness_cpu_s / window, 3),
                          "machine": round(run.machine_cpu_s / window, 3),
                          "interrupts": round(run.interrupt_cpu_s / window, 3),
                          "steal": round(run.steal_cpu_s / window, 3),
                          "others": round(max(0.0, run.machine_cpu_s - accounted) / window, 3)},
            "cpu_us_per_op": {"nodes": round(sum(run.node_cpu_s.values()) / ops * 1e6, 1),
                              "generators": round(sum(run.generator_cpu_s) / ops * 1e6, 1)}}


def point_summary(label: str, result: LoadResult, refusals: collections.Counter[str]) -> dict[str, Any]:
    point: dict[str, Any] = {"clients": result.clients, "ops_per_s": round(result.ops_per_s, 1), "ops": result.ops,
                             "errors": result.errors, **summarise_ms(result.latencies_ms)}
    if refusals:
        point["refusals"] = dict(refusals)
    if result.first_error:
        point["first_error"] = result.first_error
    say(f"   {label:<34} clients {result.clients:>4}: {fmt(point['ops_per_s'], 0):>8} ops/s  "
        f"p50 {fmt(point['p50_ms'], 2):>7} ms  p99 {fmt(point['p99_ms'], 2):>7} ms  errors {result.errors}"
        + (f"  ({result.first_error})" if result.first_error else "")
        + (f"  refused: {dict(refusals)}" if refusals else ""))
    return point


def point_at(points: list[dict[str, Any]], clients: int) -> dict[str, Any] | None:
    return next((p for p in points if p["clients"] == clients), None)
