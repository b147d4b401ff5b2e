"""rmqc.client's JoinAttempts, the joining node's decisions without sockets: whom it asks next (the
leader a follower named, else the join addresses in turn), which answers it asks again after and
which stop it, and its backoff."""

from __future__ import annotations

import random

import orjson

from rmqc.client import JoinAttempts, JoinFailed
from rmqc.client._join import JOIN_BACKOFF_MAX_S, JOIN_BACKOFF_MIN_S
from rmqc.remoting import RMQC_MEMBERS_ADD, RemotingCommand, ResponseCode, make_request, make_response


def attempts(*addresses: str) -> JoinAttempts:
    return JoinAttempts("n3", "127.0.0.1:9003", addresses, random.Random(1))


def answer(code: int, remark: str | None = None, ext: dict[str, str] | None = None,
           body: bytes | None = None) -> RemotingCommand:
    return make_response(make_request(RMQC_MEMBERS_ADD, 0, {"id": "n3"}), code, remark, ext, body)


def test_the_join_addresses_are_asked_in_turn_and_a_named_leader_next() -> None:
    join = attempts("a:1", "b:1")
    assert [join.next_address(), join.next_address(), join.next_address()] == ["a:1", "b:1", "a:1"]
    not_leader = answer(ResponseCode.CONTROLLER_NOT_LEADER, "not the leader", {"leaderAddress": "l:1"})
    assert join.answered("a:1", not_leader) is None
    assert join.next_address() == "l:1"  # once: then the turn goes on where it was
    assert join.next_address() == "b:1"
    assert join.answered("b:1", answer(ResponseCode.CONTROLLER_NOT_LEADER, "no leader")) is None
    assert join.next_address() == "a:1"  # a group without a leader names none


def test_success_gives_the_change_and_the_request_names_the_node() -> None:
    join = attempts("a:1")
    assert join.request == {"id": "n3", "address": "127.0.0.1:9003"}
    assert join.answered("a:1", answer(0, body=orjson.dumps({"change": "add_learner", "index": 7}))) == {
        "change": "add_learner", "index": 7}


def test_busy_and_refusals_that_say_retry_are_asked_again_naming_the_last_failure() -> None:
    join = attempts("a:1")
    assert join.last == "no member answered"
    assert join.answered("a:1", answer(ResponseCode.SYSTEM_BUSY, "[OVERLOAD] busy")) is None
    assert join.last == "a:1: [OVERLOAD] busy"
    pending = "a membership change (promote n2) is pending; wait for its answer, then retry"
    assert join.answered("a:1", answer(ResponseCode.SYSTEM_ERROR, pending)) is None
    join.unanswered("a:1", TimeoutError("no answer within 3000 ms"))
    assert join.last == "a:1: no answer within 3000 ms"
    gave_up = join.gave_up(60)
    assert isinstance(gave_up, JoinFailed)
    assert str(gave_up) == "not added to the group within 60 s (asked a:1); last: a:1: no answer within 3000 ms"


def test_any_other_refusal_stops_at_once() -> None:
    refused = attempts("a:1").answered("a:1", answer(ResponseCode.SYSTEM_ERROR, "address 127.0.0.1:1 is used by n1"))
    assert isinstance(refused, JoinFailed)
    assert str(refused) == "a:1 refused to add n3 at 127.0.0.1:9003: address 127.0.0.1:1 is used by n1"
    no_permission = attempts("a:1").answered("a:1", answer(ResponseCode.NO_PERMISSION, "no permission"))
    assert isinstance(no_permission, JoinFailed)


def test_the_backoff_doubles_up_to_its_bound_with_jitter() -> None:
    join = attempts("a:1")
    delays = [join.backoff_s() for _ in range(8)]
    bases = [min(JOIN_BACKOFF_MAX_S, JOIN_BACKOFF_MIN_S * 2 ** step) for step in range(8)]
    assert all(0.5 * base <= delay < 1.5 * base for delay, base in zip(delays, bases, strict=True))
    assert delays[-1] >= 0.5 * JOIN_BACKOFF_MAX_S
