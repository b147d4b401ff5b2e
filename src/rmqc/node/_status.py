"""RMQC_NODE_STATUS (60001): a private rmqc request answering what one node knows about itself.

Java controllers do not have it (they answer 3, REQUEST_CODE_NOT_SUPPORTED), so `rmqc status` can
tell an rmqc node from a Java one. Any node answers, from local state only (it is a diagnostic: a
node that cannot reach the others must still say so). Request extFields: `groupNames=true` adds the
sorted names of every broker group (`rmqc admin sync-state-set --all` uses them). Answer: code 0,
body JSON:

    {"version": 1, "nodeId": "n0", "address": "127.0.0.1:9878", "role": "leader",
     "servingAsLeader": true, "term": 2, "commit": 120, "applied": 120, "lastIndex": 120,
     "leader": "n0", "leaderAddress": "127.0.0.1:9878", "voters": ["n0", "n1", "n2"], "learners": [],
     "pendingConfChange": null, "transferringTo": null,
     "peers": {"n1": {"match": 120, "next": 121, "lag": 0, "state": "replicate", "active": true}},
     "brokerGroups": 200, "liveBrokers": 600, "alarms": [], "groupNames": [...]}

`alarms` lists what an operator must act on, e.g. `{"alarm": "disk_full", "sinceMs": <wall ms>,
"forMs": 1200, "dataDir": "...", "detail": "...", "refusedWrites": 3}` (docs/operations.md).

`peers` (replication progress, lag = leader's last index - peer's match) is filled on the leader
only: a follower does not know how far the others are. Also on the leader only: `pendingConfChange`
(a membership change in the log, not yet applied: {"index", "type", "node"}) and `transferringTo`
(the target of a leadership transfer under way).
"""

from __future__ import annotations

from typing import Any

import orjson

from rmqc.errors import BoundExceeded
from rmqc.raft import decode_conf_change
from rmqc.raft._config import Role
from rmqc.raft._types import EntryType
from rmqc.remoting import RMQC_NODE_STATUS, RemotingCommand, ResponseCode, make_response

from ._clock import monotonic_ms

__all__ = ["RMQC_NODE_STATUS", "STATUS_VERSION", "handle_status_request", "node_status", "peer_progress",
           "pending_conf_change"]

STATUS_VERSION = 1
# Names in one answer: 100,000 names of up to ~100 bytes stay well below the 16 MiB frame bound.
MAX_GROUP_NAMES = 100_000


def node_status(node: Any, *, with_group_names: bool = False) -> dict[str, Any]:
    """What `node` (a ControllerNode: config, raw, leader_id, state, liveness...) reports about itself."""
    raw = node.raw
    status = raw.status() if raw is not None else None
    leader_id = node.leader_id
    leader = node.config.peer(leader_id) if leader_id else None
    document: dict[str, Any] = {
        "version": STATUS_VERSION,
        "nodeId": node.config.node_id,
        "address": node.config.listen_address,
        "role": status.role.value if status is not None else "starting",
        "servingAsLeader": bool(node.serving_as_leader),
        "term": status.term if status is not None else node.term,
        "commit": status.commit if status is not None else 0,
        "applied": node.applied_index,
        "lastIndex": status.last_index if status is not None else 0,
        "leader": leader_id,
        "leaderAddress": leader.address if leader is not None else None,
        "voters": list(status.voters) if status is not None else [],
        "learners": list(status.learners) if status is not None else [],
        "pendingConfChange": pending_conf_change(raw, node.applied_index),
        "transferringTo": status.lead_transferee if status is not None else None,
        "peers": peer_progress(status),
        "brokerGroups": len(node.state),
        "liveBrokers": len(node.liveness),
        "alarms": _alarms(node),
    }
    if with_group_names:
        document["groupNames"] = _group_names(node.state)
    return document


def pending_conf_change(raw: Any, applied: int) -> dict[str, Any] | None:
    """The membership change in the log and not applied yet, if any (leader only: the core
    tracks the last one it appended; on other nodes, and when none is pending, None)."""
    if raw is None or raw.raft.role is not Role.LEADER:
        return None
    index = raw.raft.pending_conf_index
    if index <= applied or index > raw.raft.log.last_index():
        return None
    (entry,) = raw.raft.log.entries(index, index + 1)
    if entry.type != EntryType.CONF_CHANGE:
        return None  # a new leader counts its whole inherited tail as pending: nothing to show
    change = decode_conf_change(entry.data)
    return {"index": index, "type": change.type.name.lower(), "node": change.node_id}


def _alarms(node: Any) -> list[dict[str, Any]]:
    alarm = getattr(node, "disk_full", None)
    return [] if alarm is None else [alarm.status(monotonic_ms())]


def handle_status_request(node: Any, request: RemotingCommand) -> RemotingCommand:
    """The answer to one RMQC_NODE_STATUS request (the node's request handler calls this)."""
    with_names = (request.ext("groupNames") or "").lower() == "true"
    body = orjson.dumps(node_status(node, with_group_names=with_names))
    return make_response(request, ResponseCode.SUCCESS, None, None, body)


def peer_progress(status: Any) -> dict[str, dict[str, Any]]:
    if status is None:
        return {}
    return {
        peer_id: {
            "match": progress.match,
            "next": progress.next,
            "lag": max(0, status.last_index - progress.match),
            "state": progress.state.name.lower(),
            "active": bool(progress.recent_active),
        }
        for peer_id, progress in status.progress.items()
        if peer_id != status.id
    }


def _group_names(state: Any) -> list[str]:
    names = sorted(group.broker_name for group in state.groups())
    if len(names) > MAX_GROUP_NAMES:
        raise BoundExceeded(f"{len(names)} broker groups: more than {MAX_GROUP_NAMES} names in one status answer")
    return names
