"""rmqc.pipeline: fleet-scale analysis of exported controller histories on Spark (`rmqc analyze`).

Only this package imports pyspark. Entry points:
- `make_spark_session(master)` then `run_pipeline(spark, inputs, out_dir, histories)` -> `Summary`;
- `rmqc.pipeline.synth` for seeded synthetic histories with planted violations.
"""

from ._errors import InputNotFound as InputNotFound
from ._errors import PipelineError as PipelineError
from ._errors import SparkJobFailed as SparkJobFailed
from ._errors import SynthBoundExceeded as SynthBoundExceeded
from ._errors import UnknownInputFormat as UnknownInputFormat
from ._invariants import BROKER_ID_REUSED as BROKER_ID_REUSED
from ._invariants import LOG_DIVERGENCE as LOG_DIVERGENCE
from ._invariants import MASTER_EPOCH_NOT_INCREASING as MASTER_EPOCH_NOT_INCREASING
from ._invariants import MASTER_OUTSIDE_SYNC_STATE_SET as MASTER_OUTSIDE_SYNC_STATE_SET
from ._invariants import SYNC_STATE_SET_EPOCH_JUMP as SYNC_STATE_SET_EPOCH_JUMP
from ._invariants import TWO_MASTERS_IN_EPOCH as TWO_MASTERS_IN_EPOCH
from ._invariants import VIOLATION_KINDS as VIOLATION_KINDS
from ._run import TABLES as TABLES
from ._run import FailoverStats as FailoverStats
from ._run import FlappingRecord as FlappingRecord
from ._run import LinearizabilityStats as LinearizabilityStats
from ._run import Summary as Summary
from ._run import ViolationRecord as ViolationRecord
from ._run import analyze as analyze
from ._run import run_pipeline as run_pipeline
from ._session import DEFAULT_MASTER as DEFAULT_MASTER
from ._session import make_spark_session as make_spark_session
from ._session import spark_session as spark_session
