"""`rmqc status` (and `rmqc admin sync-state-set --all`): against a node that answers the private
status request 60001 (a ControllerNode, whose replica answers it, run in a thread with simulated
brokers), and against a real 3-node cluster of `rmqc serve` processes, which
shows each node from 60001 or, where a node does not answer 60001, from 1005."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import orjson
import pytest
import trio
from typer.testing import CliRunner

from rmqc.brokersim import BrokerFleet, SimTiming
from rmqc.cli.dev import LocalCluster, free_ports
from rmqc.cli.main import app
from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode
from rmqc.replica import status_document

READY_TIMEOUT_S = 180.0
GROUPS = 2


class NodeWithBrokers:
    """A ControllerNode (its replica answers RMQC_NODE_STATUS) and a converged BrokerFleet, run by
    their own Trio loop in a thread."""

    def __init__(self, tmp_path: Path) -> None:
        (port,) = free_ports(1)
        self.config = NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0"))
        self.node = ControllerNode(self.config)
        self._tmp_path = tmp_path
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NodeWithBrokers:
        self._thread.start()
        assert self._ready.wait(READY_TIMEOUT_S), "node and brokers not ready in time"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(READY_TIMEOUT_S)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as error:  # reported to the test thread
            self.error = error
            self._ready.set()

    async def _main(self) -> None:
        self._stop = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.node.run)
            async with BrokerFleet([self.config.listen_address], groups=GROUPS, replicas=3,
                                   state_dir=self._tmp_path / "sim", timing=SimTiming.fast(), seed=2) as fleet:
                await fleet.wait_converged(READY_TIMEOUT_S)
                self._ready.set()
                await self._stop.wait()
            nursery.cancel_scope.cancel()


@pytest.fixture
def status_node(tmp_path: Path) -> Iterator[NodeWithBrokers]:
    with NodeWithBrokers(tmp_path) as running:
        yield running


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_status_reports_role_indexes_groups_and_live_brokers(status_node: NodeWithBrokers) -> None:
    address = status_node.config.listen_address
    code, out, err = run("status", "-a", address, "--json")
    assert code == 0, err
    (view,) = orjson.loads(out)
    status = view["status"]
    assert (status["nodeId"], status["role"], status["servingAsLeader"], status["leader"]) == (
        "n0", "leader", True, "n0")
    assert status["brokerGroups"] == GROUPS and status["liveBrokers"] == GROUPS * 3
    assert status["term"] >= 1 and status["commit"] >= status["applied"] > 0 and status["voters"] == ["n0"]
    assert status["alarms"] == []
    code, out, _ = run("status", "-a", address)
    assert code == 0 and "leader" in out and "n0" in out
    names = status_document(status_node.node.replica, with_group_names=True)["groupNames"]
    assert names == ["broker-0000", "broker-0001"]


def test_status_peers_take_serves_format_and_plain_addresses(status_node: NodeWithBrokers) -> None:
    """`--peers` as `rmqc serve --peers` writes it: the node answers (before, the id was read as part
    of the host name and the row said "unreachable")."""
    address = status_node.config.listen_address
    for peers in (f"n0-{address}", address):
        code, out, err = run("status", "--peers", peers, "--json")
        assert code == 0, err
        assert [view["address"] for view in orjson.loads(out)] == [address]
    code, _, err = run("status", "--peers", f"n0-{address},n1-{address}")
    assert code == 2 and "separated by ';', not ','" in err


def test_sync_state_set_all_lists_every_group(status_node: NodeWithBrokers) -> None:
    code, out, err = run("admin", "sync-state-set", "--all", "-a", status_node.config.listen_address, "--json")
    assert code == 0, err
    document = orjson.loads(out)
    assert document["asked"] == ["broker-0000", "broker-0001"]
    assert sorted(document["replicasInfoTable"]) == ["broker-0000", "broker-0001"]


def test_status_of_a_real_cluster_and_of_a_missing_node(tmp_path: Path) -> None:
    with LocalCluster(3, data_dir=tmp_path / "cluster") as cluster:
        cluster.wait_for_leader()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:  # until every node answered in time and all name the leader (bounded)
            code, out, err = run("status", "-a", cluster.controllers, "--json")
            views = orjson.loads(out)
            leaders = {view.get("status", {}).get("leader") for view in views}
            if (code == 0 and len(leaders) == 1 and None not in leaders) or time.monotonic() > deadline:
                break
        assert code == 0, err
        assert [view["address"] for view in views] == cluster.addresses
        assert len(leaders) == 1 and None not in leaders, views
        assert sum(view["status"]["servingAsLeader"] for view in views) == 1
        (missing,) = free_ports(1)
        code, out, err = run("status", "-a", f"{cluster.controllers};127.0.0.1:{missing}")
        # a leader serves: not "no controller answered" (3), but a node did not answer (1)
        assert code == 1 and f"no status from 127.0.0.1:{missing} (the group has a leader and serves)" in err
        row = next(line for line in out.splitlines() if f"127.0.0.1:{missing}" in line)
        assert "unreachable: could not connect" in row and "RetriesExhausted" not in row


def test_status_without_a_leader_exits_3(tmp_path: Path) -> None:
    """One voter of three running: it answers, but no node leads (it used to exit 0)."""
    from rmqc.launcher import Process, rmqc_argv, serving_pattern

    ports = free_ports(3)
    peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
    node = Process("n0", [*rmqc_argv(), "serve", "--id", "n0", "--peers", peers, "--data-dir", str(tmp_path / "n0")],
                   tmp_path / "n0.out", err_path=tmp_path / "n0.err")
    try:
        node.wait_for_output_blocking(serving_pattern("n0", f"127.0.0.1:{ports[0]}"), READY_TIMEOUT_S)
        code, out, err = run("status", "-a", f"127.0.0.1:{ports[0]};127.0.0.1:{ports[1]}")
        assert code == 3, (out, err)
        assert "no leader" in err and f"127.0.0.1:{ports[1]}" in err
    finally:
        node.stop()
    code, _, err = run("status", "-a", f"127.0.0.1:{ports[0]}")
    assert code == 3 and f"no controller answered (127.0.0.1:{ports[0]})" in err


def test_status_verdicts() -> None:
    from rmqc.cli._exit import ExitCode
    from rmqc.cli.status import status_verdict

    leader = {"address": "a:1", "status": {"nodeId": "n0", "role": "leader", "servingAsLeader": True}}
    follower = {"address": "a:2", "status": {"nodeId": "n1", "role": "follower", "servingAsLeader": False}}
    down = {"address": "a:3", "error": "unreachable: connection refused"}
    refused = {"address": "a:4", "error": "answered 16: NO_PERMISSION: bad signature", "refusedCode": 16}
    assert status_verdict([leader, follower]) is None
    assert status_verdict([leader, follower, down])[0] == ExitCode.PROBLEMS_FOUND  # type: ignore[index]
    assert status_verdict([follower, down])[0] == ExitCode.UNREACHABLE  # type: ignore[index]
    assert status_verdict([down])[0] == ExitCode.UNREACHABLE  # type: ignore[index]
    code, message, hint = status_verdict([refused])  # type: ignore[misc]
    assert code == ExitCode.REFUSED and "bad signature" in message and "secret key" in hint


def test_an_alarm_shows_in_the_status_table() -> None:
    from rich.console import Console

    from rmqc.cli._render import status_table

    alarm = {"alarm": "disk_full", "sinceMs": 1, "forMs": 12_400, "dataDir": "/d", "detail": "full", "refusedWrites": 3}
    views = [{"address": "127.0.0.1:1", "status": {"nodeId": "n0", "role": "leader", "alarms": [alarm]}},
             {"address": "127.0.0.1:2", "status": {"nodeId": "n1", "role": "follower", "alarms": []}}]
    console = Console(width=200, record=True)
    console.print(status_table(views))
    rows = console.export_text().splitlines()
    assert "DISK FULL 12s (3 writes refused)" in next(row for row in rows if "n0" in row)
    assert "DISK FULL" not in next(row for row in rows if "n1" in row)


def test_status_table_shows_each_nodes_lag_and_the_membership_under_way() -> None:
    from rich.console import Console

    from rmqc.cli._render import status_table

    leader = {"nodeId": "n0", "role": "leader", "servingAsLeader": True, "commit": 90, "applied": 90,
              "peers": {"n1": {"lag": 0}, "n2": {"lag": 57}}, "learners": ["n3"],
              "pendingConfChange": {"index": 88, "type": "add_learner", "node": "n3"}, "transferringTo": "n1"}
    views = [{"address": "127.0.0.1:1", "status": leader},
             {"address": "127.0.0.1:2", "status": {"nodeId": "n1", "role": "follower", "commit": 90, "applied": 90}},
             {"address": "127.0.0.1:3", "status": {"nodeId": "n2", "role": "follower", "commit": 33, "applied": 30}},
             {"address": "127.0.0.1:4", "status": {"nodeId": "n3", "role": "follower", "commit": 90, "applied": 90}}]
    console = Console(width=200, record=True)
    console.print(status_table(views))
    text = console.export_text()
    rows = text.splitlines()
    assert next(row for row in rows if "127.0.0.1:1" in row).count("leader") == 2  # its role and its lag
    assert "learner" in next(row for row in rows if "127.0.0.1:4" in row)  # not "follower": it has no vote
    assert " 0 " in next(row for row in rows if "127.0.0.1:2" in row)
    assert "57 (apply 3)" in next(row for row in rows if "127.0.0.1:3" in row)
    caption = " ".join(text.split())
    assert ("learners: n3; pending membership change: add learner n3 (index 88); "
            "transferring leadership to n1") in caption


async def test_status_also_asks_the_members_the_nodes_name() -> None:
    """A node added since the command line was written is asked too (the nodes' "members")."""
    from rmqc.cli.status import fetch_node_views

    class Nodes:
        asked: ClassVar[list[str]] = []

        async def request(self, code: int, ext: object, *, address: str) -> object:
            from rmqc.remoting import make_request, make_response

            self.asked.append(address)
            body = {"nodeId": address, "members": {"n0": "127.0.0.1:1", "n3": "127.0.0.1:4"}}
            return make_response(make_request(code, 1), 0, None, None, orjson.dumps(body))

    nodes = Nodes()
    views = await fetch_node_views(nodes, ["127.0.0.1:1"])
    assert [view["address"] for view in views] == ["127.0.0.1:1", "127.0.0.1:4"] and nodes.asked == [
        "127.0.0.1:1", "127.0.0.1:4"]


def test_status_shows_the_namesrv_topics_brokers_and_topics_no_broker_serves() -> None:
    from rich.console import Console

    from rmqc.cli._render import status_table
    from rmqc.fsm import NamesrvState
    from rmqc.fsm._namesrv import QueueData, Registration
    from rmqc.replica._status import namesrv_summary

    ns = NamesrvState()
    ns.registrations[("c", "10.0.0.1:10911")] = Registration("c", "broker-a", 0, "10.0.0.1:10911", "", (1, 0, 0))
    queues = QueueData(4, 4, 6, 0)
    ns.topics = {"orders": {"broker-a": queues}, "audit": {"broker-a": queues, "broker-b": queues},
                 "orphan": {"broker-b": queues}}  # broker-b never registered: "orphan" has nowhere to go
    summary = namesrv_summary(ns)
    assert summary == {"topics": 3, "registeredBrokers": 1, "topicsWithoutBroker": 1}
    leader = {"nodeId": "n0", "role": "leader", "servingAsLeader": True, "namesrv": summary}
    console = Console(width=200, record=True)
    console.print(status_table([{"address": "127.0.0.1:1", "status": leader}]))
    caption = " ".join(console.export_text().split())
    assert "NameServer: 3 topics, 1 brokers registered, 1 topics with no registered broker" in caption
