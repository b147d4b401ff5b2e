"""`rmqc analyze`: the fleet history pipeline on Spark (exported logs + client histories).

rmqc.pipeline (and with it pyspark) is imported inside the command, so `rmqc --help` stays fast.
Layout: the render section (all Rich output of this command), then the command, which parses,
calls `run_pipeline` once and renders.

Exit status: 0 when nothing is wrong, 1 when an invariant is violated or a client history is not
linearizable (so CI can gate on it), 2 for usage errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ._exit import ExitCode

if TYPE_CHECKING:
    from rmqc.pipeline import Summary

# Violations listed in the terminal; the report and the `violations` table have all of them.
VIOLATIONS_SHOWN = 15

# ---- render ----------------------------------------------------------------------------------


def _ms(value: float | int | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _overview(summary: Summary) -> Table:
    table = Table(title="rmqc analyze", show_header=False, title_justify="left")
    table.add_row("log rows", f"{summary.rows:,}")
    table.add_row("controller clusters", str(summary.controller_clusters))
    table.add_row("broker groups", f"{summary.groups:,}")
    table.add_row("elections", f"{summary.elections:,}")
    f = summary.failovers
    table.add_row("failovers", f"{f.count:,} ({f.resolved:,} resolved, {f.timed:,} with a known start)")
    table.add_row("failover ms p50 / p90 / p99 / max",
                  f"{_ms(f.p50_ms)} / {_ms(f.p90_ms)} / {_ms(f.p99_ms)} / {_ms(f.max_ms)}")
    if f.by_reason:
        table.add_row("failovers by reason", ", ".join(f"{reason} {count:,}" for reason, count in f.by_reason))
    table.add_row("detection ms p99 (last alive -> seen dead)", _ms(f.detection_p99_ms))
    table.add_row("analysis time", f"{summary.elapsed_s:.1f} s")
    return table


def _invariants(summary: Summary) -> Table:
    table = Table(title="Invariants", title_justify="left")
    table.add_column("invariant")
    table.add_column("violations", justify="right")
    for kind, count in summary.violation_counts.items():
        table.add_row(kind, f"[red]{count}[/red]" if count else "[green]0[/green]")
    return table


def _violations(summary: Summary) -> Table:
    table = Table(title=f"First violations ({summary.violation_total} in all)", title_justify="left")
    for column in ("kind", "controller", "group", "entry", "detail"):
        table.add_column(column)
    for v in summary.violations[:VIOLATIONS_SHOWN]:
        table.add_row(v.kind, v.controller_cluster, v.broker_name or "-", f"{v.index}/{v.seq}", v.detail)
    return table


def _flapping(summary: Summary) -> Table:
    table = Table(title="Flapping groups", title_justify="left")
    for column in ("rank", "controller", "group", "max/hour", "elections", "failovers"):
        table.add_column(column)
    for r in summary.top_flapping:
        table.add_row(str(r.rank), r.controller_cluster, r.broker_name, str(r.max_elections_in_hour),
                      str(r.elections), str(r.failovers))
    return table


# Exports are matched by their controller group's name (`controller_cluster`): two unrelated
# groups that both kept the default name `rmqc` look like one group whose nodes disagree.
DIVERGENCE_HINT = (
    "log_divergence: nodes of one controller group disagree about an entry, or exports of two different "
    "groups carry the same name (the default is rmqc): export each group with its own name, "
    "`rmqc log export DIR --cluster NAME`, and analyse again")


def render_summary(console: Console, summary: Summary) -> None:
    from rmqc.pipeline import LOG_DIVERGENCE  # imported by the command already (with pyspark)

    console.print(_overview(summary))
    console.print(_invariants(summary))
    if summary.violations:
        console.print(_violations(summary))
    if summary.violation_counts.get(LOG_DIVERGENCE):
        console.print(DIVERGENCE_HINT)
    if summary.top_flapping:
        console.print(_flapping(summary))
    lin = summary.linearizability
    if lin is not None:
        colour = "red" if lin.not_linearizable else "green"
        console.print(
            f"Client histories: {lin.keys} keys, [{colour}]{lin.not_linearizable} not linearizable"
            f"[/{colour}], {lin.undecided} undecided"
            + (f" ({', '.join(lin.failing_keys[:10])})" if lin.failing_keys else "")
        )
    console.print(f"Report: {summary.report_path}")


def found_problems(summary: Summary) -> bool:
    lin = summary.linearizability
    return summary.violation_total > 0 or (lin is not None and lin.not_linearizable > 0)


# ---- command ---------------------------------------------------------------------------------


def analyze_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(help="exported histories: .jsonl/.json/.ndjson/.parquet files or directories of them",
                       exists=True),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for the Parquet tables and report.md")],
    master: Annotated[str, typer.Option(help="Spark master: local[N], spark://host:7077, yarn, ...")] = "local[*]",
    histories: Annotated[
        list[Path] | None,
        typer.Option("--histories", help="recorded client histories (JSON lines); repeat for several",
                     exists=True),
    ] = None,
    driver_memory: Annotated[str, typer.Option(help="spark.driver.memory")] = "4g",
    shuffle_partitions: Annotated[int, typer.Option(help="spark.sql.shuffle.partitions", min=1)] = 4,
) -> None:
    """Analyse controller histories at fleet scale: failovers, flapping, audit, invariants."""
    from rmqc.pipeline import PipelineError, analyze

    console = Console()
    try:
        summary = analyze(master, inputs, out, histories=histories or (),
                          driver_memory=driver_memory, shuffle_partitions=shuffle_partitions)
    except PipelineError as exc:
        # Bad input (unreadable file, malformed JSON line): say what went wrong, without a traceback.
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(ExitCode.USAGE) from None
    render_summary(console, summary)
    if found_problems(summary):
        raise typer.Exit(ExitCode.PROBLEMS_FOUND)
