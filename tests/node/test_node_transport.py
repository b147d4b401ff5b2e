"""Peer links and the shared port over real TCP on 127.0.0.1: Raft batches, forwarding, refusal of
strangers, and the remoting server's concurrency and isolation of bad clients."""

from __future__ import annotations

import random
import struct

import pytest
import trio
from node_helpers import AsyncHandler, free_ports, wait_until

import rmqc.node._peers as peers
from rmqc.config import NodeConfig
from rmqc.node._peers import PeerLinks, Reply
from rmqc.node._server import Channel, Server
from rmqc.peerwire import FrameKind, Handshake, encode_frame, encode_handshake, encode_tagged
from rmqc.raft._types import Entry, Message, MessageType
from rmqc.remoting import FrameDecoder, RemotingCommand, encode, make_request, make_response


class Recorder:
    """A PeerHandler that records everything and answers forwarded requests with code 0."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Message]] = []
        self.responses: list[tuple[int, bytes]] = []
        self.digests: list[bytes] = []
        self.unreachable: list[str] = []
        self.snapshots: list[tuple[str, bool]] = []
        self.down: list[str] = []
        self.nursery: trio.Nursery | None = None

    def on_raft_messages(self, sender: str, messages: list[Message]) -> None:
        self.messages.extend((sender, message) for message in messages)

    def raft_term(self) -> int:
        return 0

    def on_forward_request(self, sender: str, tag: int, frame: bytes, reply: Reply) -> None:
        (request,) = FrameDecoder().feed(frame)
        response = make_response(request, 0, remark=f"served by leader for {sender}")
        assert self.nursery is not None
        self.nursery.start_soon(reply, FrameKind.FORWARD_RESPONSE, encode_tagged(tag, encode(response)))

    def on_forward_response(self, sender: str, tag: int, frame: bytes) -> None:
        self.responses.append((tag, frame))

    def on_digest(self, sender: str, payload: bytes) -> None:
        self.digests.append(payload)

    def on_peer_unreachable(self, peer_id: str) -> None:
        self.unreachable.append(peer_id)

    def on_snapshot_sent(self, peer_id: str, ok: bool) -> None:
        self.snapshots.append((peer_id, ok))

    def on_peer_down(self, peer_id: str) -> None:
        self.down.append(peer_id)


class SlowEcho(AsyncHandler):
    """Answers code 0 after `delay` extFields seconds, remark = the opaque."""

    async def handle_request(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        await trio.sleep(float(request.ext("delay") or 0))  # the work the request asks to take this long
        return make_response(request, 0, remark=str(request.opaque))


def two_node_configs(group_b: str = "rmqc") -> tuple[NodeConfig, NodeConfig]:
    port_a, port_b = free_ports(2)
    peers = f"n0-127.0.0.1:{port_a};n1-127.0.0.1:{port_b}"
    return (NodeConfig(node_id="n0", peers=NodeConfig(peers=_p(peers)).peers),
            NodeConfig(node_id="n1", peers=_p(peers), group=group_b))


def _p(text: str):  # type: ignore[no-untyped-def]
    from rmqc.config import parse_peers
    return parse_peers(text)


async def start_node(nursery: trio.Nursery, config: NodeConfig, handler: Recorder) -> PeerLinks:
    handler.nursery = nursery
    links = PeerLinks(config, handler, random.Random(1))
    server = Server(config, SlowEcho(nursery), links)
    listeners = await trio.open_tcp_listeners(config.self_peer.port, host="127.0.0.1")
    nursery.start_soon(server.serve, listeners)
    await nursery.start(links.run)
    return links


async def test_raft_batches_digests_and_forwarding_between_two_nodes() -> None:
    config_a, config_b = two_node_configs()
    a, b = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links_a = await start_node(nursery, config_a, a)
        await start_node(nursery, config_b, b)
        # messages queued while a link is down are dropped (Raft resends), so wait for the link
        await wait_until(lambda: "n1" in links_a.connected, what="link n0->n1")
        sent = [Message(type=MessageType.APP, to="n1", frm="n0", term=2, index=i,
                        entries=(Entry(i + 1, 2, data=b"cmd"),)) for i in range(50)]
        links_a.send_messages(sent)
        await wait_until(lambda: len(b.messages) == 50, what="50 raft messages at n1")
        assert [message for _, message in b.messages] == sent
        assert {sender for sender, _ in b.messages} == {"n0"}

        assert links_a.send_control("n1", FrameKind.DIGEST, b"digest")
        request = make_request(1003, opaque=7, ext={"brokerName": "broker-a"})
        assert links_a.send_control("n1", FrameKind.FORWARD_REQUEST, encode_tagged(42, encode(request)))
        await wait_until(lambda: a.responses and b.digests, what="forward answer and digest")
        assert b.digests == [b"digest"]
        tag, frame = a.responses[0]
        (response,) = FrameDecoder().feed(frame)
        assert (tag, response.opaque, response.remark) == (42, 7, "served by leader for n0")
        nursery.cancel_scope.cancel()


async def test_unreachable_peer_is_reported_and_reconnected_later() -> None:
    config_a, config_b = two_node_configs()
    a, b = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links_a = await start_node(nursery, config_a, a)
        await wait_until(lambda: "n1" in a.unreachable, what="n1 reported unreachable")
        links_a.send_messages([Message(type=MessageType.HEARTBEAT, to="n1", frm="n0")])
        await start_node(nursery, config_b, b)  # n1 comes up late: n0 reconnects on its own
        await wait_until(lambda: "n1" in links_a.connected, what="n0 connected to n1")
        links_a.send_messages([Message(type=MessageType.HEARTBEAT, to="n1", frm="n0", term=9)])
        await wait_until(lambda: any(m.term == 9 for _, m in b.messages), what="heartbeat after reconnect")
        nursery.cancel_scope.cancel()


async def test_peer_of_another_group_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    config_a, config_b = two_node_configs(group_b="other")
    a, b = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        await start_node(nursery, config_a, a)
        links_b = await start_node(nursery, config_b, b)
        links_b.send_messages([Message(type=MessageType.HEARTBEAT, to="n0", frm="n1")])
        await wait_until(lambda: len(b.unreachable) >= 4, what="n1's link to n0 refused and retried")
        assert a.messages == []
        nursery.cancel_scope.cancel()
    # retried ~10 times a second, said once per HANDSHAKE_LOG_EVERY_S
    failures = [r for r in caplog.records if r.name == "rmqc.node.peers" and "peer link to n0" in r.getMessage()
                and ("not established" in r.getMessage() or "during the handshake" in r.getMessage())]
    assert len(failures) == 1, [r.getMessage() for r in failures]


async def rpc(stream: trio.SocketStream, decoder: FrameDecoder, count: int) -> list[RemotingCommand]:
    answers: list[RemotingCommand] = []
    while len(answers) < count:
        data = await stream.receive_some(65536)
        assert data, "server closed the connection"
        answers.extend(decoder.feed(data))
    return answers


async def test_requests_on_one_connection_are_answered_as_they_complete() -> None:
    config, _ = two_node_configs()
    async with trio.open_nursery() as nursery:
        await start_node(nursery, config, Recorder())
        stream = await trio.open_tcp_stream("127.0.0.1", config.self_peer.port)
        slow = make_request(1005, opaque=1, ext={"delay": "0.3"})
        fast = make_request(1005, opaque=2, ext={"delay": "0"})
        oneway = make_request(904, opaque=3, oneway=True)
        await stream.send_all(encode(slow) + encode(oneway) + encode(fast))
        answers = await rpc(stream, FrameDecoder(), 2)
        assert [answer.opaque for answer in answers] == [2, 1]  # the fast one overtook the slow one
        assert all(answer.is_response for answer in answers)
        await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_malformed_client_is_closed_and_others_are_still_served() -> None:
    config, _ = two_node_configs()
    async with trio.open_nursery() as nursery:
        await start_node(nursery, config, Recorder())
        good, bad, too_big = [await trio.open_tcp_stream("127.0.0.1", config.self_peer.port) for _ in range(3)]
        await bad.send_all(struct.pack(">II", 8, 0x05000004) + b"junk")  # serialize type 5 is unknown
        assert await bad.receive_some(100) == b""  # closed by the server
        await too_big.send_all(struct.pack(">I", config.max_frame_bytes + 1))
        assert await too_big.receive_some(100) == b""
        await good.send_all(encode(make_request(1005, opaque=11)))
        (answer,) = await rpc(good, FrameDecoder(), 1)
        assert answer.opaque == 11
        for stream in (good, bad, too_big):
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_bad_peer_handshake_closes_only_that_connection() -> None:
    config, _ = two_node_configs()
    async with trio.open_nursery() as nursery:
        await start_node(nursery, config, Recorder())
        stranger, garbage = [await trio.open_tcp_stream("127.0.0.1", config.self_peer.port) for _ in range(2)]
        hello = Handshake("n7", "rmqc", "n0", bytes(32))
        await stranger.send_all(encode_handshake(hello) + encode_frame(FrameKind.RAFT, b""))
        assert await stranger.receive_some(100) == b""  # n7 is not a member
        await garbage.send_all(b"RMQP\x00\x01\x02n0\x04rmqc")  # version 1 (no authentication)
        assert await garbage.receive_some(100) == b""
        for stream in (stranger, garbage):
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_connections_beyond_the_bound_are_refused() -> None:
    config, _ = two_node_configs()
    config = config.with_changes(max_connections=2)
    async with trio.open_nursery() as nursery:
        await start_node(nursery, config, Recorder())
        kept = [await trio.open_tcp_stream("127.0.0.1", config.self_peer.port) for _ in range(2)]
        for stream in kept:
            await stream.send_all(encode(make_request(1005, opaque=1)))
            await rpc(stream, FrameDecoder(), 1)
        third = await trio.open_tcp_stream("127.0.0.1", config.self_peer.port)
        assert await third.receive_some(100) == b""
        for stream in (*kept, third):
            await stream.aclose()
        nursery.cancel_scope.cancel()


class BigAnswers(SlowEcho):
    """Answers at once through the server's no-task path, each with a 256 KiB body."""

    BODY_BYTES = 256 * 1024

    def __init__(self) -> None:
        super().__init__()
        self.served = 0

    def serve_now(self, request: RemotingCommand, channel: Channel, respond) -> bool:  # type: ignore[no-untyped-def]
        self.served += 1
        answer = make_response(request, 0, remark=str(request.opaque))
        answer.body = bytes([request.opaque % 251]) * self.BODY_BYTES
        respond(answer)
        return True


async def test_a_client_that_does_not_read_stops_being_read_and_loses_nothing() -> None:
    """Answers the socket cannot take queue in order up to a bound; past it the server reads no
    more requests from that client (TCP pushes back) until the client reads its answers."""
    config, _ = two_node_configs()
    handler = BigAnswers()
    count = 120  # 30 MiB of answers: far beyond the unsent bound plus loopback socket buffers
    async with trio.open_nursery() as nursery:
        server = Server(config, handler, PeerLinks(config, Recorder(), random.Random(1)))
        listeners = await trio.open_tcp_listeners(config.self_peer.port, host="127.0.0.1")
        nursery.start_soon(server.serve, listeners)
        stream = await trio.open_tcp_stream("127.0.0.1", config.self_peer.port)
        await stream.send_all(b"".join(encode(make_request(1005, opaque=i)) for i in range(count)))
        await wait_until(lambda: server.connections_waiting_for_reader == 1, what="the server to stop reading")
        assert handler.served < count  # the rest of the requests wait unread in the socket
        answers = await rpc(stream, FrameDecoder(config.max_frame_bytes), count)
        assert [answer.opaque for answer in answers] == list(range(count))
        assert all(answer.body == bytes([answer.opaque % 251]) * BigAnswers.BODY_BYTES for answer in answers)
        await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_a_peer_that_dials_us_is_reconnected_at_once_not_after_the_backoff(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A backoff far longer than the test: only n1 dialling n0 can bring n0's link to n1 up.
    monkeypatch.setattr(peers, "RECONNECT_MIN_S", 60.0)
    monkeypatch.setattr(peers, "RECONNECT_MAX_S", 60.0)
    config_a, config_b = two_node_configs()
    a, b = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links_a = await start_node(nursery, config_a, a)
        await wait_until(lambda: "n1" in a.unreachable, what="n0's first attempt refused")
        await start_node(nursery, config_b, b)  # n1 (re)starts and dials n0
        await wait_until(lambda: "n1" in links_a.connected, what="n0 connected to n1 again")
        nursery.cancel_scope.cancel()
