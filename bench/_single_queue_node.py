"""`rmqc serve` reshaped into the single-queue design of the Java controller, for the suite only:
`python -m bench._single_queue_node serve --id n0 ...` takes the same arguments as `rmqc serve`.

NodeConfig has no option for this (see docs/benchmarks.md), so this launcher adjusts the node
before it starts, without touching src/: Raft appends carry at most one entry and one message is in
flight per peer (raft Config max_entries_per_msg=1, max_inflight_msgs=1), and the driver proposes
the next request only once the previous one has been applied (no group commit, no pipelining).
It relies on two names inside rmqc.node._node (RaftConfig, ControllerNode._feed_proposals) and
refuses to start if they are gone, rather than measuring the normal design by mistake.
"""

from __future__ import annotations

import sys
from typing import Any

from rmqc.node import _node
from rmqc.raft import Config


class LauncherOutdated(RuntimeError):
    """rmqc.node._node no longer has the names this launcher adjusts."""


def single_queue_raft_config(**options: Any) -> Config:
    return Config(**{**options, "max_entries_per_msg": 1, "max_inflight_msgs": 1})


def install() -> None:
    if not hasattr(_node, "RaftConfig") or not hasattr(_node.ControllerNode, "_feed_proposals"):
        raise LauncherOutdated("rmqc.node._node changed: update bench/_single_queue_node.py")
    propose_all = _node.ControllerNode._feed_proposals

    def propose_one_at_a_time(self: Any, raw: Any) -> None:
        if not self.serving_as_leader:
            propose_all(self, raw)  # answers every waiting request "not leader", as before
            return
        if not self._proposals or self._waiting:
            return  # one request in the log at a time: the next waits until this one is applied
        first, rest = self._proposals[:1], self._proposals[1:]
        self._proposals = first
        propose_all(self, raw)
        self._proposals = rest + self._proposals

    _node.RaftConfig = single_queue_raft_config
    _node.ControllerNode._feed_proposals = propose_one_at_a_time


if __name__ == "__main__":
    install()
    from rmqc.cli.main import app

    sys.exit(app(args=sys.argv[1:]))
