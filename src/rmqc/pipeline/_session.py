"""Creating the Spark session the pipeline runs on (local by default, any cluster by `master`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# Small on purpose: local mode has at most a few cores, and 200 (Spark's default) tiny shuffle
# tasks cost more in scheduling than they save.
DEFAULT_SHUFFLE_PARTITIONS = 4
DEFAULT_DRIVER_MEMORY = "4g"


def _prepare_environment(master: str) -> None:
    """Local workers must run this interpreter (it has rmqc and pandas) and bind loopback only.

    On a real cluster an explicit PYSPARK_PYTHON (the executors' interpreter) is respected.
    """
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")


def make_spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "rmqc-analyze",
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Start (or reuse) a Spark session; the UI stays off and logs are quiet."""
    _prepare_environment(master)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # before the JVM starts (setLogLevel below comes after its start-up warnings)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES}")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def spark_session(master: str = DEFAULT_MASTER, **options: Any) -> Iterator[SparkSession]:
    """A session for one run; stopped afterwards only if this call started it (a caller's or a test
    run's session is reused and left running)."""
    _prepare_environment(master)
    from pyspark.sql import SparkSession

    already_running = SparkSession.getActiveSession() is not None
    spark = make_spark_session(master, **options)
    try:
        yield spark
    finally:
        if not already_running:
            spark.stop()
