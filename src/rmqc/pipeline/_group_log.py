"""The applied history of every broker group, ordered, with each row's predecessor beside it.

Only rows whose command applied (`result == "ok"`) changed the state, so only they make the state
history. A clean that removes the group (no id list, or every id: the export then shows no state
after it, masterEpoch null) ends it: what follows is a new *incarnation* that starts again from
masterEpoch 0, syncStateSetEpoch 0 and broker id 1, so every invariant is checked within one
incarnation.

The frame is partitioned by group and persisted: every later window or aggregation keyed by the
group (or a finer key) then runs without another shuffle.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window, functions as F
from pyspark.sql.window import WindowSpec

from ._schema import GROUP_KEY, RESULT_OK

# Columns the analyses read; `description` and `node_id` stay out of the cached frame.
GROUP_LOG_COLUMNS: tuple[str, ...] = (
    "controller_cluster", "index", "term", "seq", "command", "leader_ts_ms", "cluster_name",
    "broker_name", "broker_id", "broker_address", "register_check_code", "trigger", "elected",
    "new_master_id", "prev_master_id", "master_epoch", "sync_state_set_epoch", "sync_state_set",
    "prev_sync_state_set", "clean_ids", "unclean_enabled", "liveness_lost_ms", "master_last_alive_ms",
    "caller", "caller_address", "via_node", "election_reason", "deadline_missed_by_ms",
)  # fmt: skip

ELECT = "elect_master"
ALTER = "alter_sync_state_set"
APPLY_ID = "apply_broker_id"
UPDATE_ADDRESS = "update_broker_address"
CLEAN = "clean_broker_data"
AUDITED_COMMANDS = (APPLY_ID, UPDATE_ADDRESS, CLEAN)


def removes_group() -> Column:
    """A clean that removed the group: no id list, or no state left after it."""
    no_ids = F.col("clean_ids").isNull() | (F.size("clean_ids") == 0)
    return (F.col("command") == CLEAN) & (no_ids | F.col("master_epoch").isNull())


def group_window() -> WindowSpec:
    return Window.partitionBy(*GROUP_KEY).orderBy("index", "seq")


def _with_incarnation(rows: DataFrame) -> DataFrame:
    cleans_before = F.sum(removes_group().cast("int")).over(
        group_window().rowsBetween(Window.unboundedPreceding, -1)
    )
    return rows.withColumn("incarnation", F.coalesce(cleans_before, F.lit(0)))


def _with_predecessor(rows: DataFrame) -> DataFrame:
    """prev_* columns: the previous applied row of the group and the state it left.

    In the same incarnation the previous epochs are the predecessor's; right after a whole-group
    clean they are 0 (the group starts afresh); on the group's first row in the data they are null
    (the export may start after compacted history, so the state before is unknown).
    """
    window = group_window()
    lag_incarnation = F.lag("incarnation").over(window)
    same_incarnation = lag_incarnation == F.col("incarnation")

    def prev_state(column: str) -> Column:
        return (
            F.when(same_incarnation, F.lag(column).over(window))
            .when(lag_incarnation.isNotNull(), F.lit(0))
            .otherwise(F.lit(None))
        )

    # One select, so Spark evaluates every lag in a single Window operator.
    return rows.select(
        "*",
        F.lag("index").over(window).alias("prev_index"),
        F.lag("seq").over(window).alias("prev_seq"),
        prev_state("master_epoch").alias("prev_master_epoch"),
        prev_state("sync_state_set_epoch").alias("prev_sync_state_set_epoch"),
    )


def applied_group_rows(entries: DataFrame) -> DataFrame:
    return entries.filter(F.col("broker_name").isNotNull() & (F.col("result") == RESULT_OK))


def build_group_log(entries: DataFrame, partitions: int) -> DataFrame:
    """Applied broker-group rows with incarnation and predecessor columns, cached by group."""
    rows = applied_group_rows(entries).select(*GROUP_LOG_COLUMNS)
    rows = rows.repartition(partitions, *GROUP_KEY)
    rows = _with_predecessor(_with_incarnation(rows))
    return rows.persist(StorageLevel.MEMORY_AND_DISK)


def refused_rows(entries: DataFrame) -> DataFrame:
    """Broker-group commands apply refused (a precondition did not hold)."""
    return entries.filter(F.col("broker_name").isNotNull() & (F.col("result") != RESULT_OK))
