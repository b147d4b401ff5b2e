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
    # Read straight from the core: RawNode.status() also builds the progress table, which would
    # dominate the simulator's run time when called after every step.
    core = node.raw.raft
    return NodeView(_ROLE_NAMES[core.role], core.term, core.lead, core.log.committed)
