"""Seeded synthetic histories in the export schema, small or very large, with planted violations.

Two halves: `_synth_script` plays individual broker groups in detail (pure Python); this module lays
many groups out in time and into controller logs with numpy and writes Arrow tables in chunks. For
large histories most groups are clones of a bounded number of scripted ones (`templates`), shifted
in time and given their own names and addresses, which is what makes 10,000,000 rows cheap. Groups
with planted violations are always scripted individually and never cloned, so each planted row
appears exactly once.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._errors import SynthBoundExceeded
from ._synth_script import PLANTABLE_KINDS, SCRIPT_COLUMNS, GroupScript

DAY_MS = 86_400_000
DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# Hosts per group in the synthetic address plan (10.a.b.c with c..: group * 32 + host); a group
# that allocates more replicas than this over its life wraps around and reuses a host number.
HOSTS_PER_GROUP = 32
# 10.0.0.0/8 holds 2**24 addresses, HOSTS_PER_GROUP of them per group.
MAX_GROUPS = (1 << 24) // HOSTS_PER_GROUP
DEFAULT_CHUNK_ROWS = 1_000_000
# Share of consecutive commands that start a new log entry; the rest ride along in the same entry
# (the leader batches what it decided in one tick).
NEW_ENTRY_PROBABILITY = 0.7

ARROW_SCHEMA = pa.schema(
    [
        ("controller_cluster", pa.string()), ("node_id", pa.string()), ("index", pa.int64()),
        ("term", pa.int64()), ("seq", pa.int32()), ("command", pa.string()),
        ("leader_ts_ms", pa.int64()), ("cluster_name", pa.string()), ("broker_name", pa.string()),
        ("broker_id", pa.int64()), ("broker_address", pa.string()),
        ("register_check_code", pa.string()), ("trigger", pa.string()), ("elected", pa.bool_()),
        ("new_master_id", pa.int64()), ("prev_master_id", pa.int64()),
        ("master_epoch", pa.int32()), ("sync_state_set_epoch", pa.int32()),
        ("sync_state_set", pa.list_(pa.int64())), ("prev_sync_state_set", pa.list_(pa.int64())),
        ("clean_ids", pa.list_(pa.int64())), ("unclean_enabled", pa.bool_()),
        ("liveness_lost_ms", pa.int64()), ("result", pa.string()), ("description", pa.string()),
        ("master_last_alive_ms", pa.int64()),
    ]
)  # fmt: skip

_TEMPLATE_TYPES = {
    "rel_ts_ms": pa.int64(), "command": pa.string(), "broker_id": pa.int64(),
    "addr_host": pa.int64(), "addr_port": pa.int64(), "code_port": pa.int64(),
    "code_rel_ms": pa.int64(),
    "trigger": pa.string(), "elected": pa.bool_(), "new_master_id": pa.int64(),
    "prev_master_id": pa.int64(), "master_epoch": pa.int32(), "sync_state_set_epoch": pa.int32(),
    "sync_state_set": pa.list_(pa.int64()), "prev_sync_state_set": pa.list_(pa.int64()),
    "clean_ids": pa.list_(pa.int64()), "unclean_enabled": pa.bool_(),
    "liveness_lost_rel_ms": pa.int64(), "result": pa.string(), "description": pa.string(),
}  # fmt: skip


@dataclass(frozen=True)
class SynthConfig:
    """What to generate. `plant` maps a violation kind (PLANTABLE_KINDS) to how many to plant."""

    groups: int = 40
    rows_per_group: int = 40
    controller_clusters: int = 1
    seed: int = 0
    start_ms: int = DEFAULT_START_MS
    span_ms: int = 3 * DAY_MS
    flapping_fraction: float = 0.05
    unclean_fraction: float = 0.1
    recreate_fraction: float = 0.03
    templates: int | None = None  # distinct scripted groups; None: every group scripted
    plant: Mapping[str, int] = field(default_factory=dict)
    node_id: str = "n1"
    controller_cluster_prefix: str = "rmqc"
    terms_per_cluster: int = 4


@dataclass(frozen=True)
class PlantedViolation:
    kind: str
    controller_cluster: str
    broker_name: str
    index: int
    seq: int


@dataclass
class SynthHistory:
    """A laid-out history: `chunks()` yields it as Arrow tables in log order."""

    config: SynthConfig
    rows: int
    planted: list[PlantedViolation]
    _layout: _Layout

    def chunks(self, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pa.Table]:
        for start in range(0, self.rows, chunk_rows):
            yield self._layout.table(start, min(start + chunk_rows, self.rows))

    def table(self) -> pa.Table:
        return pa.concat_tables(self.chunks()) if self.rows else ARROW_SCHEMA.empty_table()


def controller_cluster_names(config: SynthConfig) -> list[str]:
    return [f"{config.controller_cluster_prefix}-{c}" for c in range(config.controller_clusters)]


def broker_name_of(group: int) -> str:
    return f"broker-{group:06d}"


def _validate(config: SynthConfig) -> list[tuple[str, int]]:
    """The plants as (kind, flavour) pairs, one per planted group."""
    if not 0 < config.groups <= MAX_GROUPS:
        raise SynthBoundExceeded(f"groups must be in 1..{MAX_GROUPS}, got {config.groups}")
    if config.rows_per_group < 8:
        raise SynthBoundExceeded(f"rows_per_group must be at least 8, got {config.rows_per_group}")
    plants: list[tuple[str, int]] = []
    for kind, count in config.plant.items():
        if kind not in PLANTABLE_KINDS:
            raise SynthBoundExceeded(f"cannot plant {kind!r}; plantable: {PLANTABLE_KINDS}")
        plants.extend((kind, flavour) for flavour in range(count))
    scripted = config.groups if config.templates is None else min(config.groups, config.templates)
    # Each plant takes a scripted group of its own, and clones need at least one unplanted script.
    needed = len(plants) + (1 if config.groups > scripted else 0)
    if needed > scripted:
        raise SynthBoundExceeded(f"{len(plants)} plants need {needed} scripted groups, have {scripted}")
    return plants


def _play(config: SynthConfig, script_id: int, plant: tuple[str, int] | None) -> GroupScript:
    rng = random.Random(f"{config.seed}:{script_id}")
    flapping = plant is None and rng.random() < config.flapping_fraction
    mean_gap_ms = config.span_ms / config.rows_per_group / (10.0 if flapping else 1.5)
    unclean = plant is None and rng.random() < config.unclean_fraction
    recreate = plant is None and rng.random() < config.recreate_fraction
    script = GroupScript(rng, mean_gap_ms=mean_gap_ms, unclean=unclean, replicas=rng.choice((2, 3, 3)))
    script.play(config.rows_per_group, plants=[plant] if plant else [], flapping=flapping, recreate=recreate)
    return script


@dataclass
class _Scripts:
    table: pa.Table  # all scripted rows, script after script
    starts: np.ndarray  # first row of each script in `table`
    lengths: np.ndarray
    planted: list[tuple[int, str, int]]  # (script, kind, row in script)


def _build_scripts(config: SynthConfig, plants: list[tuple[str, int]], count: int) -> _Scripts:
    columns: dict[str, list[object]] = {name: [] for name in SCRIPT_COLUMNS}
    lengths: list[int] = []
    planted: list[tuple[int, str, int]] = []
    for script_id in range(count):
        plant = plants[script_id] if script_id < len(plants) else None
        script = _play(config, script_id, plant)
        for name in SCRIPT_COLUMNS:
            columns[name].extend(script.columns[name])
        lengths.append(script.row_count)
        planted.extend((script_id, p.kind, p.row) for p in script.planted)
    table = pa.table({name: pa.array(columns[name], _TEMPLATE_TYPES[name]) for name in SCRIPT_COLUMNS})
    length_array = np.asarray(lengths, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(length_array)[:-1]))
    return _Scripts(table, starts, length_array, planted)


def _pseudo_rows(config: SynthConfig) -> pa.Table:
    """Rows that belong to no group: a conf change per voter, then a no-op at each term start."""
    commands = ["conf_change"] * 3 + ["noop"]
    descriptions = [f"conf change: add node n{n}" for n in (1, 2, 3)] + ["no-op (leader start)"]
    columns = {name: pa.nulls(len(commands), _TEMPLATE_TYPES[name]) for name in SCRIPT_COLUMNS}
    columns |= {
        "rel_ts_ms": pa.array([0] * len(commands), pa.int64()),
        "command": pa.array(commands, pa.string()),
        "result": pa.array(["ok"] * len(commands), pa.string()),
        "description": pa.array(descriptions, pa.string()),
    }
    return pa.table(columns)


class _Layout:
    """Where every row goes: which group and scripted row, which cluster, index, seq and term."""

    def __init__(self, config: SynthConfig, scripts: _Scripts) -> None:
        self.config = config
        self.cluster_names = pa.array(controller_cluster_names(config), pa.string())
        self.broker_names = pa.array([broker_name_of(g) for g in range(config.groups)] + [None])
        self.rocketmq_cluster_names = pa.array(
            [f"Cluster{g % ROCKETMQ_CLUSTERS}" for g in range(config.groups)] + [None]
        )
        rng = np.random.default_rng(config.seed)
        groups = config.groups
        scripted = len(scripts.lengths)
        planted_count = len({s for s, _, _ in scripts.planted})
        script_of_group = np.arange(groups, dtype=np.int64)
        if groups > scripted:
            clones = np.arange(scripted, groups)
            free = scripted - planted_count  # planted scripts are never cloned
            script_of_group[scripted:] = planted_count + (clones - planted_count) % free
        lengths = scripts.lengths[script_of_group]
        durations = scripts.table["rel_ts_ms"].to_numpy()[scripts.starts + scripts.lengths - 1]
        room = np.maximum(config.span_ms - durations[script_of_group], 1)
        offsets = config.start_ms + (rng.random(groups) * room).astype(np.int64)
        group_cluster = np.arange(groups) % config.controller_clusters
        pseudo_cluster, pseudo_offsets, pseudo_kind = self._pseudo_plan(config, rng)
        pseudo_base = scripts.table.num_rows
        self.templates = pa.concat_tables([scripts.table, _pseudo_rows(config)])

        group_row_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        total_group_rows = int(lengths.sum())
        group_of_row = np.repeat(np.arange(groups, dtype=np.int64), lengths)
        within = np.arange(total_group_rows, dtype=np.int64) - np.repeat(group_row_starts, lengths)
        template_row = scripts.starts[script_of_group][group_of_row] + within
        self.group = np.concatenate((group_of_row, -1 - np.arange(len(pseudo_kind))))
        self.template_row = np.concatenate((template_row, pseudo_base + pseudo_kind))
        rel_ts = self.templates["rel_ts_ms"].to_numpy()
        self.offset = np.concatenate((offsets[group_of_row], pseudo_offsets))
        ts = self.offset + rel_ts[self.template_row]
        cluster = np.concatenate((group_cluster[group_of_row], pseudo_cluster))
        order = np.lexsort((self.template_row, self.group, ts, cluster))
        self.order, self.ts, self.cluster = order, ts[order], cluster[order]
        self._number_entries(rng, pseudo_base)
        self.planted = self._locate_planted(scripts, script_of_group, group_row_starts)
        self.rows = len(order)
        self.offsets_by_group = offsets

    @staticmethod
    def _pseudo_plan(config: SynthConfig, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        rows: list[tuple[int, int, int]] = []  # (cluster, offset, kind)
        for c in range(config.controller_clusters):
            term_starts = np.sort(rng.integers(0, config.span_ms, config.terms_per_cluster))
            term_starts[0] = -1  # the first leader's no-op precedes every group command
            rows += [(c, config.start_ms - 10 + voter, voter) for voter in range(3)]
            rows += [(c, config.start_ms + int(start), 3) for start in term_starts]
        clusters, offsets, kinds = zip(*rows, strict=True)
        return np.asarray(clusters), np.asarray(offsets, dtype=np.int64), np.asarray(kinds)

    def _number_entries(self, rng: np.random.Generator, pseudo_base: int) -> None:
        n = len(self.order)
        positions = np.arange(n)
        template = self.template_row[self.order]
        alone = template >= pseudo_base  # conf changes and no-ops are entries of their own
        is_noop = template == pseudo_base + 3
        boundary = rng.random(n) < NEW_ENTRY_PROBABILITY
        boundary |= alone
        boundary[1:] |= alone[:-1] | (self.cluster[1:] != self.cluster[:-1])
        boundary[0] = True
        entry = np.cumsum(boundary)
        cluster_start = np.r_[0, np.flatnonzero(self.cluster[1:] != self.cluster[:-1]) + 1]
        first_of_cluster = np.repeat(cluster_start, np.diff(np.r_[cluster_start, n]))
        self.index = entry - entry[first_of_cluster] + 1
        entry_start = np.maximum.accumulate(np.where(boundary, positions, 0))
        self.seq = (positions - entry_start).astype(np.int32)
        noops = np.cumsum(is_noop)
        noops_before_cluster = noops[first_of_cluster] - is_noop[first_of_cluster]
        self.term = np.maximum(noops - noops_before_cluster, 1)

    def _locate_planted(self, scripts: _Scripts, script_of_group: np.ndarray,
                        group_row_starts: np.ndarray) -> list[PlantedViolation]:
        position_of = np.empty_like(self.order)
        position_of[self.order] = np.arange(len(self.order))
        found = []
        for script_id, kind, row in scripts.planted:
            group = int(np.flatnonzero(script_of_group == script_id)[0])
            position = int(position_of[group_row_starts[group] + row])
            found.append(
                PlantedViolation(
                    kind,
                    self.cluster_names[int(self.cluster[position])].as_py(),
                    broker_name_of(group),
                    int(self.index[position]),
                    int(self.seq[position]),
                )
            )
        return found

    def table(self, start: int, stop: int) -> pa.Table:
        rows = self.order[start:stop]
        template = self.templates.take(pa.array(self.template_row[rows])).combine_chunks()
        group = self.group[rows]
        offset = pa.array(self.offset[rows])
        # Pseudo rows (group < 0) take the null slot at the end of the per-group name arrays.
        name_slot = pa.array(np.where(group >= 0, group, self.config.groups))
        names = self.broker_names.take(name_slot)
        address = _addresses(group, template["addr_host"], template["addr_port"])
        code_address = _addresses(group, template["addr_host"], template["code_port"])
        code_ms = pc.cast(pc.add(template["code_rel_ms"], offset), pa.string())
        # A synthetic master fails by closing its connections: the leader notices at once, so
        # its last sign of life and the detection are the same moment.
        lost_ms = pc.add(template["liveness_lost_rel_ms"], offset)
        columns = {name: template[name] for name in _COPIED_COLUMNS}
        columns |= {
            "controller_cluster": self.cluster_names.take(pa.array(self.cluster[start:stop])),
            "node_id": pa.array([self.config.node_id] * len(rows), pa.string()),
            "index": pa.array(self.index[start:stop]),
            "term": pa.array(self.term[start:stop]),
            "seq": pa.array(self.seq[start:stop]),
            "leader_ts_ms": pa.array(self.ts[start:stop]),
            "cluster_name": self.rocketmq_cluster_names.take(name_slot),
            "broker_name": names,
            "broker_address": address,
            "register_check_code": pc.binary_join_element_wise(code_address, code_ms, ";"),
            "liveness_lost_ms": lost_ms,
            "master_last_alive_ms": lost_ms,
            "description": pc.binary_join_element_wise(
                names, template["description"], ": ", null_handling="skip"
            ),
        }
        arrays = [_chunked(columns[f.name]).cast(f.type) for f in ARROW_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)


def _chunked(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])


_COPIED_COLUMNS = (
    "command", "broker_id", "trigger", "elected", "new_master_id", "prev_master_id",
    "master_epoch", "sync_state_set_epoch", "sync_state_set", "prev_sync_state_set", "clean_ids",
    "unclean_enabled", "result",
)  # fmt: skip
# RocketMQ clusters the synthetic groups belong to (cluster_name), round robin.
ROCKETMQ_CLUSTERS = 8


def _addresses(group: np.ndarray, host: pa.ChunkedArray, port: pa.ChunkedArray) -> pa.Array:
    """`10.a.b.c:port`, with a.b.c numbering (group, host) pairs; null where the row has no host."""
    host_values = host.to_numpy(zero_copy_only=False)
    missing = np.isnan(host_values) if host_values.dtype.kind == "f" else np.zeros(len(group), bool)
    hosts = np.where(missing, 0, host_values).astype(np.int64) % HOSTS_PER_GROUP
    number = np.maximum(group, 0) * HOSTS_PER_GROUP + hosts
    octets = [pa.array((number >> shift) & 255).cast(pa.string()) for shift in (16, 8, 0)]
    ip = pc.binary_join_element_wise(pa.array(["10"] * len(group)), *octets, ".")
    ip = pc.if_else(pa.array(missing), pa.nulls(len(group), pa.string()), ip)
    return pc.binary_join_element_wise(ip, pc.cast(port, pa.string()), ":")


def lay_out(config: SynthConfig) -> SynthHistory:
    """Script the groups and place every row; nothing is materialised until `chunks()`."""
    plants = _validate(config)
    scripted = config.groups if config.templates is None else min(config.groups, config.templates)
    scripts = _build_scripts(config, plants, scripted)
    layout = _Layout(config, scripts)
    return SynthHistory(config, layout.rows, layout.planted, layout)


def generate_history(config: SynthConfig) -> tuple[pa.Table, list[PlantedViolation]]:
    """The whole history in memory (for small configs) and the planted violations."""
    history = lay_out(config)
    return history.table(), history.planted


def write_history(
    config: SynthConfig, path: str | Path, *, fmt: str = "parquet",
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> SynthHistory:
    """Write the history to one file (`fmt` "parquet" or "jsonl") chunk by chunk."""
    history = lay_out(config)
    writers = {"parquet": _write_parquet, "jsonl": _write_jsonl}
    if fmt not in writers:
        raise SynthBoundExceeded(f"format must be one of {sorted(writers)}, got {fmt!r}")
    writers[fmt](history.chunks(chunk_rows), Path(path))
    return history


def _write_parquet(chunks: Iterator[pa.Table], path: Path) -> None:
    with pq.ParquetWriter(path, ARROW_SCHEMA, compression="zstd") as writer:
        for chunk in chunks:
            writer.write_table(chunk)


def write_jsonl_table(table: pa.Table, path: Path, *, append: bool = False) -> None:
    with open(path, "ab" if append else "wb") as out:
        for row in table.to_pylist():
            out.write(orjson.dumps(row))
            out.write(b"\n")


def _write_jsonl(chunks: Iterator[pa.Table], path: Path) -> None:
    path.write_bytes(b"")
    for chunk in chunks:
        write_jsonl_table(chunk, path, append=True)


__all__ = [
    "PLANTABLE_KINDS",
    "PlantedViolation",
    "SynthConfig",
    "SynthHistory",
    "generate_history",
    "lay_out",
    "write_history",
]
