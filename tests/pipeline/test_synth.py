"""The synthetic generators, without Spark: determinism, log shape, plants where they say."""

from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rmqc.linearizability import check_history
from rmqc.pipeline import SynthBoundExceeded, synth

ALL_PLANTS = {kind: 1 for kind in synth.PLANTABLE_KINDS} | {"broker_id_reused": 2}


def _config(seed: int, **changes) -> synth.SynthConfig:
    base = dict(groups=24, rows_per_group=30, controller_clusters=2, seed=seed, plant=ALL_PLANTS)
    return synth.SynthConfig(**(base | changes))


@pytest.mark.parametrize("seed", [1, 2])
def test_same_seed_same_history(seed):
    first, planted_first = synth.generate_history(_config(seed))
    second, planted_second = synth.generate_history(_config(seed))
    assert first.equals(second), f"seed {seed}"
    assert planted_first == planted_second


def test_different_seeds_differ():
    assert not synth.generate_history(_config(1))[0].equals(synth.generate_history(_config(2))[0])


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_log_order_index_and_seq(seed):
    table, _ = synth.generate_history(_config(seed))
    rows = table.select(["controller_cluster", "index", "seq", "term", "command", "leader_ts_ms"]).to_pylist()
    last: dict[str, tuple[int, int, int, int]] = {}
    for row in rows:
        key = (row["index"], row["seq"], row["term"], row["leader_ts_ms"])
        previous = last.get(row["controller_cluster"])
        if previous is None:
            assert key[:2] == (1, 0), f"seed {seed}: a log starts at index 1"
        else:
            same_entry = key[0] == previous[0]
            assert key[0] in (previous[0], previous[0] + 1), f"seed {seed}: index gap at {row}"
            assert key[1] == (previous[1] + 1 if same_entry else 0), f"seed {seed}: seq at {row}"
            assert key[2] >= previous[2] and key[3] >= previous[3], f"seed {seed}: order at {row}"
        if row["command"] in ("noop", "conf_change"):
            assert row["seq"] == 0, f"seed {seed}: {row['command']} shares an entry"
        last[row["controller_cluster"]] = key


def test_planted_rows_are_where_reported():
    table, planted = synth.generate_history(_config(7))
    assert sorted(p.kind for p in planted) == sorted(
        ["master_epoch_not_increasing"] * 2 + ["two_masters_in_epoch", "master_outside_sync_state_set",
                                               "sync_state_set_epoch_jump"] + ["broker_id_reused"] * 2
    )  # fmt: skip
    rows = {(r["controller_cluster"], r["index"], r["seq"]): r for r in table.to_pylist()}
    expected_command = {
        "master_epoch_not_increasing": "elect_master", "two_masters_in_epoch": "elect_master",
        "master_outside_sync_state_set": "elect_master", "sync_state_set_epoch_jump": "alter_sync_state_set",
        "broker_id_reused": "apply_broker_id",
    }  # fmt: skip
    for plant in planted:
        row = rows[(plant.controller_cluster, plant.index, plant.seq)]
        assert row["broker_name"] == plant.broker_name
        assert row["command"] == expected_command[plant.kind]


def test_outside_set_plant_is_outside_the_previous_set():
    table, planted = synth.generate_history(_config(8))
    rows = {(r["controller_cluster"], r["index"], r["seq"]): r for r in table.to_pylist()}
    (plant,) = [p for p in planted if p.kind == "master_outside_sync_state_set"]
    row = rows[(plant.controller_cluster, plant.index, plant.seq)]
    assert row["new_master_id"] not in row["prev_sync_state_set"]
    assert row["unclean_enabled"] is False


def test_clones_keep_plants_unique():
    config = _config(9, groups=200, templates=20, rows_per_group=20)
    history = synth.lay_out(config)
    table = history.table()
    assert len(set(table.column("broker_name").drop_null().to_pylist())) == 200
    assert len(history.planted) == 7
    codes = table.filter(pc.equal(table["command"], "apply_broker_id"))["register_check_code"]
    assert codes.null_count == 0


def test_parquet_and_jsonl_writers_agree(tmp_path):
    config = _config(10, plant={})
    parquet = synth.write_history(config, tmp_path / "h.parquet")
    jsonl = synth.write_history(config, tmp_path / "h.jsonl", fmt="jsonl", chunk_rows=97)
    from_parquet = pq.read_table(tmp_path / "h.parquet")
    lines = (tmp_path / "h.jsonl").read_text().splitlines()
    assert parquet.rows == jsonl.rows == from_parquet.num_rows == len(lines)
    assert from_parquet.schema.equals(synth.ARROW_SCHEMA)


@pytest.mark.parametrize(
    "changes",
    [dict(groups=0), dict(rows_per_group=3), dict(plant={"no_such_kind": 1}), dict(groups=3)],
)
def test_bounds_are_named_errors(changes):
    with pytest.raises(SynthBoundExceeded):
        synth.lay_out(_config(0, **changes))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_client_histories_linearizable_except_planted(seed):
    ops, planted = synth.generate_client_history(keys=6, ops_per_key=48, seed=seed, stale_reads=2)
    failing = {r.key for r in check_history(ops) if not r.ok}
    assert failing == {p.key for p in planted}, f"seed {seed}"
    assert len(planted) == 2
