"""`rmqc serve --join`: the joining node's request to be added (rmqc.node._join) against scripted
members over real TCP on 127.0.0.1: it follows a follower's 2007 to the leader, retries what goes
away by itself (SYSTEM_BUSY, no answer), stops at once on a refusal, and gives up within its bound
with the last failure."""

from __future__ import annotations

import random
from collections.abc import Sequence

import orjson
import pytest
import trio
from node_helpers import free_ports

from rmqc.config import NodeConfig, parse_peers
from rmqc.node._join import JoinFailed, join_credentials, join_group
from rmqc.remoting import RMQC_MEMBERS_ADD, FrameDecoder, RemotingCommand, ResponseCode, encode, make_response


class ScriptedMember:
    """Answers each RMQC_MEMBERS_ADD with the next of `answers` (code, remark, extFields)."""

    def __init__(self, answers: Sequence[tuple[int, str | None, dict[str, str] | None]]) -> None:
        self.answers = list(answers)
        self.requests: list[RemotingCommand] = []
        self.address = ""

    async def start(self, nursery: trio.Nursery) -> ScriptedMember:
        listeners = await nursery.start(trio.serve_tcp, self._serve, 0)
        self.address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        return self

    async def _serve(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                for request in decoder.feed(data):
                    assert request.code == RMQC_MEMBERS_ADD
                    self.requests.append(request)
                    code, remark, ext = self.answers.pop(0)
                    change = {"change": "add_learner", "id": request.ext("id"), "index": 7}
                    body = orjson.dumps(change) if code == 0 else None
                    await stream.send_all(encode(make_response(request, code, remark, ext, body)))


def joiner(*members: ScriptedMember) -> NodeConfig:
    (port,) = free_ports(1)
    return NodeConfig(node_id="n3", peers=parse_peers(f"n3-127.0.0.1:{port}"),
                      join_address=";".join(member.address for member in members))


async def test_a_follower_names_the_leader_and_the_leader_adds_us() -> None:
    async with trio.open_nursery() as nursery:
        leader = await ScriptedMember([(0, None, None)]).start(nursery)
        follower = await ScriptedMember([(ResponseCode.CONTROLLER_NOT_LEADER, "not the leader",
                                          {"leaderId": "n0", "leaderAddress": leader.address})]).start(nursery)
        config = joiner(follower)
        change = await join_group(config, random.Random(1), environ={})
        assert change == {"change": "add_learner", "id": "n3", "index": 7}
        (asked,) = leader.requests
        assert (asked.ext("id"), asked.ext("address")) == ("n3", config.listen_address)
        nursery.cancel_scope.cancel()


async def test_busy_is_asked_again_and_a_refusal_stops_at_once() -> None:
    async with trio.open_nursery() as nursery:
        busy = await ScriptedMember([(ResponseCode.SYSTEM_BUSY, "[OVERLOAD] busy", None),
                                     (ResponseCode.SYSTEM_ERROR, "a membership change (promote n2) is pending; wait "
                                                                 "for its answer, then retry", None),
                                     (0, None, None)]).start(nursery)
        assert (await join_group(joiner(busy), random.Random(1), environ={}))["id"] == "n3"
        assert len(busy.requests) == 3

        refusing = await ScriptedMember([(ResponseCode.SYSTEM_ERROR, "address 127.0.0.1:1 is used by n1", None)]
                                        ).start(nursery)
        refused = "refused to add n3 at .*: address 127.0.0.1:1 is used"
        with trio.fail_after(2), pytest.raises(JoinFailed, match=refused):
            await join_group(joiner(refusing), random.Random(1), environ={})
        assert len(refusing.requests) == 1
        nursery.cancel_scope.cancel()


async def test_no_member_answering_gives_up_within_the_bound_naming_the_last_failure() -> None:
    (port,) = free_ports(1)
    config = NodeConfig(node_id="n3", peers=parse_peers("n3-127.0.0.1:9"), join_address=f"127.0.0.1:{port}")
    gave_up = f"not added to the group within 0.5 s .*last: 127.0.0.1:{port}"
    with trio.fail_after(5), pytest.raises(JoinFailed, match=gave_up):
        await join_group(config, random.Random(1), timeout_s=0.5, environ={})


def test_the_join_signs_with_the_clis_account_variables() -> None:
    from rmqc.cli._credentials import ACCESS_KEY_ENV, SECRET_KEY_ENV

    assert join_credentials({}) is None
    credentials = join_credentials({ACCESS_KEY_ENV: "admin", SECRET_KEY_ENV: "s" * 16})
    assert credentials is not None and credentials.access_key == "admin"
