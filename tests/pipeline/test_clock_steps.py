"""A history whose wall stamps go backwards: ordered by index all the same, the step flagged."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from rmqc.pipeline import synth
from rmqc.pipeline._clock_steps import clock_steps
from rmqc.pipeline._group_log import build_group_log
from rmqc.pipeline._load import load_entries
from rmqc.pipeline._timeline import failovers, master_timeline

pytestmark = pytest.mark.slow
HOUR_MS = 3_600_000
T0 = 1_767_225_600_000


def _row(index: int, term: int, command: str, ts_ms: int, **columns) -> dict:
    row = dict.fromkeys(synth.ARROW_SCHEMA.names)
    row |= dict(controller_cluster="c", node_id="n1", index=index, term=term, seq=0, command=command,
                leader_ts_ms=ts_ms, cluster_name="C", broker_name="b", result="ok")  # fmt: skip
    return row | columns


def _elect(index: int, term: int, ts_ms: int, master: int, epoch: int, **columns) -> dict:
    return _row(index, term, "elect_master", ts_ms, elected=True, new_master_id=master, unclean_enabled=False,
                master_epoch=epoch, sync_state_set_epoch=epoch, sync_state_set=[master], **columns)


# The leader of term 1 decides a failover of broker-b's master: it saw the master's connection close
# at T0 + 5000, then its wall clock was stepped back an hour before the election entry was stamped.
# The leader of term 2 stamps 5 ms behind the last stamp of term 1: clock skew between two nodes,
# not a step.
STEPPED = [
    _row(1, 1, "apply_broker_id", T0, broker_id=1, broker_address="10.0.0.1:1", register_check_code="a",
         master_epoch=0, sync_state_set_epoch=0, sync_state_set=[]),
    _elect(2, 1, T0 + 100, 1, 1, trigger="broker"),
    _row(3, 1, "apply_broker_id", T0 + 200, broker_id=2, broker_address="10.0.0.2:1", register_check_code="b",
         master_epoch=1, sync_state_set_epoch=1, sync_state_set=[1]),
    _elect(4, 1, T0 + 5_100 - HOUR_MS, 2, 2, trigger="controller", prev_master_id=1, liveness_lost_ms=T0 + 5_000,
           master_last_alive_ms=T0 + 5_000),
    _elect(5, 2, T0 + 5_100 - HOUR_MS - 5, 1, 3, trigger="broker", prev_master_id=2),
]


def test_stamps_going_backwards_change_no_order_and_are_flagged(spark, tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in STEPPED))
    entries, _diverging = load_entries(spark, [tmp_path / "c.jsonl"])
    [step] = clock_steps(entries).collect()
    assert (step["term"], step["prev_index"], step["index"]) == (1, 3, 4)
    assert step["step_ms"] == STEPPED[3]["leader_ts_ms"] - STEPPED[2]["leader_ts_ms"] < -HOUR_MS + 5_000

    group_log = build_group_log(entries, 2)
    try:
        timeline = master_timeline(group_log)
        masters = [(r["index"], r["master_id"]) for r in timeline.orderBy("index", "seq").collect()]
        assert masters == [(2, 1), (4, 2), (5, 1)]  # the order of the log, whatever the stamps say
        [failover] = failovers(timeline).collect()
        assert failover["start_index"] == 4 and failover["resolved"] and failover["clock_stepped"]
        assert failover["duration_ms"] < 0  # what the stamps say; `clock_stepped` says not to believe it
    finally:
        group_log.unpersist()
