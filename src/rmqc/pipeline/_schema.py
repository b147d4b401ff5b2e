"""Column names and Spark schemas of the pipeline's inputs (docs/export-schema.md).

The export schema is fixed by `rmqc log export`; reading JSON lines with this explicit schema (rather
than inferring one) keeps types stable across files and makes a missing column read as null.
"""

from __future__ import annotations

from pyspark.sql import types as T

EXPORT_FIELDS: tuple[tuple[str, T.DataType], ...] = (
    ("controller_cluster", T.StringType()),
    ("node_id", T.StringType()),
    ("index", T.LongType()),
    ("term", T.LongType()),
    ("seq", T.IntegerType()),
    ("command", T.StringType()),
    ("leader_ts_ms", T.LongType()),
    ("cluster_name", T.StringType()),
    ("broker_name", T.StringType()),
    ("broker_id", T.LongType()),
    ("broker_address", T.StringType()),
    ("register_check_code", T.StringType()),
    ("trigger", T.StringType()),
    ("elected", T.BooleanType()),
    ("new_master_id", T.LongType()),
    ("prev_master_id", T.LongType()),
    ("master_epoch", T.IntegerType()),
    ("sync_state_set_epoch", T.IntegerType()),
    ("sync_state_set", T.ArrayType(T.LongType())),
    ("prev_sync_state_set", T.ArrayType(T.LongType())),
    ("clean_ids", T.ArrayType(T.LongType())),
    ("unclean_enabled", T.BooleanType()),
    ("liveness_lost_ms", T.LongType()),
    ("result", T.StringType()),
    ("description", T.StringType()),
    ("master_last_alive_ms", T.LongType()),
    ("caller", T.StringType()),
    ("caller_address", T.StringType()),
    ("via_node", T.StringType()),
    ("election_reason", T.StringType()),
    ("deadline_missed_by_ms", T.LongType()),
)

EXPORT_SCHEMA = T.StructType([T.StructField(name, dtype, True) for name, dtype in EXPORT_FIELDS])
EXPORT_COLUMNS: tuple[str, ...] = tuple(name for name, _ in EXPORT_FIELDS)

# Columns that say what a command did; two nodes' rows for one (controller_cluster, index, seq)
# must agree on all of them (node_id naturally differs).
CONTENT_COLUMNS: tuple[str, ...] = tuple(c for c in EXPORT_COLUMNS if c != "node_id")

# A broker group is keyed by its controller cluster and brokerName (spec 4.1: sets are keyed by
# brokerName only inside one controller).
GROUP_KEY: tuple[str, ...] = ("controller_cluster", "broker_name")
ENTRY_KEY: tuple[str, ...] = ("controller_cluster", "index", "seq")

RESULT_OK = "ok"

