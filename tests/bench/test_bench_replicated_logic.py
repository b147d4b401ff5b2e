"""bench/bench_replicated_logic.py on a tiny load: three real Replicas elect a leader, every write
is answered SUCCESS after going through the peer codec both ways, and each node's CPU is counted;
the Python function calls per write stay within their bounds."""

from __future__ import annotations

import pytest

from bench.bench_replicated_logic import check, count_calls, one_run
from rmqc.remoting import RequestCode, ResponseCode, encode, make_request, make_response


def test_a_tiny_run_answers_every_write_and_times_every_node() -> None:
    per_write = one_run(clients=4, writes=30, run=0)  # 8 rounds of 4: 32 writes, each answered
    assert set(per_write) == {"leader", "follower 1", "follower 2", "all three"}
    assert all(us > 0 for us in per_write.values())
    parts = per_write["leader"] + per_write["follower 1"] + per_write["follower 2"]
    assert per_write["all three"] == pytest.approx(parts)


def test_a_missing_or_refused_answer_fails_the_run() -> None:
    with pytest.raises(RuntimeError, match="0 answers to 1 writes"):
        check([], 1)
    request = make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, 1, {})
    refused = encode(make_response(request, ResponseCode.SYSTEM_ERROR, "commit wait"))
    with pytest.raises(RuntimeError, match="commit wait"):
        check([refused], 1)


def test_a_run_that_writes_over_the_caches_still_answers_every_write() -> None:
    per_write = one_run(clients=2, writes=10, run=0, evict_kb=64)  # the same path, each step after a 64 KiB write
    assert all(us > 0 for us in per_write.values())


# Python function calls per write of each node's steps (bench_replicated_logic --count-calls):
# (clients, leader, follower). A count does not drift with the machine as CPU time does, so a cut of
# a few per cent shows in it, and so does growth. These are the counts when the bound was last set
# (leader 386.1 and 89.7, followers 156.6 and 24.5; the leader was at 390.1 and 94.6 before it
# applied its own entries without decoding them, and at 425.3 and 98.4 before the cuts of the day
# before), rounded up by under 1.5 %: the write path gets no Python call more without this bound
# and docs/cpu-per-write.md saying why. A cut lowers them.
CALL_BOUNDS = ((1, 391.5, 158.9), (16, 91.0, 24.8))


@pytest.mark.parametrize(("clients", "leader_bound", "follower_bound"), CALL_BOUNDS)
def test_the_write_path_makes_no_more_python_calls_than_its_bound(clients: int, leader_bound: float,
                                                                  follower_bound: float) -> None:
    counts = count_calls(clients, 256)
    assert set(counts) == {"leader", "follower 1", "follower 2"}
    assert 0 < counts["leader"].python <= leader_bound, counts["leader"].top
    for follower in ("follower 1", "follower 2"):
        assert 0 < counts[follower].python <= follower_bound, counts[follower].top
        assert counts[follower].by_package["fsm"] > 0  # the followers apply every write too
    assert counts["leader"].by_package["remoting"] > 0  # the leader decodes and answers the requests
