"""Per group: the timeline of masters and epochs, failovers and their durations, flapping rank."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window, functions as F

from ._group_log import ELECT
from ._schema import GROUP_KEY

CONTROLLER_TRIGGER = "controller"
FLAP_WINDOW = "1 hour"


def master_timeline(group_log: DataFrame) -> DataFrame:
    """Every applied election: who became master (null = cleared) at which epoch, and until when."""
    elections = group_log.filter(F.col("command") == ELECT)
    reign = Window.partitionBy(*GROUP_KEY, "incarnation").orderBy("index", "seq")
    return elections.select(
        *GROUP_KEY,
        "cluster_name",
        "incarnation",
        "index",
        "seq",
        "leader_ts_ms",
        "trigger",
        "liveness_lost_ms",
        "master_last_alive_ms",
        "election_reason",
        "deadline_missed_by_ms",
        "elected",
        F.col("new_master_id").alias("master_id"),
        "prev_master_id",
        "master_epoch",
        "sync_state_set_epoch",
        "sync_state_set",
        "unclean_enabled",
        F.lead("leader_ts_ms").over(reign).alias("until_ms"),
    )


def failovers(timeline: DataFrame) -> DataFrame:
    """One row per failover the controller started.

    A failover starts at a controller-triggered election (the leader saw the master go inactive at
    `liveness_lost_ms`) and ends at the first election after it that chose a master, usually the same
    entry; elections that found no candidate in between count as attempts. Its duration runs from
    `master_last_alive_ms` (the master's last heartbeat or its connection's close, which can be a
    heartbeat timeout before the leader noticed) to that election; `detection_ms` is its first part
    (last alive -> seen dead) and `reason` says how it was seen. The duration is null when the failover is
    unresolved (no master chosen when the history ends) or its start is unknown (a log written
    before the column existed); one whose end is stamped before its start (a wall clock stepped
    back in between) is `clock_stepped`.
    """
    ordered = Window.partitionBy(*GROUP_KEY, "incarnation").orderBy("index", "seq")
    chosen_before = F.sum(F.col("elected").cast("int")).over(
        ordered.rowsBetween(Window.unboundedPreceding, -1)
    )
    segments = timeline.withColumn("segment", F.coalesce(chosen_before, F.lit(0)))
    position = F.struct("index", "seq")
    is_start = (F.col("trigger") == CONTROLLER_TRIGGER) & F.col("liveness_lost_ms").isNotNull()
    start_fields = F.struct("index", "seq", "liveness_lost_ms", "master_last_alive_ms", "prev_master_id",
                            "election_reason", "deadline_missed_by_ms")
    end_fields = F.struct("index", "seq", "leader_ts_ms", "master_id")
    per_segment = segments.groupBy(*GROUP_KEY, "incarnation", "segment").agg(
        F.first("cluster_name", ignorenulls=True).alias("cluster_name"),
        F.min_by(start_fields, F.when(is_start, position)).alias("start"),
        F.max_by(end_fields, F.when(F.col("elected"), position)).alias("end"),
        F.count(F.lit(1)).alias("attempts"),
    )
    return per_segment.filter(F.col("start").isNotNull()).select(
        *GROUP_KEY,
        "cluster_name",
        "incarnation",
        F.col("start.index").alias("start_index"),
        F.col("start.seq").alias("start_seq"),
        F.col("start.liveness_lost_ms").alias("liveness_lost_ms"),
        F.col("start.master_last_alive_ms").alias("master_last_alive_ms"),
        F.col("start.prev_master_id").alias("old_master_id"),
        # why the controller started it, and how long the master was dead before the leader saw it
        # (null in logs written before these were recorded)
        F.col("start.election_reason").alias("reason"),
        F.col("start.deadline_missed_by_ms").alias("deadline_missed_by_ms"),
        (F.col("start.liveness_lost_ms") - F.col("start.master_last_alive_ms")).alias("detection_ms"),
        F.col("end.index").alias("end_index"),
        F.col("end.seq").alias("end_seq"),
        F.col("end.leader_ts_ms").alias("new_master_ts_ms"),
        F.col("end.master_id").alias("new_master_id"),
        "attempts",
        (F.col("end.leader_ts_ms") - F.col("start.master_last_alive_ms")).alias("duration_ms"),
        F.col("end").isNotNull().alias("resolved"),
        # measured across a wall-clock step back (rmqc.pipeline._clock_steps): not a duration
        (F.col("end.leader_ts_ms") < F.col("start.liveness_lost_ms")).alias("clock_stepped"),
    )


def flapping(timeline: DataFrame, failover_rows: DataFrame) -> DataFrame:
    """Groups ranked by their busiest hour of elections, then by total elections; those that
    never failed over last."""
    fleet = timeline.agg(F.min("leader_ts_ms").alias("lo"), F.max("leader_ts_ms").alias("hi"))
    hourly = (
        timeline.withColumn("ts", F.timestamp_millis("leader_ts_ms"))
        .groupBy(*GROUP_KEY, F.window("ts", FLAP_WINDOW))
        .agg(F.count(F.lit(1)).alias("in_window"))
        .groupBy(*GROUP_KEY)
        .agg(F.max("in_window").alias("max_elections_in_hour"))
    )
    totals = timeline.groupBy(*GROUP_KEY).agg(
        F.first("cluster_name", ignorenulls=True).alias("cluster_name"),
        F.count(F.lit(1)).alias("elections"),
        F.min("leader_ts_ms").alias("first_election_ms"),
        F.max("leader_ts_ms").alias("last_election_ms"),
    )
    failover_counts = failover_rows.groupBy(*GROUP_KEY).agg(F.count(F.lit(1)).alias("failovers"))
    # At least one hour, so a history of a few minutes does not inflate the rate.
    span_hours = F.greatest((F.col("hi") - F.col("lo")) / 3_600_000.0, F.lit(1.0))
    ranked = (
        totals.join(hourly, list(GROUP_KEY))
        .join(failover_counts, list(GROUP_KEY), "left")
        .crossJoin(fleet)
        .withColumn("failovers", F.coalesce("failovers", F.lit(0)))
        .withColumn("elections_per_hour", F.col("elections") / span_hours)
        .drop("lo", "hi")
    )
    # a group that never changed master (its only election the first) ranks after every group
    # that did, however busy that first hour was: it is not flapping
    order = Window.orderBy(
        F.desc(F.col("failovers") > 0), F.desc("max_elections_in_hour"), F.desc("elections"),
        *[F.asc(c) for c in GROUP_KEY]
    )
    return ranked.withColumn("rank", F.row_number().over(order))
