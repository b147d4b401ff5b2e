"""The metrics port's shell side (rmqc.node._exporter): the series refreshed from a running node's
server and notifier totals, and the HTTP exporter serving the text format. The series themselves:
tests/metrics/test_node_metrics.py."""

from __future__ import annotations

import urllib.request
from types import SimpleNamespace

import pytest

from rmqc.metrics import NodeMetrics
from rmqc.node._exporter import start_metrics_exporter, update_from_node
from rmqc.node._notifier import Notifier
from rmqc.testing.metrics import samples


def test_refusals_follow_the_servers_running_totals() -> None:
    totals = {"peer_auth": 2, "connection_limit": 0, "idle_timeout": 1, "acl_bad_signature": 5}
    node = SimpleNamespace(status=lambda: None, server=SimpleNamespace(refusals=lambda: dict(totals)))
    metrics = NodeMetrics()
    update_from_node(metrics, node)
    totals["acl_bad_signature"] = 8
    update_from_node(metrics, node)
    found = samples(metrics)
    assert found[("rmqc_refusals_total", (("reason", "acl_bad_signature"),))] == 8
    assert found[("rmqc_refusals_total", (("reason", "peer_auth"),))] == 2
    assert found[("rmqc_refusals_total", (("reason", "acl_not_admin"),))] == 0  # present before any refusal
    with pytest.raises(ValueError, match="refusal reason 'made_up'"):
        metrics.update_refusals({"made_up": 1})


def test_notifications_follow_the_notifiers_running_totals() -> None:
    notifier = Notifier()
    node = SimpleNamespace(status=lambda: None, notifier=notifier)
    metrics = NodeMetrics()
    notifier.sent, notifier.failed = 5, 2
    update_from_node(metrics, node)
    notifier.failed = 3
    update_from_node(metrics, node)
    found = samples(metrics)
    assert found[("rmqc_notifications_total", (("result", "sent"),))] == 5
    assert found[("rmqc_notifications_total", (("result", "failed"),))] == 3
    assert found[("rmqc_notifications_total", (("result", "superseded"),))] == 0  # present before any
    with pytest.raises(ValueError, match="notification result 'lost'"):
        metrics.update_notifications({"lost": 1})


def test_exporter_serves_the_text_format_over_http() -> None:
    metrics = NodeMetrics()
    metrics.observe_request(1005, 0, 0.001)
    exporter = start_metrics_exporter(metrics, 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        exporter.close()
    assert 'rmqc_requests_total{request="CONTROLLER_GET_METADATA_INFO",result="SUCCESS"} 1.0' in text
    assert "rmqc_fsync_seconds_bucket" in text and "rmqc_elections_total" in text
