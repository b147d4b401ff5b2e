"""Reading exported histories (JSON lines or Parquet, many files) into one normalised DataFrame.

Several nodes of one controller cluster export the same committed log, so an entry may arrive more
than once: rows are deduplicated by (controller_cluster, index, seq), and two nodes disagreeing about
one entry is itself reported (Raft's log matching property says they never may).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F

from ._errors import InputNotFound, UnknownInputFormat
from ._schema import CONTENT_COLUMNS, ENTRY_KEY, EXPORT_FIELDS, EXPORT_SCHEMA

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
# Spark writes these beside data files in a Parquet directory; they are not histories.
_IGNORED_PREFIXES = ("_", ".")


def _format_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(JSON_SUFFIXES):
        return "json"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    raise UnknownInputFormat(str(path))


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputNotFound(str(path))
    found = sorted(
        p
        for p in path.rglob("*")
        if p.is_file()
        and not p.name.startswith(_IGNORED_PREFIXES)
        and p.name.lower().endswith(JSON_SUFFIXES + PARQUET_SUFFIXES)
    )
    if not found:
        raise InputNotFound(str(path))
    return found


def split_by_format(inputs: Iterable[str | os.PathLike[str]]) -> dict[str, list[str]]:
    """Expand files and directories into {"json": [...], "parquet": [...]}."""
    by_format: dict[str, list[str]] = {"json": [], "parquet": []}
    for raw in inputs:
        for file in _files_under(Path(raw)):
            by_format[_format_of(file)].append(str(file))
    return by_format


def _normalise(df: DataFrame) -> DataFrame:
    """Exactly the export columns, typed as the schema says; columns added later read as null."""
    present = set(df.columns)
    return df.select(
        [
            (F.col(name) if name in present else F.lit(None)).cast(dtype).alias(name)
            for name, dtype in EXPORT_FIELDS
        ]
    )


def read_exports(spark: SparkSession, inputs: Sequence[str | os.PathLike[str]]) -> DataFrame:
    """All rows of every input, in the export schema (not yet deduplicated)."""
    by_format = split_by_format(inputs)
    frames: list[DataFrame] = []
    if by_format["json"]:
        frames.append(spark.read.schema(EXPORT_SCHEMA).json(by_format["json"], mode="FAILFAST"))
    if by_format["parquet"]:
        # exports written before a column was added lack it: merge, so it reads as null there
        frames.append(spark.read.option("mergeSchema", "true").parquet(*by_format["parquet"]))
    normalised = [_normalise(frame) for frame in frames]
    combined = normalised[0]
    for frame in normalised[1:]:
        combined = combined.unionByName(frame)
    return combined


def has_several_nodes(rows: DataFrame) -> bool:
    """True when some controller cluster was exported from more than one node."""
    per_cluster = rows.groupBy("controller_cluster").agg(F.countDistinct("node_id").alias("nodes"))
    return per_cluster.filter(F.col("nodes") > 1).limit(1).count() > 0


def deduplicate(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(one row per entry, the entries nodes disagree on).

    The kept row is the one of the smallest node_id, so the choice is deterministic. The second frame
    has the entry key, the nodes and the number of distinct versions seen.
    """
    content_hash = F.xxhash64(*[F.col(c) for c in CONTENT_COLUMNS])
    per_entry = rows.groupBy(*ENTRY_KEY).agg(
        F.min_by(F.struct(*[F.col(c) for c in rows.columns]), F.col("node_id")).alias("row"),
        F.countDistinct(content_hash).alias("versions"),
        F.array_sort(F.collect_set("node_id")).alias("nodes"),
        F.first("cluster_name", ignorenulls=True).alias("first_cluster_name"),
        F.first("broker_name", ignorenulls=True).alias("first_broker_name"),
        F.min("leader_ts_ms").alias("first_leader_ts_ms"),
    )
    entries = per_entry.select("row.*")
    diverging = per_entry.filter(F.col("versions") > 1).select(
        *ENTRY_KEY,
        F.col("first_cluster_name").alias("cluster_name"),
        F.col("first_broker_name").alias("broker_name"),
        F.col("first_leader_ts_ms").alias("leader_ts_ms"),
        "versions",
        "nodes",
    )
    return entries, diverging


def load_entries(
    spark: SparkSession, inputs: Sequence[str | os.PathLike[str]]
) -> tuple[DataFrame, DataFrame | None]:
    """(entries, diverging entries or None when every cluster came from a single node)."""
    rows = read_exports(spark, inputs)
    if not has_several_nodes(rows):
        return rows, None
    return deduplicate(rows)
