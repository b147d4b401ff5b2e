"""`rmqc admin` through Typer's runner against a real local 3-node cluster with simulated brokers:
output and exit codes (0 ok, 1 the controller said no, 2 usage, 3 unreachable)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from test_sim_process import SIM_CONVERGE_S, SimProcess, converged_summary
from typer.testing import CliRunner

from rmqc.cli.dev import LocalCluster
from rmqc.cli.main import app
from rmqc.fsm import UpdateControllerConfig, decode_commands
from rmqc.raft import EntryType
from rmqc.storage import LmdbStorage

GROUP = "broker-0000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(3, data_dir=tmp_path_factory.mktemp("cluster")) as running:
        running.wait_for_leader()
        yield running


@pytest.fixture(scope="module")
def brokers(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    sim = SimProcess(cluster.controllers, tmp_path_factory.mktemp("sim"), "--groups", "2", "--seed", "4")
    try:
        sim.wait_for(lambda line: converged_summary(line, 6), SIM_CONVERGE_S, "a converged summary")
        sim.wait_full_group(GROUP, 3)
        yield sim
    finally:
        sim.quit()


def admin(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["admin", *args])
    return result.exit_code, result.stdout, result.stderr


def test_metadata_from_every_node_names_one_leader(cluster: LocalCluster) -> None:
    leaders = set()
    answers = []
    for address in cluster.addresses:
        code, out, err = admin("metadata", "-a", cluster.controllers, "--node", address, "--json")
        assert code == 0, err
        answers.append(orjson.loads(out)["extFields"])
        leaders.add(answers[-1]["controllerLeaderAddress"])
    assert len(leaders) == 1 and leaders <= set(cluster.addresses)
    assert sum(a["isLeader"] == "true" for a in answers) == 1
    code, out, _ = admin("metadata", "-a", cluster.controllers)
    assert code == 0 and "leader address" in out and f"n1:{cluster.addresses[1]}" in out


def test_sync_state_set_shows_master_and_live_replicas(cluster: LocalCluster, brokers: SimProcess) -> None:
    code, out, err = admin("sync-state-set", "-a", cluster.controllers, GROUP, "--json")
    assert code == 0, err
    info = orjson.loads(out)["replicasInfoTable"][GROUP]
    assert len(info["inSyncReplicas"]) == 3 and all(r["alive"] for r in info["inSyncReplicas"])
    assert info["masterBrokerId"] in {r["brokerId"] for r in info["inSyncReplicas"]}
    code, out, _ = admin("sync-state-set", "-a", cluster.controllers, GROUP)
    assert code == 0 and GROUP in out and "master" in out and "masterEpoch" in out
    for level in ("stale", "lease", "linearizable"):  # passed through to the client, served by a follower too
        code, out, err = admin("sync-state-set", "-a", cluster.controllers, "--node", cluster.addresses[1],
                               "--consistency", level, GROUP, "--json")
        assert code == 0, f"{level}: {err}"
        assert orjson.loads(out)["replicasInfoTable"][GROUP]["masterBrokerId"] == info["masterBrokerId"]


def test_sync_state_set_of_an_unknown_group_exits_1(cluster: LocalCluster) -> None:
    code, _, err = admin("sync-state-set", "-a", cluster.controllers, "no-such-group")
    assert code == 1 and "unknown broker group" in err and "what to do" in err
    code, out, err = admin("sync-state-set", "-a", cluster.controllers, "no-such-group", "--json")  # exited 0
    assert code == 1 and "unknown broker group" in err
    assert orjson.loads(out) == {"replicasInfoTable": {}, "asked": ["no-such-group"], "unknown": ["no-such-group"]}


def test_elect_master_moves_the_master_and_brokers_follow(cluster: LocalCluster, brokers: SimProcess) -> None:
    beliefs = brokers.wait_full_group(GROUP, 3)
    master = next(b for b in beliefs if b["role"] == "MASTER")
    target = next(b["brokerId"] for b in beliefs if b["brokerId"] != master["brokerId"])
    code, out, err = admin("elect-master", "-a", cluster.controllers, "-n", GROUP, "-b", str(target))
    assert code == 0, err
    assert f"new master of {GROUP}" in out and str(target) in out
    after = brokers.wait_full_group(GROUP, 1, past_epoch=master["masterEpoch"])  # its set may have grown again
    assert {b["masterBrokerId"] for b in after} == {target}
    assert all(b["masterEpoch"] == master["masterEpoch"] + 1 for b in after)
    code, _, err = admin("elect-master", "-a", cluster.controllers, "-n", GROUP, "-b", str(target))
    assert code == 1 and "CONTROLLER_MASTER_STILL_EXIST (2011)" in err and "already the master" in err


def test_clean_broker_refuses_live_brokers(cluster: LocalCluster, brokers: SimProcess) -> None:
    code, _, err = admin("clean-broker", "-a", cluster.controllers, "-n", "broker-0001")
    assert code == 1 and "2009" in err and "--clean-living" in err
    code, _, err = admin("clean-broker", "-a", cluster.controllers, "-n", "broker-0001", "-b", "1;x")
    assert code == 2 and "not a list of ids" in err


def test_config_get_and_set_on_every_node(cluster: LocalCluster) -> None:
    code, out, err = admin("config", "set", "-a", cluster.controllers, "electMasterMaxRetryCount=4")
    assert code == 0, err
    # one request, one replicated change (it was one 1009 per node given: three audited changes)
    assert out.count("updated on every node") == 1 and "electMasterMaxRetryCount : 4" in out
    wanted = {address: {"electMasterMaxRetryCount": "4"} for address in cluster.addresses}
    deadline = time.monotonic() + 5.0
    while True:  # the followers apply it with the next heartbeat after the leader's answer (50 ms)
        code, out, err = admin("config", "get", "-a", cluster.controllers, "-k", "electMasterMaxRetryCount", "--json")
        assert code == 0, err
        if orjson.loads(out) == wanted or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert orjson.loads(out) == wanted
    assert config_changes_in_the_log(cluster) == [(("electMasterMaxRetryCount", "4"),)]
    code, out, err = admin("config", "set", "-a", cluster.controllers, "configStorePath=/elsewhere")
    assert code == 1 and "NO_PERMISSION (16)" in err and "configBlackList" in err
    assert "configStorePath : " not in out


def config_changes_in_the_log(cluster: LocalCluster) -> list[tuple[tuple[str, str], ...]]:
    """The settings of every 1009 in the first node's log (LMDB lets a reader in beside the node)."""
    with LmdbStorage(cluster.nodes[0].data_dir, readonly=True) as storage:
        return [command.properties for entry in storage.iter_entries()
                if entry.type is EntryType.NORMAL and entry.data
                for command in decode_commands(entry.data) if isinstance(command, UpdateControllerConfig)]


def test_config_keys_by_serve_name_and_near_misses(cluster: LocalCluster) -> None:
    """`serve --set` names (snake_case) work in `config get/set` too; an option fixed while the node
    runs, or a near miss of one, exits 2 saying so (both printed an empty table, exit 0)."""
    code, out, err = admin("config", "get", "-a", cluster.controllers, "-k", "enable_elect_unclean_master", "--json")
    assert code == 0, err
    assert orjson.loads(out) == {address: {"enableElectUncleanMaster": "false"} for address in cluster.addresses}
    for key in ("tick_ms", "tickMs"):
        code, out, err = admin("config", "get", "-a", cluster.controllers, "-k", key)
        assert code == 2 and "'tick_ms' is an option of `rmqc serve` that has no run-time key" in err, err
        assert "rmqc serve --set tick_ms=VALUE" in err and out == ""
    code, out, err = admin("config", "set", "-a", cluster.controllers, "tickms=20")
    assert code == 2 and "unknown key 'tickms' (did you mean 'tick_ms'?)" in err and out == ""
    code, out, err = admin("config", "get", "-a", cluster.controllers, "-k", "electMasterMaxRetryCont")
    assert code == 2 and "did you mean 'electMasterMaxRetryCount'?" in err
    code, out, err = admin("config", "get", "-a", cluster.controllers, "--json")
    ports = {address: values["listenPort"] for address, values in orjson.loads(out).items()}
    assert ports == {address: address.rsplit(":", 1)[1] for address in cluster.addresses}  # not 9878 thrice


@pytest.mark.parametrize(("setting", "remark"), [
    ("noSuchKey=1", "unknown key 'noSuchKey'"),
    ("enableElectUnclenMaster=true", "did you mean 'enableElectUncleanMaster'?"),
    ("enableElectUncleanMaster=maybe", "bad value for enableElectUncleanMaster: 'maybe' (expected true or false)"),
    ("electMasterMaxRetryCount=lots", "bad value for electMasterMaxRetryCount: 'lots' (expected a whole number)"),
    ("electmastermaxretrycount=1", "did you mean 'electMasterMaxRetryCount'?"),
])
def test_config_set_refuses_unknown_keys_and_bad_values(cluster: LocalCluster, setting: str, remark: str) -> None:
    code, out, err = admin("config", "set", "-a", cluster.controllers, setting)
    assert code == 1 and "updated" not in out
    assert "INVALID_PARAMETER (29)" in err and remark in err
    assert "invalid literal" not in err
    assert out == ""  # the refusal once, on stderr (it was printed on stdout too)
    assert "rmqc admin config get` lists every key" in err  # not "the controller failed internally"
    key = setting.partition("=")[0]
    code, out, _ = admin("config", "get", "-a", cluster.controllers, "--json")
    assert code == 0 and all(values.get("enableElectUncleanMaster") == "false" and key not in values
                             for values in orjson.loads(out).values()
                             if key not in ("enableElectUncleanMaster", "electMasterMaxRetryCount"))


def test_metadata_reads_at_a_named_consistency(cluster: LocalCluster) -> None:
    code, out, err = admin("metadata", "-a", cluster.controllers, "--node", cluster.addresses[1],
                           "--consistency", "stale", "--json")
    assert code == 0, err
    assert "appliedIndex" in orjson.loads(out)["extFields"]  # what a stale read carries


def test_clean_broker_of_an_unknown_group_says_so(cluster: LocalCluster) -> None:
    code, _, err = admin("clean-broker", "-a", cluster.controllers, "-n", "nosuch")
    assert code == 1 and "is not existed" in err
    assert "the broker group is unknown" in err and "stop the broker" not in err


def test_exit_codes_for_usage_and_unreachable_controllers(tmp_path: Path) -> None:
    assert admin("metadata", "-a", "127.0.0.1:1", "--timeout-ms", "500")[0] == 3
    code, _, err = admin("config", "get", "-a", "127.0.0.1:1;127.0.0.1:2", "--timeout-ms", "500")
    assert code == 3 and "rmqc status" in err
    assert admin("metadata", "-a", "not-an-address")[0] == 2
    assert admin("sync-state-set", "-a", "127.0.0.1:1")[0] == 2  # neither names nor --all
    assert admin("sync-state-set", "-a", "127.0.0.1:1", "--all", "x")[0] == 2  # both
    assert admin("sync-state-set", "-a", "127.0.0.1:1", "--consistency", "eventual", "x")[0] == 2
    assert admin("config", "set", "-a", "127.0.0.1:1", "novalue")[0] == 2
    code, _, err = admin("metadata", "--node", "127.0.0.1:2", "--timeout-ms", "500")
    assert code == 3 and "no answer from 127.0.0.1:2:" in err and "9878" not in err  # the node asked
