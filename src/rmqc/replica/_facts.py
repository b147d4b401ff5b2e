"""RaftFacts: what the replica's parts read of the Raft side (the leader, the term, the applied
index and membership, whether this node serves as leader).

Only the driver (rmqc.replica._driver) writes them, as it learns them from the core's Readies and
from the entries it applies; every other part reads them. The store starts from what the storage
held at start (its constructor), and no other module assigns a field afterwards:
tests/replica/test_replica_parts.py checks it over all of rmqc's source. Plain slots, not
properties: requests read them on every decision."""

from __future__ import annotations

from rmqc.raft import ConfState

__all__ = ["FACT_FIELDS", "RaftFacts", "sole_voter"]


# written out, not read from RaftFacts.__slots__: a class compiled by mypyc has none
FACT_FIELDS = frozenset(("applied_index", "conf_state", "leader_id", "serving_as_leader", "snapshot_index",
                         "sole_voter", "term"))


class RaftFacts:
    __slots__ = tuple(sorted(FACT_FIELDS))

    def __init__(self, node_id: str, term: int, applied_index: int, snapshot_index: int,
                 conf_state: ConfState) -> None:
        self.leader_id: str | None = None
        self.term = term
        self.applied_index = applied_index
        self.snapshot_index = snapshot_index
        self.serving_as_leader = False  # leader AND an entry of its own term is applied
        self.conf_state = conf_state  # the applied membership, with its address book
        # the only voter of the group: campaigns without a timeout
        self.sole_voter = sole_voter(conf_state, node_id)

    def address_of(self, node_id: str) -> str | None:
        """A member's address from the applied address book (None: not a member, or not known)."""
        return next((address for member, address in self.conf_state.addresses if member == node_id), None)


def sole_voter(conf_state: ConfState, node_id: str) -> bool:
    """`node_id` is the only voter of `conf_state`."""
    return set(conf_state.voters) == {node_id}

