"""report.md and its PNG charts (matplotlib, Agg backend) from one run's results."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend must be chosen first

from ._stats import fmt
from ._suite import Suite, write_json
from ._targets import target_rows

WRITE_SERIES = (("writes_rmqc", "rmqc"), ("writes_etcd", "etcd"), ("writes_pysyncobj", "PySyncObj (no fsync)"),
                ("single_queue", "rmqc single-queue"))
MET = {True: "yes", False: "**no**", None: "n/a"}


def _ok(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    result = results.get(name)
    return result if result and result.get("status") == "ok" else None


def chart_write_throughput(results: dict[str, Any], path: Path) -> bool:
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for name, label in WRITE_SERIES:
        if (r := _ok(results, name)) and r.get("points"):
            points = r["points"]
            ax.plot([p["clients"] for p in points], [p["ops_per_s"] for p in points], marker="o", label=label)
            drawn = True
    ax.set(xscale="log", xlabel="clients (closed loop)", ylabel="writes/s", title="Durable writes vs clients")
    return _save(fig, ax, path, drawn)


def chart_write_latency(results: dict[str, Any], path: Path) -> bool:
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for name, label in WRITE_SERIES:
        if (r := _ok(results, name)) and r.get("points"):
            points = r["points"]
            line = ax.plot([p["clients"] for p in points], [p["p99_ms"] for p in points], marker="o",
                           label=f"{label} p99")
            ax.plot([p["clients"] for p in points], [p["p50_ms"] for p in points], marker=".", linestyle="--",
                    color=line[0].get_color(), label=f"{label} p50")
            drawn = True
    ax.set(xscale="log", yscale="log", xlabel="clients", ylabel="latency (ms)", title="Write latency percentiles")
    return _save(fig, ax, path, drawn)


def chart_reads(results: dict[str, Any], path: Path) -> bool:
    labels, p50s, p99s = [], [], []
    for name, system in (("reads_rmqc", "rmqc"), ("reads_etcd", "etcd")):
        if r := _ok(results, name):
            for key, point in r["single_client"].items():
                labels.append(f"{system}\n{key}")
                p50s.append(point["p50_ms"])
                p99s.append(point["p99_ms"])
    fig, ax = plt.subplots(figsize=(max(7, len(labels) * 0.9), 4))
    positions = range(len(labels))
    ax.bar([x - 0.2 for x in positions], p50s, width=0.4, label="p50")
    ax.bar([x + 0.2 for x in positions], p99s, width=0.4, label="p99")
    ax.set_xticks(list(positions), labels, fontsize=7)
    ax.set(ylabel="latency (ms)", title="Reads, 1 client: level / node role")
    return _save(fig, ax, path, bool(labels))


def chart_leader_kill(results: dict[str, Any], path: Path) -> bool:
    if not (r := _ok(results, "leader_kill")):
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.hist(r["samples_ms"], bins=min(30, max(5, len(r["samples_ms"]))))
    left.set(xlabel="kill -> first write accepted (ms)", ylabel="kills", title="Controller leader SIGKILL")
    for t_ms, node, outcome in r["timeline_median_kill"]:
        color = "green" if outcome == "accepted" else "orange" if outcome.startswith("code") else "red"
        right.scatter(t_ms, node, s=10, color=color)
    right.set(xlabel="ms since kill", title="Median kill: attempts (green ok, orange refused, red none)")
    return _save(fig, None, path, True)


def chart_broker_failover(results: dict[str, Any], path: Path) -> bool:
    if not (r := _ok(results, "broker_failover")):
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    data = [r["closed_samples_ms"] or [0], r["hung_samples_ms"] or [0]]
    ax.boxplot(data)
    ax.set_xticks([1, 2], ["connections closed\n(from close)", "hung master\n(from heartbeat deadline)"])
    ax.set(ylabel="ms until the other replicas hold the new master", title="Broker master failover")
    return _save(fig, None, path, True)


def chart_scale(results: dict[str, Any], path: Path) -> bool:
    if not (r := _ok(results, "scale")):
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    times = r["failover"]["notification_times_ms"]
    left.plot(times, range(1, len(times) + 1))
    left.set(xlabel="ms since the masters were lost", ylabel="replicas notified (1008)",
             title=f"{r['failover']['masters_lost']:,} masters lost at once")
    for node, samples in r["steady"]["rss_samples_mb"].items():
        right.plot(samples, marker=".", label=node)
    right.set(xlabel="sample", ylabel="RSS (MB)", title=f"RSS per node, {r['conditions']['groups']:,} groups")
    right.legend()
    return _save(fig, None, path, True)


def _save(fig: Any, ax: Any, path: Path, drawn: bool) -> bool:
    if drawn:
        if ax is not None:
            ax.legend(fontsize=7)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    plt.close(fig)
    return drawn


CHARTS: tuple[tuple[str, Callable[[dict[str, Any], Path], bool]], ...] = (
    ("writes_throughput.png", chart_write_throughput),
    ("writes_latency.png", chart_write_latency),
    ("reads_latency.png", chart_reads),
    ("leader_kill.png", chart_leader_kill),
    ("broker_failover.png", chart_broker_failover),
    ("scale.png", chart_scale),
)


def targets_markdown(results: dict[str, Any]) -> str:
    lines = ["| what | target | measured (rmqc) | anchors, same run | ratio | met |", "|---|---|---|---|---|---|"]
    for row in target_rows(results):
        lines.append(f"| {row.what} | {row.target} | {row.measured} | {row.anchors} | {row.ratio} | {MET[row.met]} |")
    return "\n".join(lines)


def scenario_markdown(result: dict[str, Any]) -> str:
    lines = [f"### {result['name']}: {result['title']}", "",
             f"status: {result['status']}" + (f" ({result['message']})" if result.get("message") else "")
             + f", {result.get('elapsed_s', '?')} s", ""]
    if conditions := result.get("conditions"):
        lines.append("conditions: " + "; ".join(f"{k} = {v}" for k, v in conditions.items()))
        lines.append("")
    if points := result.get("points"):
        lines += ["| clients | ops/s | p50 ms | p99 ms | errors |", "|---|---|---|---|---|"]
        lines += [f"| {p['clients']} | {fmt(p['ops_per_s'], 0)} | {fmt(p['p50_ms'], 2)} | {fmt(p['p99_ms'], 2)} | "
                  f"{p['errors']} |" for p in points]
        lines.append("")
    if by_system := result.get("points_by_system"):
        lines += ["| system | clients | ops/s | p50 ms | p99 ms | errors | CPU us/op, nodes summed |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {system} | {p['clients']} | {fmt(p['ops_per_s'], 0)} | {fmt(p['p50_ms'], 2)} | "
                  f"{fmt(p['p99_ms'], 2)} | {p['errors']} | {fmt(p['cpu_us_per_op'], 0)} |"
                  for system, points in by_system.items() for p in points]
        lines.append("")
    if table := result.get("single_client"):
        lines += ["| single client | ops/s | p50 ms | p99 ms |", "|---|---|---|---|"]
        lines += [f"| {k} ({p['clients']} clients) | {fmt(p['ops_per_s'], 0)} | {fmt(p['p50_ms'], 2)} | "
                  f"{fmt(p['p99_ms'], 2)} |" for k, p in table.items()]
        lines.append("")
    if table := result.get("many_clients"):
        lines += ["| many clients | ops/s | p50 ms | p99 ms | generator processes | CPU cores: nodes; generators; "
                  "others; machine busy | CPU us/op: nodes; generators |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {k} ({p['clients']} clients) | {fmt(p['ops_per_s'], 0)} | {fmt(p['p50_ms'], 2)} | "
                  f"{fmt(p['p99_ms'], 2)} | {_cpu_cells(p)} |" for k, p in table.items()]
        lines.append("")
    skip = {"name", "title", "status", "message", "elapsed_s", "conditions", "points", "points_by_system",
            "single_client", "many_clients", "traceback", "timeline_median_kill", "samples_ms",
            "closed_samples_ms", "hung_samples_ms"}
    extra = {k: v for k, v in result.items() if k not in skip}
    if extra:
        text = json.dumps(extra, default=str)
        lines.append("figures: `" + (text if len(text) < 1500 else text[:1500] + " ...") + "`")
        lines.append("")
    return "\n".join(lines)


def _cpu_cells(point: dict[str, Any]) -> str:
    """Generators, cores and us/op of a spread_point (n/a for a point of a run before they were recorded)."""
    if "cpu_cores" not in point:
        return "1 (the harness) | n/a | n/a"
    cores, per_op = point["cpu_cores"], point["cpu_us_per_op"]
    nodes = " + ".join(f"{name} {c:.2f}" for name, c in cores["nodes"].items())
    generators = " + ".join(f"{c:.2f}" for c in cores["generators"])
    shared = (f"{cores['interrupts']:.2f}; {cores['others']:.2f}; {cores['machine']:.2f}" if "machine" in cores
              else "n/a; n/a; n/a")
    return (f"{point['generators']} | {nodes}; {generators}; {shared} | "
            f"{fmt(per_op['nodes'], 0)}; {fmt(per_op['generators'], 0)}")


def write_report(suite: Suite) -> Path:
    write_json(suite)
    results = suite.results
    charts = [name for name, draw in CHARTS if draw(results, suite.out / name)]
    m = suite.machine
    body = [
        f"# rmqc benchmark report ({suite.profile.name})", "",
        f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_mb']} MB RAM, Python {m['python']}, "
        f"kernel {m['kernel']}; data on {suite.fsync.split('data on ')[-1].rstrip(')')}. All nodes, anchors and the "
        f"load generator share this machine.", "",
        "Load generator: one design for every system: closed loop, one TCP connection per client, one request "
        "outstanding per client, written in Python on Trio (RocketMQ remoting for rmqc, HTTP/1.1 JSON to etcd's "
        "v3 gRPC gateway, a line protocol to a PySyncObj wrapper). The many-clients read points split their "
        "clients over several generator processes started together (the same count for rmqc and etcd, given in "
        "each point) and record the CPU of every node and generator over the window.", "",
        "## Targets", "", targets_markdown(results), "",
        "## Charts", "", *[f"![{name}]({name})" for name in charts], "",
        "## Scenarios", "", *[scenario_markdown(result) for result in results.values()],
    ]
    path = suite.out / "report.md"
    path.write_text("\n".join(body))
    return path
