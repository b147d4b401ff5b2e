"""A small real controller stand-in for client tests: Trio TCP on 127.0.0.1 port 0, our codec.

Each FakeController answers 1005 with the leader it is told, 2007 to leader-only requests while it
is told it is not the leader, echoes other requests, and can drop a connection on a request, stay
silent, or hold answers until the test releases them (in any order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from rmqc.remoting import (
    LEADER_ONLY_REQUESTS,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode,
    make_response,
)

WAIT_S = 5  # bound on every wait for the fake's state; a test that hits it has failed


@dataclass
class _Peer:
    stream: trio.SocketStream
    send_lock: trio.Lock = field(default_factory=trio.Lock)

    async def send(self, cmd: RemotingCommand) -> None:
        async with self.send_lock:
            await self.stream.send_all(encode(cmd))


class FakeController:
    def __init__(self, name: str) -> None:
        self.name = name
        self.address = ""
        self.leader_address: str | None = None
        self.is_leader = False
        self.received: list[RemotingCommand] = []
        self.connections_accepted = 0
        self.drop_once: set[int] = set()  # close the connection when one of these arrives (once each)
        self.silent: set[int] = set()  # never answer these
        self.hold: set[int] = set()  # answers wait in `held` until release_held
        self.garbage_once: set[int] = set()  # answer these once with a malformed frame
        self.held: list[tuple[_Peer, RemotingCommand]] = []
        self._changed = trio.Event()

    async def start(self, nursery: trio.Nursery) -> FakeController:
        listeners = await nursery.start(trio.serve_tcp, self._serve_connection, 0)
        port = listeners[0].socket.getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    def become_leader(self) -> None:
        self.is_leader, self.leader_address = True, self.address

    def follow(self, leader: FakeController | None) -> None:
        self.is_leader = False
        self.leader_address = None if leader is None else leader.address

    def received_codes(self) -> list[int]:
        return [cmd.code for cmd in self.received]

    async def wait_until(self, predicate: object) -> None:
        with trio.fail_after(WAIT_S):
            while not predicate():  # type: ignore[operator]
                await self._changed.wait()

    async def release_held(self, *, reverse: bool) -> None:
        held, self.held = self.held, []
        for peer, response in reversed(held) if reverse else held:
            await peer.send(response)

    def _note_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        self.connections_accepted += 1
        self._note_change()
        peer = _Peer(stream)
        decoder = FrameDecoder()
        try:
            while data := await stream.receive_some(65536):
                for request in decoder.feed(data):
                    if not await self._handle(peer, request):
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await trio.aclose_forcefully(stream)

    async def _handle(self, peer: _Peer, request: RemotingCommand) -> bool:
        """Answer one request; False when the connection is to be dropped."""
        self.received.append(request)
        self._note_change()
        if request.code in self.drop_once:
            self.drop_once.discard(request.code)
            return False
        if request.is_oneway or request.code in self.silent:
            return True
        if request.code in self.garbage_once:
            self.garbage_once.discard(request.code)
            await peer.stream.send_all(b"\x00\x00\x00\x02zz")
            return True
        response = self._answer(request)
        if request.code in self.hold:
            self.held.append((peer, response))
            self._note_change()
        else:
            await peer.send(response)
        return True

    def _answer(self, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            ext = {"controllerLeaderAddress": self.leader_address, "isLeader": self.is_leader, "group": "g"}
            return make_response(request, ResponseCode.SUCCESS, ext=ext)
        if request.code in LEADER_ONLY_REQUESTS and not self.is_leader:
            return make_response(request, ResponseCode.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
        ext = {"servedBy": self.name, "echoOpaque": request.opaque, **(request.ext_fields or {})}
        return make_response(request, ResponseCode.SUCCESS, ext=ext, body=request.body)
