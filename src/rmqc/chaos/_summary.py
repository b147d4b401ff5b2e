"""summary.json from a checked history: per fault kind the windows, the recovery times (RTO) and
what the checkers found."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ._checks import ELECTED, STILL_MASTER, Record, all_violations, message_counts, stalls

NS_PER_MS = 1_000_000
# The design's target for a chaos run (design.md, "Targets"): RTO p99 <= 2 s for kills, pauses and
# partitions; OpenChaos publishes about 10 s for a RocketMQ controller failover.
RTO_TARGET_P99_MS = 2000.0
OPENCHAOS_RTO_MS = 10_000.0
# The faults the target covers. Every kind's RTO counts from the fault's start, as OpenChaos counts.
TARGETED_FAULTS = frozenset({
    "leader-kill", "kill", "minor-kill", "major-kill", "suspend", "partition", "partition-reject",
    "partition-leader", "partition-leader-reject", "asymmetric", "bridge", "ring",
})
# The faults healed by restarting what they killed: their write RTO from the restart (the heal) is
# reported beside the one from the fault, to tell the restart's own cost from the hold (a
# major-kill leaves no quorum until the restart, so from the fault its RTO includes --fault-s).
RESTARTED_FAULTS = frozenset({"leader-kill", "kill", "minor-kill", "major-kill", "broker-kill"})


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def rto_stats(values_ms: Sequence[float]) -> dict[str, float | None]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return {"p50": rounded(percentile(values_ms, 0.5)), "p99": rounded(percentile(values_ms, 0.99)),
            "max": rounded(max(values_ms, default=None))}


def window_rtos(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Per window: ms from the fault's start to the first acknowledged write invoked after it, and
    to the first moment every broker group had one agreed, notified master; None if never within
    the window. A write counts from its first attempt: a retry of an id whose earlier attempt
    committed just before the fault is answered from the state, so it proves nothing."""
    acked = sorted((r["invoke"], r["complete"]) for r in records
                   if r["type"] == "write" and r["complete"] is not None)
    acked_invokes = [invoke for invoke, _ in acked]
    sent = sorted((r["invoke"], r["complete"]) for r in records if r["type"] == "send" and r["ok"])
    sent_invokes = [invoke for invoke, _ in sent]
    converged = sorted(r["t"] for r in records if r["type"] == "converged" and r["ok"])
    rows = []
    for window in (r for r in records if r["type"] == "window"):
        fault, end = window["fault"], window["end"]
        agreed = converged[bisect.bisect_left(converged, fault):]
        rows.append({"window": window["window"], "kind": window["kind"], "detail": window["detail"],
                     "write_ms": _first_ack_ms(acked, acked_invokes, fault, end),
                     "write_from_heal_ms": _first_ack_ms(acked, acked_invokes, window["heal"], end),
                     "send_ms": _first_ack_ms(sent, sent_invokes, fault, end) if sent else None,
                     "masters_ms": (agreed[0] - fault) / NS_PER_MS if agreed and agreed[0] <= end else None,
                     "quiet_errors": _failed_between(records, window["start"], fault)})
    return rows


def _first_ack_ms(acked: list[tuple[int, int]], acked_invokes: list[int], since: int, end: int) -> float | None:
    """ms from `since` to the first completion (by `end`) of a write first tried at or after it."""
    done = [complete for _, complete in acked[bisect.bisect_left(acked_invokes, since):] if complete <= end]
    return (min(done) - since) / NS_PER_MS if done else None


def _failed_between(records: Sequence[Record], start: int, end: int) -> int:
    """Failed writer attempts invoked in a quiet phase: unavailability outside fault windows."""
    return sum(1 for r in records if r["type"] == "attempt" and r["proc"] == "writer" and not r["ok"]
               and start <= r["invoke"] < end)


def summarize(records: Sequence[Record], meta: dict[str, Any]) -> dict[str, Any]:
    checked = all_violations(records)
    rows = window_rtos(records)
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_kind[row["kind"]].append(row)
    kinds = {kind: _kind_summary(kind, kind_rows) for kind, kind_rows in sorted(by_kind.items())}
    unrecovered = [f"window {r['window']} ({r['kind']}): no acknowledged write before the window ended"
                   for r in rows if r["write_ms"] is None]
    violations = checked["violations"] + unrecovered
    return {
        **meta,
        "windows": len(rows),
        "acknowledged_writes": sum(1 for r in records if r["type"] == "write" and r["complete"] is not None),
        "reads": sum(1 for r in records if r["type"] == "read"),
        "lost": len(checked["lost"]),
        **_messages(records),
        "duplicates": len(checked["duplicates"]),
        "violations": violations,
        "unchecked_groups": checked["unchecked_groups"],
        "quiet_errors": sum(r["quiet_errors"] for r in rows),
        "stalls": stalls(records),
        "rto_ms": {kind: summary["rto_write_ms"] for kind, summary in kinds.items()},
        "rto_targets": rto_targets(by_kind),
        "designations": designation_counts(records),
        "faults": kinds,
        "window_rows": rows,
    }


def _messages(records: Sequence[Record]) -> dict[str, Any]:
    """acknowledged / consumed / lost messages of the Java Producer (nothing with simulated brokers)."""
    counts = message_counts(records)
    if not counts["acknowledged"] and not counts["failed_sends"]:
        return {}
    lost = counts["lost"] if counts["verified"] else counts["acknowledged"]
    return {"messages": {key: counts[key] for key in ("acknowledged", "consumed", "failed_sends")} | {"lost": lost}}


def _kind_summary(kind: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    writes = [r["write_ms"] for r in rows if r["write_ms"] is not None]
    masters = [r["masters_ms"] for r in rows if r["masters_ms"] is not None]
    sends = [r["send_ms"] for r in rows if r.get("send_ms") is not None]
    summary: dict[str, Any] = {
        "windows": len(rows), "rto_write_ms": rto_stats(writes), "rto_masters_ms": rto_stats(masters),
        "rto_send_ms": rto_stats(sends),
        "unrecovered": len(rows) - len(writes), "quiet_errors": sum(r["quiet_errors"] for r in rows)}
    if kind in RESTARTED_FAULTS:
        summary["rto_write_from_restart_ms"] = rto_stats(_from_restart(rows))
    return summary


def _from_restart(rows: list[dict[str, Any]]) -> list[float]:
    return [r["write_from_heal_ms"] for r in rows if r["write_from_heal_ms"] is not None]


def rto_targets(by_kind: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The write RTO from the fault's start of every targeted fault kind that ran, against the
    design's p99 target; a kind healed by a restart also shows its RTO from the restart (not
    judged). A kind with a window that never recovered misses the target, whatever the p99 of the
    others."""
    kinds: dict[str, dict[str, Any]] = {}
    for kind in sorted(TARGETED_FAULTS & by_kind.keys()):
        values = [r["write_ms"] for r in by_kind[kind]]
        stats = rto_stats([v for v in values if v is not None])
        unrecovered = values.count(None)
        met = not unrecovered and stats["p99"] is not None and stats["p99"] <= RTO_TARGET_P99_MS
        kinds[kind] = {"p50": stats["p50"], "p99": stats["p99"], "unrecovered": unrecovered, "met": met}
        if kind in RESTARTED_FAULTS:
            restart = rto_stats(_from_restart(by_kind[kind]))
            kinds[kind]["from_restart"] = {"p50": restart["p50"], "p99": restart["p99"]}
    return {"target_p99_ms": RTO_TARGET_P99_MS, "openchaos_ms": OPENCHAOS_RTO_MS,
            "all_met": all(k["met"] for k in kinds.values()), "kinds": kinds}


def designation_counts(records: Sequence[Record]) -> dict[str, int]:
    """The admin's 1002 designations: sent, elected (SUCCESS), already master (MASTER_STILL_EXIST),
    refused (another code: not alive or not in sync, no leader) and unanswered (timeout, refused
    connection)."""
    codes = [r["code"] for r in records if r["type"] == "designate"]
    elected = sum(1 for c in codes if c == ELECTED)
    still = sum(1 for c in codes if c == STILL_MASTER)
    unanswered = sum(1 for c in codes if c is None)
    return {"sent": len(codes), "elected": elected, "still_master": still,
            "refused": len(codes) - elected - still - unanswered, "unanswered": unanswered}
