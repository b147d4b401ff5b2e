"""Summaries of latency samples. Percentiles use the nearest-rank method so p99 of 100 samples is
the 99th value, never an interpolation between two measured values."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(samples: Sequence[float], fraction: float) -> float:
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarise_ms(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean and the sample count of latencies in milliseconds."""
    if not samples_ms:
        return {"n": 0, "p50_ms": math.nan, "p90_ms": math.nan, "p99_ms": math.nan,
                "max_ms": math.nan, "mean_ms": math.nan}
    return {
        "n": len(samples_ms),
        "p50_ms": round(percentile(samples_ms, 0.50), 3),
        "p90_ms": round(percentile(samples_ms, 0.90), 3),
        "p99_ms": round(percentile(samples_ms, 0.99), 3),
        "max_ms": round(max(samples_ms), 3),
        "mean_ms": round(sum(samples_ms) / len(samples_ms), 3),
    }


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"
