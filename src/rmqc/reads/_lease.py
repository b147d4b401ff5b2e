"""Leader lease arithmetic in ticks (thesis section 6.4.1), pure.

The lease. A leader serves lease reads for `lease_ticks - lease_drift_ticks` of its ticks from the
send tick of a heartbeat round that a quorum acked (not from when the acks returned): each voter
that acked received that round after it was sent. `lease_ticks` (at most election_tick) is the
longest a lease may last in nominal ticks; the drift margin covers clock-rate differences between
the leader and the nodes that wait its lease out. Without CheckQuorum there is no lease at all.

Who waits it out. A lease is only safe if no other node can lead and answer anything while it runs:
- a normal election: voters refuse to vote for election_tick ticks after they last heard from a
  leader (CheckQuorum stickiness), and lease_ticks <= election_tick;
- a transfer the leader started: the leader drops its lease before it sends TimeoutNow;
- any other campaign that voters grant although they heard a leader lately (the takeover a node
  starts when its leader's port refuses it, which a REJECT firewall rule also does): the new
  leader does not commit until the lease has run out, `takeover_wait_ticks` below.

The takeover wait. Every vote grant carries the voter's lease age: the ticks since it last heard
from any leader (`encode_lease_age`). The old leader's lease quorum and the new leader's vote
quorum share a voter F, and F heard the old leader's last acked round no earlier than it was sent.
So, counting in nominal ticks, the old lease ends at most `lease_ticks - (real time since F heard
it)` after F's vote, and the new leader waits that out from when it won (later than the vote). Tick
counts are coarse: F's age a proves only a - 1 ticks of real time (F's first tick may come right
after the contact), and a wait of w ticks proves only w - 1 (the same for the new leader's first
tick). Hence `takeover_wait_ticks = remaining + 1` with `remaining = lease_ticks - max(0, a - 1)`,
none when remaining <= 0; the new leader takes the largest over its voters (it cannot know which
of them is F). A voter that restarted reports age 0: it may have acked a round before crashing.
"""

from __future__ import annotations

# The lease age travels as a u32 in a vote grant's context; older ages all mean "long ago".
LEASE_AGE_BYTES = 4
LEASE_AGE_MAX = (1 << (8 * LEASE_AGE_BYTES)) - 1


def lease_duration_ticks(lease_ticks: int, lease_drift_ticks: int) -> int:
    return max(0, lease_ticks - lease_drift_ticks)


def encode_lease_age(age_ticks: int) -> bytes:
    return min(age_ticks, LEASE_AGE_MAX).to_bytes(LEASE_AGE_BYTES, "big")


def decode_lease_age(context: bytes) -> int:
    """A grant without a well-formed age (an older peer) is taken as age 0: the longest wait."""
    if len(context) != LEASE_AGE_BYTES:
        return 0
    return int.from_bytes(context, "big")


def takeover_wait_ticks(lease_ticks: int, age_ticks: int) -> int:
    """Ticks a leader elected with a grant of this lease age waits before committing (see above)."""
    remaining = lease_ticks - max(0, age_ticks - 1)
    return remaining + 1 if remaining > 0 else 0


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
