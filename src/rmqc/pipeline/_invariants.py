"""Fleet-wide invariant checks over the applied history (spec sections 4 and 5).

Every check yields rows of one shape (VIOLATION_COLUMNS): the kind, the group, the entry that shows
the violation (`index`, `seq`) and `evidence`, the (controller_cluster, index, seq) of every entry
involved, so an operator can look each one up with `rmqc log dump`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, functions as F

from ._group_log import ALTER, APPLY_ID, CLEAN, ELECT, removes_group

MASTER_EPOCH_NOT_INCREASING = "master_epoch_not_increasing"
TWO_MASTERS_IN_EPOCH = "two_masters_in_epoch"
MASTER_OUTSIDE_SYNC_STATE_SET = "master_outside_sync_state_set"
SYNC_STATE_SET_EPOCH_JUMP = "sync_state_set_epoch_jump"
BROKER_ID_REUSED = "broker_id_reused"
LOG_DIVERGENCE = "log_divergence"

VIOLATION_KINDS: tuple[str, ...] = (
    MASTER_EPOCH_NOT_INCREASING,
    TWO_MASTERS_IN_EPOCH,
    MASTER_OUTSIDE_SYNC_STATE_SET,
    SYNC_STATE_SET_EPOCH_JUMP,
    BROKER_ID_REUSED,
    LOG_DIVERGENCE,
)

VIOLATION_COLUMNS: tuple[str, ...] = (
    "kind", "controller_cluster", "cluster_name", "broker_name", "index", "seq", "leader_ts_ms",
    "detail", "evidence",
)  # fmt: skip


def entry_ref(cluster: Column | str, index: Column | str, seq: Column | str) -> Column:
    return F.struct(
        F.col(cluster).alias("controller_cluster") if isinstance(cluster, str) else cluster,
        (F.col(index) if isinstance(index, str) else index).alias("index"),
        (F.col(seq) if isinstance(seq, str) else seq).alias("seq"),
    )


def _row_and_predecessor() -> Column:
    """Evidence: the predecessor (when there is one) and the row itself, in log order."""
    this = entry_ref("controller_cluster", "index", "seq")
    prev = entry_ref("controller_cluster", "prev_index", "prev_seq")
    return F.when(F.col("prev_index").isNull(), F.array(this)).otherwise(F.array(prev, this))


def _shape(rows: DataFrame, kind: str, detail: Column, evidence: Column) -> DataFrame:
    return rows.select(
        F.lit(kind).alias("kind"),
        "controller_cluster",
        "cluster_name",
        "broker_name",
        "index",
        "seq",
        "leader_ts_ms",
        detail.alias("detail"),
        evidence.alias("evidence"),
    )


def master_epoch_not_increasing(group_log: DataFrame) -> DataFrame:
    """An election must raise masterEpoch; no other command may lower it."""
    epoch, prev = F.col("master_epoch"), F.col("prev_master_epoch")
    is_elect = F.col("command") == ELECT
    broken = F.when(is_elect, epoch <= prev).otherwise(epoch < prev)
    rows = group_log.filter(prev.isNotNull() & epoch.isNotNull() & ~removes_group() & broken)
    detail = F.format_string("%s left masterEpoch %d after %d", F.col("command"), epoch, prev)
    return _shape(rows, MASTER_EPOCH_NOT_INCREASING, detail, _row_and_predecessor())


def two_masters_in_epoch(group_log: DataFrame) -> DataFrame:
    """At most one master per (group, masterEpoch): elections that chose different masters."""
    elections = group_log.filter((F.col("command") == ELECT) & F.col("elected"))
    order = F.struct("index", "seq")
    per_epoch = elections.groupBy(
        "controller_cluster", "broker_name", "incarnation", "master_epoch"
    ).agg(
        F.countDistinct("new_master_id").alias("masters"),
        F.array_sort(F.collect_set("new_master_id")).alias("master_ids"),
        F.max_by(F.struct("index", "seq", "leader_ts_ms", "cluster_name"), order).alias("last"),
        F.array_sort(F.collect_list(entry_ref("controller_cluster", "index", "seq"))).alias(
            "evidence"
        ),
    )
    rows = per_epoch.filter(F.col("masters") > 1).select(
        "controller_cluster",
        "broker_name",
        "master_epoch",
        "master_ids",
        "evidence",
        "last.*",
    )
    detail = F.format_string(
        "masterEpoch %d has masters %s", F.col("master_epoch"), F.array_join("master_ids", ",")
    )
    return _shape(rows, TWO_MASTERS_IN_EPOCH, detail, F.col("evidence"))


def master_outside_sync_state_set(group_log: DataFrame) -> DataFrame:
    """An elected master came from the previous SyncStateSet unless unclean election was on.

    The first election of a group (masterEpoch was 0) takes the requesting broker unconditionally
    (spec 3.7 step 2), so it is exempt. When the previous epoch is unknown (the data starts mid-way),
    masterEpoch 1 identifies that first election.
    """
    prev = F.col("prev_master_epoch")
    first_election = F.when(prev.isNull(), F.col("master_epoch") <= 1).otherwise(prev == 0)
    rows = group_log.filter(
        (F.col("command") == ELECT)
        & F.col("elected")
        & ~F.coalesce(F.col("unclean_enabled"), F.lit(False))
        & F.col("prev_sync_state_set").isNotNull()
        & ~first_election
        & ~F.array_contains("prev_sync_state_set", F.col("new_master_id"))
    )
    detail = F.format_string(
        "master %d elected at masterEpoch %d from outside syncStateSet [%s] with unclean election off",
        F.col("new_master_id"),
        F.col("master_epoch"),
        F.array_join("prev_sync_state_set", ","),
    )
    return _shape(rows, MASTER_OUTSIDE_SYNC_STATE_SET, detail, F.array(entry_ref("controller_cluster", "index", "seq")))


def _sync_state_set_epoch_step() -> Column:
    """How much a command moves syncStateSetEpoch (spec 4.2): alter and successful elect, one each."""
    changes = (F.col("command") == ALTER) | ((F.col("command") == ELECT) & F.col("elected"))
    return F.when(changes, F.lit(1)).otherwise(F.lit(0))


def sync_state_set_epoch_jump(group_log: DataFrame) -> DataFrame:
    epoch, prev = F.col("sync_state_set_epoch"), F.col("prev_sync_state_set_epoch")
    expected = prev + _sync_state_set_epoch_step()
    rows = group_log.filter(
        prev.isNotNull() & epoch.isNotNull() & ~removes_group() & (epoch != expected)
    )
    detail = F.format_string(
        "%s moved syncStateSetEpoch %d -> %d (expected %d)", F.col("command"), prev, epoch, expected
    )
    return _shape(rows, SYNC_STATE_SET_EPOCH_JUMP, detail, _row_and_predecessor())


def broker_id_events(group_log: DataFrame) -> DataFrame:
    """One row per (id, apply or partial clean), with the previous event of the same id.

    Keyed by incarnation: a whole-group clean legitimately restarts ids at 1 (spec 4.1).
    """
    base = ("controller_cluster", "cluster_name", "broker_name", "incarnation", "index", "seq", "leader_ts_ms")
    applies = group_log.filter(F.col("command") == APPLY_ID).select(
        *base,
        F.col("broker_id"),
        F.lit("apply").alias("event"),
        "register_check_code",
    )
    cleans = group_log.filter((F.col("command") == CLEAN) & ~removes_group()).select(
        *base,
        F.explode("clean_ids").alias("broker_id"),
        F.lit("clean").alias("event"),
        F.lit(None).cast("string").alias("register_check_code"),
    )
    window = Window.partitionBy(
        "controller_cluster", "broker_name", "incarnation", "broker_id"
    ).orderBy("index", "seq")
    events = applies.unionByName(cleans)
    previous = [F.lag(c).over(window).alias(f"prev_{c}") for c in ("event", "register_check_code", "index", "seq")]
    return events.select("*", *previous)


def broker_id_reused(id_events: DataFrame) -> DataFrame:
    """An id applied again after a clean, or applied again with a different register check code."""
    is_apply = F.col("event") == "apply"
    after_clean = F.col("prev_event") == "clean"
    other_code = (F.col("prev_event") == "apply") & ~F.col("register_check_code").eqNullSafe(
        F.col("prev_register_check_code")
    )
    rows = id_events.filter(is_apply & (after_clean | other_code))
    detail = F.when(
        after_clean, F.format_string("broker id %d applied again after being cleaned", F.col("broker_id"))
    ).otherwise(
        F.format_string(
            "broker id %d applied with check code %s after %s",
            F.col("broker_id"),
            F.col("register_check_code"),
            F.col("prev_register_check_code"),
        )
    )
    evidence = F.array(
        entry_ref("controller_cluster", "prev_index", "prev_seq"),
        entry_ref("controller_cluster", "index", "seq"),
    )
    return _shape(rows, BROKER_ID_REUSED, detail, evidence)


def log_divergence(diverging: DataFrame) -> DataFrame:
    detail = F.format_string(
        "nodes %s hold %d different versions of this entry",
        F.array_join("nodes", ","),
        F.col("versions"),
    )
    evidence = F.array(entry_ref("controller_cluster", "index", "seq"))
    return _shape(diverging, LOG_DIVERGENCE, detail, evidence)


def find_violations(
    group_log: DataFrame, id_events: DataFrame, diverging: DataFrame | None
) -> DataFrame:
    """Every violation of every kind, in one frame of VIOLATION_COLUMNS."""
    checks = [
        master_epoch_not_increasing(group_log),
        two_masters_in_epoch(group_log),
        master_outside_sync_state_set(group_log),
        sync_state_set_epoch_jump(group_log),
        broker_id_reused(id_events),
    ]
    if diverging is not None:
        checks.append(log_divergence(diverging))
    combined = checks[0]
    for frame in checks[1:]:
        combined = combined.unionByName(frame)
    return combined
