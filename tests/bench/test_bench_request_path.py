"""bench/bench_request_path.py on a tiny load: every request is answered SUCCESS through the real
request path, and the stages' CPU time is accounted for every request."""

from __future__ import annotations

import pytest

from bench.bench_request_path import STAGES, check, one_run


def test_a_tiny_run_answers_every_write_and_times_every_stage() -> None:
    run = one_run(requests=96, clients=32, run=0, groups=10)
    assert run.requests == 96
    assert set(run.cpu_s) == set(STAGES) and all(seconds >= 0 for seconds in run.cpu_s.values())
    assert sum(run.cpu_s.values()) > 0
    assert run.gc_s >= 0 and len(run.collections) == 3


def test_a_missing_or_refused_answer_fails_the_run() -> None:
    with pytest.raises(RuntimeError, match="0 answers to 1 requests"):
        check([], 1)
