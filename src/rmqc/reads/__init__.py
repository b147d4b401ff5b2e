"""rmqc.reads: pure read-path bookkeeping (ReadIndex rounds, lease arithmetic, pending reads)."""

from ._errors import ReadQueueFull as ReadQueueFull
from ._lease import (
    Lease as Lease,
    decode_lease_age as decode_lease_age,
    encode_lease_age as encode_lease_age,
    lease_duration_ticks as lease_duration_ticks,
    takeover_wait_ticks as takeover_wait_ticks,
)
from ._pending import PendingReads as PendingReads
from ._readindex import (
    ConfirmedRound as ConfirmedRound,
    ReadIndexTracker as ReadIndexTracker,
    ReadRequest as ReadRequest,
    decode_round_id as decode_round_id,
    encode_round_id as encode_round_id,
)

__all__ = [
    "ConfirmedRound",
    "Lease",
    "PendingReads",
    "ReadIndexTracker",
    "ReadQueueFull",
    "ReadRequest",
    "decode_lease_age",
    "decode_round_id",
    "encode_lease_age",
    "encode_round_id",
    "lease_duration_ticks",
    "takeover_wait_ticks",
]
