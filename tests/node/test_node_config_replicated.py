"""1009 (UPDATE_CONTROLLER_CONFIG) is replicated on real nodes (three ControllerNodes over TCP on
127.0.0.1, ACL on): sent to a follower it is forwarded, logged with who asked, and changes the
configuration of all three nodes; refused keys never reach the log; `rmqc log dump` and `rmqc log
export` name the caller; the changed configuration survives a snapshot and a restart."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
from node_helpers import ACL, ADMIN, BROKER, wait_until
from test_node_audit import committed_commands
from test_node_three_in_process import start_three, three_configs
from typer.testing import CliRunner

from rmqc.cli.main import app
from rmqc.client import ControllerClient
from rmqc.config import NodeConfig
from rmqc.fsm import UpdateControllerConfig
from rmqc.node import ControllerNode
from rmqc.remoting import RequestCode, ResponseCode
from rmqc.storage import LmdbStorage

CHANGE = b"enableElectUncleanMaster=true\nelectMasterMaxRetryCount=5\n"
DESCRIBED = "update controller config {electMasterMaxRetryCount: 5, enableElectUncleanMaster: true}"


def config_changed(node: ControllerNode) -> bool:
    config = node.replica.processor.config
    return config.enable_elect_unclean_master and config.elect_master_max_retry_count == 5


def config_commands(node: ControllerNode) -> list[UpdateControllerConfig]:
    return [c for c in committed_commands(node) if isinstance(c, UpdateControllerConfig)]


async def start_with_acl(nursery: trio.Nursery, tmp_path: Path, **changes: object
                         ) -> tuple[list[NodeConfig], ControllerNode, list[ControllerNode]]:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    configs = three_configs(tmp_path, acl_enabled=True, acl_file=str(acl_file), **changes)
    leader, followers = await start_three(nursery, configs)
    return configs, leader, followers


async def test_1009_on_a_follower_changes_every_node_and_is_audited(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        configs, leader, followers = await start_with_acl(nursery, tmp_path)
        nodes = [leader, *followers]
        follower = followers[1]
        address = follower.config.listen_address
        assert not any(config_changed(n) for n in nodes)
        async with ControllerClient([address], credentials=ADMIN, max_retries=0) as admin:
            # refused before anything enters the log (the answers of the unreplicated 1009)
            unknown = await admin.request(RequestCode.UPDATE_CONTROLLER_CONFIG, {}, b"enableElectUnclean=true",
                                          address=address)
            assert unknown is not None and unknown.code == ResponseCode.INVALID_PARAMETER
            assert "did you mean 'enableElectUncleanMaster'" in (unknown.remark or "")
            black = await admin.request(RequestCode.UPDATE_CONTROLLER_CONFIG, {}, b"configStorePath=/tmp/x",
                                        address=address)
            assert black is not None and black.code == ResponseCode.NO_PERMISSION
            assert black.remark == "Can not update config in black list."
            assert not any(config_commands(n) for n in nodes)
            answer = await admin.request(RequestCode.UPDATE_CONTROLLER_CONFIG, {}, CHANGE, address=address)
            assert answer is not None and answer.code == ResponseCode.SUCCESS, answer.remark
            await wait_until(lambda: all(config_changed(n) for n in nodes), what="every node reconfigured")
            got = await admin.request(RequestCode.GET_CONTROLLER_CONFIG, {}, address=leader.config.listen_address)
            assert got is not None and b"enableElectUncleanMaster=true" in (got.body or b"")
        async with ControllerClient([address], credentials=BROKER, max_retries=0) as broker:
            refused = await broker.request(RequestCode.UPDATE_CONTROLLER_CONFIG, {}, b"electMasterMaxRetryCount=1",
                                           address=address)
            assert refused is not None and refused.code == ResponseCode.NO_PERMISSION  # admins only
        await wait_until(lambda: all(len(config_commands(n)) == 1 for n in nodes), what="replicated")
        origin = config_commands(leader)[0].origin
        assert origin is not None and (origin.access_key, origin.node) == ("admin-key", follower.config.node_id)
        assert origin.address is not None and origin.address.startswith("127.0.0.1:")
        nursery.cancel_scope.cancel()
    for config in configs:  # every node's log says who reconfigured the controllers
        dump = CliRunner().invoke(app, ["log", "dump", str(config.data_dir)])
        assert dump.exit_code == 0, dump.output
        assert (f"{DESCRIBED} [by admin-key from {origin.address} via {follower.config.node_id}]"
                in dump.output), dump.output
    out = tmp_path / "export.jsonl"
    export = CliRunner().invoke(app, ["log", "export", str(leader.config.data_dir), "--out", str(out)])
    assert export.exit_code == 0, export.output
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    [row] = [r for r in rows if r["command"] == "update_controller_config"]
    assert (row["caller"], row["caller_address"], row["via_node"]) == ("admin-key", origin.address,
                                                                       follower.config.node_id)
    assert row["description"].startswith(DESCRIBED) and row["result"] == "ok" and row["broker_name"] is None


async def test_the_changed_config_survives_a_snapshot_and_a_restart(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        configs, leader, followers = await start_with_acl(nursery, tmp_path, snapshot_every_entries=4)
        nodes = [leader, *followers]
        address = followers[0].config.listen_address
        async with ControllerClient([address], credentials=ADMIN, max_retries=0) as admin:
            answer = await admin.request(RequestCode.UPDATE_CONTROLLER_CONFIG, {}, CHANGE, address=address)
            assert answer is not None and answer.code == ResponseCode.SUCCESS, answer.remark
            for number in range(8):  # enough entries for a snapshot on every node
                applied = await admin.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
                    "clusterName": "C", "brokerName": f"b{number}", "appliedBrokerId": 1,
                    "registerCheckCode": f"10.0.0.{number}:30911;1"}, address=address)
                assert applied is not None and applied.code == ResponseCode.SUCCESS, applied.remark
        await wait_until(lambda: all(n.replica.snapshot_index > 2 for n in nodes), what="snapshots")
        nursery.cancel_scope.cancel()
    for config in configs:  # the snapshot of every node carries the change
        with LmdbStorage(config.data_dir) as storage:
            snapshot = orjson.loads(storage.snapshot().data)
            assert snapshot["config"] == {"electMasterMaxRetryCount": "5", "enableElectUncleanMaster": "true"}
    # restarted from the snapshot (and the log after it), every node has the changed configuration
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, configs)
        assert all(config_changed(n) for n in [leader, *followers])  # restored before serving
        nursery.cancel_scope.cancel()
