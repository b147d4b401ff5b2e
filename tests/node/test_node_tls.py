"""TLS on the one port over real TCP on 127.0.0.1, with certificates made by openssl for the test:
each tls_mode, client certificates (tls_auth_client), peers linked over mutual TLS, and the
settings read under RocketMQ's names."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from node_helpers import free_ports, wait_until
from test_node_transport import Recorder, SlowEcho, start_node

from rmqc.client import ClientError, ControllerClient, client_tls_context
from rmqc.config import NodeConfig, load_config, parse_peers
from rmqc.errors import ConfigError
from rmqc.node._peers import PeerLinks
from rmqc.node._server import Server
from rmqc.raft._types import Message, MessageType
from rmqc.remoting import RequestCode
from rmqc.testing.certs import Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certs]:
    yield make_certs(tmp_path_factory.mktemp("certs"))


def tls_config(certs: Certs, mode: str, auth_client: bool = False, peers: str | None = None,
               node_id: str = "n0") -> NodeConfig:
    if peers is None:
        (port,) = free_ports(1)
        peers = f"n0-127.0.0.1:{port}"
    return NodeConfig(node_id=node_id, peers=parse_peers(peers), tls_mode=mode, tls_cert_path=str(certs.node_cert),
                      tls_key_path=str(certs.node_key), tls_trust_cert_path=str(certs.ca),
                      tls_auth_client=auth_client)


async def start(nursery: trio.Nursery, config: NodeConfig) -> Server:
    server = Server(config, SlowEcho(nursery), PeerLinks(config, Recorder(), random.Random(1)))
    nursery.start_soon(server.serve, await trio.open_tcp_listeners(config.self_peer.port, host="127.0.0.1"))
    return server


async def served(config: NodeConfig, context=None) -> bool:  # type: ignore[no-untyped-def]
    """True if a 1005 gets an answer over a connection made with `context` (None: plain)."""
    try:
        async with ControllerClient([config.listen_address], ssl_context=context, max_retries=0,
                                    timeout_ms=3000) as client:
            answer = await client.request(RequestCode.CONTROLLER_GET_METADATA_INFO, address=config.listen_address)
        return answer is not None and answer.code == 0
    except (ClientError, BaseExceptionGroup) as error:  # the client's nursery may wrap it in a group
        if isinstance(error, BaseExceptionGroup) and error.subgroup(ClientError) is None:
            raise
        return False


async def test_each_mode_on_the_one_port(certs: Certs) -> None:
    tls = client_tls_context(str(certs.ca))
    for mode, plain_ok, tls_ok in (("disabled", True, False), ("permissive", True, True),
                                   ("enforcing", False, True)):
        config = tls_config(certs, mode) if mode != "disabled" else tls_config(certs, "enforcing").with_changes(
            tls_mode="disabled")
        async with trio.open_nursery() as nursery:
            server = await start(nursery, config)
            assert await served(config) is plain_ok, mode
            assert await served(config, tls) is tls_ok, mode
            assert server.tls_refused == (1 if mode == "enforcing" else 0), mode
            nursery.cancel_scope.cancel()


async def test_a_client_must_trust_the_node_and_show_a_certificate_when_asked(certs: Certs) -> None:
    config = tls_config(certs, "enforcing", auth_client=True)
    async with trio.open_nursery() as nursery:
        server = await start(nursery, config)
        assert not await served(config, client_tls_context(str(certs.other_ca)))  # does not trust the node
        assert not await served(config, client_tls_context(str(certs.ca)))  # no client certificate
        assert await served(config, client_tls_context(str(certs.ca), str(certs.client_cert), str(certs.client_key)))
        assert server.tls_refused == 2 and server.refusals()["tls"] == 2
        nursery.cancel_scope.cancel()


async def test_peers_link_over_mutual_tls(certs: Certs) -> None:
    port_a, port_b = free_ports(2)
    peers = f"n0-127.0.0.1:{port_a};n1-127.0.0.1:{port_b}"
    config_a = tls_config(certs, "enforcing", auth_client=True, peers=peers)
    config_b = tls_config(certs, "enforcing", auth_client=True, peers=peers, node_id="n1")
    a, b = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links_a = await start_node(nursery, config_a, a)
        links_b = await start_node(nursery, config_b, b)
        await wait_until(lambda: "n1" in links_a.connected and "n0" in links_b.connected, what="TLS links")
        links_a.send_messages([Message(type=MessageType.HEARTBEAT, to="n1", frm="n0", term=4)])
        links_b.send_messages([Message(type=MessageType.HEARTBEAT, to="n0", frm="n1", term=4)])
        await wait_until(lambda: a.messages and b.messages, what="a heartbeat each way over TLS")
        nursery.cancel_scope.cancel()


def test_settings_under_rocketmq_names_and_mutual_tls_as_peer_authentication(certs: Certs, tmp_path: Path) -> None:
    tls_properties = tmp_path / "tls.properties"
    tls_properties.write_text(f"tls.server.mode=enforcing\ntls.server.need.client.auth=require\n"
                              f"tls.server.certPath={certs.node_cert}\ntls.server.keyPath={certs.node_key}\n"
                              f"tls.server.trustCertPath={certs.ca}\n")
    conf = tmp_path / "controller.conf"
    conf.write_text("controllerDLegerPeers=n0-10.0.0.1:9878;n1-10.0.0.2:9878;n2-10.0.0.3:9878\n"
                    f"controllerDLegerSelfId=n0\ntls.config.file={tls_properties}\n")
    config = load_config(java_properties_path=str(conf), environ={}).config
    assert (config.tls_mode, config.tls_auth_client, config.tls_trust_cert_path) == ("enforcing", True, str(certs.ca))
    assert config.peer_secret_file == ""  # peers off loopback, authenticated by their certificates instead
    conf.write_text(conf.read_text() + "tls.server.mode=permissive\n")  # controller.conf wins over the file
    with pytest.raises(ConfigError, match="peer_secret_file: not set"):
        load_config(java_properties_path=str(conf), environ={})  # plain peers could join again
    with pytest.raises(ConfigError, match="tls_cert_path: tls_mode permissive needs"):
        NodeConfig(tls_mode="permissive")
    with pytest.raises(ConfigError, match="tls_cert_path/tls_key_path: cannot load"):
        Server(tls_config(certs, "enforcing").with_changes(tls_cert_path=str(tmp_path / "none.pem")), SlowEcho(),
               PeerLinks(NodeConfig(), Recorder(), random.Random(1)))


async def test_a_node_alone_serves_tls_without_a_trust_file_and_a_group_asks_for_it(certs: Certs) -> None:
    """tls_trust_cert_path is needed only where a peer's certificate is checked: a node alone
    starts without it and serves TLS clients; a node with other peers is refused, saying when."""
    alone = dataclasses.replace(tls_config(certs, "enforcing"), tls_trust_cert_path="")  # checked on creation
    async with trio.open_nursery() as nursery:
        await start(nursery, alone)
        assert await served(alone, client_tls_context(str(certs.ca)))
        nursery.cancel_scope.cancel()
    with pytest.raises(ConfigError, match=r"tls_trust_cert_path: .*needed as soon as the group has another member"):
        dataclasses.replace(alone, peers=parse_peers("n0-127.0.0.1:1;n1-127.0.0.1:2"))
