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

from rmqc.acl import AclRules, Allowed, RequestGate, parse_plain_acl
from rmqc.config import NodeConfig
from rmqc.errors import ConfigError
from rmqc.remoting import RemotingCommand

from ._ratelog import RateLimitedLog
from ._watched_file import Stamp, current_stamp, read_watched_text, stamp_of

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
        self._path = config.acl_file
        self._clock = clock
        self._stamp: Stamp | None = None
        self._next_check_s = 0.0
        self._rules: AclRules = self._read()  # ConfigError: the node does not start
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
        self._reload_if_changed()
        decision = self._gate.check(self._rules, request, host)
        if isinstance(decision, Allowed):
            return decision
        self._log.warning("refused request %d from %s: %s", request.code, host, decision.refusal.value)
        return decision.answer

    def _reload_if_changed(self) -> None:
        now = self._clock()
        if now < self._next_check_s:
            return
        self._next_check_s = now + RELOAD_CHECK_S
        try:
            if current_stamp(self._path) == self._stamp:
                return
            self._rules = self._read()
            log.info("acl_file %s reloaded: %d accounts", self._path, len(self._rules.accounts))
        except (OSError, ConfigError) as error:
            log.error("acl_file %s: %s; keeping the rules read before", self._path, error)

    def _read(self) -> AclRules:
        text, status = read_watched_text("acl_file", self._path, MAX_ACL_FILE_BYTES)
        try:
            rules = parse_plain_acl(text)
        except ConfigError as error:
            raise ConfigError(f"acl_file: {self._path}: {error}") from error
        self._stamp = stamp_of(status)
        return rules


def host_of(remote: str) -> str:
    """The address part of `host:port` (IPv6 hosts contain colons themselves)."""
    return remote.rsplit(":", 1)[0]

