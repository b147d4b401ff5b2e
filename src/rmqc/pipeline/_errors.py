"""Errors of the history pipeline, under the one rmqc hierarchy."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, ConfigError, RmqcError


class PipelineError(RmqcError):
    """The pipeline could not run over the given inputs."""


class InputNotFound(PipelineError, ConfigError):
    """An input path does not exist or holds no history file."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no history file at {path!r} (expected .jsonl/.json/.ndjson/.parquet)")
        self.path = path


class UnknownInputFormat(PipelineError, ConfigError):
    """An input file's extension names no format the pipeline reads."""

    def __init__(self, path: str) -> None:
        super().__init__(f"cannot tell the format of {path!r}: use .jsonl, .json, .ndjson or .parquet")
        self.path = path


class SynthBoundExceeded(PipelineError, BoundExceeded):
    """A synthetic-history parameter is beyond what the generator supports."""


class SparkJobFailed(PipelineError):
    """Spark refused the job (typically an unreadable file or a malformed line); the message is
    Spark's first line, so the CLI can say it without a Java traceback."""
