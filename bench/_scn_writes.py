"""Durable writes at 1..256 clients: rmqc, the etcd and PySyncObj anchors, and rmqc reshaped into
the single-queue design (one entry per append, one message in flight, one proposal at a time)."""

from __future__ import annotations

import collections
import time
from typing import Any

from rmqc.remoting import RequestCode, encode, make_request

from . import _etcd, _pysyncobj
from ._java import Controllers
from ._load import HttpConn, LineConn, RemotingConn, Workload
from ._points import load_points
from ._rmqc import RmqcCluster, WriteSequence, write_ext
from ._suite import Skipped, Suite


def write_request_bytes() -> int:
    """Size of one 1013 frame of the write load; the anchors write values of this size."""
    return len(encode(make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, 1, write_ext("0000000000", 0, 0))))


def anchor_value() -> str:
    return "v" * max(1, write_request_bytes() - 40)  # the frame minus a key of similar length


def rmqc_write_workload(cluster: Controllers, leader: str) -> Workload[RemotingConn]:
    refusals: collections.Counter[str] = collections.Counter()
    writes = WriteSequence(str(int(time.time() * 1000)), refusals)

    async def open_conn(_client: int) -> RemotingConn:
        return await RemotingConn.open(cluster.address(leader))

    async def op(conn: RemotingConn, client: int, _seq: int) -> bool:
        return await writes.write(conn, client)

    return Workload(open_conn, op, refusals)


def etcd_write_workload(cluster: _etcd.EtcdCluster, leader: str) -> Workload[HttpConn]:
    """Puts of anchor_value() to the etcd leader, each client under keys of its own."""
    value = anchor_value()

    async def open_conn(_client: int) -> HttpConn:
        return await HttpConn.open(cluster.address(leader))

    async def put(conn: HttpConn, client: int, seq: int) -> bool:
        return await _etcd.put(conn, f"bench/{client}/{seq}", value)

    return Workload(open_conn, put)


async def writes_rmqc(suite: Suite) -> dict[str, Any]:
    cluster = RmqcCluster(suite.work_dir("writes_rmqc"), 3)
    await cluster.start()
    leader = await cluster.leader_id()
    points = await load_points(suite, "rmqc 1013 (fsync quorum)", rmqc_write_workload(cluster, leader),
                               suite.profile.write_clients)
    cluster.stop()
    return {"conditions": suite.base_conditions(system="rmqc", nodes=3, target="leader", fsync=suite.fsync,
                                                payload_bytes=write_request_bytes(),
                                                request="1013 APPLY_BROKER_ID of a fresh id (one Raft entry)"),
            "points": points}


async def writes_etcd(suite: Suite) -> dict[str, Any]:
    if suite.skip_anchors:
        raise Skipped("anchors skipped (--no-anchors)")
    if _etcd.etcd_binary() is None:
        raise Skipped("etcd is not installed (apt-get install etcd-server etcd-client); anchor skipped")
    cluster = _etcd.EtcdCluster(suite.work_dir("writes_etcd"), 3)
    await cluster.start()
    leader = await cluster.leader()
    points = await load_points(suite, "etcd put (fsync quorum)", etcd_write_workload(cluster, leader),
                               suite.profile.write_clients)
    cluster.stop()
    return {"conditions": suite.base_conditions(system=f"etcd {_etcd.etcd_version()}", nodes=3, target="leader",
                                                fsync=suite.fsync.replace("LMDB", "bbolt+WAL"),
                                                payload_bytes=len(anchor_value()) + 20,
                                                request="HTTP/1.1 POST /v3/kv/put via the gRPC gateway"),
            "points": points}


async def writes_pysyncobj(suite: Suite) -> dict[str, Any]:
    if suite.skip_anchors:
        raise Skipped("anchors skipped (--no-anchors)")
    version = _pysyncobj.ensure_pysyncobj()
    if version is None:
        raise Skipped("pysyncobj could not be installed; anchor skipped")
    cluster = _pysyncobj.PySyncObjCluster(suite.work_dir("writes_pysyncobj"), 3)
    await cluster.start()
    leader = await cluster.leader_address()
    value = anchor_value()

    async def open_conn(_client: int) -> LineConn:
        return await LineConn.open(leader)

    async def op(conn: LineConn, client: int, seq: int) -> bool:
        return await _pysyncobj.put(conn, f"bench/{client}/{seq}", value)

    points = await load_points(suite, "PySyncObj set (no fsync)", Workload(open_conn, op), suite.profile.write_clients)
    cluster.stop()
    return {"conditions": suite.base_conditions(system=f"PySyncObj {version}", nodes=3, target="leader",
                                                fsync="off (PySyncObj never fsyncs)", payload_bytes=len(value) + 20,
                                                request="line protocol PUT, ReplDict.set with a commit callback"),
            "points": points}


# The Java controller's single queue, as rmqc options (docs/configuration.md): one request at a time
# through the log, one entry per append, one append in flight per peer.
SINGLE_QUEUE_SETTINGS = {"group_commit": "false", "max_entries_per_append": 1, "max_appends_in_flight": 1}


async def single_queue(suite: Suite) -> dict[str, Any]:
    clients = (1, max(suite.profile.write_clients))
    cluster = RmqcCluster(suite.work_dir("single_queue"), 3, settings=SINGLE_QUEUE_SETTINGS, name="single")
    await cluster.start()
    leader = await cluster.leader_id()
    points = await load_points(suite, "rmqc single-queue 1013", rmqc_write_workload(cluster, leader), clients)
    cluster.stop()
    return {"conditions": suite.base_conditions(system="rmqc, single-queue shape", nodes=3, target="leader",
                                                fsync=suite.fsync, payload_bytes=write_request_bytes(),
                                                shape="group_commit=false, max_entries_per_append=1, "
                                                      "max_appends_in_flight=1: one request at a time through the log"),
            "points": points}
