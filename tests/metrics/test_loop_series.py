"""rmqc.metrics._loop_series: the lock-free counter and histogram families a node updates per
request write the same text as prometheus_client's Counter and Histogram for the same
observations (their `_created` samples aside), bound by bound."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from rmqc.metrics._loop_series import LoopSeries

BOUNDS = (0.0001, 0.0005, 0.001, 0.5, 1.0, 5.0)


def text_without_created(registry: CollectorRegistry) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


@given(st.lists(st.tuples(st.sampled_from(["GET", "PUT"]), st.floats(0, 10, allow_nan=False)), max_size=40))
def test_a_histogram_writes_what_prometheus_client_writes(observations: list[tuple[str, float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopSeries("t_latency_seconds", "latency", ("request",), buckets=BOUNDS, registry=ours)
    reference = Histogram("t_latency_seconds", "latency", ("request",), buckets=BOUNDS, registry=theirs)
    for request, value in observations:
        loop.histogram(request).observe(value)
        reference.labels(request).observe(value)
    assert text_without_created(ours) == text_without_created(theirs)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 1000)), max_size=40))
def test_a_counter_writes_what_prometheus_client_writes(increments: list[tuple[str, int]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopSeries("t_requests", "requests", ("result",), registry=ours)
    reference = Counter("t_requests", "requests", ("result",), registry=theirs)
    for result, amount in increments:
        loop.counter(result).inc(amount)
        reference.labels(result).inc(amount)
    assert text_without_created(ours) == text_without_created(theirs)


def test_a_value_on_a_bound_counts_in_that_bucket() -> None:
    registry = CollectorRegistry()
    LoopSeries("t_seconds", "t", buckets=BOUNDS, registry=registry).histogram().observe(0.5)
    assert registry.get_sample_value("t_seconds_bucket", {"le": "0.001"}) == 0
    assert registry.get_sample_value("t_seconds_bucket", {"le": "0.5"}) == 1  # le: at or below


def test_bad_labels_bounds_and_decrements_are_refused() -> None:
    registry = CollectorRegistry()
    counter = LoopSeries("t_total_things", "t", ("result",), registry=registry)
    with pytest.raises(ValueError, match="takes labels"):
        counter.counter("a", "b")
    with pytest.raises(ValueError, match="only grows"):
        counter.counter("a").inc(-1)
    with pytest.raises(ValueError, match="must increase"):
        LoopSeries("t_bad", "t", buckets=(1.0, 0.5), registry=registry)


def test_a_scrape_from_another_thread_survives_children_made_meanwhile() -> None:
    """The exporter's HTTP thread scrapes while the event loop makes the children of new label
    values: iterating the live dict of children, or even copying it, raised 'dictionary changed size
    during iteration' (5 of 5 runs of this file before the fix)."""
    registry = CollectorRegistry()
    family = LoopSeries("t_requests", "requests", ("result",), registry=registry)
    for i in range(2_000):  # a dict large enough that a scrape spans several thread switches
        family.counter(f"r{i}").inc()
    made = threading.Event()
    errors: list[BaseException] = []

    def make_children() -> None:
        for i in range(2_000, 8_000):  # each publishes a copy: fewer than with a dict changed in place
            family.counter(f"r{i}")
        made.set()

    def scrape() -> None:
        try:
            while not made.is_set():
                generate_latest(registry)
        except RuntimeError as error:  # 'dictionary changed size during iteration'
            errors.append(error)

    threads = [threading.Thread(target=make_children), threading.Thread(target=scrape)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
