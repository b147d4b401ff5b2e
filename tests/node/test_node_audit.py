"""Audit on real nodes (three ControllerNodes over TCP on 127.0.0.1, ACL on): every command a request
causes records who asked (the access key it was signed with, the caller's address, the node it
arrived on: the follower's id when forwarded), replicated to every node, printed by `rmqc log dump`
and exported; a client cannot choose its recorded origin. And the cluster-name check on a real node."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
from node_helpers import wait_until
from test_node_three_in_process import start_three, three_configs
from typer.testing import CliRunner

from rmqc import fsm
from rmqc.cli.main import app
from rmqc.client import ControllerClient
from rmqc.config import NodeConfig
from rmqc.fsm import ApplyBrokerId, Origin
from rmqc.node import ControllerNode
from rmqc.remoting import RMQC_RECORD_OPERATION, RMQC_SNAPSHOT_SAVE, RMQC_TRANSFER_LEADER, RequestCode, ResponseCode
from rmqc.replica._audit import ORIGIN_FIELD
from rmqc.testing.acl_accounts import ADMIN, BROKER, PLAIN_ACL_YML as ACL

CLUSTER = "C"


def apply_id(name: str, broker_id: int, cluster: str = CLUSTER, **extra: str) -> dict:
    return {"clusterName": cluster, "brokerName": name, "appliedBrokerId": broker_id,
            "registerCheckCode": f"10.0.0.{broker_id}:30911;{broker_id}", **extra}


def three_with_acl(tmp_path: Path) -> list[NodeConfig]:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    return three_configs(tmp_path, acl_enabled=True, acl_file=str(acl_file))


def committed_commands(node: ControllerNode) -> list[fsm.Command]:
    storage = node.storage
    assert storage is not None
    commands: list[fsm.Command] = []
    for entry in storage.iter_entries(storage.first_index(), node.replica.applied_index + 1):
        if entry.type.name == "NORMAL":
            commands += fsm.decode_commands(entry.data)
    return commands


def origins_by_group(node: ControllerNode) -> dict[str, Origin | None]:
    return {c.broker_name: c.origin for c in committed_commands(node) if isinstance(c, ApplyBrokerId)}


async def test_commands_record_who_asked_on_every_node_and_log_dump_prints_it(tmp_path: Path) -> None:
    configs = three_with_acl(tmp_path)
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, configs)
        follower = followers[0]
        forged = '["root", "6.6.6.6:6", "n9"]'  # a client's own claim is never believed
        async with ControllerClient([leader.config.listen_address, follower.config.listen_address],
                                    credentials=BROKER) as client:
            for name, node in (("direct", leader), ("forwarded", follower)):
                answer = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID,
                                              apply_id(name, 1, **{ORIGIN_FIELD: forged}),
                                              address=node.config.listen_address)
                assert answer is not None and answer.code == ResponseCode.SUCCESS, answer.remark
        nodes = [leader, *followers]
        await wait_until(lambda: all(len(origins_by_group(n)) == 2 for n in nodes), what="replicated")
        origins = origins_by_group(leader)
        direct, forwarded = origins["direct"], origins["forwarded"]
        assert direct is not None and forwarded is not None
        assert (direct.access_key, direct.node) == ("broker-key", leader.config.node_id)
        assert (forwarded.access_key, forwarded.node) == ("broker-key", follower.config.node_id)
        for origin in (direct, forwarded):  # the client's own address, not the forwarding peer's
            assert origin.address is not None and origin.address.startswith("127.0.0.1:")
            assert origin.address.rsplit(":", 1)[1] not in {c.self_peer.address.rsplit(":", 1)[1] for c in configs}
        assert all(origins_by_group(n) == origins for n in followers)  # replicated as is
        nursery.cancel_scope.cancel()
    # a follower's log, read by the CLI once the nodes are down (LMDB opens a file once per process)
    dump = CliRunner().invoke(app, ["log", "dump", str(follower.config.data_dir)])
    assert dump.exit_code == 0, dump.output
    assert f"[by broker-key from {forwarded.address} via {follower.config.node_id}]" in dump.output
    assert f"[by broker-key from {direct.address} via {leader.config.node_id}]" in dump.output
    assert "6.6.6.6" not in dump.output and "root" not in dump.output
    out = tmp_path / "export.jsonl"
    export = CliRunner().invoke(app, ["log", "export", str(follower.config.data_dir), "--out", str(out)])
    assert export.exit_code == 0, export.output
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    audited = {r["broker_name"]: (r["caller"], r["caller_address"], r["via_node"])
               for r in rows if r["command"] == "apply_broker_id"}
    assert audited == {"direct": ("broker-key", direct.address, leader.config.node_id),
                       "forwarded": ("broker-key", forwarded.address, follower.config.node_id)}


async def test_a_group_registered_under_another_cluster_is_refused(tmp_path: Path) -> None:
    config = three_configs(tmp_path)[0]
    single = NodeConfig(node_id="n0", peers=config.peers[:1], data_dir=config.data_dir)
    async with trio.open_nursery() as nursery:
        node = ControllerNode(single)
        await nursery.start(node.run)
        await wait_until(lambda: node.replica.serving_as_leader, what="the single node leads")
        address = single.listen_address
        async with ControllerClient([address], max_retries=0) as client:
            first = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply_id("broker-a", 1),
                                         address=address)
            assert first is not None and first.code == ResponseCode.SUCCESS, first.remark
            other = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply_id("broker-a", 2, "OTHER"),
                                         address=address)
            assert other is not None and other.code == ResponseCode.CONTROLLER_INVALID_REQUEST
            assert other.remark == ("Broker-set: broker-a is registered in cluster C, not in cluster OTHER: "
                                    "two clusters may not share a brokerName (clusterNameCheck)")
            register = await client.request(RequestCode.CONTROLLER_REGISTER_BROKER, {
                "clusterName": "OTHER", "brokerName": "broker-a", "brokerId": 1, "brokerAddress": "10.0.0.1:30911"},
                address=address)
            assert register is not None and register.code == ResponseCode.CONTROLLER_INVALID_REQUEST
            assert node.replica.state.group("broker-a").replicas.keys() == {1}
            # configurable: off, a request naming another cluster joins the group, as in Java
            update = await client.request(RequestCode.UPDATE_CONTROLLER_CONFIG, {}, b"clusterNameCheck=false",
                                          address=address)
            assert update is not None and update.code == ResponseCode.SUCCESS, update.remark
            mixed = await client.request(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply_id("broker-a", 2, "OTHER"),
                                         address=address)
            assert mixed is not None and mixed.code == ResponseCode.SUCCESS, mixed.remark
            assert node.replica.state.group("broker-a").replicas.keys() == {1, 2}
        nursery.cancel_scope.cancel()


def operation_records(node: ControllerNode) -> list[fsm.RecordOperation]:
    return [c for c in committed_commands(node) if isinstance(c, fsm.RecordOperation)]


async def test_transfers_and_snapshot_saves_are_in_the_replicated_audit(tmp_path: Path) -> None:
    """Neither changes the state, yet both are an operator's act on the cluster (a snapshot reads
    all of it out): each commits a record of who asked before it happens, a follower's through the
    leader. A client cannot write such a record itself."""
    configs = three_with_acl(tmp_path)
    async with trio.open_nursery() as nursery:
        leader, followers = await start_three(nursery, configs)
        follower = followers[0]
        async with ControllerClient([leader.config.listen_address], credentials=ADMIN) as client:
            saved = await client.request(RMQC_SNAPSHOT_SAVE, None, address=follower.config.listen_address)
            assert saved is not None and saved.code == ResponseCode.SUCCESS, saved.remark
            moved = await client.request(RMQC_TRANSFER_LEADER, {"to": follower.config.node_id},
                                         address=leader.config.listen_address)
            assert moved is not None and moved.code == ResponseCode.SUCCESS, moved.remark
            forged = await client.request(RMQC_RECORD_OPERATION, {"action": "snapshot_save", "detail": "not me"},
                                          address=follower.config.listen_address)
            assert forged is not None and forged.code == ResponseCode.NO_PERMISSION
            assert forged.remark == "operation records come from controller nodes only"  # even for an admin
        nodes = [leader, *followers]
        await wait_until(lambda: all(len(operation_records(n)) == 2 for n in nodes), what="both records replicated")
        snapshot, transfer = operation_records(follower)
        assert snapshot.action is fsm.OperatorAction.SNAPSHOT_SAVE
        assert snapshot.detail.startswith(f"index {saved.ext('index')} ") and follower.config.node_id in snapshot.detail
        assert transfer.action is fsm.OperatorAction.TRANSFER_LEADER
        assert transfer.detail == f"from {leader.config.node_id} to {follower.config.node_id}"
        for record, via in ((snapshot, follower), (transfer, leader)):
            assert record.origin is not None and record.origin.access_key == "admin-key"
            assert record.origin.node == via.config.node_id and (record.origin.address or "").startswith("127.0.0.1:")
        nursery.cancel_scope.cancel()
