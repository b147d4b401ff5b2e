"""Connection bounds of the remoting port over real TCP on 127.0.0.1: connections per remote address
(refused and logged), and idle_timeout_ms against silent and slowloris clients while a client that
keeps sending frames is kept."""

from __future__ import annotations

import logging
import random
import struct

import pytest
import trio
from node_helpers import free_ports, wait_until
from test_node_transport import Recorder, SlowEcho, rpc

from rmqc.config import NodeConfig, parse_peers
from rmqc.node import _admission
from rmqc.node._admission import ConnectionAdmission
from rmqc.node._peers import PeerLinks
from rmqc.node._server import Server
from rmqc.remoting import FrameDecoder, encode, make_request


def test_admission_counts_per_remote_address_and_frees_on_release() -> None:
    config = NodeConfig(max_connections=5, max_connections_per_ip=2)
    admission = ConnectionAdmission(config)
    assert admission.admit("10.0.0.1") is None and admission.admit("10.0.0.1") is None
    assert admission.admit("10.0.0.1") == "2 connections open from 10.0.0.1 (max_connections_per_ip 2)"
    assert admission.admit("10.0.0.2") is None
    assert admission.admit("127.0.0.1") is None and admission.admit("127.0.0.1") is None  # loopback: total only
    assert admission.admit("10.0.0.3") == "5 connections open (max_connections 5)"
    admission.release("10.0.0.1")
    assert admission.admit("10.0.0.1") is None
    for host in ("10.0.0.1", "10.0.0.1", "10.0.0.2", "127.0.0.1", "127.0.0.1"):
        admission.release(host)
    assert admission.open == 0


def config_with(**changes: object) -> NodeConfig:
    (port,) = free_ports(1)
    return NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}")).with_changes(**changes)


async def closed(stream: trio.SocketStream, within_s: float) -> bool:
    try:
        with trio.fail_after(within_s):
            while await stream.receive_some(4096):
                pass
    except trio.BrokenResourceError:
        pass
    return True


async def test_connections_beyond_the_per_address_bound_are_refused_and_logged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_admission, "is_loopback", lambda host: False)  # let 127.0.0.1 stand for a remote host
    config = config_with(max_connections_per_ip=2)
    async with trio.open_nursery() as nursery:
        server = await start_server(nursery, config)
        kept = [await trio.open_tcp_stream("127.0.0.1", config.self_peer.port) for _ in range(2)]
        for stream in kept:
            await stream.send_all(encode(make_request(1005, opaque=1)))
            await rpc(stream, FrameDecoder(), 1)  # served: the node holds both
        with caplog.at_level(logging.WARNING, logger="rmqc.node.server"):
            third = await trio.open_tcp_stream("127.0.0.1", config.self_peer.port)
            assert await closed(third, 5)
        assert "refusing connection from 127.0.0.1:" in caplog.text
        assert "(max_connections_per_ip 2)" in caplog.text
        assert server.open_connections == 2 and server.refused_connections == 1
        await kept[0].aclose()  # a slot frees when the node has seen this connection end
        await wait_until(lambda: server.open_connections == 1, what="the node to release the closed connection")
        again = await trio.open_tcp_stream("127.0.0.1", config.self_peer.port)
        await again.send_all(encode(make_request(1005, opaque=2)))
        assert len(await rpc(again, FrameDecoder(), 1)) == 1  # admitted in the freed slot
        for stream in (kept[1], third, again):
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def start_server(nursery: trio.Nursery, config: NodeConfig) -> Server:
    """The remoting port alone (an echo handler), serving on `config`'s port."""
    handler = Recorder()
    handler.nursery = nursery
    server = Server(config, SlowEcho(nursery), PeerLinks(config, handler, random.Random(1)))
    nursery.start_soon(server.serve, await trio.open_tcp_listeners(config.self_peer.port, host="127.0.0.1"))
    return server


async def test_silent_and_slowloris_clients_are_closed_and_busy_ones_kept() -> None:
    config = config_with(idle_timeout_ms=400)
    frame = encode(make_request(1005, opaque=3))
    async with trio.open_nursery() as nursery:
        server = await start_server(nursery, config)
        port = config.self_peer.port
        silent = await trio.open_tcp_stream("127.0.0.1", port)
        started = trio.current_time()
        assert await closed(silent, 5)
        assert trio.current_time() - started >= 0.35

        slowloris = await trio.open_tcp_stream("127.0.0.1", port)
        busy = await trio.open_tcp_stream("127.0.0.1", port)
        cut_off = trio.Event()

        async def dribble() -> None:
            """One byte of a frame every 50 ms: bytes keep coming, a frame never completes."""
            await slowloris.send_all(struct.pack(">I", 4096))
            try:
                while True:
                    await trio.sleep(0.05)  # pacing the attack, not waiting for a result
                    await slowloris.send_all(b"x")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                cut_off.set()

        nursery.start_soon(dribble)
        started = trio.current_time()
        with trio.fail_after(10):
            answered = 0
            while not cut_off.is_set():  # meanwhile a client sends a whole request every 100 ms
                await busy.send_all(frame)
                answered += len(await rpc(busy, FrameDecoder(), 1))
                await trio.sleep(0.1)  # pacing the client
        assert trio.current_time() - started >= 0.35
        await busy.send_all(frame)
        assert len(await rpc(busy, FrameDecoder(), 1)) == 1  # the busy client was never closed
        # the slowloris (silent: no frame begun)
        assert server.idle_closed == 1 and server.refusals()["idle_timeout"] == 1
        for stream in (silent, slowloris, busy):
            await stream.aclose()
        nursery.cancel_scope.cancel()
