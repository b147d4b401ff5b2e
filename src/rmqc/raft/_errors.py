"""Named failures of the Raft core (subclasses of the shared hierarchy in rmqc.errors)."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, ProposalDropped, RaftError


class NoLeader(ProposalDropped):
    """No leader is known at the moment; the caller should retry after a timeout."""

    def __init__(self, node_id: str) -> None:
        super().__init__(f"proposal dropped on {node_id}: no leader known")


class NotLeader(ProposalDropped):
    """This node is not the leader. The core never forwards proposals; the node layer does."""

    def __init__(self, node_id: str, leader: str | None) -> None:
        super().__init__(f"proposal dropped on {node_id}: not the leader (leader is {leader})")
        self.leader = leader


class TransferInProgress(ProposalDropped):
    """Proposals are frozen while leadership moves to another node (thesis section 3.10)."""

    def __init__(self, target: str) -> None:
        super().__init__(f"proposal dropped: leadership transfer to {target} in progress")
        self.target = target


class StaleTermProposal(ProposalDropped):
    """The proposal was decided in an earlier term than the leader's current one (pitfall 31):
    a decision taken from local time or liveness must not outlive the leadership that took it."""

    def __init__(self, decided_term: int, current_term: int) -> None:
        super().__init__(
            f"proposal dropped: decided in term {decided_term}, leader is now in term {current_term}"
        )
        self.decided_term = decided_term
        self.current_term = current_term


class UncommittedSizeExceeded(ProposalDropped, BoundExceeded):
    """The leader's uncommitted tail is at its byte bound: backpressure for the proposers."""

    def __init__(self, size_bytes: int, adding_bytes: int, max_bytes: int) -> None:
        super().__init__(
            f"proposal dropped: uncommitted tail {size_bytes} B + {adding_bytes} B "
            f"exceeds max_uncommitted_size {max_bytes} B"
        )
        self.size_bytes = size_bytes
        self.adding_bytes = adding_bytes
        self.max_bytes = max_bytes


class ConfChangeRefused(ProposalDropped):
    """A membership change cannot be proposed now (one pending, no own-term commit, invalid)."""


class ReadIndexDropped(RaftError):
    """A ReadIndex request could not be taken (no leader, not a member); retry after a timeout."""


class InflightsFull(BoundExceeded):
    """An append was sent although the per-peer in-flight window was full (a core bug)."""


class RaftInvariantError(RaftError):
    """A Raft safety invariant would be broken (e.g. a conflict at or below the commit index)."""


class ReadyMisuse(RaftError):
    """ready()/advance() were called out of order (one Ready may be outstanding at a time)."""
