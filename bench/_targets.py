"""The Targets table of design.md, row by row, read out of one run's results: what was measured,
what the anchors measured in the same run, their ratio, and whether the target is met."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rmqc.config import NodeConfig

from ._stats import fmt

_NODE = NodeConfig()
# The upper end of the randomised election timeout with the default ticks (1 s).
ELECTION_TIMEOUT_MS = 2 * _NODE.election_tick * _NODE.tick_ms

Results = dict[str, dict[str, Any]]


@dataclass
class Row:
    what: str
    target: str
    measured: str = "not measured"
    anchors: str = ""
    ratio: str = ""
    met: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _ok(results: Results, name: str) -> dict[str, Any] | None:
    result = results.get(name)
    return result if result and result.get("status") == "ok" else None


def _why_missing(results: Results, name: str) -> str:
    result = results.get(name)
    if result is None:
        return f"{name} not run"
    if result.get("status") == "ok":
        return f"{name}: no such load point in this profile"
    return f"{name} {result.get('status')}: {result.get('message', '')}"[:160]


def _point(results: Results, name: str, clients: int) -> dict[str, Any] | None:
    """The load point at `clients`, else the largest one measured below it (smaller profiles)."""
    result = _ok(results, name)
    if result is None:
        return None
    points = [p for p in result.get("points", []) if p["clients"] <= clients]
    return max(points, key=lambda p: p["clients"]) if points else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else ""


def _leader_kill(results: Results) -> Row:
    row = Row("controller leader killed -> new leader accepting writes", "p99 <= 500 ms, p50 <= 250 ms")
    if (r := _ok(results, "leader_kill")) is None:
        row.measured = _why_missing(results, "leader_kill")
        return row
    s = r["summary"]
    row.measured = f"p50 {fmt(s['p50_ms'])} ms, p99 {fmt(s['p99_ms'])} ms ({s['n']} kills)"
    row.met = s["p99_ms"] <= 500 and s["p50_ms"] <= 250
    return row


def _pauses(results: Results) -> Row:
    row = Row("leader paused (SIGSTOP) -> writes accepted again",
              "<= election timeout + 0.5 s; no unpaused node silent > 100 ms")
    if (r := _ok(results, "pauses")) is None:
        row.measured = _why_missing(results, "pauses")
        return row
    s = r["summary"]
    row.measured = (f"worst {fmt(s['worst_leader_recovery_ms'])} ms, silence {fmt(s['worst_silence_ms'])} ms, "
                    f"lost {s['lost']}, stale reads {s['stale_reads']} ({s['pauses']} pauses)")
    row.met = (s["worst_leader_recovery_ms"] <= ELECTION_TIMEOUT_MS + 500 and s["worst_silence_ms"] <= 100
               and s["lost"] == 0 and s["stale_reads"] == 0)
    return row


def _broker_closed(results: Results) -> Row:
    row = Row("broker master connection closed -> new master committed, 1008 received", "p99 <= 50 ms")
    if (r := _ok(results, "broker_failover")) is None:
        row.measured = _why_missing(results, "broker_failover")
        return row
    c, h = r["closed"], r["hung_from_deadline"]
    row.measured = (f"p50 {fmt(c['p50_ms'])} ms, p99 {fmt(c['p99_ms'])} ms ({c['n']} kills); hung master from its "
                    f"deadline: p50 {fmt(h['p50_ms'])} ms, p99 {fmt(h['p99_ms'])} ms")
    row.met = c["p99_ms"] <= 50
    return row


def _heartbeats(results: Results) -> Row:
    row = Row("heartbeats ingested, 3-node cluster", ">= 50,000/s")
    if (r := _ok(results, "heartbeats")) is None:
        row.measured = _why_missing(results, "heartbeats")
        return row
    row.measured = f"{fmt(r['heartbeats_per_s'], 0)}/s"
    row.met = r["heartbeats_per_s"] >= 50_000
    return row


def _anchor_points(results: Results, clients: int) -> tuple[str, dict[str, Any] | None]:
    etcd = _point(results, "writes_etcd", clients)
    pso = _point(results, "writes_pysyncobj", clients)
    parts = []
    if etcd:
        parts.append(f"etcd {fmt(etcd['ops_per_s'], 0)}/s p99 {fmt(etcd['p99_ms'])} ms" + _at(etcd, clients))
    if pso:
        parts.append(f"PySyncObj (no fsync) {fmt(pso['ops_per_s'], 0)}/s p99 {fmt(pso['p99_ms'])} ms")
    return "; ".join(parts) or _why_missing(results, "writes_etcd"), etcd


def _writes_256(results: Results) -> Row:
    row = Row("durable writes (fsync on a quorum), 256 clients", ">= 5,000/s, p99 <= 50 ms")
    row.anchors, etcd = _anchor_points(results, 256)
    if (p := _point(results, "writes_rmqc", 256)) is None:
        row.measured = _why_missing(results, "writes_rmqc")
        return row
    row.measured = f"{fmt(p['ops_per_s'], 0)}/s, p50 {fmt(p['p50_ms'])} ms, p99 {fmt(p['p99_ms'])} ms" + _at(p, 256)
    if etcd:
        row.ratio = f"{_ratio(p['ops_per_s'], etcd['ops_per_s'])} of etcd"
    row.met = p["ops_per_s"] >= 5000 and p["p99_ms"] <= 50 if p["clients"] == 256 else None
    return row


def _at(point: dict[str, Any], wanted: int) -> str:
    return "" if point["clients"] == wanted else f" (at {point['clients']} clients, the most this profile runs)"


def _writes_1(results: Results) -> Row:
    row = Row("write latency, 1 client", "p99 <= 5 ms")
    row.anchors, etcd = _anchor_points(results, 1)
    if (p := _point(results, "writes_rmqc", 1)) is None:
        row.measured = _why_missing(results, "writes_rmqc")
        return row
    row.measured = f"p50 {fmt(p['p50_ms'], 2)} ms, p99 {fmt(p['p99_ms'], 2)} ms"
    row.ratio = f"{p['p99_ms'] / etcd['p99_ms']:.2f}x etcd's p99" if etcd and etcd["p99_ms"] else ""
    row.met = p["p99_ms"] <= 5
    return row


def _single_read(results: Results, what: str, key: str, etcd_key: str, limit_ms: float) -> Row:
    row = Row(what, f"p99 <= {limit_ms} ms")
    if (e := _ok(results, "reads_etcd")) is not None:
        ep = e["single_client"].get(etcd_key)
        row.anchors = f"etcd {etcd_key}: p50 {fmt(ep['p50_ms'], 2)} ms, p99 {fmt(ep['p99_ms'], 2)} ms" if ep else ""
    else:
        row.anchors = _why_missing(results, "reads_etcd")
    if (r := _ok(results, "reads_rmqc")) is None:
        row.measured = _why_missing(results, "reads_rmqc")
        return row
    p = r["single_client"][key]
    row.measured = f"p50 {fmt(p['p50_ms'], 2)} ms, p99 {fmt(p['p99_ms'], 2)} ms"
    if e is not None and (ep := e["single_client"].get(etcd_key)) and ep["p99_ms"]:
        row.ratio = f"{p['p99_ms'] / ep['p99_ms']:.2f}x etcd's p99"
    row.met = p["p99_ms"] <= limit_ms
    return row


def _reads_many(results: Results) -> Row:
    row = Row("linearizable reads, all nodes, many clients", ">= 30,000/s; >= 1.8x leader-only")
    e = _ok(results, "reads_etcd")
    if e is not None:
        row.anchors = (f"etcd all nodes {fmt(e['many_clients']['all nodes']['ops_per_s'], 0)}/s, "
                       f"{e['all_over_leader']:.2f}x its leader-only")
    else:
        row.anchors = _why_missing(results, "reads_etcd")
    if (r := _ok(results, "reads_rmqc")) is None:
        row.measured = _why_missing(results, "reads_rmqc")
        return row
    rate = r["many_clients"]["all nodes"]["ops_per_s"]
    row.measured = (f"{fmt(rate, 0)}/s, {r['all_over_leader']:.2f}x leader-only "
                    f"({r['conditions']['many_clients']} clients{_read_limit(r)})")
    if e is not None:
        row.ratio = _ratio(rate, e["many_clients"]["all nodes"]["ops_per_s"]) + " of etcd"
    row.met = rate >= 30_000 and r["all_over_leader"] >= 1.8
    return row


def _read_limit(result: dict[str, Any]) -> str:
    """How the all-nodes point was loaded and what the machine had left (runs before issue 21: nothing)."""
    point = result["many_clients"]["all nodes"]
    if "cpu_cores" not in point:
        return ""
    cores = point["cpu_cores"]
    return (f", {point['generators']} generator processes, machine {cores['machine']:.2f} cores busy of "
            f"{result['conditions']['nproc']}, others {cores['others']:.2f}; "
            f"{result['all_over_leader_busiest_node_bound']:.2f}x with the busiest node at one core")


def _scale(results: Results) -> Row:
    row = Row("broker groups held (3 brokers each, 1 heartbeat/s); simultaneous failovers",
              "10,000 groups; 1,000 simultaneous failovers done in <= 2 s")
    if (r := _ok(results, "scale")) is None:
        row.measured = _why_missing(results, "scale")
        return row
    groups, f = r["conditions"]["groups"], r["failover"]
    done = f["all_notified_ms"]
    row.measured = (f"{groups:,} groups held; {f['masters_lost']:,} failovers: all re-elected in "
                    f"{fmt(f['all_reelected_ms'])} ms, all notified in {fmt(done)} ms")
    row.met = groups >= 10_000 and f["masters_lost"] >= 1000 and done is not None and done <= 2000
    return row


def _memory(results: Results) -> Row:
    row = Row("memory per node with 10,000 groups / 30,000 live brokers", "RSS <= 200 MB, flat over a 1-hour run")
    if (r := _ok(results, "scale")) is None:
        row.measured = _why_missing(results, "scale")
        return row
    steady = r["steady"]
    rss = [v for v in steady["rss_mb"].values() if v is not None]
    row.measured = (f"RSS max {fmt(max(rss) if rss else None)} MB over {steady['seconds']} s at "
                    f"{r['conditions']['groups']:,} groups; CPU % per node {steady['cpu_percent']}")
    row.measured += " (the 1-hour flatness is not measured by the suite)"
    row.met = (max(rss) <= 200) if rss and r["conditions"]["groups"] >= 10_000 else None
    return row


def _restart(results: Results) -> Row:
    row = Row("restart with 1M-entry history", "serving again in <= 1 s (snapshot + compacted log)")
    if (r := _ok(results, "restart")) is None:
        row.measured = _why_missing(results, "restart")
        return row
    f = r["figures"]
    snap, full, empty = f["snapshot + compacted log"], f["full log, no snapshot"], f["empty"]
    inside = snap.get("in_process", {}).get("serving_s")
    row.measured = (f"{snap['entries']:,} entries: serving after {snap['serving_s']:.2f} s with snapshot "
                    f"({snap['history_cost_s']:+.2f} s over an empty node's {empty['serving_s']:.2f} s process start); "
                    f"node started in-process: {fmt(inside, 3)} s; without snapshot {full['serving_s']:.2f} s")
    row.met = snap["entries"] >= 1_000_000 and (inside if inside is not None else snap["serving_s"]) <= 1.0
    return row


def _test_suite(results: Results) -> Row:
    row = Row("CI test suite on this machine", "<= 20 min, no test that sleeps to wait")
    if (r := _ok(results, "test_suite")) is None:
        row.measured = _why_missing(results, "test_suite") + " (run with --full)"
        return row
    row.measured = f"{r['minutes']:.1f} min: {r['summary']}"
    row.met = r["minutes"] <= 20 and r["returncode"] == 0
    return row


def _vs_etcd(results: Results) -> Row:
    row = Row("vs etcd 3.4, same machine, same shape of load", "ahead: writes >= 1x, linearizable reads >= 1x")
    rmqc_w, etcd_w = _point(results, "writes_rmqc", 256), _point(results, "writes_etcd", 256)
    rmqc_r, etcd_r = _ok(results, "reads_rmqc"), _ok(results, "reads_etcd")
    if not (rmqc_w and etcd_w and rmqc_r and etcd_r):
        row.measured = "needs writes_rmqc, writes_etcd, reads_rmqc and reads_etcd: " + ", ".join(
            _why_missing(results, n) for n in ("writes_etcd", "reads_etcd") if not _ok(results, n))
        return row
    w = rmqc_w["ops_per_s"] / etcd_w["ops_per_s"]
    rr = rmqc_r["many_clients"]["all nodes"]["ops_per_s"] / etcd_r["many_clients"]["all nodes"]["ops_per_s"]
    row.measured = f"writes {w:.2f}x etcd ({rmqc_w['clients']} clients), linearizable reads {rr:.2f}x etcd (all nodes)"
    etcd_reads = etcd_r["many_clients"]["all nodes"]["ops_per_s"]
    row.anchors = f"etcd {fmt(etcd_w['ops_per_s'], 0)} writes/s, {fmt(etcd_reads, 0)} reads/s"
    row.ratio = f"{w:.2f}x / {rr:.2f}x"
    row.met = w >= 1 and rr >= 1
    return row


def _vs_single_queue(results: Results) -> Row:
    row = Row("vs batch 1 / pipeline 1 (the single-queue design)", ">= 10x write throughput at 256 clients")
    rmqc, single = _point(results, "writes_rmqc", 256), _point(results, "single_queue", 256)
    if not (rmqc and single):
        row.measured = _why_missing(results, "single_queue")
        return row
    row.measured = f"{fmt(rmqc['ops_per_s'], 0)}/s vs {fmt(single['ops_per_s'], 0)}/s single-queue" + _at(single, 256)
    row.anchors = f"single-queue p99 {fmt(single['p99_ms'])} ms"
    row.ratio = _ratio(rmqc["ops_per_s"], single["ops_per_s"])
    at_target_load = single["clients"] == 256 and rmqc["clients"] == 256
    row.met = (single["ops_per_s"] > 0 and rmqc["ops_per_s"] / single["ops_per_s"] >= 10) if at_target_load else None
    return row


def _security(results: Results) -> Row:
    row = Row("security on (ACL + TLS + peer secret) vs off", "writes and heartbeats >= 0.8x")
    if (r := _ok(results, "security")) is None:
        row.measured = _why_missing(results, "security")
        return row
    ratios = r["ratios"]
    row.measured = ", ".join(f"{key.replace('_per_s', '/s').replace('_', ' ')} {value}x"
                             for key, value in ratios.items())
    row.anchors = f"off: {fmt(r['off']['heartbeats_per_s'], 0)} heartbeats/s"
    row.ratio = f"{min(v for v in ratios.values() if v is not None)}x at worst"
    row.met = all(v is not None and v >= 0.8 for v in ratios.values())
    return row


JAVA_MODES = {"dledger": "DLedger", "jraft": "JRaft"}


def _java_writes(results: Results) -> Row:
    row = Row("vs the Java controller: registration writes (1013), 256 clients",
              "rmqc >= 10x the better Java mode's throughput")
    if (r := _ok(results, "java_writes")) is None:
        row.measured = _why_missing(results, "java_writes")
        return row
    at_256 = {system: next((p for p in points if p["clients"] == 256), None)
              for system, points in r["points_by_system"].items()}
    ours = at_256.get("rmqc")
    if ours is None:
        row.measured = "rmqc has no 256-client point"
        return row
    row.measured = (f"{fmt(ours['ops_per_s'], 0)}/s, p99 {fmt(ours['p99_ms'])} ms, "
                    f"{fmt(ours['cpu_us_per_op'], 0)} us CPU/write")
    java = {label: point for mode, label in JAVA_MODES.items() if (point := at_256.get(mode)) is not None}
    row.anchors = "; ".join(f"{label} {fmt(p['ops_per_s'], 0)}/s, {fmt(p['cpu_us_per_op'], 0)} us CPU/write"
                            for label, p in java.items())
    if java:
        best = max(p["ops_per_s"] for p in java.values())
        row.ratio = _ratio(ours["ops_per_s"], best) + " the better mode"
        row.met = ours["ops_per_s"] >= 10 * best
    return row


def _java_heartbeats(results: Results) -> Row:
    row = Row("vs the Java controller: heartbeats (904) from 10,000 brokers", "rmqc sustains >= 3x the better Java "
              "mode; no live master failed over by mistake")
    if (r := _ok(results, "java_heartbeats")) is None:
        row.measured = _why_missing(results, "java_heartbeats")
        return row
    figures = r["figures"]
    ours = figures["rmqc"].get("10000")
    if ours is None:
        row.measured = "rmqc has no 10,000-broker point"
        return row
    mistaken = sum(len(f.get("live_masters_failed_over") or []) for f in figures["rmqc"].values())
    row.measured = (f"{fmt(ours['heartbeats_per_s'], 0)}/s, {fmt(ours['cpu_us_per_heartbeat'], 2)} us CPU each, "
                    f"live masters failed over by mistake: {mistaken}")
    java = {label: figures[mode].get("10000") or {} for mode, label in JAVA_MODES.items() if mode in figures}
    row.anchors = "; ".join(f"{label} " + (f"{fmt(f['heartbeats_per_s'], 0)}/s" if f.get("heartbeats_per_s")
                                           else f"gave up: {f.get('gave_up_mid_blast', 'not measured')}")
                            for label, f in java.items())
    sustained = [f["heartbeats_per_s"] for f in java.values() if f.get("heartbeats_per_s")]
    best = max(sustained, default=None)
    row.ratio = _ratio(ours["heartbeats_per_s"], best) + " the better mode" if best else "no Java mode sustained it"
    row.met = mistaken == 0 and (best is None or ours["heartbeats_per_s"] >= 3 * best)
    return row


def _java_leader_kill(results: Results) -> Row:
    row = Row("vs the Java controller: controller leader SIGKILL -> a write accepted again",
              "rmqc >= 5x faster (p99) than the better Java mode")
    if (r := _ok(results, "java_leader_kill")) is None:
        row.measured = _why_missing(results, "java_leader_kill")
        return row
    summaries = {system: run["summary"] for system, run in r["results"].items()}
    ours = summaries["rmqc"]
    row.measured = f"p50 {fmt(ours['p50_ms'])} ms, p99 {fmt(ours['p99_ms'])} ms ({ours['n']} kills)"
    java = {label: summaries[mode] for mode, label in JAVA_MODES.items() if mode in summaries}
    row.anchors = "; ".join(f"{label} p50 {fmt(s['p50_ms'])} ms, p99 {fmt(s['p99_ms'])} ms ({s['n']})"
                            for label, s in java.items())
    if java and ours["p99_ms"]:
        best = min(s["p99_ms"] for s in java.values())
        row.ratio = f"{best / ours['p99_ms']:.2f}x faster than the better mode (p99)"
        row.met = best >= 5 * ours["p99_ms"]
    return row


def _java_mass_failover(results: Results) -> Row:
    row = Row("vs the Java controller: every broker master lost at once -> all groups' 1008 received",
              "rmqc >= 10x faster than the better Java mode")
    if (r := _ok(results, "java_mass_failover")) is None:
        row.measured = _why_missing(results, "java_mass_failover")
        return row
    runs = r["results"]
    row.measured = f"{r['conditions']['groups']:,} groups: rmqc " + _mass_time(runs["rmqc"]["failover"])
    row.anchors = "; ".join(f"{label} " + _mass_time(runs[mode]["failover"])
                            for mode, label in JAVA_MODES.items() if mode in runs)
    ratios = [v for v in r["ratios"].values() if v["java_over_rmqc"] is not None]
    if ratios and runs["rmqc"]["failover"]["finished"]:
        better = min(ratios, key=lambda v: v["java_over_rmqc"])
        row.ratio = f"{'>= ' if better['at_least'] else ''}{better['java_over_rmqc']:.2f}x faster than the better mode"
        row.met = better["java_over_rmqc"] >= 10
    return row


def _mass_time(failover: dict[str, Any]) -> str:
    per_group = failover["per_group"]
    last = (f"last after {fmt(failover['all_notified_ms'])} ms" if failover["finished"]
            else f"{failover['unfinished_groups']} groups not done within the bound")
    return f"{last}, per group p50 {fmt(per_group['p50_ms'])} ms, p99 {fmt(per_group['p99_ms'])} ms"


def _java_dead_master(results: Results) -> Row:
    row = Row("vs the Java controller: dead master (connection closed; hung) -> 1008 received",
              "p99 <= 1/20 of the better Java mode's, both kinds")
    if (r := _ok(results, "java_broker_failover")) is None:
        row.measured = _why_missing(results, "java_broker_failover")
        return row
    runs = r["results"]
    row.measured = "rmqc " + _dead_master_times(runs["rmqc"])
    row.anchors = "; ".join(f"{label} " + _dead_master_times(runs[mode])
                            for mode, label in JAVA_MODES.items() if mode in runs)
    fractions = {kind: _best_fraction(runs, kind) for kind in ("closed", "hung_from_deadline")}
    row.ratio = ", ".join(f"{kind.split('_')[0]} {fmt(f, 3)} of the better mode's p99" for kind, f in fractions.items())
    judged = [f for f in fractions.values() if f is not None]
    row.met = all(f <= 1 / 20 for f in judged) if len(judged) == len(fractions) else None
    return row


def _dead_master_times(run: dict[str, Any]) -> str:
    closed, hung = run["closed"], run.get("hung_from_deadline", {"n": 0})
    text = f"closed p50 {fmt(closed['p50_ms'])} / p99 {fmt(closed['p99_ms'])} ms ({closed['n']})"
    if hung["n"]:
        text += f", hung p50 {fmt(hung['p50_ms'])} / p99 {fmt(hung['p99_ms'])} ms ({hung['n']})"
    return text


def _best_fraction(runs: dict[str, Any], kind: str) -> float | None:
    """rmqc's p99 over the better (lower) Java p99 of `kind`; None where a system has no samples."""
    java = [runs[m][kind]["p99_ms"] for m in JAVA_MODES if m in runs and runs[m].get(kind, {}).get("n")]
    ours = runs["rmqc"].get(kind, {})
    return round(ours["p99_ms"] / min(java), 3) if java and ours.get("n") and min(java) else None


def _java_reads(results: Results) -> Row:
    row = Row("vs the Java controller: 1004/1005/1006 on a follower, 16 clients",
              "rmqc's followers serve them; follower reads/s >= the better Java mode's leader")
    if (r := _ok(results, "java_reads")) is None:
        row.measured = _why_missing(results, "java_reads")
        return row
    points, answers = r["throughput"], r["answers"]
    served = all(a["code"] == 0 for a in answers["rmqc"]["follower 1"].values())
    ours = points["rmqc"]["follower 1"].get("ops_per_s")
    row.measured = (f"rmqc follower: {'serves every request at every level' if served else 'refuses some'}, "
                    f"{fmt(ours, 0)} reads/s, leader {fmt(points['rmqc']['leader'].get('ops_per_s'), 0)} reads/s")
    java_leader = [points[m]["leader"].get("ops_per_s") for m in JAVA_MODES if m in points]
    row.anchors = "; ".join(f"{label}: follower {_follower_answer(answers[mode])}, leader "
                            f"{fmt(points[mode]['leader'].get('ops_per_s'), 0)} reads/s"
                            for mode, label in JAVA_MODES.items() if mode in points)
    best = max((v for v in java_leader if v), default=None)
    row.ratio = _ratio(ours, best) + " of the better Java leader" if ours and best else ""
    row.met = served and ours is not None and best is not None and ours >= best
    return row


def _follower_answer(answers: dict[str, Any]) -> str:
    codes = sorted({a["code"] for a in answers["follower 1"].values()})
    return "serves all" if codes == [0] else "answers " + "/".join(str(c) for c in codes)



def _lookup_points(result: dict[str, Any], system: str, clients: str) -> dict[str, dict[str, Any]]:
    """namesrv_lookups' points of `system` at `clients`, by level/role ("local" for Java)."""
    return {key: points[clients] for key, points in result["figures"].get(system, {}).items() if clients in points}


def _namesrv_lookup_latency(results: Results) -> Row:
    row = Row("NameServer route lookup (105), 1 client, every rmqc node and level", "p99 <= 1 ms")
    if (r := _ok(results, "namesrv_lookups")) is None:
        row.measured = _why_missing(results, "namesrv_lookups")
        return row
    ours, java = _lookup_points(r, "rmqc", "1"), _lookup_points(r, "java", "1").get("local")
    worst = max(ours, key=lambda key: ours[key]["p99_ms"])
    best = min(ours, key=lambda key: ours[key]["p99_ms"])
    row.measured = (f"worst p99 {fmt(ours[worst]['p99_ms'], 2)} ms ({worst}), best {fmt(ours[best]['p99_ms'], 2)} ms "
                    f"({best})")
    if java:
        row.anchors = f"Java NameServer p50 {fmt(java['p50_ms'], 2)} ms, p99 {fmt(java['p99_ms'], 2)} ms"
        row.ratio = f"{_ratio(ours[worst]['p99_ms'], java['p99_ms'])} Java's p99 at worst"
    row.met = ours[worst]["p99_ms"] <= 1.0
    return row


def _namesrv_lookup_cpu(results: Results) -> Row:
    row = Row("NameServer route lookup CPU (every server process), many clients", "rmqc <= the Java NameServer's")
    if (r := _ok(results, "namesrv_lookups")) is None:
        row.measured = _why_missing(results, "namesrv_lookups")
        return row
    clients = str(max(r["conditions"]["clients"]))
    ours, java = _lookup_points(r, "rmqc", clients), _lookup_points(r, "java", clients).get("local")
    default = ours["linearizable/leader"]["cpu_us_per_lookup"]  # what a Java client, naming no level, gets
    spread = [p["cpu_us_per_lookup"] for p in ours.values()]
    row.measured = (f"{fmt(default)} us per lookup linearizable on the leader (the default); {fmt(min(spread))}.."
                    f"{fmt(max(spread))} us over levels and roles ({clients} clients)")
    if java is None:
        row.anchors = "the Java NameServer was not measured"
        return row
    row.anchors = f"Java NameServer {fmt(java['cpu_us_per_lookup'])} us per lookup, {fmt(java['ops_per_s'], 0)}/s"
    row.ratio = f"{_ratio(default, java['cpu_us_per_lookup'])} Java's"
    row.met = default <= java["cpu_us_per_lookup"]
    return row


def _namesrv_registrations(results: Results) -> Row:
    row = Row("NameServer: 10,000 brokers x 100 topics re-registering (103) every 30 s, 3 nodes",
              "0 log entries/min while nothing changes; RSS <= 300 MB per node")
    if (r := _ok(results, "namesrv_registrations")) is None:
        row.measured = _why_missing(results, "namesrv_registrations")
        return row
    brokers, ours, java = r["conditions"]["brokers"], r["figures"]["rmqc"], r["figures"].get("java")
    entries = max(ours["log_entries_per_min"].values())
    rss = max(v for v in ours["rss_mb"].values() if v is not None)
    row.measured = (f"{brokers:,} brokers, {fmt(ours['registrations_per_s'], 0)} registrations/s: {fmt(entries)} "
                    f"log entries/min, RSS max {fmt(rss)} MB, lookup p99 {fmt(ours['lookup']['p99_ms'], 2)} ms")
    if java:
        row.anchors = (f"Java NameServer RSS {fmt(java['rss_mb']['namesrv'])} MB, "
                       f"{fmt(java['cpu_cores_per_node']['namesrv'], 2)} cores, lookup p99 "
                       f"{fmt(java['lookup']['p99_ms'], 2)} ms")
        row.ratio = f"RSS {_ratio(rss, java['rss_mb']['namesrv'])} Java's"
    if not ours["valid"]:
        row.measured += f" (NOT VALID: {'; '.join(ours['problems'])})"
        return row
    if ours.get("first_round_settled") is False:
        row.measured += "; the first round was still being written when the window opened"
    if ours["refused"]:
        row.measured += f"; refused {sum(ours['refused'].values()):,}: {ours['refused']}"
    if entries > 0 or ours["refused"]:
        row.met = False
    elif brokers >= 10_000:
        row.met = rss <= 300
    return row

ROWS: tuple[Callable[[Results], Row], ...] = (
    _leader_kill, _pauses, _broker_closed, _heartbeats, _writes_256, _writes_1,
    lambda r: _single_read(r, "lease read on leader, 1 client", "lease/leader", "serializable/leader", 0.5),
    lambda r: _single_read(r, "linearizable read on a follower, 1 client", "linearizable/follower",
                           "linearizable/follower", 2),
    _reads_many, _scale, _restart, _memory, _test_suite, _vs_etcd, _vs_single_queue, _security,
    _java_writes, _java_heartbeats, _java_leader_kill, _java_mass_failover, _java_dead_master, _java_reads,
    _namesrv_lookup_latency, _namesrv_lookup_cpu, _namesrv_registrations,
)


def target_rows(results: Results) -> list[Row]:
    return [make(results) for make in ROWS]
