"""RMQC_NODE_STATUS (60001), `rmqc status`'s request: the replica answers it from its published
status (rmqc.replica._status documents the answer); these are the names the shell's users import."""

from __future__ import annotations

from typing import Any

from rmqc.remoting import RMQC_NODE_STATUS, RemotingCommand
from rmqc.replica import STATUS_VERSION, status_answer, status_document

__all__ = ["RMQC_NODE_STATUS", "STATUS_VERSION", "handle_status_request", "node_status"]


def node_status(node: Any, *, with_group_names: bool = False) -> dict[str, Any]:
    """What a running ControllerNode reports about itself."""
    return status_document(node.replica, with_group_names=with_group_names)


def handle_status_request(node: Any, request: RemotingCommand) -> RemotingCommand:
    return status_answer(node.replica, request)
