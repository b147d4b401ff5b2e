"""One local SparkSession for the whole test run (starting one costs seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from rmqc.pipeline import make_spark_session

    session = make_spark_session("local[2]", app_name="rmqc-tests", driver_memory="1g")
    try:
        yield session
    finally:
        session.stop()
