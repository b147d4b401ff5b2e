"""Joining a running group (`rmqc serve --join ADDRESS`): the node serves its port, then asks a
member to add it as a learner at its listen address (RMQC_MEMBERS_ADD), and the leader's appends
or snapshot bring it the log and the membership. Whom to ask, what an answer means and the backoff
are rmqc.client's JoinAttempts; this asks, within JOIN_TIMEOUT_S.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Mapping
from typing import Any

import trio

from rmqc.client import ClientError, ControllerClient, JoinAttempts, JoinFailed, join_credentials
from rmqc.config import NodeConfig
from rmqc.remoting import RMQC_MEMBERS_ADD

from ._tls import peer_client_context

log = logging.getLogger("rmqc.node.join")

# Long enough for an election or two and a pending change to be applied (each a second or so);
# a group that takes longer to answer is down, and the operator is told so.
JOIN_TIMEOUT_S = 60.0
# The leader answers once the change is committed and applied (within its request_timeout_ms);
# this much more covers the connection and the way back.
ANSWER_MARGIN_MS = 2000


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
    attempts = JoinAttempts(config.node_id, config.listen_address, config.join_addresses, rng)
    with trio.move_on_after(timeout_s):
        while True:
            address = attempts.next_address()
            try:
                answer = await client.request(RMQC_MEMBERS_ADD, attempts.request, address=address)
            except ClientError as error:
                attempts.unanswered(address, error)
            else:
                assert answer is not None  # two-way
                if (outcome := attempts.answered(address, answer)) is not None:
                    return outcome
            log.info("%s: not added yet (%s); asking again", config.node_id, attempts.last)
            await trio.sleep(attempts.backoff_s())
    return attempts.gave_up(timeout_s)
