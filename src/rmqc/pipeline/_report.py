"""report.md with PNG charts (matplotlib, Agg backend), from small aggregates of the written tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession, functions as F

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

    from ._run import FlappingRecord, Summary

# Failover durations are bucketed on a log scale, this many buckets per power of ten.
BUCKETS_PER_DECADE = 4
AUDIT_ROWS_SHOWN = 20
# Points of the top group's timeline chart; a group with more elections shows its latest ones.
TIMELINE_POINTS = 500
# The colour of each chart's data (tests count its pixels to tell a drawn chart from a blank one).
FAILOVER_COLOR = "#4477aa"
ELECTIONS_COLOR = "#228833"
FLAPPING_COLOR = "#cc6677"
MASTER_COLOR = "#4477aa"
EPOCH_COLOR = "#ee7733"


@dataclass(frozen=True)
class ReportData:
    failover_buckets: list[tuple[float, int]]  # (lower bound ms, failovers)
    elections_per_hour: list[tuple[int, int]]  # (hour start ms, elections in the fleet)
    timeline_group: tuple[str, str] | None
    timeline: list[tuple[int, int | None, int]]  # (ts ms, master id or None, masterEpoch)
    audit_counts: list[tuple[str, int]]
    audit_rows: list[dict[str, Any]]


def collect_report_data(
    spark: SparkSession, tables: dict[str, str], top: tuple[FlappingRecord, ...]
) -> ReportData:
    durations = spark.read.parquet(tables["failovers"]).filter(F.col("duration_ms").isNotNull())
    # a failover decided within the millisecond it started counts in the lowest bucket (1 ms)
    bucket = F.floor(F.log10(F.greatest("duration_ms", F.lit(1))) * BUCKETS_PER_DECADE)
    buckets = durations.groupBy(bucket.alias("b")).count().orderBy("b").collect()
    timeline = spark.read.parquet(tables["master_timeline"])
    hours = (
        timeline.groupBy((F.floor(F.col("leader_ts_ms") / 3_600_000) * 3_600_000).alias("h"))
        .count()
        .orderBy("h")
        .collect()
    )
    group = (top[0].controller_cluster, top[0].broker_name) if top else None
    points = []
    if group is not None:
        rows = (
            timeline.filter((F.col("controller_cluster") == group[0]) & (F.col("broker_name") == group[1]))
            .orderBy(F.desc("index"), F.desc("seq"))
            .limit(TIMELINE_POINTS)
            .collect()
        )
        points = [(r["leader_ts_ms"], r["master_id"], r["master_epoch"]) for r in reversed(rows)]
    audit = spark.read.parquet(tables["audit"])
    audit_counts = audit.groupBy("event").count().orderBy(F.desc("count")).collect()
    audit_rows = audit.orderBy(F.desc("leader_ts_ms")).limit(AUDIT_ROWS_SHOWN).collect()
    return ReportData(
        failover_buckets=[(10 ** (r["b"] / BUCKETS_PER_DECADE), r["count"]) for r in buckets],
        elections_per_hour=[(int(r["h"]), r["count"]) for r in hours],
        timeline_group=group,
        timeline=points,
        audit_counts=[(r["event"], r["count"]) for r in audit_counts],
        audit_rows=[r.asDict() for r in audit_rows],
    )


def _figure() -> tuple[ModuleType, Figure, Axes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=90)
    return plt, fig, ax


def _save(plt: ModuleType, fig: Figure, ax: Axes, path: Path) -> str:
    """Write the PNG with its axis ranges in its text chunks ("x-range", "y-range": "low;high" in
    the axis' units, matplotlib day numbers for time axes), so a reader or a test can check what
    was drawn without re-running the analysis."""
    fig.tight_layout()
    ranges = {name: ";".join(repr(float(v)) for v in limits)
              for name, limits in (("x-range", ax.get_xlim()), ("y-range", ax.get_ylim()))}
    fig.savefig(path, metadata=ranges)
    plt.close(fig)
    return path.name


def _time_axis(ax: Axes, times: list[datetime], least_span: timedelta) -> None:
    """X limits from the data, at least `least_span` wide: matplotlib's automatic limits for one
    instant (or a few close ones) span years, which leaves the line invisible."""
    from matplotlib import dates

    low, high = min(times), max(times)
    pad = max((high - low) * 0.02, (least_span - (high - low)) / 2, timedelta(0))
    # matplotlib.dates is not annotated
    ax.set_xlim(dates.date2num(low - pad), dates.date2num(high + pad))  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(ax.xaxis.get_major_locator()))  # type: ignore[no-untyped-call]


def _chart_failovers(data: ReportData, out: Path) -> str | None:
    if not data.failover_buckets:
        return None
    plt, fig, ax = _figure()
    lows = [low for low, _ in data.failover_buckets]
    widths = [low * (10 ** (1 / BUCKETS_PER_DECADE) - 1) for low in lows]
    ax.bar(lows, [n for _, n in data.failover_buckets], width=widths, align="edge", color=FAILOVER_COLOR)
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    _integer_ticks(ax.yaxis)
    ax.set_xlabel("failover duration (ms): old master last alive -> new master elected; the 1 ms bar: 1 ms or less")
    ax.set_ylabel("failovers")
    ax.set_title("Failover durations across the fleet (log scale)")
    return _save(plt, fig, ax, out / "failover_durations.png")


def _plain_log_ticks(axis: Axis) -> None:
    """Tick labels 1, 10, 100 ... on a log axis, none between (matplotlib writes a narrow range
    as 1.1x10^0, 1.2x10^0 ...)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _position: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _integer_ticks(axis: Axis) -> None:
    """Counts, ids and epochs are whole numbers: no 0.5 ticks on a small range."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _chart_elections(data: ReportData, out: Path) -> str | None:
    if not data.elections_per_hour:
        return None
    plt, fig, ax = _figure()
    # a marker per hour (at its middle): one hour of history is still a visible point, and so is
    # an hour among years of them
    hours = [datetime.fromtimestamp(h / 1000, UTC) + timedelta(minutes=30) for h, _ in data.elections_per_hour]
    # datetimes plot through matplotlib's date units, which its stubs do not know of
    ax.plot(hours, [n for _, n in data.elections_per_hour], color=ELECTIONS_COLOR, linewidth=1,  # type: ignore[arg-type]
            marker="o", markersize=4)
    ax.set_ylim(bottom=0)
    _integer_ticks(ax.yaxis)
    _time_axis(ax, hours, timedelta(hours=2))
    ax.set_ylabel("elections per hour")
    ax.set_title("Elections across the fleet")
    return _save(plt, fig, ax, out / "elections_per_hour.png")


def _chart_flapping(summary: Summary, out: Path) -> str | None:
    if not summary.top_flapping:
        return None
    plt, fig, ax = _figure()
    top = list(reversed(summary.top_flapping))
    labels = [f"{r.controller_cluster}/{r.broker_name}" for r in top]
    ax.barh(labels, [r.max_elections_in_hour for r in top], color=FLAPPING_COLOR)
    _integer_ticks(ax.xaxis)
    ax.set_xlabel("most elections in one hour")
    ax.set_title("Flapping broker groups")
    return _save(plt, fig, ax, out / "flapping_groups.png")


def _chart_timeline(data: ReportData, out: Path) -> str | None:
    if not data.timeline or data.timeline_group is None:
        return None
    plt, fig, ax = _figure()
    times = [datetime.fromtimestamp(ts / 1000, UTC) for ts, _, _ in data.timeline]
    masters = [m if m is not None else 0 for _, m, _ in data.timeline]
    # markers too: a group elected once is one point, which a line alone would not show
    ax.step(times, masters, where="post", color=MASTER_COLOR, marker="o", markersize=3,  # type: ignore[arg-type]
            label="master id (0 = none)")
    ax.set_ylabel("master broker id (0 = none)")
    _integer_ticks(ax.yaxis)
    epochs = ax.twinx()
    epochs.step(times, [e for _, _, e in data.timeline], where="post", color=EPOCH_COLOR,  # type: ignore[arg-type]
                linewidth=1)
    epochs.set_ylabel("masterEpoch")
    _integer_ticks(epochs.yaxis)
    _time_axis(ax, times, timedelta(minutes=1))
    ax.set_title(f"Masters and epochs of {data.timeline_group[0]}/{data.timeline_group[1]}")
    return _save(plt, fig, ax, out / "timeline_top_group.png")


def _ms(value: float | int | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.0f} ms"


def _table(header: list[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def _section_invariants(summary: Summary) -> list[str]:
    lines = ["## Invariants", ""]
    lines += _table(["invariant", "violations"], [[k, n] for k, n in summary.violation_counts.items()])
    if summary.violations:
        lines += ["", f"First {len(summary.violations)} violations (all are in `violations/`):", ""]
        rows = [
            [v.kind, v.controller_cluster, v.broker_name or "-", f"{v.index}/{v.seq}", v.detail,
             ", ".join(f"{c}:{i}/{s}" for c, i, s in v.evidence)]
            for v in summary.violations
        ]  # fmt: skip
        lines += _table(["kind", "controller", "group", "entry", "detail", "evidence"], rows)
    return [*lines, ""]


def _section_failovers(summary: Summary, charts: dict[str, str | None]) -> list[str]:
    f = summary.failovers
    lines = ["## Failovers", ""]
    lines += [f"{f.count:,} failovers started by the controller, {f.resolved:,} resolved. From the old "
              f"master's last sign of life to the new master ({f.timed:,} with a known start): "
              f"p50 {_ms(f.p50_ms)}, p90 {_ms(f.p90_ms)}, p99 {_ms(f.p99_ms)}, max {_ms(f.max_ms)}.", ""]
    if f.by_reason:
        lines += ["By reason: " + ", ".join(f"{reason} {count:,}" for reason, count in f.by_reason)
                  + f". Detection (last alive -> seen dead) p99 {_ms(f.detection_p99_ms)}.", ""]
    for name in ("failover_durations", "elections_per_hour"):
        if charts.get(name):
            lines += [f"![{name}]({charts[name]})", ""]
    return lines


def _section_flapping(summary: Summary, charts: dict[str, str | None]) -> list[str]:
    lines = ["## Flapping groups", ""]
    rows = [[r.rank, r.controller_cluster, r.broker_name, r.max_elections_in_hour, r.elections,
             r.failovers, f"{r.elections_per_hour:.2f}"] for r in summary.top_flapping]  # fmt: skip
    lines += _table(["rank", "controller", "group", "max/hour", "elections", "failovers", "per hour"], rows)
    for name in ("flapping_groups", "timeline_top_group"):
        if charts.get(name):
            lines += ["", f"![{name}]({charts[name]})"]
    return [*lines, ""]


def _section_audit(data: ReportData) -> list[str]:
    lines = ["## Audit", "", *_table(["event", "count"], [[e, n] for e, n in data.audit_counts])]
    lines += ["", f"Latest {len(data.audit_rows)} audit events (all are in `audit/`):", ""]
    rows = [[r["time"], r["controller_cluster"], r["broker_name"] or "-", r["event"], r["broker_id"],
             r["address"] or "-", r["previous_address"] or "-"] for r in data.audit_rows]  # fmt: skip
    return lines + _table(["time", "controller", "group", "event", "id", "address", "was"], rows) + [""]


def _section_linearizability(summary: Summary) -> list[str]:
    lin = summary.linearizability
    if lin is None:
        return []
    lines = ["## Client histories (linearizability)", "",
             f"{lin.keys} keys: {lin.linearizable} linearizable, {lin.not_linearizable} not, "
             f"{lin.undecided} undecided (search bound)."]  # fmt: skip
    if lin.failing_keys:
        lines += ["", "Not linearizable: " + ", ".join(f"`{k}`" for k in lin.failing_keys)]
    return [*lines, ""]


def write_report(out: Path, summary: Summary, data: ReportData) -> None:
    charts = {
        "failover_durations": _chart_failovers(data, out),
        "elections_per_hour": _chart_elections(data, out),
        "flapping_groups": _chart_flapping(summary, out),
        "timeline_top_group": _chart_timeline(data, out),
    }
    lines = [
        "# rmqc history report", "",
        f"{summary.rows:,} log rows from {summary.controller_clusters} controller cluster(s), "
        f"{summary.groups:,} broker groups, {summary.elections:,} elections; "
        f"{summary.violation_total} invariant violation(s). Analysed in {summary.elapsed_s:.1f} s.", "",
        "Tables (Parquet): " + ", ".join(f"`{name}/`" for name in summary.tables), "",
    ]  # fmt: skip
    lines += _section_invariants(summary)
    lines += _section_failovers(summary, charts)
    lines += _section_flapping(summary, charts)
    lines += _section_audit(data)
    lines += _section_linearizability(summary)
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
