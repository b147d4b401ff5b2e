"""Leader-side ReadIndex bookkeeping (thesis section 6.4), pure.

A read arrives with the leader's commit index at that moment. It waits in `queued` until the next
heartbeat round is sent; that round carries every read queued meanwhile (one round per batch, not
one per read). A round is confirmed when a quorum of voters acks THAT round id; a confirmed round
also confirms every older round (their reads were queued before it was sent), so all of them are
released in order. Round ids are chosen by the leader and increase, so a delayed ack of an old
round can never release a read queued after it (pitfall 27). Reads that arrive before the leader
has committed an entry of its own term wait in `held` and get their index only once it commits
(pitfall 26).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from ._errors import ReadQueueFull

# Each pending read holds its context bytes; 65,536 of them is far above what one node serves
# within a heartbeat round trip, so hitting it means confirmation is stuck, not busy.
MAX_PENDING_READS = 65_536
# Rounds are sent every heartbeat; without acks they pile up. Older unacked rounds are folded into
# the next one (a later ack confirms earlier reads too), so nothing is lost by this bound.
MAX_OUTSTANDING_ROUNDS = 64


@dataclass(frozen=True, slots=True)
class ReadRequest:
    context: bytes
    requester: str  # the node that asked (the leader itself or a follower that forwarded)
    index: int  # the leader's commit index when the read arrived (or when its term's entry committed)


@dataclass(slots=True)
class _Round:
    round_id: int
    sent_tick: int
    reads: list[ReadRequest]
    acks: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class ConfirmedRound:
    """A quorum acked a round: leadership held at `sent_tick`; `reads` may now be answered."""

    round_id: int
    sent_tick: int
    reads: list[ReadRequest]


def encode_round_id(round_id: int) -> bytes:
    return round_id.to_bytes(8, "big")


def decode_round_id(context: bytes) -> int | None:
    return int.from_bytes(context, "big") if len(context) == 8 else None


class ReadIndexTracker:
    def __init__(
        self,
        max_pending_reads: int = MAX_PENDING_READS,
        max_outstanding_rounds: int = MAX_OUTSTANDING_ROUNDS,
    ) -> None:
        self._max_pending_reads = max_pending_reads
        self._max_rounds = max_outstanding_rounds
        self._held: list[tuple[bytes, str]] = []
        self._queued: list[ReadRequest] = []
        self._rounds: deque[_Round] = deque()
        self._next_round_id = 1
        self._pending = 0

    @property
    def pending_reads(self) -> int:
        return self._pending

    def has_queued(self) -> bool:
        return bool(self._queued)

    def reads_in_flight(self) -> bool:
        return any(r.reads for r in self._rounds)

    def add(self, context: bytes, requester: str, commit_index: int, own_term_committed: bool) -> None:
        if self._pending >= self._max_pending_reads:
            raise ReadQueueFull(f"{self._pending} reads await confirmation (max {self._max_pending_reads})")
        self._pending += 1
        if own_term_committed:
            self._queued.append(ReadRequest(context, requester, commit_index))
        else:
            self._held.append((context, requester))

    def release_held(self, commit_index: int) -> None:
        """The leader committed an entry of its term: held reads get that commit index."""
        self._queued.extend(ReadRequest(ctx, who, commit_index) for ctx, who in self._held)
        self._held.clear()

    def begin_round(self, sent_tick: int) -> int:
        """A heartbeat round is being sent now; it carries every queued read. Returns its id."""
        round_id = self._next_round_id
        self._next_round_id += 1
        self._rounds.append(_Round(round_id, sent_tick, self._queued))
        self._queued = []
        if len(self._rounds) > self._max_rounds:
            oldest = self._rounds.popleft()
            self._rounds[0].reads[:0] = oldest.reads
        return round_id

    def ack(
        self, round_id: int, voter: str, is_quorum: Callable[[Collection[str]], bool]
    ) -> ConfirmedRound | None:
        """Record voter's ack of round_id; on quorum, release it and every older round."""
        target = next((r for r in self._rounds if r.round_id == round_id), None)
        if target is None:
            return None  # already confirmed, folded or from before this leadership
        target.acks.add(voter)
        if not is_quorum(target.acks):
            return None
        reads: list[ReadRequest] = []
        while self._rounds and self._rounds[0].round_id <= round_id:
            reads.extend(self._rounds.popleft().reads)
        self._pending -= len(reads)
        return ConfirmedRound(round_id, target.sent_tick, reads)

    def reset(self) -> int:
        """Leadership ended: forget everything. Returns how many reads were dropped."""
        dropped = self._pending
        self._held.clear()
        self._queued.clear()
        self._rounds.clear()
        self._pending = 0
        return dropped
