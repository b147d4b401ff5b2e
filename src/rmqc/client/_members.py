"""Replacing a controller node in one command (`rmqc admin members replace OLD NEW ADDRESS`): add
NEW as a learner, wait until it has caught up, promote it, remove OLD. Every step is a single
membership change the leader checks (one at a time, never the last voter, never a lagging
learner), so the group keeps its quorum throughout; the voters grow by one before they shrink.

A step that fails stops the replacement where it is, and the error says which step failed, why,
and what state the group was left in, with the command that goes on from there. Running the same
replace again resumes: an id already a member at the same address is not added twice, a voter is
not promoted twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trio

from rmqc.client._errors import ClientError
from rmqc.errors import RmqcError
from rmqc.remoting import RemotingCommand

__all__ = ["CATCH_UP_TIMEOUT_S", "MemberChangeFailed", "members_of", "replace_member"]

# A learner catches up from a snapshot plus the log since; a state of 10,000 broker groups is a
# few megabytes, sent in well under a second on a LAN. A minute means it cannot keep up.
CATCH_UP_TIMEOUT_S = 60.0
PROMOTE_RETRY_MIN_S = 0.05
PROMOTE_RETRY_MAX_S = 1.0


class MemberChangeFailed(RmqcError):
    """A step of a membership command failed: `step`, `reason` (the leader's remark or the client's
    error) and `left` (the state of the group and what to do next)."""

    def __init__(self, step: str, reason: str, left: str) -> None:
        super().__init__(f"{step}: {reason}. {left}")
        self.step, self.reason, self.left = step, reason, left


def members_of(answer: RemotingCommand) -> list[dict[str, Any]]:
    """The rows of a RMQC_MEMBERS_LIST answer."""
    rows = orjson.loads(answer.body or b"[]")
    if not isinstance(rows, list):
        raise RmqcError(f"the members list is not a JSON array: {rows!r:.200}")
    return rows


async def replace_member(client: Any, old: str, new: str, address: str, *,
                         catch_up_timeout_s: float = CATCH_UP_TIMEOUT_S,
                         progress: Callable[[str], None] = lambda _text: None) -> list[dict[str, Any]]:
    """Replace voter `old` by `new` at `address` through `client` (a ControllerClient); the change
    bodies of the steps taken. Raises MemberChangeFailed naming the step and the state left."""
    if old == new:
        raise MemberChangeFailed("check", f"{old} cannot replace itself", "Nothing changed")
    rows = {row["id"]: row for row in members_of(await _answered(client.list_members(), "check", "Nothing changed"))}
    if old not in rows:
        raise MemberChangeFailed("check", f"unknown id {old!r}; the members are {', '.join(sorted(rows))}",
                                 "Nothing changed")
    current = rows.get(new)
    if current is not None and current["address"] != address:
        raise MemberChangeFailed("check", f"{new} is already a member at {current['address']}, not {address}",
                                 "Nothing changed")
    steps = []
    if current is None:
        progress(f"adding {new} at {address} as a learner")
        steps.append(_body(await _answered(client.add_member(new, address), "add", "Nothing changed")))
    if current is None or current["role"] != "voter":
        progress(f"waiting until {new} has caught up, then promoting it")
        steps.append(await _promote_when_caught_up(client, new, catch_up_timeout_s, progress))
    progress(f"removing {old}")
    left = (f"{new} is a voter and {old} is still one too: run `rmqc admin members remove {old}` "
            "(or this replace again)")
    steps.append(_body(await _answered(client.remove_member(old), "remove", left)))
    return steps


async def _promote_when_caught_up(client: Any, new: str, timeout_s: float,
                                  progress: Callable[[str], None]) -> dict[str, Any]:
    """Promote `new`, asking again while the leader refuses (it refuses a learner that has not
    caught up, or while another change is pending), for up to `timeout_s`."""
    left = (f"{new} stays a learner (it takes no part in votes or commits): run `rmqc admin members promote {new}` "
            f"once it has caught up (`rmqc admin members list` shows its lag), or remove it with "
            f"`rmqc admin members remove {new}`")
    delay_s = PROMOTE_RETRY_MIN_S
    last = ""
    with trio.move_on_after(timeout_s):
        while True:
            answer = await _answered(client.promote_member(new), "promote", left, refusal_is_error=False)
            if answer.code == 0:
                return _body(answer)
            if answer.remark != last:
                last = answer.remark or f"code {answer.code}"
                progress(f"not promoted yet: {last}")
            await trio.sleep(delay_s)
            delay_s = min(PROMOTE_RETRY_MAX_S, delay_s * 2)
    raise MemberChangeFailed("promote", f"{new} was not promoted within {timeout_s:g} s; the leader's last "
                             f"answer: {last}", left)


async def _answered(request: Awaitable[RemotingCommand], step: str, left: str, *,
                    refusal_is_error: bool = True) -> RemotingCommand:
    try:
        answer = await request
    except ClientError as error:
        raise MemberChangeFailed(step, f"no answer ({error})", f"{left} (if the change was made meanwhile, "
                                 "`rmqc admin members list` shows it)") from error
    if refusal_is_error and answer.code != 0:
        raise MemberChangeFailed(step, f"refused: {answer.remark}", left)
    return answer


def _body(answer: RemotingCommand) -> dict[str, Any]:
    return dict(orjson.loads(answer.body or b"{}"))
