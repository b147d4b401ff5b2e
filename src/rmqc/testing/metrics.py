"""A node's Prometheus series as the scraper reads them (the metrics tests' one reader)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from rmqc.metrics import NodeMetrics

__all__ = ["samples"]


def samples(metrics: NodeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, from the exposition text."""
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found
