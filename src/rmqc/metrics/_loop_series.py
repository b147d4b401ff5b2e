"""Counters and histograms observed from one thread without a lock, exported when scraped.

prometheus_client's Counter and Histogram take a lock on every `inc` and `observe` (two for a
histogram's bucket and sum), so that any thread may update them. A node updates its per-request
series from its event loop only, and each durable write observed three of them: the locks, the
label lookups and the call layers were about 4 % of the leader's event-loop time at one client
(py-spy --gil; docs/benchmarks.md, "CPU per write"). Here an observation is a list slot or an
attribute increased in place, and `LoopSeries.collect` builds the samples when the registry is
scraped: in rmqc serve, from the metrics exporter's HTTP thread. That thread only reads. The dict
of children is never changed once published: a label's first use publishes a new one with the
child added, so a scrape iterates a dict the loop cannot change under it (iterating the live dict,
or even copying it, raised 'dictionary changed size during iteration' when the loop made a child
meanwhile). Label sets are small and fixed, so the copies are few.

The text format is prometheus_client's own (`generate_latest` writes it): the same names, labels
and `le` bounds as its Counter and Histogram, without their `_created` samples."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

__all__ = ["LoopCounter", "LoopHistogram", "LoopSeries"]

# prometheus_client's own text of a bound ("0.0005", "32.0", "+Inf"), typed
_bound_text: Callable[[float], str] = floatToGoString


class LoopCounter:
    """One labelled child of a counter family; `value` only grows."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"a counter only grows: inc({amount})")
        self.value += amount


class LoopHistogram:
    """One labelled child of a histogram family: a count per bucket (the last is +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value: Prometheus's `le`
        self.sum += value


class LoopSeries(Collector):
    """A counter or histogram family with fixed label names, registered on `registry`. Children are
    made on first use of their label values; callers bound how many (label values from fixed tables)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = (), *,
                 buckets: tuple[float, ...] | None = None, registry: CollectorRegistry) -> None:
        if buckets is not None and list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{name}: bucket bounds must increase: {buckets}")
        self.name, self.documentation, self.labelnames, self.buckets = name, documentation, labelnames, buckets
        self._children: dict[tuple[str, ...], LoopCounter | LoopHistogram] = {}
        registry.register(self)

    def counter(self, *values: str) -> LoopCounter:
        child = self._child(values)
        assert isinstance(child, LoopCounter), f"{self.name} is a histogram"
        return child

    def histogram(self, *values: str) -> LoopHistogram:
        child = self._child(values)
        assert isinstance(child, LoopHistogram), f"{self.name} is a counter"
        return child

    def _child(self, values: tuple[str, ...]) -> LoopCounter | LoopHistogram:
        child = self._children.get(values)
        if child is None:
            return self._make_child(values)
        return child

    def _make_child(self, values: tuple[str, ...]) -> LoopCounter | LoopHistogram:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
        child = LoopCounter() if self.buckets is None else LoopHistogram(self.buckets)
        self._children = {**self._children, values: child}  # published whole: a scrape may hold the old one
        return child

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for values, child in self._children.items():  # a published dict: never changed (see above)
            if isinstance(child, LoopCounter):
                assert isinstance(family, CounterMetricFamily)
                family.add_metric(list(values), child.value)
            else:
                assert isinstance(family, HistogramMetricFamily)
                family.add_metric(list(values), _cumulative(child), child.sum)
        yield family

    def _family(self) -> CounterMetricFamily | HistogramMetricFamily:
        if self.buckets is None:
            return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)


def _cumulative(child: LoopHistogram) -> list[tuple[str, float]]:
    """(le, observations at or below it) per bound, +Inf last: the text format's buckets."""
    rows, seen = [], 0
    for bound, count in zip((*child.bounds, float("inf")), child.counts, strict=True):
        seen += count
        rows.append((_bound_text(bound), float(seen)))
    return rows
