"""RMQC_NODE_STATUS (60001): a private rmqc request answering what one node knows about itself.

Java controllers do not have it (they answer 3, REQUEST_CODE_NOT_SUPPORTED), so `rmqc status` can
tell an rmqc node from a Java one. Any node answers, from local state only (it is a diagnostic: a
node that cannot reach the others must still say so). Request extFields: `groupNames=true` adds the
sorted names of every broker group (`rmqc admin sync-state-set --all` uses them). Answer: code 0,
body JSON:

    {"version": 1, "nodeId": "n0", "address": "127.0.0.1:9878", "role": "leader",
     "servingAsLeader": true, "term": 2, "commit": 120, "applied": 120, "lastIndex": 120,
     "leader": "n0", "leaderAddress": "127.0.0.1:9878", "voters": ["n0", "n1", "n2"], "learners": [],
     "members": {"n0": "127.0.0.1:9878", "n1": "127.0.0.1:9868", "n2": "127.0.0.1:9858"},
     "pendingConfChange": null, "transferringTo": null,
     "peers": {"n1": {"match": 120, "next": 121, "lag": 0, "state": "replicate", "active": true}},
     "brokerGroups": 200, "liveBrokers": 600, "alarms": [], "leaderCommit": 120,
     "namesrv": {"topics": 800, "registeredBrokers": 600, "topicsWithoutBroker": 0},
     "health": [{"check": "loop", "ok": true, "detail": "..."}, ...], "groupNames": [...]}

`health`: the node's liveness checks (from its shell: `loop`, `disk`) and readiness checks
(`leader`, `lag`, `disk_full`, `repairing`, `voter`; rmqc.replica._health), each with `ok` and a
`detail` in words; `leaderCommit`: the highest commit index a leader told this node.

`alarms` lists what an operator must act on, e.g. `{"alarm": "disk_full", "sinceMs": <wall ms>,
"forMs": 1200, "dataDir": "...", "detail": "...", "refusedWrites": 3}` (docs/operations.md).

`peers` (replication progress, lag = leader's last index - peer's match) is filled on the leader
only: a follower does not know how far the others are. Also on the leader only: `pendingConfChange`
(a membership change in the log, not yet applied: {"index", "type", "node"}) and `transferringTo`
(the target of a leadership transfer under way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from rmqc.errors import BoundExceeded
from rmqc.raft import EntryType, RawNode, Role, decode_conf_change
from rmqc.remoting import RMQC_NODE_STATUS, RemotingCommand, ResponseCode, make_response

from ._alarms import DiskFullAlarm, repairing_status
from ._facts import RaftFacts
from ._health import HealthCheck, readiness_checks
from ._io import PeerLag, ReplicaConfig, ReplicaStatus
from ._liveness import Liveness

if TYPE_CHECKING:
    from rmqc.fsm import ControllerState, NamesrvState

__all__ = ["RMQC_NODE_STATUS", "STATUS_VERSION", "StatusSource", "build_status", "pending_conf_change",
           "status_answer", "status_document"]

STATUS_VERSION = 1
# Names in one answer: 100,000 names of up to ~100 bytes stay well below the 16 MiB frame bound.
MAX_GROUP_NAMES = 100_000


class StatusSource(Protocol):
    """What a status answer reads of one replica (a Replica is one)."""

    @property
    def config(self) -> ReplicaConfig: ...
    @property
    def facts(self) -> RaftFacts: ...
    @property
    def raw(self) -> RawNode: ...
    @property
    def state(self) -> ControllerState: ...
    @property
    def liveness(self) -> Liveness: ...
    @property
    def disk_full(self) -> DiskFullAlarm | None: ...
    @property
    def repair_reason(self) -> str | None: ...
    @property
    def leader_commit_seen(self) -> int: ...
    @property
    def shell_health(self) -> Callable[[], Sequence[HealthCheck]]: ...
    def now_ms(self) -> int: ...
    def counters(self) -> dict[str, float]: ...


def build_status(replica: StatusSource) -> ReplicaStatus:
    """What `replica` knows about itself now (a frozen snapshot: nothing outside reads the core)."""
    raw, facts = replica.raw, replica.facts
    status = raw.status()
    return ReplicaStatus(
        node_id=replica.config.node_id,
        role=status.role.value,
        leader=facts.leader_id,
        term=status.term,
        commit=status.commit,
        applied=facts.applied_index,
        last_index=status.last_index,
        serving=facts.serving_as_leader,
        voters=tuple(status.voters),
        learners=tuple(status.learners),
        transferring_to=status.lead_transferee,
        pending_conf_change=pending_conf_change(raw, facts.applied_index),
        peers={
            peer_id: PeerLag(progress.match, progress.next, max(0, status.last_index - progress.match),
                             progress.state.name.lower(), bool(progress.recent_active))
            for peer_id, progress in status.progress.items()
            if peer_id != status.id
        },
        broker_groups=len(replica.state),
        live_brokers=len(replica.liveness.table),
        alarms=_alarms(replica, raw),
        counters=replica.counters(),
        members=dict(facts.conf_state.addresses),
        leader_commit=replica.leader_commit_seen,
    )


def _alarms(replica: StatusSource, raw: RawNode) -> tuple[dict[str, Any], ...]:
    alarms = [alarm.status(replica.now_ms()) for alarm in (replica.disk_full,) if alarm is not None]
    if replica.repair_reason is not None:
        repair = raw.repair()
        target = repair.target[0] if repair is not None and repair.target is not None else None
        alarms.append(repairing_status(replica.repair_reason, target))
    return tuple(alarms)


def status_document(replica: StatusSource, *, with_group_names: bool = False) -> dict[str, Any]:
    """The body of the RMQC_NODE_STATUS answer."""
    status = build_status(replica)
    document: dict[str, Any] = {
        "version": STATUS_VERSION,
        "nodeId": status.node_id,
        "address": replica.config.listen_address,
        "role": status.role,
        "servingAsLeader": status.serving,
        "term": status.term,
        "commit": status.commit,
        "applied": status.applied,
        "lastIndex": status.last_index,
        "leader": status.leader,
        "leaderAddress": replica.facts.address_of(status.leader) if status.leader else None,
        "voters": list(status.voters),
        "learners": list(status.learners),
        "members": status.members,
        "pendingConfChange": status.pending_conf_change,
        "transferringTo": status.transferring_to,
        "peers": {peer: {"match": lag.match, "next": lag.next, "lag": lag.lag, "state": lag.state,
                         "active": lag.active} for peer, lag in status.peers.items()},
        "brokerGroups": status.broker_groups,
        "liveBrokers": status.live_brokers,
        "alarms": list(status.alarms),
        "leaderCommit": max(status.commit, status.leader_commit),
        "health": [check.document() for check in (*replica.shell_health(), *readiness_checks(status))],
    }
    document["namesrv"] = namesrv_summary(replica.state.namesrv)
    if with_group_names:
        document["groupNames"] = _group_names(replica.state)
    return document


def namesrv_summary(ns: NamesrvState) -> dict[str, int]:
    """The NameServer role at a glance: topics, registered brokers, and route health: topics
    whose route names no registered broker (a client finds the topic and has nowhere to send)."""
    registered = {registration.broker_name for registration in ns.registrations.values()}
    return {"topics": len(ns.topics), "registeredBrokers": len(ns.registrations),
            "topicsWithoutBroker": sum(1 for names in ns.topics.values() if registered.isdisjoint(names))}


def pending_conf_change(raw: RawNode | None, applied: int) -> dict[str, Any] | None:
    """The membership change in the log and not applied yet, if any (leader only: the core
    tracks the last one it appended; on other nodes, and when none is pending, None)."""
    if raw is None or raw.role is not Role.LEADER:
        return None
    index = raw.pending_conf_index
    if index <= applied or index > raw.last_index():
        return None
    (entry,) = raw.entries(index, index + 1)
    if entry.type != EntryType.CONF_CHANGE:
        return None  # a new leader counts its whole inherited tail as pending: nothing to show
    change = decode_conf_change(entry.data)
    return {"index": index, "type": change.type.name.lower(), "node": change.node_id}


def status_answer(replica: StatusSource, request: RemotingCommand) -> RemotingCommand:
    """The answer to one RMQC_NODE_STATUS request."""
    with_names = (request.ext("groupNames") or "").lower() == "true"
    body = orjson.dumps(status_document(replica, with_group_names=with_names))
    return make_response(request, ResponseCode.SUCCESS, None, None, body)


def _group_names(state: Any) -> list[str]:
    names = sorted(group.broker_name for group in state.groups())
    if len(names) > MAX_GROUP_NAMES:
        raise BoundExceeded(f"{len(names)} broker groups: more than {MAX_GROUP_NAMES} names in one status answer")
    return names
