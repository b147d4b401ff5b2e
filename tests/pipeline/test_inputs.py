"""Finding input files (no Spark needed): formats by extension, directories, named errors."""

from __future__ import annotations

import os
import sys

import pytest

from rmqc.pipeline import InputNotFound, UnknownInputFormat
from rmqc.pipeline._load import split_by_format


def test_files_and_directories_split_by_format(tmp_path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "b.ndjson").write_text("{}\n")
    nested = tmp_path / "spark-out"
    nested.mkdir()
    (nested / "part-0.parquet").write_bytes(b"x")
    (nested / "_SUCCESS").write_text("")
    (nested / ".part-0.parquet.crc").write_text("")
    found = split_by_format([tmp_path / "a.jsonl", tmp_path / "b.ndjson", nested])
    assert found == {
        "json": [str(tmp_path / "a.jsonl"), str(tmp_path / "b.ndjson")],
        "parquet": [str(nested / "part-0.parquet")],
    }


def test_missing_path_is_named(tmp_path):
    with pytest.raises(InputNotFound, match="nowhere"):
        split_by_format([tmp_path / "nowhere.jsonl"])


def test_directory_without_histories_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputNotFound):
        split_by_format([tmp_path])


def test_unknown_extension_is_named(tmp_path):
    (tmp_path / "history.csv").write_text("a,b\n")
    with pytest.raises(UnknownInputFormat, match=r"history.csv"):
        split_by_format([tmp_path / "history.csv"])


def test_local_runs_use_this_interpreter_cluster_runs_respect_the_setting(monkeypatch):
    from rmqc.pipeline._session import _prepare_environment

    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/executors/python")
    _prepare_environment("spark://spark-master:7077")
    assert sys.executable != "/opt/executors/python"
    assert os.environ["PYSPARK_PYTHON"] == "/opt/executors/python"
    _prepare_environment("local[2]")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
