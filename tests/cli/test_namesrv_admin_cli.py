"""`rmqc admin kv` and `rmqc admin topic` through Typer's runner against a real local 3-node
cluster (no brokers: the topic commands' refusals; the interop tests create topics on Java
brokers): output, --json and exit codes."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from typer.testing import CliRunner

from rmqc.cli.dev import LocalCluster
from rmqc.cli.main import app


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(3, data_dir=tmp_path_factory.mktemp("cluster")) as running:
        running.wait_for_leader()
        yield running


def admin(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["admin", *args])
    return result.exit_code, result.stdout, result.stderr


def test_kv_put_is_read_back_from_every_node_then_deleted(cluster: LocalCluster) -> None:
    code, out, err = admin("kv", "put", "ns", "k1", "v1", "-a", cluster.controllers, "--json")
    assert code == 0, err
    assert orjson.loads(out) == {"namespace": "ns", "key": "k1", "value": "v1"}
    for address in cluster.addresses:  # linearizable by default: a follower sees the put at once
        code, out, err = admin("kv", "get", "ns", "k1", "-a", cluster.controllers, "--node", address, "--json")
        assert code == 0, err
        assert orjson.loads(out)["value"] == "v1"
    code, out, _ = admin("kv", "list", "ns", "-a", cluster.controllers)
    assert code == 0 and "k1" in out and "v1" in out
    code, out, err = admin("kv", "delete", "ns", "k1", "-a", cluster.controllers)
    assert code == 0 and "deleted ns/k1" in out, err
    code, _, err = admin("kv", "get", "ns", "k1", "-a", cluster.controllers, "--node", cluster.addresses[2])
    assert code == 1 and "No config item" in err
    code, _, err = admin("kv", "put", "ns", "big", "x" * 70_000, "-a", cluster.controllers)
    assert code == 1 and "exceeds the bound of 65536" in err


def test_topic_commands_refuse_clearly_without_brokers(cluster: LocalCluster) -> None:
    code, out, err = admin("topic", "list", "-a", cluster.controllers, "--json")
    assert code == 0 and orjson.loads(out) == {"topics": []}, err
    code, _, err = admin("topic", "describe", "Nope", "-a", cluster.controllers)
    assert code == 1 and "No topic route info" in err
    code, _, err = admin("topic", "create", "T", "--cluster", "NoCluster", "-a", cluster.controllers)
    assert code == 1 and "has no master broker registered" in err
    code, _, err = admin("topic", "update", "T", "--cluster", "NoCluster", "-a", cluster.controllers)
    assert code == 1 and "does not exist" in err
    code, _, err = admin("topic", "create", "T", "--cluster", "C", "-r", "0", "-a", cluster.controllers)
    assert code == 2 and "queue numbers" in err
