"""The client commands against a real `rmqc serve` with acl_enabled: `rmqc admin`, `rmqc status` and
`rmqc sim brokers` sign with --access-key/--secret-key or RMQC_ACCESS_KEY/RMQC_SECRET_KEY; unsigned
or under-privileged calls are refused with the reason (exit 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from cli_helpers import wait_serving_as_leader
from test_sim_process import SIM_CONVERGE_S, SimProcess, converged_summary
from typer.testing import CliRunner

from rmqc.cli.main import app
from rmqc.launcher import ServeCluster, free_ports, serve_nodes
from rmqc.testing.acl_accounts import ADMIN, BROKER as BROKER_KEYS, PLAIN_ACL_YML as ACL

pytestmark = pytest.mark.slow
BROKER = ("--access-key", BROKER_KEYS.access_key, "--secret-key", BROKER_KEYS.secret_key)
ADMIN_ENV = {"RMQC_ACCESS_KEY": ADMIN.access_key, "RMQC_SECRET_KEY": ADMIN.secret_key}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("acl-node")
    (root / "plain_acl.yml").write_text(ACL)
    cluster = ServeCluster(serve_nodes(root, free_ports(1), settings=(
        "acl_enabled=true", f"acl_file={root / 'plain_acl.yml'}")))
    cluster.start_blocking()
    try:
        wait_serving_as_leader(cluster.controllers, env=ADMIN_ENV)  # its metadata names it leader from then on
        yield cluster.controllers
    finally:
        cluster.stop_blocking()


def rmqc(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_admin_signs_with_flags_or_environment_and_rights_hold(node: str) -> None:
    code, _, err = rmqc("admin", "metadata", "-a", node)
    assert code == 1 and "NO_PERMISSION: address not allowed" in err
    assert "what to do: the nodes require signed requests: sign with --access-key and --secret-key" in err
    assert "configBlackList" not in err
    code, out, err = rmqc("admin", *BROKER, "metadata", "-a", node, "--json")
    assert code == 0, err
    assert orjson.loads(out)["extFields"]["controllerLeaderAddress"] == node
    code, _, err = rmqc("admin", *BROKER, "config", "set", "-a", node, "scanInactiveMasterInterval=4000")
    assert code == 1 and "not an admin" in err
    assert "sign with an account that has admin: true" in err and "configBlackList" not in err
    wrong_secret = ("--access-key", BROKER_KEYS.access_key, "--secret-key", "wrong")
    code, _, err = rmqc("admin", *wrong_secret, "metadata", "-a", node)
    assert code == 1 and "bad signature" in err and "check the secret key" in err
    code, out, err = rmqc("admin", "config", "set", "-a", node, "scanInactiveMasterInterval=4000", env=ADMIN_ENV)
    assert code == 0, err
    code, _, err = rmqc("admin", "--access-key", "broker-key", "metadata", "-a", node)
    assert code == 2 and "--access-key and --secret-key go together" in err


def test_status_signs(node: str) -> None:
    code, out, err = rmqc("status", "-a", node, "--json", env=ADMIN_ENV)
    assert code == 0, err
    assert orjson.loads(out)[0]["status"]["role"] == "leader"
    code, _, err = rmqc("status", "-a", node, "--json")
    assert code == 1  # every request refused: no status from the node, which runs (not 3)
    assert "address not allowed" in err and "sign with --access-key and --secret-key" in err
    assert "check that these nodes run" not in err


def test_simulated_brokers_sign_and_converge(node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQC_ACCESS_KEY", "broker-key")
    monkeypatch.setenv("RMQC_SECRET_KEY", "broker-secret")
    sim = SimProcess(node, tmp_path, "--groups", "1", "--replicas", "2", "--seed", "3")
    try:
        sim.wait_for(lambda line: converged_summary(line, 2), SIM_CONVERGE_S, "2 signed brokers converged")
    finally:
        sim.quit()
