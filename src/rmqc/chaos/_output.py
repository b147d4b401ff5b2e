"""What a chaos run leaves in its directory: history.jsonl, summary.json, report.md with its two
charts, and the export `rmqc analyze` reads (export/ in the schema of `rmqc log export`, and the
client history clients.jsonl for its linearizability check)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmqc.errors import RmqcError
from rmqc.linearizability import Op, write_history

from ._checks import INITIAL_NEXT_ID, Record, history_ops
from ._history import now_ns, write_jsonl
from ._summary import RESTARTED_FAULTS, summarize

BUCKET_S = 0.5  # the timeline's resolution: a failover of ~0.2 s still shows as a dip
# A long run's timeline packs a window into a few pixels: it also gets a close-up of its first ones.
CLOSE_UP_WINDOWS = 8
ROLE_LEVEL = {"down": 0, "follower": 1, "leader": 2}
EXPORT_CLUSTER = "rmqc"


def write_outputs(out: Path, records: Sequence[Record], meta: dict[str, Any],
                  data_dirs: dict[str, Path] | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    if data_dirs:
        records = [*records, *_export_failure(out, records, data_dirs)]
    write_jsonl(out / "history.jsonl", records)
    summary = summarize(records, meta)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    try:
        timeline_chart(records, out / "timeline.png")
        close_up = _close_up(records)
        if close_up is not None:
            timeline_chart(close_up, out / "timeline-close-up.png")
        rto_chart(summary, out / "rto.png")
        charts = True
    except ImportError:  # matplotlib comes with the `pipeline` extra; the tables need nothing
        charts, close_up = False, None
    (out / "report.md").write_text(report_markdown(summary, charts, close_up=close_up is not None))
    return summary


def _export_failure(out: Path, records: Sequence[Record], data_dirs: dict[str, Path]) -> list[Record]:
    """The export for `rmqc analyze`; a node log it cannot read (damaged, missing) is a finding of
    the run, reported with the others as an `aborted` record, not a traceback instead of a report."""
    try:
        export_for_analyze(out, records, data_dirs)
    except (RmqcError, OSError) as error:
        return [{"type": "aborted", "t": now_ns(),
                 "reason": f"the committed log could not be exported: {type(error).__name__}: {error}"}]
    return []


def export_for_analyze(out: Path, records: Sequence[Record], data_dirs: dict[str, Path]) -> None:
    """The committed log of one node (every node commits the same log; one avoids counting each
    failover once per node), and the register history for `rmqc analyze --histories`."""
    from rmqc.cli.log import ExportFormat, export_data_dir  # the one exporter of the committed log

    (out / "export").mkdir(exist_ok=True)
    node_id, data_dir = sorted(data_dirs.items())[0]
    export_data_dir(data_dir, out / "export" / f"{node_id}.jsonl", ExportFormat.JSONL, EXPORT_CLUSTER, node_id)
    write_history(out / "clients.jsonl", with_initial_writes(history_ops(records)))


def with_initial_writes(ops: list[Op]) -> list[Op]:
    """The ops, each key led by a write of its initial value (nextBrokerId 1) completed before any
    op of the key began: `rmqc analyze` checks every key from an empty register."""
    first: dict[str, int] = {}
    for op in ops:
        first[op.key] = min(op.invoke_ns, first.get(op.key, op.invoke_ns))
    initial = [Op("initial", key, "write", INITIAL_NEXT_ID, start - 2, start - 1)
               for key, start in sorted(first.items())]
    return initial + ops


def _seconds(t: int, origin: int) -> float:
    return (t - origin) / 1e9


# The field that says when each kind of record happened, for the timeline's origin.
_STARTED_AT = {"attempt": "invoke", "role": "t", "window": "start"}


def _origin(records: Sequence[Record]) -> int:
    return min((r[_STARTED_AT[r["type"]]] for r in records if r["type"] in _STARTED_AT), default=0)


def _close_up(records: Sequence[Record]) -> list[Record] | None:
    """The records of the first CLOSE_UP_WINDOWS windows (None when the run has no more than that)."""
    windows = [r for r in records if r["type"] == "window"]
    if len(windows) <= CLOSE_UP_WINDOWS:
        return None
    until = windows[CLOSE_UP_WINDOWS - 1]["end"]
    return [r for r in records if r["type"] in _STARTED_AT and r[_STARTED_AT[r["type"]]] <= until]


def timeline_chart(records: Sequence[Record], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    origin = _origin(records)
    fig, (load_ax, role_ax) = plt.subplots(2, 1, figsize=(12, 6), sharex=True, height_ratios=(3, 2))
    _plot_load(load_ax, records, origin)
    _plot_roles(role_ax, records, origin)
    for ax in (load_ax, role_ax):
        _shade_windows(ax, records, origin)
    role_ax.set_xlabel("seconds since the run's start")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_load(ax: Any, records: Sequence[Record], origin: int) -> None:
    counts: dict[str, dict[int, int]] = {"writes ok": defaultdict(int), "reads ok": defaultdict(int),
                                         "errors": defaultdict(int)}
    for r in records:
        if r["type"] == "attempt":
            series = "errors" if not r["ok"] else ("writes ok" if r["proc"] == "writer" else "reads ok")
            counts[series][int(_seconds(r["complete"], origin) / BUCKET_S)] += 1
    last = max((max(c, default=0) for c in counts.values()), default=0)
    xs = [i * BUCKET_S for i in range(last + 1)]
    for name, color in (("writes ok", "tab:blue"), ("reads ok", "tab:green"), ("errors", "tab:red")):
        ax.plot(xs, [counts[name][i] / BUCKET_S for i in range(last + 1)], label=name, color=color, lw=1)
    ax.set_ylabel("ops/s")
    ax.legend(loc="upper right", fontsize=8)


def _plot_roles(ax: Any, records: Sequence[Record], origin: int) -> None:
    samples = [r for r in records if r["type"] == "role"]
    nodes = sorted({node for r in samples for node in r["roles"]})
    for offset, node in enumerate(nodes):
        ts = [_seconds(r["t"], origin) for r in samples]
        levels = [ROLE_LEVEL[r["roles"].get(node, "down")] + offset * 3 for r in samples]
        ax.step(ts, levels, where="post", lw=1, label=node)
    ax.set_yticks([offset * 3 + level for offset in range(len(nodes)) for level in ROLE_LEVEL.values()])
    ax.set_yticklabels([f"{node} {role}" for node in nodes for role in ROLE_LEVEL], fontsize=6)


def _shade_windows(ax: Any, records: Sequence[Record], origin: int) -> None:
    for r in records:
        if r["type"] == "window":
            ax.axvspan(_seconds(r["fault"], origin), _seconds(r["heal"], origin), color="red", alpha=0.12)
            ax.axvspan(_seconds(r["heal"], origin), _seconds(r["end"], origin), color="orange", alpha=0.08)


def rto_chart(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["window_rows"]
    kinds = sorted(summary["faults"])
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(kinds)), 4))
    for i, kind in enumerate(kinds):
        of_kind = [r for r in rows if r["kind"] == kind]
        _dots(ax, i - 0.12, [r["write_ms"] for r in of_kind], "writes" if i == 0 else None,
              color="tab:blue", s=12)
        _dots(ax, i + 0.12, [r["masters_ms"] for r in of_kind], "agreed masters" if i == 0 else None,
              color="tab:purple", s=12, marker="x")
        if kind in RESTARTED_FAULTS:
            _dots(ax, i, [r["write_from_heal_ms"] for r in of_kind], "writes, from the restart",
                  facecolors="none", edgecolors="tab:blue", s=20)
    targets = summary.get("rto_targets")
    if targets:
        ax.axhline(targets["target_p99_ms"], color="tab:red", ls="--", lw=1,
                   label=f"target: p99 <= {targets['target_p99_ms'] / 1000:g} s (kills, pauses, partitions)")
    ax.set_xticks(range(len(kinds)))
    ax.set_xticklabels(kinds, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("RTO, ms from the fault's start")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _dots(ax: Any, x: float, values: list[float | None], label: str | None, **style: Any) -> None:
    ys = [v for v in values if v is not None]
    ax.scatter([x] * len(ys), ys, label=label, **style)


def verdict_line(summary: dict[str, Any]) -> str:
    return "PASS: no violation" if not summary["violations"] else f"FAIL: {len(summary['violations'])} violations"


def report_markdown(summary: dict[str, Any], charts: bool = True, *, close_up: bool = False) -> str:
    lines = [
        f"# Chaos run: {verdict_line(summary)}", "",
        f"`{summary.get('command', '')}` (seed {summary.get('seed')}, {summary.get('nodes')} nodes)", "",
        f"- windows: {summary['windows']}; acknowledged writes: {summary['acknowledged_writes']}; "
        f"reads: {summary['reads']}",
        f"- lost: {summary['lost']}; duplicates: {summary['duplicates']}; "
        f"failed writes in quiet phases: {summary['quiet_errors']}",
        f"- groups the linearizability search gave up on: {summary['unchecked_groups'] or 'none'}",
        _designations_line(summary.get("designations")), *_messages_lines(summary.get("messages")), "",
        *_target_lines(summary.get("rto_targets")),
        "## RTO per fault kind (ms from the fault's start)", "",
        "| fault | windows | writes p50 | p99 | max | masters p50 | p99 | max | unrecovered |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, row in summary["faults"].items():
        w, m = row["rto_write_ms"], row["rto_masters_ms"]
        lines.append(f"| {kind} | {row['windows']} | {_ms(w['p50'])} | {_ms(w['p99'])} | {_ms(w['max'])} | "
                     f"{_ms(m['p50'])} | {_ms(m['p99'])} | {_ms(m['max'])} | {row['unrecovered']} |")
    if summary.get("messages"):
        lines += ["", "## Message RTO per fault kind (ms from the fault's start to the first acknowledged send)", "",
                  "| fault | windows | p50 | p99 | max |", "|---|---|---|---|---|"]
        for kind, row in summary["faults"].items():
            p50, p99, top = (_ms(row["rto_send_ms"][k]) for k in ("p50", "p99", "max"))
            lines.append(f"| {kind} | {row['windows']} | {p50} | {p99} | {top} |")
    if charts:
        lines += ["", "## Timeline", "", "Red: fault; orange: heal and recovery. Top: successful writes and "
                  "reads and failed requests per second; bottom: each node's role.", "", "![timeline](timeline.png)"]
        if close_up:
            lines += ["", f"The first {CLOSE_UP_WINDOWS} windows:", "",
                      "![timeline, first windows](timeline-close-up.png)"]
        lines += ["", "## RTO per window", "", "![rto](rto.png)"]
    else:
        lines += ["", "(No charts: matplotlib is not installed; `pip install 'rmqc[pipeline]'`.)"]
    lines += ["", "## Violations", ""]
    lines += [f"- {v}" for v in summary["violations"]] or ["none"]
    lines += ["", "## Stalls (running nodes no fault touched, silent for 1 s or more; not violations)", ""]
    lines += [f"- {s['node']} at {s['at_s']} s for {s['for_s']} s" for s in summary.get("stalls", [])] or ["none"]
    lines += ["", "## Windows", "",
              "| # | fault | what | write RTO ms | from the restart ms | masters RTO ms |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['window']} | {_cell(r['kind'])} | {_cell(r['detail'])} | {_ms(r['write_ms'])} | "
              f"{_ms(r.get('write_from_heal_ms')) if r['kind'] in RESTARTED_FAULTS else '-'} | "
              f"{_ms(r['masters_ms'])} |" for r in summary["window_rows"]]
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    """A Markdown table cell: a `|` in the text (a partition's sides, `['n2']|['n0', 'n1']`) would
    end the cell, a newline the row."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _messages_lines(messages: dict[str, int] | None) -> list[str]:
    if not messages:
        return []
    return [f"- messages (Java Producer and Consumer): acknowledged {messages['acknowledged']}, consumed "
            f"{messages['consumed']}, lost {messages['lost']}; failed sends {messages['failed_sends']}"]


def _designations_line(counts: dict[str, int] | None) -> str:
    if not counts:
        return "- master designations by the admin (1002): none"
    return (f"- master designations by the admin (1002): {counts['sent']} sent, {counts['elected']} elected, "
            f"{counts['still_master']} already master, {counts['refused']} refused, {counts['unanswered']} unanswered")


def _target_lines(targets: dict[str, Any] | None) -> list[str]:
    if not targets or not targets["kinds"]:
        return []
    lines = [(f"## RTO against the target: write RTO p99 <= {_ms(targets['target_p99_ms'])} ms "
              f"(OpenChaos: about {_ms(targets['openchaos_ms'])} ms)"), "",
             ("Kills, pauses and partitions, each from the fault's start (as OpenChaos counts). A fault healed "
              "by a restart also shows its RTO from the restart, not judged: a major-kill leaves no quorum "
              "until then, so from the fault its RTO includes the fault's hold."), "",
             "| fault | p50 ms | p99 ms | not recovered | met | from the restart: p50 / p99 ms |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {kind} | {_ms(row['p50'])} | {_ms(row['p99'])} | {row['unrecovered']} | "
              f"{'yes' if row['met'] else '**no**'} | {_restart_cell(row)} |" for kind, row in targets["kinds"].items()]
    return [*lines, ""]


def _restart_cell(row: dict[str, Any]) -> str:
    restart = row.get("from_restart")
    return "-" if restart is None else f"{_ms(restart['p50'])} / {_ms(restart['p99'])}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"

