"""The ACL gate of the remoting port: reads `acl_file` (re-read when it changes), checks each
request with rmqc.acl's RequestGate before anything else sees it, and logs the refusals.

The decision is rmqc.acl's (RequestGate, pure, which the simulator runs too): a refused two-way
request is answered NO_PERMISSION (16) with the reason as remark; a refused one-way request (an
unsigned 904 heartbeat) has nobody to answer, so it is dropped; both are counted.
Forwarded requests were checked by the node that received them (peers are authenticated), so
the gate sits on the remoting port only.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from rmqc.acl import Allowed, RequestGate, parse_plain_acl
from rmqc.config import NodeConfig
from rmqc.remoting import RemotingCommand

from ._ratelog import RateLimitedLog
from ._watched_file import WatchedFile

log = logging.getLogger("rmqc.node.acl")

# How often the file's modification time is looked at: often enough that an operator's edit takes
# effect within a second, rarely enough to cost nothing on the request path.
RELOAD_CHECK_S = 1.0
MAX_ACL_FILE_BYTES = 4 * 1024 * 1024
# Refusals are logged at most this often (each line counts the ones it stands for): a flood of
# bad requests must not become a flood of log lines.
LOG_EVERY_S = 1.0


class AclGate:
    def __init__(self, config: NodeConfig, clock: Callable[[], float] = time.monotonic) -> None:
        # ConfigError: the node does not start
        self._rules = WatchedFile("acl_file", config.acl_file, MAX_ACL_FILE_BYTES, parse_plain_acl,
                                  lambda rules: f"{len(rules.accounts)} accounts", look_every_s=RELOAD_CHECK_S,
                                  clock=clock)
        self._gate = RequestGate()
        self._log = RateLimitedLog(log, LOG_EVERY_S, clock)

    @property
    def refused(self) -> Counter[str]:
        """Refused requests by Refusal name (one-way ones included)."""
        return self._gate.refused

    @property
    def dropped_oneway(self) -> int:
        return self._gate.dropped_oneway

    def check(self, request: RemotingCommand, host: str) -> RemotingCommand | Allowed | None:
        """Allowed, or the NO_PERMISSION answer to send, or None (a refused one-way: drop it)."""
        decision = self._gate.check(self._rules.content(), request, host)
        if isinstance(decision, Allowed):
            return decision
        self._log.warning("refused request %d from %s: %s", request.code, host, decision.refusal.value)
        return decision.answer


def host_of(remote: str) -> str:
    """The address part of `host:port` (IPv6 hosts contain colons themselves)."""
    return remote.rsplit(":", 1)[0]

