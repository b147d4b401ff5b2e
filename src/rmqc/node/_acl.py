"""The ACL gate of the remoting port: reads `acl_file` (re-read when it changes), checks each
request with rmqc.acl before anything else sees it, answers refusals, counts and logs them.

A refused two-way request is answered NO_PERMISSION (16) with the reason as remark; a refused
one-way request (an unsigned 904 heartbeat) has nobody to answer, so it is dropped and counted.
Forwarded requests were checked by the node that received them (peers are authenticated), so
the gate sits on the remoting port only.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable

from rmqc.acl import AclRules, Allowed, check_request, parse_plain_acl
from rmqc.errors import ConfigError
from rmqc.remoting import RemotingCommand, ResponseCode, make_response

from ._config import NodeConfig
from ._ratelog import RateLimitedLog

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
        self._stamp: tuple[int, int, int] | None = None
        self._next_check_s = 0.0
        self._rules: AclRules = self._read()  # ConfigError: the node does not start
        self.refused: Counter[str] = Counter()  # by Refusal name
        self.dropped_oneway = 0
        self._log = RateLimitedLog(log, LOG_EVERY_S, clock)

    def check(self, request: RemotingCommand, host: str) -> RemotingCommand | Allowed | None:
        """Allowed, or the NO_PERMISSION answer to send, or None (a refused one-way: drop it)."""
        self._reload_if_changed()
        decision = check_request(self._rules, request, host)
        if isinstance(decision, Allowed):
            return decision
        self.refused[decision.name] += 1
        self._log.warning("refused request %d from %s: %s", request.code, host, decision.value)
        if request.is_oneway:
            self.dropped_oneway += 1
            return None
        return make_response(request, ResponseCode.NO_PERMISSION, f"NO_PERMISSION: {decision.value}")

    def _reload_if_changed(self) -> None:
        now = self._clock()
        if now < self._next_check_s:
            return
        self._next_check_s = now + RELOAD_CHECK_S
        try:
            if _stamp(os.stat(self._path)) == self._stamp:
                return
            self._rules = self._read()
            log.info("acl_file %s reloaded: %d accounts", self._path, len(self._rules.accounts))
        except (OSError, ConfigError) as error:
            log.error("acl_file %s: %s; keeping the rules read before", self._path, error)

    def _read(self) -> AclRules:
        try:
            with open(self._path, "rb") as handle:
                status = os.fstat(handle.fileno())
                data = handle.read(MAX_ACL_FILE_BYTES + 1)
        except OSError as error:
            raise ConfigError(f"acl_file: cannot read {self._path}: {error}") from error
        if len(data) > MAX_ACL_FILE_BYTES:
            raise ConfigError(f"acl_file: {self._path} is over {MAX_ACL_FILE_BYTES} bytes")
        try:
            rules = parse_plain_acl(data.decode())
        except UnicodeDecodeError as error:
            raise ConfigError(f"acl_file: {self._path} is not UTF-8: {error}") from error
        except ConfigError as error:
            raise ConfigError(f"acl_file: {self._path}: {error}") from error
        self._stamp = _stamp(status)
        return rules


def _stamp(status: os.stat_result) -> tuple[int, int, int]:
    return status.st_mtime_ns, status.st_size, status.st_ino


def host_of(remote: str) -> str:
    """The address part of `host:port` (IPv6 hosts contain colons themselves)."""
    return remote.rsplit(":", 1)[0]

