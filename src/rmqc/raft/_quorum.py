"""Pure majority arithmetic over a voter set (learners are never passed in)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import Enum


class VoteResult(Enum):
    PENDING = "pending"
    WON = "won"
    LOST = "lost"


def quorum_size(voters: Collection[str]) -> int:
    return len(voters) // 2 + 1


def committed_index(voters: Collection[str], match: Mapping[str, int]) -> int:
    """The largest index stored on a majority of voters (0 for an empty voter set)."""
    if not voters:
        return 0
    acked = sorted([match.get(v, 0) for v in voters], reverse=True)  # a list: no generator resumed per voter
    return acked[quorum_size(voters) - 1]


def vote_result(voters: Collection[str], votes: Mapping[str, bool]) -> VoteResult:
    granted = sum(1 for v in voters if votes.get(v) is True)
    rejected = sum(1 for v in voters if votes.get(v) is False)
    need = quorum_size(voters)
    if granted >= need:
        return VoteResult.WON
    if len(voters) - rejected < need:
        return VoteResult.LOST
    return VoteResult.PENDING


def has_quorum(voters: Collection[str], acked: Collection[str]) -> bool:
    return sum(1 for v in voters if v in acked) >= quorum_size(voters)
