"""Wall-clock steps in a history.

Every command carries the wall time its leader stamped (`leader_ts_ms`, and `liveness_lost_ms` on
controller elections), for people and for durations; the log index orders the history. So every
analysis here orders by (index, seq), and a stamp that goes backwards changes no order; what it
can change is a duration computed from two stamps, so such steps are flagged.

Within one term every stamp comes from one leader, in the order it decided (it proposes as it
decides), so a stamp below its predecessor in the same term means that leader's wall clock stepped
back (an NTP step). Across terms stamps come from different clocks and differ by their skew,
which is not a step of anything and is not flagged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window, functions as F

CLOCK_STEP_COLUMNS = ("controller_cluster", "term", "prev_index", "prev_seq", "prev_leader_ts_ms", "index", "seq",
                      "leader_ts_ms", "step_ms")


def clock_steps(entries: DataFrame) -> DataFrame:
    """One row per entry whose stamp is below the previous one of its term: `step_ms` (negative)."""
    stamped = entries.filter(F.col("leader_ts_ms").isNotNull()).select(
        "controller_cluster", "term", "index", "seq", "leader_ts_ms")
    window = Window.partitionBy("controller_cluster", "term").orderBy("index", "seq")
    with_previous = stamped.select(
        "*",
        F.lag("index").over(window).alias("prev_index"),
        F.lag("seq").over(window).alias("prev_seq"),
        F.lag("leader_ts_ms").over(window).alias("prev_leader_ts_ms"),
    )
    steps = with_previous.filter(F.col("leader_ts_ms") < F.col("prev_leader_ts_ms"))
    return steps.withColumn("step_ms", F.col("leader_ts_ms") - F.col("prev_leader_ts_ms")).select(*CLOCK_STEP_COLUMNS)
