"""Load points: one closed-loop run per client count, summarised the same way for every system."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._load import Workload, closed_loop
from ._stats import fmt, summarise_ms
from ._suite import Suite, say


async def load_points(suite: Suite, label: str, workload: Workload[Any],
                      clients: Iterable[int]) -> list[dict[str, Any]]:
    points = []
    for count in clients:
        workload.refusals.clear()
        result = await closed_loop(workload, count, suite.profile.seconds, suite.profile.warmup_s)
        point: dict[str, Any] = {"clients": count, "ops_per_s": round(result.ops_per_s, 1), "ops": result.ops,
                 "errors": result.errors, **summarise_ms(result.latencies_ms)}
        if workload.refusals:
            point["refusals"] = dict(workload.refusals)
        if result.first_error:
            point["first_error"] = result.first_error
        say(f"   {label:<34} clients {count:>4}: {fmt(point['ops_per_s'], 0):>8} ops/s  "
            f"p50 {fmt(point['p50_ms'], 2):>7} ms  p99 {fmt(point['p99_ms'], 2):>7} ms  errors {result.errors}"
            + (f"  ({result.first_error})" if result.first_error else "")
            + (f"  refused: {dict(workload.refusals)}" if workload.refusals else ""))
        points.append(point)
    return points


def point_at(points: list[dict[str, Any]], clients: int) -> dict[str, Any] | None:
    return next((p for p in points if p["clients"] == clients), None)
