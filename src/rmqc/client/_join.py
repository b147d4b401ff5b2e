"""Joining a running group (`rmqc serve --join ADDRESS`), sans-IO: whom a joining node asks to add
it as a learner (RMQC_MEMBERS_ADD) next, what each answer means, and how long it waits before
asking again; the account it signs with. rmqc.node._join sends the requests and sleeps.

Any member may be asked: a follower answers CONTROLLER_NOT_LEADER naming the leader and we ask
that one next, else the join addresses in turn. A node that cannot be reached, an answer that did
not come in time, a group without a leader (2007 naming none), SYSTEM_BUSY and the refusals whose
remark says to retry (another membership change pending, a leader just elected:
rmqc.replica._membership) are asked again with backoff. Any other answer is a refusal (an id
already a member at another address, an address another member uses, no permission): retrying
cannot change it, so the node stops at once with the remark. "Already a member at this address"
is answered 0 by the leader (a restarted joiner that was added before), so the node goes on.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import orjson

from rmqc.acl import Credentials
from rmqc.errors import RmqcError
from rmqc.remoting import RemotingCommand, ResponseCode

__all__ = ["JoinAttempts", "JoinFailed", "join_credentials"]

JOIN_BACKOFF_MIN_S = 0.1
JOIN_BACKOFF_MAX_S = 2.0
_RETRIED_CODES = frozenset({ResponseCode.CONTROLLER_NOT_LEADER, ResponseCode.SYSTEM_BUSY})
# The leader's refusals that go away by themselves say so (rmqc.replica._membership).
RETRY_MARKER = "retry"
# The ACL account a joining node signs its request with: the same variables as the CLI's
# (rmqc.cli._credentials; a test keeps the two equal). A secured group needs an admin account.
ACCESS_KEY_ENV = "RMQC_ACCESS_KEY"
SECRET_KEY_ENV = "RMQC_SECRET_KEY"


class JoinFailed(RmqcError):
    """The group refused to add this node, or did not answer in time."""


def join_credentials(environ: Mapping[str, str]) -> Credentials | None:
    access_key, secret_key = environ.get(ACCESS_KEY_ENV), environ.get(SECRET_KEY_ENV)
    return Credentials(access_key, secret_key) if access_key and secret_key else None


class JoinAttempts:
    """One node's attempts to be added: `request` goes to `next_address()`; each answer (`answered`)
    or failure to get one (`unanswered`) says whether to go on, after `backoff_s()`."""

    def __init__(self, node_id: str, address: str, join_addresses: tuple[str, ...], rng: random.Random) -> None:
        self.request = {"id": node_id, "address": address}
        self._join_addresses = join_addresses
        self._rng = rng
        self._turn = 0
        self._leader: str | None = None  # the leader a member named: asked next
        self._delay_s = JOIN_BACKOFF_MIN_S
        self.last = "no member answered"  # the last failure, for the operator

    def next_address(self) -> str:
        """The leader a member named, else the join addresses in turn."""
        if self._leader is not None:
            leader, self._leader = self._leader, None
            return leader
        address = self._join_addresses[self._turn % len(self._join_addresses)]
        self._turn += 1
        return address

    def unanswered(self, address: str, error: Exception) -> None:
        self.last = f"{address}: {error}"

    def answered(self, address: str, answer: RemotingCommand) -> dict[str, Any] | JoinFailed | None:
        """The leader's change body once added; JoinFailed for a refusal retrying cannot change;
        None to ask again (the leader a follower named, if it named one)."""
        if answer.code == ResponseCode.SUCCESS:
            return dict(orjson.loads(answer.body or b"{}"))
        if answer.code not in _RETRIED_CODES and RETRY_MARKER not in (answer.remark or ""):
            return JoinFailed(f"{address} refused to add {self.request['id']} at {self.request['address']}: "
                              f"{answer.remark}")
        self.last = f"{address}: {answer.remark}"
        self._leader = answer.ext("leaderAddress") or None
        return None

    def backoff_s(self) -> float:
        """How long to wait before asking again: doubling up to JOIN_BACKOFF_MAX_S, jittered."""
        delay_s = self._delay_s * (0.5 + self._rng.random())
        self._delay_s = min(JOIN_BACKOFF_MAX_S, self._delay_s * 2)
        return delay_s

    def gave_up(self, timeout_s: float) -> JoinFailed:
        return JoinFailed(f"not added to the group within {timeout_s:g} s (asked {', '.join(self._join_addresses)}); "
                          f"last: {self.last}")
