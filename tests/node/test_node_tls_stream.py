"""The node's own TLS stream (node/_tls.py TlsStream) over real TCP on 127.0.0.1: what the fast
paths rely on. Requests far larger than a TLS record are decrypted whole; answers the client does
not read yet are queued as ciphertext and arrive complete and in order; a peer's close_notify ends
the stream; and a TlsStream speaks to trio's own SSLStream (the clients') both ways."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import trio
from node_helpers import AsyncHandler, wait_until
from test_node_tls import tls_config
from test_node_transport import Recorder

from rmqc.client import client_tls_context
from rmqc.node._peers import PeerLinks
from rmqc.node._server import Channel, Respond, Server
from rmqc.node._tls import TlsStream, accept_tls, dial_tls, server_context
from rmqc.remoting import FrameDecoder, RemotingCommand, encode, make_request, make_response
from rmqc.testing.certs import Certs, make_certs

ANSWER_BYTES = 64 * 1024


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certs]:
    yield make_certs(tmp_path_factory.mktemp("certs"))


class BigEcho(AsyncHandler):
    """Answers every request at once (so in request order, each before the next request is read)
    with a 64 KiB body made of its opaque, and the request body's size."""

    def serve_now(self, request: RemotingCommand, channel: Channel, respond: Respond) -> None:
        body = request.opaque.to_bytes(4, "big") * (ANSWER_BYTES // 4)
        respond(make_response(request, 0, remark=str(len(request.body or b"")), body=body))


async def read_answers(stream: trio.abc.Stream, count: int) -> list[RemotingCommand]:
    decoder, answers = FrameDecoder(), []
    with trio.fail_after(20):
        while len(answers) < count:
            data = await stream.receive_some(65536)
            assert data, "the node closed the connection"
            answers += decoder.feed(data)
    return answers


async def test_large_requests_and_unread_answers_cross_tls_whole_and_in_order(certs: Certs) -> None:
    config = tls_config(certs, "enforcing")
    async with trio.open_nursery() as nursery:
        server = Server(config, BigEcho(), PeerLinks(config, Recorder(), random.Random(1)))
        nursery.start_soon(server.serve, await trio.open_tcp_listeners(config.self_peer.port, host="127.0.0.1"))
        tcp = await trio.open_tcp_stream("127.0.0.1", config.self_peer.port)
        client = trio.SSLStream(tcp, client_tls_context(str(certs.ca)), server_hostname=None)
        big = random.Random(3).randbytes(3 * 1024 * 1024)  # about 200 TLS records
        await client.send_all(encode(make_request(1005, 1, body=big)))
        (first,) = await read_answers(client, 1)
        assert (first.opaque, first.remark) == (1, str(len(big)))
        # 200 answers of 64 KiB (12.5 MiB) while the client reads nothing: the socket takes a part,
        # the rest waits in the connection's queue as ciphertext (and the reader stops at its bound)
        requests = b"".join(encode(make_request(1005, opaque)) for opaque in range(2, 202))
        await client.send_all(requests)
        await wait_until(lambda: server.connections_waiting_for_reader == 1, what="the node to stop reading")
        answers = await read_answers(client, 200)
        assert [a.opaque for a in answers] == list(range(2, 202))
        assert all(a.body == a.opaque.to_bytes(4, "big") * (ANSWER_BYTES // 4) for a in answers)
        await client.aclose()
        nursery.cancel_scope.cancel()


async def take_session_tickets(stream: trio.abc.Stream) -> None:
    """Read what the server sent after the handshake (TLS 1.3 session tickets): a socket closed
    with unread bytes is reset, and the other side would see a reset, not the end."""
    with trio.move_on_after(0.2):
        await stream.receive_some(1000)


async def test_tls_stream_both_sides_and_close_notify(certs: Certs) -> None:
    config = tls_config(certs, "enforcing", auth_client=True)
    server_ctx = server_context(config)
    assert server_ctx is not None
    dial_ctx = client_tls_context(str(certs.ca), str(certs.client_cert), str(certs.client_key))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    payload = bytes(range(256)) * 400
    ends: list[tuple[bytes, bool]] = []  # per connection: what arrived, whether close_notify ended it

    async def serve_one() -> None:
        raw = await listeners[0].accept()
        tls = await accept_tls(raw, await raw.receive_some(4), server_ctx)
        received = []
        while data := await tls.receive_some(1000):
            assert len(data) <= 1000  # never more than asked for
            received.append(data)
        ends.append((b"".join(received), tls.closed_by_peer))
        await tls.aclose()

    async with trio.open_nursery() as nursery:
        # our own stream dialling: part through send_all, part encrypted and written to the socket
        nursery.start_soon(serve_one)
        ours = await dial_tls(await trio.open_tcp_stream("127.0.0.1", port), dial_ctx)
        assert isinstance(ours, TlsStream) and ours.fd == ours.transport.socket.fileno()
        await ours.send_all(payload[:5000])
        await ours.transport.send_all(ours.encrypt(payload[5000:]))
        await take_session_tickets(ours)
        await ours.aclose()  # no close_notify: the end of the socket ends the stream
        await wait_until(lambda: len(ends) == 1, what="the server to see the stream end")
        # trio's SSLStream (rmqc's client) dialling: its aclose sends close_notify
        nursery.start_soon(serve_one)
        theirs = trio.SSLStream(await trio.open_tcp_stream("127.0.0.1", port), dial_ctx, server_hostname=None)
        await theirs.send_all(payload)
        await take_session_tickets(theirs)
        await theirs.aclose()
        await wait_until(lambda: len(ends) == 2, what="the server to see the stream end")
    for listener in listeners:
        await listener.aclose()
    assert ends == [(payload, False), (payload, True)]
