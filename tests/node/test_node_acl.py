"""The ACL gate on the remoting port, over real TCP on 127.0.0.1: signed requests reach the handler,
refused ones are answered NO_PERMISSION with the reason (or dropped and counted when one-way), the
file is re-read when it changes, and a bad configuration stops the node before it serves."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
import trio
from node_helpers import ACL, ADMIN, BROKER, free_ports
from test_node_transport import Recorder, SlowEcho

from rmqc.acl import Credentials
from rmqc.client import ControllerClient
from rmqc.config import NodeConfig, parse_peers
from rmqc.errors import ConfigError
from rmqc.metrics import NodeMetrics
from rmqc.node import _acl
from rmqc.node._peers import PeerLinks
from rmqc.node._ratelog import RateLimitedLog
from rmqc.node._server import Server
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode


class Served(SlowEcho):
    """Records the codes of the requests that got past the gate."""

    def __init__(self, nursery: trio.Nursery | None = None) -> None:
        super().__init__(nursery)
        self.codes: list[int] = []

    async def handle_request(self, request: RemotingCommand, channel):  # type: ignore[no-untyped-def]
        self.codes.append(request.code)
        return await super().handle_request(request, channel)


def acl_config(tmp_path: Path, text: str = ACL) -> NodeConfig:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)
    (port,) = free_ports(1)
    return NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), acl_enabled=True, acl_file=str(path))


async def start(nursery: trio.Nursery, config: NodeConfig) -> tuple[Server, Served]:
    handler = Served(nursery)
    server = Server(config, handler, PeerLinks(config, Recorder(), random.Random(1)))
    listeners = await trio.open_tcp_listeners(config.self_peer.port, host="127.0.0.1")
    nursery.start_soon(server.serve, listeners)
    return server, handler


async def ask(config: NodeConfig, code: int, ext: dict, credentials: Credentials | None = None,
              body: bytes | None = None) -> RemotingCommand:
    async with ControllerClient([config.listen_address], credentials=credentials, max_retries=0) as client:
        answer = await client.request(code, ext, body, address=config.listen_address)
    assert answer is not None
    return answer


async def test_signed_requests_pass_and_refusals_say_why(tmp_path: Path) -> None:
    config = acl_config(tmp_path)
    elect = {"clusterName": "c", "brokerName": "b", "brokerId": 1, "designateElect": "true"}
    async with trio.open_nursery() as nursery:
        server, handler = await start(nursery, config)
        assert (await ask(config, RequestCode.CONTROLLER_GET_METADATA_INFO, {}, BROKER)).code == 0
        assert (await ask(config, RequestCode.CONTROLLER_ELECT_MASTER, elect, ADMIN)).code == 0
        refusals = [
            (await ask(config, RequestCode.CONTROLLER_GET_METADATA_INFO, {}), "address not allowed"),
            (await ask(config, RequestCode.CONTROLLER_ELECT_MASTER, elect, BROKER), "not an admin"),
            (await ask(config, RequestCode.CLEAN_BROKER_DATA, {"brokerName": "b"}, BROKER), "not an admin"),
            (await ask(config, RequestCode.UPDATE_CONTROLLER_CONFIG, {}, BROKER, b"a=b\n"), "not an admin"),
            (await ask(config, RequestCode.CONTROLLER_GET_METADATA_INFO, {}, Credentials("nobody", "x" * 8)),
             "unknown access key"),
            (await ask(config, RequestCode.CONTROLLER_GET_METADATA_INFO, {}, Credentials("broker-key", "guess")),
             "bad signature"),
        ]
        for answer, reason in refusals:
            assert answer.code == ResponseCode.NO_PERMISSION
            assert answer.remark is not None and answer.remark.startswith(f"NO_PERMISSION: {reason}")
        assert handler.codes == [RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.CONTROLLER_ELECT_MASTER]
        assert server.acl is not None
        assert dict(server.acl.refused) == {"ADDRESS_NOT_ALLOWED": 1, "NOT_ADMIN": 3, "UNKNOWN_ACCESS_KEY": 1,
                                            "BAD_SIGNATURE": 1}
        assert server.refusals() == {"peer_auth": 0, "connection_limit": 0, "idle_timeout": 0, "tls": 0,
                                     "acl_address_not_allowed": 1, "acl_not_admin": 3,
                                     "acl_unknown_access_key": 1, "acl_bad_signature": 1}
        NodeMetrics().update_refusals(server.refusals())  # every reason is a known metric label
        nursery.cancel_scope.cancel()


async def test_unsigned_oneway_heartbeats_are_dropped_and_counted(tmp_path: Path) -> None:
    config = acl_config(tmp_path)
    heartbeat = {"clusterName": "c", "brokerName": "b", "brokerId": 1, "brokerAddr": "127.0.0.1:1"}
    async with trio.open_nursery() as nursery:
        server, handler = await start(nursery, config)
        address = config.listen_address
        async with ControllerClient([address], max_retries=0) as unsigned:
            for _ in range(5):
                await unsigned.request(RequestCode.BROKER_HEARTBEAT, heartbeat, address=address, oneway=True)
            # a request after them on the same connection: once it is answered, they were handled
            await unsigned.request(RequestCode.CONTROLLER_GET_METADATA_INFO, {}, address=address)
        async with ControllerClient([address], max_retries=0, credentials=BROKER) as broker:
            await broker.request(RequestCode.BROKER_HEARTBEAT, heartbeat, address=address, oneway=True)
            await broker.request(RequestCode.CONTROLLER_GET_METADATA_INFO, {}, address=address)
        assert server.acl is not None and server.acl.dropped_oneway == 5
        assert handler.codes == [RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_GET_METADATA_INFO]
        nursery.cancel_scope.cancel()


async def test_heartbeats_queued_without_a_task_are_signed_too(tmp_path: Path) -> None:
    """The broker simulator queues its 904s on an open connection (send_oneway_nowait): they must
    carry the signature like every other request, or an ACL node drops every heartbeat."""
    config = acl_config(tmp_path)
    heartbeat = {"clusterName": "c", "brokerName": "b", "brokerId": 1, "brokerAddr": "127.0.0.1:1"}
    async with trio.open_nursery() as nursery:
        server, handler = await start(nursery, config)
        address = config.listen_address
        async with ControllerClient([address], max_retries=0, credentials=BROKER) as broker:
            await broker.request(RequestCode.CONTROLLER_GET_METADATA_INFO, {}, address=address)  # connects
            assert all(broker.send_oneway_nowait(address, RequestCode.BROKER_HEARTBEAT, heartbeat) for _ in range(3))
            await broker.request(RequestCode.CONTROLLER_GET_METADATA_INFO, {}, address=address)
        assert server.acl is not None and server.acl.dropped_oneway == 0
        assert handler.codes.count(RequestCode.BROKER_HEARTBEAT) == 3
        nursery.cancel_scope.cancel()


async def test_the_file_is_reloaded_when_changed_and_a_broken_edit_keeps_the_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_acl, "RELOAD_CHECK_S", 0.0)  # look at the file on every request
    config = acl_config(tmp_path)
    newcomer = Credentials("new-broker", "new-secret")
    async with trio.open_nursery() as nursery:
        await start(nursery, config)
        metadata = RequestCode.CONTROLLER_GET_METADATA_INFO
        assert (await ask(config, metadata, {}, newcomer)).code == ResponseCode.NO_PERMISSION
        Path(config.acl_file).write_text(ACL + "  - accessKey: new-broker\n    secretKey: new-secret\n")
        assert (await ask(config, metadata, {}, newcomer)).code == 0
        Path(config.acl_file).write_text("accounts: [\n")  # a half-saved edit
        assert (await ask(config, metadata, {}, newcomer)).code == 0
        assert (await ask(config, metadata, {})).code == ResponseCode.NO_PERMISSION
        nursery.cancel_scope.cancel()


def test_a_bad_acl_configuration_stops_the_node_before_it_serves(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    peers = parse_peers(f"n0-127.0.0.1:{port}")
    with pytest.raises(ConfigError, match=r"acl_file: must name a plain_acl.yml when acl_enabled is true"):
        NodeConfig(peers=peers, acl_enabled=True)
    config = acl_config(tmp_path, "accounts:\n  - accessKey: abc\n")
    with pytest.raises(ConfigError, match=r"acl_file: .*plain_acl.yml: accounts\[1\]: accessKey missing"):
        Server(config, Served(), PeerLinks(config, Recorder(), random.Random(1)))
    missing = config.with_changes(acl_file=str(tmp_path / "absent.yml"))
    with pytest.raises(ConfigError, match="acl_file: cannot read"):
        Server(missing, Served(), PeerLinks(missing, Recorder(), random.Random(1)))


def test_refusal_logging_is_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("test.acl"), 1.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.acl"):
        for step in range(30):  # 30 refusals over 3 s
            now[0] = step * 0.1
            limited.warning("refused %d", step)
    assert [record.getMessage() for record in caplog.records] == [
        "refused 0", "refused 10 (and 9 more since the last such line)",
        "refused 20 (and 9 more since the last such line)"]
