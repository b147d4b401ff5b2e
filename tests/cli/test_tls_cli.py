"""The client commands against a real `rmqc serve` with tls_mode enforcing and client certificates:
`rmqc status` and `rmqc admin` connect with --tls-ca/--tls-cert/--tls-key (or RMQC_TLS_*), `rmqc sim
brokers` (its brokers) too; a plain connection is refused."""

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
from rmqc.testing.certs import Certs, make_certs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[str]:
    cluster = ServeCluster(serve_nodes(tmp_path_factory.mktemp("tls-node"), free_ports(1), settings=(
        "tls_mode=enforcing", "tls_auth_client=true", f"tls_cert_path={certs.node_cert}",
        f"tls_key_path={certs.node_key}", f"tls_trust_cert_path={certs.ca}")))
    cluster.start_blocking()
    try:
        wait_serving_as_leader(cluster.controllers, tls_flags(certs))
        yield cluster.controllers
    finally:
        cluster.stop_blocking()


def tls_flags(certs: Certs) -> list[str]:
    return ["--tls-ca", str(certs.ca), "--tls-cert", str(certs.client_cert), "--tls-key", str(certs.client_key)]


def tls_env(certs: Certs) -> dict[str, str]:
    return {"RMQC_TLS_CA": str(certs.ca), "RMQC_TLS_CERT": str(certs.client_cert),
            "RMQC_TLS_KEY": str(certs.client_key)}


def test_status_and_admin_over_tls(node: str, certs: Certs) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["status", "-a", node, "--json", *tls_flags(certs)])
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)[0]["status"]["role"] == "leader"
    result = runner.invoke(app, ["admin", "metadata", "-a", node, "--json"], env=tls_env(certs))
    assert result.exit_code == 0, result.stderr
    assert runner.invoke(app, ["admin", "metadata", "-a", node]).exit_code == 3  # plain: refused
    result = runner.invoke(app, ["status", "-a", node, "--tls-ca", "/nonexistent.pem"])
    assert result.exit_code == 2 and "--tls-ca/--tls-cert/--tls-key" in result.stderr


def test_simulated_brokers_over_tls(node: str, certs: Certs, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in tls_env(certs).items():
        monkeypatch.setenv(name, value)
    sim = SimProcess(node, tmp_path, "--groups", "1", "--replicas", "2", "--seed", "5")
    try:
        sim.wait_for(lambda line: converged_summary(line, 2), SIM_CONVERGE_S, "2 brokers converged over TLS")
    finally:
        sim.quit()
