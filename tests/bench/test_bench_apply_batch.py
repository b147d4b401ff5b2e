"""bench/bench_apply_batch.py on a tiny load: every entry is decoded and applied, in any batch size."""

from __future__ import annotations

import pytest

from bench.bench_apply_batch import apply_cpu_us


@pytest.mark.parametrize(("batch", "evict_kb"), [(1, 0), (4, 0), (3, 64)])
def test_every_entry_is_applied_and_timed(batch: int, evict_kb: int) -> None:
    assert apply_cpu_us(entries=10, batch=batch, evict_kb=evict_kb) > 0
