"""`run_pipeline`: every analysis over the inputs, written as Parquet tables plus report.md.

Tables (one directory each under `out_dir`): violations, master_timeline, failovers, flapping,
audit, and linearizability when client histories are given. The summary the CLI prints is computed
from the written tables, so the heavy work runs once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession, functions as F

from ._audit import audit_table
from ._clock_steps import clock_steps
from ._errors import SparkJobFailed
from ._group_log import build_group_log, refused_rows
from ._invariants import VIOLATION_KINDS, broker_id_events, find_violations
from ._linearizability import check_client_histories
from ._load import load_entries
from ._report import ReportData, collect_report_data, write_report
from ._session import spark_session
from ._timeline import failovers, flapping, master_timeline

TABLES = ("violations", "master_timeline", "failovers", "flapping", "audit", "clock_steps", "linearizability")
# How many violations and keys the summary carries (all of them are in the tables).
SUMMARY_LIST_LIMIT = 50


@dataclass(frozen=True)
class FailoverStats:
    count: int
    resolved: int
    timed: int  # resolved with a known start (the percentiles are over these)
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: int | None
    # (reason, failovers), most frequent first; "unknown" for logs written before reasons were recorded
    by_reason: tuple[tuple[str, int], ...] = ()
    detection_p99_ms: float | None = None  # last alive -> seen dead, over failovers with a known start


@dataclass(frozen=True)
class ViolationRecord:
    kind: str
    controller_cluster: str
    broker_name: str | None
    index: int
    seq: int
    detail: str
    evidence: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class FlappingRecord:
    rank: int
    controller_cluster: str
    broker_name: str
    elections: int
    failovers: int
    max_elections_in_hour: int
    elections_per_hour: float


@dataclass(frozen=True)
class LinearizabilityStats:
    keys: int
    linearizable: int
    not_linearizable: int
    undecided: int
    failing_keys: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    out_dir: str
    report_path: str
    rows: int
    controller_clusters: int
    groups: int
    elections: int
    failovers: FailoverStats
    violation_counts: dict[str, int]
    violations: tuple[ViolationRecord, ...]
    top_flapping: tuple[FlappingRecord, ...]
    linearizability: LinearizabilityStats | None
    elapsed_s: float
    tables: dict[str, str] = field(default_factory=dict)

    @property
    def violation_total(self) -> int:
        return sum(self.violation_counts.values())


def _write(frame: DataFrame, out_dir: Path, name: str) -> str:
    path = str(out_dir / name)
    frame.write.mode("overwrite").parquet(path)
    return path


def _analyse(spark: SparkSession, inputs: Sequence[str | os.PathLike[str]],
             out_dir: Path) -> tuple[dict[str, str], int]:
    entries, diverging = load_entries(spark, inputs)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
    group_log = build_group_log(entries, partitions)
    try:
        timeline = master_timeline(group_log)
        failover_rows = failovers(timeline)
        frames = {
            "violations": find_violations(group_log, broker_id_events(group_log), diverging),
            "master_timeline": timeline,
            "failovers": failover_rows,
            "flapping": flapping(timeline, failover_rows),
            "audit": audit_table(group_log, refused_rows(entries), entries),
            "clock_steps": clock_steps(entries),
        }
        tables = {name: _write(frame, out_dir, name) for name, frame in frames.items()}
    finally:
        group_log.unpersist()
    return tables, entries.count()


def _the_row(aggregate: DataFrame) -> Row:
    """The row of an aggregate without grouping (which always has exactly one)."""
    row = aggregate.first()
    assert row is not None
    return row


UNKNOWN_REASON = "unknown"


def _failover_stats(spark: SparkSession, path: str) -> FailoverStats:
    rows = spark.read.parquet(path)
    duration = F.when(~F.col("clock_stepped"), F.col("duration_ms"))  # a stepped clock measures nothing
    stats = _the_row(rows.agg(
        F.count(F.lit(1)).alias("count"),
        F.count(F.when(F.col("resolved"), 1)).alias("resolved"),
        F.count(duration).alias("timed"),
        F.percentile_approx(duration, [0.5, 0.9, 0.99], 10_000).alias("p"),
        F.max(duration).alias("max"),
    ))
    p = stats["p"] or [None, None, None]
    reasons = rows.groupBy(F.coalesce("reason", F.lit(UNKNOWN_REASON)).alias("reason")).agg(
        F.count(F.lit(1)).alias("n")).orderBy(F.desc("n"), "reason").collect()
    detection = _the_row(rows.agg(F.percentile_approx("detection_ms", 0.99, 10_000).alias("p99")))["p99"]
    return FailoverStats(stats["count"], stats["resolved"], stats["timed"], p[0], p[1], p[2], stats["max"],
                         tuple((r["reason"], r["n"]) for r in reasons), detection)


def _violations(spark: SparkSession, path: str) -> tuple[dict[str, int], tuple[ViolationRecord, ...]]:
    rows = spark.read.parquet(path)
    counts = {kind: 0 for kind in VIOLATION_KINDS}
    counts |= {r["kind"]: r["n"] for r in rows.groupBy("kind").agg(F.count(F.lit(1)).alias("n")).collect()}
    first = rows.orderBy("controller_cluster", "index", "seq", "kind").limit(SUMMARY_LIST_LIMIT).collect()
    records = tuple(
        ViolationRecord(
            r["kind"], r["controller_cluster"], r["broker_name"], r["index"], r["seq"], r["detail"],
            tuple((e["controller_cluster"], e["index"], e["seq"]) for e in r["evidence"] if e["index"] is not None),
        )
        for r in first
    )
    return counts, records


def _top_flapping(spark: SparkSession, path: str, limit: int = 10) -> tuple[FlappingRecord, ...]:
    """The busiest groups that changed master at least once: a group whose only election was its
    first (a master elected, never replaced) is not flapping, however early that hour was."""
    flapping = spark.read.parquet(path).filter((F.col("rank") <= limit) & (F.col("failovers") > 0))
    rows = flapping.orderBy("rank").collect()
    return tuple(
        FlappingRecord(r["rank"], r["controller_cluster"], r["broker_name"], r["elections"],
                       r["failovers"], r["max_elections_in_hour"], r["elections_per_hour"])
        for r in rows
    )


def _linearizability(spark: SparkSession, histories: Sequence[str | os.PathLike[str]], out_dir: Path,
                     tables: dict[str, str]) -> LinearizabilityStats:
    tables["linearizability"] = _write(check_client_histories(spark, histories), out_dir, "linearizability")
    rows = spark.read.parquet(tables["linearizability"])
    stats = _the_row(rows.agg(
        F.count(F.lit(1)).alias("keys"),
        F.sum(F.when(F.col("ok"), 1).otherwise(0)).alias("good"),
        F.sum(F.when(~F.col("ok"), 1).otherwise(0)).alias("bad"),
        F.sum(F.when(F.col("ok").isNull(), 1).otherwise(0)).alias("undecided"),
    ))
    failing = rows.filter(~F.col("ok")).orderBy("key").limit(SUMMARY_LIST_LIMIT).collect()
    return LinearizabilityStats(
        stats["keys"], stats["good"] or 0, stats["bad"] or 0, stats["undecided"] or 0,
        tuple(r["key"] for r in failing),
    )


def _fleet_counts(spark: SparkSession, tables: dict[str, str]) -> tuple[int, int, int]:
    """(controller clusters, broker groups, elections); a group shows in the audit or the timeline."""
    key = ["controller_cluster", "broker_name"]
    timeline = spark.read.parquet(tables["master_timeline"])
    audited = spark.read.parquet(tables["audit"]).filter(F.col("broker_name").isNotNull())  # not 1009s
    groups = timeline.select(key).unionByName(audited.select(key)).distinct()
    counts = _the_row(groups.agg(
        F.countDistinct("controller_cluster").alias("clusters"), F.count(F.lit(1)).alias("groups")
    ))
    return counts["clusters"], counts["groups"], timeline.count()


def run_pipeline(
    spark: SparkSession,
    inputs: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    histories: Sequence[str | os.PathLike[str]] = (),
) -> Summary:
    """Analyse exported histories (and client histories), write tables and report.md to out_dir."""
    started = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables, rows = _analyse(spark, inputs, out)
    lin = _linearizability(spark, histories, out, tables) if histories else None
    counts, records = _violations(spark, tables["violations"])
    clusters, groups, elections = _fleet_counts(spark, tables)
    summary = Summary(
        out_dir=str(out),
        report_path=str(out / "report.md"),
        rows=rows,
        controller_clusters=clusters,
        groups=groups,
        elections=elections,
        failovers=_failover_stats(spark, tables["failovers"]),
        violation_counts=counts,
        violations=records,
        top_flapping=_top_flapping(spark, tables["flapping"]),
        linearizability=lin,
        elapsed_s=0.0,
        tables=tables,
    )
    data: ReportData = collect_report_data(spark, tables, summary.top_flapping)
    summary = replace(summary, elapsed_s=time.monotonic() - started)
    write_report(out, summary, data)
    return summary


def analyze(
    master: str,
    inputs: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    histories: Sequence[str | os.PathLike[str]] = (),
    **session_options: object,
) -> Summary:
    """`run_pipeline` in a Spark session of its own (what `rmqc analyze` runs); Spark's refusals
    become SparkJobFailed so callers outside this package never handle pyspark's exceptions."""
    try:
        with spark_session(master, **session_options) as spark:
            return run_pipeline(spark, inputs, out_dir, histories=histories)
    except PySparkException as exc:
        raise SparkJobFailed(_first_line(str(exc)) or type(exc).__name__) from exc
    except Py4JJavaError as exc:  # a failed Spark job that pyspark did not translate
        raise SparkJobFailed(_root_cause(exc)) from exc


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# Why a bound: a Java cause chain is finite, but walking it crosses into the JVM per step.
MAX_CAUSE_DEPTH = 16


def _root_cause(exc: Py4JJavaError) -> str:
    """The innermost Java cause says what was wrong (e.g. a malformed record); the outer ones
    only say that a stage or a job failed."""
    cause = exc.java_exception
    for _ in range(MAX_CAUSE_DEPTH):
        inner = cause.getCause()
        if inner is None:
            break
        cause = inner
    return _first_line(str(cause.toString())) or "Spark job failed"
