"""`replace_member` (rmqc admin members replace) against a scripted leader: the four steps in order,
waiting while the leader refuses to promote a learner that has not caught up; a failing step stops
the replacement and says what state it left; a second run resumes where the first stopped."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio

from rmqc.client import MemberChangeFailed, replace_member
from rmqc.client._errors import RequestTimeout
from rmqc.remoting import RemotingCommand, make_request, make_response


class ScriptedLeader:
    """The membership as a leader keeps it; `refuse` maps a step to remarks it answers code 1 with
    (one per call, then it accepts); `silent` steps raise the client's timeout."""

    def __init__(self, members: dict[str, tuple[str, str]], refuse: dict[str, list[str]] | None = None,
                 silent: frozenset[str] = frozenset()) -> None:
        self.members = dict(members)  # id -> (address, role)
        self.refuse = refuse or {}
        self.silent = silent
        self.calls: list[str] = []

    def _answer(self, step: str, change: dict[str, Any] | None) -> RemotingCommand:
        self.calls.append(step)
        if step in self.silent:
            raise RequestTimeout(f"{step}: no answer within 3000 ms")
        request = make_request(60004, opaque=1)
        remarks = self.refuse.get(step) or []
        if remarks:
            return make_response(request, 1, remarks.pop(0))
        body = change if change is not None else [
            {"id": node, "address": address, "role": role, "isLeader": node == "n0", "match": 9, "lag": 0}
            for node, (address, role) in sorted(self.members.items())]
        return make_response(request, 0, None, None, orjson.dumps(body))

    def _changed(self, kind: str, node: str) -> dict[str, Any]:
        return {"change": kind, "id": node, "index": len(self.calls)}

    async def list_members(self) -> RemotingCommand:
        return self._answer("list", None)

    async def add_member(self, node: str, address: str) -> RemotingCommand:
        answer = self._answer("add", self._changed("add_learner", node))
        if answer.code == 0:
            self.members[node] = (address, "learner")
        return answer

    async def promote_member(self, node: str) -> RemotingCommand:
        answer = self._answer("promote", self._changed("promote", node))
        if answer.code == 0:
            self.members[node] = (self.members[node][0], "voter")
        return answer

    async def remove_member(self, node: str) -> RemotingCommand:
        answer = self._answer("remove", self._changed("remove", node))
        if answer.code == 0:
            del self.members[node]
        return answer


THREE = {"n0": ("h:1", "voter"), "n1": ("h:2", "voter"), "n2": ("h:3", "voter")}


async def test_replace_adds_waits_for_catch_up_promotes_then_removes() -> None:
    leader = ScriptedLeader(THREE, refuse={"promote": ["n3 has not caught up: match 4, commit 90",
                                                       "n3 has not caught up: match 80, commit 95"]})
    said: list[str] = []
    steps = await replace_member(leader, "n2", "n3", "h:4", progress=said.append)
    assert [step["change"] for step in steps] == ["add_learner", "promote", "remove"]
    assert leader.calls == ["list", "add", "promote", "promote", "promote", "remove"]
    assert leader.members == {"n0": ("h:1", "voter"), "n1": ("h:2", "voter"), "n3": ("h:4", "voter")}
    assert "not promoted yet: n3 has not caught up: match 80, commit 95" in said


@pytest.mark.parametrize(("refuse", "silent", "step", "left", "members"), [
    ({"add": ["address h:2 is used by n1"]}, frozenset(), "add", "Nothing changed", THREE),
    ({}, frozenset({"remove"}), "remove", "run `rmqc admin members remove n2`",
     {**THREE, "n3": ("h:4", "voter")}),
])
async def test_a_failing_step_stops_and_says_what_it_left(refuse: dict[str, list[str]], silent: frozenset[str],
                                                          step: str, left: str, members: dict) -> None:
    leader = ScriptedLeader(THREE, refuse=refuse, silent=silent)
    with pytest.raises(MemberChangeFailed) as failed:
        await replace_member(leader, "n2", "n3", "h:4")
    assert failed.value.step == step and left in failed.value.left
    assert leader.members == members


async def test_a_learner_that_never_catches_up_is_left_a_learner_and_said_so() -> None:
    leader = ScriptedLeader(THREE, refuse={"promote": ["n3 has not caught up"] * 1000})
    with trio.fail_after(5), pytest.raises(MemberChangeFailed, match=r"not promoted within 0.3 s") as failed:
        await replace_member(leader, "n2", "n3", "h:4", catch_up_timeout_s=0.3)
    assert "n3 stays a learner" in failed.value.left and leader.members["n3"] == ("h:4", "learner")
    assert "n2" in leader.members  # the old voter is still there: the group never shrank


async def test_a_second_run_resumes_and_refuses_what_cannot_be_done() -> None:
    leader = ScriptedLeader({**THREE, "n3": ("h:4", "learner")})
    await replace_member(leader, "n2", "n3", "h:4")
    assert leader.calls == ["list", "promote", "remove"]  # not added twice
    for old, new, address, reason in [("n9", "n4", "h:5", "unknown id 'n9'"), ("n1", "n3", "h:9", "already a member"),
                                      ("n1", "n1", "h:2", "cannot replace itself")]:
        with pytest.raises(MemberChangeFailed, match=reason) as failed:
            await replace_member(leader, old, new, address)
        assert failed.value.left == "Nothing changed"
