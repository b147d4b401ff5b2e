from __future__ import annotations

from hypothesis import given, strategies as st

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


def test_takeover_wait_covers_the_lease_and_both_tick_phases() -> None:
    from rmqc.reads import takeover_wait_ticks

    # age 0 or 1: the voter heard the leader within the last tick: the whole lease, plus the new
    # leader's first tick (which may come at once)
    assert takeover_wait_ticks(3, 0) == 4 and takeover_wait_ticks(3, 1) == 4
    assert takeover_wait_ticks(3, 2) == 3
    assert takeover_wait_ticks(3, 3) == 2
    assert takeover_wait_ticks(3, 4) == 0  # 3 ticks of real time proven: that lease is over
    assert takeover_wait_ticks(10, 10) == 2  # a normal election when lease_ticks = election_tick


@given(st.integers(1, 20), st.integers(0, 40), st.integers(0, 40))
def test_takeover_wait_proves_the_lease_over_in_real_time(lease_ticks: int, age: int, extra: int) -> None:
    # The voter's age proves max(0, age - 1) ticks, the wait w proves max(0, w - 1): together at
    # least lease_ticks, or the wait is 0 because the age alone proves it.
    from rmqc.reads import takeover_wait_ticks

    wait = takeover_wait_ticks(lease_ticks, age)
    proven = max(0, age - 1) + max(0, wait - 1)
    assert proven >= lease_ticks or (wait == 0 and max(0, age - 1) >= lease_ticks)
    assert takeover_wait_ticks(lease_ticks, age + extra) <= wait  # older ages never wait longer
