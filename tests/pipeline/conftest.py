"""One local SparkSession for the whole test run (starting one costs seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from rmqc.pipeline import make_spark_session

    # Two shuffle partitions: the test histories are tiny, and every task costs scheduling time.
    session = make_spark_session("local[2]", app_name="rmqc-tests", driver_memory="1g", shuffle_partitions=2)
    try:
        yield session
    finally:
        session.stop()
