"""`rmqc migrate from-java` through Typer's runner, on real nodes over real TCP: the dry run, the
import and its verification, the safe re-run, the refusal of a cluster that holds other groups,
a difference found, and usage and reachability errors with their exit codes.

rmqc answers the Java controller's requests (1005, 1006, 1004, 1012) byte for byte as the spec
says Java does, so here a second one-node rmqc cluster stands in as the source to migrate from;
the run against Apache RocketMQ's own controllers and brokers is tests/interop/test_migrate.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio
from typer.testing import CliRunner

from rmqc.cli.dev import LocalCluster
from rmqc.cli.main import app
from rmqc.client import ControllerClient
from rmqc.launcher import ServeCluster, free_ports, serve_nodes
from rmqc.testing.acl_accounts import ADMIN, BROKER, PLAIN_ACL_YML

C = "DefaultCluster"
A, B = "broker-a", "broker-b"
# The stand-in brokers are one client's connection: when it closes, they count as dead at once, and
# the source must not fail their group over meanwhile (it would, with no candidate, bump masterEpoch).
SOURCE_SETTINGS = ["elect_master_max_retry_count=0"]


def address(group: str, broker_id: int) -> str:
    return f"10.0.{ord(group[-1]) - 96}.{broker_id}:10911"


async def _build_source(controllers: str) -> None:
    """broker-a: ids 1-3, 2 elected, then 1 designated (masterEpoch 2), SyncStateSet {1, 2} at
    epoch 4, 3 not in it;
    broker-b: id 1 only, never elected."""
    async with ControllerClient(controllers.split(";"), max_retries=10) as client:
        for group, ids in ((A, (1, 2, 3)), (B, (1,))):
            for broker_id in ids:
                answer = await client.apply_broker_id(C, group, broker_id, f"{address(group, broker_id)};1")
                assert answer.code == 0, answer.remark
        assert (await client.elect_master(C, A, 2)).code == 0  # the first election takes the requester
        for broker_id in (1, 2):  # alive, so that the set can grow and 1 be designated
            await client.heartbeat(C, A, broker_id, address(A, broker_id), oneway=False)
        assert (await client.alter_sync_state_set(A, 2, 1, (1, 2), 1)).code == 0
        assert (await client.elect_master(C, A, 1, designate=True)).code == 0
        assert (await client.alter_sync_state_set(A, 1, 2, (1, 2), 3)).code == 0


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(1, data_dir=tmp_path_factory.mktemp("source"), settings=SOURCE_SETTINGS) as running:
        running.wait_for_leader()
        trio.run(_build_source, running.controllers)
        yield running


@pytest.fixture
def target(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(1, data_dir=tmp_path / "target") as running:
        running.wait_for_leader()
        yield running


def migrate(source: LocalCluster, target: LocalCluster, *extra: str) -> tuple[int, str, str]:
    args = ["migrate", "from-java", "--controllers", source.controllers, "--to", target.controllers,
            "--cluster", C, "-b", A, "-b", B, *extra]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def test_dry_run_shows_the_groups_and_writes_nothing(source: LocalCluster, target: LocalCluster) -> None:
    code, out, err = migrate(source, target, "--dry-run", "--json")
    assert code == 0, err
    plan = orjson.loads(out)
    assert (plan["dryRun"], plan["imported"]) == (True, False)
    a, b = plan["groups"]
    assert (a["brokerName"], a["masterBrokerId"], a["masterEpoch"], a["syncStateSet"], a["syncStateSetEpoch"]) == \
        (A, 1, 2, [1, 2], 4)
    assert a["replicas"] == {str(i): address(A, i) for i in (1, 2, 3)} and a["nextBrokerId"] == 4
    assert (b["masterBrokerId"], b["masterEpoch"], b["syncStateSet"], b["nextBrokerId"]) == (None, 0, [], 2)
    assert trio.run(_groups_of, target.controllers) == {}


async def _groups_of(controllers: str) -> dict:
    async with ControllerClient(controllers.split(";"), max_retries=10) as client:
        answer = await client.get_sync_state_data([A, B])
    return orjson.loads(answer.body)["replicasInfoTable"]


def test_import_verifies_a_rerun_changes_nothing_and_the_log_names_it(source: LocalCluster, tmp_path: Path) -> None:
    with LocalCluster(1, data_dir=tmp_path / "to") as target:
        target.wait_for_leader()
        code, out, err = migrate(source, target)
        assert code == 0, err
        assert "imported into rmqc as one replicated command" in out and "verified" in out
        imported = trio.run(_groups_of, target.controllers)
        a = imported[A]
        assert (a["masterBrokerId"], a["masterAddress"], a["masterEpoch"], a["syncStateSetEpoch"]) == \
            (1, address(A, 1), 2, 4)
        assert [r["brokerId"] for r in a["inSyncReplicas"]] == [1, 2]
        assert [r["brokerId"] for r in a["notInSyncReplicas"]] == [3]

        code, out, err = migrate(source, target, "--json")
        assert code == 0, err
        again = orjson.loads(out)
        assert (again["imported"], again["unchanged"], again["verified"], again["differences"]) == \
            (True, True, True, [])

        # the source moves on (a failover after the import): a re-run never overwrites
        trio.run(_elect_again, source.controllers)
        code, _, err = migrate(source, target)
        assert code == 1 and "rmqc refused the import" in err and "already holds 2 broker group" in err
    dump = CliRunner().invoke(app, ["log", "dump", str(tmp_path / "to" / "n0"), "--json"])
    assert dump.exit_code == 0, dump.stderr
    imports = [c for line in dump.stdout.splitlines() for c in orjson.loads(line)["commands"]
               if c["command"] == "import_groups"]
    assert len(imports) == 1 and "import 2 broker group(s) from java controller" in imports[0]["description"]
    assert "by anonymous from 127.0.0.1:" in imports[0]["description"]


async def _elect_again(controllers: str) -> None:
    async with ControllerClient(controllers.split(";"), max_retries=10) as client:
        await client.heartbeat(C, A, 2, address(A, 2), oneway=False)
        assert (await client.elect_master(C, A, 2, designate=True)).code == 0


def test_a_cluster_holding_other_groups_is_refused(source: LocalCluster, target: LocalCluster) -> None:
    async def register_elsewhere() -> None:
        async with ControllerClient(target.controllers.split(";"), max_retries=10) as client:
            assert (await client.apply_broker_id(C, "broker-z", 1, "10.9.9.9:10911;1")).code == 0

    trio.run(register_elsewhere)
    code, _, err = migrate(source, target)
    assert code == 1 and "rmqc refused the import" in err and "already holds 1 broker group" in err


def test_usage_and_unreachable_exit_codes(source: LocalCluster) -> None:
    (port,) = free_ports(1)
    runner = CliRunner()
    base = ["migrate", "from-java", "--controllers", source.controllers, "--to", f"127.0.0.1:{port}"]
    result = runner.invoke(app, base)
    assert result.exit_code == 2 and "--namesrv" in result.stderr
    result = runner.invoke(app, [*base, "-b", A])
    assert result.exit_code == 2 and "--broker-name needs --cluster" in result.stderr
    result = runner.invoke(app, [*base, "-b", A, "--cluster", C, "--timeout-ms", "1500"])
    assert result.exit_code == 3 and "no answer" in result.stderr
    result = runner.invoke(app, [*base, "-b", "no-such-group", "--cluster", C, "--dry-run"])
    assert result.exit_code == 1 and "has no broker group no-such-group" in result.stderr


def test_the_import_goes_through_rmqc_acl_as_an_admin_request(source: LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    secured = ServeCluster(serve_nodes(tmp_path / "acl", free_ports(1), settings=(
        "acl_enabled=true", f"acl_file={tmp_path / 'plain_acl.yml'}")))
    secured.start_blocking()
    try:
        base = ["migrate", "from-java", "--controllers", source.controllers, "--to", secured.controllers,
                "--cluster", C, "-b", A]
        result = CliRunner().invoke(app, [*base, "--timeout-ms", "2000"])
        # unsigned, not even the leader is named (1005 answers 16 NO_PERMISSION): the client finds none
        assert result.exit_code == 3 and "names no leader (code 16)" in result.stderr, result.stderr
        broker_keys = ["--access-key", BROKER.access_key, "--secret-key", BROKER.secret_key]
        result = CliRunner().invoke(app, [*base, *broker_keys])
        assert result.exit_code == 1 and "not an admin" in result.stderr
        result = CliRunner().invoke(app, base, env={"RMQC_ACCESS_KEY": ADMIN.access_key,
                                                    "RMQC_SECRET_KEY": ADMIN.secret_key})
        assert result.exit_code == 0, result.stderr
        assert "verified" in result.stdout
    finally:
        secured.stop_blocking()
