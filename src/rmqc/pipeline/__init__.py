"""rmqc.pipeline: fleet-scale analysis of exported controller histories on Spark (`rmqc analyze`).

Only this package imports pyspark. Entry points:
- `make_spark_session(master)` then `run_pipeline(spark, inputs, out_dir, histories)` -> `Summary`;
- `rmqc.pipeline.synth` for seeded synthetic histories with planted violations.
"""

from ._errors import (
    InputNotFound as InputNotFound,
    PipelineError as PipelineError,
    SparkJobFailed as SparkJobFailed,
    SynthBoundExceeded as SynthBoundExceeded,
    UnknownInputFormat as UnknownInputFormat,
)
from ._invariants import (
    BROKER_ID_REUSED as BROKER_ID_REUSED,
    LOG_DIVERGENCE as LOG_DIVERGENCE,
    MASTER_EPOCH_NOT_INCREASING as MASTER_EPOCH_NOT_INCREASING,
    MASTER_OUTSIDE_SYNC_STATE_SET as MASTER_OUTSIDE_SYNC_STATE_SET,
    SYNC_STATE_SET_EPOCH_JUMP as SYNC_STATE_SET_EPOCH_JUMP,
    TWO_MASTERS_IN_EPOCH as TWO_MASTERS_IN_EPOCH,
    VIOLATION_KINDS as VIOLATION_KINDS,
)
from ._run import (
    TABLES as TABLES,
    FailoverStats as FailoverStats,
    FlappingRecord as FlappingRecord,
    LinearizabilityStats as LinearizabilityStats,
    Summary as Summary,
    ViolationRecord as ViolationRecord,
    analyze as analyze,
    run_pipeline as run_pipeline,
)
from ._session import (
    DEFAULT_MASTER as DEFAULT_MASTER,
    make_spark_session as make_spark_session,
    spark_session as spark_session,
)
