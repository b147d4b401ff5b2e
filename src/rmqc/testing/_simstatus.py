"""The few facts the simulator reads from a running core, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqc.raft import Role

if TYPE_CHECKING:
    from ._simreplica import ReplicaSimNode

_ROLE_NAMES = {
    Role.FOLLOWER: "follower",
    Role.PRE_CANDIDATE: "pre_candidate",
    Role.CANDIDATE: "candidate",
    Role.LEADER: "leader",
}


@dataclass(frozen=True, slots=True)
class NodeView:
    role: str
    term: int
    leader: str | None
    commit: int


def node_view(node: ReplicaSimNode) -> NodeView:
    assert node.raw is not None
    # The cheap reads, not RawNode.status(): that also builds the progress table, which would
    # dominate the simulator's run time when called after every step.
    raw = node.raw
    return NodeView(_ROLE_NAMES[raw.role], raw.term, raw.leader, raw.committed)
