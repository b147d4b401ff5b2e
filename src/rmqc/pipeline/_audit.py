"""Audit table: broker id allocations, re-registrations, address changes, cleans and elections,
each with who asked (caller, caller_address, via_node; "controller" for the elections it started),
and the controllers' configuration changes (1009, no broker group: their group columns are null)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, functions as F

from ._group_log import APPLY_ID, AUDITED_COMMANDS, ELECT, UPDATE_ADDRESS, removes_group

AUDIT_COLUMNS: tuple[str, ...] = (
    "controller_cluster", "cluster_name", "broker_name", "incarnation", "index", "seq",
    "leader_ts_ms", "time", "event", "broker_id", "address", "previous_address",
    "register_check_code", "clean_ids", "result", "caller", "caller_address", "via_node", "settings",
)  # fmt: skip
CONFIG_UPDATE = "update_controller_config"
# What a 1009 set, from its description ("update controller config {key: value, ...} [by ...]").
_SETTINGS = r"^update controller config \{(.*?)\}( \[|$)"


def _event_name(id_seen_before: Column) -> Column:
    """What happened, in the audit's words; the first apply of an id in an incarnation allocates it."""
    command = F.col("command")
    return (
        F.when((command == APPLY_ID) & id_seen_before, F.lit("id_applied_again"))
        .when(command == APPLY_ID, F.lit("id_allocated"))
        .when(command == UPDATE_ADDRESS, F.lit("address_changed"))
        .when(removes_group(), F.lit("group_cleaned"))
        .otherwise(F.lit("ids_cleaned"))
    )


def audit_table(group_log: DataFrame, refused: DataFrame, entries: DataFrame | None = None) -> DataFrame:
    """Applied and refused audit events, each with the address it set and the one it replaced, and
    the configuration changes among `entries` (event `config_updated`, `settings` what it set)."""
    touched = group_log.filter(F.col("command").isin(*AUDITED_COMMANDS))
    per_id = Window.partitionBy(
        "controller_cluster", "broker_name", "incarnation", "broker_id"
    ).orderBy("index", "seq")
    addressed = F.col("command").isin(APPLY_ID, UPDATE_ADDRESS)
    previous_address = F.lag(F.when(addressed, F.col("broker_address"))).over(per_id)
    applied = touched.select(
        "*",
        F.when(addressed, previous_address).alias("previous_address"),
        _event_name(F.lag("index").over(per_id).isNotNull()).alias("event"),
        F.lit("ok").alias("result"),
    )
    refused_audit = (
        refused.filter(F.col("command").isin(*AUDITED_COMMANDS))
        .withColumn("incarnation", F.lit(None).cast("long"))
        .withColumn("previous_address", F.lit(None).cast("string"))
        .withColumn("event", F.concat(F.lit("refused_"), F.col("command")))
    )
    columns = [c for c in AUDIT_COLUMNS if c != "time"]

    def shape(frame: DataFrame) -> DataFrame:
        return frame.select(*[
            F.col("broker_address").alias("address") if c == "address"
            else F.lit(None).cast("string").alias(c) if c == "settings" else F.col(c)
            for c in columns
        ])

    audited = shape(applied).unionByName(shape(elections(group_log))).unionByName(shape(refused_audit))
    if entries is not None:
        configs = entries.filter(F.col("command") == CONFIG_UPDATE).select(
            *[F.lit(None).cast("long").alias(c) if c == "incarnation"
              else F.lit("config_updated").alias(c) if c == "event"
              else F.regexp_extract("description", _SETTINGS, 1).alias(c) if c == "settings"
              else F.col("broker_address").alias(c) if c == "address"
              else F.lit(None).cast("string").alias(c) if c == "previous_address"
              else F.col(c) for c in columns]
        )
        audited = audited.unionByName(configs)
    return audited.withColumn("time", F.timestamp_millis("leader_ts_ms")).select(*AUDIT_COLUMNS)


def elections(group_log: DataFrame) -> DataFrame:
    """Applied elections: who became master (broker_id), or that none could (no candidate). Kept
    out of audit_table's per-id window: an election is not an id's registration, and between two
    of them it would hide the address an address change replaced."""
    elected = group_log.filter(F.col("command") == ELECT)
    return elected.select(
        *[c for c in elected.columns if c != "broker_id"],
        F.col("new_master_id").alias("broker_id"),
        F.lit(None).cast("string").alias("previous_address"),
        F.when(F.col("new_master_id").isNotNull(), F.lit("master_elected"))
        .otherwise(F.lit("no_master_elected")).alias("event"),
        F.lit("ok").alias("result"),
    )
