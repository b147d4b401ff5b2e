"""The linearizability check of recorded client histories, one key per task, on Spark.

Lines are kept as raw JSON text until they reach the worker, so values keep their JSON types
exactly; there each key's ops go through the one checker, `rmqc.linearizability`
(P-compositionality: the history is linearizable iff every key's sub-history is).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, functions as F

LINEARIZABILITY_SCHEMA = "key string, ok boolean, ops_checked long, witness string"
# Witness text beyond this is cut: a report cell, not a dump (the full ops are in the input).
MAX_WITNESS_CHARS = 2_000


def _check_one_key(lines: pd.DataFrame) -> pd.DataFrame:
    """Runs on a Spark worker: parse one key's ops and check them."""
    from rmqc.linearizability import SearchBoundExceeded, check_key, op_from_json

    key = str(lines["key"].iloc[0])
    ops = [op_from_json(json.loads(line), f"key {key}") for line in lines["value"]]
    try:
        result = check_key(ops)
        ok, checked, witness = result.ok, result.ops_checked, result.witness
    except SearchBoundExceeded as exc:
        ok, checked, witness = None, len(ops), f"undecided: {exc}"
    return pd.DataFrame(
        {"key": [key], "ok": [ok], "ops_checked": [checked], "witness": [witness[:MAX_WITNESS_CHARS]]}
    )


def check_client_histories(spark: SparkSession, paths: Sequence[str | os.PathLike[str]]) -> DataFrame:
    """One row per key: ok (null if the search bound was hit), ops checked and the witness."""
    lines = spark.read.text([str(p) for p in paths]).filter(F.trim("value") != "")
    keyed = lines.withColumn("key", F.get_json_object("value", "$.key"))
    return keyed.groupBy("key").applyInPandas(_check_one_key, LINEARIZABILITY_SCHEMA)
