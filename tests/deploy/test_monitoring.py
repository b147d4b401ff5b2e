"""deploy/prometheus/rmqc-alerts.yml and deploy/grafana/rmqc-dashboard.json against real nodes.

A real 3-node cluster of `rmqc serve` processes is driven through four situations, and every node's
/metrics is scraped in each: healthy; 12 brokers' masters elected, their 1008 notifications failing
(their addresses are closed ports) and one follower's disk full (the test-only storage fault hook:
its commits fail with ENOSPC); that follower killed and the leader writing more than 64 entries it
lacks; the leader killed too. The scrapes become promtool's input series (one phase of 5 minutes
each, a killed node's series going stale and its `up` 0, as Prometheus records a failed scrape),
and `promtool test rules` checks which alert fires in which phase, and that none fires while the
cluster is healthy. Another test checks that every metric the dashboard and the rules name is one a
real node exports.

Bounds: PHASE_S for each situation to show in the scraped metrics (the gauges are refreshed every
second; elections and notifications take milliseconds).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rmqc.cli.dev import LocalCluster
from rmqc.client import ControllerClient
from rmqc.launcher import consecutive_free_ports, free_ports

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rmqc-alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "rmqc-dashboard.json"
PROMTOOL = shutil.which("promtool")
JOB = "rmqc"
CLUSTER = "mon"
ELECTED = 12  # more than RmqcManyFailovers' 10
LAGGING_ENTRIES = 70  # more than RmqcFollowerLagging's 64
PHASE_S = 30.0
BROKER_ALIVE_MS = 600_000
PHASE_MINUTES = 5
FAULTS_ENV = "RMQC_TEST_ONLY_STORAGE_FAULTS"
# Series Prometheus makes itself, not a node: `up` (1 when the scrape worked).
PROMETHEUS_OWN = {"up"}
ALERTS = ("RmqcNoLeader", "RmqcNodeDown", "RmqcDiskFull", "RmqcRepairing", "RmqcFollowerLagging",
          "RmqcManyFailovers", "RmqcNotificationsFailing")

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="no promtool: scripts/install-test-deps.sh installs "
                                                             "Debian's prometheus package")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics_address: str) -> Samples:
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape_until(metrics_address: str, holds: Callable[[Samples], bool], what: str) -> Samples:
    with trio.move_on_after(PHASE_S):
        while True:
            samples = await trio.to_thread.run_sync(scrape, metrics_address)
            if holds(samples):
                return samples
            await trio.sleep(0.2)
    raise AssertionError(f"{metrics_address}: not within {PHASE_S} s: {what}")


class Run:
    """The cluster, its nodes' roles, and the scrapes of each phase: {phase: {instance: samples}}."""

    def __init__(self, cluster: LocalCluster, faults: dict[str, Path]) -> None:
        self.cluster, self.faults = cluster, faults
        self.metrics = {node.node_id: f"127.0.0.1:{node.metrics_port}" for node in cluster.nodes}
        self.address = {node.node_id: node.address for node in cluster.nodes}
        self.phases: list[dict[str, Samples]] = []
        self.leader = self.full = self.other = ""

    async def record(self, *alive: str) -> None:
        self.phases.append({self.metrics[node]: await trio.to_thread.run_sync(scrape, self.metrics[node])
                            for node in alive})


async def drive(run: Run, leader_address: str) -> None:
    run.leader = next(node for node, address in run.address.items() if address == leader_address)
    run.full, run.other = (node for node in sorted(run.address) if node != run.leader)
    for node in run.address:  # every gauge published once, the leader's as serving
        await scrape_until(run.metrics[node], lambda s: value(s, "rmqc_raft_term") > 0, "a term")
    await scrape_until(run.metrics[run.leader], lambda s: value(s, "rmqc_is_leader") == 1, "serving as leader")
    await run.record(*run.address)  # 0: healthy

    run.faults[run.full].write_text("enospc")
    async with ControllerClient([leader_address]) as client:
        for i in range(ELECTED):
            await elect_unreachable_master(client, f"{CLUSTER}-{i}", leader_address)
        await scrape_until(run.metrics[run.leader], lambda s: value(
            s, "rmqc_elections_total", result="new_master_elected") >= ELECTED and value(
            s, "rmqc_notifications_total", result="failed") >= ELECTED, "the elections and failed notifications")
        await scrape_until(run.metrics[run.full], lambda s: value(s, "rmqc_alarm", alarm="disk_full") == 1,
                           "the disk_full alarm")
        await run.record(*run.address)  # 1: elections, failing notifications, a full disk

        run.cluster.kill(run.full)
        for i in range(LAGGING_ENTRIES):
            answer = await client.apply_broker_id(CLUSTER, f"lag-{i}", 1, f"127.0.0.1:1;{i}")
            assert answer.code == 0, answer.remark
    await scrape_until(run.metrics[run.leader], lambda s: value(
        s, "rmqc_raft_peer_lag_entries", peer=run.full) > LAGGING_ENTRIES - 1, "the follower's lag")
    await run.record(run.leader, run.other)  # 2: a follower down, lagging

    run.cluster.kill(run.leader)
    await scrape_until(run.metrics[run.other], lambda s: value(s, "rmqc_is_leader") == 0, "no leader")
    await run.record(run.other)  # 3: no leader


async def elect_unreachable_master(client: ControllerClient, name: str, leader_address: str) -> None:
    """A one-replica group whose broker heartbeats but listens on a closed port: its election
    succeeds, its 1008 notification fails."""
    (closed_port,) = free_ports(1)
    broker = f"127.0.0.1:{closed_port}"
    applied = await client.apply_broker_id(CLUSTER, name, 1, f"{broker};1700000000000")
    assert applied.code == 0, applied.remark
    registered = await client.register_broker(CLUSTER, name, 1, broker)
    assert registered.code == 0, registered.remark
    # alive for the whole test: an expiry would elect again (and notify) in a later phase
    await client.heartbeat(CLUSTER, name, 1, broker, address=leader_address, oneway=False,
                           heartbeat_timeout_ms=BROKER_ALIVE_MS)
    elected = await client.elect_master(CLUSTER, name, 1)
    assert elected.code == 0, elected.remark


# ----- promtool's input: the scrapes as series, one phase every PHASE_MINUTES -----

RULE_METRICS = ("rmqc_is_leader", "rmqc_alarm", "rmqc_raft_peer_lag_entries", "rmqc_elections_total",
                "rmqc_notifications_total")


def input_series(phases: list[dict[str, Samples]]) -> list[dict[str, str]]:
    """Each series the rules read, per minute: its scraped value in the phase, `stale` when its node
    died, nothing after; and `up` per instance (1 scraped, 0 not)."""
    keys = sorted({(instance, key) for phase in phases for instance, samples in phase.items()
                   for key in samples if key[0] in RULE_METRICS})
    instances = sorted({instance for phase in phases for instance in phase})
    series = []
    for instance, (name, labels) in keys:
        values: list[str] = []
        for phase in phases:
            sample = phase.get(instance, {}).get((name, labels))
            if sample is not None:
                values += [_number(sample)] * PHASE_MINUTES
            else:
                gone = "_" if not values or values[-1] in ("stale", "_") else "stale"
                values += [gone] + ["_"] * (PHASE_MINUTES - 1)
        series.append({"series": _selector(name, {**dict(labels), "job": JOB, "instance": instance}),
                       "values": " ".join(values)})
    for instance in instances:
        up = ["1" if instance in phase else "0" for phase in phases]
        series.append({"series": _selector("up", {"job": JOB, "instance": instance}),
                       "values": " ".join(flag for flag in up for _ in range(PHASE_MINUTES))})
    return series


def _number(sample: float) -> str:
    return str(int(sample)) if sample == int(sample) else repr(sample)


def _selector(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ", ".join(f'{key}="{labels[key]}"' for key in sorted(labels)) + "}"


def expected_alerts(run: Run) -> list[dict[str, Any]]:
    """At the end of each phase: which alert fires, with which labels (the others: none)."""
    leader, full = run.metrics[run.leader], run.metrics[run.full]
    firing = {
        0: {},
        1: {"RmqcDiskFull": [{"severity": "critical", "alarm": "disk_full", "instance": full, "job": JOB}],
            "RmqcManyFailovers": [{"severity": "warning", "job": JOB}],
            "RmqcNotificationsFailing": [{"severity": "warning", "instance": leader, "job": JOB}]},
        2: {"RmqcFollowerLagging": [{"severity": "warning", "instance": leader, "peer": run.full, "job": JOB}],
            "RmqcNodeDown": [{"severity": "warning", "instance": full, "job": JOB}]},
        3: {"RmqcNoLeader": [{"severity": "critical", "job": JOB}],
            "RmqcNodeDown": [{"severity": "warning", "instance": instance, "job": JOB}
                             for instance in sorted((full, leader))]},
    }
    return [{"eval_time": f"{phase * PHASE_MINUTES + PHASE_MINUTES - 1}m", "alertname": alert,
             "exp_alerts": [{"exp_labels": labels, "exp_annotations": _annotations(alert, labels)}
                            for labels in firing[phase].get(alert, [])]}
            for phase in firing for alert in ALERTS]


def _annotations(alert: str, labels: dict[str, str]) -> dict[str, str]:
    """The rule's annotations with the alert's labels filled in (the rules use no other template)."""
    rule = next(rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
                if rule.get("alert") == alert)
    return {key: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
            for key, text in rule["annotations"].items()}


@needs_promtool
def test_the_rules_are_valid() -> None:
    checked = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


@needs_promtool
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_alerts_fire_on_series_scraped_from_real_nodes(tmp_path: Path) -> None:
    cluster = LocalCluster(3, data_dir=tmp_path / "cluster", metrics_base_port=consecutive_free_ports(3))
    faults = {node.node_id: tmp_path / f"{node.node_id}.faults" for node in cluster.nodes}
    for node in cluster.nodes:
        faults[node.node_id].write_text("")
        node.env[FAULTS_ENV] = str(faults[node.node_id])
    with cluster:
        run = Run(cluster, faults)
        trio.run(drive, run, cluster.wait_for_leader())
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
             "tests": [{"interval": "1m", "input_series": input_series(run.phases),
                        "alert_rule_test": expected_alerts(run)}]}
    test_file = tmp_path / "rmqc-alerts-test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    print(f"promtool test file (series from the scrapes): {test_file}")
    tested = subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_metric_named_is_exported_by_real_nodes(tmp_path: Path) -> None:
    """Against the union of a 3-node cluster's scrapes: some series exist on the leader only (its
    peers' lag). Polled until all are there or PHASE_S passed (the gauges are published each second)."""
    rules = yaml.safe_load(RULES.read_text())
    expressions = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    expressions += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    expressions += [variable["query"] for variable in dashboard["templating"]["list"] if variable["type"] == "query"]
    named = {name for expression in expressions for name in re.findall(r"\b(rmqc_\w+|up)\b", expression)}
    assert {"rmqc_notifications_total", "rmqc_is_leader", "rmqc_fsync_seconds_bucket"} <= named  # the pattern works
    with LocalCluster(3, data_dir=tmp_path / "cluster", metrics_base_port=consecutive_free_ports(3)) as cluster:
        cluster.wait_for_leader()
        addresses = [f"127.0.0.1:{node.metrics_port}" for node in cluster.nodes]

        async def missing_names() -> set[str]:
            with trio.move_on_after(PHASE_S):
                while True:
                    scrapes = [await trio.to_thread.run_sync(scrape, address) for address in addresses]
                    missing = named - PROMETHEUS_OWN - {name for samples in scrapes for name, _ in samples}
                    if not missing:
                        return missing
                    await trio.sleep(0.2)
            return missing

        missing = trio.run(missing_names)
    assert not missing, f"named in deploy/ but not exported by a node: {sorted(missing)}"
