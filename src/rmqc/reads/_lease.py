"""Leader lease arithmetic in ticks (thesis section 6.4.1), pure.

Followers refuse to vote for election_tick ticks after they last heard from the leader (CheckQuorum
stickiness). A heartbeat round acked by a quorum was received by each of those voters after it was
SENT, so no other leader can be elected until at least election_tick ticks after the send tick. The
lease therefore starts at the send tick (not when acks return) and lasts
election_tick - lease_drift_ticks, the margin covering clock-rate differences between nodes.
Without CheckQuorum there is no stickiness, hence no lease at all.
"""

from __future__ import annotations


def lease_duration_ticks(election_tick: int, lease_drift_ticks: int) -> int:
    return max(0, election_tick - lease_drift_ticks)


class Lease:
    def __init__(self, duration_ticks: int, check_quorum: bool) -> None:
        self.duration_ticks = duration_ticks
        self.check_quorum = check_quorum
        self.start_tick: int | None = None

    def confirmed(self, sent_tick: int) -> None:
        """A round sent at sent_tick was acked by a quorum."""
        if self.start_tick is None or sent_tick > self.start_tick:
            self.start_tick = sent_tick

    def expire(self) -> None:
        """Forget the lease (step-down, leadership transfer: thesis 6.4.1)."""
        self.start_tick = None

    def valid(self, now_tick: int) -> bool:
        if not self.check_quorum or self.start_tick is None:
            return False
        return now_tick - self.start_tick < self.duration_ticks

    def remaining_ticks(self, now_tick: int) -> int:
        if not self.valid(now_tick):
            return 0
        assert self.start_tick is not None
        return self.start_tick + self.duration_ticks - now_tick
