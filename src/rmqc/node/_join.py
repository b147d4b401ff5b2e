"""Joining a running group (`rmqc serve --join ADDRESS`): the node serves its port, then asks a
member to add it as a learner at its listen address (RMQC_MEMBERS_ADD), and the leader's appends
or snapshot bring it the log and the membership.

Any member may be asked: a follower answers CONTROLLER_NOT_LEADER naming the leader and we ask
that one next. A node that cannot be reached, an answer that did not come in time, a group
without a leader (2007 naming none), SYSTEM_BUSY and the refusals whose remark says to retry
(another membership change pending, a leader just elected: rmqc.replica._membership) are retried
with backoff, all within JOIN_TIMEOUT_S. Any other answer is a refusal (an id already a member at
another address, an address another member uses, no permission): retrying cannot change it, so
the node stops at once with the remark. "Already a member at this address" is
answered 0 by the leader (a restarted joiner that was added before), so the node goes on.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Mapping
from typing import Any

import orjson
import trio

from rmqc.acl import Credentials
from rmqc.client import ClientError, ControllerClient
from rmqc.config import NodeConfig
from rmqc.errors import RmqcError
from rmqc.remoting import RMQC_MEMBERS_ADD, ResponseCode

from ._tls import peer_client_context

log = logging.getLogger("rmqc.node.join")

# Long enough for an election or two and a pending change to be applied (each a second or so);
# a group that takes longer to answer is down, and the operator is told so.
JOIN_TIMEOUT_S = 60.0
JOIN_BACKOFF_MIN_S = 0.1
JOIN_BACKOFF_MAX_S = 2.0
# The leader answers once the change is committed and applied (within its request_timeout_ms);
# this much more covers the connection and the way back.
ANSWER_MARGIN_MS = 2000
# The ACL account a joining node signs its request with: the same variables as the CLI's
# (rmqc.cli._credentials; a test keeps the two equal). A secured group needs an admin account.
ACCESS_KEY_ENV = "RMQC_ACCESS_KEY"
SECRET_KEY_ENV = "RMQC_SECRET_KEY"
_RETRIED_CODES = frozenset({ResponseCode.CONTROLLER_NOT_LEADER, ResponseCode.SYSTEM_BUSY})
# The leader's refusals that go away by themselves say so (rmqc.replica._membership).
RETRY_MARKER = "retry"


class JoinFailed(RmqcError):
    """The group refused to add this node, or did not answer within JOIN_TIMEOUT_S."""


def join_credentials(environ: Mapping[str, str]) -> Credentials | None:
    access_key, secret_key = environ.get(ACCESS_KEY_ENV), environ.get(SECRET_KEY_ENV)
    return Credentials(access_key, secret_key) if access_key and secret_key else None


async def join_group(config: NodeConfig, rng: random.Random, *, timeout_s: float = JOIN_TIMEOUT_S,
                     environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Ask the group at `config.join_addresses` to add this node as a learner; the change body of
    the leader's answer. Raises JoinFailed with the refusal, or with the last failure on timeout."""
    credentials = join_credentials(os.environ if environ is None else environ)
    async with ControllerClient(list(config.join_addresses), timeout_ms=config.request_timeout_ms + ANSWER_MARGIN_MS,
                                max_retries=0, credentials=credentials,
                                ssl_context=peer_client_context(config)) as client:
        outcome = await _ask_until_added(client, config, rng, timeout_s)
    if isinstance(outcome, JoinFailed):
        raise outcome  # out here: raised inside the client's nursery it would come wrapped in a group
    return outcome


async def _ask_until_added(client: ControllerClient, config: NodeConfig, rng: random.Random,
                           timeout_s: float) -> dict[str, Any] | JoinFailed:
    targets = _Targets(config.join_addresses)
    request = {"id": config.node_id, "address": config.listen_address}
    last = "no member answered"
    delay_s = JOIN_BACKOFF_MIN_S
    with trio.move_on_after(timeout_s):
        while True:
            address = targets.next()
            try:
                answer = await client.request(RMQC_MEMBERS_ADD, request, address=address)
            except ClientError as error:
                last = f"{address}: {error}"
            else:
                assert answer is not None  # two-way
                if answer.code == ResponseCode.SUCCESS:
                    return dict(orjson.loads(answer.body or b"{}"))
                if answer.code not in _RETRIED_CODES and RETRY_MARKER not in (answer.remark or ""):
                    return JoinFailed(f"{address} refused to add {config.node_id} at {config.listen_address}: "
                                      f"{answer.remark}")
                last = f"{address}: {answer.remark}"
                targets.redirect(answer.ext("leaderAddress"))
            log.info("%s: not added yet (%s); asking again", config.node_id, last)
            await trio.sleep(delay_s * (0.5 + rng.random()))
            delay_s = min(JOIN_BACKOFF_MAX_S, delay_s * 2)
    return JoinFailed(f"not added to the group within {timeout_s:g} s (asked {', '.join(config.join_addresses)}); "
                      f"last: {last}")


class _Targets:
    """Whom to ask next: the leader a member named, else the join addresses in turn."""

    def __init__(self, addresses: tuple[str, ...]) -> None:
        self._addresses = addresses
        self._turn = 0
        self._leader: str | None = None

    def redirect(self, leader: str | None) -> None:
        self._leader = leader or None

    def next(self) -> str:
        if self._leader is not None:
            leader, self._leader = self._leader, None
            return leader
        address = self._addresses[self._turn % len(self._addresses)]
        self._turn += 1
        return address
