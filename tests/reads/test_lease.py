from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rmqc.reads import Lease, lease_duration_ticks


def test_lease_runs_from_the_send_tick_minus_drift() -> None:
    lease = Lease(lease_duration_ticks(10, 2), check_quorum=True)
    assert not lease.valid(0)
    lease.confirmed(sent_tick=100)
    assert lease.valid(100) and lease.valid(107)
    assert not lease.valid(108)
    assert lease.remaining_ticks(105) == 3


def test_no_lease_without_check_quorum() -> None:
    lease = Lease(8, check_quorum=False)
    lease.confirmed(1)
    assert not lease.valid(1)


def test_older_confirmation_never_moves_the_lease_back_and_expire_forgets() -> None:
    lease = Lease(8, True)
    lease.confirmed(50)
    lease.confirmed(40)
    assert lease.start_tick == 50
    lease.expire()
    assert not lease.valid(50)


@given(
    election_tick=st.integers(2, 100),
    drift=st.integers(0, 99),
    sent=st.integers(0, 10_000),
    later=st.integers(0, 300),
)
def test_lease_never_outlives_follower_stickiness(
    election_tick: int, drift: int, sent: int, later: int
) -> None:
    """Voters that acked a round sent at `sent` refuse votes until sent + election_tick at least;
    the lease must end strictly before then, by at least the drift margin."""
    drift = min(drift, election_tick - 1)
    lease = Lease(lease_duration_ticks(election_tick, drift), True)
    lease.confirmed(sent)
    if lease.valid(sent + later):
        assert later < election_tick - drift
